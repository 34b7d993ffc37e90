"""Sweeps over several devices: every family's chunks, split over 2 and 4 simulated CPU
devices (`--xla_force_host_platform_device_count`, as the README tells users), give the
values of one device, and none waits for ever (each device computes its own runs in
`jax.shard_map`; XLA's CPU pool has threads to spare for LAPACK's waiting kernels:
`sim._xla_flags.threads_for_devices`).

One process per device count runs the families (a process's start and compilations
cost seconds each), against the same sweeps computed here on this process's one device.
"""

import functools
import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

import sim
from tests.helpers import host_devices, script_command

CONFIGS = {
    # ODE, explicit: the batched fast path (`solvers.solve_batch`), one call per chunk.
    "ode_explicit": """
[model]
name = "lotka_volterra"
[time]
t1 = 5.0
save = 6
[solver]
method = "tsit5"
[sweep]
[sweep.params]
alpha = { linspace = [0.4, 0.7, 8] }
""",
    # Spectral PDE: FFTs in every step.
    "pde_spectral": """
[model]
name = "heat"
[grid]
points = [16]
domain = [[0.0, 6.283185307179586]]
[initial]
kind = "sine"
[time]
t1 = 0.2
save = 3
dt = 0.01
[sweep]
[sweep.params]
diffusivity = { linspace = [0.1, 1.0, 8] }
""",
    # Finite-difference PDE with kvaerno5: 65 x 65 Newton matrices, factorised in batches
    # large enough for jaxlib's LAPACK kernels to split them over XLA's thread pool
    # (on 2 or 4 devices sharing 2 cores, each device's kernel waited for pieces that no
    # free thread was left to run: the sweep hung).
    "pde_fd": """
[model]
name = "heat_fd"
[grid]
points = [65]
domain = [[0.0, 1.0]]
[initial]
kind = "sine"
[time]
t1 = 0.02
save = 3
[solver]
method = "kvaerno5"
rtol = 1e-6
atol = 1e-8
[sweep]
[sweep.params]
diffusivity = { linspace = [0.1, 0.4, 8] }
""",
    "sde": """
[model]
name = "ornstein_uhlenbeck"
[initial]
x = 2.0
[time]
t1 = 0.5
save = 6
[solver]
method = "euler"
dt = 0.05
[ensemble]
paths = 2
seed = 7
[sweep]
save = "final"
[sweep.params]
theta = { linspace = [0.5, 2.0, 8] }
""",
    "md": """
[model]
name = "lennard_jones"
[params]
cutoff = 1.6
shift = true
[system]
lattice = "fcc"
cells = 2
density = 0.8
temperature = 1.0
seed = 3
[time]
dt = 0.004
steps = 20
save_every = 10
[solver]
method = "langevin"
temperature = 1.0
friction = 1.0
[sweep]
save = "summary"
[sweep.params]
epsilon = { linspace = [0.8, 1.2, 4] }
""",
}

# ODE, implicit: advanced frame by frame, Newton iterations with LU factorisations.
CONFIGS["ode_implicit"] = CONFIGS["ode_explicit"].replace('method = "tsit5"', 'method = "kvaerno5"')

# The families named swept in one process, each one's results saved as .npz files beside its
# config.
SWEEP_ALL = """
import json, sys
import numpy as np
import jax
import sim

sim.configure_jax()
assert len(jax.devices()) == int(sys.argv[1]), jax.devices()


def flat(tree, prefix=""):
    if isinstance(tree, dict):
        return {k: v for name, sub in tree.items() for k, v in flat(sub, f"{prefix}{name}.").items()}
    return {prefix.rstrip("."): np.asarray(tree)}


for name in json.loads(sys.argv[2]):
    result = sim.sweep(sim.load_config(name + ".toml"))
    np.savez(name + ".npz", status=result.status, **flat(result.observables))
"""


def flat(tree, prefix="") -> dict[str, np.ndarray]:
    """A nested dict of arrays as one dict, keys joined by dots."""
    if isinstance(tree, dict):
        return {
            k: v for name, sub in tree.items() for k, v in flat(sub, f"{prefix}{name}.").items()
        }
    return {prefix.rstrip("."): np.asarray(tree)}


@functools.cache
def sweep_here(name: str) -> dict[str, np.ndarray]:
    """The sweep of `name`.toml here, on one device (computed once for every device count)."""
    result = sim.sweep(sim.load_config(f"{name}.toml"))
    return {"status": np.asarray(result.status), **flat(result.observables)}


