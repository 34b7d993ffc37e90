"""A PEtab problem ready to evaluate (`PetabProblem`) and the rows of its parameter table
(`PetabParameter`): scales, bounds, objective priors, and where the objective's values
come from (`_Sources`)."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from solvers import OdeSolver

from ._petab_files import PetabError

SCALES = ("lin", "log", "log10")
# Gradients by forward-mode sensitivities up to this many estimated parameters (Boehm, 9
# parameters: 105 ms forward against 228 ms reverse per value and gradient).
FORWARD_MODE_UP_TO = 16
DISTRIBUTIONS = ("normal", "laplace")
TRANSFORMATIONS = ("lin", "log", "log10")


@dataclasses.dataclass(frozen=True)
class PetabParameter:
    """One row of the parameter table (bounds and nominal value in linear scale)."""

    id: str
    scale: str
    lower: float
    upper: float
    nominal: float
    estimate: bool
    prior: str = ""  # objectivePriorType ('' = none)
    prior_parameters: tuple[float, ...] = ()


PRIORS = (
    "uniform",
    "normal",
    "laplace",
    "logNormal",
    "logLaplace",
    "parameterScaleUniform",
    "parameterScaleNormal",
    "parameterScaleLaplace",
)


def _negative_log_prior(x, p: PetabParameter):
    """-log density of PEtab's objective prior of one parameter at `x` (its scale)."""
    kind, (a, b) = p.prior, p.prior_parameters
    if kind.startswith("parameterScale"):
        v, kind = x, kind[len("parameterScale") :].lower()
    elif kind.startswith("log"):
        # (a density of the linear value, in log space: lognormal/loglaplace)
        v, kind = to_linear(x, p.scale), kind[3:].lower()
        return _negative_log_prior_of(jnp.log(v), kind, a, b) + jnp.log(v)
    else:
        v = to_linear(x, p.scale)
    return _negative_log_prior_of(v, kind, a, b)


def _negative_log_prior_of(v, kind: str, a, b):
    if kind == "uniform":
        return jnp.where((v >= a) & (v <= b), jnp.log(b - a), jnp.inf)
    if kind == "normal":
        return 0.5 * jnp.log(2 * math.pi * b**2) + 0.5 * ((v - a) / b) ** 2
    return jnp.log(2 * b) + jnp.abs(v - a) / b  # laplace


def to_linear(x, scale: str):
    """A value on a PEtab parameter scale in linear scale."""
    return x if scale == "lin" else (jnp.exp(x) if scale == "log" else jnp.power(10.0, x))


def to_scale(x, scale: str):
    """A linear value on a PEtab parameter scale."""
    return x if scale == "lin" else (jnp.log(x) if scale == "log" else jnp.log10(x))


def _missing(value) -> bool:
    return (
        value is None
        or (isinstance(value, float) and math.isnan(value))
        or (isinstance(value, str) and not value.strip())
    )


class _Sources:
    """Where the values of the objective come from: the parameter table's values (linear
    scale) followed by the problem's numeric constants, one index each."""

    def __init__(self, parameters: list[PetabParameter]):
        self.index = {p.id: i for i, p in enumerate(parameters)}
        self.constants: list[float] = []
        self.used: set[str] = set()  # the ids of the table that something reads

    def of(self, value, where: str) -> int:
        """The index of a number or a parameter id."""
        if isinstance(value, str):
            text = value.strip()
            try:
                value = float(text)
            except ValueError:
                if text not in self.index:
                    raise PetabError(
                        f"{where}: {text!r} is neither a number nor a parameter of the parameter "
                        "table"
                    ) from None
                self.used.add(text)
                return self.index[text]
        self.constants.append(float(value))
        return len(self.index) + len(self.constants) - 1


@dataclasses.dataclass
class _Observable:
    id: str
    value: Callable[[dict], Any]
    sigma: Callable[[dict], Any]
    transformation: str
    distribution: str
    rows: np.ndarray  # measurement rows of this observable
    placeholders: dict[str, np.ndarray]  # placeholder name -> source index per row


