"""The `sim` command's process under `--distributed`: it runs the command in a child
process and ends as the child does, so that what the user sees of one process of a
distributed run is what a `sim` command shows, one line when it fails.

Why a child: when another process of the run ends or stops answering, JAX's
coordination service ends this one from C++ (an abort with a stack trace, on a thread
Python never sees), and gloo's collectives and the coordination client write their
own lines to the standard streams. The child's C-level standard output and error go
to this process, which keeps them in a log file (`log_path`, named in the line that
reports the end) and shows none of them; what the command itself prints (its Python
`sys.stdout` and `sys.stderr`, which the child points at this process's streams
through `USER_STREAMS`) reaches the user unchanged, a terminal's progress bar included.

The child exits with its command's code, which this process returns; a child that was
ended otherwise (by a signal, or by an abort) gets one line: which process, why (as
far as its log says) and the command that resumes the run. SIGINT and SIGTERM sent to
this process go to the child (which stops at its next safe point, as the command does);
the child gets SIGKILL when this process ends (Linux), so it never outlives it.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

CHILD = "SIMJAX_DISTRIBUTED_CHILD"
"""Set in the child's environment: it runs the command itself."""
USER_STREAMS = "SIMJAX_USER_STREAMS"
"""The child's file descriptors of the user's standard output and error ("OUT,ERR")."""
PEER_LOST = 75
"""The child's exit code when a collective with another process failed (it ended or
stopped answering): this process then says so in one line."""

_LOST = (
    "heartbeat timeout",
    "Terminating process because the JAX distributed service",
    "Connection closed by peer",
    "Socket closed",
    "Connection reset by peer",
    "failed to connect",
    "UNAVAILABLE",
)


def lost_peer(text: str) -> bool:
    """Whether an error's or a log's `text` says another process of the run ended or
    stopped answering."""
    return any(mark in text for mark in _LOST)


def wanted(args: list[str]) -> bool:
    """Whether the `sim` command `args` runs distributed and this is not its child."""
    return "--distributed" in args and os.environ.get(CHILD) != "1"


def _process(args: list[str]) -> str:
    """ "process I of N" as far as the command line says (the scheduler's variables
    otherwise)."""

    def option(name: str) -> str | None:
        for i, arg in enumerate(args):
            if arg == name and i + 1 < len(args):
                return args[i + 1]
            if arg.startswith(name + "="):
                return arg.partition("=")[2]
        return None

    index = option("--process-id") or os.environ.get(
        "SLURM_PROCID", os.environ.get("OMPI_COMM_WORLD_RANK", "?")
    )
    count = option("--processes") or os.environ.get(
        "SLURM_NTASKS", os.environ.get("OMPI_COMM_WORLD_SIZE", "?")
    )
    return f"process {index} of {count}"


def _die_with_parent() -> None:
    """In the child before it starts: SIGKILL when this process ends (Linux's
    PR_SET_PDEATHSIG; elsewhere nothing)."""
    with contextlib.suppress(Exception):
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG = 1


def log_path() -> Path:
    """Where this process keeps its child's C-level output."""
    return Path(tempfile.gettempdir()) / f"sim-distributed-{os.getpid()}.log"


def supervise(args: list[str], again: str | None = None) -> int:
    """Run `sim ARGS` in a child process (see the module docstring); its exit code.
    `again`: the command line that resumes it (None: the command does not resume)."""
    log = log_path()
    user_out, user_err = os.dup(1), os.dup(2)
    env = {**os.environ, CHILD: "1", USER_STREAMS: f"{user_out},{user_err}"}
    with open(log, "wb") as sink:
        child = subprocess.Popen(
            [sys.executable, "-m", "_sim_entry", *args],
            stdout=sink,
            stderr=sink,
            stdin=subprocess.DEVNULL,
            env=env,
            pass_fds=(user_out, user_err),
            preexec_fn=_die_with_parent,
            start_new_session=True,  # (a terminal's Ctrl-C comes here, and goes on once)
        )
    os.close(user_out)
    os.close(user_err)

    def forward(signum, frame) -> None:
        with contextlib.suppress(ProcessLookupError):
            child.send_signal(signum)

    if threading.current_thread() is threading.main_thread():
        for s in (signal.SIGINT, signal.SIGTERM):
            signal.signal(s, forward)
    code = child.wait()
    text = log.read_text(errors="replace") if log.exists() else ""
    if code >= 0 and code != PEER_LOST:
        with contextlib.suppress(FileNotFoundError):
            log.unlink()
        return code
    if "RegisterTask" in text or "tasks_to_register" in text:
        why = (
            "the processes could not join (each needs its own --process-id, and all the same "
            "--processes and --coordinator)"
        )
    elif code == PEER_LOST or lost_peer(text):
        why = "another process of the run ended or stopped answering"
    else:
        why = f"ended by {signal.Signals(-code).name}"
    print(
        f"error: {_process(args)} of this distributed run stopped: {why} (its log: {log}); "
        f"what was written is kept"
        + ("" if again is None else f"; resume with (on every process): {again}"),
        file=sys.stderr,
    )
    return 1


def child_streams() -> None:
    """In the child: `sys.stdout` and `sys.stderr` on the user's streams (`USER_STREAMS`),
    the C-level ones left to the supervisor's log."""
    streams = os.environ.get(USER_STREAMS, "")
    if os.environ.get(CHILD) != "1" or "," not in streams:
        return
    out, err = (int(x) for x in streams.split(","))
    sys.stdout = open(out, "w", buffering=1, closefd=False)  # noqa: SIM115 - for the process
    sys.stderr = open(err, "w", buffering=1, closefd=False)  # noqa: SIM115


def error_fd() -> int:
    """The file descriptor of the user's standard error (for lines written with
    `os.write` where Python may not run: a signal handler, a watching thread)."""
    try:
        return sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        return 2
