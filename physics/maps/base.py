"""The abstract family of discrete-time maps."""

from __future__ import annotations

import abc

from jaxtyping import Array, Int, PyTree

from .._base import NamedStateModel
from .._types import State

Iteration = Int[Array, ""] | int
"""An iteration count n."""


class MapModel(NamedStateModel):
    """A map y_{n+1} = f(n, y_n; params) of a state with named components, iterated
    from y_{n0} at the first save time n0 (save times are iteration counts).

    Concrete classes set `state_names`, `initial_defaults` and implement `step`;
    observables are the components by name plus what `extra_observables` adds.
    """

    @abc.abstractmethod
    def step(self, n: Iteration, y: State, params: PyTree) -> State:
        """y_{n+1} from the iterate `y` [n] at iteration `n`."""
