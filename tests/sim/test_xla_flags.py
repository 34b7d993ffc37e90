"""XLA compiles the loops of small solves into one function each (`sim._xla_flags`): the
setting is in XLA_FLAGS once `sim` is imported and applies to this process's programs;
a user's own XLA backend options stand; the `sim` command sets it before JAX starts."""

import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np

from sim import _xla_flags
from solvers import OdeSolver

OPTION = f"xla_cpu_small_while_loop_byte_threshold={_xla_flags.SMALL_LOOP_BYTES}"


def _lotka_volterra(t, y, p):
    return jnp.stack([(p[0] - p[1] * y[1]) * y[0], (-p[2] + p[3] * y[0]) * y[1]])


def _loop_compiled_whole(fn, *args) -> bool:
    """Whether the top-level while loop of `fn`'s compiled program became one call that
    XLA compiles as a single function."""
    text = jax.jit(fn).lower(*args).compile().as_text()
    entry = text[text.index("ENTRY") :]
    return 'xla_cpu_small_call="true"' in text and " while(" not in entry


def test_importing_sim_sets_the_small_loop_threshold_in_xla_flags():
    assert OPTION in os.environ["XLA_FLAGS"]


def test_a_small_ode_solve_is_compiled_whole_and_a_large_loop_is_not():
    # the forward-sensitivity solve of a fit: 21 save times of the state and its six
    # sensitivities (2.3 kB, above XLA's own threshold of 1,024 bytes)
    solver = OdeSolver("dopri5", rtol=1e-6, atol=1e-5)
    ts = jnp.linspace(0.0, 20.0, 21)
    p = jnp.array([0.55, 0.028, 0.8, 0.024])

    def solve(p):
        return solver.solve_sensitivities(
            _lotka_volterra, ts, jnp.array([34.0, 6.0]), p, jnp.zeros((2, 4))
        )

    assert _loop_compiled_whole(solve, p)
    ys = solve(p)
    assert np.all(np.isfinite(np.asarray(jax.tree.leaves(ys)[0])))

    # a loop over a 300 x 300 array (720 kB a step) keeps its kernels apart
    def big(x):
        return jax.lax.fori_loop(0, 3, lambda i, a: jnp.sin(a) + 1.0, x)

    assert not _loop_compiled_whole(big, jnp.ones((300, 300)))


def test_a_user_s_own_backend_options_stand(monkeypatch):
    monkeypatch.setattr(_xla_flags, "jax_started", lambda: False)
    monkeypatch.setenv(
        "XLA_FLAGS", "--xla_backend_extra_options=xla_cpu_small_while_loop_byte_threshold=1024"
    )
    _xla_flags.small_loops_whole()
    assert (
        os.environ["XLA_FLAGS"]
        == "--xla_backend_extra_options=xla_cpu_small_while_loop_byte_threshold=1024"
    )
    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=2")
    _xla_flags.small_loops_whole()
    assert (
        os.environ["XLA_FLAGS"]
        == f"--xla_force_host_platform_device_count=2 --xla_backend_extra_options={OPTION}"
    )
    _xla_flags.small_loops_whole()  # (once only)
    assert os.environ["XLA_FLAGS"].count("xla_backend_extra_options") == 1


def test_it_is_not_set_once_jax_has_started(monkeypatch):
    # (XLA has read XLA_FLAGS by then: setting it would only change the cache's keys)
    jax.devices()
    assert _xla_flags.jax_started()
    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=2")
    _xla_flags.small_loops_whole()
    assert os.environ["XLA_FLAGS"] == "--xla_force_host_platform_device_count=2"


def test_the_sim_command_sets_it_before_jax_starts():
    # (the entry point sets it before the command, here `sim info`, starts JAX)
    code = (
        "import os, sys, _sim_entry; sys.argv = ['sim', 'info']\ntry:\n    "
        "_sim_entry.main()\nexcept SystemExit:\n    pass\nprint('FLAGS=' + "
        "os.environ.get('XLA_FLAGS', ''))"
    )
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300
    )
    flags = [line for line in out.stdout.splitlines() if line.startswith("FLAGS=")]
    assert flags and OPTION in flags[0], out.stdout + out.stderr


def test_xla_s_older_emitters_keep_xla_s_own_threshold(monkeypatch):
    # (with them, loops compiled whole computed a wrong gradient: sim._xla_flags)
    monkeypatch.setattr(_xla_flags, "jax_started", lambda: False)
    for flags in (
        "--xla_cpu_use_fusion_emitters=false",
        "--xla_cpu_multi_thread_eigen=false --xla_cpu_use_fusion_emitters=false",
    ):
        monkeypatch.setenv("XLA_FLAGS", flags)
        _xla_flags.small_loops_whole()
        assert os.environ["XLA_FLAGS"] == flags
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_use_fusion_emitters=true")
    _xla_flags.small_loops_whole()
    assert OPTION in os.environ["XLA_FLAGS"]


def test_several_cpu_devices_get_a_thread_pool_with_threads_to_spare(monkeypatch):
    # NPROC (the size of XLA's CPU pool) = cores + devices when more than one device is
    # asked for; a user's NPROC, one device, or a started JAX leave it alone. (That XLA
    # reads NPROC, and what it saves a sweep from, is tests/sim/test_sweep_devices.py's.)
    cores = len(os.sched_getaffinity(0))
    monkeypatch.setattr(_xla_flags, "jax_started", lambda: False)
    monkeypatch.delenv("NPROC", raising=False)
    monkeypatch.delenv("JAX_NUM_CPU_DEVICES", raising=False)
    monkeypatch.setenv(
        "XLA_FLAGS",
        "--xla_force_host_platform_device_count=3 --xla_force_host_platform_device_count=4",
    )
    _xla_flags.threads_for_devices()
    assert os.environ["NPROC"] == str(cores + 4)  # (the last count given is XLA's)
    monkeypatch.setenv("NPROC", "7")
    _xla_flags.threads_for_devices()
    assert os.environ["NPROC"] == "7"
    monkeypatch.delenv("NPROC")
    monkeypatch.setenv("XLA_FLAGS", "--xla_force_host_platform_device_count=1")
    _xla_flags.threads_for_devices()
    assert "NPROC" not in os.environ
    monkeypatch.setenv("XLA_FLAGS", "")
    monkeypatch.setenv("JAX_NUM_CPU_DEVICES", "2")
    _xla_flags.threads_for_devices()
    assert os.environ["NPROC"] == str(cores + 2)
    monkeypatch.delenv("NPROC")
    monkeypatch.setattr(_xla_flags, "jax_started", lambda: True)
    _xla_flags.threads_for_devices()
    assert "NPROC" not in os.environ
