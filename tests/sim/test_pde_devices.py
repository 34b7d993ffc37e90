"""One spectral PDE run split over several devices (`Etdrk(devices=N)`: slabs of the first
grid axis, `solvers.solve_slabs`), on simulated CPU devices
(`--xla_force_host_platform_device_count`): the 3-D heat equation and 3-D Navier-Stokes
(Taylor-Green) give the fields of one device, each device holds 1/N of the grid, the
compiled program exchanges blocks by all-to-all and gathers no grid, and gradients
through the steps agree between device counts and with finite differences. The physics
is judged against exact results: the heat equation's modal decay, a divergence-free
velocity, the energy budget dE/dt = -2 nu enstrophy.

One process of 4 devices runs every case of one grid size (16^3 in the default run,
64^3 under `slow`; the gradients at half that) (device counts 1, 2 and 4 as
meshes of its first devices), so that its start-up and compilations are paid once.
"""

import math
import time

import numpy as np
import pytest

from tests.helpers import SIM_COMMANDS, commands_said, on_host_devices

CASES = r"""
import math
import re
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

import sim
from physics.pde import Heat, NavierStokes3d
from solvers import Etdrk

sim.configure_jax()
assert len(jax.devices()) == 4, jax.devices()
n, out = int(sys.argv[1]), sys.argv[2]
box = ((0.0, 2 * math.pi),) * 3
saved, timings = {}, {}
t = jnp.linspace(0.0, 0.5, 11)  # 100 ETDRK4 steps: 10 per save interval


def heat_initial(model):
    x, y, z = model.mesh()
    return np.sin(x) * np.cos(2 * y) * np.sin(3 * z) + 0.5 * np.cos(4 * z)


def full_grid_gathers(text):
    # the result shapes of every all-gather in the compiled program
    shapes = re.findall(r"= \w+\[([\d,]*)\]\{[^}]*\} all-gather", text)
    return [s for s in shapes if s and math.prod(map(int, s.split(","))) >= n**3]


for name, model, params, initial in [
    ("heat", Heat(points=(n, n, n), domain=box), {"diffusivity": 0.1}, None),
    ("ns", NavierStokes3d(points=(n, n, n)), {"viscosity": 0.05}, None),
]:
    initial = heat_initial(model) if name == "heat" else None
    p = {k: jnp.asarray(v) for k, v in params.items()}
    for devices in (1, 2, 4):
        solver = Etdrk(order=4, steps_per_save=10, devices=devices)
        run = jax.jit(lambda p: sim.simulate(model, p, t, initial=initial, solver=solver))
        began = time.monotonic()
        compiled = run.lower(p).compile()
        traj = compiled(p)
        jax.block_until_ready(traj)
        timings[f"{name}_{devices}"] = time.monotonic() - began
        field = traj.final_state
        blocks = {s.data.shape for s in field.addressable_shards}
        assert blocks == {(field.shape[0], n // devices, n, n)}, blocks
        assert len(field.sharding.device_set) == devices
        if devices > 1:
            text = compiled.as_text()
            assert "all-to-all" in text, name
            assert not full_grid_gathers(text), full_grid_gathers(text)
        saved[f"{name}_{devices}_final"] = np.asarray(field)
        for key, value in traj.observables.items():
            saved[f"{name}_{devices}_{key}"] = np.asarray(value)

# the advective form is the rotational one (the projection removes their difference)
advective = NavierStokes3d(points=(n, n, n), form="advective")
traj = jax.jit(lambda p: sim.simulate(advective, p, t, solver=Etdrk(steps_per_save=10, devices=2)))(
    {"viscosity": jnp.asarray(0.05)}
)
saved["ns_advective_final"] = np.asarray(traj.final_state)

# gradients of the final energy with respect to the viscosity, through 50 steps (on a
# grid of half the points a side: a gradient costs several forward runs)
model = NavierStokes3d(points=(n // 2,) * 3)
short = jnp.linspace(0.0, 0.25, 6)


def final_energy(nu, devices):
    solver = Etdrk(order=4, steps_per_save=10, devices=devices)
    traj = sim.simulate(model, {"viscosity": nu}, short, solver=solver)
    return traj.observables["energy"][-1]


for devices in (1, 4):
    began = time.monotonic()
    value, grad = jax.jit(jax.value_and_grad(lambda nu: final_energy(nu, devices)))(
        jnp.asarray(0.05)
    )
    timings[f"grad_{devices}"] = time.monotonic() - began
    saved[f"grad_{devices}"] = np.asarray(grad)
    saved[f"energy_{devices}"] = np.asarray(value)
h = 1e-5
energy = jax.jit(lambda nu: final_energy(nu, 4))
saved["fd"] = np.asarray((energy(0.05 + h) - energy(0.05 - h)) / (2 * h))
np.savez(out, t=np.asarray(t), **saved)
print(" ".join(f"{k}={v:.1f}s" for k, v in timings.items()))
"""


