"""The compact HTML summary Jupyter shows for a result (`_repr_html_`): one table of the
result's fields, each as a short cell: an array as its dtype and shape with its range, a
table of names as one line per name, a table of statistics per name (a posterior's
summary) as a nested table, the config as a folded block. Written from the fields, so
every result class (trajectories, runs, sweeps, fits, posteriors, profiles) shares it."""

from __future__ import annotations

import dataclasses
from html import escape
from typing import Any

import numpy as np

# Fields that are not shown (the sampler's last state, a pytree of arrays).
HIDDEN = ("last_state",)
STYLE = "border-collapse:collapse;text-align:left;font-size:90%"


def summary_html(result: Any) -> str:
    """A well-formed (XHTML) table summarising the dataclass `result`'s fields."""
    title = type(result).__name__
    model = getattr(result, "model", None)
    if isinstance(model, str):
        title += f": {model}"
    rows = []
    for field in dataclasses.fields(result):
        value = getattr(result, field.name)
        if (
            field.name in HIDDEN
            or value is None
            or (isinstance(value, (dict, list)) and not value)
            or field.name == "model"
        ):
            continue
        rows.append(
            "<tr><th "
            f'style="vertical-align:top;padding-right:1em">{escape(field.name)}</th><td>'
            f"{_cell(value)}</td></tr>"
        )
    return (
        f'<table style="{STYLE}"><caption '
        f'style="text-align:left;font-weight:bold">{escape(title)}</caption>{"".join(rows)}</table>'
    )


def _cell(value: Any) -> str:
    if isinstance(value, str):
        lines = value.strip().splitlines()
        if len(lines) <= 1:
            return escape(value)
        return f"<details><summary>{len(lines)} lines</summary><pre>{escape(value)}</pre></details>"
    if isinstance(value, (bool, int, np.integer, np.bool_)):
        return escape(str(value))
    if isinstance(value, (float, np.floating)):
        return f"{float(value):.6g}"
    if isinstance(value, dict):
        if all(
            isinstance(v, dict) and all(np.ndim(x) == 0 for x in v.values()) for v in value.values()
        ):
            columns = list(next(iter(value.values())))
            head = "".join(f"<th>{escape(str(c))}</th>" for c in columns)
            body = "".join(
                f"<tr><th>{escape(str(name))}</th>"
                + "".join(f"<td>{_cell(row.get(c))}</td>" for c in columns)
                + "</tr>"
                for name, row in value.items()
            )
            return f'<table style="{STYLE}"><tr><th></th>{head}</tr>{body}</table>'
        return "<br/>".join(f"{escape(str(k))}: {_cell(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return escape(", ".join(value))
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return _array(value)
    text = repr(value)
    return escape(text if len(text) <= 80 else text[:77] + "...")


def _array(value: Any) -> str:
    array = np.asarray(value)
    if array.ndim == 0:
        return _cell(array.item())
    label = f"{array.dtype}[{', '.join(str(n) for n in array.shape)}]"
    if array.size <= 4:
        return escape(f"{label} {np.array2string(array.ravel(), precision=4, separator=', ')}")
    if np.issubdtype(array.dtype, np.number) or array.dtype == bool:
        finite = array[np.isfinite(array)] if np.issubdtype(array.dtype, np.inexact) else array
        if finite.size:
            span = f" {float(finite.min()):.4g} .. {float(finite.max()):.4g}"
            missing = array.size - finite.size
            return escape(label + span + (f" ({missing} not finite)" if missing else ""))
    return escape(label)
