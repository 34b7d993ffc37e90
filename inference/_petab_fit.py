"""PEtab problems fitted by multistart: L-BFGS-B from every start within the parameter
table's bounds, the starts batched on the local devices or cut into blocks for a Dask
cluster's workers, with a checkpoint to resume from (`fit_petab`)."""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

import sim
from sim.core import (
    InputError,
    Result,
    check_output_path,
    dask_client,
    exclusive,
    memory_problem,
    write_group,
    write_root_attrs,
)
from solvers import OdeSolver, checks_as_nan

from ._checkpoint import Checkpointer, checkpoint_path, fingerprint
from ._lbfgsb import StartLog, _batched, minimize_batched
from ._multistart import (
    SAME_OPTIMUM,
    block_size,
    blocks,
    few_reached,
    in_order,
    spread_check,
    starts_at_best,
)
from ._petab import load_petab
from ._petab_files import PetabError, files_digest, problem_files
from ._petab_problem import PetabProblem, to_linear
from ._result_text import number, short_repr


@dataclasses.dataclass
class PetabFit(Result):
    """A PEtab problem evaluated (`--evaluate`: at the nominal parameters) or fitted by
    multistart: the best estimate, its objective and every start's.

    Attributes:
        problem: the YAML file.
        names: the estimated parameters; `estimate` in linear scale.
        objective: negative log-likelihood at the estimate (all constants, no priors).
        starts_objective [S], starts_estimate: name -> [S] (linear scale), every start's
            end (S = 0 for an evaluation).
        converged [S], message: how each start ended.
        reached_best: how many starts ended within `SAME_OPTIMUM` of the best objective
            (the best's own start included; 0 for an evaluation).
    """

    problem: str
    model: str
    names: list[str]
    estimate: dict[str, float]
    objective: float
    starts_objective: np.ndarray
    starts_estimate: dict[str, np.ndarray]
    converged: np.ndarray
    message: str
    reached_best: int = 0

    @property
    def warnings(self) -> list[str]:
        """A line when too few starts reached the best objective to trust that no better
        optimum was missed (`inference._multistart.few_reached`)."""
        return few_reached(self.reached_best, len(self.starts_objective))

    def __repr__(self) -> str:
        starts = len(self.starts_objective)
        tail = [f"objective={number(self.objective)}"]
        if starts:
            tail += [
                f"starts={starts}",
                f"converged={int(np.sum(self.converged))}/{starts}",
                f"reached_best={self.reached_best}/{starts}",
            ]
        return short_repr(
            "PetabFit",
            [f"problem={self.problem!r}"],
            {n: number(self.estimate[n]) for n in self.names},
            tail,
        )

    def write(self, f) -> None:
        write_root_attrs(f, format="simjax.fit", model=self.model, config=self.problem)
        f.attrs["converged"] = int(
            bool(self.converged.size and self.converged[int(np.nanargmin(self.starts_objective))])
        )
        f.attrs["message"] = self.message
        write_group(f, "estimate", self.estimate)
        f["objective"] = self.objective
        if self.starts_objective.size:
            f.attrs["reached_best"] = int(self.reached_best)
            f.attrs["reached_best_within"] = SAME_OPTIMUM
            write_group(
                f,
                "starts",
                {"objective": self.starts_objective, "converged": self.converged.astype(np.int8)},
            )
            write_group(f["starts"], "estimate", self.starts_estimate)


