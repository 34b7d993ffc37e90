"""Named initial fields on a grid: sine modes, gaussians, smooth random fields, fronts.

Each generator takes the grid mesh (a tuple of coordinate arrays of the grid's shape) and
the domain ((low, high) per axis), plus keyword options, and returns one scalar field
(float64 numpy) of the grid's shape. Models add kinds of their own (a KdV soliton, a
Taylor-Green vortex, Pearson's Gray-Scott square) through `special_initial_kinds`.
"""

from __future__ import annotations

import difflib
import inspect
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

Mesh = tuple[np.ndarray, ...]
Domain = tuple[tuple[float, float], ...]


def did_you_mean(word: Any, choices) -> str:
    close = difflib.get_close_matches(str(word), [str(c) for c in choices], n=1, cutoff=0.6)
    return f" Perhaps you meant {close[0]!r}?" if close else ""


def _per_axis(name: str, value: Any, ndim: int) -> tuple[float, ...]:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return (float(value),) * ndim
    if (
        isinstance(value, Sequence)
        and len(value) == ndim
        and all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)
    ):
        return tuple(float(v) for v in value)
    raise ValueError(
        f"initial option {name} = {value!r}: expected a number or a list of {ndim} numbers (one "
        "per axis)"
    )


def constant(mesh: Mesh, domain: Domain, *, value: float = 0.0) -> np.ndarray:
    """u = value everywhere."""
    return np.full(mesh[0].shape, float(value))


def sine(
    mesh: Mesh, domain: Domain, *, modes: Any = 1, amplitude: float = 1.0, offset: float = 0.0
) -> np.ndarray:
    """u = offset + amplitude * prod_i sin(2 pi m_i (x_i - low_i) / L_i), m_i = `modes`
    (one number for every axis, or one per axis; 0 makes that axis's factor 1)."""
    m = _per_axis("modes", modes, len(mesh))
    u = np.ones(mesh[0].shape)
    for x, (a, b), mi in zip(mesh, domain, m, strict=False):
        if mi != 0:
            u = u * np.sin(2 * np.pi * mi * (x - a) / (b - a))
    return offset + amplitude * u


def cosine(
    mesh: Mesh, domain: Domain, *, modes: Any = 1, amplitude: float = 1.0, offset: float = 0.0
) -> np.ndarray:
    """u = offset + amplitude * prod_i cos(2 pi m_i (x_i - low_i) / L_i)."""
    m = _per_axis("modes", modes, len(mesh))
    u = np.ones(mesh[0].shape)
    for x, (a, b), mi in zip(mesh, domain, m, strict=False):
        u = u * np.cos(2 * np.pi * mi * (x - a) / (b - a))
    return offset + amplitude * u


def gaussian(
    mesh: Mesh,
    domain: Domain,
    *,
    center: Any = None,
    width: Any = 0.1,
    amplitude: float = 1.0,
    offset: float = 0.0,
) -> np.ndarray:
    """u = offset + amplitude * exp(-sum_i (x_i - c_i)^2 / (2 w_i^2)); `center` defaults to
    the middle of the box and `width` (w, absolute length) to 0.1."""
    ndim = len(mesh)
    c = (
        tuple((a + b) / 2 for a, b in domain)
        if center is None
        else _per_axis("center", center, ndim)
    )
    w = _per_axis("width", width, ndim)
    if any(wi <= 0 for wi in w):
        raise ValueError(f"initial option width = {width!r}: expected positive lengths")
    r2 = sum((x - ci) ** 2 / (2 * wi**2) for x, ci, wi in zip(mesh, c, w, strict=False))
    return offset + amplitude * np.exp(-r2)


def random(
    mesh: Mesh,
    domain: Domain,
    *,
    seed: int = 0,
    max_mode: int = 4,
    amplitude: float = 1.0,
    offset: float = 0.0,
    zero_mean: bool = True,
) -> np.ndarray:
    """A smooth random field: Fourier modes |m_i| <= `max_mode` with independent normal
    coefficients damped by exp(-|m|^2 / max_mode^2), periodic on the box, scaled so that
    max |u - offset| = amplitude. Reproducible from `seed`."""
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise ValueError(f"initial option seed = {seed!r}: expected a whole number")
    if not isinstance(max_mode, int) or max_mode < 1:
        raise ValueError(f"initial option max_mode = {max_mode!r}: expected a whole number >= 1")
    rng = np.random.default_rng(seed)
    shape = mesh[0].shape
    ndim = len(shape)
    u = np.zeros(shape)
    ranges = [range(-max_mode, max_mode + 1)] * ndim
    phases = [2 * np.pi * (x - a) / (b - a) for x, (a, b) in zip(mesh, domain, strict=False)]
    for m in np.array(np.meshgrid(*ranges, indexing="ij")).reshape(ndim, -1).T:
        if zero_mean and not np.any(m):
            continue
        weight = math.exp(-float(np.sum(m**2)) / max_mode**2)
        arg = sum(mi * p for mi, p in zip(m, phases, strict=False))
        u = u + weight * (rng.normal() * np.cos(arg) + rng.normal() * np.sin(arg))
    scale = np.max(np.abs(u))
    if scale > 0:
        u = u / scale
    return offset + amplitude * u


def tanh_front(
    mesh: Mesh,
    domain: Domain,
    *,
    position: float | None = None,
    width: float = 0.1,
    low: float = 1.0,
    high: float = 0.0,
    axis: int = 0,
) -> np.ndarray:
    """A front along `axis`: u = low + (high - low) (1 + tanh((x - position) / width)) / 2,
    u -> `low` on the low side of `position` (default: the middle) and -> `high` beyond."""
    if not 0 <= axis < len(mesh):
        raise ValueError(f"initial option axis = {axis!r}: expected 0..{len(mesh) - 1}")
    if width <= 0:
        raise ValueError(f"initial option width = {width!r}: expected a positive length")
    a, b = domain[axis]
    p = (a + b) / 2 if position is None else float(position)
    return low + (high - low) * 0.5 * (1 + np.tanh((mesh[axis] - p) / width))


GENERATORS: dict[str, Callable[..., np.ndarray]] = {
    "constant": constant,
    "sine": sine,
    "cosine": cosine,
    "gaussian": gaussian,
    "random": random,
    "tanh_front": tanh_front,
}


def check_options(kind: str, function: Callable, options: dict[str, Any], skip: int) -> None:
    """Raise ValueError for an option the generator `function` does not take."""
    names = [p.name for p in list(inspect.signature(function).parameters.values())[skip:]]
    for key in options:
        if key not in names:
            listed = ", ".join(names) if names else "none"
            raise ValueError(
                f"initial field {kind!r} has no option {key!r} (options: "
                f"{listed}).{did_you_mean(key, names)}"
            )
