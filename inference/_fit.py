"""Calibration by gradients through the time stepping: free quantities (parameters and
initial values) fitted to observations by Levenberg-Marquardt, BFGS or Adam, with
standard errors from the Gauss-Newton (Laplace) covariance."""

from __future__ import annotations

import dataclasses
import functools
import math
import sys
from pathlib import Path
from typing import Any, Literal

import equinox as eqx
import h5py
import jax
import jax.numpy as jnp
import numpy as np
import optax
import optimistix as optx
import pydantic
from jaxtyping import Array
from pydantic import BaseModel, ConfigDict, Field

import sim
from physics import Model
from sim import Config, DataError
from sim.core import (
    SEED_MAX,
    InputError,
    Progress,
    Result,
    build_model,
    check_output_path,
    config_inputs,
    dask_client,
    exclusive,
    family_of,
    memory_problem,
    resolved_toml,
    warn_if_float32,
    write_group,
    write_root_attrs,
)
from solvers import OdeSolver, checks_as_nan, did_you_mean

from ._checkpoint import Checkpointer, checkpoint_path, fingerprint
from ._data import Observations, check_span, jsonable, load_observations
from ._experiments import Extra, free_extras, preequilibration, split_params
from ._multistart import (
    Lanes,
    block_size,
    blocks,
    in_order,
    pad,
    padded,
    spread,
    spread_check,
    unpad,
)
from ._observation import build_observation, loader_section, observable_specs

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

LOSSES = ("normal", "lognormal", "mse")
OPTIMIZERS = ("levenberg_marquardt", "bfgs", "adam")
# A residual that cannot be computed (a failed solve, a negative prediction under a
# lognormal loss) counts as at least this many standard deviations: optimisers step away
# from it.
_BAD_RESIDUAL = 1e3


class FitSection(BaseModel):
    """`[fit]`: what is free, the loss, the optimiser and its settings."""

    model_config = ConfigDict(extra="forbid", strict=True)
    free: list[str] = Field(min_length=1)
    loss: Literal["normal", "lognormal", "mse"] = "normal"
    optimizer: Literal["levenberg_marquardt", "bfgs", "adam"] = "levenberg_marquardt"
    max_steps: int | None = Field(default=None, ge=1)
    rtol: float = Field(default=1e-8, gt=0)
    atol: float = Field(default=1e-8, gt=0)
    learning_rate: float = Field(default=0.01, gt=0)
    starts: int = Field(default=1, ge=1)
    seed: int = Field(default=0, ge=0, le=SEED_MAX)
    checkpoint_every: int | None = Field(default=None, ge=1)
    weights: dict[str, float] = {}
    bounds: dict[str, list[float]] = {}


def fit_section(config: Config, without: tuple[str, ...] = ()) -> FitSection:
    """The config's `[fit]`, checked (`without`: keys a special fit checks itself)."""
    raw = config.spec.fit
    if raw is None:
        raise config.error("fit", 'required section is missing (at least: free = ["name", ...])')
    try:
        return FitSection.model_validate(
            {k: v for k, v in raw.items() if k not in without} if without else raw
        )
    except pydantic.ValidationError as e:
        err = e.errors()[0]
        key = "fit." + ".".join(str(p) for p in err["loc"] if not str(p).startswith("literal"))
        kind = err["type"]
        if kind == "extra_forbidden":
            msg = (
                "unknown key (expected one of: "
                f"{', '.join(FitSection.model_fields)})."
                f"{did_you_mean(err['loc'][-1], FitSection.model_fields)}"
            )
        elif kind == "literal_error":
            msg = f"expected one of {err['ctx']['expected']}, got {err['input']!r}"
        elif kind == "too_short":
            msg = "expected at least one free quantity"
        else:
            msg = f"{err['msg'][0].lower()}{err['msg'][1:]}, got {err.get('input')!r}"
        raise config.error(key, msg) from None


class Free(eqx.Module):
    """One free quantity: where it goes (a parameter or an initial value) and the
    transform that maps an unconstrained number onto its allowed range."""

    name: str = eqx.field(static=True)
    kind: str = eqx.field(
        static=True
    )  # "params" | "initial" | "extra" (not the model's: `inference._experiments.Extra`)
    key: str = eqx.field(static=True)
    transform: str = eqx.field(static=True)  # identity | log | softplus | logistic
    low: float = eqx.field(static=True, default=0.0)
    high: float = eqx.field(static=True, default=1.0)

    def to_natural(self, u: Array) -> Array:
        if self.transform == "log":
            return jnp.exp(u)
        if self.transform == "softplus":
            return jax.nn.softplus(u)
        if self.transform == "logistic":
            return self.low + (self.high - self.low) * jax.nn.sigmoid(u)
        return u

    def to_unconstrained(self, x: Array) -> Array:
        if self.transform == "log":
            return jnp.log(x)
        if self.transform == "softplus":
            return x + jnp.log(-jnp.expm1(-x))
        if self.transform == "logistic":
            z = (x - self.low) / (self.high - self.low)
            return jnp.log(z) - jnp.log1p(-z)
        return x


@eqx.filter_custom_vjp
def _predict_by_forward_sensitivity(x, problem):
    # (The primal is never differentiated, its derivatives are the rule's below: an ODE
    # solve takes an adjoint that the lean core accepts, so the value needs no diffrax
    # solve, whose run-time checks of traced save times keep a program out of the
    # persistent compilation cache.)
    if (
        isinstance(problem.solver, OdeSolver)
        and problem.static_solver is None
        and problem.solver.adjoint == "forward"
    ):
        problem = _replace(problem, solver=dataclasses.replace(problem.solver, adjoint="direct"))
    return _values(problem, x)


@_predict_by_forward_sensitivity.def_fwd
def _(perturbed, x, problem):
    # A model with a vector field solved by a solver that integrates the sensitivity
    # equations (ODE models and `solvers.OdeSolver`); anything else: forward mode.
    if hasattr(problem.model, "vector_field") and hasattr(problem.solver, "solve_sensitivities"):
        out, jacobian = _sensitivities(problem, x)
        return out, jacobian

    def both(v):
        out = problem._predict(v)
        return out, out

    jacobian, out = jax.jacfwd(both, has_aux=True)(x)
    return out, jacobian


# (One trace serves every call with the same problem and shapes: a NUTS run traces its
# model, and its model's gradient, several times.)
@eqx.filter_jit
def _values(problem, x):
    return problem._predict(x)


@eqx.filter_jit
def _sensitivities(problem, x):
    return problem._predict_with_sensitivities(x)


@_predict_by_forward_sensitivity.def_bwd
def _(jacobian, cotangent, perturbed, x, problem):
    grads = {}
    for k in x:
        total = jnp.zeros_like(x[k])
        for name, g in cotangent.items():
            if g is not None:
                total = total + jnp.sum(g * jacobian[name][k])
        grads[k] = total
    return grads


class _Constant:
    """A pytree of concrete arrays held as a static value (equal and hashed by content).

    An MD run sizes its neighbour list from the initial positions, which must then be
    known numbers, not values traced by `jax.jit`: the fit holds the initial System
    this way, so it enters every compiled program as a constant."""

    def __init__(self, value: Any):
        self.value = value  # concrete arrays: constants inside a compiled program
        leaves, treedef = jax.tree.flatten(value)
        self._key = (
            treedef,
            tuple((a.dtype.str, a.shape, a.tobytes()) for a in map(np.asarray, leaves)),
        )

    def __hash__(self) -> int:
        return hash(self._key)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Constant) and self._key == other._key


_TRANSFORMS = {
    "real": "identity",
    "positive": "log",
    "nonnegative": "softplus",
    "unit_interval": "logistic",
}


