"""Models: what evolves. Solver-agnostic; families ode, sde, pde and md.

The families' packages are imported when first used (`physics.pde`, `from physics
import md`), so that a program that runs one family does not import the others."""

from __future__ import annotations

import importlib

from ._lazy import lazy_names as lazy_names
from ._base import (
    CONSTRAINTS as CONSTRAINTS,
    Model as Model,
    NamedStateModel as NamedStateModel,
    Parameter as Parameter,
)
from ._base import float_array as float_array
from ._hdf5 import unstored as unstored  # (the standard library alone: h5py when called)

_FAMILIES = ("ode", "md", "pde", "sde", "reactions")


def __getattr__(name: str):
    if name not in _FAMILIES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return importlib.import_module(f".{name}", __name__)


def __dir__() -> list[str]:
    return sorted({*globals(), *_FAMILIES})


# The public names (the families' packages `ode`, `sde`, `pde`, `md` and `maps` have their
# own)
__all__ = [
    "CONSTRAINTS",
    "Model",
    "NamedStateModel",
    "Parameter",
    "float_array",
    "lazy_names",
    "unstored",
]
