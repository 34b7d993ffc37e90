"""Reaction networks: species, reactions and their mass-action propensities
(`MassAction`), and reactions as written (`parse_reactions`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_names

_NAMES = {
    "MassAction": ("._network", "MassAction"),
    "parse_reactions": ("._network", "parse_reactions"),
}

__getattr__, __dir__ = lazy_names(__name__, _NAMES, globals())

__all__ = sorted(_NAMES)

if TYPE_CHECKING:
    from ._network import MassAction as MassAction, parse_reactions as parse_reactions