class Problem(eqx.Module):
    """A calibration problem: the model, its fixed settings, the free quantities and the
    data. A pytree: its arrays (data, fixed values) are traced, so fitting new data of
    the same shape does not recompile.

    Residuals are whitened: sqrt(weight) * (observed - predicted) / sigma for the
    normal loss, the same on logarithms for the lognormal loss, and
    (observed - predicted) / sqrt(number of observations) for mse. Missing (NaN)
    observations contribute nothing. The loss is half the sum of squared residuals.
    """

    model: Model
    solver: Any
    params: dict[str, Array]
    initial: Any
    t_sim: Array
    skip: int = eqx.field(static=True)
    free: tuple[Free, ...] = eqx.field(static=True)
    loss: str = eqx.field(static=True)
    observed: dict[str, Array]
    sigma: dict[str, Array]
    weight: dict[str, Array]
    count: int = eqx.field(static=True)
    forward_sensitivity: bool = eqx.field(static=True, default=False)
    # Families that fix their number of steps before compiling (MD) need the save times
    # as constants, not traced values.
    fixed_times: tuple[float, ...] | None = eqx.field(static=True, default=None)
    # ... and their time step: the solver is then held static (its step a constant).
    static_solver: Any = eqx.field(static=True, default=None)
    # ... and their initial System, whose positions size the neighbour list (`_Constant`).
    static_initial: Any = eqx.field(static=True, default=None)
    # Observation models (`inference._observation.Observation`): formulas and noise
    # models of the observed quantities; None: the model observables under `loss`.
    observation: Any = None
    # Condition-specific parameters: (model parameter, free quantity it is here).
    aliases: tuple[tuple[str, str], ...] = eqx.field(static=True, default=())
    # A run to steady state first (`inference._experiments.Preequilibration`).
    preequilibration: Any = None
    # The data's times are t_sim[skip:end] (end: 1 when the only one is the start time,
    # and t_sim goes on to the end of the span, since a solve saves at least two times).
    end: int | None = eqx.field(static=True, default=None)

    def natural(self, u: dict[str, Array]) -> dict[str, Array]:
        return {f.name: f.to_natural(u[f.name]) for f in self.free}

    def unconstrained(self, x: dict[str, Array]) -> dict[str, Array]:
        return {f.name: f.to_unconstrained(jnp.asarray(x[f.name], dtype=float)) for f in self.free}

    @property
    def least_squares(self) -> bool:
        """Whether the loss is half a sum of squared residuals (Levenberg-Marquardt applies)."""
        return self.observation is None or self.observation.least_squares

    def parameters(self, x: dict[str, Array]) -> dict[str, Array]:
        """The model's parameters at natural free values `x` (the free and the
        condition-specific ones set)."""
        params = dict(self.params)
        for f in self.free:
            if f.kind == "params":
                params[f.key] = x[f.name]
        for key, name in self.aliases:
            params[key] = x[name]
        return params

    def _start(self, params: dict[str, Array], x: dict[str, Array]) -> Any:
        """The initial values at natural free values `x` (a state vector after a
        preequilibration)."""
        initial = dict(self.initial) if isinstance(self.initial, dict) else self.initial
        if self.static_initial is not None:
            initial = self.static_initial.value
        for f in self.free:
            if f.kind == "initial":
                initial[f.key] = x[f.name]
        if self.preequilibration is not None:
            free_initial = [f.key for f in self.free if f.kind == "initial"]
            return self.preequilibration.start(
                self.model, self.solver, params, initial, x, free_initial
            )
        return initial

    def simulate(self, x: dict[str, Array], t: Array | np.ndarray) -> sim.Trajectory:
        params = self.parameters(x)
        initial = self._start(params, x)
        solver = self.solver if self.static_solver is None else self.static_solver
        return sim.simulate(self.model, params, t, initial=initial, solver=solver)

    def predict(self, x: dict[str, Array]) -> dict[str, Array]:
        """Predicted observables at the observation times for natural values `x`.

        With `forward_sensitivity`, reverse-mode gradients of the prediction are built
        from its forward-mode Jacobian (one solve carrying a tangent per free quantity)
        instead of backpropagating through the solver's steps: for a handful of free
        quantities this is several times cheaper."""
        if self.forward_sensitivity:
            return _predict_by_forward_sensitivity(x, self)
        return self._predict(x)

    def _predict(self, x: dict[str, Array]) -> dict[str, Array]:
        traj = self.simulate(
            x, self.t_sim if self.fixed_times is None else np.asarray(self.fixed_times)
        )
        return {name: traj.observables[name][self.skip : self.end] for name in self._outputs}

    @property
    def _outputs(self) -> tuple[str, ...]:
        """The model observables predicted at the data's times."""
        return tuple(self.observed) if self.observation is None else self.observation.outputs

    def _unflatten(self, theta: Array) -> dict[str, Array]:
        return {f.name: theta[i] for i, f in enumerate(self.free)}

    def _predict_with_sensitivities(self, x: dict[str, Array]) -> tuple[dict, dict]:
        """ODE predictions and their Jacobian by the forward sensitivity equations."""
        names = [f.name for f in self.free]
        theta = jnp.stack([jnp.asarray(x[n], dtype=float) for n in names])
        model = self.model

        def y0_of(v):
            params = self.parameters(self._unflatten(v))
            initial = self._start(params, self._unflatten(v))
            return (
                initial
                if self.preequilibration is not None
                else model.initial_state(initial, params)
            )

        def field(t, y, v):
            return model.vector_field(t, y, self.parameters(self._unflatten(v)))

        sol = self.solver.solve_sensitivities(
            field, self.t_sim, y0_of(theta), theta, jax.jacfwd(y0_of)(theta)
        )
        eye = jnp.eye(theta.shape[0], dtype=theta.dtype)

        def observe(t, y, sens):
            def obs(yy, v):
                values = model.observables(t, yy, self.parameters(self._unflatten(v)))
                return {name: values[name] for name in self._outputs}

            def column(s, e):
                return jax.jvp(obs, (y, theta), (s, e))[1]

            return obs(y, theta), jax.vmap(column, in_axes=(1, 0), out_axes=-1)(sens, eye)

        values, derivs = jax.vmap(observe)(self.t_sim, sol.ys, sol.sensitivities)
        pred = {name: values[name][self.skip : self.end] for name in self._outputs}
        jacobian = {
            name: {n: derivs[name][self.skip : self.end, ..., i] for i, n in enumerate(names)}
            for name in self._outputs
        }
        return pred, jacobian

    def values(
        self, x: dict[str, Array], predicted: dict[str, Array] | None = None
    ) -> dict[str, Array]:
        """What the formulas of the observation models read at natural values `x`: the
        parameters, the free quantities that are not the model's, the predicted
        observables (`predicted`, when already computed) and `t`, at the data's times."""
        values = {
            **self.parameters(x),
            **{f.name: x[f.name] for f in self.free if f.kind == "extra"},
        }
        values.update(self.predict(x) if predicted is None else predicted)
        values["t"] = self.t_sim[self.skip : self.end]
        return values

    def curves(
        self,
        x: dict[str, Array],
        t: Array | np.ndarray,
        observables: dict[str, Array] | None = None,
    ) -> dict[str, Array]:
        """The model's observables at times `t` (`observables`, when already computed),
        and with observation models the prediction of each observed quantity (a
        formula's by its observable's name)."""
        out = dict(self.simulate(x, t).observables if observables is None else observables)
        if self.observation is not None:
            values = {
                **self.parameters(x),
                **{f.name: x[f.name] for f in self.free if f.kind == "extra"},
                **out,
                "t": jnp.asarray(t),
            }
            for o in self.observation.observed:
                h = o.prediction(values)[0]
                # (a formula of parameters alone is one number: the same at every time)
                out[o.name] = h if jnp.ndim(h) else jnp.broadcast_to(h, jnp.shape(t))
        return out

    def predict_and_curves(
        self, x: dict[str, Array], t: np.ndarray
    ) -> tuple[dict[str, Array], dict[str, Array]]:
        """`predict(x)` and `curves(x, t)` (concrete `t` in the span of the data's
        times) from one ODE solve saved at both sets of times: an ODE solve takes the
        same steps whatever its save times and fills them from its dense output, so
        each value is the one a solve of its own times gives (to rounding; tested),
        and a fit's end compiles one program where the two took two. Other families
        (fixed save times, frames on a step grid) solve twice."""
        if self.fixed_times is not None or not isinstance(self.solver, OdeSolver):
            return self._predict(x), self.curves(x, t)
        data_times = np.asarray(self.t_sim)
        times, where = np.unique(
            np.concatenate([data_times, np.asarray(t, dtype=data_times.dtype)]), return_inverse=True
        )
        observables = self.simulate(x, times).observables
        at_data, at_t = where[: len(data_times)], where[len(data_times) :]
        predicted = {
            name: observables[name][at_data][self.skip : self.end] for name in self._outputs
        }
        return predicted, self.curves(x, t, {name: v[at_t] for name, v in observables.items()})

    def terms(self, x: dict[str, Array], observed: dict[str, Array] | None = None) -> Array:
        """The negative log-likelihood of each observation (observation models only; 0
        where missing; weights applied), of `observed` in place of the data if given."""
        return self.observation.terms(
            self.values(x), self.observed if observed is None else observed, self.weight
        )

    def whitened(self, x: dict[str, Array]) -> Array:
        """The residual vector for natural values `x` (see the class docstring; with
        observation models, `inference._observation.Observation.whitened`)."""
        if self.observation is not None:
            r = self.observation.whitened(self.values(x), self.observed, self.weight)
            return jnp.where(jnp.isfinite(r), r, _BAD_RESIDUAL)
        pred = self.predict(x)
        out = []
        for name, y in self.observed.items():
            missing = jnp.isnan(y)
            y_safe = jnp.where(missing, 1.0, y)

            def residual(f, name=name, y_safe=y_safe):
                if self.loss == "lognormal":
                    r = (jnp.log(y_safe) - jnp.log(f)) / self.sigma[name]
                elif self.loss == "normal":
                    r = (y_safe - f) / self.sigma[name]
                else:
                    r = (y_safe - f) / math.sqrt(self.count)
                return jnp.sqrt(self.weight[name]) * r

            r = residual(pred[name])
            # (a failure counts as _BAD_RESIDUAL times 1 + the residual of a prediction of
            # 0, of 1 on the log scale: without a sigma the residuals are in the data's
            # units, where a fixed 1e3 cost less than a prediction off by more, and the
            # optimiser stepped to parameters where the solve fails)
            bad = _BAD_RESIDUAL * (
                1.0
                + jnp.abs(
                    residual(
                        jnp.zeros_like(y_safe)
                        if self.loss != "lognormal"
                        else jnp.ones_like(y_safe)
                    )
                )
            )
            r = jnp.where(jnp.isfinite(r), r, bad)
            out.append(jnp.where(missing, 0.0, r).ravel())
        return jnp.concatenate(out)

    def residuals(self, u: dict[str, Array], args: Any = None) -> tuple[Array, Array]:
        """(residual vector, loss) at unconstrained values `u` (optimistix's fn form)."""
        return self.residuals_at(self.natural(u))

    def residuals_at(self, x: dict[str, Array]) -> tuple[Array, Array]:
        """(residual vector, loss) at natural values `x`. Without `least_squares` the
        loss is the negative log-likelihood (its terms in place of residuals: no
        least-squares optimiser may use them)."""
        if not self.least_squares:
            t = self.terms(x)
            t = jnp.where(jnp.isfinite(t), t, 0.5 * _BAD_RESIDUAL**2)
            return t, jnp.sum(t)
        r = self.whitened(x)
        return r, 0.5 * jnp.sum(r**2)

    def objective(self, u: dict[str, Array], args: Any = None) -> tuple[Array, Array]:
        """(loss, loss) at unconstrained values `u` (a minimiser's fn form)."""
        loss = self.residuals(u)[1]
        return loss, loss


def build_problem(
    config: Config, data: str | Path | None = None
) -> tuple[Problem | Experiments, dict[str, Array], Observations | list[Observations], FitSection]:
    """Validate a config's `[data]` and `[fit]` against its model and build the problem.

    Returns:
        (problem, start values in natural units, observations, fit section).
    """
    section = fit_section(config)
    for name, w in section.weights.items():
        if not w > 0:
            raise config.error(f"fit.weights.{name}", f"expected a positive weight, got {w}")
    if config.spec.experiments is not None:
        problem, start, obs = experiment_problems(config, data, section)
    else:
        problem, start, obs = make_problem(
            config,
            data,
            section.free,
            free_key="fit.free",
            loss=section.loss,
            weights=section.weights,
            bounds=section.bounds,
            # Levenberg-Marquardt builds Jacobians in forward mode; the gradient-based
            # optimisers get their gradients from forward sensitivities.
            gradient="forward"
            if section.optimizer == "levenberg_marquardt"
            else "forward_sensitivity",
        )
    events = bool(getattr(problem.model, "events", tuple)())
    if not problem.least_squares and section.optimizer == "levenberg_marquardt":
        # (Laplace noise, or a sigma that the free quantities change: the likelihood is
        # no sum of squares; BFGS minimises it unless the config asked otherwise)
        if "optimizer" in (config.spec.fit or {}):
            raise config.error(
                "fit.optimizer",
                "levenberg_marquardt needs least squares: normal noise with sigmas that no free "
                "quantity changes; use bfgs or adam with these noise models",
            )
        section = section.model_copy(update={"optimizer": "bfgs"})
        problem = _replace(problem, forward_sensitivity=True)
    if section.optimizer != "levenberg_marquardt" and events:
        # (gradients through event times are forward mode: the event loop has no
        # reverse-mode derivative, which BFGS and Adam would ask for)
        key = "fit.optimizer" if "optimizer" in (config.spec.fit or {}) else "data.observables"
        raise config.error(
            key,
            "a model with events is fitted by levenberg_marquardt (normal noise with given "
            "sigmas); "
            "gradients through its event times are forward mode, and bfgs and adam need reverse "
            "mode",
        )
    return problem, start, obs, section


