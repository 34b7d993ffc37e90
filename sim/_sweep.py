"""Parameter sweeps: thousands of runs of one config, batched by `jax.vmap` in chunks,
sharded over the local devices, streamed chunk by chunk to one HDF5 file (resumable), or
sent chunk by chunk as tasks to a Dask cluster.

Every chunk has the same padded size, so one compiled program computes every chunk (or,
for families that describe a run as an engine problem, advances it frame by frame,
checkpointed within: `sim._sweep_frames`), in this process, in a resumed one or on a
Dask worker: on the same number of devices a sweep
gives the same numbers, bit for bit, however its chunks were scheduled. (Split over
another number of devices, each device's batch has another size, and XLA may round the
last bits differently.) A run whose solver fails, whose observables become non-finite or
which goes beyond the `[checks]` bounds of its family (PDE and MD runs, as `sim run`
checks them) is flagged in `status` and its observables are NaN; the others are kept.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import sys
import time as _time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from physics import Model
from solvers import result_message

from . import _processes
from ._config import Config
from ._distributed import (
    batch_sharding,
    dask_client,
    device_count,
    needs_dask,
    worker_threads,
)
from ._errors import DataError, InputError
from ._family import Sweepable, family_of
from ._identity import InputIdentity, config_inputs, file_digest
from ._interrupt import safe_point
from ._jax_config import configure_jax
from ._limits import disk_problem, memory_problem, readable
from ._lock import exclusive
from ._progress import Progress
from ._run import Setup, build_model, resolved_toml
from ._stream import CHECKPOINT_SECONDS
from ._sweep_checkpoint import ChunkCheckpoint, _read_chunk_checkpoint, _write_chunk_checkpoint
from ._sweep_frames import FramedRunner, nan_unless
from ._sweep_spec import SUMMARY_STATS, SweepPlan, is_scalar, plan_sweep, sweep_section
from ._sweep_store import (
    FAILED,
    OK,
    FileSink,
    Layout,
    MemorySink,
    StatusSink,
    SweepResult,
    root_attrs,
)
from ._unfinished import checkpoint_path, partial_path, remove_stale, tree_from_leaves
from ._watchdog import computed, kept_line, outside, resume_line, watching

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib


# ----------------------------------------------------------------------------- one chunk


def _bounds(s: Setup):
    """The `[checks]` test of one run's observables (traceable: True when the run stayed
    within the bounds, as `sim run` checks them), or None where a family has no bounds
    (ODE runs: only finite values)."""
    if "checks" not in s.resolved:
        return None
    return family_of(s.model).run_bounds(s)


def _outputs(obs: dict, num_steps: jax.Array, result: jax.Array, save: str) -> dict[str, jax.Array]:
    """What a sweep keeps of a batch of runs computed together (the ODE fast path): the
    observables hold the runs on their last axis ([T, ..., B]: the reductions over time
    run on contiguous rows of runs); the outputs are [B, ...] (observables as `save`
    says, stats, status). A run is kept (status 1) when its solver succeeded and its
    observables are finite; else its status is 2 and its observables NaN."""

    def per_run(value: jax.Array) -> tuple[int, ...]:
        return tuple(range(value.ndim - 1))  # the axes of one run

    ok = result == 0
    for value in obs.values():
        if jnp.issubdtype(value.dtype, jnp.floating):
            ok = ok & jnp.all(jnp.isfinite(value), axis=per_run(value))
    out: dict[str, jax.Array] = {}
    for name, value in obs.items():
        if save == "full":
            out[f"observables/{name}"] = value
        elif save == "final":
            out[f"observables/{name}"] = value[-1]
        else:
            axes = per_run(value)
            reduced = {
                "min": jnp.min(value, axis=axes),
                "max": jnp.max(value, axis=axes),
                "mean": jnp.mean(value, axis=axes),
                "final": value[-1],
            }
            out.update({f"observables/{name}/{stat}": reduced[stat] for stat in SUMMARY_STATS})
    out = {k: jnp.moveaxis(nan_unless(ok, v), -1, 0) for k, v in out.items()}
    out["stats/num_steps"] = jnp.asarray(num_steps, dtype=jnp.int64)
    out["stats/result"] = jnp.asarray(result, dtype=jnp.int32)
    out["status"] = jnp.where(ok, jnp.int8(OK), jnp.int8(FAILED))
    return out


def _batched_runs(s: Setup, save: str):
    """The chunk function over a batch of inputs: the family's batched chunk (ODE: the
    batched loop of `solvers.solve_batch`)."""
    chunk = family_of(s.model).batched(s, save)
    if chunk is None:  # (`prepare` refuses a family with neither this nor `sweep_problem`)
        raise TypeError(
            f"the {family_of(s.model).name} family has no batched chunk for this set-up"
        )
    return chunk


class ChunkRunner:
    """One padded chunk of inputs `{"index": [P], "params": {name: [P]}, "initial":
    {name: [P]}}` to per-run outputs (path in the sweep layout -> [P, ...]), traced for
    the shapes of `example` and compiled once, on first use; the batch is split over the
    first `devices` local devices by `jax.shard_map` over a one-axis `Mesh`. P must be a
    multiple of `devices`.

    Raises:
        ValueError, TypeError: the model's family cannot be traced in a vmapped batch.
    """

    def __init__(self, s: Setup, save: str, devices: int, example: dict):
        self.setup = s
        self._sharding, _ = batch_sharding(devices)
        self.mesh, spec = self._sharding.mesh, self._sharding.spec
        batched = _batched_runs(s, save)
        # One device needs no shard_map. (This is the tsit5 fast path, with no linear
        # solves: framed chunks, which may have them, map with `solvers.on_batch_shards`.)
        mapped = (
            batched
            if devices == 1
            else jax.shard_map(
                batched, mesh=self.mesh, in_specs=spec, out_specs=spec, check_vma=False
            )
        )
        # (traced for shapes placed on the mesh: host arrays are refused when the mesh spans
        # several processes)
        shapes = jax.tree.map(
            lambda x: jax.ShapeDtypeStruct(np.shape(x), np.result_type(x), sharding=self._sharding),
            example,
        )
        self._traced = jax.jit(
            mapped, in_shardings=self._sharding, out_shardings=self._sharding
        ).trace(shapes)
        self.out_info: dict[str, jax.ShapeDtypeStruct] = self._traced.out_info
        self._compiled = None

    def __call__(self, inputs: dict) -> dict[str, jax.Array]:
        """Dispatch a chunk (asynchronously: fetch with `jax.device_get`)."""
        if self._compiled is None:
            self._compiled = self._traced.lower().compile()
        return self._compiled(jax.device_put(inputs, self._sharding))


def framed(s: Setup, save: str) -> bool:
    """Whether a sweep of `s` advances its chunks frame by frame (`FramedRunner`): its
    family describes a run as an engine problem and has no faster batched chunk."""
    return family_of(s.model).batched(s, save) is None


def _sources(config_text: str, config_path: str | None) -> tuple:
    """What, besides its text, makes a config's chunk function: the files it reads (a
    model's SBML or Python file, a start file), each by its absolute path, size, time of
    change and, under 1 MB, content, so that a file of the same name elsewhere, or the
    same file changed, is not taken for the one a cached function was made from."""
    out = []
    for path in Config(tomllib.loads(config_text), config_path).input_files():
        try:
            out.append((str(path.resolve()), file_digest(path)))
        except (OSError, RuntimeError):
            out.append((str(path), ""))
    return tuple(out)


def _runner(
    config_text: str, config_path: str | None, devices: int, padded: int, size: int | None = None
) -> ChunkRunner | FramedRunner:
    """The chunk function of a config (traced and compiled once per process, config,
    the files it reads, shape and family-specific size: `Sweepable.resized`, for MD the
    neighbour-list capacity)."""
    return _cached_runner(
        config_text, config_path, _sources(config_text, config_path), devices, padded, size
    )


@functools.lru_cache(maxsize=8)
def _cached_runner(
    config_text: str,
    config_path: str | None,
    sources: tuple,
    devices: int,
    padded: int,
    size: int | None,
) -> ChunkRunner | FramedRunner:
    prep = prepare(Config(tomllib.loads(config_text), config_path))
    s = prep.setup if size is None else family_of(prep.setup.model).resized(prep.setup, size)
    save = prep.plan.section.save
    if framed(s, save):
        return FramedRunner(
            s, family_of(s.model), save, _bounds(s), devices, prep.inputs(0, padded)
        )
    return ChunkRunner(s, save, devices, prep.inputs(0, padded))


# ----------------------------------------------------------------------------- the plan


@dataclasses.dataclass(frozen=True)
class Prepared:
    """A sweep ready to run: the validated config, its setup and samples, the chunking
    and the file layout."""

    config: Config
    setup: Setup
    plan: SweepPlan
    text: str
    chunk: int
    notes: tuple[str, ...] = ()  # (`Family.solver_notes`, printed once the sweep has ended)

    @property
    def runs(self) -> int:
        return self.plan.runs

    @property
    def chunks(self) -> int:
        return math.ceil(self.runs / self.chunk)

    def bounds(self, k: int) -> tuple[int, int]:
        return k * self.chunk, min((k + 1) * self.chunk, self.runs)

    @functools.cached_property
    def identity(self) -> InputIdentity:
        """The files the sweep reads, digested, and the package versions: with `text`,
        the sweep's identity (`sim._identity`)."""
        return config_inputs(self.config)

    def padded(self, devices: int) -> int:
        return math.ceil(self.chunk / devices) * devices

    def inputs(self, k: int, padded: int) -> dict:
        """Chunk k's inputs, padded to `padded` rows by repeating its last run."""
        lo, hi = self.bounds(k)
        rows = np.minimum(lo + np.arange(padded), hi - 1)
        return {
            "index": rows.astype(np.int64),
            "params": {n: v[rows] for n, v in self.plan.params.items()},
            "initial": {n: v[rows] for n, v in self.plan.initial.items()},
        }

    def layout(self, rows: dict[str, jax.ShapeDtypeStruct]) -> Layout:
        s, plan = self.setup, self.plan
        fixed = {"time": np.asarray(s.t)}
        for name, value in s.params.items():
            if is_scalar(value):
                fixed[f"params/{name}"] = plan.params.get(name, np.full(self.runs, float(value)))
        if isinstance(s.initial, dict) and all(is_scalar(v) for v in s.initial.values()):
            for name, value in s.initial.items():
                fixed[f"initial/{name}"] = plan.initial.get(name, np.full(self.runs, float(value)))
        section = plan.section
        attrs = {"model": s.model.name, "config": self.text, "seed": plan.seed}
        attrs.update(root_attrs(section.mode, section.save, plan.names, plan.grid_shape, self.runs))
        return Layout(
            runs=self.runs,
            fixed=fixed,
            rows={name: (tuple(v.shape[1:]), np.dtype(v.dtype)) for name, v in rows.items()},
            attrs=attrs,
            inputs=self.identity,
        )


