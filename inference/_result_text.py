"""The one-line reprs of inference results: each fitted quantity as `name=value`, then
how the work ended (the loss, convergence, diagnostics), never the config or the data."""

from __future__ import annotations

import math
from collections.abc import Iterable

# Quantities named in a repr before the rest are counted ("+N more").
SHOWN = 12


def number(value) -> str:
    """A number in 6 significant digits (`nan`, `inf` as Python writes them)."""
    return f"{float(value):.6g}"


def short_repr(kind: str, head: Iterable[str], named: dict[str, str], tail: Iterable[str]) -> str:
    """`kind(head..., name=value..., tail...)`, the names after the first `SHOWN` counted.

    Example:
        >>> short_repr("FitResult", ["model='lv'"], {"alpha": "0.55"}, ["converged=True"])
        "FitResult(model='lv', alpha=0.55, converged=True)"
    """
    items = list(named.items())
    parts = [*head, *(f"{name}={text}" for name, text in items[:SHOWN])]
    if len(items) > SHOWN:
        parts.append(f"+{len(items) - SHOWN} more")
    return f"{kind}({', '.join([*parts, *tail])})"


def summary_repr(kind: str, head: Iterable[str], summary: dict, diverging) -> str:
    """A posterior's repr: mean±sd of each quantity, the divergences and the largest
    r_hat."""
    r_hats = [float(s["r_hat"]) for s in summary.values() if math.isfinite(float(s["r_hat"]))]
    return short_repr(
        kind,
        [*head, f"chains={diverging.shape[0]}", f"draws={diverging.shape[1]}"],
        {name: f"{number(s['mean'])}±{number(s['sd'])}" for name, s in summary.items()},
        [
            f"divergences={int(diverging.sum())}",
            f"max_r_hat={number(max(r_hats)) if r_hats else 'nan'}",
        ],
    )
