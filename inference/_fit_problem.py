"""A calibration problem as a value: the free quantities and the transforms onto their
allowed ranges (`Free`), the `Problem` of one data set (predictions, whitened residuals,
the loss, and reverse-mode gradients built from forward sensitivities), and the
`Experiments` of several data sets that share the free quantities. Both are pytrees that
the optimisers, the covariance and the samplers ask the same questions of."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

import sim
from physics import Model
from sim.core import Fittable, family_of

# A residual that cannot be computed (a failed solve, a negative prediction under a
# lognormal loss) counts as at least this many standard deviations: optimisers step away
# from it.
_BAD_RESIDUAL = 1e3


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


def _fittable(problem) -> Fittable:
    """The family of a problem's model, which says how its runs are differentiated."""
    family = family_of(problem.model)
    if not isinstance(family, Fittable):
        raise TypeError(f"the {family.name} family's runs cannot be fitted")
    return family


@eqx.filter_custom_vjp
def _predict_by_forward_sensitivity(x, problem):
    # (The primal is never differentiated, its derivatives are the rule's below: an ODE
    # solve takes an adjoint that the lean core accepts, so the value needs no diffrax
    # solve, whose run-time checks of traced save times keep a program out of the
    # persistent compilation cache.)
    if problem.static_solver is None:
        problem = _replace(problem, solver=_fittable(problem).primal_solver(problem.solver))
    return _values(problem, x)


@_predict_by_forward_sensitivity.def_fwd
def _(perturbed, x, problem):
    # A solver that integrates the sensitivity equations of its model (ODE models and
    # `solvers.OdeSolver`); anything else: forward mode.
    if _fittable(problem).sensitivities(problem.model, problem.solver):
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
        if self.fixed_times is not None or not _fittable(self).dense_saves(self.solver):
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
    """`problem` (a `Problem`, or each of the `Experiments`' problems) with `changes`."""
    return (
        problem.replace(**changes)
        if isinstance(problem, Experiments)
        else dataclasses.replace(problem, **changes)
    )


def observation_models(problem: Problem | Experiments) -> bool:
    """Whether observation models describe the data (every experiment's, when one's do)."""
    return (
        problem.problems[0] if isinstance(problem, Experiments) else problem
    ).observation is not None