class PetabProblem:
    """A PEtab problem ready to evaluate: `objective(x)` is the negative log-likelihood
    for the estimated parameters `x` [p] on their PEtab scales (order of
    `estimated`); `nominal()` gives the table's nominal values on those scales.

    Attributes:
        path: the problem's YAML file.
        model: the imported SBML model.
        parameters: the parameter table, in its order.
        estimated: ids of the estimated parameters.
        solver: the ODE solver of every simulation.
        allow_outside: whether its files may lie outside the YAML file's folder (as
            loaded: `load_petab`); the fit's digests and workers read them alike.
    """

    def __init__(
        self,
        path: Path,
        model,
        parameters: list[PetabParameter],
        solver: OdeSolver,
        allow_outside: bool = False,
    ):
        self.path = path
        self.allow_outside = allow_outside
        self.model = model
        self.parameters = parameters
        self.estimated = [p.id for p in parameters if p.estimate]
        self.solver = solver
        self._functions: dict[tuple, Callable] = {}

    def nominal(self) -> np.ndarray:
        """The nominal values of the estimated parameters on their scales."""
        return np.array(
            [float(to_scale(np.float64(p.nominal), p.scale)) for p in self.parameters if p.estimate]
        )

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        """Lower and upper bounds of the estimated parameters on their scales."""
        est = [p for p in self.parameters if p.estimate]
        return (
            np.array([float(to_scale(np.float64(p.lower), p.scale)) for p in est]),
            np.array([float(to_scale(np.float64(p.upper), p.scale)) for p in est]),
        )

    def theta(self, x) -> jax.Array:
        """All parameter-table values in linear scale, the estimated ones from `x`."""
        out, k = [], 0
        for p in self.parameters:
            if p.estimate:
                out.append(to_linear(x[k], p.scale))
                k += 1
            else:
                out.append(jnp.asarray(p.nominal, dtype=float))
        return jnp.stack(out) if out else jnp.zeros((0,))

    def objective(self, x, solver: OdeSolver | None = None) -> jax.Array:
        """The negative log-likelihood (all normalising constants, priors excluded);
        `solver` replaces the problem's for this evaluation."""
        return jnp.sum(self.residual_terms(x, solver))

    def value_and_grad(
        self, with_priors: bool = False
    ) -> Callable[[Any], tuple[jax.Array, jax.Array]]:
        """A function of x giving the objective (plus the priors) and its gradient:
        forward-mode sensitivities through the solver for up to `FORWARD_MODE_UP_TO`
        estimated parameters (cheaper for few parameters: no checkpointed reverse
        pass), reverse mode beyond. The same function for the same arguments and solver,
        so that the fits of one problem share their compiled batches (`_batched`)."""
        key = (with_priors, self.solver)
        if key not in self._functions:
            self._functions[key] = self._value_and_grad(with_priors)
        return self._functions[key]

    def _value_and_grad(self, with_priors: bool) -> Callable[[Any], tuple[jax.Array, jax.Array]]:
        prior = self.prior if with_priors else (lambda x: 0.0)
        if len(self.estimated) <= FORWARD_MODE_UP_TO:
            forward = dataclasses.replace(self.solver, adjoint="forward")

            def fun(x):
                f = lambda x: self.objective(x, forward) + prior(x)  # noqa: E731
                return f(x), jax.jacfwd(f)(x)

            return fun
        return jax.value_and_grad(lambda x: self.objective(x) + prior(x))

    def prior(self, x) -> jax.Array:
        """-log of the objective priors of the parameter table at `x` (0 where none is
        given)."""
        est = [p for p in self.parameters if p.estimate]
        terms = [_negative_log_prior(x[k], p) for k, p in enumerate(est) if p.prior]
        return jnp.sum(jnp.stack(terms)) if terms else jnp.zeros((), dtype=jnp.result_type(float))

    @property
    def has_priors(self) -> bool:
        return any(p.prior for p in self.parameters if p.estimate)

    # (set by `load_petab`)
    residual_terms: Callable[[Any], jax.Array]
    simulations: list[tuple[str, str]]
    observables: list[_Observable]


def _prior_of(row, where: str, scale: str) -> tuple[str, tuple[float, ...]]:
    """The objective prior of a parameter-table row: its type and two parameters."""
    kind = row.get("objectivePriorType")
    if _missing(kind):
        return "", ()
    kind = str(kind).strip()
    if kind not in PRIORS:
        raise PetabError(
            f"{where}, column objectivePriorType: expected one of {', '.join(PRIORS)}, got {kind!r}"
        )
    text = row.get("objectivePriorParameters")
    try:
        a, b = (float(v) for v in str(text).split(";"))
    except (TypeError, ValueError):
        raise PetabError(
            f"{where}, column objectivePriorParameters: expected two numbers separated by ';', got "
            f"{text!r}"
        ) from None
    if kind != "uniform" and kind != "parameterScaleUniform" and not b > 0:
        raise PetabError(
            f"{where}, column objectivePriorParameters: the scale of a {kind} prior must be "
            f"positive, got {b!r}"
        )
    if kind.endswith("niform") and not b > a:
        raise PetabError(
            f"{where}, column objectivePriorParameters: a uniform prior needs lower < upper, got "
            f"{text!r}"
        )
    return kind, (a, b)
