"""A watch over the chunks of a sweep in the `sim` command: a chunk that makes no progress
ends the command in one line, and SIGINT or SIGTERM end it even while XLA holds the main
thread.

While a chunk computes, the main thread waits inside XLA, where Python runs no signal
handler and no safe point comes: a computation that waits for ever (a deadlock between
XLA's threads, a model's host callback that never returns) would keep the process alive,
deaf to SIGTERM. A thread watches instead (`watching`, within `sim._interrupt.deferred`):

- Progress is a call of the chunk that returns (a chunk, or a framed chunk's few
  frames) or, on CPU devices, the process using CPU time (at least `BUSY_SHARE` of a
  core over each tick of `TICK` seconds): a long chunk that computes is never stalled,
  only one in which nothing runs. With none for `stall_seconds` (`SIMJAX_STALL_SECONDS` in the
  environment, else `STALL_SECONDS`), the command ends with one line ("error: ... made
  no progress for N s ...; resume with: ...") and exit code 1. On other devices the host
  waits idle while they compute, so only returned calls count, and the watch is off
  unless the variable is set. A tick that took far longer than asked (the process was
  stopped, the machine suspended) starts the count again. Chunks sent to a Dask
  cluster take what time they take there: for them only signals are watched.
- A signal (SIGINT, SIGTERM) is first left to the sweep's next safe point, which writes
  a checkpoint; if the chunk is still computing `SIGNAL_GRACE_SECONDS` later, or at a
  second signal, the command ends at once with the line of an interrupted command and
  128 + the signal number.

Either way what the sweep has written stays: the partial file, flushed after each chunk,
and the checkpoint of a framed chunk, so `--resume` continues from them. The process ends
only while the main thread computes (`computed` marks those stretches, `outside` the
writes within them), never halfway through writing a file.

In a Python session (no `deferred`) nothing is watched.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from ._errors import shown

STALL_SECONDS = 30.0
"""How long a chunk may go without progress (see the module docstring) by default."""
STALL_VARIABLE = "SIMJAX_STALL_SECONDS"
SIGNAL_GRACE_SECONDS = 5.0
"""How long a signal waits for the sweep's next safe point while a chunk computes."""
TICK = 0.25
"""Seconds between two looks of the watch."""
BUSY_SHARE = 0.02
"""The share of one core's time the process must use over a tick to count as computing."""


def stall_seconds(cpu: bool) -> float | None:
    """The bound on a chunk without progress: `SIMJAX_STALL_SECONDS`, else
    `STALL_SECONDS` on CPU devices and none on others (None: not watched).

    Raises:
        ValueError: the variable is not a positive number of seconds.
    """
    text = os.environ.get(STALL_VARIABLE, "").strip()
    if not text:
        return STALL_SECONDS if cpu else None
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise ValueError(f"{STALL_VARIABLE}={text!r}: expected a positive number of seconds")
    return value


class _Watch:
    """The state the watching thread and the main thread share (under `lock`)."""

    def __init__(
        self,
        stall: float | None,
        cpu: bool,
        stopped: Callable[[str], str],
        stalled: Callable[[float], str],
    ):
        self.stall = stall
        self.cpu = cpu
        self.stopped = stopped
        self.stalled = stalled
        self.lock = threading.Lock()
        self.computing = False
        self.since = time.monotonic()
        self.signum: int | None = None
        self.signalled_at = 0.0

    def enter(self) -> None:
        with self.lock:
            self.computing, self.since = True, time.monotonic()

    def leave(self) -> None:
        with self.lock:  # (blocks for good if the watch is ending the process)
            self.computing = False

    def progress(self) -> None:
        self.since = time.monotonic()

    def end(self, line: str, code: int) -> None:
        """End the process with `line` if the main thread is computing (else leave it to
        the main thread, which is writing or at a safe point)."""
        with self.lock:
            if not self.computing:
                return
            from . import _lock

            _lock.abandon()
            from ._supervisor import error_fd

            os.write(error_fd(), (line + "\n").encode())
            os._exit(code)

    def run(self, read: int) -> None:
        last, cpu_then = time.monotonic(), time.process_time()
        while True:
            ready, _, _ = select.select([read], [], [], TICK)
            now = time.monotonic()
            if ready:
                data = os.read(read, 64)
                if not data:  # the watch ended: the pipe was closed
                    return
                for signum in data:
                    if signum not in (signal.SIGINT, signal.SIGTERM):
                        continue
                    if self.signum is not None:  # a second signal: at once
                        self.end(self.stopped(signal.Signals(signum).name), 128 + signum)
                    self.signum, self.signalled_at = signum, now
            if not self.computing:
                self.since = now
            if self.signum is not None and now - self.signalled_at >= SIGNAL_GRACE_SECONDS:
                self.end(self.stopped(signal.Signals(self.signum).name), 128 + self.signum)
            cpu_now = time.process_time()
            elapsed = now - last
            if elapsed > 10 * TICK + 1.0:  # stopped or suspended: count again
                self.since = now
            elif self.cpu and cpu_now - cpu_then > BUSY_SHARE * elapsed:
                self.since = now
            last, cpu_then = now, cpu_now
            if self.stall is not None and self.computing and now - self.since >= self.stall:
                self.end(self.stalled(now - self.since), 1)