def make_problem(
    config: Config,
    data: str | Path | None,
    free_names: list[str],
    *,
    free_key: str,
    loss: str = "normal",
    weights: dict[str, float] | None = None,
    bounds: dict[str, list[float]] | None = None,
    gradient: Literal["forward", "forward_sensitivity", "reverse"] = "forward_sensitivity",
    extras: dict[str, Extra] | None = None,
    aliases: dict[str, str] | None = None,
    observation_models: bool = False,
    check_count: bool = True,
) -> tuple[Problem, dict[str, Array], Observations]:
    """The calibration problem of a config: its model, data and free quantities.

    Arguments:
        config: with a `[data]` section.
        data: a file that replaces `data.file`.
        free_names: parameter names, `initial.<component>` names and the names of
            free quantities that are not the model's (`extras`).
        free_key: the config key that lists them (for error messages).
        loss, weights, bounds: see `[fit]`.
        gradient: how derivatives of ODE predictions are taken: `forward` (forward
            mode, for Jacobians), `forward_sensitivity` (forward mode inside, usable by
            reverse-mode `jax.grad`: fast for a few free quantities), `reverse` (the
            config's adjoint, for many free quantities such as network weights).
        extras: the free quantities that are not the model's (default: those the
            observation models of `[data]` read).
        aliases: condition-specific parameters (model parameter -> free quantity).
        observation_models: describe the data by observation models even when every
            observable is a plain dataset path (`inference._observation`).
        check_count: refuse data with fewer observations than free quantities (an
            experiment's data need not determine them alone).
    """
    weights = weights or {}
    bounds = bounds or {}
    aliases = aliases or {}
    model = build_model(config)
    specs = (
        None
        if config.spec.data is None
        else observable_specs(config, config.raw["data"], "data", force=observation_models)
    )
    if specs is None:
        obs = load_observations(config, data, model.observable_names)
    else:
        loading = Config({**config.raw, "data": loader_section(config.raw["data"])}, config.path)
        obs = load_observations(
            loading,
            data,
            [
                *model.observable_names,
                *(s.name for s in specs if s.name not in model.observable_names),
            ],
        )
    t0 = config.spec.time.t0
    check_span(config, obs, t0, config.spec.time.t1)
    overrides = []
    if config.spec.time.save is not None or config.spec.time.save_at is not None:
        overrides.append("time.save=2")
        config.raw.get("time", {}).pop("save_at", None)
    own_span = any(
        getattr(config.spec.time, key, None) is not None for key in family_of(model).time_keys
    )
    if (
        config.spec.time.t1 is None and not own_span
    ):  # (a family's own [time] keys, such as MD's steps, give the span)
        last = float(obs.time[-1])
        overrides.append(f"time.t1={last if last > t0 else t0 + 1.0!r}")
    if overrides:
        config = config.with_overrides(overrides)
    setup = sim.setup(config)
    model = setup.model  # with the options its family reads from the config (MD: cutoff, shift)
    solver = setup.solver
    if extras is None:
        extras = free_extras(
            config,
            free_names,
            free_key,
            model,
            dict(setup.params),
            [specs] if specs else [],
            [aliases],
        )
    forward_sensitivity = False
    if isinstance(solver, OdeSolver):
        # Failed trial solves become large residuals, not errors.
        adjoint = solver.adjoint if gradient == "reverse" else "forward"
        solver = dataclasses.replace(solver, throw=False, adjoint=adjoint)
        # (the sensitivity equations do not jump at events: a model with events is
        # differentiated through its solve)
        forward_sensitivity = (
            gradient == "forward_sensitivity" and not getattr(model, "events", tuple)()
        )
    free = []
    start = {}
    seen = set()
    for name in free_names:
        if name in seen:
            raise config.error(free_key, f"{name!r} is listed twice")
        seen.add(name)
        kind, _, key = name.partition(".") if name.startswith("initial.") else ("params", "", name)
        if kind == "initial":
            reason = family_of(model).no_free_initial
            if reason is not None:
                raise config.error(
                    free_key, f"{name!r}: {reason} (fit [params] such as {', '.join(setup.params)})"
                )
            names = (
                list(getattr(model, "state_names", ())) if isinstance(setup.initial, dict) else []
            )
            if key not in names:
                raise config.error(
                    free_key,
                    f"{name!r}: the model has no initial value {key!r} (initial values: "
                    f"{', '.join(names)}).{did_you_mean(key, names)}",
                )
            constraint = getattr(model, "initial_constraint", "real")
            value = (
                setup.initial[key]
                if key in setup.initial
                else model.default_initial(setup.params)[key]
            )
        elif key in extras and key not in setup.params:
            kind, constraint, value = "extra", extras[key].constraint, extras[key].start
        else:
            if key not in setup.params:
                raise config.error(
                    free_key,
                    f"{name!r}: the model has no parameter {key!r} (parameters: "
                    f"{', '.join(setup.params)}).{did_you_mean(key, setup.params)}",
                )
            constraint = model.parameter(key).constraint
            value = setup.params[key]
        transform = _TRANSFORMS[constraint]
        low, high = 0.0, 1.0
        declared = (
            model.parameter(key).bounds
            if kind == "params"
            else (extras[key].bounds if kind == "extra" else None)
        )
        if name in bounds:
            pair = bounds[name]
            if len(pair) != 2 or not pair[0] < pair[1]:
                raise config.error(
                    f"fit.bounds.{name}", f"expected [low, high] with low < high, got {pair}"
                )
            low, high = float(pair[0]), float(pair[1])
            transform = "logistic"
            if declared is not None and not declared[0] <= low < high <= declared[1]:
                raise config.error(
                    f"fit.bounds.{name}",
                    f"expected bounds within the model's bounds of {name}, [{declared[0]:g}, "
                    f"{declared[1]:g}]; got {pair}",
                )
        elif declared is not None:  # the model's own bounds of the parameter
            low, high = declared
            transform = "logistic"
        value = float(value)
        if (
            transform in ("log", "softplus")
            and value <= 0
            or transform == "logistic"
            and not low < value < high
        ):
            where = {"params": f"params.{key}", "initial": f"initial.{key}"}.get(kind, free_key)
            allowed = f"({low:g}, {high:g})" if transform == "logistic" else constraint
            raise config.error(
                where,
                f"start value {value:g} must lie strictly inside the allowed range of {name} "
                f"({allowed})",
            )
        free.append(Free(name=name, kind=kind, key=key, transform=transform, low=low, high=high))
        start[name] = jnp.asarray(value, dtype=float)
    for name in bounds:
        if name not in seen:
            raise config.error(
                f"fit.bounds.{name}",
                f"{name!r} is not a free quantity (free: {', '.join(free_names)})",
            )
    for name in weights:
        if name not in obs.values:
            raise config.error(
                f"fit.weights.{name}",
                f"{name!r} is not an observed observable (observed: {', '.join(obs.values)})",
            )
    observation = None
    if specs is not None:
        if loss == "mse":
            raise config.error(
                "fit.loss",
                'mse is no likelihood: observables with noise models need loss = "normal" or '
                '"lognormal" (the noise model of those that name none)',
            )
        varying = (
            {f.key for f in free if f.kind == "params"}
            | set(aliases)
            | {f.name for f in free if f.kind == "extra"}
            | set(model.observable_names)
        )
        observation = build_observation(
            config,
            specs,
            model_observables=model.observable_names,
            symbols=[*model.observable_names, *setup.params, "t"],
            free=free_names,
            free_key=free_key,
            varying=varying,
            sigma_data=obs.sigma,
            default_noise="lognormal" if loss == "lognormal" else "normal",
        )
        for o in observation.observed:
            y = obs.values[o.name]
            if o.transformation != "lin" and np.any(y[np.isfinite(y)] <= 0):
                raise DataError(
                    obs.path,
                    next(s.path for s in specs if s.name == o.name),
                    f"a {o.transformation}-scale noise model needs positive observations",
                )
    elif loss == "lognormal":
        for name, y in obs.values.items():
            if np.any(y[np.isfinite(y)] <= 0):
                raise DataError(obs.path, name, "the lognormal loss needs positive observations")
    if check_count and obs.count <= len(free):
        raise DataError(
            obs.path, "", f"{obs.count} observations cannot determine {len(free)} free quantities"
        )
    skip = 0 if obs.time[0] == t0 else 1
    t_sim = jnp.asarray(obs.time if skip == 0 else np.concatenate([[t0], obs.time]))
    end = None
    if (
        t_sim.shape[0] == 1
    ):  # (observed at the start time only: the solve goes on to the span's end)
        t1 = config.spec.time.t1
        t_sim, end = jnp.asarray([t0, t1 if t1 is not None and t1 > t0 else t0 + 1.0]), 1
    md = family_of(model).static_runs  # (solver, initial state and times fixed at compile time)
    solver = family_of(model).fit_solver(dataclasses.replace(setup, solver=solver))
    problem = Problem(
        model=model,
        solver=None if md else solver,
        params=setup.params,
        initial=None if md else setup.initial,
        t_sim=t_sim,
        skip=skip,
        free=tuple(free),
        loss=loss,
        observed={k: jnp.asarray(v) for k, v in obs.values.items()},
        sigma={k: jnp.asarray(obs.sigma.get(k, 1.0)) for k in obs.values},
        weight={k: jnp.asarray(weights.get(k, 1.0)) for k in obs.values},
        count=obs.count,
        forward_sensitivity=forward_sensitivity,
        fixed_times=tuple(float(v) for v in np.asarray(t_sim)) if md else None,
        static_solver=solver if md else None,
        static_initial=_Constant(setup.initial) if md else None,
        observation=observation,
        aliases=tuple(aliases.items()),
        end=end,
    )
    return problem, start, obs


# ----------------------------------------------------------------------------- experiments

EXPERIMENT_KEYS = (
    "name",
    "file",
    "time",
    "time_offset",
    "observables",
    "sigma",
    "initial",
    "params",
    "preequilibrate",
)


