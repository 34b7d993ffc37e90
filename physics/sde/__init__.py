"""SDE models: the abstract `SdeModel` family (Ito, diagonal, additive or general noise)
and its classic members."""

from ._models import (
    GeometricBrownianMotion as GeometricBrownianMotion,
    OrnsteinUhlenbeck as OrnsteinUhlenbeck,
    StochasticLotkaVolterra as StochasticLotkaVolterra,
)
from .base import NOISE_KINDS as NOISE_KINDS, SdeModel as SdeModel
from ._text import TextSdeModel as TextSdeModel, sde_model as sde_model