_current: _Watch | None = None


@contextlib.contextmanager
def watching(
    stopped: Callable[[str], str], stalled: Callable[[float], str], cpu: bool, local: bool = True
) -> Iterator[None]:
    """Watch the chunks computed in the block (`computed`), within the command's
    `sim._interrupt.deferred` in the main thread; elsewhere it does nothing.

    Arguments:
        stopped: the line printed when a signal ends the process, from the signal's name.
        stalled: the line printed when a chunk made no progress for so many seconds.
        cpu: whether the devices are CPU devices (the process's CPU time then counts as
            progress).
        local: whether the chunks are computed in this process; chunks sent to a Dask
            cluster take what time they take there, and only signals are watched.

    Raises:
        InputError: `SIMJAX_STALL_SECONDS` is not a positive number.
    """
    global _current
    from ._errors import InputError
    from ._interrupt import active

    if (
        not active()
        or threading.current_thread() is not threading.main_thread()
        or _current is not None
    ):
        yield
        return
    try:
        stall = stall_seconds(cpu) if local else None
    except ValueError as e:
        raise InputError(
            STALL_VARIABLE, os.environ.get(STALL_VARIABLE, ""), str(e).partition(": ")[2]
        ) from None
    watch = _Watch(stall, cpu, stopped, stalled)
    read, write = os.pipe()
    os.set_blocking(write, False)
    previous = signal.set_wakeup_fd(write, warn_on_full_buffer=False)
    watcher = threading.Thread(target=watch.run, args=(read,), name="sim-chunk-watch", daemon=True)
    watcher.start()
    _current = watch
    try:
        yield
    finally:
        _current = None
        signal.set_wakeup_fd(previous)
        os.close(write)  # the watcher reads end-of-file and returns
        watcher.join()
        os.close(read)


def computed(results: Iterable) -> Iterator:
    """The items of `results`, each computed (the iterator advanced) as a watched stretch
    of computing; the items are handed on outside it."""
    iterator = iter(results)
    while True:
        watch = _current
        if watch is not None:
            watch.enter()
        try:
            item = next(iterator)
        except StopIteration:
            return
        finally:
            if watch is not None:
                watch.leave()
                watch.progress()
        yield item


@contextlib.contextmanager
def outside() -> Iterator[None]:
    """Within a watched stretch of computing, a block that is not computing (a
    checkpoint being written, a safe point): the process is not ended during it, and its
    end counts as progress."""
    watch = _current
    if watch is None or not watch.computing:
        yield
        return
    watch.leave()
    try:
        yield
    finally:
        watch.enter()


def kept_line(paths: list[Path]) -> str:
    """Words for what an ended sweep keeps."""
    existing = [shown(p) for p in paths if p.exists()]
    return (
        f"the sweep so far is kept in {' and '.join(existing)}"
        if existing
        else "nothing was saved yet"
    )


def resume_line(output: Path) -> str:
    """The command that resumes the sweep: the command line's own (`sim.cli`), when the
    command runs; else a plain one."""
    cli = sys.modules.get("sim.cli")
    return (
        cli.resume_command(output)
        if cli is not None
        else f"sim sweep ... -o {shown(output)} --resume"
    )
