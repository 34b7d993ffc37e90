"""The entry point of the `sim` command.

It stands outside the `sim` package so that it can take over SIGINT and SIGTERM before
anything heavy is imported: importing `sim` imports JAX and every model, which takes
seconds, and an interrupt in that time must end the command with one line and the
signal's exit code (130 / 143), not a traceback. Nothing has been written by then, so
the process exits at once. From `sim.cli.main` on, interrupts are deferred to the next
safe point of the command (see `sim._interrupt`).

What a command does not use it does not import: the `sim` package is registered with
its `__init__` not yet run (`_unstarted_package`), so that `sim.cli` and the light
modules it needs (typer, the errors, the model table) load in a fraction of a second;
`sim --help`, `sim models` and `sim info` answer from them. A command that computes
calls `sim.cli.engine()`, which runs the package's `__init__` (JAX in float64, the
compilation cache, the model families): from then on `sim` is what `import sim` gives.
"""

from __future__ import annotations

import importlib.util
import os
import shlex
import signal
import sys

# Commands that continue interrupted work with --resume (which starts afresh when there
# is nothing to continue).
RESUMABLE = ("run", "sweep", "fit")


def resume_command(args: list[str]) -> str | None:
    """The command line that continues `sim ARGS` (`--resume` added), or None for a
    command that does not resume."""
    command = next((a for a in args if not a.startswith("-")), None)  # (after `sim --no-cache`)
    if command not in RESUMABLE:
        return None
    return shlex.join(["sim", *args, *([] if "--resume" in args else ["--resume"])])


def _stop_during_start(signum: int, frame) -> None:
    name = signal.Signals(signum).name
    again = resume_command(sys.argv[1:])
    again = "" if again is None else f"; resume with: {again}"
    line = f"interrupted ({name}) while starting: nothing was saved yet{again}\n"
    os.write(_error_fd(), line.encode())
    os._exit(128 + signum)


def _error_fd() -> int:
    """The user's standard error (under `--distributed` the child's Python stderr, not
    its C-level one: `sim._supervisor`)."""
    try:
        return sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        return 2


_stop_during_start.before_command = True  # replaced by SIG_IGN when the command ends


SPLIT_OVER_CORES = ("infer", "run")
"""Commands that start JAX with one CPU device per core: `sim infer` runs its chains one
per device, `sim run` splits the particles of a molecular dynamics run between them
(other families run on the first device as before)."""


def _cpu_devices(args: list[str]) -> None:
    """One CPU device per usable core for the commands of `SPLIT_OVER_CORES`: XLA makes
    one CPU device per core it is told of, which has to be said before JAX starts. A
    device count the user set in XLA_FLAGS stands."""
    command = next((a for a in args if not a.startswith("-")), None)
    flags = os.environ.get("XLA_FLAGS", "")
    if command not in SPLIT_OVER_CORES or "xla_force_host_platform_device_count" in flags:
        return
    cores = (
        len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    )
    if cores > 1:
        os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={cores}".strip()


def _gpus_shared_with_workers(args: list[str]) -> None:
    """With `--scheduler local:N` the command's own process and its N worker processes
    share the machine's GPUs: JAX allocates GPU memory as it needs it instead of taking
    75% of a GPU at start (XLA_PYTHON_CLIENT_PREALLOCATE=false, which the workers
    inherit), unless the user set it. It has to be said before JAX starts."""
    for i, arg in enumerate(args):
        value = arg.partition("=")[2] if arg.startswith("--scheduler=") else None
        if arg == "--scheduler" and i + 1 < len(args):
            value = args[i + 1]
        if value is not None and value.startswith("local:"):
            os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
            return


def _one_blas_thread() -> None:
    """LAPACK (the LU factorisations of implicit solvers, which XLA hands to the
    OpenBLAS that NumPy and SciPy bring) runs on one thread unless the user said
    otherwise. XLA keeps the cores busy itself, and OpenBLAS's threads wait for each
    other by spinning: when the cores are shared, one 500 x 500 LU took 139 ms with two
    threads against 4.5 ms with one. It has to be said before NumPy loads."""
    if not any(
        v in os.environ for v in ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")
    ):
        os.environ["OPENBLAS_NUM_THREADS"] = "1"


def _checks_as_nan() -> None:
    """Run-time checks inside compiled programs (equinox's `error_if`) give NaN instead of
    raising through a host callback, unless the user set EQX_ON_ERROR. JAX does not keep a
    program that holds a host callback in the persistent cache, and diffrax checks its
    save times that way in every solve that saves at given times: with the default, each
    `sim fit PROBLEM.yaml` compiled its objective again. The command loses nothing by it:
    its solves report failure through their result codes (throw=False), and a NaN in a
    result is a failed command (exit 1), never a written one. It has to be said before
    equinox loads."""
    os.environ.setdefault("EQX_ON_ERROR", "nan")


def _small_loops_whole() -> None:
    """XLA compiles small loops into one function each (`sim._xla_flags`); said in
    XLA_FLAGS before JAX starts, as `import sim` does for a Python program."""
    from sim._xla_flags import small_loops_whole

    small_loops_whole()


def _threads_for_devices() -> None:
    """Enough threads in XLA's CPU pool for several CPU devices (`sim._xla_flags`: NPROC,
    read when JAX starts), after the device count is settled."""
    from sim._xla_flags import threads_for_devices

    threads_for_devices()


def _unstarted_package(name: str) -> None:
    """Register the package `name` in `sys.modules` without running its `__init__`, so
    that its submodules can be imported alone; `start_package()` on the module (called
    once, by `sim.cli.engine`) runs the `__init__` in it."""
    spec = importlib.util.find_spec(name)
    module = importlib.util.module_from_spec(spec)

    def start_package() -> None:
        spec.loader.exec_module(module)

    module.start_package = start_package
    sys.modules[name] = module


def main() -> None:
    """Run the `sim` command line (`sim --help`)."""
    args = sys.argv[1:]
    if "--distributed" in args:
        # (the command runs in a child process, which this one watches: `sim._supervisor`)
        if "sim" not in sys.modules:
            _unstarted_package("sim")
        from sim import _supervisor

        if _supervisor.wanted(args):
            sys.exit(_supervisor.supervise(args, resume_command(args)))
        _supervisor.child_streams()
    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, _stop_during_start)
    _cpu_devices(sys.argv[1:])
    _gpus_shared_with_workers(sys.argv[1:])
    _one_blas_thread()
    _checks_as_nan()
    if "sim" not in sys.modules:
        _unstarted_package("sim")
    _small_loops_whole()
    _threads_for_devices()
    from sim.cli import main as cli_main

    cli_main(sys.argv[1:])


if __name__ == "__main__":
    main()
