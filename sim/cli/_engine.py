"""The start of the computing part of a command (`engine`): the `sim` package's
`__init__` run if the command started without it, JAX set up as the command runs it,
and the --no-cache option."""

from __future__ import annotations

import contextlib
import gc
import signal
import sys
import threading
from typing import Annotated

import typer

from ._app import app


@app.callback()
def _options(
    no_cache: Annotated[
        bool,
        typer.Option(
            "--no-cache",
            help="Compile every program afresh: neither load nor save compiled programs (the cache "
            "is in the user's cache folder, or SIMJAX_CACHE_DIR).",
        ),
    ] = False,
) -> None:
    """simjax: differentiable simulation of ODEs, PDEs and molecular dynamics."""
    global _no_cache
    _no_cache = no_cache
    if no_cache and _started():
        from .. import _cache

        _cache.disable()


_no_cache = False


def _started() -> bool:
    """Whether the `sim` package has run its `__init__` (always, after `import sim`)."""
    return not hasattr(sys.modules["sim"], "start_package")


@contextlib.contextmanager
def _lasting_imports():
    """Python's cycle collector off while the block imports what lives as long as the
    process (JAX and simjax make about a quarter of a million objects, which the collector
    would walk several times while they are made: 0.1-0.2 s of CPU time), and what it
    made set aside after (`gc.freeze`), so that later collections walk only the
    command's own objects."""
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        gc.enable()


def engine() -> None:
    """Run the `sim` package's `__init__` if the `sim` command started without it (see
    `_sim_entry`), set JAX up as the command runs it (`sim.configure_jax`: float64, the
    compilation cache unless --no-cache, XLA's options) and enter the command's run-time
    checks. Every command that computes calls it first."""
    global _for_the_command
    if not _started():
        _start_engine()
    if not _configured:
        _configure()
    if _for_the_command is not None and threading.current_thread() is threading.main_thread():
        # The programs' run-time checks give NaN (`solvers.checks_as_nan`), as they do
        # throughout the `sim` process, where `_sim_entry` sets EQX_ON_ERROR: in a Python
        # process that calls `main`, too, the command's programs hold no host callback,
        # and the compilation cache keeps them. (Its solves report failure through
        # result codes, and a result that is not finite is never written.)
        from solvers import checks_as_nan

        _for_the_command.enter_context(checks_as_nan())
        _for_the_command = None


_for_the_command: contextlib.ExitStack | None = None  # what lasts as long as `main`'s command


def _start_engine() -> None:
    """Run the package's `__init__` (see `engine`)."""
    package = sys.modules["sim"]
    # Meanwhile a signal ends the command at once with the entry point's line (nothing is
    # written yet, and it says how to resume); the deferred handlers come back after.
    starting = {s: h for s, h in _entry_handlers.items() if getattr(h, "before_command", False)}
    if threading.current_thread() is not threading.main_thread():
        starting = {}
    previous = {s: signal.signal(s, h) for s, h in starting.items()}
    try:
        with _lasting_imports():
            package.start_package()
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
    del package.start_package


_configured = False


def _configure() -> None:
    """JAX as the command runs it (`sim.configure_jax`: float64, the compilation cache
    unless --no-cache, XLA's options): once a process, by the first command that computes."""
    global _configured
    from .._jax_config import configure_jax

    configure_jax(cache=not _no_cache)
    if _no_cache:
        from .. import _cache

        _cache.disable()
    _configured = True


# The signal handlers the command started with (`_sim_entry`'s, until the package is up).
_entry_handlers: dict = {}
