"""One writer per output: an exclusive lock on `.<name>.lock` beside the output file.

Every command that writes a file (run, sweep, fit, infer, plot) holds the lock of its
output from before it looks at any of that output's files (the file, its unfinished
`.partial`, its checkpoint) until it is done. A second writer is refused at once, with
the process that holds the lock and its command, before it has touched anything.

The lock is `fcntl.flock` on the lock file, so it is released by the kernel when its
holder dies, even by SIGKILL: a lock file left behind by a killed process holds nobody
and is taken over by the next writer. The holder removes the file when it is done. A
writer that opened the file just before the holder removed it finds, once it has the
lock, that the name now points elsewhere (or nowhere) and tries again, so two writers
never both believe they hold it.

Locks are re-entrant within a process (a command and the library call it makes may both
ask for the same output).
"""

from __future__ import annotations

import contextlib
import datetime
import fcntl
import json
import os
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path

from ._errors import InputError
from ._store import companion_path

_held: dict[Path, int] = {}  # resolved lock path -> nesting depth, in this process


def lock_path(path: str | Path) -> Path:
    """The lock file of the output `path`: `.<name>.lock` beside it."""
    return companion_path(path, "lock")


def _holder(fd: int) -> str:
    """Who holds the lock whose file is open as `fd`, from what it wrote there."""
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        info = json.loads(os.read(fd, 65536).decode() or "{}")
    except (OSError, ValueError):
        info = {}
    if not info:
        return "another process"
    return (
        f"process {info.get('pid', '?')} (`{info.get('command', '?')}`, since "
        f"{info.get('since', '?')})"
    )


def _acquire(lock: Path, output: Path) -> int:
    while True:
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        except OSError as e:  # a folder where no file can be made (/proc, /sys, ...)
            raise InputError(
                output,
                "",
                f"cannot create a file beside it ({e.strerror}); expected an output in a folder of "
                "ordinary files",
            ) from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            who = _holder(fd)
            os.close(fd)
            raise InputError(
                output,
                "",
                f"another writer has this output open: {who}; wait for it to finish or stop it",
            ) from None
        except OSError:
            os.close(fd)
            raise
        try:
            same = os.fstat(fd).st_ino == os.stat(lock).st_ino
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)  # the previous holder removed the file as we opened it: try again
    record = {
        "pid": os.getpid(),
        "command": shlex.join(["sim", *sys.argv[1:]])
        if Path(sys.argv[0]).name == "sim"
        else shlex.join(sys.argv),
        "since": datetime.datetime.now().isoformat(timespec="seconds"),
    }
    os.ftruncate(fd, 0)
    os.write(fd, json.dumps(record).encode())
    return fd


@contextlib.contextmanager
def exclusive(path: str | Path) -> Iterator[None]:
    """Hold the lock of the output `path` for the block.

    Raises:
        InputError: another process is writing `path` (names it and its command).

    Of a distributed run's processes only the lead (process 0) takes the lock: it
    writes the files (`sim._processes`); for the others the block runs unlocked.
    """
    from . import _processes

    if not _processes.lead():
        yield
        return
    path = Path(path)
    lock = lock_path(path)
    key = lock.absolute()
    if key in _held:
        _held[key] += 1
        try:
            yield
        finally:
            _held[key] -= 1
        return
    fd = _acquire(lock, path)
    _held[key] = 1
    try:
        yield
    finally:
        del _held[key]
        with contextlib.suppress(OSError):
            os.unlink(lock)  # while still holding it: see the module docstring
        os.close(fd)


def abandon() -> None:
    """Remove the lock files this process holds, for a process about to end at once
    (`sim._interrupt.immediate`); the locks themselves end with the process."""
    for lock in list(_held):
        with contextlib.suppress(OSError):
            os.unlink(lock)
