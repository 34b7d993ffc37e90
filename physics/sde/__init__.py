"""SDE models: the abstract `SdeModel` family (Ito, diagonal, additive or general noise)
and its classic members.

Its names are loaded from their modules when first used, so that importing one
model family (or the base class of this one) does not import every model."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_names

# name -> (module, name in the module)
_NAMES: dict[str, tuple[str, str]] = {
    "GeometricBrownianMotion": ("._models", "GeometricBrownianMotion"),
    "OrnsteinUhlenbeck": ("._models", "OrnsteinUhlenbeck"),
    "StochasticLotkaVolterra": ("._models", "StochasticLotkaVolterra"),
    "NOISE_KINDS": (".base", "NOISE_KINDS"),
    "SdeModel": (".base", "SdeModel"),
    "TextSdeModel": ("._text", "TextSdeModel"),
    "sde_model": ("._text", "sde_model"),
}


__getattr__, __dir__ = lazy_names(__name__, _NAMES, globals())


__all__ = sorted(_NAMES)

if TYPE_CHECKING:
    from ._models import (
        GeometricBrownianMotion as GeometricBrownianMotion,
        OrnsteinUhlenbeck as OrnsteinUhlenbeck,
        StochasticLotkaVolterra as StochasticLotkaVolterra,
    )
    from .base import NOISE_KINDS as NOISE_KINDS, SdeModel as SdeModel
    from ._text import TextSdeModel as TextSdeModel, sde_model as sde_model
