"""A finite-difference grid split over devices (`solvers.HaloGrid`, `MethodOfLines(devices=N)`)
on simulated CPU devices (`--xla_force_host_platform_device_count`): its operators are
`FdGrid`'s on 2 and 4 devices, a split run gives the fields and the steps of one device
(explicit, IMEX and implicit methods, the last two by GMRES), the heat equation decays
mode by mode as the stencil's eigenvalues say, the compiled program exchanges ghost
planes by collective-permute and gathers no grid, and a gradient through the split run is
one device's. Grids that do not split are refused in one line.

One process of 4 devices runs every case (device counts 2 and 4 as meshes of its first
devices), so that its start-up is paid once.
"""

import math
import time

import numpy as np
import pytest

from solvers import FdGrid, HaloGrid, MethodOfLines, check_halo
from tests.helpers import on_host_devices

CASES = r"""
import math
import re
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

import sim
from solvers import FdGrid, HaloGrid, MethodOfLines, checks_as_nan

sim.configure_jax()
assert len(jax.devices()) == 4, jax.devices()
n, out, full = int(sys.argv[1]), sys.argv[2], sys.argv[3] == "full"
saved, timings = {}, {}
rng = np.random.default_rng(0)


def full_grid_gathers(text, size):
    # the result shapes of every all-gather in the compiled program as big as a field
    shapes = re.findall(r"= \w+\[([\d,]*)\]\{[^}]*\} all-gather", text)
    return [s for s in shapes if s and math.prod(map(int, s.split(","))) >= size]


def timed(name, fn, *args):
    began = time.process_time()
    lowered = jax.jit(fn).lower(*args)
    traced = time.process_time()
    compiled = lowered.compile()
    done = time.process_time()
    value = jax.block_until_ready(compiled(*args))
    timings[name] = timings.get(name, 0.0) + time.process_time() - began
    timings[name + "_trace"] = timings.get(name + "_trace", 0.0) + traced - began
    timings[name + "_compile"] = timings.get(name + "_compile", 0.0) + done - traced
    return compiled, value


# --- the operators: every derivative FdGrid has, on 2 and 4 devices -----------------------
# (between them the four grids put each kind of side on each end of the split axis, at
# both orders: periodic 2 and 4, Dirichlet low 2 and high 4, Neumann high 2 and low 4)
GRIDS = [
    ((n,), 2, ("dirichlet", "neumann")),
    ((n,), 4, ("periodic", "periodic")),
    ((n, 9), 2, ("periodic", "periodic")),
    ((n, 9), 4, ("neumann", "dirichlet")),
]


def operators(grid):
    def f(u, flux):
        out = {"laplacian": grid.laplacian(u), "integral": grid.integral(u)}
        for axis in range(grid.ndim):
            out[f"second_{axis}"] = grid.second_derivative(u, axis)
            for k in (1, 2):
                out[f"d{k}_{axis}"] = grid.derivative(u, axis, k)
                # (a number on one side, a traced array over the side's nodes on the other)
                out[f"d{k}_{axis}_data"] = grid.derivative(u, axis, k, (0.4, flux[axis]))
        return out

    return f


for index, (points, order, kinds) in enumerate(GRIDS):
    ndim = len(points)
    whole = FdGrid(points, ((0.0, 1.0), (0.0, 2.0))[:ndim],
                   (kinds, ("dirichlet", "neumann"))[:ndim], ((0.3, -0.7), (0.2, 0.5))[:ndim],
                   order)
    u = jnp.asarray(rng.standard_normal((2, *points)))
    # the side data of axis 0 run along the other axes, those of axis 1 along axis 0
    flux = [jnp.asarray(rng.standard_normal((2, *points[1:]))),
            jnp.asarray(rng.standard_normal((2, points[0])))][:ndim]
    _, reference = timed("operators", operators(whole), u, flux)
    for devices in (2, 4):
        grid = HaloGrid.of(whole, devices)
        compiled, got = timed("operators", operators(grid), grid.shard(u), flux)
        text = compiled.as_text()
        assert "collective-permute" in text and not full_grid_gathers(text, u.size)
        for key, value in reference.items():
            saved[f"op_{index}_{devices}_{key}"] = np.asarray(got[key])
            saved[f"op_{index}_ref_{key}"] = np.asarray(value)

# --- a 2-D reaction-diffusion run of two fields on 1 and 4 devices -----------------------
# u_t = Du lap u + u (1 - u) - u v^2, v_t = Dv lap v + u v^2 - v / 2 on [0, 1] x [0, 1.5]
# with u = 1 at x = 0, Neumann sides elsewhere; the split axis is x.
def reaction_diffusion(points):
    grid = FdGrid(points, ((0.0, 1.0), (0.0, 1.5)),
                  (("dirichlet", "neumann"), ("neumann", "neumann")), ((1.0, 0.0), (0.0, 0.0)))
    x, y = np.meshgrid(*grid.coordinates(), indexing="ij")
    u0 = jnp.asarray(np.stack([np.exp(-((x - 0.4) ** 2 + (y - 0.7) ** 2) / 0.05),
                               0.5 + 0.2 * np.cos(3 * x) * np.sin(2 * y)]))
    return grid, u0


def reaction(u):
    a, b = u
    return jnp.stack([a * (1 - a) - a * b * b, a * b * b - 0.5 * b])


t = jnp.linspace(0.0, 0.4, 5)
diffusivities = jnp.asarray([0.02, 0.01])
runs = [("tsit5", None, (1, 4)), ("kencarp4", "gmres", (1, 4))]
if full:  # (the implicit method, and the dense stage solves against GMRES, on 16 x 12)
    runs += [("kvaerno5", "gmres", (1, 4)), ("kencarp4", "dense", (1,)),
             ("kencarp4", "gmres", (4,))]
for number, (method, linear, counts) in enumerate(runs):
    grid, u0 = reaction_diffusion((n, 12) if number < 3 else (16, 12))
    for devices in counts:
        solver = MethodOfLines(method=method, rtol=1e-6, atol=1e-8, devices=devices,
                               linear_solver=linear if devices == 1 else None)

        def run(d):
            sol = solver.solve(grid, d, reaction, u0, t)
            return sol.saved, sol.num_steps, sol.result

        compiled, (fields, steps, result) = timed(f"{method}_{devices}", run, diffusivities)
        assert int(result) == 0, (method, devices, int(result))
        key = f"{method}_{linear}_{devices}" + ("_small" if number >= 3 else "")
        saved[key] = np.asarray(fields)
        saved[key + "_steps"] = np.asarray(steps)
        blocks = {s.data.shape for s in fields.addressable_shards}
        assert blocks == {(len(t), 2, grid.points[0] // devices, 12)}, (key, blocks)
        if devices > 1:
            size = grid.points[0] * grid.points[1]
            text = compiled.as_text()
            assert "collective-permute" in text, key
            assert not full_grid_gathers(text, size), (key, full_grid_gathers(text, size))

# --- the heat equation's modal decay on the split grid ------------------------------------
# u0 = sin(pi m x) cos(2 pi k y) (Dirichlet in x, the split axis; periodic in y, order 2)
# is an eigenvector of the discrete Laplacian: u(t) = exp(D lambda t) u0 with lambda =
# -(4 / hx^2) sin^2(pi m hx / 2) - (4 / hy^2) sin^2(pi k hy).
heat = FdGrid((n, 16), ((0.0, 1.0), (0.0, 1.0)), (("dirichlet",) * 2, ("periodic",) * 2),
              ((0.0, 0.0), (0.0, 0.0)))
x, y = np.meshgrid(*heat.coordinates(), indexing="ij")
mode = np.sin(np.pi * 3 * x) * np.cos(2 * np.pi * 2 * y)
hx, hy = heat.spacing
lam = -(4 / hx**2) * np.sin(np.pi * 3 * hx / 2) ** 2 - (4 / hy**2) * np.sin(np.pi * 2 * hy) ** 2
saved["heat_lambda"] = np.asarray(lam)
# a periodic split axis of order 4: cos(2 pi k x) has lambda = (w0 + 2 w1 cos(theta)
# + 2 w2 cos(2 theta)) / h^2, theta = 2 pi k h, (w0, w1, w2) = (-5/2, 4/3, -1/12)
ring = FdGrid((n,), ((0.0, 1.0),), (("periodic",) * 2,), ((0.0, 0.0),), order=4)
(xr,) = ring.coordinates()
theta = 2 * np.pi * 3 / n
saved["ring_lambda"] = np.asarray(
    (-5 / 2 + 2 * 4 / 3 * np.cos(theta) - 2 / 12 * np.cos(2 * theta)) * n**2)
tt = jnp.linspace(0.0, 0.02, 3)
for name, g, start, method in [("heat", heat, mode[None], "tsit5"),
                               ("ring", ring, np.cos(2 * np.pi * 3 * xr)[None], "kencarp5")]:
    saved[f"{name}_start"] = np.asarray(start)
    solver = MethodOfLines(method=method, order=g.order, rtol=1e-10, atol=1e-12, devices=4)

    def run(d):
        return solver.solve(g, d, jnp.zeros_like, jnp.asarray(start), tt).saved

    _, fields = timed(f"{name}_{method}", run, jnp.asarray([0.05]))
    saved[name] = np.asarray(fields)

# --- a gradient through the split run ------------------------------------------------------
grid, u0 = reaction_diffusion((n, 12))
short = jnp.linspace(0.0, 0.1, 2)
adjoint = "recursive_checkpoint" if full else "forward"
for devices in (1, 4):
    solver = MethodOfLines(method="tsit5", rtol=1e-9, atol=1e-11, devices=devices,
                           adjoint=adjoint)

    def loss(d):
        final = solver.solve(grid, d, reaction, u0, short).saved[-1]
        return jnp.sum(final[1] ** 2)

    differentiate = jax.value_and_grad if adjoint != "forward" else (
        lambda f: lambda d: (f(d), jax.jacfwd(f)(d)))
    _, (value, gradient) = timed(f"gradient_{devices}", differentiate(loss), diffusivities)
    saved[f"loss_{devices}"] = np.asarray(value)
    saved[f"gradient_{devices}"] = np.asarray(gradient)
h = 1e-6
loss4 = jax.jit(loss)
saved["gradient_fd"] = np.asarray([
    (loss4(diffusivities.at[i].add(h)) - loss4(diffusivities.at[i].add(-h))) / (2 * h)
    for i in range(2)])
np.savez(out, t=np.asarray(t), tt=np.asarray(tt), **saved)
print(" ".join(f"{k}={v:.1f}s" for k, v in timings.items()))
"""


