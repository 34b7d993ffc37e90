"""One command for a GPU machine: a correctness subset on the default device, then every
benchmark's throughput on that device and on the CPU beside it, as a Markdown table.

Correctness (the default device, float64 unless said; each against an independent result):
  - heat 3-D (64^3): every saved field against the exact modal decay exp(-D |k|^2 t);
  - Taylor-Green (navier_stokes_3d, 64^3, nu = 0.02 to t = 1): the final velocity's
    divergence (NumPy FFT), its energy and enstrophy by NumPy against the model's, and
    the energy balance E(0) - E(T) = 2 nu int Z dt (Simpson's rule over 41 saves);
  - Lotka-Volterra: the first integral delta x - gamma ln x + beta y - alpha ln y kept
    to ten times the tolerance (tsit5, rtol = atol = 1e-10, 50 time units);
  - Lennard-Jones NVE from an fcc lattice (velocity Verlet, shifted potential, 864
    particles, 2,000 steps): the energy drift once the lattice has melted;
  - the same small spectral run (navier_stokes_2d, 64^2) and ODE run (Lotka-Volterra)
    on the default device and on the CPU device (`jax.devices("cpu")`), agreeing to
    1e-10; a float32 spectral run (128^2) finite and within 1e-4 of the float64 one.
Each prints PASS or FAIL with its number; the exit code is 1 if any fails (or a case
stops with an error).

Throughput: each case runs the same program on the default device and on
`jax.devices("cpu")[0]`, the CPU at a smaller size or fewer steps where the device's
would take too long; the table gives both sizes and the per-unit throughput of each
(point-steps/s, particle-steps/s, runs/s, training steps/s, NUTS steps/s) and their
ratio. Compilation is timed apart (`lower` and `compile`, or a first call less a later
one) and never counted in a throughput:
  - spectral 2-D: navier_stokes_2d (Kolmogorov flow, nu = 1e-3) 1024^2, ETDRK4, 500
    steps, float64 and float32 (`[solver] dtype`); the CPU 10 steps;
  - spectral 3-D: navier_stokes_3d (Taylor-Green) 256^3, ETDRK4, 20 steps, float64 and
    float32; the CPU 128^3, 3 steps;
  - MD: the Lennard-Jones liquid from an fcc lattice (`[system] cells`) of 32,000,
    256,000 and 1,048,576 particles, velocity Verlet in float32 (`[solver] dtype`), 200
    steps of `solvers.ParticleRun` timed as md_bench.py times them (the list and first
    forces before the clock); the CPU 32,000 particles, 40 steps, for every row;
  - sweep: 10^6 runs of experiments/lotka_volterra.toml (tsit5, 201 saves) in one call of
    the batched solve that `sim sweep` gives an ODE chunk (`solvers.solve_batch`); the CPU
    10^4 runs;
  - neural ODE: training steps of `inference.Trainer` on the spiral of
    neural_ode_bench.py (dopri5, rtol 1e-7, atol 1e-9, 20 windows of 10 points);
  - NUTS: `inference.infer` of experiments/lynx_hare.toml (what `sim infer` samples), 4
    chains of 100 + 100 steps, one after another on one device (as `infer` lays chains
    on one device); NUTS steps (warmup and sampling, all chains) per second of a second,
    identical call that loads its programs from a compilation cache (tracing, the start
    search and the predictive included), the minimum bulk ESS per second beside it.
    `infer` lays its chains over the process's default devices, so each side runs in a
    child process: one that sees the GPU, one that sees only the CPU.
Without a GPU the device is the CPU: each case is measured once and both columns give it.

Options: --quick (tiny sizes on whatever device there is: a smoke run), --only CASE[,CASE]
(checks, spectral2d, spectral3d, md, sweep, neural_ode, nuts), --budget SECONDS (a case
whose estimated time would pass it is skipped, and the report says so; default 480),
--out FILE (default gpu_check.md in the current folder). Without a GPU (and without
--quick) it says so in one line and runs the quick sizes. --plant-failure (for the test)
compares the heat run with a wrong decay, so that the run must fail. Needs only simjax
and its dependencies, no network.

Run: python experiments/benchmarks/gpu_check.py [--quick] [--only md,sweep] [--budget 480]
"""

from __future__ import annotations

import os

# As the `sim` command runs: equinox's run-time checks as NaN, not host callbacks.
os.environ.setdefault("EQX_ON_ERROR", "nan")
# This process and the NUTS processes it starts share the GPU: each allocates what it
# needs instead of 75% of the GPU at start.
os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")

import argparse
import dataclasses
import json
import math
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

import sim
from solvers import Etdrk, OdeSolver, ParticleRun, solve_batch

TWO_PI = 2 * math.pi
EXPERIMENTS = Path(__file__).resolve().parents[1]
CASES = ("checks", "spectral2d", "spectral3d", "md", "sweep", "neural_ode", "nuts")


