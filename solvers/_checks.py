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
(through which every equinox check is traced). `ACTIVE` says whether both were found;
without them `checks_as_nan` changes nothing and checks keep their callbacks (programs
compiled by every process, as before: slower, never wrong). `tests/solvers/test_checks.py`
pins them against the installed versions.
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

    def branched_error_if_impl(x, pred, index, msgs, *, on_error):
        if on_error == "default" and state.value:
            on_error = "nan"
        return impl(x, pred, index, msgs, on_error=on_error)

    branched_error_if_impl._simjax_checks = True
    errors.branched_error_if_impl = branched_error_if_impl
    errors.branched_error_if_impl_jit = eqx.filter_jit(branched_error_if_impl)
    return True


_CHECKS_AS_NAN = _state()
ACTIVE: bool = _CHECKS_AS_NAN is not None and _patch(_CHECKS_AS_NAN)


@contextlib.contextmanager
def checks_as_nan() -> Iterator[None]:
    """Trace and call programs with equinox's checks as NaN (see the module's
    docstring). Every call of a program traced inside must be made inside too: outside,
    JAX traces it again, the ordinary way."""
    if not ACTIVE:
        yield
        return
    with _CHECKS_AS_NAN(True):
        yield