class Experiments(eqx.Module):
    """Several experiments of one model that share the free quantities: each its own
    `Problem` (data, initial values, parameter overrides); the residuals are theirs
    concatenated, so the loss (and the likelihood) is their sum. It answers what the
    optimisers and the covariance ask of a `Problem`."""

    problems: tuple[Problem, ...]
    names: tuple[str, ...] = eqx.field(static=True)

    @property
    def free(self):
        return self.problems[0].free

    @property
    def loss(self) -> str:
        return self.problems[0].loss

    @property
    def count(self) -> int:
        return sum(p.count for p in self.problems)

    @property
    def solver(self):
        return self.problems[0].solver

    @property
    def model(self):
        return self.problems[0].model

    def natural(self, u):
        return self.problems[0].natural(u)

    def unconstrained(self, x):
        return self.problems[0].unconstrained(x)

    @property
    def observed(self) -> tuple[dict[str, Array], ...]:
        return tuple(p.observed for p in self.problems)

    @property
    def least_squares(self) -> bool:
        return all(p.least_squares for p in self.problems)

    def whitened(self, x) -> Array:
        return jnp.concatenate([p.whitened(x) for p in self.problems])

    def residuals(self, u, args: Any = None):
        parts = [p.residuals_at(self.natural(u)) for p in self.problems]
        return jnp.concatenate([r for r, _ in parts]), sum(loss for _, loss in parts)

    def objective(self, u, args: Any = None):
        loss = self.residuals(u)[1]
        return loss, loss

    def replace(self, **changes) -> Experiments:
        return Experiments(
            tuple(dataclasses.replace(p, **changes) for p in self.problems), self.names
        )


def _replace(problem, **changes):
    return (
        problem.replace(**changes)
        if isinstance(problem, Experiments)
        else dataclasses.replace(problem, **changes)
    )


def experiment_problems(
    config: Config,
    data,
    section: FitSection,
    gradient: str | None = None,
    *,
    free_key: str = "fit.free",
) -> tuple[Experiments, dict, list[Observations]]:
    """The problems of a config's `[[experiments]]`: each experiment is the config with
    its own `[data]` (file, time, time_offset, observables, sigma) and its `initial` and
    `params` values over the config's; a `params` value that names a free quantity makes
    that parameter condition-specific, and `preequilibrate` runs the model to steady
    state first (`inference._experiments`). When one experiment describes its data by
    observation models, every experiment does (`inference._observation`).

    Arguments:
        section: the free quantities (`free_key` lists them), loss, weights and bounds.
        gradient: as `make_problem`'s (default: by the optimiser).
    """
    experiments = config.spec.experiments
    if config.spec.data is not None:
        raise config.error(
            "data",
            "a config with [[experiments]] gives each experiment's data there; remove [data]",
        )
    if data is not None:
        raise InputError(
            "--data",
            str(data),
            "a config with [[experiments]] names each experiment's file; --data cannot replace "
            "them",
        )
    if not experiments:
        raise config.error("experiments", "expected at least one [[experiments]] table")
    free = section.free
    where_free = "[fit] free" if free_key == "fit.free" else free_key
    model = build_model(config)
    parameters = list(model.parameter_names)
    values = {**model.default_params(), **(config.raw.get("params") or {})}
    names, fixed, aliases, specs = [], [], [], []
    for k, experiment in enumerate(experiments):
        where = f"experiments.{k}"
        unknown = [key for key in experiment if key not in EXPERIMENT_KEYS]
        if unknown:
            raise config.error(
                f"{where}.{unknown[0]}",
                f"unknown key; an experiment has {', '.join(EXPERIMENT_KEYS)}",
            )
        for key in ("initial", "params", "observables", "sigma"):
            if key in experiment and not isinstance(experiment[key], dict):
                raise config.error(f"{where}.{key}", "expected a table (name = value)")
        for name in experiment.get("initial", {}):
            if f"initial.{name}" in free:
                raise config.error(
                    f"{where}.initial.{name}",
                    f"initial.{name} is free ({where_free}): an experiment cannot also fix it",
                )
        own, condition = split_params(
            config, f"{where}.params", experiment.get("params", {}), parameters, free, free_key
        )
        for name in own:
            if name in free:
                raise config.error(
                    f"{where}.params.{name}",
                    f"{name} is free ({where_free}): an experiment cannot also fix it; name a free "
                    f'quantity of its own (params = {{ {name} = "{name}_{k}" }}) to make it '
                    "condition-specific",
                )
        pre = experiment.get("preequilibrate")
        pre_condition = {}
        if isinstance(pre, dict) and isinstance(pre.get("params"), dict):
            pre_condition = split_params(
                config, f"{where}.preequilibrate.params", pre["params"], parameters, free, free_key
            )[1]
        name = str(experiment.get("name", k))
        if not name or "/" in name or name in (".", ".."):
            # (the name is a group of the fit file: /experiments/<name>)
            raise config.error(
                f"{where}.name", f"expected a name that is not empty and has no '/', got {name!r}"
            )
        if name in names:
            raise config.error(f"{where}.name", f"{name!r} names two experiments")
        names.append(name)
        fixed.append(own)
        aliases.append(condition)
        aliases.append(pre_condition)
        specs.append(observable_specs(config, experiment, where))
    with_models = any(s is not None for s in specs)
    if with_models:
        specs = [
            observable_specs(config, experiment, f"experiments.{k}", force=True)
            for k, experiment in enumerate(experiments)
        ]
    extras = free_extras(config, free, free_key, model, values, [s for s in specs if s], aliases)
    problems, observations, start = [], [], None
    for k, experiment in enumerate(experiments):
        where = f"experiments.{k}"
        raw = {key: value for key, value in config.raw.items() if key != "experiments"}
        raw["data"] = {
            key: experiment[key]
            for key in ("file", "time", "time_offset", "observables", "sigma")
            if key in experiment
        }
        raw["initial"] = {**(config.raw.get("initial") or {}), **experiment.get("initial", {})}
        raw["params"] = {**(config.raw.get("params") or {}), **fixed[k]}
        try:
            one = Config(raw, config.path)
            problem, first, obs = make_problem(
                one,
                None,
                free,
                free_key=free_key,
                loss=section.loss,
                weights=section.weights,
                bounds=section.bounds,
                gradient=gradient
                or (
                    "forward"
                    if section.optimizer == "levenberg_marquardt"
                    else "forward_sensitivity"
                ),
                extras=extras,
                aliases=aliases[2 * k],
                observation_models=with_models,
                check_count=False,
            )
        except InputError as e:
            key = e.key
            for prefix, into in (
                ("data.", f"{where}."),
                ("initial.", f"{where}.initial."),
                ("params.", f"{where}.params."),
            ):
                if key.startswith(prefix) and (
                    prefix == "data." or key[len(prefix) :] in experiment.get(prefix[:-1], {})
                ):
                    key = into + key[len(prefix) :]
                    break
            raise type(e)(e.source, key, e.message) from None
        if problem.observation is not None:
            problem = dataclasses.replace(
                problem, observation=problem.observation.rekeyed("data", where)
            )
        if "preequilibrate" in experiment:
            pre = preequilibration(
                config,
                f"{where}.preequilibrate",
                experiment["preequilibrate"],
                problem.model,
                problem.solver,
                base_initial=config.raw.get("initial") or {},
                replaced=experiment.get("initial", {}),
                free=free,
                free_key=free_key,
            )
            problem = dataclasses.replace(problem, preequilibration=pre)
        problems.append(problem)
        observations.append(obs)
        start = first if start is None else start
    count = sum(o.count for o in observations)
    if count <= len(free):
        raise config.error(
            "experiments", f"{count} observations cannot determine {len(free)} free quantities"
        )
    return Experiments(tuple(problems), tuple(names)), start, observations


# ----------------------------------------------------------------------------- optimisers


@eqx.filter_jit
def _optx_init(solver, fn, u, f_struct, aux_struct):
    return solver.init(fn, u, None, {}, f_struct, aux_struct, frozenset())


# Why an optimistix solve stopped, by its public outcome comparison (its message table
# is private).
_OPTIMISER_FAILURES = (
    ("nonlinear_divergence", "the optimiser diverged"),
    ("nonlinear_max_steps_reached", "the optimiser reached its iteration limit"),
    ("max_steps_reached", "the optimiser reached its iteration limit"),
    ("nonfinite", "the loss or its gradient became non-finite"),
    ("nonfinite_input", "the loss or its gradient became non-finite"),
    ("singular", "a linear solve met a singular matrix (parameters the data do not determine?)"),
    ("breakdown", "a linear solve broke down"),
    ("stagnation", "a linear solve stagnated"),
    ("conlim", "a linear solve met an ill-conditioned matrix"),
)


def _optimiser_failure(result) -> str:
    for name, message in _OPTIMISER_FAILURES:
        if hasattr(optx.RESULTS, name) and bool(result == getattr(optx.RESULTS, name)):
            return message
    return "the optimiser failed"


@eqx.filter_jit
def _optx_step(solver, fn, u, state):
    u, state, aux = solver.step(fn, u, None, {}, state, frozenset())
    done, result = solver.terminate(fn, u, None, {}, state, frozenset())
    return u, state, aux, done, result


@eqx.filter_jit
def _residuals(problem, u):
    """(residual vector, loss) at `u`, compiled: the loss after each step, and at the
    start also the shapes of the optimiser's function (no separate tracing for them)."""
    return problem.residuals(u)


def _loss(problem, u):
    return _residuals(problem, u)[1]


def _structs(optimizer: str, residuals: Array, loss: Array) -> tuple:
    """(f_struct, aux_struct) of the optimiser's function (`Problem.residuals` for
    Levenberg-Marquardt, `Problem.objective` otherwise) from one value of the residuals."""
    scalar = jax.ShapeDtypeStruct(jnp.shape(loss), jnp.result_type(loss))
    f = (
        jax.ShapeDtypeStruct(jnp.shape(residuals), jnp.result_type(residuals))
        if optimizer == "levenberg_marquardt"
        else scalar
    )
    return f, scalar