# ----------------------------------------------------------------------------- sizes


@dataclasses.dataclass(frozen=True)
class Sizes:
    """Every size the script runs: `FULL` on a GPU, `QUICK` for a smoke run."""

    heat: int
    taylor_green: int
    lj_cells: int
    lj_steps: int
    agree_points: int
    f32_points: int
    # spectral 2-D: points per axis and steps, device then CPU
    s2: tuple[int, int, int, int]
    # spectral 3-D: points per axis and steps, device then CPU
    s3: tuple[int, int, int, int]
    md_cells: tuple[int, ...]
    md_steps: int
    md_cpu: tuple[int, int]  # cells, steps
    sweep_runs: tuple[int, int]
    train_steps: int
    nuts: tuple[int, int, int]  # chains, warmup, samples
    repeats: int
    # rough seconds of each case (compile and run, both sides), for --budget
    estimate: dict[str, float]


FULL = Sizes(
    heat=64,
    taylor_green=64,
    lj_cells=6,
    lj_steps=2000,
    agree_points=64,
    f32_points=128,
    s2=(1024, 500, 1024, 10),
    s3=(256, 20, 128, 3),
    md_cells=(20, 40, 64),
    md_steps=200,
    md_cpu=(20, 40),
    sweep_runs=(1_000_000, 10_000),
    train_steps=20,
    nuts=(4, 100, 100),
    repeats=3,
    estimate={
        "checks": 50,
        "spectral2d": 40,
        "spectral3d": 60,
        "md": 80,
        "sweep": 25,
        "neural_ode": 60,
        "nuts": 150,
    },
)
QUICK = Sizes(
    heat=16,
    taylor_green=16,
    lj_cells=4,
    lj_steps=400,
    agree_points=32,
    f32_points=32,
    s2=(64, 10, 64, 5),
    s3=(16, 4, 16, 2),
    md_cells=(3, 4, 5),
    md_steps=40,
    md_cpu=(3, 40),
    sweep_runs=(1000, 100),
    train_steps=3,
    nuts=(2, 20, 20),
    repeats=1,
    estimate={
        "checks": 20,
        "spectral2d": 10,
        "spectral3d": 10,
        "md": 15,
        "sweep": 8,
        "neural_ode": 25,
        "nuts": 40,
    },
)


# ----------------------------------------------------------------------------- helpers


def default_device():
    return jax.devices()[0]


def cpu_device():
    return jax.devices("cpu")[0]


def config(text: str, folder: Path, name: str) -> sim.Config:
    path = folder / f"{name}.toml"
    path.write_text(text)
    return sim.load_config(path)


def on(device, tree):
    """`tree`'s arrays committed to `device` (NumPy arrays and scalars included)."""
    return jax.device_put(tree, device)


def aot(fn, *args) -> tuple[Callable, float]:
    """`jax.jit(fn)` lowered and compiled for `args` (their device), and the seconds taken."""
    start = time.perf_counter()
    compiled = jax.jit(fn).lower(*args).compile()
    return compiled, time.perf_counter() - start


def seconds(fn, *args, repeats: int = 1) -> float:
    """The median wall time of `fn(*args)` over `repeats` calls, after one call not timed."""
    jax.block_until_ready(fn(*args))
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def cells_n(cells: int) -> int:
    return 4 * cells**3


def one_device() -> bool:
    """Whether the default device is the CPU (no GPU): each case then measures once."""
    return default_device() == cpu_device()


def pair(measure: Callable, dev_size, cpu_size):
    """(device side, CPU side): `measure(size, device)` on each, the CPU at `cpu_size`;
    without a GPU the two are one device, measured once at `dev_size`."""
    dev = measure(dev_size, default_device())
    return (dev, dev) if one_device() else (dev, measure(cpu_size, cpu_device()))


def cpu_label(size: str, device_size: str) -> str:
    """The CPU side's size column (without a GPU: the device's measurement)."""
    return f"{device_size} (the same device)" if one_device() else size


# ----------------------------------------------------------------------------- checks


@dataclasses.dataclass
class Check:
    name: str
    value: float
    bound: float
    what: str

    @property
    def passed(self) -> bool:
        return bool(np.isfinite(self.value) and self.value <= self.bound)

    def line(self) -> str:
        verdict = "PASS" if self.passed else "FAIL"
        return f"{verdict} {self.name}: {self.what} {self.value:.3g} (bound {self.bound:.0e})"


