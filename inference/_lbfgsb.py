"""L-BFGS-B from many starts at once: each start a thread whose evaluations are batched
into one compiled `jax.vmap` call per round (`run_batched`, `minimize_batched`), and the
starts as a checkpoint keeps them, resumed by replay (`StartLog`)."""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

from sim.core import DataError, safe_point

from ._checkpoint import Checkpointer
from ._multistart import gathered, padded, spread


@functools.lru_cache(maxsize=8)
def _batched(fn: Callable) -> Callable:
    """`fn` (a value and gradient, an objective) vmapped and compiled, once per
    function (and batch shape)."""
    return jax.jit(jax.vmap(fn))


def run_batched(
    value_and_grad,
    tasks,
    dim: int,
    on_done=None,
    devices: int = 1,
    between: Callable[[int], None] | None = None,
) -> list:
    """Run every task, each in its own thread, with its evaluations batched: a task is a
    function of `ask`, and `ask(x)` gives the value and gradient of `value_and_grad` (a
    JAX function of one point of size `dim`) at x. The points that the tasks wait for
    are evaluated together, by one `jax.vmap`ed compiled call, and handed back (the
    batch keeps its size, one lane per task: tasks that are done repeat their last
    point; padded to a multiple of `devices` and split over the first `devices` local
    devices). A point whose value or gradient is not finite is given a huge value and a
    zero gradient, so that a line search steps back. `on_done(k, result)` reports task k
    as it ends; `between(rounds)` is called between two rounds, with the rounds
    evaluated so far, when every task has taken its answers and waits for the next (or
    has ended): the place to checkpoint, and a safe point (without it, a stop there
    keeps nothing).

    Returns:
        What each task returned; an exception in a task is raised here.
    """
    n = len(tasks)
    batch = _batched(value_and_grad)
    lanes = _Lanes(n, dim, devices)
    threads = [threading.Thread(target=lanes.work, args=(tasks, k), daemon=True) for k in range(n)]
    for thread in threads:
        thread.start()
    try:
        reported = [False] * n
        rounds = 0
        while True:
            waiting, finished = lanes.wait(reported)
            for k in finished:
                reported[k] = True
                if isinstance(lanes.outcome[k], BaseException):
                    raise lanes.outcome[k]
                if on_done is not None:
                    on_done(k, lanes.outcome[k])
            if not waiting:
                break
            if between is None:
                safe_point()  # (an interrupt stops the work between rounds; nothing is written)
            else:
                between(rounds)
            last = lanes.last
            unset = np.isnan(last).any(axis=1)  # (a lane that never asked: any asked point)
            last[unset] = last[waiting[0]]
            values, grads = gathered(batch(spread(jnp.asarray(last), devices)))
            values, grads = np.asarray(values, dtype=float), np.asarray(grads, dtype=float)
            rounds += 1
            lanes.hand_back(waiting, values, grads)
    finally:
        # (an exception, an interrupt or a stop at a checkpoint ends the rounds early:
        # every task still waiting is stopped and joined, none left blocked behind)
        lanes.stop()
        for thread in threads:
            thread.join()
    return lanes.outcome