def run_cases(folder, n: int) -> dict[str, np.ndarray]:
    out = folder / f"cases_{n}.npz"
    began = time.monotonic()
    done = on_host_devices(CASES, [str(n), str(out)], 4, timeout=900)
    print(f"{n}^3 on 1, 2, 4 devices: {time.monotonic() - began:.1f} s ({done.stdout.strip()})")
    with np.load(out) as f:
        return dict(f)


def simpson(values, dx):
    return dx / 3 * (values[0] + values[-1] + 4 * values[1:-1:2].sum() + 2 * values[2:-1:2].sum())


def check(cases: dict[str, np.ndarray], n: int) -> None:
    t = cases["t"]
    x = 2 * np.pi * np.arange(n) / n
    X, Y, Z = np.meshgrid(x, x, x, indexing="ij")
    # the same fields on 1, 2 and 4 devices
    for name in ("heat", "ns"):
        one = cases[f"{name}_1_final"]
        for devices in (2, 4):
            several = cases[f"{name}_{devices}_final"]
            assert np.max(np.abs(several - one)) <= 1e-12 * np.max(np.abs(one)), (name, devices)
            for key in ("energy", "enstrophy") if name == "ns" else ("mass", "u"):
                reference = cases[f"{name}_1_{key}"]
                np.testing.assert_allclose(
                    cases[f"{name}_{devices}_{key}"],
                    reference,
                    rtol=1e-12,
                    atol=1e-12 * max(np.max(np.abs(reference)), 1.0),
                )
    # heat: each Fourier mode decays as exp(-D |k|^2 t) (|k|^2 = 1 + 4 + 9 and 16)
    exact = np.exp(-0.1 * 14 * t[-1]) * np.sin(X) * np.cos(2 * Y) * np.sin(3 * Z) + 0.5 * np.exp(
        -0.1 * 16 * t[-1]
    ) * np.cos(4 * Z)
    assert np.max(np.abs(cases["heat_4_final"][0] - exact)) < 1e-12
    # Navier-Stokes: divergence-free (measured by numpy's own transforms)
    final = cases["ns_4_final"]
    k = np.fft.fftfreq(n, 1.0 / n)
    kz = np.arange(n // 2 + 1)
    u_hat = np.fft.rfftn(final, axes=(1, 2, 3))
    div_hat = 1j * (
        k[:, None, None] * u_hat[0] + k[None, :, None] * u_hat[1] + kz[None, None, :] * u_hat[2]
    )
    divergence = np.fft.irfftn(div_hat, s=(n, n, n), axes=(0, 1, 2))
    assert np.max(np.abs(divergence)) < 1e-12, np.max(np.abs(divergence))
    assert np.max(np.abs(final)) > 0.5  # (a flow, not a field decayed to nothing)
    # the energy of the Taylor-Green field is pi^3 (|u|^2 averages to 1/8 + 1/8 over the
    # box of volume 8 pi^3); its modes all have |k|^2 = 3, so enstrophy = 3 E at t = 0 and
    # dE/dt(0) = -2 nu enstrophy = -6 nu E
    energy, enstrophy = cases["ns_1_energy"], cases["ns_1_enstrophy"]
    assert abs(energy[0] - np.pi**3) < 1e-12 * np.pi**3
    assert abs(enstrophy[0] - 3 * np.pi**3) < 1e-11 * np.pi**3
    # the energy budget over the run: E(t) - E(0) = -2 nu (integral of the enstrophy)
    lost = energy[0] - energy[-1]
    dissipated = 2 * 0.05 * simpson(enstrophy, t[1] - t[0])
    assert abs(lost - dissipated) < 1e-6 * lost, (lost, dissipated)
    # the advective and rotational forms give the same flow
    advective = cases["ns_advective_final"]
    assert np.max(np.abs(advective - cases["ns_1_final"])) < 1e-12
    # gradients through 50 steps (at half the points a side): equal on 1 and 4 devices,
    # and central differences
    g1, g4, fd = float(cases["grad_1"]), float(cases["grad_4"]), float(cases["fd"])
    assert abs(g4 - g1) <= 1e-10 * abs(g1), (g1, g4)
    assert abs(g4 - fd) <= 1e-6 * abs(fd), (g4, fd)
    assert g1 < 0  # (more viscosity, less energy left)
    assert math.isfinite(float(cases["energy_4"]))


def test_a_spectral_run_split_over_devices_gives_the_physics_and_the_fields_of_one(tmp_cwd):
    check(run_cases(tmp_cwd, 16), 16)


@pytest.mark.slow
def test_the_same_at_64_cubed(tmp_cwd):
    check(run_cases(tmp_cwd, 64), 64)


# A forced 2-D flow (its 17 real-FFT modes along y padded to 18 and 20 modes for 2 and 4
# devices) and the 3-D heat equation, as `sim run` writes them.
RUN_CONFIGS = {
    "ns2d": """
[model]
name = "navier_stokes_2d"
forcing_mode = 2
[grid]
points = [32, 32]
[params]
viscosity = 0.01
forcing = 0.5
[time]
t1 = 0.5
save = 6
dt = 0.02
""",
    "heat3d": """
[model]
name = "heat"
[grid]
points = [16, 8, 8]
domain = [[0.0, 6.283185307179586], [0.0, 6.283185307179586], [0.0, 6.283185307179586]]
[initial]
u = "sin(x) * cos(2 * y) + 0.25 * cos(3 * z)"
[time]
t1 = 0.2
save = 5
dt = 0.01
""",
}

# Every `sim run` of one process of 4 devices, each after a marker line on stderr.
RUNS = (
    r"""
import jax
import numpy as np

assert len(jax.devices()) == 4, jax.devices()
"""
    + SIM_COMMANDS
    + r"""
# a field split over devices reaches the host block by block, one block a device
from sim._shards import blocks
from solvers import SlabGrid

grid = SlabGrid((16, 8, 8), ((0.0, 1.0),) * 3, devices=4)
split = grid.shard(jax.numpy.arange(3 * 16 * 64.0).reshape(3, 16, 8, 8))
seen = [(index[1].start, block.shape) for index, block in blocks(split)]
assert sorted(seen) == [(0, (3, 4, 8, 8)), (4, (3, 4, 8, 8)), (8, (3, 4, 8, 8)), (12, (3, 4, 8, 8))]
print(json.dumps(codes))
"""
)


def test_sim_run_on_2_and_4_devices_writes_the_file_of_one(tmp_cwd, capsys):
    import json

    import sim
    from tests.helpers import cli

    for name, text in RUN_CONFIGS.items():
        (tmp_cwd / f"{name}.toml").write_text(text)
        assert cli(["run", f"{name}.toml", "-o", f"{name}_1.h5", "--quiet"], capsys)[0] == 0
    runs = [
        ["run", f"{name}.toml", "-o", f"{name}_{n}.h5", "--quiet", "--devices", str(n)]
        for name in RUN_CONFIGS
        for n in (2, 4)
    ]
    bad = [
        ["run", "heat3d.toml", "-o", "bad.h5", "--quiet", "--devices", "3"],
        ["run", "ns2d.toml", "-o", "bad.h5", "--quiet", "--set", "grid.devices=8"],
        ["run", "ns2d.toml", "-o", "bad.h5", "--quiet", "--set", "grid.devices=0"],
    ]
    began = time.monotonic()
    done = on_host_devices(RUNS, [json.dumps(runs + bad)], 4)
    print(
        f"{len(runs)} runs and {len(bad)} refusals on 4 devices: {time.monotonic() - began:.1f} s"
    )
    codes = json.loads(done.stdout.strip().splitlines()[-1])
    assert codes == [0] * len(runs) + [2] * len(bad), (codes, done.stderr[-3000:])
    said = commands_said(done.stderr)
    for argv, text in zip(runs + bad, said, strict=True):
        lines = text.strip().splitlines()[1:]
        if argv in bad:
            assert len(lines) == 1 and "grid.devices" in lines[0], text
    assert "3 does not divide points[0] = 16" in said[len(runs)]
    assert "only 4 devices are available" in said[len(runs) + 1]
    assert not (tmp_cwd / "bad.h5").exists()
    for name in RUN_CONFIGS:
        one = sim.read(f"{name}_1.h5")
        for n in (2, 4):
            several = sim.read(f"{name}_{n}.h5")
            assert list(several.observables) == list(one.observables)
            for key, value in one.observables.items():
                value = np.asarray(value)
                got = np.asarray(several.observables[key])
                assert got.shape == value.shape, (name, n, key)
                scale = max(np.max(np.abs(value)), 1.0)
                assert np.max(np.abs(got - value)) <= 1e-12 * scale, (name, n, key)
            np.testing.assert_array_equal(several.time, one.time)


def test_bad_grid_devices_are_refused_in_one_line(tmp_cwd, capsys):
    from tests.helpers import cli

    (tmp_cwd / "ns2d.toml").write_text(RUN_CONFIGS["ns2d"])
    fd = """
[model]
name = "heat_fd"
[grid]
points = [9, 9]
[time]
t1 = 0.1
save = 3
"""
    (tmp_cwd / "fd.toml").write_text(fd)
    for argv, said in [
        (["run", "ns2d.toml", "--devices", "2"], "only 1 device is available"),
        (["run", "ns2d.toml", "--set", "grid.devices=1.5"], "expected a whole number of devices"),
        (["run", "ns2d.toml", "--set", "grid.devices=true"], "expected a whole number of devices"),
        (["run", "fd.toml", "--set", "grid.devices=2"], "only 1 device is available"),
        (["run", "fd.toml", "--set", "grid.devices=0"], "expected a whole number of devices"),
    ]:
        code, err = cli([*argv, "-o", "out.h5", "--quiet"], capsys)
        assert code == 2 and len(err.strip().splitlines()) == 1, (argv, err)
        assert "grid.devices" in err and said in err, (argv, err)
    assert sorted(p.name for p in tmp_cwd.iterdir()) == ["fd.toml", "ns2d.toml"]