@checks_as_nan()
def fit_petab(
    problem: PetabProblem,
    *,
    starts: int = 1,
    seed: int = 0,
    evaluate: bool = False,
    max_steps: int = 1000,
    on_start=None,
    devices: int | None = None,
    scheduler: str | None = None,
    output: str | Path | None = None,
    resume: bool = False,
    checkpoint_every: int | None = None,
) -> PetabFit:
    """Evaluate the objective at the nominal parameters, or minimise it (plus the
    objective priors, if any) within the parameter table's bounds on the parameters'
    scales from `starts` points: the nominal values (where finite and within the bounds)
    and Latin hypercube draws. Every start runs L-BFGS-B (scipy) on the objective and its
    gradient through the solver, all starts in one batched evaluation a round
    (`minimize_batched`), split over the first `devices` local devices.

    With a Dask `scheduler` (an address, or `local:N`), the starts are cut into one block
    per worker thread, run on the workers (`fit_block`, which loads the problem from its
    files) and gathered in start order; each start ends the same however the starts
    were split (to rounding).

    With `output`, the result is written there (its lock held meanwhile) and the starts
    are kept in a checkpoint beside it, `.<name>.checkpoint` (`StartLog`), written every
    `checkpoint_every` rounds (default: at most every 30 s), after each block from a
    cluster and at SIGINT or SIGTERM; `resume` continues from it, bit for bit on the
    same devices.

    Arguments:
        problem: the PEtab problem (`load_petab`).
        starts: the number of starts (at least 1 is run).
        seed: the seed of the Latin hypercube of start points.
        evaluate: only evaluate the objective at the nominal parameters (no fit, no
            checkpoint).
        max_steps: L-BFGS-B iterations per start at most.
        on_start: called as on_start(k, objective) when start k (from 1) ends; None for
            no reports.
        devices: the number of local devices the starts are split over (None: all).
        scheduler: a Dask scheduler's address, or `local:N`; None runs in this process.
        output: the HDF5 file the result is written to (and its checkpoint beside it);
            None writes nothing.
        resume: continue the fit from the checkpoint beside `output`.
        checkpoint_every: rounds of batched evaluations between checkpoints; None for
            at most one every 30 s.

    Returns:
        A `PetabFit`: the best start's estimate (linear scale) and objective, and every
        start's end, objective and convergence flag (none for an evaluation).

    Raises:
        PetabError: an estimated parameter without finite bounds.
        InputError: a bad `devices` or `scheduler`, or either asked to spread a fit of
            one start (`evaluate` included) over more than one device or a cluster; with
            `output`: a checkpoint there and `resume` False, `resume` and no checkpoint
            (a finished fit), or one of another problem (its files), number of starts,
            seed, `max_steps` or solver (the files left as they were); `resume` with
            `evaluate`, which keeps no checkpoint.
        DataError: a damaged checkpoint.
        SimulationError: the objective is not finite at the nominal parameters (an
            evaluation) or at the end of every start; nothing is written.
    """
    if not evaluate:
        _check_starts_memory(problem, starts)
    n_devices = spread_check(1 if evaluate else starts, devices, scheduler)
    if output is None:
        return _fit_petab(
            problem, starts, seed, evaluate, max_steps, on_start, n_devices, scheduler, None
        )
    if evaluate and resume:
        raise InputError(
            "--resume",
            "",
            "an evaluation (--evaluate) keeps no checkpoint: there is nothing to resume; run it "
            "without --resume",
        )
    output = check_output_path(output, inputs=problem_files(problem.path))
    with exclusive(output):
        ck = None
        if not evaluate:
            text = _fit_description(problem, starts, seed, max_steps)
            ck = Checkpointer(
                checkpoint_path(output),
                fingerprint(text),
                config=text,
                resume=resume,
                every=checkpoint_every,
                same="problem files, --starts and seed",
            )
        result = _fit_petab(
            problem, starts, seed, evaluate, max_steps, on_start, n_devices, scheduler, ck
        )
        result.save(output)
        if ck is not None:
            ck.finish()
    return result


def _check_starts_memory(problem: PetabProblem, starts: int) -> None:
    """Refuse, before anything is allocated, a number of starts whose arrays cannot fit
    in memory: per start at least its start point, its lane of the batch, its value and
    gradient and its end (4 p + 1 values) and its lane of the objective's terms (one per
    measurement), float64.

    Raises:
        InputError: naming --starts.
    """
    measurements = sum(o.rows.size for o in problem.observables)
    problem_text = memory_problem(
        8 * starts * (4 * len(problem.estimated) + 1 + measurements),
        f"{starts:,} starts of {len(problem.estimated)} parameters and {measurements:,} "
        "measurements",
    )
    if problem_text:
        raise InputError("--starts", "", f"{problem_text}; expected fewer starts")