def run_cases(folder, n: int, full: bool = False) -> dict[str, np.ndarray]:
    out = folder / f"halo_{n}.npz"
    began = time.monotonic()
    args = [str(n), str(out), "full" if full else "default"]
    done = on_host_devices(CASES, args, 4, timeout=900, EQX_ON_ERROR="nan")
    print(f"n = {n} on 1, 2, 4 devices: {time.monotonic() - began:.1f} s ({done.stdout.strip()})")
    with np.load(out) as f:
        return dict(f)


def check_operators(cases: dict[str, np.ndarray]) -> None:
    # the operators are FdGrid's (the same terms in the same order: to rounding, 1e-13)
    compared = 0
    for key, reference in cases.items():
        if not key.startswith("op_") or "_ref_" not in key:
            continue
        index, name = key.removeprefix("op_").split("_ref_")
        for devices in (2, 4):
            got = cases[f"op_{index}_{devices}_{name}"]
            scale = np.max(np.abs(reference))
            assert np.max(np.abs(got - reference)) <= 1e-13 * scale, (index, devices, name)
            compared += 1
    assert compared == 2 * (2 * 7 + 2 * 12)  # (every operator of the four grids, 2 and 4)


def check_runs(cases: dict[str, np.ndarray]) -> None:
    # the run on 4 devices gives the fields and the steps of one device
    methods = [key.removesuffix("_1_steps") for key in cases if key.endswith("_1_steps")]
    assert {"tsit5_None", "kencarp4_gmres"} <= set(methods), methods
    for method in methods:
        one, four = cases[f"{method}_1"], cases[f"{method}_4"]
        assert np.max(np.abs(four - one)) <= 1e-12 * np.max(np.abs(one)), method
        assert int(cases[f"{method}_4_steps"]) == int(cases[f"{method}_1_steps"]), method
        assert np.max(np.abs(four[-1] - four[0])) > 0.05  # (the fields moved)
        # the Dirichlet side keeps its value
        assert np.all(four[:, 0, 0, :] == 1.0)
    # GMRES solves the stages to 1e-3 of the tolerances: the dense solve's fields to 1e-8
    if "kencarp4_dense_1_small" in cases:
        dense, krylov = cases["kencarp4_dense_1_small"], cases["kencarp4_gmres_4_small"]
        assert np.max(np.abs(krylov - dense)) <= 1e-8, np.max(np.abs(krylov - dense))


