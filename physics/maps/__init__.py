"""Discrete-time maps: the abstract `MapModel` family, y_{n+1} = f(n, y_n; params), and
its classic members.

Its names are loaded from their modules when first used."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_names

# name -> (module, name in the module)
_NAMES: dict[str, tuple[str, str]] = {
    "MapModel": (".base", "MapModel"),
    "LogisticMap": ("._classic", "LogisticMap"),
    "HenonMap": ("._classic", "HenonMap"),
}


__getattr__, __dir__ = lazy_names(__name__, _NAMES, globals())


__all__ = sorted(_NAMES)

if TYPE_CHECKING:
    from ._classic import HenonMap as HenonMap, LogisticMap as LogisticMap
    from .base import MapModel as MapModel