# By default on 4 devices (2 runs a device, the finite-difference batches still split by
# LAPACK), the sweeps whose way of computing a chunk no other default test splits over
# several devices: the explicit ODE's batches are split over 2 by
# tests/sim/test_sweep_resume.py, the spectral PDE's framed chunks over 4 by
# tests/sim/test_sweep_frames.py (both against one device's values); the implicit ODE's
# framed chunks are advanced by the loop of the finite-difference PDE's (`solvers.OdeLoop`,
# kvaerno5, its Newton matrices factorised in batches), which runs here and over 2 devices
# below. Every family on 2 and on 4 devices under `slow`.
ELSEWHERE = ("ode_explicit", "pde_spectral", "ode_implicit")


@pytest.mark.parametrize(
    "devices, names",
    [
        pytest.param(2, tuple(CONFIGS), marks=pytest.mark.slow, id="2"),
        pytest.param(4, tuple(CONFIGS), marks=pytest.mark.slow, id="4-every-family"),
        pytest.param(4, tuple(n for n in CONFIGS if n not in ELSEWHERE), id="4"),
    ],
)
def test_every_family_on_several_devices_gives_the_values_of_one(tmp_cwd, devices, names):
    for name in names:
        (tmp_cwd / f"{name}.toml").write_text(CONFIGS[name])
    env = {**os.environ, "XLA_FLAGS": host_devices(devices)}
    env.pop("NPROC", None)  # (the process sizes XLA's thread pool itself)
    began = time.monotonic()
    try:
        done = subprocess.run(
            script_command(SWEEP_ALL, str(devices), json.dumps(list(names))),
            env=env,
            capture_output=True,
            text=True,
            timeout=240,
        )
    except subprocess.TimeoutExpired:
        finished = [name for name in names if (tmp_cwd / f"{name}.npz").exists()]
        pytest.fail(
            f"the sweeps on {devices} devices did not end within 240 s (finished: {finished})"
        )
    assert done.returncode == 0, done.stderr[-3000:]
    print(f"{devices} devices: {time.monotonic() - began:.1f} s for {', '.join(names)}")
    for name in names:
        one = sweep_here(name)
        with np.load(f"{name}.npz") as f:
            several = dict(f)
        assert sorted(several) == sorted(one), name
        assert np.all(one["status"] == 1), name
        for key, value in one.items():
            # (each device's batch has another size: XLA may round the last bits otherwise)
            np.testing.assert_allclose(
                several[key], value, rtol=1e-12, atol=0, err_msg=f"{name}: {key}"
            )


def test_the_finite_difference_sweep_that_hung_on_two_devices_ends_with_the_values_of_one(tmp_cwd):
    # `sim sweep` of the 65-point kvaerno5 heat model with XLA_FLAGS asking for 2 devices,
    # as a user runs it: it waited for ever (both of XLA's threads in LAPACK's dgetrf).
    # (the one-device values are those of the sweep above, computed once)
    (tmp_cwd / "pde_fd.toml").write_text(CONFIGS["pde_fd"])
    env = {**os.environ, "XLA_FLAGS": host_devices(2)}
    env.pop("NPROC", None)
    command = [
        sys.executable,
        "-c",
        "from _sim_entry import main; main()",
        "sweep",
        "pde_fd.toml",
        "-o",
        "two.h5",
        "--quiet",
    ]
    try:
        done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        pytest.fail("the sweep on 2 devices did not end within 120 s")
    assert done.returncode == 0, done.stderr
    one = sweep_here("pde_fd")
    two = sim.read("two.h5")
    assert np.all(two.status == 1)
    np.testing.assert_allclose(np.asarray(two.observables["u"]), one["u"], rtol=1e-12, atol=0)


# A model whose vector field asks the host for its rate: with SIM_TEST_HANG set, the
# host never answers for rates above 0.5 (the second chunk of HANG_CONFIG), a planted
# stand-in for a computation that waits for ever.
HANG_MODEL = '''
import os
import signal
import time
from typing import ClassVar

import jax
import numpy as np

from physics import Parameter
from physics.ode import OdeModel


def rate(k):
    if os.environ.get("SIM_TEST_HANG") and np.any(np.asarray(k) > 0.5):
        time.sleep(3600.0)
    return np.asarray(k)


class AskingDecay(OdeModel):
    """dy/dt = -k y, k from a host callback."""

    name: ClassVar[str] = "asking_decay"
    description: ClassVar[str] = "exponential decay at a rate the host gives"
    parameters: ClassVar[tuple[Parameter, ...]] = (Parameter("k", 0.1, "1/s", "decay rate", "positive"),)
    state_names: ClassVar[tuple[str, ...]] = ("y",)
    initial_defaults: ClassVar[dict[str, float]] = {"y": 1.0}

    def vector_field(self, t, y, params):
        k = jax.pure_callback(rate, jax.ShapeDtypeStruct((), y.dtype), params["k"], vmap_method="sequential")
        return -k * y
'''

