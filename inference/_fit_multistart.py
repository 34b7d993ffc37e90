"""The starts of a multistart config fit: drawn up front by Latin hypercube sampling,
then run as one batch split over local devices, or in blocks of consecutive starts on a
Dask cluster (`worker_starts` is a worker's side: the problem built again from the
config, its observations checked against the fit's), and the best start chosen."""

from __future__ import annotations

import functools
import math
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

import sim
from sim import Config, DataError
from sim.core import Progress

from ._checkpoint import Checkpointer, fingerprint
from ._data import Observations
from ._fit_build import build_problem
from ._fit_loops import _run_starts
from ._fit_problem import Experiments, Problem
from ._fit_section import FitSection
from ._multistart import Lanes, block_size, blocks, in_order

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib


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