def prepare(config: Config) -> Prepared:
    """Validate a sweep config against its model and draw the runs' values.

    Raises:
        ConfigError: a bad `[sweep]` (naming `sweep.<key>`), a config that does not fit
            the model, or a model family that cannot be swept.
    """
    section = sweep_section(config)
    model = build_model(config)
    try:
        family = family_of(model)
    except TypeError:
        family = None
    if family is None:
        raise config.error(
            "model.name",
            f"model {model.name!r} ({_family(model)}) cannot be swept: no family sets it up from a "
            "config",
        )
    if not isinstance(family, Sweepable):
        raise config.error(
            "model.name",
            f"model {model.name!r} ({_family(model)}) cannot be swept: its family describes no run "
            "of a batch",
        )
    s = family.sweep_setup(config, family.setup(model, config))
    plan = plan_sweep(config, section, s.params, s.initial, model)
    text = resolved_toml(config, **s.resolved, sweep=section.resolved())
    return Prepared(
        config=config,
        setup=s,
        plan=plan,
        text=text,
        chunk=min(section.chunk, plan.runs),
        notes=family.solver_notes(model, config),
    )


def _family(model: Model) -> str:
    return next(b.__name__ for b in type(model).__mro__[1:] if b.__name__.endswith("Model"))


def _compiled_runner(
    prep: Prepared, devices: int, padded: int, size: int | None = None
) -> ChunkRunner | FramedRunner:
    config = prep.config
    try:
        return _runner(
            config.to_toml(),
            None if config.path is None else str(config.path),
            devices,
            padded,
            size,
        )
    except InputError:
        raise
    except (ValueError, TypeError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise config.error(
            "model.name",
            f"model {prep.setup.model.name!r} cannot be swept in a vmapped batch: {first}",
        ) from None


# ----------------------------------------------------------------------------- drivers


def _run_local(
    prep: Prepared, runner, devices: int, padded: int, pending: list[int]
) -> Iterator[tuple[int, dict]]:
    """Chunk results in order; the next chunk is dispatched before the last is fetched,
    so writing overlaps computing. MD runs whose neighbour list overflowed are rerun
    with larger lists."""

    def settled(k: int, result) -> tuple[int, dict]:
        rerun = lambda size: _compiled_runner(prep, devices, padded, size)(prep.inputs(k, padded))
        return k, family_of(prep.setup.model).settle(prep.setup, _processes.fetch(result), rerun)

    inflight: tuple[int, Any] | None = None
    for k in pending:
        result = runner(prep.inputs(k, padded))
        if inflight is not None:
            yield settled(*inflight)
        inflight = (k, result)
    if inflight is not None:
        yield settled(*inflight)


def _run_framed(
    prep: Prepared,
    runner: FramedRunner,
    devices: int,
    padded: int,
    pending: list[int],
    output,
    restored: ChunkCheckpoint | None,
):
    """Chunk results in order, each chunk advanced frame by frame: checkpointed every
    `[output] checkpoint_every` frames or `checkpoint_seconds` (five minutes unless set),
    and stopped cleanly on a signal (`safe_point`) between calls."""
    spec = prep.config.spec.output
    every = spec.checkpoint_every
    seconds = (
        spec.checkpoint_seconds
        if spec.checkpoint_seconds is not None
        else (None if every is not None else CHECKPOINT_SECONDS)
    )
    family = family_of(prep.setup.model)
    for k in pending:
        inputs = prep.inputs(k, padded)
        last = {"frame": 0, "time": _time.perf_counter()}

        def save(done: int, carry, frames, k=k, inputs=inputs) -> Path:
            last.update(frame=done, time=_time.perf_counter())
            return _write_chunk_checkpoint(
                output, prep.text, prep.identity, padded, inputs, k, done, carry, frames()
            )

        def between(done: int, carry, frames) -> None:
            with outside():  # (a checkpoint being written: not to be cut short)
                if output is not None:
                    due = (every is not None and done - last["frame"] >= every) or (
                        seconds is not None and _time.perf_counter() - last["time"] >= seconds
                    )
                    if due:
                        save(done, carry, frames)
                safe_point(None if output is None else lambda: save(done, carry, frames))

        if restored is not None and restored.chunk == k:
            carry = tree_from_leaves(
                restored.leaves, runner.carry_struct, checkpoint_path(output), "carry"
            )
            if not np.all(np.asarray(carry.frames) == restored.frame + 1):
                raise DataError(
                    checkpoint_path(output),
                    "frame",
                    f"says frame {restored.frame}, its runs hold another; delete it to compute the "
                    "chunk again",
                )
            last["frame"] = restored.frame
            values = runner.run(inputs, carry, restored.frame, restored.frames, between)
        else:
            values = runner.run(inputs, between=between)
        rerun = lambda size, inputs=inputs: _compiled_runner(prep, devices, padded, size)(inputs)
        yield k, family.settle(prep.setup, values, rerun)


def worker_chunk(config_text: str, config_path: str | None, inputs: dict) -> dict[str, np.ndarray]:
    """One chunk on a Dask worker: the same compiled chunk function as a local sweep
    (built once per worker, config and shape), results returned as numpy arrays."""
    configure_jax()  # (the worker's JAX as the command's: float64, the cache, XLA's options)
    padded = len(inputs["index"])
    devices = math.gcd(padded, len(jax.devices()))
    runner = _runner(config_text, config_path, devices, padded)
    rerun = lambda size: _runner(config_text, config_path, devices, padded, size)(inputs)
    return family_of(runner.setup.model).settle(runner.setup, jax.device_get(runner(inputs)), rerun)


def _run_dask(
    prep: Prepared, client, padded: int, pending: list[int]
) -> Iterator[tuple[int, dict]]:
    """Chunk results as Dask tasks finish; at most two tasks per worker thread in flight,
    so the client's memory stays bounded."""
    from distributed import as_completed

    if not pending:
        return
    window = 2 * worker_threads(client)
    text, path = prep.config.to_toml(), None if prep.config.path is None else str(prep.config.path)
    queue = list(pending)
    futures = {}

    def submit(k: int):
        future = client.submit(worker_chunk, text, path, prep.inputs(k, padded), pure=False)
        futures[future] = k
        return future

    running = as_completed([submit(queue.pop(0)) for _ in range(min(window, len(queue)))])
    for future in running:
        k = futures.pop(future)
        values = future.result()
        if queue:
            running.add(submit(queue.pop(0)))
        yield k, values


# ----------------------------------------------------------------------------- public


@dataclasses.dataclass(frozen=True)
class SweepSummary:
    """What a finished sweep reports: where it went, counts, and time taken."""

    path: Path | None
    runs: int
    ok: int
    failed: int
    resumed_runs: int
    seconds: float
    failures: dict[int, int] = dataclasses.field(default_factory=dict)

    def failure_lines(self) -> list[str]:
        """One line per kind of failure: how many runs, and why (from their result code)."""
        lines = []
        for code, count in sorted(self.failures.items()):
            why = (
                result_message(code)
                if code
                else "an observable became non-finite or left its [checks] bounds"
            )
            lines.append(f"{count} run{'s' if count > 1 else ''} failed: {why}")
        return lines


def execute(
    config: Config,
    output: str | Path | None = None,
    *,
    resume: bool = False,
    devices: int | None = None,
    scheduler: str | None = None,
    progress: bool = False,
) -> tuple[SweepSummary, MemorySink | None]:
    """Run a sweep into `output` (the sweep layout) or into memory (output None).
    What `sim sweep` and `sim.sweep` do; see `sweep` for the arguments."""
    start = _time.perf_counter()
    needs_dask(scheduler)
    if config.spec.output.xdmf:
        raise config.error(
            "output.xdmf",
            "an XDMF sidecar describes one PDE run file (sim run); a sweep file holds many runs: "
            "set it false",
        )
    prep = prepare(config)
    n_devices = device_count(devices)
    with contextlib.nullcontext() if output is None else exclusive(output):
        if output is not None:
            FileSink.check_start(output, prep.text, resume, prep.identity)
        with dask_client(scheduler) as client:
            return _execute(prep, output, resume, n_devices, client, progress, start)


def _check_results_fit(prep: Prepared, layout: Layout, output) -> None:
    """Before the results are allocated: they must fit in memory (output None) or in
    the free space of the output's folder (the file is allocated at full size)."""
    per_run = sum(
        math.prod(shape) * np.dtype(dtype).itemsize for shape, dtype in layout.rows.values()
    )
    total = per_run * prep.runs
    what = f"the results of {prep.runs:,} runs ({readable(per_run)} each)"
    problem = (
        memory_problem(total, what)
        if output is None
        else disk_problem(Path(output).parent, total, what)
    )
    if problem:
        key = "sweep.samples" if "samples" in (prep.config.spec.sweep or {}) else "sweep.params"
        raise prep.config.error(
            key,
            f'{problem}; sweep fewer runs or keep less of each (sweep.save = "final" or "summary")',
        )


def _open_sink(
    prep: Prepared, output, resume: bool, layout: Layout, by_frames: bool, padded, runner
):
    """(sink, checkpoint, restored): where the results go (memory, the file, or on the
    processes of a distributed run other than the lead only their status), the path of
    the chunk checkpoint (None: none is kept) and the chunk checkpoint to resume from."""
    # (a distributed sweep keeps its finished chunks in the partial file, and no
    # checkpoint within a chunk: its carry would have to come to the lead and go back)
    checkpoint = None if output is None or _processes.count() > 1 else checkpoint_path(output)
    restored = None
    resuming = output is not None and resume and partial_path(output).exists()
    _processes.together("sweep start checked")  # (before the lead writes)
    if output is None:
        sink: FileSink | MemorySink | StatusSink = MemorySink(layout)
    elif not _processes.lead():
        sink = StatusSink(layout)
    elif resuming:
        FileSink.check_start(output, prep.text, resume=True, inputs=prep.identity)
        if checkpoint is not None:
            remove_stale(checkpoint)
        if (
            by_frames and checkpoint is not None and checkpoint.exists()
        ):  # checked before the partial file is opened for writing
            restored = _read_chunk_checkpoint(output, prep, padded, runner)
        sink = FileSink.resume(output, layout)
    else:
        sink = FileSink.create(output, layout)
    return sink, checkpoint, restored


def _execute(
    prep: Prepared, output, resume: bool, n_devices: int, client, progress: bool, start: float
):
    padded = prep.padded(n_devices)
    runner = _compiled_runner(prep, n_devices, padded)
    layout = prep.layout(runner.out_info)
    if output is None or not (resume and partial_path(output).exists()):
        _check_results_fit(prep, layout, output)
    by_frames = isinstance(runner, FramedRunner) and client is None
    sink, checkpoint, restored = _open_sink(prep, output, resume, layout, by_frames, padded, runner)
    status = _processes.from_lead(np.asarray(sink.status))  # (the lead's file says what is done)
    done = [k for k in range(prep.chunks) if np.all(status[slice(*prep.bounds(k))] != 0)]
    resumed = sum(prep.bounds(k)[1] - prep.bounds(k)[0] for k in done)
    pending = [k for k in range(prep.chunks) if k not in set(done)]
    written = resumed
    if restored is not None and restored.chunk not in pending:
        restored = None
    try:
        if checkpoint is not None and restored is None:
            remove_stale(checkpoint)
            checkpoint.unlink(
                missing_ok=True
            )  # of a chunk since written, or of another kind of sweep
        with Progress(enabled=progress, description=f"sweep {prep.setup.model.name}") as bar:
            for line in prep.notes:
                bar.note(line)
            bar.start(total=prep.runs)
            bar.advance(resumed)
            if client is not None:
                results = _run_dask(prep, client, padded, pending)
            elif by_frames:
                results = _run_framed(
                    prep,
                    runner,
                    n_devices,
                    padded,
                    pending,
                    None if checkpoint is None else output,
                    restored,
                )
            else:
                results = _run_local(prep, runner, n_devices, padded, pending)
            last, told = _time.perf_counter(), False
            watch = (
                contextlib.nullcontext()
                if output is None
                else _watched(output, n_devices, local=client is None and _processes.count() == 1)
            )
            with watch:
                for k, values in computed(results):
                    lo, hi = prep.bounds(k)
                    sink.write(
                        lo, hi, {name: np.asarray(v)[: hi - lo] for name, v in values.items()}
                    )
                    written += hi - lo
                    bar.advance(hi - lo)
                    if checkpoint is not None:
                        checkpoint.unlink(missing_ok=True)  # the chunk is in the partial file now
                    # Every written chunk is flushed: the partial file is the checkpoint.
                    safe_point(None if output is None else lambda: partial_path(output))
                    now = _time.perf_counter()
                    took, last = now - last, now
                    if (
                        output is not None
                        and not by_frames
                        and not told
                        and took > CHECKPOINT_SECONDS
                        and written < prep.runs
                    ):
                        told = True
                        print(_long_chunk_note(prep, took), file=sys.stderr)
    except BaseException:
        sink.abandon(keep=written > 0 or (checkpoint is not None and checkpoint.exists()))
        raise
    path = sink.finish() if isinstance(sink, FileSink) else None
    status = sink.status
    summary = SweepSummary(
        path=path,
        runs=prep.runs,
        ok=int(np.sum(status == OK)),
        failed=int(np.sum(status == FAILED)),
        resumed_runs=resumed,
        seconds=_time.perf_counter() - start,
        failures=_failures(status, sink.result_codes),
    )
    return summary, (sink if isinstance(sink, MemorySink) else None)


def _watched(output, devices: int, local: bool):
    """The watch over the sweep's chunks in the `sim` command (`sim._watchdog`): a chunk
    without progress, or a signal the chunk does not let the sweep answer, ends the
    command in one line, with what is kept and the command that resumes it."""
    kept = [partial_path(output), checkpoint_path(output)]

    def stopped(name: str) -> str:
        return f"interrupted ({name}): {kept_line(kept)}; resume with: {resume_line(output)}"

    def stalled(seconds: float) -> str:
        where = f"on {devices} device{'s' if devices > 1 else ''}"
        return (
            f"error: a chunk of the sweep made no progress for {seconds:.0f} s {where} (nothing "
            "computed: "
            f"the process waits on itself); {kept_line(kept)}; resume with: {resume_line(output)}"
        )

    return watching(stopped, stalled, cpu=jax.devices()[0].platform == "cpu", local=local)


def _long_chunk_note(prep: Prepared, seconds: float) -> str:
    """One line: a sweep is checkpointed chunk by chunk, and one chunk took longer than
    a run waits between checkpoints."""
    return (
        f"note: a chunk of {prep.chunk} runs took {seconds / 60:.1f} min; the sweep is saved after "
        "each chunk, "
        f"so an interrupt loses up to one chunk: a smaller [sweep] chunk saves more often"
    )


def _failures(status: np.ndarray, codes: np.ndarray) -> dict[int, int]:
    """Failed runs counted by result code (0: the solver succeeded, the checks did not)."""
    kinds, counts = np.unique(codes[status == FAILED], return_counts=True)
    return {int(k): int(n) for k, n in zip(kinds, counts, strict=False)}


def sweep(
    config: Config,
    output: str | Path | None = None,
    *,
    resume: bool = False,
    devices: int | None = None,
    scheduler: str | None = None,
    progress: bool = False,
) -> SweepResult:
    """Run every point of a config's `[sweep]` (what `sim sweep` does) and return the
    results as arrays.

    Runs are batched by `jax.vmap` in chunks of `sweep.chunk` runs (memory bounded
    whatever the sweep size), each chunk split over the local devices. A run that fails
    or diverges has `status` 2 and NaN observables; the sweep goes on.

    Arguments:
        config: from `sim.load_config`, with a `[sweep]` section.
        output: an HDF5 file for the sweep layout, written chunk by chunk under
            `.<name>.partial` and renamed when complete; None keeps results in memory.
        resume: continue the unfinished sweep of `output` (same resolved config),
            computing only the chunks not yet written.
        devices: use the first N local devices (default: all).
        scheduler: a Dask scheduler address, or `local:N` for a local cluster of N
            worker processes; each chunk becomes one task.
        progress: show progress and ETA on the terminal.

    Returns:
        A `SweepResult` (`.to_xarray()` for an xarray Dataset).

    Raises:
        ConfigError: a bad `[sweep]` or config (naming the key path).
        InputError: an unfinished sweep exists and `resume` is False; a resumed file
            that was started from another config; a bad device count or scheduler.
        MissingExtra: a scheduler, and Dask's distributed not installed (the 'dask' extra).

    Example:
        >>> result = sim.sweep(sim.load_config("experiments/lotka_volterra_sweep.toml"))
        >>> result.observables["prey"].shape       # [B, T]
    """
    summary, memory = execute(
        config, output, resume=resume, devices=devices, scheduler=scheduler, progress=progress
    )
    return memory.result() if memory is not None else SweepResult.read(summary.path)