class _Lanes:
    """The lanes of `run_batched`'s batch, one per task, shared by the tasks' threads
    and the rounds under one lock: the point each task waits for, its answer, each
    lane's last point, and whether each task is done and what it returned."""

    def __init__(self, n: int, dim: int, devices: int):
        self.n = n
        self.lock = threading.Condition()
        self.asked: list = [None] * n  # the point task k waits for
        self.answer: list = [None] * n
        self.last = np.full((padded(n, devices), dim), np.nan)  # (lanes beyond n: padding)
        self.done = [False] * n
        self.outcome: list = [None] * n
        # (set when the rounds end: a task still waiting is stopped, not left)
        self.stopped = False

    def ask(self, k: int, x):
        """Task k's evaluation at x: the answer of the round that evaluates it."""
        with self.lock:
            self.asked[k] = np.array(x, dtype=float)
            self.lock.notify_all()
            while self.answer[k] is None and not self.stopped:
                self.lock.wait()
            if self.stopped:
                raise _Stopped
            f, g = self.answer[k]
            self.answer[k] = None
        return f, g

    def work(self, tasks, k: int) -> None:
        """Task k, run in its own thread: what it returns or raises is its outcome."""
        try:
            self.outcome[k] = tasks[k](lambda x: self.ask(k, x))
        except BaseException as e:  # (handed to the caller's thread)
            self.outcome[k] = e
        with self.lock:
            self.done[k] = True
            self.lock.notify_all()

    def wait(self, reported: list[bool]) -> tuple[list[int], list[int]]:
        """Wait until every task waits for an answer or has ended: (the tasks waiting,
        their points now their lanes' last; the tasks ended and not yet `reported`)."""
        n = self.n
        with self.lock:
            while not all(self.done[k] or self.asked[k] is not None for k in range(n)):
                self.lock.wait()
            waiting = [k for k in range(n) if self.asked[k] is not None]
            for k in waiting:
                self.last[k] = self.asked[k]
            finished = [k for k in range(n) if self.done[k] and not reported[k]]
        return waiting, finished

    def hand_back(self, waiting: list[int], values: np.ndarray, grads: np.ndarray) -> None:
        """The round's values and gradients to the tasks `waiting` (a huge value and a
        zero gradient where either is not finite)."""
        with self.lock:
            for k in waiting:
                ok = np.isfinite(values[k]) and np.all(np.isfinite(grads[k]))
                self.answer[k] = (
                    (float(values[k]), grads[k]) if ok else (1e300, np.zeros_like(grads[k]))
                )
                self.asked[k] = None
            self.lock.notify_all()

    def stop(self) -> None:
        """Stop every task still waiting (`_Stopped` in its `ask`)."""
        with self.lock:
            self.stopped = True
            self.lock.notify_all()


class _Stopped(BaseException):
    """Raised in a task's `ask` when `run_batched` ends before the task (not an error of
    the task's own, so a BaseException that the optimiser does not catch)."""


def _lbfgsb(
    ask,
    x0,
    lower,
    upper,
    max_steps: int,
    fixed: dict[int, float] | None = None,
    trust: float | None = None,
):
    """L-BFGS-B within [lower, upper] from x0, with the coordinates in `fixed` held at
    their values (the optimiser sees the others only). With `trust`, each run is
    confined to a box of that half-width around its start, re-centred and run again
    while the optimum found lies on the box's face (L-BFGS-B's first steps, scaled by
    the gradient alone, can otherwise leap to a far bound where the model fails)."""
    from scipy.optimize import minimize

    fixed = fixed or {}
    free = np.array([i for i in range(len(x0)) if i not in fixed], dtype=int)
    base = np.array(x0, dtype=float)
    for i, v in fixed.items():
        base[i] = v

    def full(z):
        x = base.copy()
        x[free] = z
        return x

    def fun(z):
        f, g = ask(full(z))
        return f, g[free]

    if free.size == 0:
        f, _ = ask(base)
        return base, f, bool(f < 1e300)
    z, lo, hi = (
        base[free],
        np.asarray(lower, dtype=float)[free],
        np.asarray(upper, dtype=float)[free],
    )
    steps = max_steps
    for _ in range(50 if trust else 1):
        box_lo, box_hi = (
            (np.maximum(lo, z - trust), np.minimum(hi, z + trust)) if trust else (lo, hi)
        )
        result = minimize(
            fun,
            z,
            jac=True,
            method="L-BFGS-B",
            bounds=list(zip(box_lo, box_hi, strict=False)),
            options={"maxiter": steps},
        )
        moved = result.x
        steps -= result.nit
        on_face = trust and (
            np.any((moved <= box_lo + 1e-9) & (box_lo > lo))
            or np.any((moved >= box_hi - 1e-9) & (box_hi < hi))
        )
        z = moved
        if not on_face or steps <= 0 or not result.fun < 1e300:
            break
    return full(z), float(result.fun), bool(result.success) and result.fun < 1e300


