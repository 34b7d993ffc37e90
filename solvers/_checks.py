"""Run-time checks without host callbacks, so that a program can be compiled once.

equinox's `error_if`, which diffrax, lineax and simjax's solvers use for every run-time
check (save times in order and within the interval, a failed solve with `throw=True`),
raises through a host callback, and JAX never writes a program holding a host callback
to its persistent compilation cache: every process compiles such a program again. Every
`diffrax.diffeqsolve` that saves at traced times holds four of them.

Inside `checks_as_nan()` the checks being traced give NaN in place of the callback
(equinox's `on_error="nan"`: where a check fails, the values it guards become NaN,
integers their largest value), so the program holds no callback and is kept. It suits
work whose failures are values already (solves with `throw=False`, whose result codes and
NaN the caller reads): the `sim` command (`sim.cli.main` enters it), the fits and the
samplers. A failed check's error is then a value that is not finite, never an exception.

The mode is part of the keys of JAX's caches of traces and of compiled calls
(`_CHECKS_AS_NAN`, thread-local like every JAX setting): a function traced inside it is
cached apart from the same function traced outside it, so a jitted function (an inner
one such as diffeqsolve, or the same function jitted at the top) traced here is never
reused by a call whose checks must raise, nor the reverse.

Two pieces are not public API: JAX's `config.bool_state` (to make the mode part of the
trace context) and equinox's `branched_error_if_impl` and `branched_error_if_impl_jit`
(through which every equinox check is traced; in the mode, its NaN branch is taken
through equinox's `_error` without the walk of the Python stack that only a raised error
reads, `_as_nan`). `ACTIVE` says whether both were found;
without them `checks_as_nan` changes nothing and checks keep their callbacks (programs
compiled by every process, as before: slower, never wrong). `tests/solvers/test_checks.py`
pins them against the installed versions. Nothing of either is touched before the mode is
first entered (`install`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import equinox as eqx

_NAME = "simjax_checks_as_nan"


def _state():
    try:
        from jax._src import config as jax_config

        existing = jax_config.config_states.get(_NAME)
        if existing is not None:
            return existing
        return jax_config.bool_state(
            _NAME,
            False,
            "Trace equinox's run-time checks as NaN instead of host callbacks (simjax).",
            include_in_jit_key=True,
            include_in_trace_context=True,
        )
    except (ImportError, AttributeError, TypeError):  # pragma: no cover - another JAX
        return None


def _patch(state) -> bool:
    """Route equinox's checks through the mode; whether equinox has the pieces."""
    try:
        import equinox._errors as errors
    except ImportError:  # pragma: no cover - another equinox
        return False
    impl = getattr(errors, "branched_error_if_impl", None)
    if impl is None or not hasattr(errors, "branched_error_if_impl_jit"):
        return False  # pragma: no cover - another equinox
    if getattr(impl, "_simjax_checks", False):
        return True

    as_nan = _as_nan(errors, impl)

    def branched_error_if_impl(x, pred, index, msgs, *, on_error):
        if on_error == "default" and state.value:
            if as_nan is not None:
                return as_nan(x, pred, index, msgs)
            on_error = "nan"
        return impl(x, pred, index, msgs, on_error=on_error)

    branched_error_if_impl._simjax_checks = True
    errors.branched_error_if_impl = branched_error_if_impl
    errors.branched_error_if_impl_jit = eqx.filter_jit(branched_error_if_impl)
    return True


def _as_nan(errors, impl):
    """equinox's check with `on_error="nan"`, less its walk of the Python stack.

    equinox records the stack of every check it traces, for the message of a check that
    raises; a check traced as NaN never shows it, and the walk (a file-system lookup per
    frame, to tell JAX's frames from the caller's) took about 2% of the time that tracing
    a fit or a PEtab objective takes. The rest is equinox's own code path: a predicate
    known while tracing is settled at once, else the values pass through equinox's
    `_error` (a `lax.cond` to NaN, outside differentiation). None when equinox lacks a
    piece (its own function then runs, stack and all)."""
    try:
        from equinox._filters import combine, is_array, partition
        from equinox._unvmap import unvmap_any, unvmap_max

        error = errors._error
    except (ImportError, AttributeError):  # pragma: no cover - another equinox
        return None
    import jax

    def as_nan(x, pred, index, msgs):
        with jax.ensure_compile_time_eval():
            if not isinstance(pred, bool):
                pred = unvmap_any(pred)
            if not isinstance(index, int):
                index = unvmap_max(index)
            if not isinstance(pred, jax.core.Tracer):
                if not bool(pred):
                    return x
                if not isinstance(index, jax.core.Tracer):
                    # (failed while tracing: equinox's function warns and gives NaN, before its
                    # walk)
                    return impl(x, pred, index, msgs, on_error="nan")
        dynamic, static = partition(x, is_array)
        if not jax.tree.leaves(dynamic):
            raise ValueError("No arrays to thread error on to.")
        return combine(error(dynamic, pred, index, msgs=msgs, on_error="nan", stack=[]), static)

    return as_nan


_CHECKS_AS_NAN = None
_ACTIVE: bool | None = None  # (None: the mode is not installed yet)


def install() -> bool:
    """Make the mode part of JAX's trace context and route equinox's checks through it;
    whether both pieces were found. Done once, the first time the mode is entered:
    importing this module changes nothing in JAX or equinox, and outside the mode
    equinox's checks behave as equinox's own."""
    global _ACTIVE, _CHECKS_AS_NAN
    if _ACTIVE is None:
        _CHECKS_AS_NAN = _state()
        _ACTIVE = _CHECKS_AS_NAN is not None and _patch(_CHECKS_AS_NAN)
    return _ACTIVE


def __getattr__(name: str):
    if name == "ACTIVE":  # (whether the mode works with the installed JAX and equinox)
        return install()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@contextlib.contextmanager
def checks_as_nan() -> Iterator[None]:
    """Trace and call programs with equinox's checks as NaN (see the module's
    docstring). Every call of a program traced inside must be made inside too: outside,
    JAX traces it again, the ordinary way."""
    if not install():
        yield
        return
    with _CHECKS_AS_NAN(True):
        yield
