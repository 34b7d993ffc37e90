"""JAX set up as simjax runs it, by one explicit call: importing `sim` changes nothing.

`configure_jax()` is what the `sim` command does before its work and what a Python
program calls once, after `import sim` and before its first JAX computation (as
`numpyro.enable_x64()` is called): float64 (`jax_enable_x64`), simjax's checked
persistent compilation cache (`sim._cache`), and XLA's small loops compiled whole with
enough CPU threads for several CPU devices (`sim._xla_flags`, which XLA reads once, when
JAX starts its backend; later they are left out).

A process that did not make the call runs in JAX's default float32: `simulate`, `setup`
and `run` then say so once (`PrecisionWarning`), since ODE tolerances, gradients and
likelihoods lose most of their digits in float32.
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path


class PrecisionWarning(UserWarning):
    """JAX runs in float32 (`jax_enable_x64` off) where simjax expects float64."""


def configure_jax(
    *, x64: bool = True, cache: bool | str | os.PathLike = True, xla: bool = True
) -> Path | None:
    """Set JAX up as the `sim` command does: float64, the compilation cache, XLA's options.

    Call it once, after `import sim` and before the first JAX computation: the XLA
    options apply only to a backend not yet started (they are left out otherwise), and
    arrays made before float64 is turned on stay float32. Calling it again changes
    nothing more.

    Arguments:
        x64: turn on `jax_enable_x64` (float64 by default; PDE and MD configs may still
            ask for float32).
        cache: keep compiled programs on disk for the next process: True for the user's
            cache folder (`SIMJAX_CACHE_DIR` moves it, an empty value turns it off), a
            folder, or False. A compilation cache the user configured for JAX itself
            (`JAX_COMPILATION_CACHE_DIR`, `jax.config`) is left as it is.
        xla: XLA's small loops compiled whole (faster small ODE solves on CPU) and, when
            several CPU devices are asked for, enough threads for them; a user's own
            XLA backend options and NPROC stand.

    Returns:
        The compilation cache folder in use, or None.
    """
    from . import _cache, _xla_flags

    if xla:
        _xla_flags.small_loops_whole()
        _xla_flags.threads_for_devices()
    import jax

    if x64:
        jax.config.update("jax_enable_x64", True)
    if cache is False:
        return None
    return _cache.enable(None if cache is True else cache)


def warn_if_float32(what: str) -> None:
    """Warn (once per place) when JAX runs in float32: `what` ran at a precision the user
    did not choose."""
    import jax

    if not jax.config.jax_enable_x64:
        warnings.warn(
            f"{what} runs in float32: JAX's jax_enable_x64 is off; call sim.configure_jax() after "
            "`import sim` "
            "(or jax.config.update('jax_enable_x64', True)) before computing",
            PrecisionWarning,
            stacklevel=3,
        )
