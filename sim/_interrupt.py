"""Interrupts (SIGINT from Ctrl-C, SIGTERM from a cluster scheduler) turned into a
request that long work honours at its next safe point.

The command line calls `deferred()` around a command. While it is active, the first
SIGINT or SIGTERM only records a request; every long loop (a streamed run between two
chunks, a sweep between two chunks, a fit between two iterations) calls `safe_point`,
which writes a checkpoint and raises `Interrupted` once a request is there. A second
signal raises `Interrupted` at once (its cleanup still leaves no partial output), for a
user who will not wait; once a stop is under way (the checkpoint being written, the
message printed), further signals are ignored, so a stop ends with one line.

Nothing is raised from inside JAX or XLA: a Python signal handler runs between two
bytecodes of the main thread, so a signal that arrives during compilation is seen when
the compiler returns, and honoured at the safe point that follows.

In a Python session no handler is installed: `safe_point` is a no-op and Ctrl-C raises
`KeyboardInterrupt` as usual.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

SIGNALS = (signal.SIGINT, signal.SIGTERM)

_requested: int | None = None  # the first signal received while `deferred` is active
_stopping = False  # a stop is under way: further signals change nothing
_active = False  # within `deferred`


class Interrupted(BaseException):
    """Work stopped at a safe point after SIGINT or SIGTERM (a `BaseException`, as
    `KeyboardInterrupt`, so that `except Exception` never swallows it).

    Attributes:
        signum: the signal received.
        checkpoint: the checkpoint written before stopping (None when there was nothing
            to keep).
    """

    def __init__(self, signum: int, checkpoint: Path | None = None):
        super().__init__(signal.Signals(signum).name)
        self.signum = int(signum)
        self.checkpoint = checkpoint

    @property
    def exit_code(self) -> int:
        """128 + the signal number: 130 after SIGINT, 143 after SIGTERM."""
        return 128 + self.signum


def _on_signal(signum: int, frame) -> None:
    global _requested, _stopping
    if _stopping:  # already saving and stopping: one stop, one message
        return
    if _requested is None:
        _requested = signum
        return
    _stopping = True
    raise Interrupted(signum)


def active() -> bool:
    """Whether signals are deferred now (within `deferred`): a `KeyboardInterrupt` then
    comes from code that raised it, never from Ctrl-C."""
    return _active


def requested() -> int | None:
    """The signal received since `deferred` began, or None."""
    return _requested


def safe_point(save: Callable[[], Path | None] | None = None) -> None:
    """Stop here if an interrupt was requested: call `save` (which writes a checkpoint
    and returns its path), then raise `Interrupted`.

    Raises:
        Interrupted: an interrupt was requested.
    """
    global _stopping, _requested
    from . import _processes

    if _processes.count() > 1 and _processes.agreed(_requested is not None):
        # (a distributed run's processes stop at the same safe point: a signal to one of
        # them stops them all there, each saving its part)
        _requested = _requested if _requested is not None else signal.SIGTERM
    signum = _requested
    if signum is None:
        return
    _stopping = True
    kept = save() if save is not None else None
    if _processes.count() > 1:
        # (each has saved its part before any ends: one that ended while another was still
        # writing was taken by the other for a process lost, which then ended with 1)
        _processes.together("interrupted")
    raise Interrupted(signum, kept)


@contextlib.contextmanager
def immediate(what: str) -> Iterator[None]:
    """Within `deferred`, for work that keeps nothing when stopped and may spend minutes
    in one compiled call (NUTS sampling): a signal ends the process at once, with one
    line ("interrupted (SIG...) while <what>; nothing was written") and 128 + the signal
    number, even while the main thread is inside XLA. (Python runs its signal handlers
    only between bytecodes of the main thread; the C-level handler also writes the
    signal number to the wakeup file descriptor, which a thread watches here.) Outside
    `deferred` (a Python session) it does nothing."""
    if not _active or threading.current_thread() is not threading.main_thread():
        yield
        return
    read, write = os.pipe()
    os.set_blocking(write, False)
    previous = signal.set_wakeup_fd(write, warn_on_full_buffer=False)

    def watch() -> None:
        try:
            data = os.read(read, 1)
        except OSError:
            return
        if not data:  # the block ended: the pipe was closed
            return
        signum = data[0]
        from . import _lock

        _lock.abandon()
        os.write(
            2,
            f"interrupted ({signal.Signals(signum).name}) while {what}; "
            "nothing was written\n".encode(),
        )
        os._exit(128 + signum)

    watcher = threading.Thread(target=watch, name="sim-interrupt", daemon=True)
    watcher.start()
    try:
        yield
    finally:
        signal.set_wakeup_fd(previous)
        os.close(write)  # the watcher reads end-of-file and returns
        watcher.join()
        os.close(read)


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """Within the block, SIGINT and SIGTERM request a stop at the next `safe_point`
    (a second signal stops at once); the previous handlers are restored after it."""
    global _requested, _stopping, _active
    previous = {s: signal.getsignal(s) for s in SIGNALS}
    _requested, _stopping, _active = None, False, True
    for s in SIGNALS:
        signal.signal(s, _on_signal)
    try:
        yield
    finally:
        for s, handler in previous.items():
            # The `sim` entry point's handler speaks of a command still starting; once the
            # command has run, a late signal must not print that (or change the exit
            # code of a finished command): it is ignored while the process exits.
            signal.signal(
                s, signal.SIG_IGN if getattr(handler, "before_command", False) else handler
            )
        _requested, _stopping, _active = None, False, False