def _optimistix(
    problem: Problem | Experiments,
    u0,
    section: FitSection,
    on_step,
    start: int = 0,
    ck: Checkpointer | None = None,
    best=None,
) -> tuple[dict, list[float], bool, str]:
    max_steps = section.max_steps or 200
    if section.optimizer == "levenberg_marquardt":
        solver = optx.LevenbergMarquardt(rtol=section.rtol, atol=section.atol)
        fn = problem.residuals
    else:
        solver = optx.BFGS(rtol=section.rtol, atol=section.atol)
        fn = problem.objective
    residuals, loss = _residuals(problem, u0)
    state = _optx_init(solver, fn, u0, *_structs(section.optimizer, residuals, loss))
    u = u0
    history = [float(loss)]
    first = 0
    restored = None if ck is None else ck.restore(start, (u, state))
    if restored is not None:
        first, (u, state), history = restored
        on_step(first, history[-1], skipped=first)
    for i in range(first, max_steps):
        u, state, aux, done, result = _optx_step(solver, fn, u, state)
        history.append(float(_loss(problem, u)))
        on_step(i + 1, history[-1])
        if bool(done):
            ok = bool(result == optx.RESULTS.successful)
            return u, history, ok, "converged" if ok else _optimiser_failure(result)
        if ck is not None and ck.due(i + 1):
            ck.write(start, i + 1, (u, state), history, best)
        if ck is not None:
            ck.safe_point(start, i + 1, (u, state), history, best)
    return u, history, False, f"max_steps ({max_steps}) reached before convergence"


@eqx.filter_jit
def _adam_step(problem, opt, u, opt_state):
    loss, grad = jax.value_and_grad(lambda v: problem.residuals(v)[1])(u)
    # optax mixes Python scalars and int32 step counts; it needs standard promotion.
    with jax.numpy_dtype_promotion("standard"):
        updates, opt_state = opt.update(grad, opt_state, u)
    return optax.apply_updates(u, updates), opt_state, loss


def _adam(
    problem: Problem | Experiments,
    u0,
    section: FitSection,
    on_step,
    start: int = 0,
    ck: Checkpointer | None = None,
    best=None,
) -> tuple[dict, list[float], bool, str]:
    max_steps = section.max_steps or 1000
    opt = optax.adam(section.learning_rate)
    opt_state = opt.init(u0)
    u = u0
    history = []
    first = 0
    restored = None if ck is None else ck.restore(start, (u, opt_state))
    if restored is not None:
        first, (u, opt_state), history = restored
        on_step(first, history[-1] if history else float("nan"), skipped=first)
    for i in range(first, max_steps):
        previous = u
        u, opt_state, loss = _adam_step(problem, opt, u, opt_state)
        history.append(float(loss))
        on_step(i + 1, history[-1])
        # Adam has no convergence test of its own: it has converged when, as for BFGS,
        # both the loss and the step are within the tolerances (Cauchy criteria).
        if len(history) > 1 and _small_step(history[-2], history[-1], previous, u, section):
            history.append(float(_loss(problem, u)))
            return u, history, True, "converged"
        if ck is not None and i + 1 < max_steps and ck.due(i + 1):
            ck.write(start, i + 1, (u, opt_state), history, best)
        if ck is not None and i + 1 < max_steps:
            ck.safe_point(start, i + 1, (u, opt_state), history, best)
    history.append(float(_loss(problem, u)))
    return (
        u,
        history,
        False,
        f"max_steps ({max_steps}) Adam steps taken before the loss and the step came within "
        "fit.rtol and fit.atol",
    )


def _small_step(
    loss_before: float, loss: float, u_before: dict, u: dict, section: FitSection
) -> bool:
    """Whether one optimiser step changed the loss and every unconstrained value by no
    more than atol + rtol times their size."""
    if abs(loss - loss_before) > section.atol + section.rtol * abs(loss):
        return False
    return all(
        float(jnp.max(jnp.abs(u[k] - u_before[k])))
        <= section.atol + section.rtol * float(jnp.max(jnp.abs(u[k])))
        for k in u
    )


# ----------------------------------------------------------------------------- results


@dataclasses.dataclass
class FitResult(Result):
    """A finished calibration.

    Attributes:
        names: the free quantities, in config order.
        estimate: name -> fitted value (natural units).
        stderr: name -> standard error from the Gauss-Newton covariance.
        covariance: [p, p] covariance of the estimates (order of `names`).
        loss_history: loss (half the sum of squared whitened residuals) per iteration.
        converged, message: how the optimiser ended.
        time, prediction: the fitted model on a fine grid over the simulated span.
        observations: the data that was fitted.
        warnings: lines telling what makes the estimates or their errors doubtful
            (`fit_warnings`), each with what to try.
    """

    model: str
    config: str
    names: list[str]
    estimate: dict[str, float]
    stderr: dict[str, float]
    covariance: np.ndarray
    loss_history: np.ndarray
    converged: bool
    message: str
    time: np.ndarray
    prediction: dict[str, np.ndarray]
    observations: Observations
    seed: int | None = None
    objective: float = float("nan")
    starts_objective: np.ndarray | None = None
    starts_estimate: dict[str, np.ndarray] | None = None
    starts_converged: np.ndarray | None = None
    # name -> (time, prediction, observations) of each experiment ([[experiments]])
    experiments: dict[str, tuple[np.ndarray, dict[str, np.ndarray], Observations]] | None = None
    warnings: list[str] = dataclasses.field(default_factory=list)
    # the digests of the files the fit read (`sim._identity`, JSON); "" when unknown
    inputs: str = ""

    def to_xarray(self):
        """An `xarray.Dataset`: `estimate`, `stderr` and `covariance` over `parameter`
        (and `parameter_2`), the fitted model's `prediction_<name>` over `time`, the fitted
        data `data_<name>` over `data_time` (model time), `loss_history` over `iteration`.

        Raises:
            ImportError: xarray is not installed.
        """
        import xarray as xr

        def trailing(name: str, value: np.ndarray) -> list[str]:
            return [f"{name}_axis_{i}" for i in range(value.ndim - 1)]

        data: dict[str, tuple] = {
            "estimate": ("parameter", np.array([self.estimate[n] for n in self.names])),
            "stderr": ("parameter", np.array([self.stderr[n] for n in self.names])),
            "covariance": (("parameter", "parameter_2"), np.asarray(self.covariance)),
            "loss_history": ("iteration", np.asarray(self.loss_history)),
        }
        for name, value in self.prediction.items():
            value = np.asarray(value)
            data[f"prediction_{name}"] = (["time", *trailing(name, value)], value)
        for name, value in self.observations.values.items():
            value = np.asarray(value)
            data[f"data_{name}"] = (["data_time", *trailing(name, value)], value)
        coords = {
            "parameter": list(self.names),
            "parameter_2": list(self.names),
            "time": np.asarray(self.time),
            "data_time": np.asarray(self.observations.time),
        }
        attrs = {
            "model": self.model,
            "config": self.config,
            "converged": int(self.converged),
            "message": self.message,
        }
        return xr.Dataset(
            data,
            coords=coords,
            attrs={**attrs, **({"seed": self.seed} if self.seed is not None else {})},
        )

    def write(self, f: h5py.File) -> None:
        """The fit layout (docs/architecture.md, File layouts) in `f`."""
        write_root_attrs(
            f, format="simjax.fit", model=self.model, config=self.config, seed=self.seed
        )
        if self.inputs:
            f.attrs["inputs"] = self.inputs
        write_group(f, "estimate", self.estimate)
        write_group(f, "stderr", self.stderr)
        f.create_dataset("loss_history", data=self.loss_history)
        f.create_dataset("time", data=self.time)
        write_group(f, "prediction", self.prediction)
        f["objective"] = self.objective
        for name, (t, prediction, obs) in (self.experiments or {}).items():
            group = f.require_group(f"experiments/{name}")
            group.create_dataset("time", data=t)
            write_group(group, "prediction", prediction)
            group.create_dataset("data/time", data=obs.time)
            write_group(group["data"], "observables", obs.values)
        if self.starts_objective is not None:
            write_group(
                f,
                "starts",
                {
                    "objective": self.starts_objective,
                    "converged": np.asarray(self.starts_converged, dtype=np.int8),
                },
            )
            write_group(f["starts"], "estimate", self.starts_estimate)
        cov = f.create_dataset("covariance", data=self.covariance)
        cov.attrs["names"] = self.names
        data = f.create_group("data")
        data.create_dataset("time", data=self.observations.time)
        write_group(data, "observables", self.observations.values)
        f.attrs["converged"] = self.converged
        f.attrs["message"] = self.message

    def table(self) -> list[tuple[str, float, float]]:
        """(name, estimate, standard error) rows."""
        return [(n, self.estimate[n], self.stderr[n]) for n in self.names]


@eqx.filter_jit
def _whitened_jacobian(
    problem: Problem | Experiments, names: tuple[str, ...], vec: Array
) -> tuple[Array, Array]:
    """(Jacobian, value) of the whitened residuals at the natural free values `vec`, by
    forward mode, compiled (one compiled program rather than op-by-op tracing through
    every solver step)."""

    def residuals(v):
        return problem.whitened({n: v[i] for i, n in enumerate(names)})

    return jax.jacfwd(residuals)(vec), residuals(vec)


def _sensitivity_problem(problem: Problem | Experiments) -> Problem | Experiments:
    """`problem` with its ODE solver switched to forward sensitivities, for Jacobians of
    the residuals by forward mode."""
    if isinstance(problem.solver, OdeSolver):
        solver = dataclasses.replace(problem.solver, adjoint="forward")
        problem = _replace(problem, solver=solver, forward_sensitivity=False)
    return problem


def gauss_newton_polish(
    problem: Problem | Experiments, x: dict[str, Array], steps: int = 4
) -> dict[str, Array]:
    """Full Gauss-Newton steps from a converged Levenberg-Marquardt estimate `x`.

    Levenberg-Marquardt accepts a step by comparing two values of the loss, and near the
    minimum those differ by less than their rounding: it stops where the loss is flat to
    rounding, about sqrt(eps) times a standard error from the minimum. A Gauss-Newton step
    solves J^T r = 0 from the Jacobian, which is accurate to eps times its condition. A step
    is kept while it stays in the allowed ranges, does not raise the loss beyond rounding
    and lowers the gradient J^T r; the first that fails ends the polish."""
    names = tuple(f.name for f in problem.free)
    problem = _sensitivity_problem(problem)
    vec = jnp.stack([x[n] for n in names])
    jac, r = (np.asarray(a) for a in _whitened_jacobian(problem, names, vec))
    for _ in range(steps):
        gradient = np.linalg.norm(jac.T @ r)
        step = np.linalg.lstsq(jac, -r, rcond=None)[0]
        if (
            not np.all(np.isfinite(step))
            or np.max(np.abs(step) / np.maximum(np.abs(np.asarray(vec)), 1e-300)) < 1e-15
        ):
            break
        trial = vec + step
        if not all(
            np.isfinite(float(f.to_unconstrained(trial[i]))) for i, f in enumerate(problem.free)
        ):
            break
        jac_t, r_t = (np.asarray(a) for a in _whitened_jacobian(problem, names, trial))
        loss, loss_t = float(r @ r), float(r_t @ r_t)
        if (
            not np.isfinite(loss_t)
            or loss_t > loss * (1 + 1e-12)
            or np.linalg.norm(jac_t.T @ r_t) >= gradient
        ):
            break
        vec, jac, r = trial, jac_t, r_t
    return {**x, **{n: vec[i] for i, n in enumerate(names)}}


