"""What a fit reports of the optimum it found: the Gauss-Newton polish of a
Levenberg-Marquardt estimate, the negative log-likelihood with every normalising
constant, the Gauss-Newton (Laplace) covariance of the estimates, and the warnings that
tell when estimates or their standard errors are doubtful."""

from __future__ import annotations

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

from ._fit_problem import Experiments, Free, Problem, _fittable, _replace, observation_models


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
    if problem.solver is not None:
        solver = _fittable(problem).forward_mode(problem.solver)
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
