"""A batched ODE loop for sweeps: a chunk of runs of one explicit Runge-Kutta method
with adaptive steps, advanced together in one `jax.lax.while_loop`.

`jax.vmap` of `diffrax.diffeqsolve` is correct but slow for a sweep on a CPU: the
batched loop predicate makes every carried array (the [runs, saves, state] output
buffer included) go through a select at every step and at every save, and the
Runge-Kutta stages run in an inner loop per step. Here the loop runs while any run is
unfinished; a finished (or failed) run keeps its state; every array holds the runs on
its minor axis; the stages are unrolled; a save writes only the saved columns (a
scatter, in place), and the step-size control is the arithmetic of diffrax's
`PIDController` on arrays of runs. Each run takes the steps `diffeqsolve` takes for it
(same initial step, same accept/reject decisions, same dense interpolation at the save
times), so its values equal a single solve to rounding. The diffrax details this needs
come from `_diffrax_private`.

Only what this reproduces is taken (`supports`): explicit tableau methods with
first-same-as-last stages (tsit5), adaptive steps with the default PID controller.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import diffrax
import jax
import jax.numpy as jnp
import optimistix as optx

from ._diffrax_private import (
    FIRST_STEP,
    clip_floor,
    clip_to_end,
    error_order,
    linear_rescale,
    tsit5_dense_weights,
)
from ._ode import METHODS, OdeSolver
from ._results import Result

BATCHED_METHODS = tuple(name for name, method in METHODS.items() if method.batched)
SAVE_WINDOW = 3  # save times written per run and pass of the loop
_SOLVERS = {"tsit5": diffrax.Tsit5}


def supports(solver: Any) -> bool:
    """Whether `solve_batch` reproduces `OdeSolver.solve` for this solver."""
    if (
        not isinstance(solver, OdeSolver)
        or solver.method not in BATCHED_METHODS
        or not solver.adaptive
    ):
        return False
    if solver.steps_to_save_times:  # (save times filled from the dense output here)
        return False
    tableau = _SOLVERS[solver.method]().tableau
    controller = solver._controller()
    return (
        tableau.fsal
        and tableau.ssal  # the last stage is the solution: no separate weights to sum
        and isinstance(controller, diffrax.PIDController)
        and controller.pcoeff == 0
        and controller.dcoeff == 0
        and controller.icoeff == 1
        and controller.dtmin is None
        and controller.dtmax is None
        and controller.norm is optx.rms_norm
    )


def _rms(x: jax.Array) -> jax.Array:
    """optimistix.rms_norm over the first axis (the state of each run, [n, B] -> [B]); a
    short axis is summed by elementwise adds of contiguous rows."""
    n = x.shape[0]
    if n > 16:
        return jnp.sqrt(jnp.mean(x**2, axis=0))
    total = x[0] ** 2
    for j in range(1, n):
        total = total + x[j] ** 2
    return jnp.sqrt(total / n)


def _any_nan(x: jax.Array) -> jax.Array:
    """Whether any of the first axis is NaN, [n, B] -> [1, B]."""
    n = x.shape[0]
    if n > 16:
        return jnp.any(jnp.isnan(x), axis=0, keepdims=True)
    out = jnp.isnan(x[0])
    for j in range(1, n):
        out = out | jnp.isnan(x[j])
    return out[None]


@dataclasses.dataclass(frozen=True, eq=False)
class _Steps:
    """A step of an explicit first-same-as-last Runge-Kutta pair and diffrax's PID
    control of it, on arrays of runs (state [n, B], times [B])."""

    f: Callable[[jax.Array, jax.Array], jax.Array]  # f(t [B], y [n, B]) -> dy/dt [n, B]
    c: list[float]
    a_lower: list[list[float]]
    b_error: list[float]
    rtol: Any
    atol: Any
    coeff: float  # 1 / the error order
    safety: Any
    factormin: Any
    factormax: Any
    t1: jax.Array
    floor: jax.Array  # diffrax's clip of a step that ends just short of t1

    @staticmethod
    def of(solver: OdeSolver, vector_field: Callable, f: Callable, t1, floor) -> _Steps:
        """The steps of `solver`'s method and controller for the runs' field `f` (of
        `vector_field` for one run)."""
        method = _SOLVERS[solver.method]()
        tableau = method.tableau
        controller = solver._controller()
        order = error_order(controller, method, diffrax.ODETerm(vector_field))
        return _Steps(
            f=f,
            c=[float(v) for v in tableau.c],
            a_lower=[[float(v) for v in row] for row in tableau.a_lower],
            b_error=[float(v) for v in tableau.b_error],
            rtol=controller.rtol,
            atol=controller.atol,
            coeff=1 / order,
            safety=controller.safety,
            factormin=controller.factormin,
            factormax=controller.factormax,
            t1=t1,
            floor=floor,
        )

    def step(self, tprev, tnext, y, f0):
        """(the state at tnext, its error estimate, the stage increments, f there)."""
        dt = (tnext - tprev)[None]
        fs = [f0]
        yi = y
        for i, row in enumerate(self.a_lower):
            increment = sum(a * fj for a, fj in zip(row, fs, strict=False) if a != 0)
            yi = jax.lax.optimization_barrier(y + increment * dt)
            ti = tnext if self.c[i] == 1 else tprev + self.c[i] * (tnext - tprev)
            fs.append(jax.lax.optimization_barrier(self.f(ti, yi)))
        ks = [fj * dt for fj in fs]
        y_error = sum(b * k for b, k in zip(self.b_error, ks, strict=False) if b != 0)
        return yi, y_error, ks, fs[-1]

    def adapt(self, tprev, tnext, y, y1, y_error):
        """(whether each run's step is accepted, its next step's start and end)."""
        y_error = jnp.where(jnp.isnan(y_error), jnp.inf, y_error)
        nan = _any_nan(y1)
        y1_scale = jnp.where(nan, y, y1)
        scale = self.atol + jnp.maximum(jnp.abs(y), jnp.abs(y1_scale)) * self.rtol
        scaled_error = _rms(y_error / scale)
        keep = scaled_error < 1
        # inv ** coeff as exp(coeff * log(inv)): a CPU's float64 pow is three times slower.
        # The barrier keeps XLA from computing it again in each consumer's fusion.
        power = jax.lax.optimization_barrier(jnp.exp(self.coeff * jnp.log(1 / scaled_error)))
        factor = jnp.clip(
            self.safety * power,
            min=jnp.where(keep, 1, self.factormin),
            max=jnp.where(keep, self.factormax, self.safety),
        )
        dt = (tnext - tprev) * factor
        new_prev = jnp.where(keep, tnext, tprev)
        new_next = new_prev + dt
        new_prev = jnp.minimum(new_prev, self.t1)
        return keep, new_prev, clip_to_end(new_prev, new_next, self.t1, self.floor, keep)


def _interpolate(ta, tb, y_a, ks, t):
    """Tsit5's dense output (diffrax's `_Tsit5Interpolation`) on arrays of runs."""
    w = tsit5_dense_weights(linear_rescale(ta, t, tb))
    return y_a + sum(w[j][None] * ks[j] for j in range(7))


@dataclasses.dataclass(frozen=True, eq=False)
class _Loop:
    """The while loop over the runs' steps: its condition and its body, which takes a
    step of every active run and writes the save times accepted steps passed over.

    The loop carries (state, ys): state = (tprev [B], tnext [B], y [n, B], f at y [n, B],
    the next save index [B], steps [B]); ys [n, T * B] holds save t of run b in column
    t * B + b (runs at the same save index write neighbouring memory).
    """

    steps: _Steps
    ts: jax.Array
    n_saves: int
    batch: int
    max_steps: int
    rows: jax.Array  # arange(B)

    def running(self, state):
        """Per run: whether it is unfinished and within its step budget."""
        tprev, steps = state[0], state[5]
        return (tprev < self.steps.t1) & (steps < self.max_steps)

    def pending(self, saving, tnext, i):
        """Per run: whether save index i is one its accepted step passed over."""
        n_saves = self.n_saves
        return saving & (i < n_saves) & (self.ts[jnp.minimum(i, n_saves - 1)] <= tnext)

    def save(self, ys, index, saving, tprev, tnext, y, ks):
        """(ys, index) after writing up to SAVE_WINDOW save times per run of this step.

        Unrolled (no inner loop). A run with more save times in this step is held: the
        next pass repeats the same step (same values) and writes the next ones, and only
        then moves on."""
        n_saves, batch = self.n_saves, self.batch
        for _ in range(SAVE_WINDOW):
            go = self.pending(saving, tnext, index)
            value = _interpolate(tprev, tnext, y, ks, self.ts[jnp.minimum(index, n_saves - 1)])
            ys = ys.at[
                :, jnp.where(go, index.astype(jnp.int64) * batch + self.rows, n_saves * batch)
            ].set(value, mode="drop")
            index = index + go.astype(index.dtype)
        return ys, index

    def body(self, carry):
        """The loop's carry after one pass."""
        state, ys = carry
        tprev, tnext, y, f0, index, steps = state
        active = (tprev < self.steps.t1) & (steps < self.max_steps)
        y1, y_error, ks, f1 = self.steps.step(tprev, tnext, y, f0)
        keep, new_prev, new_next = self.steps.adapt(tprev, tnext, y, y1, y_error)
        saving = keep & active
        ys, index = self.save(ys, index, saving, tprev, tnext, y, ks)
        moving = active & ~self.pending(saving, tnext, index)
        accept = (saving & moving)[None]
        new = (
            jnp.where(moving, new_prev, tprev),
            jnp.where(moving, new_next, tnext),
            jnp.where(accept, y1, y),
            jnp.where(accept, f1, f0),
            index,
            steps + moving.astype(steps.dtype),
        )
        return new, ys


