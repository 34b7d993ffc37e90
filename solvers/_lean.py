"""A lean compiled core for explicit Runge-Kutta solves of small ODE systems (tsit5,
dopri5), with forward sensitivities and a differentiable prediction.

`diffrax.diffeqsolve` is general (any solver, controller, adjoint, saving rule, event)
and pays for it at every step: the stages run in an inner loop over a [stages, n]
buffer, the save times in another loop, and the controller, solver and saving states
go through selects and conds that a plain explicit method does not need. For a system
of a few states that bookkeeping, not the vector field, is the time of a solve: on a
CPU every operation XLA cannot fuse with its neighbours costs a fixed overhead, and a
small step is made of little else.

Here one `jax.lax.while_loop` carries a single flat vector z (the state, and the
forward sensitivities packed after it), the time, the proposed end of the step, the
first-same-as-last derivative, the next save index, the save buffer, the step counts
and the result. The stages are unrolled, each one fused operation on the whole of z,
and after an accepted step every save time it passed is filled from the method's dense
output. Only the first `n_error` entries of z (the state) control the step; the rest
ride along. A Lotka-Volterra gradient with six free quantities (a 14-entry z) costs
about a quarter of diffrax's forward-sensitivity solve inside a compiled loop such as
NUTS (experiments/benchmarks/RESULTS.md).

The steps are diffrax's. With `dt0=None` and `PIDController(rtol, atol,
norm=optx.rms_norm)` (the settings of `OdeSolver.solve` for explicit methods),
diffeqsolve starts with a step of 0.01 (`_diffrax_private.FIRST_STEP`), computes the
local error from the method's embedded pair (NaN read as infinite), scales it by
atol + rtol * max(|y0|, |y1|) (by |y0| alone when y1 has a NaN), takes its RMS norm,
accepts a step whose norm is below 1, multiplies the step by 0.9 * norm^(-1/q) (q the error order
diffrax declares for the method) clipped
to [1, 10] after an accepted step and to [0.2, 0.9] after a rejected one, never ends a
step past t1, and stretches a step that would end within 100 ULPs of t1 to end on it (a
rejected one goes half way instead). The same rules and the same arithmetic are done
here, so the same steps are accepted and rejected and the saved values agree to
rounding (tests/solvers/test_lean.py).

One departure, on failure only: once a rejected step shrinks so far that it no longer
advances the time (t + dt == t, or dt is NaN), diffrax can never move again and spins
until `max_steps`; here the solve ends at once, with `nonfinite_state` when the last
error estimate was not finite (the usual cause: a blow-up) and `step_size_too_small`
otherwise. A non-finite error estimate on its own is a rejection, as in diffrax, so a
vector field that is undefined beyond a too-large trial step is still solved.

`lean_solve_sensitivities` carries the forward sensitivities S = dy/dtheta with y
(dS/dt = J_y S + J_theta, as `OdeSolver.solve_sensitivities`), the error control on y
alone, so it takes exactly the steps of the state-only solve; for a Runge-Kutta method
this is the derivative of the discrete solution with its steps held fixed, the
derivative diffrax's own autodiff gives (it stops gradients through the step size).
`lean_predict` is the solve as a function of (y0, theta) whose derivatives (for
`jax.grad`, `jax.jacfwd`, `jax.jvp`) are those sensitivities, computed in one solve.
`lean_solve_differentiable` is the solve with a reverse mode for many parameters (a
neural network's): the accepted steps are recorded and walked back one step's
vector-Jacobian product at a time.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from functools import partial
from typing import Any, NamedTuple

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
from jax.custom_derivatives import SymbolicZero
from jax.flatten_util import ravel_pytree
from jaxtyping import Array, Float, Int

from ._diffrax_private import (
    FIRST_STEP,
    clip_floor,
    clip_to_end,
    linear_rescale,
    tsit5_dense_weights,
)
from ._results import Result

# The PIDController defaults that OdeSolver uses for explicit methods (pcoeff = dcoeff
# = 0, icoeff = 1: the step factor depends on the last error only).
_SAFETY, _FACTORMIN, _FACTORMAX = 0.9, 0.2, 10.0

# Save times filled per step from one masked evaluation of the dense output at every
# save time when the buffer is at most this large (elements); a larger buffer is
# filled one save time at a time in an inner loop.
_MASKED_SAVE_LIMIT = 2048


class _Tableau(NamedTuple):
    """An explicit, first-same-as-last and solution-as-last-stage Runge-Kutta pair."""

    a: tuple[tuple[float, ...], ...]  # rows of the stages after the first
    c: tuple[float, ...]  # their nodes
    b_error: tuple[float, ...]  # weights of the error estimate (one per stage)
    error_order: int  # the controller's exponent is -1 / error_order (diffrax's choice)
    dense: str  # the dense output of diffrax's interpolation class


def _tableau(cls: type, dense: str) -> _Tableau:
    tab = cls.tableau
    # The last stage is evaluated at the solution (ssal) and is the next step's first (fsal).
    assert tab.fsal and tab.ssal and tab.c1 in (None, 0)
    return _Tableau(
        a=tuple(tuple(float(v) for v in row) for row in tab.a_lower),
        c=tuple(float(v) for v in tab.c),
        b_error=tuple(float(v) for v in tab.b_error),
        error_order=cls().error_order(diffrax.ODETerm(lambda t, y, args: y)),
        dense=dense,
    )


_TABLEAUS = {
    "tsit5": _tableau(diffrax.Tsit5, "tsit5"),
    "dopri5": _tableau(diffrax.Dopri5, "dopri5"),
}
_DOPRI5_MID = tuple(float(v) for v in diffrax.Dopri5.interpolation_cls.c_mid)


def _combine(base, coefficients, ks):
    """base + sum_j coefficients[j] * ks[j], summed in order, zero coefficients skipped
    (diffrax's tensordot over the stages adds them as exact zeros)."""
    out = None
    for a, k in zip(coefficients, ks, strict=False):
        if a != 0:
            out = a * k if out is None else out + a * k
    if base is None:
        return out
    return base if out is None else base + out


def _rms_norm(x: Array) -> Array:
    """optimistix.rms_norm of a flat vector, with its arithmetic."""
    if x.size == 1:
        return jnp.abs(x.reshape(()))
    return jnp.sqrt(jnp.dot(x, x, precision=jax.lax.Precision.HIGHEST)) / math.sqrt(x.size)


def _expand(theta: Array, like: Array) -> Array:
    """theta [T] (or a scalar) shaped to broadcast against `like` [T, m] (or [m])."""
    return jnp.reshape(theta, jnp.shape(theta) + (1,) * like.ndim)


def _dense(tableau: _Tableau, z0: Array, z1: Array, ks: list[Array]):
    """The dense output of one step as a function of theta in [0, 1] ([T] or a scalar):
    diffrax's `_Tsit5Interpolation` or, for dopri5, its
    `FourthOrderPolynomialInterpolation`, with the same arithmetic."""
    if tableau.dense == "tsit5":

        def evaluate(theta):
            total = None
            for w, k in zip(tsit5_dense_weights(theta), ks, strict=False):
                term = _expand(w, z0) * k
                total = term if total is None else total + term
            return z0 + total

        return evaluate
    ymid = z0 + _combine(None, _DOPRI5_MID, ks)
    f0, f1 = ks[0], ks[-1]
    coefficients = (
        2 * (f1 - f0) - 8 * (z1 + z0) + 16 * ymid,
        5 * f0 - 3 * f1 + 18 * z0 + 14 * z1 - 32 * ymid,
        f1 - 4 * f0 - 11 * z0 - 5 * z1 + 16 * ymid,
        f0,
        z0,
    )

    def evaluate(theta):
        th = _expand(theta, z0)
        value = coefficients[0]
        for coefficient in coefficients[1:]:  # Horner, as jnp.polyval
            value = value * th + coefficient
        return value

    return evaluate


def _stages(tableau: _Tableau, rhs, t, tnext, z, fz):
    """One step of the pair from t to tnext, given fz = rhs(t, z): (z1, the stage
    increments k_j = h f_j, f at z1)."""
    h = tnext - t
    ks = [fz * h]
    fs, zi = fz, z
    for row, c in zip(tableau.a, tableau.c, strict=False):
        zi = _combine(z, row, ks)
        fs = rhs(tnext if c == 1 else t + c * h, zi)
        ks.append(fs * h)
    return zi, ks, fs


@dataclasses.dataclass(frozen=True, eq=False)  # (hashed by identity: `lax.while_loop` hashes it)
class _Loop:
    """The while loop of `_integrate` over the steps of dz/dt = rhs(t, z), its carry
    (t, tnext, z, f at z, saved [T, m], the next save index, steps, accepted steps, the
    result code, the record of accepted steps: () unless `record`)."""

    rhs: Callable[[Array, Array], Array]
    tableau: _Tableau
    ts: Array
    n_error: int  # the entries of z whose local error controls the step
    rtol: Array
    atol: Array
    max_steps: int
    record: bool
    t1: Array
    floor: Array  # diffrax's clip of a step that ends just short of t1
    index: Array  # arange(T)
    masked: bool  # whether the save times are filled by one masked evaluation a step

    def start(self, t0: Array, z0: Array) -> tuple:
        """The carry at ts[0], which saves z0; the first step of diffrax's choice."""
        dtype, n_saves, max_steps = z0.dtype, self.ts.shape[0], self.max_steps
        saved = jnp.full((n_saves, z0.size), jnp.nan, dtype).at[0].set(z0)
        tnext = jnp.minimum(t0 + FIRST_STEP, self.t1)
        fz = jnp.asarray(self.rhs(t0, z0), dtype)
        zero = jnp.zeros((), jnp.int32)
        log = ()
        if self.record:
            log = (
                jnp.zeros(max_steps, dtype),
                jnp.zeros(max_steps, dtype),
                jnp.zeros((max_steps, z0.size), dtype),
                jnp.full(n_saves, -1, jnp.int32),
            )
        return (t0, tnext, z0, fz, saved, jnp.ones((), jnp.int32), zero, zero, zero, log)

    def running(self, carry: tuple) -> Array:
        """Whether the solve goes on: before t1, within max_steps, no failure."""
        t, steps, result = carry[0], carry[6], carry[8]
        return (t < self.t1) & (steps < self.max_steps) & (result == int(Result.successful))

    def control(self, t, tnext, z, z1, ks, result):
        """(whether the step is accepted, the next step's start and end, the result code:
        a failure where a rejected step no longer advances the time)."""
        n_error, controlled = self.n_error, self.n_error == z.size
        error = _combine(
            None, self.tableau.b_error, ks if controlled else [k[:n_error] for k in ks]
        )
        y, y1 = (z, z1) if controlled else (z[:n_error], z1[:n_error])
        error = jnp.where(jnp.isnan(error), jnp.inf, error)
        y1_scale = jnp.where(jnp.any(jnp.isnan(y1)), y, y1)
        scaled = _rms_norm(
            error / (self.atol + jnp.maximum(jnp.abs(y), jnp.abs(y1_scale)) * self.rtol)
        )
        keep = scaled < 1
        inverse = jax.lax.stop_gradient(1 / scaled)
        factor = jnp.clip(
            _SAFETY * inverse ** (1 / self.tableau.error_order),
            min=jnp.where(keep, 1, _FACTORMIN),
            max=jnp.where(keep, _FACTORMAX, _SAFETY),
        )
        new_t = jnp.where(keep, tnext, t)
        new_next = new_t + (tnext - t) * jax.lax.stop_gradient(factor)
        new_t = jnp.minimum(new_t, self.t1)
        new_next = clip_to_end(new_t, new_next, self.t1, self.floor, keep)
        # (a step that no longer advances the time would never advance again)
        stuck = ~keep & ~(new_next > new_t)
        result = jnp.where(
            stuck,
            jnp.where(
                jnp.isfinite(scaled), int(Result.step_size_too_small), int(Result.nonfinite_state)
            ),
            result,
        ).astype(jnp.int32)
        return keep, new_t, new_next, result

    def save(self, keep, t, tnext, evaluate, saved, idx):
        """(saved, the next save index) with every save time an accepted step from t to
        tnext passed over filled from its dense output `evaluate`."""
        ts, index, n_saves = self.ts, self.index, self.ts.shape[0]
        if self.masked:
            hit = keep & (index >= idx) & (ts <= tnext)
            saved = jnp.where(hit[:, None], evaluate(linear_rescale(t, ts, tnext)), saved)
            return saved, idx + jnp.sum(hit, dtype=jnp.int32)

        def pending(c):
            return keep & (c[1] < n_saves) & (ts[jnp.minimum(c[1], n_saves - 1)] <= tnext)

        def save_one(c):
            buffer, i = c
            return buffer.at[i].set(evaluate(linear_rescale(t, ts[i], tnext))), i + 1

        return jax.lax.while_loop(pending, save_one, (saved, idx))

    def logged(self, log, first, idx, accepted, t, tnext, z):
        """The record after a step from t to tnext that filled save times first..idx-1
        (written at the index of the next accepted step: a rejected step's entry is
        overwritten by the step that follows it)."""
        starts, ends, states, save_step = log
        filled = (self.index >= first) & (self.index < idx)
        return (
            starts.at[accepted].set(t),
            ends.at[accepted].set(tnext),
            states.at[accepted].set(z),
            jnp.where(filled, accepted, save_step),
        )

    def body(self, carry: tuple) -> tuple:
        """The carry after one step (accepted or rejected)."""
        t, tnext, z, fz, saved, idx, steps, accepted, result, log = carry
        z1, ks, f1 = _stages(self.tableau, self.rhs, t, tnext, z, fz)
        keep, new_t, new_next, result = self.control(t, tnext, z, z1, ks, result)
        evaluate = _dense(self.tableau, z, z1, ks)
        first = idx
        saved, idx = self.save(keep, t, tnext, evaluate, saved, idx)
        if self.record:
            log = self.logged(log, first, idx, accepted, t, tnext, z)
        z = jnp.where(keep, z1, z)
        fz = jnp.where(keep, f1, fz)
        return (
            new_t,
            new_next,
            z,
            fz,
            saved,
            idx,
            steps + 1,
            accepted + keep.astype(jnp.int32),
            result,
            log,
        )


def _integrate(
    rhs: Callable[[Array, Array], Array],
    ts: Array,
    z0: Array,
    n_error: int,
    method: str,
    rtol,
    atol,
    max_steps: int,
    record: bool = False,
) -> tuple:
    """The loop: integrate dz/dt = rhs(t, z) for a flat z [m], the step controlled by
    the local error of z[:n_error] alone, saving z at every entry of ts.

    Returns (saved [T, m], num_steps, num_accepted, result code); after a failure the
    save times not reached are NaN. With `record`, also the accepted steps for a
    reverse pass: (their starts [max_steps], ends [max_steps], states at their starts
    [max_steps, m], and for each save time the accepted step that filled it [T], -1
    for ts[0]).
    """
    if method not in _TABLEAUS:
        raise ValueError(
            f"lean solver method must be one of {', '.join(_TABLEAUS)}, got {method!r}"
        )
    if max_steps < 1:
        raise ValueError(f"max_steps must be >= 1, got {max_steps}")
    dtype = jnp.result_type(z0, ts, float)
    z0 = jnp.asarray(z0, dtype)
    ts = jnp.asarray(ts, dtype)
    rtol = jnp.asarray(rtol, dtype)
    atol = jnp.asarray(atol, dtype)
    n_saves = ts.shape[0]
    t0, t1 = ts[0], ts[-1]
    loop = _Loop(
        rhs=rhs,
        tableau=_TABLEAUS[method],
        ts=ts,
        n_error=n_error,
        rtol=rtol,
        atol=atol,
        max_steps=max_steps,
        record=record,
        t1=t1,
        floor=clip_floor(t1),
        index=jnp.arange(n_saves, dtype=jnp.int32),
        masked=n_saves * z0.size <= _MASKED_SAVE_LIMIT,
    )
    carry = jax.lax.while_loop(loop.running, loop.body, loop.start(t0, z0))
    t, _, _, _, saved, _, steps, accepted, result, log = carry
    result = jnp.where(
        (result == int(Result.successful)) & (t < t1), int(Result.max_steps_reached), result
    ).astype(jnp.int32)
    if record:
        return saved, steps, accepted, result, log
    return saved, steps, accepted, result


def lean_solve(
    vector_field: Callable[[Any, Array, Any], Array],
    ts: Float[Array, " T"],
    y0: Float[Array, " n"],
    args: Any = None,
    *,
    method: str = "tsit5",
    rtol: float | Array = 1e-6,
    atol: float | Array = 1e-8,
    max_steps: int = 4096,
) -> tuple[Float[Array, "T n"], Int[Array, ""], Int[Array, ""], Int[Array, ""]]:
    """Integrate dy/dt = vector_field(t, y, args) from ts[0] to ts[-1], saving y at every
    entry of ts, with the steps `OdeSolver(method, rtol, atol, max_steps).solve` takes.

    Arguments:
        vector_field: f(t, y, args) -> dy/dt for a flat float state y [n].
        ts: increasing save times [T]; ts[0] saves y0.
        y0: initial state [n].
        args: passed through to `vector_field`.
        method: `tsit5` or `dopri5`.
        rtol, atol: tolerances of the step-size control (may be traced: changing them
            does not recompile).
        max_steps: bound on the steps taken (accepted and rejected).

    Returns:
        (ys [T, n], num_steps, num_accepted_steps, result): `result` is a `Result` code,
        0 on success; after a failure the save times not reached are NaN.

    Example:
        >>> ys, steps, accepted, result = lean_solve(
        ...     lambda t, y, k: -k * y, jnp.linspace(0.0, 1.0, 5), jnp.ones(1), 2.0
        ... )
    """
    y0 = jnp.asarray(y0)
    return _integrate(
        lambda t, y: vector_field(t, y, args), ts, y0, y0.size, method, rtol, atol, max_steps
    )


def _sensitivity_rhs(vector_field, theta: Array, directions: Array, n: int):
    """The variational system of dy/dt = f(t, y, theta) on the packed vector
    z = (y, S.ravel()) for the m columns of S [n, m]: d(y, S)/dt = (f, J_y S + J_theta E),
    with E [p, m] the parameter direction of each column (a column of I_p for
    d/dtheta_j, zero for d/dy0_j)."""
    m = directions.shape[1]

    def rhs(t, z):
        y, sens = z[:n], z[n:].reshape(n, m)

        def column(s, e):
            return jax.jvp(lambda yy, th: vector_field(t, yy, th), (y, theta), (s, e))[1]

        dsens = jax.vmap(column, in_axes=(1, 1), out_axes=1)(sens, directions)
        return jnp.concatenate([vector_field(t, y, theta), dsens.reshape(-1)])

    return rhs


def _integrate_sensitivities(
    vector_field, ts, y0, theta, sensitivities0, directions, method, rtol, atol, max_steps
):
    """(ys [T, n], sensitivities [T, n, m], num_steps, result) of the packed variational system."""
    n, m = y0.shape[0], directions.shape[1]
    rhs = _sensitivity_rhs(vector_field, theta, directions, n)
    z0 = jnp.concatenate([y0, jnp.asarray(sensitivities0, y0.dtype).reshape(-1)])
    zs, steps, _, result = _integrate(rhs, ts, z0, n, method, rtol, atol, max_steps)
    return zs[:, :n], zs[:, n:].reshape(-1, n, m), steps, result


def lean_solve_sensitivities(
    vector_field: Callable[[Any, Array, Array], Array],
    ts: Float[Array, " T"],
    y0: Float[Array, " n"],
    theta: Float[Array, " p"],
    sensitivities0: Float[Array, "n p"],
    *,
    method: str = "tsit5",
    rtol: float | Array = 1e-6,
    atol: float | Array = 1e-8,
    max_steps: int = 4096,
) -> tuple[Float[Array, "T n"], Float[Array, "T n p"], Int[Array, ""], Int[Array, ""]]:
    """Integrate dy/dt = f(t, y, theta) with its forward sensitivities S = dy/dtheta
    (dS/dt = J_y S + J_theta, `OdeSolver.solve_sensitivities`), the step size controlled
    on y alone: the steps are those of `lean_solve` on y.

    Arguments:
        vector_field: f(t, y, theta) -> dy/dt, y [n], theta [p].
        ts: increasing save times [T].
        y0: initial state [n].
        theta: parameters [p].
        sensitivities0: dy0/dtheta [n, p] (nonzero where theta sets initial values).
        method, rtol, atol, max_steps: as `lean_solve`.

    Returns:
        (ys [T, n], sensitivities [T, n, p], num_steps, result).
    """
    theta = jnp.asarray(theta)
    y0 = jnp.asarray(y0)
    directions = jnp.eye(theta.shape[0], dtype=theta.dtype)
    return _integrate_sensitivities(
        vector_field, ts, y0, theta, sensitivities0, directions, method, rtol, atol, max_steps
    )


def lean_predict(
    vector_field: Callable[[Any, Array, Any], Array],
    ts: Float[Array, " T"],
    y0: Float[Array, " n"],
    theta: Any,
    *,
    method: str = "tsit5",
    rtol: float | Array = 1e-6,
    atol: float | Array = 1e-8,
    max_steps: int = 4096,
) -> Float[Array, "T n"]:
    """The solution ys [T, n] of dy/dt = vector_field(t, y, theta) at ts (as `lean_solve`,
    NaN where a failed solve did not reach), differentiable in y0 and theta.

    Its derivatives (`jax.grad`, `jax.jacfwd`, `jax.jvp`, under `jax.jit` and
    `jax.vmap`) come from the forward sensitivities, integrated in one solve with the
    state on the state's steps; only the columns of the arguments being differentiated
    are integrated. theta may be any pytree of float arrays; the vector field must
    depend on what is differentiated through y0 and theta only (not through values it
    closes over). ts, rtol and atol are not differentiated.
    """
    flat, unravel = ravel_pytree(theta)
    flat_field = lambda t, y, p: vector_field(t, y, unravel(p))  # noqa: E731
    stop = jax.lax.stop_gradient
    return _predict(
        flat_field,
        method,
        max_steps,
        stop(jnp.asarray(ts)),
        jnp.asarray(y0),
        flat,
        stop(jnp.asarray(rtol)),
        stop(jnp.asarray(atol)),
    )


@partial(jax.custom_jvp, nondiff_argnums=(0, 1, 2))
def _predict(vector_field, method, max_steps, ts, y0, theta, rtol, atol):
    ys, _, _, _ = _integrate(
        lambda t, y: vector_field(t, y, theta), ts, y0, y0.size, method, rtol, atol, max_steps
    )
    return ys


def _predict_jvp(vector_field, method, max_steps, primals, tangents):
    ts, y0, theta, rtol, atol = primals
    _, dy0, dtheta, _, _ = tangents
    n, p = y0.shape[0], theta.shape[0]
    with_y0 = not isinstance(dy0, SymbolicZero)
    with_theta = not isinstance(dtheta, SymbolicZero) and p > 0
    if not (with_y0 or with_theta):
        ys = _predict(vector_field, method, max_steps, ts, y0, theta, rtol, atol)
        return ys, jnp.zeros_like(ys)
    # One sensitivity column per differentiated input: d/dy0 (S0 = I, no forcing) and
    # d/dtheta (S0 = 0, forcing J_theta).
    s0, directions, tangent = [], [], []
    if with_y0:
        s0.append(jnp.eye(n, dtype=y0.dtype))
        directions.append(jnp.zeros((p, n), theta.dtype))
        tangent.append(dy0)
    if with_theta:
        s0.append(jnp.zeros((n, p), y0.dtype))
        directions.append(jnp.eye(p, dtype=theta.dtype))
        tangent.append(dtheta)
    ys, sens, _, _ = _integrate_sensitivities(
        vector_field,
        ts,
        y0,
        theta,
        jnp.concatenate(s0, axis=1),
        jnp.concatenate(directions, axis=1),
        method,
        rtol,
        atol,
        max_steps,
    )
    return ys, sens @ jnp.concatenate(tangent)


_predict.defjvp(_predict_jvp, symbolic_zeros=True)


# ----------------------------------------------------------------------------- reverse mode


def lean_solve_differentiable(
    vector_field: Callable[[Any, Array, Any], Array],
    ts: Float[Array, " T"],
    y0: Float[Array, " n"],
    args: Any = None,
    *,
    method: str = "tsit5",
    rtol: float | Array = 1e-6,
    atol: float | Array = 1e-8,
    max_steps: int = 4096,
) -> tuple[Float[Array, "T n"], Int[Array, ""], Int[Array, ""], Int[Array, ""]]:
    """`lean_solve`, differentiable in reverse mode (`jax.grad`, `jax.vjp`) with respect
    to y0, args, the save times and whatever arrays the vector field closes over.

    The derivative is that of the discrete solution with its steps held fixed, as
    backpropagation through diffrax's steps gives it: the solve records its accepted
    steps (start, end, state; at most `max_steps`, so memory grows as max_steps times
    the state's size), and the backward pass walks them from the last to the first,
    taking the vector-Jacobian product of one step (its stages and the dense output at
    the save times it filled) at a time. A step's start moves with ts[0] and the step
    that ends on ts[-1] ends with it. Forward mode (`jax.jvp`) is not defined here (as
    for diffrax's checkpointed adjoint): `lean_predict` gives it.

    Returns:
        As `lean_solve`.
    """
    y0 = jnp.asarray(y0)
    ts = jnp.asarray(ts, jnp.result_type(y0, ts, float))
    field = eqx.filter_closure_convert(vector_field, ts[0], y0, args)
    return _reverse((y0, field, args, ts), rtol, atol, method=method, max_steps=max_steps)


@eqx.filter_custom_vjp
def _reverse(vjp_arg, rtol, atol, *, method, max_steps):
    y0, field, args, ts = vjp_arg
    return _integrate(
        lambda t, z: field(t, z, args), ts, y0, y0.size, method, rtol, atol, max_steps
    )


@_reverse.def_fwd
def _reverse_fwd(perturbed, vjp_arg, rtol, atol, *, method, max_steps):
    y0, field, args, ts = vjp_arg
    saved, steps, accepted, result, log = _integrate(
        lambda t, z: field(t, z, args), ts, y0, y0.size, method, rtol, atol, max_steps, record=True
    )
    return (saved, steps, accepted, result), (accepted, log)


@_reverse.def_bwd
def _reverse_bwd(residuals, grad_obj, perturbed, vjp_arg, rtol, atol, *, method, max_steps):
    accepted, (starts, ends, states, save_step) = residuals
    g = grad_obj[0]
    y0, field, args, ts = vjp_arg
    if g is None:
        return jax.tree.map(lambda leaf: None, vjp_arg)
    tableau = _TABLEAUS[method]
    diff, static = eqx.partition((field, args, ts), eqx.is_inexact_array)
    t0_fixed, t1_fixed = ts[0], ts[-1]

    def step(z, d, k):
        """Step k as a function of its start state and of (field, args, ts): the state at
        its end and the dense output at every save time (only those it filled count)."""
        f, a, times = eqx.combine(d, static)
        # (the step's start moves with ts[0]; the step that ends on ts[-1], with ts[-1])
        t = starts[k] - t0_fixed + times[0]
        tnext = jnp.where(ends[k] == t1_fixed, times[-1], ends[k] - t0_fixed + times[0])
        rhs = lambda tt, zz: f(tt, zz, a)  # noqa: E731
        z1, ks, _ = _stages(tableau, rhs, t, tnext, z, rhs(t, z))
        return z1, _dense(tableau, z, z1, ks)(linear_rescale(t, times, tnext))

    def body(carry):
        k, a, total = carry
        _, vjp = jax.vjp(lambda z, d: step(z, d, k), states[k], diff)
        dz, dd = vjp((a, jnp.where((save_step == k)[:, None], g, 0.0)))
        return k - 1, dz, jax.tree.map(jnp.add, total, dd)

    zero = jax.tree.map(jnp.zeros_like, diff)
    _, a, total = jax.lax.while_loop(
        lambda c: c[0] >= 0, body, (accepted - 1, jnp.zeros_like(y0), zero)
    )
    # (ts[0] saves y0 itself)
    a = a + jnp.where(save_step[0] < 0, g[0], 0.0)
    d_field, d_args, d_ts = total
    return a, d_field, d_args, d_ts
