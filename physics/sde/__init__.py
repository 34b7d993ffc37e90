"""SDE models: the abstract `SdeModel` family (Ito, diagonal, additive or general noise)
and its classic members.

Its names are loaded from their modules when first used, so that importing one
model family (or the base class of this one) does not import every model."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

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


def __getattr__(name: str):
    try:
        module, attribute = _NAMES[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module, __name__), attribute)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_NAMES})


__all__ = sorted(_NAMES)

if TYPE_CHECKING:
    from ._models import (
        GeometricBrownianMotion as GeometricBrownianMotion,
        OrnsteinUhlenbeck as OrnsteinUhlenbeck,
        StochasticLotkaVolterra as StochasticLotkaVolterra,
    )
    from .base import NOISE_KINDS as NOISE_KINDS, SdeModel as SdeModel
    from ._text import TextSdeModel as TextSdeModel, sde_model as sde_model