def minimize_batched(
    value_and_grad,
    points,
    lower,
    upper,
    *,
    max_steps: int = 1000,
    on_done=None,
    devices: int = 1,
    log: StartLog | None = None,
):
    """Minimise a function, given as `value_and_grad` (a JAX function of one point giving
    the value and the gradient), from every row of `points` within the box [lower,
    upper] by L-BFGS-B (scipy), all starts at once (`run_batched`, on `devices` local
    devices).

    With `log` (a `StartLog` of these starts, perhaps read from a checkpoint), the
    starts it holds as finished are not run again, the others replay their stored
    evaluations, and it is checkpointed between rounds (`StartLog.between`). The batch
    keeps one lane per start, finished or not, so it keeps its size and its compiled
    program; a lane computes from its own point only, so a resumed start's evaluations
    are those of the uninterrupted fit, bit for bit (on the same devices).

    Returns:
        ends [S, p], values [S], success [S] (scipy's convergence flag with a finite
        value).
    """
    points = np.asarray(points, dtype=float)
    log = StartLog(len(points), points.shape[1]) if log is None else log

    def task(k: int) -> Callable:
        if log.done[k]:
            return lambda ask: (log.ends[k].copy(), float(log.values[k]), bool(log.success[k]))
        return lambda ask: _lbfgsb(log.asker(k, ask), points[k], lower, upper, max_steps)

    def done(k: int, out) -> None:
        log.finish(k, *out)
        if on_done is not None:
            on_done(k, out[1])

    outcome = run_batched(
        value_and_grad,
        [task(k) for k in range(len(points))],
        points.shape[1],
        done,
        devices,
        between=log.between,
    )
    ends = np.stack([o[0] for o in outcome]) if outcome else np.zeros((0, points.shape[1]))
    return ends, np.array([o[1] for o in outcome]), np.array([o[2] for o in outcome])


