"""Classic maps: population growth and a strange attractor."""

from __future__ import annotations

from typing import ClassVar

import jax.numpy as jnp
from jaxtyping import PyTree

from .._base import Parameter
from .._types import State
from .base import Iteration, MapModel


class LogisticMap(MapModel):
    """The logistic map (May 1976), x_{n+1} = r x_n (1 - x_n): a fixed point for
    r < 3, period doubling up to r = 3.5699..., chaos beyond."""

    name: ClassVar[str] = "logistic_map"
    description: ClassVar[str] = "May (1976) logistic map of population growth"
    parameters: ClassVar[tuple[Parameter, ...]] = (
        Parameter("r", 3.7, "1", "growth rate", "nonnegative", bounds=(0.0, 4.0)),
    )
    state_names: ClassVar[tuple[str, ...]] = ("x",)
    initial_defaults: ClassVar[dict[str, float]] = {"x": 0.2}
    initial_constraint: ClassVar[str] = "unit_interval"

    def step(self, n: Iteration, y: State, params: PyTree) -> State:
        return params["r"] * y * (1.0 - y)


class HenonMap(MapModel):
    """The Henon map (Henon 1976), x_{n+1} = 1 - a x_n^2 + y_n, y_{n+1} = b x_n: a
    strange attractor at the classic a = 1.4, b = 0.3."""

    name: ClassVar[str] = "henon_map"
    description: ClassVar[str] = "Henon (1976) two-dimensional map with a strange attractor"
    parameters: ClassVar[tuple[Parameter, ...]] = (
        Parameter("a", 1.4, "1", "nonlinearity", "real"),
        Parameter("b", 0.3, "1", "contraction (the Jacobian's determinant is -b)", "real"),
    )
    state_names: ClassVar[tuple[str, ...]] = ("x", "y")
    initial_defaults: ClassVar[dict[str, float]] = {"x": 0.0, "y": 0.0}

    def step(self, n: Iteration, y: State, params: PyTree) -> State:
        x, v = y[0], y[1]
        return jnp.stack([1.0 - params["a"] * x**2 + v, params["b"] * x])
