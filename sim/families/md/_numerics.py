"""The MD family's numerics: the plan of a `sim run` (its H5MD sink and blow-up
checks) and how sweeps and fits size neighbour lists. The run itself, compiled chunks with
neighbour lists that grow when they overflow, is `solvers.ParticleRun` (`._runs`); a
config is read by `._config`, its file written by `._h5md`, its bounds checked by
`._limits`."""

from __future__ import annotations

import dataclasses

import numpy as np

from physics.md import ParticleModel
from solvers import ALL_PAIRS, fixed_capacity, largest_divisor_at_most, redo_overflowed

from ..._config import Config
from ..._errors import SimulationError
from ..._run import RunPlan, Setup, resolved_toml
from ..._stream import chunk_frames
from ..._sweep_spec import sweep_section
from ._config import setup
from ._h5md import MdRunResult, MdSink
from ._limits import MdLimits
from ._rdf import RdfSpec
from ._runs import particle_run


def plan(model: ParticleModel, config: Config) -> RunPlan:
    s = setup(model, config)
    engine = particle_run(s.model, s.params, s.t, initial=s.initial, solver=s.solver, key=s.key)
    frames = engine.n_saves
    frame_bytes = 8 * 2 * int(np.prod(s.initial.position.shape)) + 64
    wanted = chunk_frames(frame_bytes, frames, config.spec.output.chunk, config=config)
    # Chunks of equal length (one compiled program): the largest divisor of the frames
    # within both the memory budget and the solver's steps per chunk.
    engine.chunk = largest_divisor_at_most(frames, min(wanted, engine.chunk))
    times = np.asarray(s.t)
    every = int(round((float(times[1]) - float(times[0])) / float(s.solver.integrator.dt)))
    sink = MdSink(
        model=s.model.name,
        config=resolved_toml(config, **s.resolved),
        time=times,
        step=np.arange(len(times), dtype=np.int64) * every,
        system=s.initial,
        params={k: np.asarray(v) for k, v in s.params.items()},
        seed=int((config.spec.system or {}).get("seed", 0)),
        units=s.model.units,
        rdf=RdfSpec(**s.resolved["rdf"], n_species=s.model.n_species)
        if "rdf" in s.resolved
        else None,
    )

    limits = MdLimits.of(s)
    reference: dict[str, float] = {}

    def check(rows: dict[str, np.ndarray], k: int) -> None:
        if not reference:  # frame 0: in the first chunk's rows, or recomputed on a resume
            if k == 0:
                first = {name: rows[name][0] for name in limits.reference_names}
            else:
                first = engine.first_observables()
            reference.update(
                limits.reference({name: np.asarray(first[name]) for name in limits.reference_names})
            )
        failure = limits.first_failure(rows, reference)
        if failure is not None:
            i, what = failure
            frame = i + (k if k == 0 else k + 1)
            raise SimulationError(
                f"{config.source}: the run blew up at step {int(sink.step[frame])} (t = "
                f"{float(times[frame]):g}): {what}"
            )

    def result(rows: dict[str, np.ndarray], stats: dict[str, int]) -> MdRunResult:
        return MdRunResult(
            model=sink.model,
            config=sink.config,
            time=times,
            step=sink.step,
            observables=rows,
            system=s.initial,
            params=sink.params,
            seed=sink.seed,
            stats=stats,
            units=sink.units,
            rdf=sink.rdf,
        )

    return RunPlan(
        engine=engine,
        sink=sink,
        config=sink.config,
        check=check,
        result=result,
        description=s.model.name,
    )


# ----------------------------------------------------------------------------- sweeps


def sweep_setup(config: Config, s: Setup) -> Setup:
    """An MD set-up for vmapped runs: only [params] may be swept (the system is shared),
    and the neighbour list, which cannot grow inside a batch, is sized by
    `solvers.fixed_capacity` (a chunk whose runs overflow it is rerun with larger lists:
    `solvers.redo_overflowed`)."""
    section = sweep_section(config)
    if config.raw.get("rdf") is not None:
        raise config.error(
            "rdf",
            "a sweep file keeps no g(r) of its runs; run one of them with sim run to get its [rdf]",
        )
    for name in section.params:
        head, dot, _ = name.partition(".")
        if dot or name in _MD_SETTINGS:
            what = (
                "initial values"
                if head == "initial"
                else f"[{head}] keys"
                if dot
                else f"{name!r} (a [system] or [solver] key)"
            )
            raise config.error(
                f"sweep.params.{name}",
                f"MD sweeps vary [params] only (such as epsilon and sigma); {what} cannot be "
                "swept: every run starts from the same [system] with the same [solver]",
            )
    return dataclasses.replace(s, solver=_fixed_list(s))


def _fixed_list(s: Setup):
    """The set-up's solver with a list that cannot grow (vmapped sweeps, compiled fits):
    sized by `solvers.fixed_capacity` unless the config sets a capacity."""
    solver = s.solver
    if not solver.neighbour_list or solver.capacity is not None:
        return solver
    box = s.initial.space.box if s.initial.space.periodic else None
    capacity = fixed_capacity(
        np.asarray(s.initial.position),
        None if box is None else np.asarray(box),
        s.model.cutoff,
        solver.skin,
    )
    return dataclasses.replace(solver, capacity=capacity)


_MD_SETTINGS = (
    "lattice",
    "cells",
    "density",
    "particles",
    "min_distance",
    "temperature",
    "friction",
    "tau",
    "chain_length",
    "skin",
    "dt",
    "steps",
)


def with_capacity(s: Setup, capacity: int | None) -> Setup:
    """The set-up with the neighbour list holding `capacity` neighbours per particle
    (`solvers.ALL_PAIRS`: no list); None leaves it as it is."""
    if capacity is None:
        return s
    if capacity == ALL_PAIRS:
        return dataclasses.replace(
            s, solver=dataclasses.replace(s.solver, neighbour_list=False, capacity=None)
        )
    return dataclasses.replace(s, solver=dataclasses.replace(s.solver, capacity=capacity))


def settle_overflows(s: Setup, values: dict, rerun) -> dict:
    """A sweep chunk's results with the runs whose neighbour list overflowed rerun by
    `rerun(capacity)` with larger lists (`solvers.redo_overflowed`)."""
    solver = s.solver
    if not solver.neighbour_list:
        return values
    return redo_overflowed(values, solver.capacity, s.initial.n, rerun)