class StartLog:
    """The starts of a PEtab multistart fit as its checkpoint keeps them: each finished
    start's end (point, final value with the priors, success flag) and, for each start
    still running, every evaluation it has been given so far (point, value, gradient),
    in order; with `ck`, read from its checkpoint and written to it (`between`,
    `block_done`, `safe_point`).

    scipy's L-BFGS-B keeps its state (the limited-memory pairs, the line search) where
    it cannot be stored, so a running start is resumed by replay: L-BFGS-B runs again
    from the start's point and is handed the stored value and gradient for each point
    it asks for, which are the points it asked for before (the same floating-point
    operations on the same inputs), until the stored evaluations run out; then it asks
    the batched evaluation as any start does. A checkpoint is written between two
    rounds, when every running start has taken every answer it was given and waits
    for the next, so a resumed start takes the steps of the uninterrupted one. Should a
    replayed point differ from the stored one (another scipy), the start goes on from
    there with live evaluations.

    Attributes:
        done [S], ends [S, p], values [S], success [S]: the finished starts' ends.
        log: per start, its evaluations (x, f, g) since it began (none once finished).
        rounds: rounds of batched evaluations the starts have had (the checkpoint's
            iteration; 0 for blocks run on a cluster).
    """

    def __init__(self, count: int, dim: int, ck: Checkpointer | None = None):
        self.count, self.dim, self.ck = count, dim, ck
        self.done = np.zeros(count, dtype=bool)
        self.ends = np.full((count, dim), np.nan)
        self.values = np.full(count, np.nan)
        self.success = np.zeros(count, dtype=bool)
        self.log: list[list[tuple[np.ndarray, float, np.ndarray]]] = [[] for _ in range(count)]
        self.rounds = 0
        self._first_round = 0
        restored = None if ck is None else ck.restore(0, sized=self._template)
        if restored is not None:
            self._restore(*restored[:2])

    def _template(self, shapes: list[tuple[int, ...]]) -> tuple:
        evaluations = shapes[1][0] if len(shapes) > 1 and len(shapes[1]) == 1 else 0
        e, s, p = evaluations, self.count, self.dim
        return (
            np.zeros((e, p)),
            np.zeros(e),
            np.zeros((e, p)),
            np.zeros(s, np.int64),
            np.zeros(s, bool),
            np.zeros((s, p)),
            np.zeros(s),
            np.zeros(s, bool),
        )

    def state(self) -> tuple:
        """The arrays a checkpoint stores: the running starts' evaluations (x [E, p],
        f [E], g [E, p], counts [S]) and the finished starts' ends (done, ends, values,
        success)."""
        entries = [entry for k in range(self.count) for entry in self.log[k]]
        x = np.array([e[0] for e in entries]).reshape(len(entries), self.dim)
        g = np.array([e[2] for e in entries]).reshape(len(entries), self.dim)
        f = np.array([e[1] for e in entries], dtype=float)
        counts = np.array([len(entries) for entries in self.log], dtype=np.int64)
        return (
            x,
            f,
            g,
            counts,
            self.done.copy(),
            self.ends.copy(),
            self.values.copy(),
            self.success.copy(),
        )

    def _restore(self, rounds: int, state: tuple) -> None:
        x, f, g, counts, done, ends, values, success = (np.asarray(a) for a in state)
        if np.any(counts < 0) or int(counts.sum()) != len(f) or np.any(counts[done] != 0):
            raise DataError(
                self.ck.path,
                "state",
                "holds evaluations that do not add up to its starts'; the checkpoint is damaged: "
                "delete it to start over",
            )
        self.done, self.ends, self.values, self.success = (
            done.copy(),
            ends.copy(),
            values.copy(),
            success.copy(),
        )
        offsets = np.concatenate([[0], np.cumsum(counts)])
        self.log = [
            [(x[i].copy(), float(f[i]), g[i].copy()) for i in range(offsets[k], offsets[k + 1])]
            for k in range(self.count)
        ]
        self.rounds = self._first_round = int(rounds)

    def finished_prefix(self) -> int:
        """The number of finished starts before the first unfinished one."""
        return int(np.argmin(self.done)) if not self.done.all() else self.count

    def finish(self, k: int, end, value: float, success: bool) -> None:
        """Start k has ended: its end is kept, its evaluations are no longer needed."""
        self.done[k], self.ends[k], self.values[k], self.success[k] = (
            True,
            np.asarray(end, dtype=float),
            value,
            success,
        )
        self.log[k] = []

    def asker(self, k: int, ask: Callable) -> Callable:
        """`ask` for start k: the stored evaluations first (replayed), then live ones,
        each logged."""
        log = self.log[k]
        replayed = 0

        def ask_k(x):
            nonlocal replayed
            x = np.array(x, dtype=float)
            if replayed < len(log):
                if np.array_equal(log[replayed][0], x):
                    replayed += 1
                    return log[replayed - 1][1], log[replayed - 1][2].copy()
                del log[replayed:]  # (another path than the stored one: live from here)
            f, g = ask(x)
            log.append((x, float(f), np.array(g, dtype=float)))
            replayed = len(log)
            return f, g

        return ask_k

    def _save(self) -> Path | None:
        return None if self.ck is None else self.ck.save(0, self.rounds, self.state(), [])

    def between(self, rounds: int) -> None:
        """Between two rounds of batched evaluations (`rounds` of them in this run): a
        checkpoint when one is due, then a safe point."""
        self.rounds = self._first_round + rounds
        if self.ck is not None and rounds and self.ck.due(self.rounds):
            self._save()
        self.safe_point()

    def block_done(self) -> None:
        """A block of starts came back from a cluster: a checkpoint, then a safe point."""
        self._save()
        self.safe_point()

    def safe_point(self) -> None:
        """Stop here if SIGINT or SIGTERM asked to, with a checkpoint of the starts as
        they are."""
        safe_point(self._save)
