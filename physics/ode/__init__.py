"""ODE models: the abstract `OdeModel` family and its classic members.

Its names are loaded from their modules when first used, so that importing one
model family (or the base class of this one) does not import every model."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_names

# name -> (module, name in the module)
_NAMES: dict[str, tuple[str, str]] = {
    "DampedPendulum": ("._classic", "DampedPendulum"),
    "FitzHughNagumo": ("._classic", "FitzHughNagumo"),
    "Brusselator": ("._classic", "Brusselator"),
    "Lorenz": ("._classic", "Lorenz"),
    "LotkaVolterra": ("._classic", "LotkaVolterra"),
    "Robertson": ("._classic", "Robertson"),
    "Sir": ("._classic", "Sir"),
    "VanDerPol": ("._classic", "VanDerPol"),
    "OdeModel": (".base", "OdeModel"),
    "HybridLotkaVolterra": ("._neural", "HybridLotkaVolterra"),
    "Mlp": ("._neural", "Mlp"),
    "NeuralOde": ("._neural", "NeuralOde"),
    "TextOdeModel": ("._text", "TextOdeModel"),
    "ode_model": ("._text", "ode_model"),
    "SbmlError": ("._sbml", "SbmlError"),
    "SbmlOdeModel": ("._sbml", "SbmlOdeModel"),
    "sbml_model": ("._sbml", "sbml_model"),
    "SbmlDeclarations": ("._sbml_declared", "SbmlDeclarations"),
    "sbml_declarations": ("._sbml_declared", "sbml_declarations"),
    "Event": ("._events", "Event"),
    "relation": ("._events", "relation"),
    "text_events": ("._events", "text_events"),
    "with_events": ("._events", "with_events"),
    "ModelWithEvents": ("._events", "ModelWithEvents"),
}


__getattr__, __dir__ = lazy_names(__name__, _NAMES, globals())


__all__ = sorted(_NAMES)

if TYPE_CHECKING:
    from ._classic import (
        DampedPendulum as DampedPendulum,
        Brusselator as Brusselator,
        FitzHughNagumo as FitzHughNagumo,
        Lorenz as Lorenz,
        LotkaVolterra as LotkaVolterra,
        Robertson as Robertson,
        Sir as Sir,
        VanDerPol as VanDerPol,
    )
    from .base import OdeModel as OdeModel
    from ._neural import (
        HybridLotkaVolterra as HybridLotkaVolterra,
        Mlp as Mlp,
        NeuralOde as NeuralOde,
    )
    from ._text import TextOdeModel as TextOdeModel, ode_model as ode_model
    from ._sbml import (
        SbmlError as SbmlError,
        SbmlOdeModel as SbmlOdeModel,
        sbml_model as sbml_model,
    )
    from ._sbml_declared import (
        SbmlDeclarations as SbmlDeclarations,
        sbml_declarations as sbml_declarations,
    )
    from ._events import (
        Event as Event,
        relation as relation,
        text_events as text_events,
        ModelWithEvents as ModelWithEvents,
        with_events as with_events,
    )
