"""The abstract ODE family."""

from __future__ import annotations

import abc
from typing import ClassVar

from jaxtyping import PyTree

from .._base import NamedStateModel
from .._types import Scalar, State


class OdeModel(NamedStateModel):
    """A system dy/dt = f(t, y; params) with named state components.

    Concrete classes set `state_names` (one per component of the state vector, in
    order), `initial_defaults` (a default initial value per component) and implement
    `vector_field`; `initial_constraint` (one of physics.CONSTRAINTS) says which initial
    values make sense, which fitting uses to choose a transform. Observables default to the state
    components by name; a model adds derived ones by overriding `extra_observables`.

    The state is a flat float vector `y` of shape [n]; neural models may hold networks
    as fields and read their weights from `params` (any pytree).

    A model whose equations are stiff (rates that differ by orders of magnitude, as in
    most biochemical networks) sets `stiff = True`: a config that names no
    `[solver] method` then solves it with an implicit method.
    """

    stiff: ClassVar[bool] = False

    @abc.abstractmethod
    def vector_field(self, t: Scalar, y: State, params: PyTree) -> State:
        """dy/dt at time `t` for state `y` [n] and parameters `params`."""

    def undefined(self, t: Scalar, y: State, params: PyTree) -> str | None:
        """Why the vector field has no value at (t, y) by the model's own definition
        (an imported model's piecewise with no piece that applies), or None (the
        default): what a failed solve is explained by, as bad input rather than a
        solver's failure."""
        return None

    def events(self) -> tuple:
        """The model's events (`physics.ode.Event`: trigger, assignments, terminal), none
        by default; `physics.ode.with_events` adds those a config writes."""
        return ()
