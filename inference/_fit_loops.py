"""The optimisation loops of a config fit: Levenberg-Marquardt and BFGS by optimistix,
and Adam by optax, stepped one compiled step at a time (a progress callback and
checkpoints between steps), from one start or from a batch of starts at once (each start
stopped as the single-start loop stops it, and held there while the others go on)."""

from __future__ import annotations

from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optax
import optimistix as optx
from jaxtyping import Array

from sim.core import process_count

from ._checkpoint import Checkpointer
from ._fit_problem import Experiments, Problem
from ._fit_section import FitSection
from ._multistart import Lanes, gathered, pad, padded, spread, unpad


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
    """(u, loss history, ok, message) of Levenberg-Marquardt or BFGS (`section`) from
    `u0`, each step reported to `on_step`; with `ck`, checkpointed as start `start`
    (carrying `best`, the starts before it) and resumed from its checkpoint."""
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
    """(u, loss history, ok, message) of Adam from `u0`, converged when the loss and the
    step come within `fit.rtol` and `fit.atol`; `on_step`, `start`, `ck` and `best` as
    for `_optimistix`."""
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
        u, state, loss, done, result = gathered(
            _optx_step_starts(solver, fn, problem, *_round(u, state, lanes.finished, devices))
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


def _round(u, state, finished: np.ndarray, devices: int) -> tuple:
    """(u, state, finished) of a round of steps, split over `devices` (`spread`); the
    finished flags split too when the devices are several processes' (`--distributed`)."""
    if process_count() > 1:
        return spread((u, state, np.asarray(finished)), devices)
    return (*spread((u, state), devices), jnp.asarray(finished))


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
        u, opt_state, loss = gathered(
            _adam_step_starts(problem, opt, *_round(u, opt_state, lanes.finished, devices))
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
