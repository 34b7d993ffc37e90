"""Shared test helpers: the `sim` command run in-process, tree comparison and fitted
convergence orders."""

import contextlib
import os
import subprocess
import sys
from pathlib import Path

import h5py
import jax
import numpy as np
import pytest

from sim.cli import main


def write_blowup(folder: Path, k: float, *, scale: float = 1.0, sections: str = "") -> Path:
    """A config of y' = k y^2 / scale from y = scale (it blows up at t = 1 / k) beside
    data of k = 0.3 at 11 times in [0, 2], with `k` in bounds [0, 5] and `sections`
    appended; the config's path. Its solver takes at most 256 steps: a solve that blows
    up takes them all before it fails (the default 4,096 made every failing solve, and
    its derivatives, 16 times longer), one that does not takes 11 at k = 0.3."""
    t = np.linspace(0.0, 2.0, 11)
    with h5py.File(folder / "d.h5", "w") as f:
        f["t"], f["y"] = t, scale / (1.0 - 0.3 * t)
    path = folder / "c.toml"
    path.write_text(
        '[model]\nname = "blowup"\n[model.states]\ny = "k * y**2 / '
        f'{scale!r}"\n[model.parameters]\nk = {{ value = {k!r}, bounds = [0.0, 5.0] }}\n'
        f'[initial]\ny = {scale!r}\n[solver]\nmax_steps = 256\n[data]\nfile = "d.h5"\ntime = "/t"\n'
        f'observables = {{ y = "/y" }}\n{sections}'
    )
    return path


#: Put before the Python of a script that a test runs in a process of its own: the
#: persistent compilation cache of the tests turned on (`sim.configure_jax`, float64 and
#: XLA's options left to the script) and the script's programs traced with the run-time
#: checks as NaN, as the tests' own are (tests/conftest.py), so that they hold no host
#: callback and the cache keeps them: a later run loads them instead of compiling them
#: again (a 16^3 spectral case of 8 programs compiled 18 s of its 24 s at every run
#: without it). (The mode's context is kept in a global: a context manager dropped at
#: once would be closed, and the mode left.)
AS_THE_TESTS_RUN = (
    "import sim as _sim, solvers as _solvers; _sim.configure_jax(x64=False, xla=False); "
    "_checks_mode = _solvers.checks_as_nan(); _checks_mode.__enter__()\n"
)


def script_command(script: str, *args: str) -> list[str]:
    """The command that runs `script` (Python) with `args` in a new process of this
    Python, its checks as the tests run them (`AS_THE_TESTS_RUN`)."""
    return [sys.executable, "-c", AS_THE_TESTS_RUN + script, *args]


def host_devices(n: int) -> str:
    """XLA_FLAGS for a process of `n` CPU devices, keeping the flags the tests run with
    (tests/conftest.py), so that its programs compile as this process's do."""
    return f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={n}".strip()


#: Python that runs `sim` once per argument list of `json.loads(sys.argv[1])` in its
#: process, each after a line "--- ARGV" on stderr (`commands_said` cuts stderr there),
#: and leaves their exit codes in `codes`.
SIM_COMMANDS = r"""
import json, sys
from sim.cli import main

codes = []
for argv in json.loads(sys.argv[1]):
    print("--- " + " ".join(argv), file=sys.stderr, flush=True)
    try:
        main(argv)
        codes.append(0)
    except SystemExit as e:
        codes.append(e.code)
"""


def commands_said(stderr: str) -> list[str]:
    """What each command of `SIM_COMMANDS` wrote to stderr, its marker line first."""
    return stderr.split("--- ")[1:]


def on_host_devices(
    script: str, args: list[str], devices: int, *, timeout: int = 600, **variables: str
) -> subprocess.CompletedProcess:
    """Run `python -c script *args` in a process of `devices` CPU devices (`host_devices`;
    NPROC dropped, so that the process sizes XLA's thread pool itself; `variables` added
    to its environment) and assert that it succeeded: the finished process, its output
    captured as text."""
    env = {**os.environ, "XLA_FLAGS": host_devices(devices), **variables}
    env.pop("NPROC", None)
    done = subprocess.run(
        script_command(script, *args),
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return done


@contextlib.contextmanager
def optimised():
    """Programs compiled inside with LLVM's optimisations on, for a test whose time goes
    into running a long simulation rather than compiling it (tests/conftest.py turns
    them off for the rest: the suite compiles far more than it computes). Whether they
    are on is part of the persistent cache's key, not of jit's own: give such a test
    programs of its own (a system size no other test runs), so that no bit-for-bit test
    compares one of them with a program compiled without them."""
    previous = jax.config.values["jax_disable_most_optimizations"]
    jax.config.update("jax_disable_most_optimizations", False)
    try:
        yield
    finally:
        jax.config.update("jax_disable_most_optimizations", previous)


def cli(argv, capsys):
    """Run `sim ARGV` in this process: (exit code, what it wrote to stderr)."""
    code, _, err = cli_out(argv, capsys)
    return code, err


def cli_out(argv, capsys):
    """Run `sim ARGV` in this process: (exit code, stdout, stderr)."""
    with pytest.raises(SystemExit) as info:
        main(argv)
        raise SystemExit(0)
    captured = capsys.readouterr()
    return info.value.code, captured.out, captured.err


def tree_allclose(a, b, *, rtol=1e-10, atol=0.0) -> bool:
    """True when two pytrees have the same structure and close leaves."""
    leaves_a, tree_a = jax.tree.flatten(a)
    leaves_b, tree_b = jax.tree.flatten(b)
    if tree_a != tree_b:
        return False
    return all(
        np.allclose(x, y, rtol=rtol, atol=atol) for x, y in zip(leaves_a, leaves_b, strict=False)
    )


def fitted_order(step_sizes, errors) -> float:
    """Slope of log(error) against log(step size): the observed order of accuracy."""
    slope, _ = np.polyfit(np.log(np.asarray(step_sizes)), np.log(np.asarray(errors)), 1)
    return float(slope)


def signal_after_chunks(patch, chunks: int, signum) -> list[int]:
    """Send this process `signum` once a streamed run has written its `chunks`-th chunk
    (`patch` a `pytest.MonkeyPatch.context()`; run it inside `sim._interrupt.deferred()`,
    which honours the signal at the next safe point). Returns the frames of each chunk."""
    import os

    from sim import _interrupt, _stream

    count = []
    original = _stream.ChunkSizer.took

    def took(self, frames, seconds):
        original(self, frames, seconds)
        count.append(frames)
        if len(count) == chunks:
            os.kill(os.getpid(), signum)

    patch.setattr(_stream.ChunkSizer, "took", took)
    patch.setattr(_interrupt, "_requested", None)  # the request outlives `deferred`: undone after
    return count


class Stop(Exception):
    """Stands for a crash after some checkpoints (`interrupt_after`)."""


def interrupt_after(monkeypatch, checkpoints: int) -> list[int]:
    """Make a streamed run stop (`Stop`) right after writing its `checkpoints`-th
    checkpoint; the frames of the checkpoints written, as they are written. (`monkeypatch`
    is a `pytest.MonkeyPatch.context()`, so undoing it keeps the working folder.)"""
    from sim import _stream

    written = []
    original = _stream.write_checkpoint

    def write(path, **kwargs):
        original(path, **kwargs)
        written.append(kwargs["frame"])
        if len(written) == checkpoints:
            raise Stop()

    monkeypatch.setattr(_stream, "write_checkpoint", write)
    return written
