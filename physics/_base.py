"""What every model declares: parameters with units and constraints, and observables."""

from __future__ import annotations

import abc
from typing import Any, ClassVar

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array

CONSTRAINTS = ("real", "positive", "nonnegative", "unit_interval")


class Parameter(eqx.Module):
    """Declaration of one model parameter.

    Arguments:
        name: the key in the params dict and in a config's `[params]` table.
        default: the value used when none is given.
        unit: physical unit, or "1" for dimensionless, "reduced" for reduced (LJ) units.
        doc: one-line meaning.
        constraint: one of `real`, `positive`, `nonnegative`, `unit_interval`; used to
            validate config values and to choose a transform when fitting.
    """

    name: str = eqx.field(static=True)
    default: Any = eqx.field(static=True)
    unit: str = eqx.field(static=True)
    doc: str = eqx.field(static=True)
    constraint: str = eqx.field(static=True, default="real")

    def __check_init__(self):
        if self.constraint not in CONSTRAINTS:
            raise ValueError(
                f"Parameter {self.name!r}: constraint {self.constraint!r} is not one of {CONSTRAINTS}"
            )

    def violation(self, value) -> str | None:
        """Return why a concrete `value` breaks the constraint, or None if it holds."""
        v = jnp.asarray(value)
        if not bool(jnp.all(jnp.isfinite(v))):
            return "a finite number"
        if self.constraint == "positive" and not bool(jnp.all(v > 0)):
            return "a positive number"
        if self.constraint == "nonnegative" and not bool(jnp.all(v >= 0)):
            return "a number >= 0"
        if self.constraint == "unit_interval" and not bool(jnp.all((v >= 0) & (v <= 1))):
            return "a number in [0, 1]"
        return None


class Model(eqx.Module):
    """Abstract base of every model family (ODE, spectral PDE, grid PDE, particles).

    A model says *what* evolves. Concrete models are final classes; their fields are
    static options (a grid size, a network), while the numbers one calibrates live in
    the `params` dict that `sim.simulate` takes, so that changing a value never
    recompiles.

    Class attributes every concrete model sets:
        name: registry name (`sim models` lists them).
        parameters: the declared `Parameter`s, in order.
        description: one line.
    """

    name: ClassVar[str]
    description: ClassVar[str]
    parameters: ClassVar[tuple[Parameter, ...]]

    def default_params(self) -> dict[str, Array]:
        """Default parameter values as a dict of float arrays (a pytree)."""
        return {p.name: jnp.asarray(p.default, dtype=float) for p in self.parameters}

    def parameter(self, name: str) -> Parameter:
        """The declaration of parameter `name`; KeyError if the model has none."""
        for p in self.parameters:
            if p.name == name:
                return p
        raise KeyError(name)

    @property
    def parameter_names(self) -> tuple[str, ...]:
        return tuple(p.name for p in self.parameters)

    @property
    @abc.abstractmethod
    def observable_names(self) -> tuple[str, ...]:
        """Names of the observables that a trajectory carries."""