def solve_batch(
    vector_field: Callable[[Any, jax.Array, dict], jax.Array],
    solver: OdeSolver,
    ts: jax.Array,
    y0: jax.Array,
    swept: dict,
    fixed: dict,
) -> tuple[jax.Array, jax.Array, jax.Array]:
    """Integrate runs b = 0..B-1 of dy/dt = vector_field(t, y, params).

    Arguments:
        vector_field: f(t, y, params) for one run: y [n], params a dict.
        solver: an `OdeSolver` that `supports` accepts.
        ts: save times [T], shared by the runs.
        y0: initial states [B, n].
        swept: params that differ between runs, each leaf [B].
        fixed: params shared by the runs; run b sees `{**fixed, **swept[b]}`.

    Returns:
        ys [n, T, B] (runs on the minor axis; NaN for a run that failed, as `OdeSolver`
        with throw=False), num_steps [B] and the `Result` code [B].
    """
    ts = jnp.asarray(ts, dtype=float)
    t0, t1 = ts[0], ts[-1]
    n_saves = ts.shape[0]
    batch = y0.shape[0]
    floor = clip_floor(t1)
    # The state is held as [n, B] (runs along the minor axis): each component of every
    # run is one contiguous row, so the vector field's arithmetic runs on whole rows.
    y0 = y0.T
    field = jax.vmap(
        lambda t, y, p: vector_field(t, y, {**fixed, **p}), in_axes=(0, 1, 0), out_axes=1
    )

    def f(t, y):
        return field(jnp.broadcast_to(t, (batch,)), y, swept)

    # The first step as diffeqsolve chooses it (its wrapped term gets a fixed first step
    # when dt0 is None), or dt0.
    dt0 = FIRST_STEP if solver.dt0 is None else solver.dt0
    tprev = jnp.full((batch,), t0)
    tnext = jnp.minimum(tprev + jnp.asarray(dt0, dtype=float), t1)
    f0 = f(tprev, y0)
    stepper = _Steps.of(solver, vector_field, f, t1, floor)
    rows = jnp.arange(batch, dtype=jnp.int64)
    loop = _Loop(stepper, ts, n_saves, batch, solver.max_steps, rows)
    ys = jnp.full((y0.shape[0], n_saves * batch), jnp.inf, dtype=y0.dtype)
    state = (
        tprev,
        tnext,
        y0,
        f0,
        jnp.zeros(batch, dtype=jnp.int32),
        jnp.zeros(batch, dtype=jnp.int32),
    )
    state, ys = jax.lax.while_loop(
        lambda carry: jnp.any(loop.running(carry[0])), loop.body, (state, ys)
    )
    tprev, steps = state[0], state[5]
    unfinished = tprev < t1
    result = jnp.where(unfinished, int(Result.max_steps_reached), int(Result.successful))
    ys = jnp.where(unfinished, jnp.nan, ys.reshape((y0.shape[0], n_saves, batch)))
    return ys, steps, result
