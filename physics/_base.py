"""What every model declares: parameters with units and constraints, and observables."""

from __future__ import annotations

import abc
from typing import Any, ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, PyTree

from ._types import Scalar, State

CONSTRAINTS = ("real", "positive", "nonnegative", "unit_interval")


def float_array(value) -> Array:
    """`jnp.asarray(value, dtype=float)`; a value on the host (a number, a numpy array)
    is converted by numpy and put on the device, which compiles no conversion program
    (a fresh process would trace, lower and load one per shape: milliseconds each)."""
    if isinstance(value, jax.Array):
        return jnp.asarray(value, dtype=float)
    return jax.device_put(np.asarray(value, dtype=jax.dtypes.canonicalize_dtype(float)))


class Parameter(eqx.Module):
    """Declaration of one model parameter.

    Arguments:
        name: the key in the params dict and in a config's `[params]` table.
        default: the value used when none is given.
        unit: physical unit, or "1" for dimensionless, "reduced" for reduced (LJ) units.
        doc: one-line meaning.
        constraint: one of `real`, `positive`, `nonnegative`, `unit_interval`; used to
            validate config values and to choose a transform when fitting.
        bounds: optional (low, high) within which the value lies; a fit of the parameter
            keeps to them (unless `[fit] bounds` gives others).
    """

    name: str = eqx.field(static=True)
    default: Any = eqx.field(static=True)
    unit: str = eqx.field(static=True)
    doc: str = eqx.field(static=True)
    constraint: str = eqx.field(static=True, default="real")
    bounds: tuple[float, float] | None = eqx.field(static=True, default=None)

    def __check_init__(self):
        if self.constraint not in CONSTRAINTS:
            raise ValueError(
                f"Parameter {self.name!r}: constraint {self.constraint!r} is not one of "
                f"{CONSTRAINTS}"
            )
        if self.bounds is not None and not (
            len(self.bounds) == 2 and self.bounds[0] < self.bounds[1]
        ):
            raise ValueError(
                f"Parameter {self.name!r}: bounds {self.bounds!r} are not (low, high) with low < "
                "high"
            )

    def violation(self, value) -> str | None:
        """Return why a concrete `value` breaks the constraint, or None if it holds."""
        v = np.asarray(value)  # (numpy: a concrete value needs no compiled program)
        if not bool(np.all(np.isfinite(v))):
            return "a finite number"
        if self.constraint == "positive" and not bool(np.all(v > 0)):
            return "a positive number"
        if self.constraint == "nonnegative" and not bool(np.all(v >= 0)):
            return "a number >= 0"
        if self.constraint == "unit_interval" and not bool(np.all((v >= 0) & (v <= 1))):
            return "a number in [0, 1]"
        if self.bounds is not None and not bool(
            np.all((v >= self.bounds[0]) & (v <= self.bounds[1]))
        ):
            return f"a number in its bounds [{self.bounds[0]:g}, {self.bounds[1]:g}]"
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
        return {p.name: float_array(p.default) for p in self.parameters}

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


class NamedStateModel(Model):
    """A model whose state is a flat float vector `y` [n] with a name per component (the
    ODE and SDE families). Concrete classes set `state_names`, `initial_defaults` (a
    default initial value per component), optionally `initial_units` and
    `initial_constraint` (one of CONSTRAINTS: which initial values make sense; fitting
    uses it to choose a transform). Observables are the components by name plus what
    `extra_observables` adds."""

    state_names: ClassVar[tuple[str, ...]]
    initial_defaults: ClassVar[dict[str, float]]
    initial_units: ClassVar[str] = ""
    initial_constraint: ClassVar[str] = "real"
    # The components whose default initial value the parameters determine (an imported
    # model's initial assignments): a run computes them from its own parameters.
    parameter_dependent_initial: ClassVar[frozenset[str]] = frozenset()

    def initial_state(
        self, initial: dict[str, Array] | None = None, params: PyTree | None = None
    ) -> State:
        """The initial state vector [n] from named values; missing names take defaults
        (computed from `params` where the model's defaults depend on its parameters)."""
        values = dict(self.initial_defaults)
        if initial is not None:
            values.update(initial)
        if not self.state_names:  # (a model whose every quantity is assigned: no state)
            return jnp.zeros((0,), dtype=float)
        given = [values[n] for n in self.state_names]
        if any(isinstance(v, jax.core.Tracer) for v in given):
            return jnp.stack([jnp.asarray(v, dtype=float) for v in given])
        # (concrete values stacked by numpy: no compiled program)
        return float_array(
            np.stack([np.asarray(v, dtype=jax.dtypes.canonicalize_dtype(float)) for v in given])
        )

    def default_initial(self, params: PyTree | None = None) -> dict[str, Array]:
        """Default initial values, one scalar array per state component (for these
        parameters, where the defaults depend on them)."""
        if params is not None and self.parameter_dependent_initial:
            y0 = self.initial_state(None, params)
            return {n: y0[i] for i, n in enumerate(self.state_names)}
        return {n: float_array(v) for n, v in self.initial_defaults.items()}

    @property
    def checked_observables(self) -> tuple[str, ...] | None:
        """The observables a run checks for a blow-up (values that stop being finite);
        None, the default, for all of them."""
        return None

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