def check_heat(n: int, wrong: float = 1.0) -> list[Check]:
    """Fourier (1822): sin(k . x) decays as exp(-D |k|^2 t) under u_t = D Laplacian(u).
    `wrong` scales the diffusivity of the exact solution (1.0: the true one)."""
    model = sim.get_model("heat", points=[n] * 3, domain=[[0.0, TWO_PI]] * 3)
    x, y, z = model.mesh()
    phase = x + 2 * y + 3 * z
    u0 = np.sin(phase) + 0.3 * np.cos(2 * phase)
    d, k2 = 0.05, 14.0
    t = jnp.linspace(0.0, 2.0, 5)
    traj = sim.simulate(model, {"diffusivity": d}, t, initial=u0, solver=Etdrk(steps_per_save=3))
    u = np.asarray(traj.observables["u"])
    exact = np.stack(
        [
            np.exp(-wrong * d * k2 * s) * np.sin(phase)
            + 0.3 * np.exp(-4 * wrong * d * k2 * s) * np.cos(2 * phase)
            for s in np.asarray(t)
        ]
    )
    error = float(np.max(np.abs(u - exact)))
    return [Check(f"heat 3-D {n}^3 exact modal decay", error, 1e-12, "max |u - exact|")]


def spectral_derivatives(n: int, length: float = TWO_PI):
    """i k per axis of an rfftn of an n^3 grid, the Nyquist modes dropped (as the model's
    derivative symbols)."""
    k = np.fft.fftfreq(n, d=length / n) * TWO_PI
    kz = np.fft.rfftfreq(n, d=length / n) * TWO_PI
    k[n // 2] = 0.0
    kz[-1] = 0.0
    kx, ky, kz = np.meshgrid(k, k, kz, indexing="ij")
    return 1j * kx, 1j * ky, 1j * kz


def check_taylor_green(n: int) -> list[Check]:
    """Taylor-Green vortex at nu = 0.02 to t = 1: divergence, E and Z of the final field
    by NumPy, and the energy balance over the saved enstrophy."""
    nu, saves, steps = 0.02, 41, 5
    model = sim.get_model("navier_stokes_3d", points=[n] * 3)
    t = jnp.linspace(0.0, 1.0, saves)
    traj = sim.simulate(
        model, {"viscosity": nu}, t, solver=Etdrk(steps_per_save=steps)
    )  # (the Taylor-Green start: the model's default initial field)
    energy = np.asarray(traj.observables["energy"])
    enstrophy = np.asarray(traj.observables["enstrophy"])
    u = np.asarray(traj.final_state)
    d = spectral_derivatives(n)
    u_hat = np.fft.rfftn(u, axes=(1, 2, 3))
    div = np.fft.irfftn(sum(di * u_hat[i] for i, di in enumerate(d)), s=(n,) * 3, axes=(0, 1, 2))
    w_hat = np.stack(
        [
            d[1] * u_hat[2] - d[2] * u_hat[1],
            d[2] * u_hat[0] - d[0] * u_hat[2],
            d[0] * u_hat[1] - d[1] * u_hat[0],
        ]
    )
    w = np.fft.irfftn(w_hat, s=(n,) * 3, axes=(1, 2, 3))
    cell = (TWO_PI / n) ** 3
    e_numpy = 0.5 * np.sum(u * u) * cell
    z_numpy = 0.5 * np.sum(w * w) * cell
    h = float(t[1] - t[0])
    simpson = h / 3 * (enstrophy[0] + enstrophy[-1] + 4 * enstrophy[1:-1:2].sum())
    simpson += h / 3 * 2 * enstrophy[2:-1:2].sum()
    lost = energy[0] - energy[-1]
    return [
        Check(
            f"Taylor-Green {n}^3 divergence-free", float(np.max(np.abs(div))), 1e-12, "max |div u|"
        ),
        Check(
            f"Taylor-Green {n}^3 energy and enstrophy (NumPy)",
            max(abs(energy[-1] / e_numpy - 1), abs(enstrophy[-1] / z_numpy - 1)),
            1e-12,
            "largest relative difference",
        ),
        Check(
            f"Taylor-Green {n}^3 dE/dt = -2 nu Z",
            abs(lost - 2 * nu * simpson) / lost,
            1e-8,
            "|E(0) - E(T) - 2 nu int Z dt| / (E(0) - E(T))",
        ),
    ]


def check_lotka_volterra() -> list[Check]:
    """V = delta x - gamma ln x + beta y - alpha ln y is a first integral (Volterra 1926)."""
    model = sim.get_model("lotka_volterra")
    p = model.default_params()
    t = jnp.linspace(0.0, 50.0, 501)
    tol = 1e-10
    traj = sim.simulate(model, p, t, solver=OdeSolver(method="tsit5", rtol=tol, atol=tol))
    x, y = np.asarray(traj.observables["prey"]), np.asarray(traj.observables["predator"])
    v = p["delta"] * x - p["gamma"] * np.log(x) + p["beta"] * y - p["alpha"] * np.log(y)
    drift = float(np.max(np.abs(v - v[0])) / abs(v[0]))
    return [Check("Lotka-Volterra invariant", drift, 10 * tol, "max |V - V(0)| / |V(0)|")]


MD_CONFIG = """
[model]
name = "lennard_jones"
[params]
cutoff = 2.5
shift = true
[system]
lattice = "fcc"
cells = {cells}
density = 0.8442
temperature = {temperature}
seed = 0
[time]
dt = 0.005
steps = {steps}
save_every = {every}
[solver]
method = "verlet"
dtype = "{dtype}"
"""


def check_lennard_jones(cells: int, steps: int, folder: Path) -> list[Check]:
    """NVE of the shifted LJ liquid (velocity Verlet, a list) from an fcc lattice: the
    largest |E - E(t_m)| / |E(t_m)| after t_m, a tenth of the run (while the lattice
    melts, the energy of Verlet's steps jumps by about 1e-4 of E once)."""
    every = steps // 20
    text = MD_CONFIG.format(cells=cells, temperature=1.0, steps=steps, every=every, dtype="float64")
    s = sim.setup(config(text, folder, "lj_nve"))
    traj = sim.simulate(s.model, s.params, s.t, initial=s.initial, solver=s.solver, key=s.key)
    e = np.asarray(traj.observables["total_energy"])[2:]
    drift = float(np.max(np.abs(e - e[0])) / abs(e[0]))
    n = cells_n(cells)
    return [
        Check(
            f"LJ NVE {n} particles, {steps} steps",
            drift,
            1e-4,
            f"energy drift after step {2 * every}",
        )
    ]


def kolmogorov(points: int):
    model = sim.get_model("navier_stokes_2d", points=[points, points], forcing_mode=4)
    w0 = model.initial_field("random", seed=0, max_mode=6)
    return model, {"viscosity": 1e-2, "drag": 0.1, "forcing": 1.0}, w0


def spectral_final(points: int, steps: int, dtype: str, device) -> np.ndarray:
    model, params, w0 = kolmogorov(points)
    t = jnp.asarray([0.0, steps * 5e-3])
    solver = Etdrk(steps_per_save=steps, dtype=dtype)
    with jax.default_device(device):
        run = jax.jit(lambda p, w: sim.simulate(model, p, t, initial=w, solver=solver).final_state)
        return np.asarray(run(on(device, params), on(device, w0)), dtype=float)


def ode_run(device) -> np.ndarray:
    model = sim.get_model("lotka_volterra")
    t = jnp.linspace(0.0, 20.0, 201)
    solver = OdeSolver(method="tsit5", rtol=1e-8, atol=1e-8)
    with jax.default_device(device):
        run = jax.jit(lambda p: sim.simulate(model, p, t, solver=solver).observables)
        out = run(on(device, model.default_params()))
        return np.stack([np.asarray(out["prey"]), np.asarray(out["predator"])])


def check_devices(points: int, f32_points: int) -> list[Check]:
    """The same runs on the default device and on the CPU (without a GPU, one device:
    the difference is 0 by construction), and float32 against float64."""
    gpu, cpu = default_device(), cpu_device()
    same = " (one device: no GPU)" if one_device() else ""
    a = spectral_final(points, 100, "float64", gpu)
    b = a if one_device() else spectral_final(points, 100, "float64", cpu)
    spectral = float(np.max(np.abs(a - b)) / np.max(np.abs(b)))
    a = ode_run(gpu)
    b = a if one_device() else ode_run(cpu)
    ode = float(np.max(np.abs(a - b) / np.abs(b)))
    f64 = spectral_final(f32_points, 100, "float64", gpu)
    f32 = spectral_final(f32_points, 100, "float32", gpu)
    rel = float(np.linalg.norm(f32 - f64) / np.linalg.norm(f64))
    return [
        Check(
            f"navier_stokes_2d {points}^2 device against CPU{same}",
            spectral,
            1e-10,
            "max |w_dev - w_cpu| / max |w_cpu|",
        ),
        Check(
            f"Lotka-Volterra device against CPU{same}",
            ode,
            1e-10,
            "max relative difference",
        ),
        Check(
            f"navier_stokes_2d {f32_points}^2 float32 against float64",
            rel if np.all(np.isfinite(f32)) else float("nan"),
            1e-4,
            "relative L2 difference (finite)",
        ),
    ]


def run_checks(sizes: Sizes, folder: Path, plant_failure: bool) -> list[Check]:
    """Every check, printed as it ends; a group that raises is one failed check."""
    groups = [
        ("heat", lambda: check_heat(sizes.heat, wrong=1.001 if plant_failure else 1.0)),
        ("Taylor-Green", lambda: check_taylor_green(sizes.taylor_green)),
        ("Lotka-Volterra", check_lotka_volterra),
        ("LJ NVE", lambda: check_lennard_jones(sizes.lj_cells, sizes.lj_steps, folder)),
        ("devices", lambda: check_devices(sizes.agree_points, sizes.f32_points)),
    ]
    checks = []
    for name, group in groups:
        try:
            done = group()
        except Exception as e:  # (a check that cannot run has failed)
            why = f"{type(e).__name__}: {str(e)[:200]}"
            done = [Check(f"{name} ({why})", float("nan"), 0.0, "stopped with an error")]
        for c in done:
            print(c.line(), flush=True)
            checks.append(c)
    return checks


# ----------------------------------------------------------------------------- throughput


@dataclasses.dataclass
class Row:
    case: str
    unit: str
    size: str
    rate: float
    cpu_size: str
    cpu_rate: float
    compile_s: float
    cpu_compile_s: float
    note: str = ""

    def cells(self) -> list[str]:
        ratio = self.rate / self.cpu_rate if self.cpu_rate > 0 else float("nan")
        return [
            self.case,
            self.unit,
            self.size,
            f"{self.rate:.3g}",
            self.cpu_size,
            f"{self.cpu_rate:.3g}",
            f"{ratio:.3g}",
            f"{self.compile_s:.1f} / {self.cpu_compile_s:.1f}",
        ]


@dataclasses.dataclass
class Side:
    """One side's measurement: a throughput and its compile seconds."""

    rate: float
    compile_s: float
    note: str = ""


SPECTRAL_2D = """
[model]
name = "navier_stokes_2d"
forcing_mode = 4
[grid]
points = [{n}, {n}]
[params]
viscosity = 1e-3
drag = 0.1
forcing = 1.0
[initial]
kind = "random"
seed = 0
max_mode = 4
[time]
t1 = {t1}
save = 2
dt = {dt}
[solver]
method = "etdrk4"
dtype = "{dtype}"
"""
SPECTRAL_3D = """
[model]
name = "navier_stokes_3d"
[grid]
points = [{n}, {n}, {n}]
[params]
viscosity = 0.01
[initial]
kind = "taylor_green"
[time]
t1 = {t1}
save = 2
dt = {dt}
[solver]
method = "etdrk4"
dtype = "{dtype}"
"""


def spectral_side(template, dims, n, steps, dtype, dt, device, folder, reps) -> Side:
    """Point-steps/s of one ETDRK4 run of `steps` steps set up from the config."""
    text = template.format(n=n, t1=repr(steps * dt), dt=repr(dt), dtype=dtype)
    with jax.default_device(device):
        s = sim.setup(config(text, folder, f"spectral_{n}_{dtype}"))
        params, initial = on(device, (s.params, s.initial))
        run, compile_s = aot(
            lambda p, u: sim.simulate(s.model, p, s.t, initial=u, solver=s.solver).final_state,
            params,
            initial,
        )
        final = run(params, initial)
        if not bool(jnp.all(jnp.isfinite(final))):
            raise RuntimeError(f"spectral run {n} {dtype} is not finite")
        wall = seconds(run, params, initial, repeats=reps)
    return Side(n**dims * steps / wall, compile_s)


def spectral_case(name, template, dims, sizes: tuple, dt, folder, reps) -> list[Row]:
    n, steps, cpu_n, cpu_steps = sizes
    rows = []
    for dtype in ("float64", "float32"):
        dev, cpu = pair(
            lambda size, device, dtype=dtype: spectral_side(
                template, dims, *size, dtype, dt, device, folder, reps
            ),
            (n, steps),
            (cpu_n, cpu_steps),
        )
        rows.append(
            Row(
                f"{name} {dtype}",
                "point-steps/s",
                f"{n}^{dims}, {steps} steps",
                dev.rate,
                cpu_label(f"{cpu_n}^{dims}, {cpu_steps} steps", f"{n}^{dims}, {steps} steps"),
                cpu.rate,
                dev.compile_s,
                cpu.compile_s,
            )
        )
    return rows


def md_side(cells: int, steps: int, device, folder: Path) -> Side:
    """Particle-steps/s of `steps` velocity-Verlet steps (float32) of the LJ liquid, timed
    as md_bench.py does: the list and first forces before the clock, one compiled chunk."""
    text = MD_CONFIG.format(
        cells=cells, temperature=1.44, steps=steps, every=steps, dtype="float32"
    )
    with jax.default_device(device):
        s = sim.setup(config(text, folder, f"md_{cells}"))
        system = on(device, s.initial)
        params = {k: jnp.asarray(v, jnp.float32) for k, v in s.params.items()}
        run = ParticleRun(
            s.model, on(device, params), system, s.solver, times=np.asarray(s.t), every=steps
        )
        state0 = jax.block_until_ready(run.start())
        capacity = run.problem.neighbour_list.capacity
        start = time.perf_counter()
        jax.block_until_ready(run.step(state0, 1)[0])
        first = time.perf_counter() - start
        if run.problem.neighbour_list.capacity != capacity:  # grown: start on the larger list
            state0 = jax.block_until_ready(run.start())
        start = time.perf_counter()
        state, _, over = run.step(state0, 1)
        jax.block_until_ready(state.position)
        wall = time.perf_counter() - start
        if over or not bool(jnp.all(jnp.isfinite(state.position))):
            raise RuntimeError(f"MD run of {cells_n(cells)} particles overflowed or blew up")
        builds = int(state.aux.builds) - int(state0.aux.builds)
    return Side(cells_n(cells) * steps / wall, max(first - wall, 0.0), f"{builds} list builds")


def md_case(sizes: Sizes, folder: Path, left: Callable[[], float], notes: list[str]) -> list[Row]:
    """One row per size; the CPU measured once, at `sizes.md_cpu`, for every row (without
    a GPU each row's own measurement). A size the budget has no room for is skipped."""
    cpu_cells, cpu_steps = sizes.md_cpu
    cpu = None if one_device() else md_side(cpu_cells, cpu_steps, cpu_device(), folder)
    rows = []
    for i, cells in enumerate(sizes.md_cells):
        if i and left() < sizes.estimate["md"] / len(sizes.md_cells):
            notes.append(f"md skipped at {cells_n(cells):,} particles and above (budget)")
            print(notes[-1], flush=True)
            break
        dev = md_side(cells, sizes.md_steps, default_device(), folder)
        cpu_side = cpu or dev
        size = f"{cells_n(cells):,} particles, {sizes.md_steps} steps"
        rows.append(
            Row(
                f"MD LJ float32 {cells_n(cells):,}",
                "particle-steps/s",
                size,
                dev.rate,
                cpu_label(f"{cells_n(cpu_cells):,} particles, {cpu_steps} steps", size),
                cpu_side.rate,
                dev.compile_s,
                cpu_side.compile_s,
                f"{dev.note} (device), {cpu_side.note} (CPU)",
            )
        )
    return rows


def sweep_side(runs: int, device, reps: int) -> Side:
    """Runs/s of one batched solve of `runs` runs of experiments/lotka_volterra.toml (alpha
    and beta drawn uniformly from the box of lotka_volterra_sweep.toml), as a sweep chunk
    solves them."""
    with jax.default_device(device):
        s = sim.setup(sim.load_config(EXPERIMENTS / "lotka_volterra.toml"))
        solver = dataclasses.replace(s.solver, throw=False, adjoint="forward")
        rng = np.random.default_rng(0)
        swept = on(
            device, {"alpha": rng.uniform(0.3, 0.8, runs), "beta": rng.uniform(0.01, 0.05, runs)}
        )
        fixed = {k: v for k, v in s.params.items() if k not in swept}
        y0 = s.model.initial_state(s.initial, s.params)

        def batch(swept):
            start = jnp.broadcast_to(y0, (runs, y0.shape[0]))
            ys, steps, result = solve_batch(s.model.vector_field, solver, s.t, start, swept, fixed)
            return ys[:, -1, :], steps, result

        run, compile_s = aot(batch, swept)
        final, steps, result = run(swept)
        failed = int(np.sum(np.asarray(result) != 0))
        if failed or not np.all(np.isfinite(np.asarray(final))):
            raise RuntimeError(f"{failed} of {runs} Lotka-Volterra runs failed")
        wall = seconds(run, swept, repeats=reps)
    return Side(runs / wall, compile_s, f"{float(np.mean(np.asarray(steps))):.0f} steps a run")


def sweep_case(sizes: Sizes) -> list[Row]:
    runs, cpu_runs = sizes.sweep_runs
    dev, cpu = pair(lambda size, device: sweep_side(size, device, sizes.repeats), runs, cpu_runs)
    return [
        Row(
            "sweep Lotka-Volterra (batched tsit5)",
            "runs/s",
            f"{runs:,} runs",
            dev.rate,
            cpu_label(f"{cpu_runs:,} runs", f"{runs:,} runs"),
            cpu.rate,
            dev.compile_s,
            cpu.compile_s,
            dev.note,
        )
    ]


def train_side(steps: int, device) -> Side:
    """Training steps/s of `inference.Trainer` on the spiral (neural_ode_bench.py's task)."""
    import optax

    from inference import Trainer, simulate_states
    from physics.ode import NeuralOde

    a = np.array([[-0.1, 2.0], [-2.0, -0.1]])
    with jax.default_device(device):
        solver = OdeSolver(
            method="dopri5",
            rtol=jnp.asarray(1e-7),
            atol=jnp.asarray(1e-9),
            adjoint="recursive_checkpoint",
        )
        truth = NeuralOde(features="cubic", depth=0, initial=(2.0, 0.0))
        time_ = jnp.linspace(0.0, 25.0, 1000)
        weights = {"net": ({"weight": jnp.asarray(a.T), "bias": jnp.zeros(2)},)}
        values = simulate_states(truth, weights, time_, jnp.array([[2.0, 0.0]]), solver)
        model = NeuralOde(features="cubic", width=50, depth=1)
        trainer = Trainer(model, optax.adam(1e-2), solver=solver, window=10, batch_size=20)
        state = trainer.init(model.default_params(), jax.random.key(0))
        start = time.perf_counter()
        state, loss = trainer.step(state, time_, values)
        jax.block_until_ready(loss)
        first = time.perf_counter() - start
        start = time.perf_counter()
        for _ in range(steps):
            state, loss = trainer.step(state, time_, values)
        jax.block_until_ready(loss)
        per_step = (time.perf_counter() - start) / steps
        if not np.isfinite(float(loss)):
            raise RuntimeError("neural ODE training loss is not finite")
    return Side(1.0 / per_step, max(first - per_step, 0.0))


def train_case(sizes: Sizes) -> list[Row]:
    dev, cpu = pair(train_side, sizes.train_steps, sizes.train_steps)
    size = f"{sizes.train_steps} steps, 20 windows"
    return [
        Row(
            "neural ODE training (spiral, dopri5)",
            "steps/s",
            size,
            dev.rate,
            cpu_label(size, size),
            cpu.rate,
            dev.compile_s,
            cpu.compile_s,
        )
    ]


def nuts_measure(chains: int, warmup: int, samples: int) -> dict:
    """`inference.infer` of experiments/lynx_hare.toml, twice with the same settings: the
    first call compiles (into this process's compilation cache), the second loads its
    programs and is the one timed (tracing, the start search and the predictive included)."""
    from inference import infer

    c = sim.load_config(EXPERIMENTS / "lynx_hare.toml")
    times = []
    for _ in range(2):
        start = time.perf_counter()
        posterior = infer(c, chains=chains, warmup=warmup, samples=samples, seed=0)
        times.append(time.perf_counter() - start)
    ess = min(float(v["ess_bulk"]) for v in posterior.summary.values())
    return {
        "steps_per_s": chains * (warmup + samples) / times[1],
        "compile_s": max(times[0] - times[1], 0.0),
        "ess_per_s": ess / times[1],
        "divergences": posterior.divergences,
        "device": f"{jax.devices()[0].device_kind} ({jax.default_backend()})",
    }


def nuts_child(cpu: bool, chains: int, warmup: int, samples: int) -> dict:
    """`nuts_measure` in a process of its own (`inference.infer` lays its chains over the
    process's default devices): seeing only the CPU (`cpu`), or the default devices
    (GPU memory allocated as needed, beside this process's)."""
    env = dict(os.environ)
    if cpu:
        env["JAX_PLATFORMS"] = "cpu"
    else:
        env["XLA_PYTHON_CLIENT_PREALLOCATE"] = "false"
    spec = json.dumps({"chains": chains, "warmup": warmup, "samples": samples})
    done = subprocess.run(
        [sys.executable, __file__, "--nuts-worker", spec],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the NUTS process failed: {done.stderr.strip()[-2000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def nuts_case(sizes: Sizes) -> list[Row]:
    chains, warmup, samples = sizes.nuts
    dev = nuts_child(one_device(), chains, warmup, samples)
    cpu = dev if one_device() else nuts_child(True, chains, warmup, samples)
    size = f"{chains} chains x {warmup}+{samples}"
    return [
        Row(
            "NUTS lynx-hare (inference.infer)",
            "NUTS steps/s",
            size,
            dev["steps_per_s"],
            cpu_label(size, size),
            cpu["steps_per_s"],
            dev["compile_s"],
            cpu["compile_s"],
            f"min bulk ESS/s {dev['ess_per_s']:.3g} (device), {cpu['ess_per_s']:.3g} (CPU); "
            f"divergences {dev['divergences']} / {cpu['divergences']}; on {dev['device']}",
        )
    ]


# ----------------------------------------------------------------------------- report


HEADER = [
    "case",
    "unit",
    "device size",
    "device rate",
    "CPU size",
    "CPU rate",
    "device / CPU",
    "compile s (device / CPU)",
]


def markdown(header: list[str], rows: list[list[str]]) -> list[str]:
    """A Markdown table (a `|` inside a cell escaped)."""
    line = lambda cells: "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"
    return [line(header), "|" + "---|" * len(header)] + [line(r) for r in rows]


def report(meta: list[str], checks: list[Check], rows: list[Row], notes: list[str]) -> str:
    out = ["# GPU check", ""] + [f"- {m}" for m in meta] + [""]
    if checks:
        out += ["## Correctness (default device)", ""]
        out += markdown(
            ["check", "measure", "value", "bound", "result"],
            [
                [c.name, c.what, f"{c.value:.3g}", f"{c.bound:.0e}", "PASS" if c.passed else "FAIL"]
                for c in checks
            ],
        )
        out.append("")
    if rows:
        out += ["## Throughput (compilation excluded)", ""]
        out += markdown(HEADER, [r.cells() for r in rows])
        out.append("")
        out += [f"- {r.case}: {r.note}" for r in rows if r.note]
    out += [f"- {n}" for n in notes]
    return "\n".join(out) + "\n"


def machine() -> list[str]:
    dev = default_device()
    cpu_name = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu_name = next(
                (line.split(":", 1)[1].strip() for line in f if line.startswith("model name")),
                cpu_name,
            )
    except OSError:
        pass
    import jaxlib

    return [
        f"device: {dev.device_kind} ({dev.platform}, {jax.device_count()} device(s))",
        f"JAX {jax.__version__}, jaxlib {jaxlib.__version__}, Python {platform.python_version()}",
        f"CPU: {cpu_name}, {os.cpu_count()} cores",
        f"date: {time.strftime('%Y-%m-%d %H:%M %Z')}",
    ]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes (a smoke run)")
    parser.add_argument("--only", help=f"comma-separated cases: {', '.join(CASES)}")
    parser.add_argument("--budget", type=float, default=480.0, help="seconds (default 480)")
    parser.add_argument("--out", type=Path, default=Path("gpu_check.md"))
    parser.add_argument("--plant-failure", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--nuts-worker", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.nuts_worker:
        with tempfile.TemporaryDirectory(prefix="gpu_check_cache_") as cache:
            sim.configure_jax(cache=cache)  # (the second call loads what the first compiled)
            print(json.dumps(nuts_measure(**json.loads(args.nuts_worker))))
        return 0
    wanted = CASES if args.only is None else tuple(c.strip() for c in args.only.split(","))
    unknown = [c for c in wanted if c not in CASES]
    if unknown:
        parser.error(f"--only: unknown case {unknown[0]!r} (cases: {', '.join(CASES)})")
    sim.configure_jax(cache=False)  # float64, XLA's options; no disk cache (compiles timed)
    began = time.perf_counter()
    gpu = default_device().platform == "gpu"
    quick = args.quick or not gpu
    if not gpu and not args.quick:
        print(f"no GPU found (JAX sees {default_device().platform} only): running the quick sizes")
    sizes = QUICK if quick else FULL
    meta = machine() + [f"sizes: {'quick' if quick else 'full'}; budget {args.budget:.0f} s"]
    print("\n".join(meta), flush=True)
    left = lambda: args.budget - (time.perf_counter() - began)
    checks: list[Check] = []
    rows: list[Row] = []
    notes: list[str] = []
    took: list[str] = []
    failed = False
    with tempfile.TemporaryDirectory(prefix="gpu_check_") as tmp:
        folder = Path(tmp)
        runners = {
            "checks": lambda: checks.extend(run_checks(sizes, folder, args.plant_failure)),
            "spectral2d": lambda: rows.extend(
                spectral_case("spectral 2-D NS", SPECTRAL_2D, 2, sizes.s2, 1e-3, folder, 1)
            ),
            "spectral3d": lambda: rows.extend(
                spectral_case("spectral 3-D NS", SPECTRAL_3D, 3, sizes.s3, 5e-3, folder, 1)
            ),
            "md": lambda: rows.extend(md_case(sizes, folder, left, notes)),
            "sweep": lambda: rows.extend(sweep_case(sizes)),
            "neural_ode": lambda: rows.extend(train_case(sizes)),
            "nuts": lambda: rows.extend(nuts_case(sizes)),
        }
        for case in [c for c in CASES if c in wanted]:
            if left() < sizes.estimate[case]:
                note = (
                    f"{case} skipped: about {sizes.estimate[case]:.0f} s needed, "
                    f"{max(left(), 0):.0f} s of the budget left"
                )
                print(note, flush=True)
                notes.append(note)
                continue
            start = time.perf_counter()
            try:
                runners[case]()
            except Exception as e:  # (reported, and the exit code says so)
                failed = True
                note = f"{case} stopped with an error: {type(e).__name__}: {str(e)[:300]}"
                print(note, flush=True)
                notes.append(note)
                continue
            took.append(f"{case} {time.perf_counter() - start:.0f} s")
            print(took[-1], flush=True)
    notes.append(f"wall time {time.perf_counter() - began:.0f} s ({', '.join(took)})")
    text = report(meta, checks, rows, notes)
    print("\n" + text, end="")
    args.out.write_text(text)
    failed = failed or any(not c.passed for c in checks)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
