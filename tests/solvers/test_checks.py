"""`solvers.checks_as_nan`: programs traced inside hold no host callback (so the
compilation cache keeps them), a failed check gives NaN there (or, through it, values
that are not finite) and still raises outside, and a function traced in one mode is
never reused by a trace in the other."""

import os
import subprocess
import sys
from pathlib import Path

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from solvers import checks_as_nan
from solvers._checks import ACTIVE

# The mode's own tests start outside it (tests/conftest.py enters it for the others).
pytestmark = pytest.mark.raising_checks

REPO = Path(__file__).resolve().parents[2]


def decay(y0, ts):
    # diffrax checks traced save times (in order, within [t0, t1]) with equinox's error_if
    return diffrax.diffeqsolve(
        diffrax.ODETerm(lambda t, y, a: -y), diffrax.Tsit5(), ts[0], ts[-1], None, y0,
        saveat=diffrax.SaveAt(ts=ts),
        stepsize_controller=diffrax.PIDController(rtol=1e-8, atol=1e-10), throw=False,
    ).ys  # fmt: skip


SHUFFLED = jnp.array([0.0, 0.6, 0.3, 1.0, 1.0])
# (what a failed check raises: through jax.jit, JAX's error holding equinox's message)
RAISED = (eqx.EquinoxRuntimeError, jax.errors.JaxRuntimeError)


def callbacks(fn, *args) -> int:
    return str(jax.make_jaxpr(fn)(*args)).count("callback")


def test_the_pieces_of_jax_and_equinox_it_needs_are_found():
    # (a JAX or equinox without them leaves the checks as callbacks: slower, never wrong;
    # this says so by name)
    assert ACTIVE


def test_a_program_traced_inside_holds_no_callback_and_a_failed_check_gives_nan():
    y0, ts = jnp.array(1.0), jnp.linspace(0.0, 1.0, 5)
    assert callbacks(decay, y0, ts) >= 2  # the ordinary trace: host callbacks
    with checks_as_nan():
        assert callbacks(decay, y0, ts) == 0
        program = jax.jit(decay)
        np.testing.assert_allclose(program(y0, ts), np.exp(-np.asarray(ts)), rtol=1e-7)
        # Save times out of order: the check makes them NaN, and the solve saves nothing
        # (diffrax's unsaved values are inf): nothing finite, which a caller can see.
        assert not np.isfinite(program(y0, SHUFFLED)).any()
    with pytest.raises(RAISED, match="saveat.ts must be increasing"):
        jax.jit(decay)(y0, SHUFFLED)  # the same program outside: traced again, and raises


def test_an_inner_function_traced_in_one_mode_is_not_reused_by_the_other():
    inner = jax.jit(lambda x: eqx.error_if(x, x < 0, "negative"))
    with checks_as_nan():
        assert np.isnan(jax.jit(lambda x: inner(x) * 2.0)(-1.0))
    with pytest.raises(RAISED, match="negative"):
        jax.jit(lambda x: inner(x) * 2.0)(-1.0)
    with pytest.raises(RAISED, match="negative"):
        inner(-1.0)
    with checks_as_nan():  # and back: the NaN trace again, not the raising one
        assert np.isnan(jax.jit(lambda x: inner(x) * 3.0)(-1.0))


def test_a_check_traced_as_nan_does_not_walk_the_python_stack(monkeypatch):
    # equinox records the stack of every check for the message of one that raises; as NaN
    # nothing reads it, and the walk (a file-system lookup per frame) was 2% of a fit's
    # tracing. Outside the mode the stack is still recorded. (Messages of their own: a
    # check with a message traced before would come from equinox's cache of traces.)
    import jax._src.traceback_util as traceback_util

    seen = []
    original = traceback_util.include_frame
    monkeypatch.setattr(
        traceback_util, "include_frame", lambda frame: seen.append(frame) or original(frame)
    )
    with checks_as_nan():
        program = jax.jit(
            lambda x: eqx.error_if(x * 2.0, x < 0, "negative, as NaN, without a stack")
        )
        assert float(program(1.5)) == 3.0
        assert np.isnan(float(program(-1.5)))
    assert seen == []
    with pytest.raises(RAISED, match="negative, raised, with its stack"):
        jax.jit(lambda x: eqx.error_if(x * 2.0, x < 0, "negative, raised, with its stack"))(-1.5)
    assert seen


# The program, as this process and a second one trace it.
PROGRAM = """
import jax, jax.numpy as jnp
from solvers import OdeSolver, checks_as_nan

def lotka_volterra(t, y, p):
    return jnp.stack([p[0] * y[0] - p[1] * y[0] * y[1], p[3] * y[0] * y[1] - p[2] * y[1]])

@jax.jit
def prey_at_end(p, ts):
    return OdeSolver(rtol=1e-7, atol=1e-9).solve(lotka_volterra, ts, jnp.array([30.0, 4.0]), p).ys[-1, 0]

def run():
    with checks_as_nan():
        return prey_at_end(jnp.array([0.5, 0.025, 0.7, 0.025]), jnp.linspace(0.0, 10.0, 11))
"""

SECOND_PROCESS = (
    """
import sys, jax, jax.numpy as jnp
from jax._src import monitoring
events = []  # (a cache hit is reported inside the compile event of its program, before it)
monitoring.register_event_listener(lambda event, **kw: events.append("hit") if event.endswith("cache_hits") else None)
monitoring.register_event_duration_secs_listener(
    lambda event, seconds, fun_name="", **kw: events.append(fun_name) if event.endswith("backend_compile_duration") else None)
import sim
sim.configure_jax()
"""
    + PROGRAM
    + """
prey = run()
compiled = [name for before, name in zip(["", *events], events) if name != "hit" and before != "hit"]
print(float(prey), int("jit(prey_at_end)" in compiled))
"""
)


def test_a_program_traced_inside_is_compiled_by_the_first_process_only(tmp_path):
    # The solve holds diffrax's checks of its save times and raises on failure (throw):
    # inside checks_as_nan its program is kept all the same, and a second process loads it.
    # The first process is this one, its cache moved to an empty folder meanwhile (a
    # function defined anew here is traced and compiled anew).
    from sim import _cache

    cache = tmp_path / "cache"
    before = jax.config.jax_compilation_cache_dir
    program = {}
    exec(compile(PROGRAM, "program", "exec"), program)
    try:
        _cache.enable(cache)
        prey1 = float(program["run"]())
    finally:
        if before:
            _cache.enable(before)
        else:
            _cache.disable()
    # XLA compiled the solve here, into the empty folder ...
    assert len(list(cache.glob("jit_prey_at_end-*.simjax"))) == 1, sorted(
        p.name for p in cache.iterdir()
    )
    env = {**os.environ, "SIMJAX_CACHE_DIR": str(cache)}
    env.pop("EQX_ON_ERROR", None)
    proc = subprocess.run(
        [sys.executable, "-c", SECOND_PROCESS],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    prey2, compiled2 = (float(v) for v in proc.stdout.split())
    assert prey1 == prey2
    # ... and the second process loaded it from the cache
    assert compiled2 == 0