def _fit_description(problem: PetabProblem, starts: int, seed: int, max_steps: int) -> str:
    """What a PEtab fit computes, as the text its checkpoint keeps (TOML, compared key by
    key on resume: `sim._unfinished.config_difference`): a digest of the problem's
    files, the starts, the seed, the steps and the solver."""
    import tomli_w

    solver = {}
    for field in dataclasses.fields(problem.solver):
        value = getattr(problem.solver, field.name)
        if value is not None:
            solver[field.name] = value if isinstance(value, (bool, int, str)) else float(value)
    return tomli_w.dumps(
        {
            "problem_files": files_digest(problem.path, problem.allow_outside),
            "starts": int(starts),
            "seed": int(seed),
            "max_steps": int(max_steps),
            "solver": solver,
        }
    )


def _fit_petab(
    problem: PetabProblem,
    starts: int,
    seed: int,
    evaluate: bool,
    max_steps: int,
    on_start,
    n_devices: int,
    scheduler,
    ck: Checkpointer | None,
) -> PetabFit:
    """`fit_petab` once its output (if any) is locked, on `n_devices` local devices,
    with its checkpoints `ck`."""
    from scipy.stats import qmc

    names = problem.estimated
    scales = [p.scale for p in problem.parameters if p.estimate]
    linear = lambda x: {
        n: float(to_linear(np.float64(v), sc)) for n, v, sc in zip(names, x, scales, strict=False)
    }  # noqa: E731
    if evaluate:
        x = problem.nominal()
        objective = _finite(
            problem, float(jax.jit(problem.objective)(x)), "at the nominal parameters"
        )
        return PetabFit(
            str(problem.path),
            problem.model.name,
            names,
            linear(x),
            objective,
            np.zeros(0),
            {n: np.zeros(0) for n in names},
            np.zeros(0, bool),
            "evaluated at the nominal parameters",
        )
    lower, upper = problem.bounds()
    if not (np.all(np.isfinite(lower)) and np.all(np.isfinite(upper))):
        bad = names[int(np.argmax(~(np.isfinite(lower) & np.isfinite(upper))))]
        raise PetabError(
            f"{problem.path.name}: parameter table, row {bad!r}: an estimated parameter needs "
            "finite bounds (on its scale) to be fitted"
        )
    points = (
        qmc.scale(qmc.LatinHypercube(d=len(names), seed=seed).random(max(starts, 1)), lower, upper)
        if names
        else np.zeros((max(starts, 1), 0))
    )
    nominal = problem.nominal()
    if np.all(np.isfinite(nominal)) and np.all((nominal >= lower) & (nominal <= upper)):
        points[0] = nominal
    log = StartLog(len(points), len(names), ck)
    if scheduler is None:
        report = None if on_start is None else (lambda k, f: on_start(k + 1, f))
        ends, _, success = minimize_batched(
            problem.value_and_grad(with_priors=True),
            points,
            lower,
            upper,
            max_steps=max_steps,
            on_done=report,
            devices=n_devices,
            log=log,
        )
    else:
        with dask_client(scheduler) as client:
            ends, success = _fit_blocks(problem, points, max_steps, client, on_start, log)
    log.safe_point()  # (every start has ended: a stop from here on keeps them all)
    objectives = np.asarray(_batched(problem.objective)(jnp.asarray(ends)), dtype=float)
    objectives = np.where(np.isfinite(objectives), objectives, np.inf)
    best = int(np.argmin(objectives))
    _finite(
        problem, float(objectives[best]), f"at the end of every one of the {len(points)} start(s)"
    )
    estimates = {n: np.array([linear(x)[n] for x in ends]) for n in names}
    reached = starts_at_best(objectives)
    message = (
        f"best of {len(points)} start(s): "
        f"{'converged' if success[best] else 'stopped before convergence'}; {reached} of "
        f"{len(points)} reached the best objective (within {SAME_OPTIMUM})"
    )
    return PetabFit(
        str(problem.path),
        problem.model.name,
        names,
        linear(ends[best]),
        float(objectives[best]),
        objectives,
        estimates,
        np.asarray(success),
        message,
        reached,
    )


