"""ODE models: the abstract `OdeModel` family and its classic members."""

from ._classic import (
    DampedPendulum as DampedPendulum,
    FitzHughNagumo as FitzHughNagumo,
    Lorenz as Lorenz,
    LotkaVolterra as LotkaVolterra,
    Robertson as Robertson,
    Sir as Sir,
    VanDerPol as VanDerPol,
)
from .base import OdeModel as OdeModel
from ._neural import HybridLotkaVolterra as HybridLotkaVolterra, Mlp as Mlp, NeuralOde as NeuralOde
from ._text import TextOdeModel as TextOdeModel, ode_model as ode_model
from ._sbml import SbmlError as SbmlError, SbmlOdeModel as SbmlOdeModel, sbml_model as sbml_model
from ._events import Event as Event, text_events as text_events, with_events as with_events