def negative_log_likelihood(
    problem: Problem,
    x: dict[str, Array],
    known: set[str],
    predicted: dict[str, Array] | None = None,
) -> float:
    """The negative log-likelihood of the observations at natural values `x`, with
    every normalising constant (the PEtab convention; priors and weights left out).
    normal: sum of log(sqrt(2 pi) sigma) + r^2 / 2; lognormal: the same for log y, plus
    log y (the density of y itself). Observables without a given sigma (not in
    `known`) share one, at its maximum-likelihood value. NaN for the mse loss, which is
    no likelihood. With observation models: the sum of their terms (unweighted).
    `predicted`: `problem.predict(x)`, when already computed."""
    if problem.observation is not None:
        ones = {name: jnp.ones(()) for name in problem.observed}
        return float(
            jnp.sum(problem.observation.terms(problem.values(x, predicted), problem.observed, ones))
        )
    if problem.loss == "mse":
        return float("nan")
    pred = problem.predict(x) if predicted is None else predicted
    total, squares, count = 0.0, 0.0, 0
    for name, y in problem.observed.items():
        y = np.asarray(y, dtype=float)
        ok = np.isfinite(y)
        f = np.broadcast_to(np.asarray(pred[name], dtype=float), y.shape)[ok]
        sigma = np.broadcast_to(np.asarray(problem.sigma[name], dtype=float), y.shape)[ok]
        if problem.loss == "lognormal":
            d = np.log(y[ok]) - np.log(f)
            total += float(np.sum(np.log(y[ok])))
        else:
            d = y[ok] - f
        if name in known:
            total += float(np.sum(np.log(np.sqrt(2 * np.pi) * sigma) + 0.5 * (d / sigma) ** 2))
        else:
            squares += float(np.sum(d**2))
            count += int(ok.sum())
    if count:
        variance = squares / count
        total += 0.5 * count * (np.log(2 * np.pi * variance) + 1.0)
    return float(total)


def observation_models(problem: Problem | Experiments) -> bool:
    """Whether observation models describe the data (every experiment's, when one's do)."""
    return (
        problem.problems[0] if isinstance(problem, Experiments) else problem
    ).observation is not None


def fit_warnings(free: list[Free], estimate: dict[str, float], covariance: np.ndarray) -> list[str]:
    """Lines that tell when a fit's estimates or standard errors are doubtful, each with
    what to try: a free quantity at a bound of its range (within 1e-4 of the range: the
    optimum may lie beyond it), a covariance that is not finite or singular (its
    correlation matrix has an eigenvalue below 1e-10: the data do not determine some
    combination of the quantities, whose standard errors then mean nothing)."""
    out = []
    at_bound = []
    for f in free:
        if f.transform == "logistic":
            margin = 1e-4 * (f.high - f.low)
            value = estimate[f.name]
            if value - f.low <= margin or f.high - value <= margin:
                at_bound.append(f"{f.name} = {value:.6g} in [{f.low:g}, {f.high:g}]")
    if at_bound:
        out.append(
            f"warning: at a bound: {', '.join(at_bound)}; the best fit may lie beyond it: widen "
            "[fit] bounds if the model allows, "
            "or fix the quantity; its standard error assumes an interior optimum"
        )
    names = [f.name for f in free]
    cov = np.asarray(covariance, dtype=float)
    variance = np.diag(cov) if cov.size else np.zeros(0)
    # (a variance that is not positive, a negative one included: the inverse of a
    # singular matrix, rounded)
    if cov.size and (not np.all(np.isfinite(cov)) or not np.all(variance > 0)):
        why = "not finite" if not np.all(np.isfinite(cov)) else "a variance that is not positive"
        out.append(
            f"warning: the covariance of the estimates is singular ({why}): the data do not "
            "determine every free quantity; "
            "fix some, add data, or look at their profiles (sim profile)"
        )
    elif cov.size:
        sd = np.sqrt(variance)
        values, vectors = np.linalg.eigh(cov / np.outer(sd, sd))
        if values[0] < 1e-10:
            weights = np.abs(vectors[:, 0])
            involved = [names[i] for i in np.argsort(-weights) if weights[i] > 0.1]
            out.append(
                "warning: the covariance of the estimates is singular: the data do not determine "
                f"a combination of {', '.join(involved)} "
                "(their standard errors mean nothing); fix one of them, add data, or look at their "
                "profiles (sim profile)"
            )
    return out


def standard_errors(
    problem: Problem | Experiments, x: dict[str, Array], sigma_known: bool
) -> np.ndarray:
    """Gauss-Newton covariance s^2 (J^T J)^-1 of the natural free values at `x`, where J
    is the Jacobian of the whitened residuals; s^2 = RSS / (n - p) unless every observed
    quantity came with its own sigma (then 1). With observation models (they give every
    sigma), J^T J is the expected Fisher information of their noise models."""
    sigma_known = sigma_known or observation_models(problem)
    names = [f.name for f in problem.free]
    vec = jnp.stack([x[n] for n in names])
    problem = _sensitivity_problem(problem)
    jac, r = (np.asarray(a) for a in _whitened_jacobian(problem, tuple(names), vec))
    n, p = problem.count, len(names)
    scale = 1.0 if sigma_known and problem.loss != "mse" else float(np.sum(r**2) / max(n - p, 1))
    if problem.loss == "mse":
        jac = jac * math.sqrt(problem.count)
        scale = float(np.sum(r**2) * problem.count / max(n - p, 1))
    info = jac.T @ jac
    try:
        return scale * np.linalg.inv(info)
    except np.linalg.LinAlgError:
        return np.full((p, p), np.nan)


@checks_as_nan()
def fit(
    config: Config,
    data: str | Path | None = None,
    *,
    progress: bool = False,
    output: str | Path | None = None,
    resume: bool = False,
    devices: int | None = None,
    scheduler: str | None = None,
) -> FitResult | Result:
    """Fit a config's free quantities to its observations (what `sim fit` does).

    Arguments:
        config: with `[data]` (observations) and `[fit]` (free quantities, loss, optimizer).
        data: an HDF5 file that replaces `data.file`.
        progress: show the loss per iteration on the terminal.
        output: write the fit file here when done; meanwhile the optimiser's iteration,
            parameters and state are checkpointed beside it (every `fit.checkpoint_every`
            iterations, default at most every 30 s) in `.<name>.checkpoint`, and a stop
            after the optimiser has ended (in the polish, the standard errors or the
            fitted curves) keeps its end there.
        resume: continue the unfinished fit of `output` from its checkpoint; it ends
            with the estimates of an uninterrupted fit.
        devices: with `fit.starts` > 1, the starts run as one batch split over the
            first N local devices (default: all).
        scheduler: with `fit.starts` > 1, a Dask scheduler address, or `local:N` for a
            local cluster of N worker processes: the starts run in blocks, one task per
            worker thread (`_fit_starts`).

    Returns:
        A `FitResult` with estimates, standard errors, the loss history and the fitted
        prediction; `.save(path)` writes the fit layout. (A config with `[rdf]` and a
        `[data]` without `time` is a fit to a target g(r): `inference._fit_rdf`, whose
        `RdfFitResult` has the same `table`, `loss_history` and `warnings`.)

    Raises:
        ConfigError, DataError: bad config or data (naming the file and key).
        InputError: a checkpoint is there and `resume` is False; `resume` and no
            checkpoint, or one of another config or data (files left as they were); a
            bad `devices` or `scheduler`, or either for a fit of one start.

    Example:
        >>> estimate = fit(sim.load_config("experiments/lynx_hare.toml"))
        >>> estimate.table()
    """
    warn_if_float32("inference.fit")
    from ._fit_rdf import fit_rdf, is_rdf_fit

    if is_rdf_fit(config):  # (a target g(r), fitted by reweighting: `inference._fit_rdf`)
        return fit_rdf(config, data, progress=progress, output=output)
    problem, start, obs, section = build_problem(config, data)
    _check_starts_memory(config, section, len(problem.free), obs)
    for p in problem.problems if isinstance(problem, Experiments) else (problem,):
        if p.observation is not None and any(
            o.sigma_formula is not None for o in p.observation.observed
        ):
            p.observation.check_sigma(config, p.values(start), p.observed, "at the start values")
    n_devices = spread_check(section.starts, devices, scheduler)
    u0 = problem.unconstrained(start)
    # Every start point is drawn up front, so a resumed fit starts where the first did.
    starts = [u0, *_latin_hypercube_starts(problem, u0, section.starts - 1, section.seed)]
    identity = _data_identity(obs)
    if output is None:
        with dask_client(scheduler) as client:
            return _fit(
                config,
                problem,
                start,
                obs,
                section,
                starts,
                identity,
                progress,
                None,
                resume,
                devices=n_devices,
                client=client,
                data=data,
            )
    output = check_output_path(output)
    with exclusive(output), dask_client(scheduler) as client:
        return _fit(
            config,
            problem,
            start,
            obs,
            section,
            starts,
            identity,
            progress,
            output,
            resume,
            devices=n_devices,
            client=client,
            data=data,
        )


def _check_starts_memory(
    config: Config, section: FitSection, free: int, obs: Observations | list[Observations]
) -> None:
    """Refuse, before any start is drawn, `[fit] starts` whose arrays cannot fit in
    memory: per start at least its point, its optimiser's state and its end (3 values
    per free quantity) and its lane of the residuals (one per observed value), float64.

    Raises:
        ConfigError: naming fit.starts (what --starts sets).
    """
    values = sum(
        int(np.size(v))
        for o in (obs if isinstance(obs, list) else [obs])
        for v in o.values.values()
    )
    problem = memory_problem(
        8 * section.starts * (3 * free + values),
        f"{section.starts:,} starts of {free} free quantities and {values:,} observed values",
    )
    if problem:
        raise config.error("fit.starts", f"{problem}; expected fewer starts")


def _data_identity(obs: Observations | list[Observations]) -> str:
    """The digest of a fit's observations (`inference._checkpoint.fingerprint`)."""
    return fingerprint(
        *((o.time, o.values, o.sigma) for o in (obs if isinstance(obs, list) else [obs]))
    )


