"""`main`, the entry point of the `sim` command: the command run with signals deferred,
and every way it can fail turned into one line on stderr and an exit code."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading

import typer

from .._errors import InputError, SimError, one_line
from .._interrupt import Interrupted, deferred
from . import _engine, _outputs
from ._app import _model_code_error, app


def check_platform() -> None:
    """A `JAX_PLATFORMS` naming a device this machine does not have is bad input."""
    wanted = os.environ.get("JAX_PLATFORMS", "")
    if wanted in ("", "cpu"):
        return
    import jax

    try:
        jax.devices()
    except Exception as e:  # noqa: BLE001 - JAX raises RuntimeError or AssertionError
        reason = " ".join(str(e).split())[:160] or type(e).__name__
        raise InputError(
            "JAX_PLATFORMS",
            wanted,
            f"no such device on this machine ({reason}); unset JAX_PLATFORMS, or install JAX for "
            "it (the cuda12 extra)",
        ) from None


def main(argv: list[str] | None = None) -> None:
    """Entry point of the `sim` command."""
    try:
        _main(argv)
    except SystemExit as e:
        from . import _app

        if _app.joined and e.code not in (0, None):
            # One process of a distributed run that fails ends now: at a normal exit JAX
            # would wait for the others to finish with it, which they cannot.
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(Exception):
                    stream.flush()
            os._exit(e.code if isinstance(e.code, int) else 1)
        raise


def _peer_lost(error: BaseException) -> None:
    """Exit at once with `sim._supervisor.PEER_LOST`, saying nothing (the supervising
    process says it), when `error` is a distributed run's collective that failed because
    another process ended or stopped answering."""
    from . import _app

    if not _app.joined:
        return
    from .._supervisor import PEER_LOST, lost_peer

    if lost_peer(str(error)):
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        os._exit(PEER_LOST)


def _main(argv: list[str] | None) -> None:
    argv = sys.argv[1:] if argv is None else list(argv)
    _outputs._argv = argv
    _engine._entry_handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    # Signal handlers can only be installed from the main thread.
    guard = (
        deferred()
        if threading.current_thread() is threading.main_thread()
        else contextlib.nullcontext()
    )
    try:
        with guard, contextlib.ExitStack() as for_the_command:
            # (a JAX setting is per thread: entered and left in the main thread only)
            _engine._for_the_command = (
                for_the_command if threading.current_thread() is threading.main_thread() else None
            )
            check_platform()
            code = app(args=argv or ["--help"], prog_name="sim", standalone_mode=False)
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except typer.Abort as e:
        # (click turns a KeyboardInterrupt into Abort; with signals deferred, one raised
        # by a model file's code is that code's, not the user's Ctrl-C)
        _model_code_error(e)
        print("interrupted", file=sys.stderr)
        sys.exit(130)
    except typer.TyperException as e:
        # Usage errors of the command line itself (unknown option, missing argument).
        ctx = getattr(e, "ctx", None)
        name = f"sim {ctx.info_name}" if ctx is not None and ctx.info_name != "sim" else "sim"
        # (format_message names the option a bad value was given to; str(e) does not)
        message = " ".join((e.format_message() if hasattr(e, "format_message") else str(e)).split())
        print(f"error: {name}: {message} (see `{name} --help`)", file=sys.stderr)
        sys.exit(2)
    except InputError as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(2)
    except (
        SimError
    ) as e:  # (a failed run's line may name its files: one line whatever they are called)
        print(f"error: {one_line(e)}", file=sys.stderr)
        sys.exit(1)
    except Interrupted as e:  # work that keeps nothing (infer, plot, models)
        print(
            f"interrupted ({signal.Signals(e.signum).name}); nothing was written", file=sys.stderr
        )
        sys.exit(e.exit_code)
    except KeyboardInterrupt as e:
        _model_code_error(e)
        print("interrupted; nothing was written", file=sys.stderr)
        sys.exit(130)
    except Exception as e:  # noqa: BLE001 - last resort: one line, exit 1
        _peer_lost(e)
        _model_code_error(e)
        message = str(e).strip().splitlines()[0] if str(e).strip() else ""
        print(f"error: internal error: {type(e).__name__}: {message}", file=sys.stderr)
        sys.exit(1)
    finally:
        _engine._for_the_command = None
    # In this (non-standalone) mode click returns the code of a `typer.Exit` raised
    # inside a command instead of raising it.
    if isinstance(code, int) and code:
        sys.exit(code)
