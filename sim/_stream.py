"""Runs streamed to disk: `sim run` advances in compiled chunks of saved frames, appends
each chunk to the output as it completes, checkpoints its full state, and `--resume`
continues an unfinished run exactly.

The pieces, one of each per model family (`Family.plan`):

- an **engine** advances the state one chunk of saved frames at a time (a compiled call
  per chunk, the same chunk boundaries on every run of a config) and can hand its state
  to a checkpoint and take it back;
- a **sink** is the file layout: it creates every dataset at full size from the first
  chunk, writes the rows of each chunk, and finishes the file with the run statistics.

While it runs, the output lives in `.<name>.partial` beside the target and is renamed
when complete, so the target only ever appears whole. Its checkpoint is a separate small
HDF5 file, `.<name>.checkpoint`, replaced atomically (written under a temporary name,
then renamed), so a crash, a kill or a full disk at any moment leaves the previous
checkpoint whole. Every dataset of the partial file is allocated when it is created, so
later writes only fill values and never change the file's structure.

Resuming rebuilds the run from its config, checks the config is the one the partial file
was started from (`sim._unfinished.config_difference`: all but where and how often it is
written and the bounds that can only stop it), loads the state of the last
checkpoint into the engine, and recomputes from there; frames written after that
checkpoint are simply written again. Engines are chunk-invariant: their state at a frame
holds everything the next step needs, so where chunks fall changes no number, and on the
same machine a resumed run computes the same file, bit for bit, as an uninterrupted one,
whatever chunk size and checkpoint interval either was given.

Chunks are bounded in memory (`[output] chunk`, or CHUNK_BYTES of saved rows) and in
wall time: the first chunk is a single frame, and later ones are sized from the time
the previous one took so that one takes about CHUNK_SECONDS. Between two chunks the run
checkpoints when due (every `checkpoint_every` frames, every `checkpoint_seconds`, by
default every CHECKPOINT_SECONDS) and honours an interrupt (`_interrupt.safe_point`:
SIGINT or SIGTERM under the command line writes a checkpoint and stops), so both happen
within seconds at any size of run.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple, Protocol, runtime_checkable

import h5py
import numpy as np
from jaxtyping import PyTree

from . import _processes
from ._errors import DataError, InputError, SimError, SimulationError
from ._identity import InputIdentity
from ._interrupt import safe_point
from ._limits import disk_problem, memory_problem
from ._lock import exclusive
from ._store import atomic_h5, error_reason
from ._unfinished import (
    RUN_BOUNDS,
    as_text,
    checkpoint_path,
    config_difference,
    partial_path,
    read_leaves,
    remove_stale,
    tree_from_leaves,
    write_tree,
)

CHECKPOINT_FORMAT = "simjax.checkpoint"
CHUNK_BYTES = 16 * 2**20  # saved rows held in memory per chunk, by default
CHUNK_SECONDS = 5.0  # wall time a chunk of a streamed run aims at (after the first)
CHUNK_GROWTH = 4  # a chunk has at most this many times the frames of the one before
CHECKPOINT_SECONDS = 300.0  # wall time between checkpoints when the config sets none


def _now() -> float:
    """The wall clock that paces chunks and checkpoints (seconds, monotonic)."""
    return time.monotonic()


class StorageError(SimError):
    """The output could not be written (disk full, folder gone or read-only): exit 1,
    the last checkpoint kept."""


@runtime_checkable
class Engine(Protocol):
    """How a family advances a run chunk by chunk.

    An engine must be chunk-invariant: advancing by n frames and then by m gives, bit
    for bit, the state and rows of advancing by n + m (its state holds everything the
    next step needs), and a state taken back from a checkpoint continues as the
    original would have.
    """

    times: np.ndarray  # save times [T]
    chunk: int  # the most saved frames per chunk

    def start(self) -> PyTree:
        """The state at the first save time."""

    def advance(self, state: PyTree, k: int, n: int) -> tuple[PyTree, dict[str, np.ndarray]]:
        """Advance from frame k by n frames: the new state and the rows of the frames
        k+1..k+n (and of frame 0 first when k == 0)."""

    def meta(self) -> dict[str, Any]:
        """JSON-able facts beyond the state that a resumed engine needs (buffer sizes)."""

    def restore(self, meta: dict[str, Any]) -> PyTree:
        """Take back `meta` from a checkpoint; return a state of the checkpointed
        structure (its values are replaced by the checkpoint's)."""

    def stats(self, state: PyTree) -> dict[str, int]:
        """Statistics of the run so far (written when it completes)."""


@runtime_checkable
class Sink(Protocol):
    """A run file layout."""

    def create(self, f: h5py.File, rows: dict[str, np.ndarray]) -> None:
        """Root attributes, fixed datasets, and every per-frame dataset at full size
        (shapes and dtypes from the rows of the first chunk)."""

    def write(self, f: h5py.File, k: int, rows: dict[str, np.ndarray]) -> None:
        """Write `rows` as frames k, k+1, ..."""

    def finish(self, f: h5py.File, stats: dict[str, int]) -> None:
        """Write what is only known at the end."""


@dataclasses.dataclass
class RunPlan:
    """A validated run of one config, ready to execute in memory or streamed to a file.

    Attributes:
        engine: advances the state chunk by chunk.
        sink: the file layout.
        config: the resolved config (TOML text) the file records.
        check: rows, first frame index -> None; raises `SimulationError` when the run
            diverged.
        result: all rows, stats -> the in-memory result (`RunResult`, `MdRunResult`).
        description: what the progress bar shows.
        notes: lines the run prints once it has ended (`Family.solver_notes`).
        inputs: the files the run reads and the package versions (`sim._identity`):
            with `config`, the run's identity, stored in the partial file and the
            checkpoint and compared on resume (`sim._run.plan_run` fills it in; None
            stands for a run that reads no file).
    """

    engine: Engine
    sink: Sink
    config: str
    check: Callable[[dict[str, np.ndarray], int], None]
    result: Callable[[dict[str, np.ndarray], dict[str, int]], Any]
    description: str = ""
    inputs: InputIdentity | None = None
    notes: tuple[str, ...] = ()

    def identity(self) -> InputIdentity:
        """The run's input files and versions (none for a plan made without a config)."""
        return self.inputs if self.inputs is not None else InputIdentity.of({})


def chunk_frames(frame_bytes: int, frames: int, requested: int | None = None, config=None) -> int:
    """Saved frames per chunk: `requested` if given, else as many as fit in CHUNK_BYTES;
    at least 1 and at most `frames`. A requested chunk beyond the machine's memory is an
    error about `output.chunk` of `config`."""
    if requested is not None:
        n = max(1, min(int(requested), frames))
        problem = memory_problem(n * frame_bytes, f"a chunk of {n:,} saved frames", device=True)
        if problem and config is not None:
            raise config.error("output.chunk", problem)
        return n
    return max(1, min(frames, CHUNK_BYTES // max(int(frame_bytes), 1)))


def boundaries(frames: int, chunk: int) -> list[tuple[int, int]]:
    """(first frame, frames) of every chunk of a run with `frames` intervals."""
    return [(k, min(chunk, frames - k)) for k in range(0, frames, chunk)]


class ChunkSizer:
    """Chunk lengths bounded by the engine's `chunk` and by wall time: a first chunk of
    one frame (it also compiles), then as many frames as the last chunk's pace fits in
    `seconds`, growing at most `growth` times from one chunk to the next.

    Engines are chunk-invariant, so these lengths, which depend on the machine's speed,
    change no number. The processes of a distributed run take the lead's lengths.
    """

    def __init__(self, limit: int, seconds: float = CHUNK_SECONDS, growth: int = CHUNK_GROWTH):
        self.limit = max(1, int(limit))
        self.seconds = seconds
        self.growth = growth
        self.last: int | None = None
        self.pace: float | None = None  # seconds per frame of the last chunk

    def next(self, remaining: int) -> int:
        """The frames of the next chunk (at most `remaining`)."""
        if self.last is None:
            n = 1
        else:
            n = min(self.limit, self.last * self.growth)
            if self.pace is not None and self.pace > 0:
                n = min(n, max(1, math.floor(self.seconds / self.pace)))
        n = max(1, min(n, remaining))
        # (the processes of a distributed run step together: the lead's clock decides)
        return int(_processes.from_lead(np.asarray(n, dtype=np.int64)))

    def took(self, frames: int, seconds: float) -> None:
        """Record that a chunk of `frames` frames took `seconds`."""
        self.last = frames
        self.pace = max(seconds, 0.0) / max(frames, 1)


# ----------------------------------------------------------------------------- in memory


def collect(plan: RunPlan, progress=None) -> Any:
    """Execute `plan` in memory and return its result (what `sim.run(config)` does)."""
    engine = plan.engine
    frames = len(engine.times) - 1
    state = engine.start()
    pieces: list[dict[str, np.ndarray]] = []
    if progress is not None:
        progress.start(total=frames)
    for k, n in boundaries(frames, engine.chunk):
        state, rows = engine.advance(state, k, n)
        plan.check(rows, k)
        pieces.append(rows)
        if progress is not None:
            progress.advance(n)
    rows = {name: np.concatenate([p[name] for p in pieces], axis=0) for name in pieces[0]}
    return plan.result(rows, engine.stats(state))


# ----------------------------------------------------------------------------- paths


def _remove_stale(path: Path) -> None:
    """Temporary files of interrupted checkpoint writes."""
    remove_stale(checkpoint_path(path))


# ----------------------------------------------------------------------------- checkpoints


def write_checkpoint(
    path: Path,
    *,
    config: str,
    frame: int,
    frames: int,
    meta: dict,
    state: PyTree,
    inputs: InputIdentity | None = None,
) -> None:
    """Write the checkpoint of `path`'s run atomically, with the run's identity (its
    config, and the digests of its files and the versions: `inputs`)."""
    with atomic_h5(checkpoint_path(path)) as f:
        f.attrs["format"] = CHECKPOINT_FORMAT
        f.attrs["config"] = config
        (inputs if inputs is not None else InputIdentity.of({})).write(f.attrs)
        f.attrs["frame"] = int(frame)
        f.attrs["frames"] = int(frames)
        f.attrs["meta"] = json.dumps(meta)
        write_tree(f.create_group("state"), state)


@dataclasses.dataclass(frozen=True)
class Checkpoint:
    frame: int
    meta: dict
    leaves: list[tuple[np.ndarray, str]]

    def state(self, template: PyTree, source: Path) -> PyTree:
        """The checkpointed state, in the structure of `template` (arrays, or the
        `jax.ShapeDtypeStruct`s of `jax.eval_shape`).

        Raises:
            DataError: the stored arrays do not fit the run's state.
        """
        return tree_from_leaves(self.leaves, template, source, "state")


def read_checkpoint(
    path: Path, config: str, frames: int, inputs: InputIdentity | None = None
) -> Checkpoint:
    """The checkpoint of `path`'s unfinished run, checked against the run's identity
    (its config, and the files it reads and the versions: `inputs`).

    Raises:
        DataError: the checkpoint is missing, unreadable, or not of this run.
        InputError: it was written by a run of another config, of other input files or
            on other package versions.
    """
    source = checkpoint_path(path)
    if not source.exists():
        raise DataError(
            source,
            "",
            f"missing: the unfinished run {partial_path(path)} has no checkpoint to resume from; "
            "delete it to start over",
        )
    try:
        with h5py.File(source, "r") as f:
            if f.attrs.get("format") != CHECKPOINT_FORMAT:
                raise DataError(
                    source,
                    "format",
                    "is not a simjax run checkpoint; delete it and the partial run to start over",
                )
            stored = as_text(f.attrs.get("config", ""))
            frame = int(f.attrs["frame"])
            total = int(f.attrs["frames"])
            meta = json.loads(as_text(f.attrs["meta"]))
            attrs = dict(f.attrs)
            # (checkpoints of earlier versions count their leaves in the root attributes)
            leaves = read_leaves(f["state"], f.attrs.get("leaves"))
    except (OSError, RuntimeError, KeyError, ValueError, TypeError) as e:  # h5py on a damaged file
        if isinstance(e, DataError):
            raise
        detail = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise DataError(
            source,
            "",
            f"cannot be read ({detail}); the checkpoint is damaged: delete it and the partial run "
            "to start over",
        ) from None
    difference = config_difference(stored, config, RUN_BOUNDS)
    if difference:
        raise InputError(
            source,
            "config",
            f"the checkpoint belongs to a run of a different config ({difference})",
        )
    (inputs if inputs is not None else InputIdentity.of({})).check(attrs, source, "run")
    if total != frames or not 0 <= frame < frames:
        raise DataError(
            source, "frame", f"checkpoint at frame {frame} of {total}; this run has {frames} frames"
        )
    return Checkpoint(frame=frame, meta=meta, leaves=leaves)


# ----------------------------------------------------------------------------- streamed


@dataclasses.dataclass(frozen=True)
class Streamed:
    """What `stream` wrote."""

    path: Path
    frames: int
    resumed_from: int | None
    stats: dict[str, int]


def _unfinished_run(partial: Path) -> bool:
    """Whether `partial` is a readable unfinished simjax run."""
    if not partial.is_file():
        return False
    try:
        with h5py.File(partial, "r") as f:
            return as_text(f.attrs.get("format", "")) == "simjax.run"
    except (OSError, RuntimeError, KeyError, ValueError, TypeError):
        return False


def check_start(path: Path, config: str, resume: bool, inputs: InputIdentity | None = None) -> None:
    """Before any work: what may be done with the files of `path`.

    Raises:
        InputError: an unfinished run is there and --resume was not given; --resume was
            given and there is nothing to resume, or the target is complete; the
            unfinished run is of another config, read other files (`inputs`) or ran on
            other package versions.
    """
    partial = partial_path(path)
    if not resume:
        if partial.exists():
            raise InputError(
                partial,
                "",
                "an unfinished run of this file is here; pass --resume to continue it, or delete "
                "it to start over",
            )
        return
    if not partial.exists():
        if path.exists():
            raise InputError(
                path,
                "",
                "is a finished run; there is nothing to resume (run without --resume to overwrite "
                "it)",
            )
        raise InputError(
            partial, "", "no unfinished run to resume (run without --resume to start one)"
        )
    try:
        with h5py.File(partial, "r") as f:
            stored = as_text(f.attrs.get("config", ""))
            fmt = as_text(f.attrs.get("format", ""))
            attrs = dict(f.attrs)
    except (OSError, RuntimeError, KeyError, ValueError, TypeError) as e:  # h5py on a damaged file
        raise DataError(
            partial, "", f"cannot be read ({error_reason(e)}); delete it to start over"
        ) from None
    if fmt != "simjax.run":
        raise DataError(
            partial, "format", "is not an unfinished simjax run; delete it to start over"
        )
    difference = config_difference(stored, config, RUN_BOUNDS)
    if difference:
        raise InputError(
            partial,
            "config",
            f"the unfinished run was started from a different config ({difference}); resume with "
            "the same config and --set values, or delete it to start over",
        )
    (inputs if inputs is not None else InputIdentity.of({})).check(attrs, partial, "run")


def stream(
    plan: RunPlan,
    path: str | Path,
    *,
    resume: bool = False,
    checkpoint_every: int | None = None,
    checkpoint_seconds: float | None = None,
    progress=None,
) -> Streamed:
    """Execute `plan`, writing its frames to `path` chunk by chunk.

    Holds the lock of `path` (`_lock.exclusive`) throughout. After each chunk is written,
    a checkpoint is written when due, and an interrupt requested by SIGINT or SIGTERM
    (under the command line) writes one and stops (`_interrupt.Interrupted`, the
    partial file and the checkpoint kept for --resume).

    Arguments:
        plan: from `Family.plan` (`sim._run.plan_run`).
        path: the output file.
        resume: continue the unfinished run of `path` from its last checkpoint.
        checkpoint_every: saved frames between checkpoints (at the first chunk end at or
            after each multiple).
        checkpoint_seconds: wall time between checkpoints (at the first chunk end after
            it passed). With neither, a checkpoint every CHECKPOINT_SECONDS.
        progress: a `Progress`.

    Raises:
        InputError: see `check_start`; a checkpoint that does not fit (files untouched);
            another process writes `path`.
        SimulationError: the run diverged or the solver failed (the partial file and the
            last checkpoint are kept when there is one, and the message says where;
            otherwise the partial file is removed).
        StorageError: the output could not be written (the last checkpoint is kept).
        Interrupted: SIGINT or SIGTERM under the command line (a checkpoint written).
    """
    path = Path(path)
    with exclusive(path):
        return _stream(plan, path, resume, checkpoint_every, checkpoint_seconds, progress)


class _Start(NamedTuple):
    """Where a streamed run starts: afresh (frame 0) or from its last checkpoint."""

    resume: bool
    identity: InputIdentity
    state: PyTree
    frame: int
    resumed_from: int | None


def _start(plan: RunPlan, path: Path, resume: bool, frames: int) -> _Start:
    """The engine's state to stream from, after the output's unfinished files are checked
    (`check_start`): the checkpoint's with `resume`, else the engine's first."""
    engine = plan.engine
    partial = partial_path(path)
    first = not checkpoint_path(path).exists() and _unfinished_run(partial)
    if _processes.agreed(first):
        # Stopped before its first checkpoint (killed, or the machine went down): it holds
        # nothing to continue from, and no other process writes it (the lock is ours), so
        # it is discarded and the run starts afresh, with or without --resume. (A damaged
        # or foreign file under that name is left alone and refused by `check_start`.)
        # (`agreed` returns once every process has looked: the lead may remove it then)
        if _processes.lead():
            partial.unlink()
        resume = False
    identity = plan.identity()
    check_start(path, plan.config, resume, identity)
    if resume:
        checkpoint = read_checkpoint(path, plan.config, frames, identity)
        template = engine.restore(checkpoint.meta)
        state = checkpoint.state(template, checkpoint_path(path))
        _processes.together("checkpoint read")  # (before the lead writes)
        return _Start(resume, identity, state, checkpoint.frame, checkpoint.frame)
    _processes.together("start checked")  # (before the lead writes)
    if _processes.lead():
        with contextlib.suppress(FileNotFoundError):
            checkpoint_path(path).unlink()  # of an earlier run whose partial file is gone
    return _Start(resume, identity, engine.start(), 0, None)


def _check_disk(path: Path, rows: dict, frames: int) -> None:
    """Raise InputError when the output of `frames` + 1 frames like the first chunk's
    `rows` would not fit on the disk of `path`."""
    per_frame = sum(v.nbytes / max(v.shape[0], 1) for v in map(_array, rows.values()))
    problem = disk_problem(
        path.parent, per_frame * (frames + 1), f"the output of {frames + 1:,} frames"
    )
    if problem:
        raise InputError(path, "", problem)


def _array(value: Any) -> Any:
    """`value` as an array (a JAX array, split over devices or not, as it is)."""
    return value if hasattr(value, "nbytes") and hasattr(value, "shape") else np.asarray(value)


def _stream(
    plan: RunPlan, path: Path, resume: bool, checkpoint_every, checkpoint_seconds, progress
) -> Streamed:
    engine = plan.engine
    frames = len(engine.times) - 1
    partial = partial_path(path)
    resume, identity, state, k0, resumed_from = _start(plan, path, resume, frames)
    every = None if checkpoint_every is None else max(1, int(checkpoint_every))
    seconds = (
        checkpoint_seconds
        if checkpoint_seconds is not None
        else (None if every is not None else CHECKPOINT_SECONDS)
    )
    last_checkpoint = k0  # the frame of the last checkpoint (k0: the one resumed from)
    last_checkpoint_time = _now()
    sizer = ChunkSizer(engine.chunk)
    if progress is not None:
        progress.start(total=frames)
        progress.advance(k0)
    f = None
    lead = _processes.lead()
    created = resume and lead

    def checkpoint(done: int) -> Path:
        nonlocal last_checkpoint, last_checkpoint_time
        if _processes.agreed(last_checkpoint != done or not checkpoint_path(path).exists()):
            write_checkpoint(
                path,
                config=plan.config,
                frame=done,
                frames=frames,
                meta=engine.meta(),
                state=state,
                inputs=identity,
            )
            last_checkpoint = done
        last_checkpoint_time = _now()
        return checkpoint_path(path)

    try:
        if resume and lead:
            f = h5py.File(partial, "r+")
        k = k0
        while k < frames:
            n = sizer.next(frames - k)
            began = _now()
            state, rows = engine.advance(state, k, n)
            plan.check(rows, k)  # before the chunk is written or checkpointed
            if f is None:
                _check_disk(path, rows, frames)
                f = _processes.h5_file(partial, "w")
                created = lead
                plan.sink.create(f, rows)
                identity.write(f.attrs)
            plan.sink.write(f, k if k == 0 else k + 1, rows)
            f.flush()
            done = k + n
            sizer.took(n, _now() - began)
            if progress is not None:
                progress.advance(n)
            if done < frames:
                due = (every is not None and done - last_checkpoint >= every) or (
                    seconds is not None and _now() - last_checkpoint_time >= seconds
                )
                if _processes.agreed(due):  # (the clocks of a distributed run's processes differ)
                    checkpoint(done)
                safe_point(lambda done=done: checkpoint(done))
            k = done
        stats = engine.stats(state)
        plan.sink.finish(f, stats)
        f.close()
        f = None
        if lead:
            os.replace(partial, path)
    except SimulationError as e:
        _close(f)
        if checkpoint_path(path).exists():
            raise SimulationError(
                f"{e}; the last good checkpoint (frame {last_checkpoint} of {frames}) is kept in "
                f"{checkpoint_path(path)}, "
                f"the frames up to it in {partial}"
            ) from None
        if created:
            with contextlib.suppress(FileNotFoundError):
                partial.unlink()
        raise
    except OSError as e:
        _close(f)
        raise _storage_error(e, path, partial, created) from None
    except BaseException:
        _close(f)
        if created and not checkpoint_path(path).exists():
            with contextlib.suppress(FileNotFoundError):
                partial.unlink()
        raise
    if lead:
        with contextlib.suppress(FileNotFoundError):
            checkpoint_path(path).unlink()
        _remove_stale(path)
    return Streamed(path=path, frames=frames, resumed_from=resumed_from, stats=stats)


def _storage_error(e: OSError, path: Path, partial: Path, created: bool) -> StorageError:
    """The error of a run whose output could not be written: the partial file is kept
    for --resume where a checkpoint is, and removed (if this run created it) where none
    is."""
    reason = " ".join((e.strerror or str(e)).split())  # (HDF5 texts span lines)
    if checkpoint_path(path).exists():
        return StorageError(
            f"{path}: cannot write the run ({reason}); the frames up to the last checkpoint "
            f"are kept in {partial}: "
            "fix the cause and continue with --resume"
        )
    if created:
        with contextlib.suppress(FileNotFoundError):
            partial.unlink()
    return StorageError(f"{path}: cannot write the run ({reason}); nothing was kept")


def _close(f) -> None:
    if f is not None:
        with contextlib.suppress(Exception):
            f.close()