def _latin_hypercube_starts(
    problem: Problem | Experiments, u0: dict, n: int, seed: int
) -> list[dict]:
    """`n` start points by Latin hypercube sampling: uniform within the bounds for a
    bounded free quantity, normal around the first start (sd 0.5 on the unconstrained
    scale, a factor of about 1.6 for a positive one) for the others."""
    if n <= 0:
        return []
    from scipy.stats import norm, qmc

    cube = qmc.LatinHypercube(d=len(problem.free), seed=seed).random(n)
    starts = []
    for row in cube:
        u = {}
        for j, f in enumerate(problem.free):
            q = float(np.clip(row[j], 1e-9, 1 - 1e-9))
            u[f.name] = jnp.asarray(
                math.log(q / (1 - q))
                if f.transform == "logistic"
                else float(u0[f.name]) + 0.5 * float(norm.ppf(q)),
                dtype=float,
            )
        starts.append(u)
    return starts


def _fit(
    config: Config,
    problem: Problem | Experiments,
    start,
    obs: Observations | list[Observations],
    section: FitSection,
    starts: list,
    identity: str,
    progress: bool,
    output: Path | None,
    resume: bool,
    *,
    devices: int = 1,
    client=None,
    data: str | Path | None = None,
) -> FitResult:
    """`fit` from its problem and start points on, writing `output` (held locked); the
    starts of a multistart fit batched on `devices` local devices or in blocks on the
    Dask cluster of `client` (`_fit_starts`)."""
    run = _adam if section.optimizer == "adam" else _optimistix
    ck = Checkpointer(
        None if output is None else checkpoint_path(output),
        identity,
        config=config.to_toml(),
        resume=resume,
        every=section.checkpoint_every,
        inputs=None if output is None else config_inputs(config, {"--data": data}),
    )
    best = None
    if ck.saved is not None:
        best = ck.restore_best(starts[0])
    # (a checkpoint as of every start: written after the optimiser had ended)
    if best is None or ck.first_start() < section.starts:
        with Progress(enabled=progress, description=f"fit {section.optimizer}") as bar:
            bar.start(
                total=(section.max_steps or (1000 if section.optimizer == "adam" else 200))
                * section.starts
            )

            def on_step(i, loss, skipped=0):
                bar.advance(skipped or 1)
                bar.describe(f"fit {section.optimizer}: step {i}, loss {loss:.6g}")

            if section.starts == 1:
                u, history, ok, message = run(problem, starts[0], section, on_step, ck=ck)
                best = (
                    u,
                    history,
                    ok,
                    message,
                    [(history[-1], ok, {n: float(v) for n, v in problem.natural(u).items()})],
                )
            else:
                remote = None if client is None else (client, config, data, identity)
                best = _fit_starts(problem, starts, section, bar, ck, best, devices, remote)
    u, history, ok, message, ends = best

    def safe() -> None:
        # What follows the optimiser (the polish, the likelihoods, the standard errors,
        # the fitted curves) compiles programs of its own, which take long for a model
        # with events; a stop between them keeps the optimiser's end (as if every start
        # were done), and a resume goes on from it.
        ck.safe_point(section.starts, 0, None, [], best)

    safe()
    x = problem.natural(u)
    if ok and section.optimizer == "levenberg_marquardt" and problem.least_squares:
        x = gauss_newton_polish(problem, x)
        safe()
    several = isinstance(problem, Experiments)
    problems, observations = (problem.problems, obs) if several else ((problem,), [obs])
    sigma_known = all(name in o.sigma for o in observations for name in o.values)

    def likelihood(x, predicted=None):
        return sum(
            negative_log_likelihood(p, x, set(o.sigma), pr)
            for p, o, pr in zip(
                problems, observations, predicted or [None] * len(problems), strict=False
            )
        )

    def solved(x, predicted=None):
        return all(
            np.all(np.isfinite(np.asarray(v)))
            for p, pr in zip(problems, predicted or [p.predict(x) for p in problems], strict=False)
            for v in pr.values()
        )

    # The prediction at the data's times and the fitted curves (on a fine grid; at the
    # data's times for fixed-step MD runs) of each problem, from one solve.
    fine = [
        np.linspace(float(p.t_sim[0]), float(p.t_sim[-1]), 201)
        if p.fixed_times is None
        else np.asarray(p.fixed_times)
        for p in problems
    ]
    at_estimate = []
    for p, t in zip(problems, fine, strict=False):
        at_estimate.append(p.predict_and_curves(x, t))
        safe()
    predicted = [a for a, _ in at_estimate]
    objective = likelihood(x, predicted)
    safe()
    no_likelihood = (
        problems[0].observation is None and problems[0].loss == "mse"
    )  # (its objective is NaN)
    # A failed solve gives NaN, which the optimiser saw only as a stand-in residual (from
    # a start where the solve fails it stops there at once); a finite likelihood vouches
    # for the prediction, the mse loss has none to.
    if (no_likelihood or not np.isfinite(objective)) and not solved(x, predicted):
        at = ", ".join(f"{n} = {float(v):.6g}" for n, v in x.items())
        raise sim.SimulationError(
            f"{config.path}: the model's solve fails where the fit ended ({at}): its prediction at "
            "the observation times is "
            "not finite; start the fit where the model can be solved ([params], [initial]), or "
            "narrow [fit] bounds; nothing written"
        )
    safe()
    if not (no_likelihood or np.isfinite(objective)):
        # (the optimiser only saw a large stand-in residual where the likelihood has none)
        raise sim.SimulationError(
            f"{config.path}: the fit ended where the negative log-likelihood is not finite "
            f"({objective}): a sigma that is not "
            "positive at some observation, or a prediction that its noise model cannot take (a log "
            "of a value <= 0); nothing written"
        )
    starts_objective = (
        np.array([likelihood({n: jnp.asarray(v) for n, v in e[2].items()}) for e in ends])
        if section.starts > 1
        else None
    )
    # (a start that ended where the solve fails, or where the likelihood is not finite,
    # has not converged, whatever its optimiser said)
    starts_converged = (
        np.array(
            [
                e[1]
                and bool(
                    solved({n: jnp.asarray(v) for n, v in e[2].items()})
                    if no_likelihood
                    else np.isfinite(f)
                )
                for e, f in zip(ends, starts_objective, strict=False)
            ]
        )
        if section.starts > 1
        else None
    )
    safe()
    cov = standard_errors(problem, x, sigma_known)
    safe()
    names = [f.name for f in problem.free]
    stderr = {
        n: float(np.sqrt(cov[i, i])) if cov[i, i] >= 0 else float("nan")
        for i, n in enumerate(names)
    }

    runs = [
        (t, {k: np.asarray(v) for k, v in curves.items()})
        for t, (_, curves) in zip(fine, at_estimate, strict=False)
    ]
    t_fine, prediction = runs[0]
    problem_0 = problems[0]
    estimate = {n: float(x[n]) for n in names}
    fitted_params = {f.key: estimate[f.name] for f in problem.free if f.kind == "params"}
    fitted_initial = {f.key: estimate[f.name] for f in problem.free if f.kind == "initial"}
    fit_resolved = section.model_dump(exclude_defaults=False)
    fit_resolved = {k: v for k, v in fit_resolved.items() if v not in ({}, None)}
    # (with experiments, the shared values: each experiment's own stay in [[experiments]])
    params = config.raw.get("params") or {} if several else problem_0.params
    initial = (
        (config.raw.get("initial") or {} if several else problem_0.initial)
        if isinstance(problem_0.initial, dict)
        else None
    )
    text = resolved_toml(
        config,
        params={**{k: jsonable(v) for k, v in params.items()}, **fitted_params},
        **(
            {"initial": {**{k: jsonable(v) for k, v in initial.items()}, **fitted_initial}}
            if initial is not None
            else {}
        ),
        fit=fit_resolved,
    )
    result = FitResult(
        model=problem_0.model.name,
        config=text,
        names=names,
        estimate=estimate,
        stderr=stderr,
        covariance=cov,
        loss_history=np.asarray(history),
        converged=ok,
        message=message,
        time=np.asarray(t_fine),
        prediction=prediction,
        observations=observations[0],
        seed=section.seed if section.starts > 1 else None,
        objective=objective,
        starts_objective=starts_objective,
        starts_estimate={n: np.array([e[2][n] for e in ends]) for n in names}
        if starts_objective is not None
        else None,
        starts_converged=starts_converged,
        experiments={
            name: (t, pred, o)
            for name, (t, pred), o in zip(problem.names, runs, observations, strict=False)
        }
        if several
        else None,
        warnings=fit_warnings(list(problem.free), estimate, cov),
        inputs="" if ck.inputs is None else ck.inputs.inputs_json(),
    )
    if output is not None:
        result.save(output)
        ck.finish()
    return result


# ----------------------------------------------------------------------------- multistart


def _fit_starts(
    problem: Problem | Experiments,
    starts: list[dict],
    section: FitSection,
    bar: Progress,
    ck: Checkpointer,
    best,
    devices: int,
    remote,
) -> tuple:
    """Every start of a multistart fit not finished before a checkpoint, batched
    (`inference._multistart`). In this process: the starts as one batch split over
    `devices` local devices, every start stepped by the optimiser at once until each
    stops, checkpointed round by round. With `remote` = (Dask client, config, data,
    data identity): in blocks of consecutive starts, one task per worker thread
    (`worker_starts`), checkpointed as each block comes back in start order.

    Returns:
        (u, loss history, ok, message) of the best start (the first of the lowest final
        loss) and every start's (final loss, ok, natural values), in start order.
    """
    count, first = len(starts), ck.first_start()
    ends = list(best[4]) if best is not None else []

    def take(u: dict, history: list[float], ok: bool, message: str) -> None:
        nonlocal best
        u = {n: jnp.asarray(v, dtype=float) for n, v in u.items()}
        ends.append((history[-1], ok, {n: float(v) for n, v in problem.natural(u).items()}))
        best = (
            (u, history, ok, message, list(ends))
            if best is None or history[-1] < best[1][-1]
            else (*best[:4], list(ends))
        )

    if remote is None:

        def on_round(i: int, stepped: int, lanes: Lanes) -> None:
            bar.advance(stepped)
            done = int(np.sum(lanes.finished[: count - first]))
            bar.describe(
                f"fit {section.optimizer}: step {i}, {done} of {count - first} starts done"
            )

        for end in _run_starts(
            problem, _stacked(starts[first:]), section, devices, on_round, ck, first, best
        ):
            take(*end)
        return best
    client, config, data, identity = remote
    text, path = config.to_toml(), None if config.path is None else str(Path(config.path).resolve())
    data = None if data is None else str(Path(data).resolve())
    parts = blocks(first, count, block_size(count, client))
    steps = section.max_steps or (1000 if section.optimizer == "adam" else 200)
    bar.describe(
        f"fit {section.optimizer}: {count} starts in {len(parts)} blocks on the Dask cluster"
    )
    # (numpy arrays: a worker decodes them before its JAX is set to float64)
    arguments = [
        (
            text,
            path,
            data,
            identity,
            {n: np.asarray(v) for n, v in _stacked(starts[b.start : b.stop]).items()},
        )
        for b in parts
    ]
    for k, block in in_order(client, worker_starts, arguments):
        for end in block:
            take(*end)
        bar.advance(steps * len(parts[k]))
        if parts[k].stop < count:  # the next block's starts are computed again on resume
            ck.write(parts[k].stop, 0, None, [], best)
            ck.safe_point(parts[k].stop, 0, None, [], best)
    return best


