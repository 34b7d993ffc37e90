"""Multistart: many optimisations of one objective from different start points, run
together. What config fits (`inference._fit`) and PEtab fits (`inference._petab_fit`) share:

- the batch: the starts of one block are optimised in lockstep, one compiled call per
  round for all of them (`jax.vmap`), the batch padded to a multiple of the number of
  devices and split over them along its leading axis (`spread`); `Lanes` keeps each
  start's loss history and how it ended (a config fit's optimiser runs every lane
  until it stops; PEtab's L-BFGS-B asks for the batched evaluations through
  `inference._lbfgsb.run_batched`);
- the verdict: how many starts ended at the best objective (`starts_at_best`, within
  `SAME_OPTIMUM`), and the warning when too few did (`few_reached`);
- the blocks: with a Dask scheduler the starts are cut into consecutive blocks
  (`blocks`), one task per block; each worker rebuilds the problem from its files and
  runs its block's batch on its own devices, and the results come back in start order
  (`in_order`), so a fit gathers them as if it had run them itself.

A start's end depends on which block, device or process ran it only through rounding:
its lane only ever reads its own values (padding repeats a start, and its copy is
dropped), but XLA may compile a batch of another size, or split over other devices, to
other last bits (measured: the same bits for the PEtab test problem, 5e-10 relative for
a Levenberg-Marquardt config fit on one device against two).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import PyTree

from sim.core import (
    InputError,
    batch_sharding,
    device_count,
    fetch,
    needs_dask,
    process_count,
    worker_threads,
)

# Two starts whose objectives differ by less than this reached the same optimum (a
# difference in negative log-likelihood far below any statistical threshold).
SAME_OPTIMUM = 0.1
# A multistart fit whose best objective fewer starts than these reached is warned of.
FEW_REACHED = 3
FEW_REACHED_SHARE = 0.1


def starts_at_best(objectives: np.ndarray) -> int | None:
    """How many starts ended within `SAME_OPTIMUM` of the lowest finite objective (the
    negative log-likelihood), the best's own start included; None when no start has a
    finite one (an mse fit has no likelihood)."""
    objectives = np.asarray(objectives, dtype=float)
    finite = objectives[np.isfinite(objectives)]
    if not finite.size:
        return None
    return int(np.sum(finite <= np.min(finite) + SAME_OPTIMUM))


def few_reached(reached: int | None, starts: int) -> list[str]:
    """The warning of a multistart fit whose best objective fewer than `FEW_REACHED`
    starts, or fewer than `FEW_REACHED_SHARE` of them, reached (none for one start)."""
    if reached is None or starts < 2:
        return []
    if reached >= FEW_REACHED and reached >= FEW_REACHED_SHARE * starts:
        return []
    return [
        f"warning: only {reached} of {starts} starts reached the best objective (within "
        f"{SAME_OPTIMUM}): a better optimum may have been missed; run more starts (--starts)"
    ]


def spread_check(starts: int, devices: int | None, scheduler: str | None) -> int:
    """The number of local devices a fit of `starts` starts may use (`devices` checked;
    None: all). `devices` and `scheduler` spread the starts of a multistart fit: a fit of
    one start runs in this process on one device, and asking for more is refused
    rather than ignored.

    Raises:
        InputError: `devices` below 1 or above the devices there are; more than one
            device, or a scheduler, for a fit of one start.
        MissingExtra: a scheduler, and Dask's distributed not installed (the 'dask' extra).
    """
    count = device_count(devices)
    needs_dask(scheduler)
    if starts == 1:
        if scheduler is not None:
            raise InputError(
                "--scheduler",
                scheduler,
                "spreads the starts of a multistart fit over a cluster, and this fit has one start "
                "(ask for more: [fit] starts = N, or --starts N for a PEtab problem)",
            )
        if devices is not None and devices > 1:
            raise InputError(
                "--devices",
                str(devices),
                "spreads the starts of a multistart fit over devices, and this fit has one start "
                "(ask for more: [fit] starts = N, or --starts N for a PEtab problem)",
            )
        return 1
    return count


def padded(count: int, devices: int) -> int:
    """The batch size of `count` starts on `devices` devices: the next multiple."""
    return math.ceil(count / devices) * devices


def pad(tree: PyTree, size: int) -> PyTree:
    """Every array leaf's leading axis extended to `size` by repeating its last row
    (numpy arrays stay numpy arrays)."""

    def one(a):
        if not isinstance(a, (jax.Array, np.ndarray)) or a.shape[0] == size:
            return a
        xp = np if isinstance(a, np.ndarray) else jnp
        return xp.concatenate([a, xp.repeat(a[-1:], size - a.shape[0], axis=0)])

    return jax.tree.map(one, tree)


def unpad(tree: PyTree, count: int) -> PyTree:
    """The first `count` rows of every array leaf (a batch without its padding: what a
    checkpoint keeps, so that a fit may resume on another number of devices)."""
    return jax.tree.map(lambda a: a[:count] if isinstance(a, (jax.Array, np.ndarray)) else a, tree)


def spread(tree: PyTree, devices: int) -> PyTree:
    """The array leaves of a batch split along their leading axis over the first
    `devices` devices (a compiled call on them then runs split the same way);
    unchanged on one device. Over the devices of several processes (`--distributed`)
    every array leaf, host arrays too, is placed from the same values on each process,
    a leaf without a batch axis whole on every device."""
    if devices == 1:
        return tree
    split, whole = batch_sharding(devices)
    if process_count() > 1:
        return jax.tree.map(
            lambda a: (
                jax.device_put(np.asarray(a), split if np.ndim(a) else whole)
                if isinstance(a, (jax.Array, np.ndarray))
                else a
            ),
            tree,
        )
    return jax.tree.map(lambda a: jax.device_put(a, split) if isinstance(a, jax.Array) else a, tree)


def gathered(tree: PyTree) -> PyTree:
    """What a compiled round over the starts returned, as it is in one process; on the host
    of every process when the devices are several processes' (`--distributed`), so that
    every process goes on from the same values."""
    return fetch(tree) if process_count() > 1 else tree


class Lanes:
    """Each start's progress in a batch optimised in lockstep: its loss history (a row
    of `capacity` values, NaN beyond its length), whether it has stopped, and how (an
    index into `messages`, the optimiser's fixed list of endings). Its arrays are what a
    checkpoint stores (`state`, `restore`).
    """

    def __init__(self, count: int, capacity: int, messages: Sequence[str]):
        self.history = np.full((count, capacity), np.nan)
        self.length = np.zeros(count, dtype=np.int64)
        self.finished = np.zeros(count, dtype=bool)
        self.ok = np.zeros(count, dtype=bool)
        self.why = np.zeros(count, dtype=np.int64)
        self.messages = tuple(messages)

    @property
    def active(self) -> np.ndarray:
        return ~self.finished

    def record(self, losses: np.ndarray, lanes: Sequence[int] | None = None) -> None:
        """Append `losses[k]` to the history of each lane k in `lanes` (default: the
        lanes still running)."""
        lanes = np.flatnonzero(self.active) if lanes is None else np.asarray(lanes, dtype=np.int64)
        self.history[lanes, self.length[lanes]] = np.asarray(losses, dtype=float)[lanes]
        self.length[lanes] += 1

    def last(self, k: int) -> float:
        return float(self.history[k, self.length[k] - 1])

    def finish(self, k: int, ok: bool, message: str) -> None:
        self.finished[k], self.ok[k], self.why[k] = True, ok, self.messages.index(message)

    def ending(self, k: int) -> tuple[list[float], bool, str]:
        """Lane k's (loss history, ok, message)."""
        return (
            [float(v) for v in self.history[k, : self.length[k]]],
            bool(self.ok[k]),
            self.messages[self.why[k]],
        )

    def state(self) -> dict[str, np.ndarray]:
        return {
            "history": self.history,
            "length": self.length,
            "finished": self.finished,
            "ok": self.ok,
            "why": self.why,
        }

    def restore(self, state: dict) -> None:
        for name, value in state.items():
            setattr(self, name, np.array(value))


def blocks(first: int, count: int, size: int) -> list[range]:
    """The starts `first` .. `count` - 1 in the blocks of `size` consecutive starts that
    a fit of `count` starts cuts from start 0 (the first one shortened to begin at
    `first`): a fit resumed after some blocks recomputes the blocks it would have run."""
    return [
        range(max(a, first), min(a + size, count))
        for a in range(0, count, size)
        if max(a, first) < min(a + size, count)
    ]


def block_size(count: int, client) -> int:
    """The starts per block: the starts shared out evenly between the cluster's worker
    threads (one block each), so that each compiles one batch size."""
    return math.ceil(count / min(count, worker_threads(client)))


def in_order(client, task: Callable, arguments: list[tuple]) -> Iterator[tuple[int, Any]]:
    """(k, result) of `task(*arguments[k])` run as Dask tasks (all submitted at once),
    in the order of `arguments`. A task that raises raises here; the tasks not yet
    gathered are then cancelled (as they are when the caller stops early).
    """
    futures = [client.submit(task, *args, pure=False) for args in arguments]
    try:
        for k, future in enumerate(futures):
            yield k, future.result()
    finally:
        client.cancel([f for f in futures if not f.done()])