def check_decay(cases: dict[str, np.ndarray]) -> None:
    # the heat equation: a mode decays as the stencil's eigenvalue says (explicit on the
    # Dirichlet split axis of order 2, IMEX on the periodic one of order 4)
    tt = cases["tt"]
    for name in ("heat", "ring"):
        start = cases[f"{name}_start"]
        decay = np.exp(0.05 * float(cases[f"{name}_lambda"]) * tt)
        exact = decay.reshape(-1, *[1] * start.ndim) * start[None]
        got = cases[name]
        assert np.max(np.abs(got - exact)) <= 1e-8, (name, np.max(np.abs(got - exact)))
        assert decay[-1] < 0.9  # (a decay the test can see)


def check_gradient(cases: dict[str, np.ndarray]) -> None:
    # a gradient through the split run is one device's (and central differences')
    g1, g4, fd = cases["gradient_1"], cases["gradient_4"], cases["gradient_fd"]
    assert np.max(np.abs(g4 - g1)) <= 1e-10 * np.max(np.abs(g1)), (g1, g4)
    assert np.max(np.abs(g4 - fd)) <= 1e-5 * np.max(np.abs(fd)), (g4, fd)
    assert abs(float(cases["loss_4"]) - float(cases["loss_1"])) <= 1e-12 * float(cases["loss_1"])


