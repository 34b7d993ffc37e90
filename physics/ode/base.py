"""The abstract ODE family."""

from __future__ import annotations

import abc
from typing import ClassVar

import jax.numpy as jnp
from jaxtyping import Array, Float, PyTree

from .._base import Model
from .._types import Scalar, State


class OdeModel(Model):
    """A system dy/dt = f(t, y; params) with named state components.

    Concrete classes set `state_names` (one per component of the state vector, in
    order), `initial_defaults` (a default initial value per component) and implement
    `vector_field`; `initial_constraint` (one of physics.CONSTRAINTS) says which initial
    values make sense, which fitting uses to choose a transform. Observables default to the state components by name; a model adds
    derived ones by overriding `extra_observables`.

    The state is a flat float vector `y` of shape [n]; neural models may hold networks
    as fields and read their weights from `params` (any pytree).
    """

    state_names: ClassVar[tuple[str, ...]]
    initial_defaults: ClassVar[dict[str, float]]
    initial_units: ClassVar[str] = ""
    initial_constraint: ClassVar[str] = "real"

    @abc.abstractmethod
    def vector_field(self, t: Scalar, y: State, params: PyTree) -> State:
        """dy/dt at time `t` for state `y` [n] and parameters `params`."""

    def initial_state(self, initial: dict[str, Array] | None = None) -> State:
        """The initial state vector [n] from named values; missing names take defaults."""
        values = dict(self.initial_defaults)
        if initial is not None:
            values.update(initial)
        return jnp.stack([jnp.asarray(values[n], dtype=float) for n in self.state_names])

    def default_initial(self) -> dict[str, Array]:
        """Default initial values, one scalar array per state component."""
        return {n: jnp.asarray(v, dtype=float) for n, v in self.initial_defaults.items()}

    def extra_observables(self, t: Scalar, y: State, params: PyTree) -> dict[str, Array]:
        """Derived observables beyond the state components (none by default)."""
        return {}

    def observables(self, t: Scalar, y: State, params: PyTree) -> dict[str, Array]:
        """All observables at one time: each state component by name plus the extras."""
        out = {n: y[i] for i, n in enumerate(self.state_names)}
        out.update(self.extra_observables(t, y, params))
        return out

    @property
    def observable_names(self) -> tuple[str, ...]:
        y = jnp.zeros(len(self.state_names))
        extra = self.extra_observables(jnp.zeros(()), y, self.default_params())
        return tuple(self.state_names) + tuple(extra)
