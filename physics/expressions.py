"""The text expression language of the models' right-hand sides (see `physics._expressions`):
`parse` checks a text against the symbols it may read and gives an `Expression`, or raises
`ExpressionError` with the column of what the language does not allow. The PDE family's
text models and the observation formulas of `inference` are written in it."""

from __future__ import annotations

from ._expressions import (
    Expression as Expression,
    ExpressionError as ExpressionError,
    parse as parse,
)

__all__ = ["Expression", "ExpressionError", "parse"]