HANG_CONFIG = """
[model]
source = "asking.py:AskingDecay"
[time]
t1 = 1.0
save = 3
[solver]
method = "tsit5"
[sweep]
chunk = 2
[sweep.params]
k = { values = [0.1, 0.2, 0.7, 0.8] }
"""


def written_runs(partial) -> int:
    try:
        import h5py

        with h5py.File(partial, "r", locking=False) as f:
            return int(np.sum(f["status"][()] != 0))
    except (OSError, KeyError):
        return 0


def hanging_sweep(folder, devices: int, **variables) -> subprocess.Popen:
    (folder / "asking.py").write_text(HANG_MODEL)
    (folder / "c.toml").write_text(HANG_CONFIG)
    env = {**os.environ, "XLA_FLAGS": host_devices(devices), "SIM_TEST_HANG": "1", **variables}
    env.pop("NPROC", None)
    command = [
        sys.executable,
        "-c",
        "from _sim_entry import main; main()",
        "sweep",
        "c.toml",
        "-o",
        "out.h5",
        "--quiet",
    ]
    return subprocess.Popen(
        command, env=env, cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )


def test_a_chunk_that_makes_no_progress_ends_the_sweep_in_one_line_and_resumes(tmp_cwd, capsys):
    from sim.cli import main

    began = time.monotonic()
    process = hanging_sweep(tmp_cwd, 2, SIMJAX_STALL_SECONDS="3")
    try:
        _, err = process.communicate(timeout=60)
    finally:
        process.kill()
    took = time.monotonic() - began
    assert process.returncode == 1 and len(err.strip().splitlines()) == 1, err
    assert (
        "made no progress for 3 s on 2 devices" in err
        and "resume with: sim sweep c.toml -o out.h5 --quiet --resume" in err
    ), err
    print(f"a planted hang on 2 devices ended after {took:.1f} s")
    assert written_runs(tmp_cwd / ".out.h5.partial") == 2  # the first chunk, kept
    # Resumed without the hang: the second chunk is computed, the first kept.
    with pytest.raises(SystemExit) as info:
        main(["sweep", "c.toml", "-o", "out.h5", "--resume", "--quiet"])
        raise SystemExit(0)
    assert info.value.code == 0, capsys.readouterr().err
    y = sim.read("out.h5").observables["y"]
    k = np.array([0.1, 0.2, 0.7, 0.8])
    np.testing.assert_allclose(y, np.exp(-k[:, None] * np.array([0.0, 0.5, 1.0])), rtol=1e-5)


def test_sigterm_during_a_chunk_that_waits_ends_the_sweep_at_once(tmp_cwd):
    from sim._watchdog import SIGNAL_GRACE_SECONDS

    process = hanging_sweep(tmp_cwd, 2, SIMJAX_STALL_SECONDS="600")
    try:
        deadline = time.monotonic() + 60
        while (
            written_runs(tmp_cwd / ".out.h5.partial") < 2
        ):  # the first chunk written, the second waits
            assert process.poll() is None and time.monotonic() < deadline, (
                process.stderr.read() if process.poll() is not None else "no chunk within 60 s"
            )
            time.sleep(0.2)
        sent = time.monotonic()
        process.send_signal(signal.SIGTERM)
        _, err = process.communicate(timeout=SIGNAL_GRACE_SECONDS + 20)
        took = time.monotonic() - sent
    finally:
        process.kill()
    assert process.returncode == 143 and len(err.strip().splitlines()) == 1, err
    assert err.startswith(
        "interrupted (SIGTERM): the sweep so far is kept in .out.h5.partial; resume with:"
    ), err
    assert took < SIGNAL_GRACE_SECONDS + 10, took
    assert written_runs(tmp_cwd / ".out.h5.partial") == 2


@pytest.mark.parametrize("value", ["abc", "0", "-5", "inf", "nan"])
def test_a_stall_bound_that_is_no_positive_number_is_refused_in_one_line(
    tmp_cwd, capsys, monkeypatch, value
):
    from sim.cli import main

    (tmp_cwd / "c.toml").write_text(CONFIGS["ode_explicit"])
    monkeypatch.setenv("SIMJAX_STALL_SECONDS", value)
    with pytest.raises(SystemExit) as info:
        main(["sweep", "c.toml", "-o", "out.h5", "--quiet"])
    err = capsys.readouterr().err
    assert info.value.code == 2 and len(err.strip().splitlines()) == 1, err
    assert "SIMJAX_STALL_SECONDS" in err and "positive number of seconds" in err, err
    assert sorted(p.name for p in tmp_cwd.iterdir()) == ["c.toml"]  # no output, no partial file