def _stacked(starts: list[dict]) -> dict[str, Array]:
    """Start points (name -> value each) as one batch (name -> [S])."""
    return {
        name: jnp.stack([jnp.asarray(u[name], dtype=float) for u in starts]) for name in starts[0]
    }


def _run_starts(
    problem: Problem | Experiments,
    u: dict[str, Array],
    section: FitSection,
    devices: int,
    on_round,
    ck: Checkpointer | None,
    first: int,
    best,
) -> list[tuple]:
    """The optimiser of `section` run from every start in `u` (name -> [S]) at once, on
    `devices` local devices; with `ck`, checkpointed (as start `first`, carrying `best`
    of the starts before it) and resumed from its checkpoint.

    Returns:
        Each start's (u, loss history, ok, message), as the single-start optimisers
        give them.
    """
    count = len(next(iter(u.values())))
    size = padded(count, devices)
    u = pad(u, size)
    run = _adam_starts if section.optimizer == "adam" else _optimistix_starts
    u, lanes = run(
        problem,
        u,
        count,
        section,
        devices,
        on_round or (lambda i, stepped, lanes: None),
        ck,
        first,
        best,
    )
    return [({n: v[k] for n, v in u.items()}, *lanes.ending(k)) for k in range(count)]


def _unless(finished: Array, new, old):
    """`new`, but `old` in the lanes that had finished (those stay where they stopped)."""
    return jax.tree.map(lambda a, b: jnp.where(finished, b, a) if eqx.is_array(a) else a, new, old)


# The single-start optimisers' compiled pieces (`_residuals`, `_optx_init`, `_optx_step`,
# `_adam_step`) mapped over a batch of starts.


@eqx.filter_jit
def _residuals_starts(problem, u):
    return jax.vmap(lambda v: problem.residuals(v))(u)


@eqx.filter_jit
def _optx_init_starts(solver, fn, u, f_struct, aux_struct):
    return eqx.filter_vmap(lambda v: _optx_init(solver, fn, v, f_struct, aux_struct))(u)


@eqx.filter_jit
def _optx_step_starts(solver, fn, problem, u, state, finished):
    def one(u, state, finished):
        new_u, new_state, _, done, result = _optx_step(solver, fn, u, state)
        new_u, new_state = _unless(finished, (new_u, new_state), (u, state))
        return new_u, new_state, _loss(problem, new_u), done, result

    return eqx.filter_vmap(one)(u, state, finished)


def _restored_round(ck: Checkpointer | None, first: int, count: int, carry) -> tuple[int, Any]:
    """(rounds done, carry) of a batch of starts (its first `count` lanes the starts, the
    rest padding) from its checkpoint, or (0, carry) when there is none: the checkpoint
    keeps the starts without the padding, so the batch may resume on other devices."""
    restored = None if ck is None else ck.restore(first, unpad(carry, count))
    if restored is None:
        return 0, carry
    done, saved, _ = restored
    return done, pad(saved, len(carry[2]["length"]))


def _checkpoint_round(ck: Checkpointer | None, first: int, count: int, i: int, carry, best) -> None:
    """Round i of a batch of starts: a checkpoint when one is due (of the first `count`
    lanes, the starts), and a safe point."""
    if ck is not None and ck.due(i):
        ck.write(first, i, unpad(carry, count), [], best)
    if ck is not None:
        ck.safe_point(first, i, unpad(carry, count), [], best)


def _optimistix_starts(
    problem, u, count: int, section: FitSection, devices: int, on_round, ck, first: int, best
) -> tuple[dict, Lanes]:
    """`_optimistix` for a batch of starts (the first `count` of `u`'s rows; the rest
    padding): one compiled step of every start per round; a start stops as
    `_optimistix` stops it, and stays there while the others go on."""
    max_steps = section.max_steps or 200
    if section.optimizer == "levenberg_marquardt":
        solver, fn = (
            optx.LevenbergMarquardt(rtol=section.rtol, atol=section.atol),
            problem.residuals,
        )
    else:
        solver, fn = optx.BFGS(rtol=section.rtol, atol=section.atol), problem.objective
    residuals, loss = _residuals_starts(problem, u)
    state = _optx_init_starts(solver, fn, u, *_structs(section.optimizer, residuals[0], loss[0]))
    stopped = f"max_steps ({max_steps}) reached before convergence"
    lanes = Lanes(
        len(u[next(iter(u))]),
        max_steps + 1,
        (
            "converged",
            *dict.fromkeys(m for _, m in _OPTIMISER_FAILURES),
            "the optimiser failed",
            stopped,
        ),
    )
    lanes.record(np.asarray(loss))
    done_rounds, (u, state, saved) = _restored_round(ck, first, count, (u, state, lanes.state()))
    lanes.restore(saved)
    for i in range(done_rounds, max_steps):
        running = lanes.active.copy()
        u, state, loss, done, result = _optx_step_starts(
            solver, fn, problem, *spread((u, state), devices), jnp.asarray(lanes.finished)
        )
        lanes.record(np.asarray(loss))
        for k in np.flatnonzero(np.asarray(done) & running).tolist():
            one = jax.tree.map(lambda a: a[k], result)  # noqa: B023 (called in the loop)
            ok = bool(one == optx.RESULTS.successful)
            lanes.finish(k, ok, "converged" if ok else _optimiser_failure(one))
        on_round(i + 1, int(running.sum()), lanes)
        if lanes.finished.all():
            return u, lanes
        _checkpoint_round(ck, first, count, i + 1, (u, state, lanes.state()), best)
    for k in np.flatnonzero(lanes.active).tolist():
        lanes.finish(k, False, stopped)
    return u, lanes


@eqx.filter_jit
def _adam_step_starts(problem, opt, u, opt_state, finished):
    def one(u, opt_state, finished):
        new_u, new_state, loss = _adam_step(problem, opt, u, opt_state)
        new_u, new_state = _unless(finished, (new_u, new_state), (u, opt_state))
        return new_u, new_state, loss

    return jax.vmap(one)(u, opt_state, finished)


def _adam_starts(
    problem, u, count: int, section: FitSection, devices: int, on_round, ck, first: int, best
) -> tuple[dict, Lanes]:
    """`_adam` for a batch of starts (the first `count` of `u`'s rows; the rest
    padding): one compiled step of every start per round; a start stops as `_adam`
    stops it (`_small_step`), and stays there while the others go on."""
    max_steps = section.max_steps or 1000
    opt = optax.adam(section.learning_rate)
    opt_state = jax.vmap(opt.init)(u)
    stopped = (
        f"max_steps ({max_steps}) Adam steps taken before the loss and the step came within "
        "fit.rtol and fit.atol"
    )
    lanes = Lanes(len(u[next(iter(u))]), max_steps + 1, ("converged", stopped))
    done_rounds, (u, opt_state, saved) = _restored_round(
        ck, first, count, (u, opt_state, lanes.state())
    )
    lanes.restore(saved)
    for i in range(done_rounds, max_steps):
        running = lanes.active.copy()
        previous = u
        u, opt_state, loss = _adam_step_starts(
            problem, opt, *spread((u, opt_state), devices), jnp.asarray(lanes.finished)
        )
        lanes.record(np.asarray(loss))
        before, after = ({n: np.asarray(v) for n, v in w.items()} for w in (previous, u))
        small = [
            k
            for k in np.flatnonzero(running).tolist()
            if lanes.length[k] > 1
            and _small_step(
                lanes.history[k, lanes.length[k] - 2],
                lanes.last(k),
                {n: v[k] for n, v in before.items()},
                {n: v[k] for n, v in after.items()},
                section,
            )
        ]
        if small:
            lanes.record(np.asarray(_residuals_starts(problem, u)[1]), small)
            for k in small:
                lanes.finish(k, True, "converged")
        on_round(i + 1, int(running.sum()), lanes)
        if lanes.finished.all():
            return u, lanes
        if i + 1 < max_steps:
            _checkpoint_round(ck, first, count, i + 1, (u, opt_state, lanes.state()), best)
    unfinished = np.flatnonzero(lanes.active).tolist()
    lanes.record(np.asarray(_residuals_starts(problem, u)[1]), unfinished)
    for k in unfinished:
        lanes.finish(k, False, stopped)
    return u, lanes


@functools.lru_cache(maxsize=4)
def _worker_problem(
    config_text: str, config_path: str | None, data: str | None, identity: str
) -> tuple[Problem | Experiments, FitSection]:
    sim.configure_jax()  # (the worker's JAX as the command's: float64, the cache, XLA's options)
    config = Config(tomllib.loads(config_text), config_path)
    problem, _, obs, section = build_problem(config, data)
    if _data_identity(obs) != identity:
        where = (
            "[[experiments]]"
            if config.spec.experiments is not None
            else data or (config.spec.data or {}).get("file", "")
        )
        raise DataError(
            where,
            "",
            "the observations the Dask worker reads differ from those the fit was started with "
            "(every worker must see the same files)",
        )
    return problem, section


def worker_starts(
    config_text: str,
    config_path: str | None,
    data: str | None,
    identity: str,
    u: dict[str, np.ndarray],
) -> list[tuple]:
    """One block of a multistart fit, run on a Dask worker: the problem built from the
    config (once per worker, config, data and data identity), then the block's starts
    `u` (name -> [b], unconstrained) optimised together on the worker's local devices.

    Returns:
        Each start's (u as name -> float, loss history, ok, message).

    Raises:
        DataError: the worker reads other observations than the fit was started with
            (`identity`: `_data_identity`).
    """
    problem, section = _worker_problem(config_text, config_path, data, identity)
    ends = _run_starts(
        problem,
        {n: jnp.asarray(v, dtype=float) for n, v in u.items()},
        section,
        len(jax.devices()),
        None,
        None,
        0,
        None,
    )
    return [
        ({n: float(v) for n, v in x.items()}, history, ok, message)
        for x, history, ok, message in ends
    ]