def _finite(problem: PetabProblem, objective: float, where: str) -> float:
    """The objective, or a `sim.SimulationError` when it is not finite: no file then
    claims a result that is not one."""
    if not math.isfinite(objective):
        raise sim.SimulationError(
            f"{problem.path.name}: the objective is not finite {where} ({objective}): a simulation "
            "failed, a noise formula "
            "is not positive, or a prediction is one its noise model cannot take (a log of a value "
            "<= 0); nothing written"
        )
    return objective


def _fit_blocks(
    problem: PetabProblem, points: np.ndarray, max_steps: int, client, on_start, log: StartLog
) -> tuple[np.ndarray, np.ndarray]:
    """(ends [S, p], success [S]) of `fit_petab`'s starts run block by block on the Dask
    cluster of `client` (`fit_block`), in start order, each block checkpointed as it
    comes back (`log`). A resumed fit keeps the starts its checkpoint has finished up
    to the first unfinished one and runs the others in the blocks the whole fit cut
    (`inference._multistart.blocks`)."""
    path = str(Path(problem.path).resolve())
    digest = files_digest(path, problem.allow_outside)
    first = log.finished_prefix()
    for j in range(first if on_start is not None else 0):
        on_start(j + 1, float(log.values[j]))
    parts = blocks(first, len(points), block_size(len(points), client))
    for k, (block_ends, values, block_success) in in_order(
        client,
        fit_block,
        [
            (
                path,
                digest,
                problem.solver,
                points[b.start : b.stop],
                max_steps,
                problem.allow_outside,
            )
            for b in parts
        ],
    ):
        for j, end, value, ok in zip(parts[k], block_ends, values, block_success, strict=False):
            log.finish(j, end, float(value), bool(ok))
            if on_start is not None:
                on_start(j + 1, float(value))
        log.block_done()
    return log.ends.copy(), log.success.copy()


@functools.lru_cache(maxsize=4)
def _worker_problem(
    path: str, digest: str, solver: OdeSolver, allow_outside: bool
) -> tuple[PetabProblem, Callable]:
    """A problem loaded on a worker, with the one function of its objective (with the
    priors) and gradient whose batched form the worker's blocks share (`_batched`)."""
    sim.configure_jax()  # (the worker's JAX as the command's: float64, the cache, XLA's options)
    problem = load_petab(path, solver, allow_outside=allow_outside)
    return problem, problem.value_and_grad(with_priors=True)


def fit_block(
    path: str,
    digest: str,
    solver: OdeSolver,
    points: np.ndarray,
    max_steps: int,
    allow_outside: bool = False,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One block of a multistart fit, run on a Dask worker: the problem loaded from its
    YAML file (once per worker, version of its files and solver), then L-BFGS-B from
    every row of `points` together, on the worker's local devices.

    Returns:
        ends [b, p], values [b] (with the priors), success [b], as `minimize_batched`.

    Raises:
        PetabError: the problem's files on the worker are not those the fit was started
            with (`digest`: `files_digest`), lie outside its folder (unless
            `allow_outside`, as the fit's problem was loaded), or no longer load.
    """
    if files_digest(path, allow_outside) != digest:
        raise PetabError(
            f"{path}: the problem's files on the Dask worker differ from those the fit was started "
            "with (every worker must see the same files)"
        )
    problem, value_and_grad = _worker_problem(path, digest, solver, allow_outside)
    lower, upper = problem.bounds()
    return minimize_batched(
        value_and_grad, points, lower, upper, max_steps=max_steps, devices=len(jax.devices())
    )