CHECKS = (check_operators, check_runs, check_decay, check_gradient)


def check(cases: dict[str, np.ndarray]) -> None:
    for each in CHECKS:
        each(cases)


def test_a_grid_split_over_devices_gives_the_operators_and_runs_of_one(tmp_cwd):
    check(run_cases(tmp_cwd, 16))


@pytest.mark.slow
def test_the_same_at_64_points_with_the_implicit_and_dense_solves(tmp_cwd):
    check(run_cases(tmp_cwd, 64, full=True))


@pytest.mark.parametrize(
    ("points", "devices", "order", "periodic", "message"),
    [
        ((64, 64), 3, 2, False, "devices = 3 does not divide points[0] = 64"),
        ((16,), 8, 2, False, "slabs of 2 planes of points[0] = 16 are thinner than the 3"),
        ((8, 8), 4, 4, False, "slabs of 2 planes of points[0] = 8 are thinner than the 4"),
        ((8,), 8, 4, True, "slabs of 1 plane of points[0] = 8 are thinner than the 2"),
        ((64, 64), 0, 2, False, "expected a whole number >= 1"),
        ((64, 64), True, 2, False, "expected a whole number >= 1"),
        ((64, 64), 16, 2, False, "only 8 devices are available"),
    ],
)
def test_a_grid_that_does_not_split_is_refused_in_one_line(
    points, devices, order, periodic, message
):
    with pytest.raises(ValueError, match="devices = ") as info:
        check_halo(points, devices, order=order, periodic=periodic, available=8)
    assert message in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize(
    ("points", "devices", "order", "periodic"),
    [((16,), 4, 2, False), ((16,), 8, 2, True), ((16, 16), 4, 4, False), ((8,), 4, 4, True)],
)
def test_slabs_as_thin_as_the_stencil_allows_split(points, devices, order, periodic):
    check_halo(points, devices, order=order, periodic=periodic, available=8)


def test_a_halo_grid_checks_its_split_and_its_solver():
    whole = FdGrid((12, 9), ((0.0, 1.0),) * 2, (("neumann",) * 2,) * 2, ((0.0, 0.0),) * 2)
    grid = HaloGrid.of(whole, 4)
    assert grid.slab_points == (3, 9) and grid.ghost == 1 and grid.whole == whole
    with pytest.raises(ValueError, match="thinner than the 4"):
        HaloGrid.of(FdGrid(whole.points, whole.domain, whole.boundaries, whole.values, 4), 4)
    with pytest.raises(ValueError, match="does not divide"):
        MethodOfLines(devices=5).split(whole)
    with pytest.raises(ValueError, match="dense Jacobian of the stage equations cannot be split"):
        MethodOfLines(method="kencarp4", devices=2, linear_solver="dense")
    with pytest.raises(ValueError, match="unknown linear solver"):
        MethodOfLines(linear_solver="lu")
    with pytest.raises(ValueError, match="expected a whole number"):
        MethodOfLines(devices=0)
    assert MethodOfLines(method="kencarp4", devices=2).stepper.linear_solver == "gmres"
    assert MethodOfLines(method="kencarp4").stepper.linear_solver == "dense"
    assert math.isclose(grid.spectral_radius(), whole.spectral_radius())
