"""Sweep benchmark: 10,000 Lotka-Volterra runs with `sim sweep`'s code path against the
ways a scipy or diffrax user would run them, then chunk sizes, scaling from one to two
host devices, and peak memory with chunks of 256 against one chunk of 10,000.

The runs: a 100 x 100 grid over alpha in [0.3, 0.8] and beta in [0.01, 0.05], t in
[0, 20] with 201 save points, all at rtol 1e-6, atol 1e-8. The sides, timed in one
process in interleaved rounds (each round runs every side once, so a change in machine
load hits all of them alike):
  - simjax: tsit5, chunks of 256, the full trajectories written to an HDF5 sweep file
    (what `sim sweep` does: `sim._sweep.execute`, nothing read back);
  - raw diffrax: `jax.jit(jax.vmap(diffrax.diffeqsolve ...))` over all runs at once,
    Tsit5 with the same tolerances, save times and step budget, compiled before timing,
    the trajectories copied to host memory (no file);
  - scipy, a Python loop over `solve_ivp` (RK45, LSODA) and over `odeint` (Fortran
    LSODA), each alone and as a two-process `multiprocessing` pool (this machine's two
    cores; the pool is started and warmed up before timing). The scipy sides are
    timed on an evenly spaced subset of the runs (`--subset`) and scaled to all runs.
Reported for each side: the median over the rounds with the min-max spread; ratios are
of the medians. simjax's first call (trace + compile + run) and raw diffrax's compile
are reported beside (the persistent compilation cache is off in this script).

Chunk sizes are timed the same way (interleaved rounds, median). Device scaling and
memory are measured in fresh processes (XLA's host device count is fixed at start-up;
peak RSS is per process), median of the repeats there.

    python experiments/benchmarks/sweep_bench.py            # everything (several minutes)
    python experiments/benchmarks/sweep_bench.py --quick    # 1,024 runs, fewer repeats
    python experiments/benchmarks/sweep_bench.py --rounds 9 --subset 400
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

os.environ.setdefault("SIMJAX_CACHE_DIR", "")  # first calls compile (no persistent cache)

CONFIG = """
[model]
name = "lotka_volterra"
[initial]
prey = 30.0
predator = 4.0
[time]
t0 = 0.0
t1 = 20.0
save = 201
[solver]
method = "tsit5"
rtol = 1e-6
atol = 1e-8
[sweep]
mode = "grid"
chunk = {chunk}
save = "full"
[sweep.params]
alpha = {{ linspace = [0.3, 0.8, {side}] }}
beta = {{ linspace = [0.01, 0.05, {side}] }}
"""
RTOL, ATOL = 1e-6, 1e-8
GAMMA, DELTA = 0.80, 0.024  # the model's defaults (checked in main)
Y0 = (30.0, 4.0)
T_SAVE = np.linspace(0.0, 20.0, 201)
MAX_STEPS = 4096  # OdeSolver's default step budget


def write_config(folder: Path, side: int, chunk: int) -> Path:
    path = folder / f"lv_{side}_{chunk}.toml"
    path.write_text(CONFIG.format(side=side, chunk=chunk))
    return path


def status_mb(field: str) -> float:
    """A memory figure of this process from /proc/self/status (VmRSS, VmHWM), in MiB."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise KeyError(field)


def reset_peak() -> None:
    """Start a new peak-RSS (VmHWM) measurement (Linux: clear_refs 5)."""
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")


def faster(ratio: float) -> str:
    """'2.0x faster' for a ratio of 2 (time of the other side / simjax's), '2.0x slower' for 0.5."""
    return f"{ratio:.1f}x faster" if ratio >= 1 else f"{1 / ratio:.1f}x slower"


def spread(times) -> str:
    """median (min-max) in seconds."""
    t = np.asarray(times)
    return f"{np.median(t):.3f} s ({t.min():.3f}-{t.max():.3f})"


class SimjaxSweep:
    """What `sim sweep CONFIG -o OUT.h5` runs, callable again and again (the file is
    removed before each call). The first call (trace + compile + run) is timed."""

    def __init__(self, config_path: Path, devices: int | None = None):
        import sim
        from sim._sweep import execute

        sim.configure_jax()

        self.execute = execute
        self.config = sim.load_config(config_path)
        self.out = config_path.with_suffix(".h5")
        self.devices = devices
        start = time.perf_counter()
        self.summary = self()
        self.first = time.perf_counter() - start

    def __call__(self):
        self.out.unlink(missing_ok=True)
        summary, _ = self.execute(self.config, self.out, devices=self.devices)
        return summary


def time_sweep(config_path: Path, repeats: int, devices: int | None = None) -> dict:
    """First call and `repeats` further calls (their median, min, max), with the peak RSS
    of the process over those calls (compiled code already resident)."""
    sweep = SimjaxSweep(config_path, devices)
    first_peak = status_mb("VmHWM")
    base = status_mb("VmRSS")
    reset_peak()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        summary = sweep()
        times.append(time.perf_counter() - start)
    times = times or [sweep.first]
    return {
        "first": sweep.first,
        "median": float(np.median(times)),
        "min": min(times),
        "max": max(times),
        "runs": summary.runs if repeats else None,
        "failed": summary.failed if repeats else None,
        "base_rss_mb": base,
        "peak_rss_mb": status_mb("VmHWM"),
        "first_peak_rss_mb": first_peak,
        "path": str(sweep.out),
    }


def child(args) -> None:
    """Measure one configuration in this (fresh) process; print JSON."""
    print(json.dumps(time_sweep(Path(args.config), args.repeats, args.devices)))


def run_child(config: Path, repeats: int, devices: int | None, host_devices: int) -> dict:
    env = {**os.environ, "XLA_FLAGS": f"--xla_force_host_platform_device_count={host_devices}"}
    cmd = [sys.executable, __file__, "--child", "--config", str(config), "--repeats", str(repeats)]
    if devices is not None:
        cmd += ["--devices", str(devices)]
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


# ----------------------------------------------------------------------------- scipy


def scipy_runs(job: tuple[str, np.ndarray, np.ndarray]) -> np.ndarray:
    """Prey trajectories [runs, 201] of a Python loop over scipy solves (`method`: a
    solve_ivp method or "odeint"). Module level, so that a pool's workers can run it."""
    from scipy.integrate import odeint, solve_ivp

    method, alphas, betas = job
    out = []
    for alpha, beta in zip(alphas, betas, strict=False):
        alpha, beta = float(alpha), float(beta)
        if method == "odeint":

            def g(y, t, alpha=alpha, beta=beta):
                x, z = y
                return [alpha * x - beta * x * z, DELTA * x * z - GAMMA * z]

            out.append(odeint(g, Y0, T_SAVE, rtol=RTOL, atol=ATOL)[:, 0])
        else:

            def f(t, y, alpha=alpha, beta=beta):
                x, z = y
                return [alpha * x - beta * x * z, DELTA * x * z - GAMMA * z]

            sol = solve_ivp(f, (0.0, 20.0), Y0, method=method, t_eval=T_SAVE, rtol=RTOL, atol=ATOL)
            out.append(sol.y[0])
    return np.asarray(out)


def scipy_runs_cpu(job: tuple[str, np.ndarray, np.ndarray]) -> tuple[np.ndarray, float]:
    """`scipy_runs` and the CPU seconds its process spent on them."""
    start = time.process_time()
    out = scipy_runs(job)
    return out, time.process_time() - start


def scipy_pool_runs(
    pool, method: str, alphas: np.ndarray, betas: np.ndarray, pieces: int = 4
) -> tuple[np.ndarray, float]:
    """The same loop split into `pieces` contiguous blocks mapped over the pool; the
    trajectories and the CPU seconds the workers spent."""
    blocks = np.array_split(np.arange(len(alphas)), pieces)
    parts = pool.map(scipy_runs_cpu, [(method, alphas[b], betas[b]) for b in blocks])
    return np.concatenate([p for p, _ in parts]), sum(c for _, c in parts)


# ----------------------------------------------------------------------------- raw diffrax


def raw_diffrax(alphas: np.ndarray, betas: np.ndarray):
    """jax.jit(jax.vmap(diffeqsolve)) over the runs, compiled; returns (call, compile s).
    A call returns the prey trajectories [runs, 201] in host memory."""
    import diffrax
    import jax
    import jax.numpy as jnp

    def lv(t, y, args):
        alpha, beta = args
        x, z = y[0], y[1]
        return jnp.stack([alpha * x - beta * x * z, DELTA * x * z - GAMMA * z])

    term, solver = diffrax.ODETerm(lv), diffrax.Tsit5()
    controller = diffrax.PIDController(rtol=RTOL, atol=ATOL)
    ts = jnp.asarray(T_SAVE)
    saveat = diffrax.SaveAt(ts=ts)
    y0 = jnp.asarray(Y0)

    def one(alpha, beta):
        sol = diffrax.diffeqsolve(
            term,
            solver,
            ts[0],
            ts[-1],
            None,
            y0,
            (alpha, beta),
            saveat=saveat,
            stepsize_controller=controller,
            max_steps=MAX_STEPS,
        )
        return sol.ys

    batched = jax.jit(jax.vmap(one))
    a, b = jnp.asarray(alphas), jnp.asarray(betas)
    start = time.perf_counter()
    compiled = batched.lower(a, b).compile()
    compile_s = time.perf_counter() - start

    def call():
        return np.asarray(compiled(a, b))[:, :, 0]

    return call, compile_s


def interleave(sides: dict, rounds: int, cpu: dict | None = None) -> dict[str, list[float]]:
    """Seconds of each side in each round; the sides take turns within a round. With
    `cpu` (name -> list), the CPU seconds this process spent on each call (all its
    threads) are appended there too."""
    times = {name: [] for name in sides}
    for _ in range(rounds):
        for name, fn in sides.items():
            start, start_cpu = time.perf_counter(), time.process_time()
            fn()
            times[name].append(time.perf_counter() - start)
            if cpu is not None:
                cpu.setdefault(name, []).append(time.process_time() - start_cpu)
    return times


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--rounds", type=int, default=None, help="interleaved rounds (default 7; --quick 3)"
    )
    parser.add_argument(
        "--subset",
        type=int,
        default=None,
        help="runs the scipy sides time (default 200; --quick 50)",
    )
    parser.add_argument(
        "--no-extras",
        action="store_true",
        help="only the comparison (no chunk sizes, devices, memory)",
    )
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--config", help=argparse.SUPPRESS)
    parser.add_argument("--repeats", type=int, default=3, help=argparse.SUPPRESS)
    parser.add_argument("--devices", type=int, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return

    side = 32 if args.quick else 100
    runs = side * side
    rounds = args.rounds or (3 if args.quick else 7)
    subset = args.subset or (50 if args.quick else 200)
    repeats = 2 if args.quick else 5
    folder = Path(tempfile.mkdtemp(prefix="sweep_bench_"))
    load_before = os.getloadavg()
    print(
        f"{runs} Lotka-Volterra runs, t in [0, 20], 201 saves, rtol {RTOL}, atol {ATOL}; "
        f"{os.cpu_count()} cores, load average {load_before[0]:.2f}",
        flush=True,
    )

    # the pool first: its workers are started and import scipy before anything is timed
    pool = multiprocessing.get_context("spawn").Pool(2)
    pool.map(scipy_runs_cpu, [("RK45", np.array([0.5]), np.array([0.03]))] * 2)

    import sim

    sim.configure_jax()
    defaults = sim.get_model("lotka_volterra").default_params()
    assert (float(defaults["gamma"]), float(defaults["delta"])) == (GAMMA, DELTA)

    config = write_config(folder, side, 256)
    sweep = SimjaxSweep(config)
    result = sim.SweepResult.read(sweep.out)
    alphas, betas = np.asarray(result.params["alpha"]), np.asarray(result.params["beta"])
    prey = np.asarray(result.observables["prey"])
    diffrax_call, diffrax_compile = raw_diffrax(alphas, betas)
    diffrax_prey = diffrax_call()

    pick = np.linspace(0, runs - 1, subset).astype(int)
    a_sub, b_sub = alphas[pick], betas[pick]
    methods = ("RK45", "LSODA", "odeint")
    sides = {"simjax": sweep, "diffrax": diffrax_call}
    worker_cpu = {}
    for m in methods:
        sides[m] = lambda m=m: scipy_runs((m, a_sub, b_sub))
        sides[m + " pool"] = lambda m=m: worker_cpu.setdefault(m + " pool", []).append(
            scipy_pool_runs(pool, m, a_sub, b_sub)[1]
        )
    cpu = {}
    times = interleave(sides, rounds, cpu)
    # how many cores each side got: CPU seconds (this process's threads, plus the pool's
    # workers) over wall seconds; on a machine shared with other work, less than 2
    for name, extra in worker_cpu.items():
        cpu[name] = [a + b for a, b in zip(cpu[name], extra, strict=False)]
    cores = {
        name: float(np.median(np.asarray(cpu[name]) / np.asarray(times[name]))) for name in sides
    }
    for m in methods:  # scaled to all runs
        for name in (m, m + " pool"):
            times[name] = [t * runs / subset for t in times[name]]
    med = {name: float(np.median(t)) for name, t in times.items()}
    load_after = os.getloadavg()

    def rel(a, b):
        return float(np.max(np.abs(a - b) / np.abs(b)))

    labels = {
        "simjax": "simjax sweep (1 device, chunk 256, file written)",
        "diffrax": "raw diffrax jit(vmap(diffeqsolve)), in memory",
        "RK45": "scipy solve_ivp RK45, loop",
        "RK45 pool": "scipy solve_ivp RK45, 2-process pool",
        "LSODA": "scipy solve_ivp LSODA, loop",
        "LSODA pool": "scipy solve_ivp LSODA, 2-process pool",
        "odeint": "scipy odeint (Fortran LSODA), loop",
        "odeint pool": "scipy odeint (Fortran LSODA), 2-process pool",
    }
    print(
        f"{rounds} interleaved rounds; scipy timed on {subset} evenly spaced runs and scaled to "
        f"{runs}; "
        f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f}"
    )
    print(f"{'':50} {'median (min-max) for ' + str(runs) + ' runs':>36} {'per run':>10}  simjax is")
    for name, label in labels.items():
        ratio = "" if name == "simjax" else faster(med[name] / med["simjax"])
        print(f"{label:50} {spread(times[name]):>36} {med[name] / runs * 1e6:8.1f} us  {ratio}")
    print(
        f"simjax first call (trace + compile + run): {sweep.first:.2f} s; {sweep.summary.failed} "
        "failed; "
        f"raw diffrax compile: {diffrax_compile:.2f} s"
    )
    print(
        "simjax time to results for the whole sweep from a cold start (first call): "
        f"{sweep.first:.2f} s, "
        + ", ".join(
            f"{faster(med[n] / sweep.first)} than {n}"
            for n in ("RK45 pool", "LSODA pool", "odeint pool")
        )
    )
    print(
        "pool speed-up over the loop: "
        + ", ".join(f"{m} {med[m] / med[m + ' pool']:.2f}x" for m in methods)
    )
    print(
        "cores each side got (CPU time of its threads and workers / wall time, median): "
        + ", ".join(f"{name} {c:.2f}" for name, c in cores.items())
    )
    checks = [f"raw diffrax {rel(diffrax_prey, prey):.1e}"]
    for m in methods:
        checks.append(f"{m} {rel(scipy_runs((m, a_sub, b_sub)), prey[pick]):.1e}")
        checks.append(f"{m} pool {rel(scipy_pool_runs(pool, m, a_sub, b_sub)[0], prey[pick]):.1e}")
    print(
        "max relative difference of the prey trajectories from simjax's: " + ", ".join(checks),
        flush=True,
    )
    pool.close()
    pool.join()
    if args.no_extras:
        return

    # chunk size: how many runs one vmapped batch holds (one device), interleaved rounds
    chunk_sweeps = {
        c: sweep if c == 256 else SimjaxSweep(write_config(folder, side, c))
        for c in (64, 128, 256, 512, 1024)
    }
    chunk_times = interleave(chunk_sweeps, rounds)
    print(
        "chunk size (1 device), median (min-max) for the sweep: "
        + "; ".join(f"{c}: {spread(t)}" for c, t in chunk_times.items()),
        flush=True,
    )

    # 1 vs 2 host devices, each in a fresh process with two host devices available
    for chunk in (256, 1024):
        path = write_config(folder, side, chunk)
        scaling = {d: run_child(path, repeats, d, host_devices=2) for d in (1, 2)}
        one, two = scaling[1]["median"], scaling[2]["median"]
        print(
            f"chunk {chunk}, devices (median of {repeats}): 1 -> {one:.3f} s "
            f"({scaling[1]['min']:.3f}-{scaling[1]['max']:.3f}), "
            f"2 -> {two:.3f} s ({scaling[2]['min']:.3f}-{scaling[2]['max']:.3f}): speed-up "
            f"{one / two:.2f}x",
            flush=True,
        )

    # peak memory: chunks of 256 vs one chunk of every run, fresh processes, one device
    one_chunk = write_config(folder, side, runs)
    memory = {
        chunk: run_child(path, 1, None, host_devices=1)
        for chunk, path in ((256, config), (runs, one_chunk))
    }
    for chunk, m in memory.items():
        print(
            f"chunk {chunk}: peak RSS while sweeping {m['peak_rss_mb']:.0f} MiB, "
            f"{m['peak_rss_mb'] - m['base_rss_mb']:.0f} MiB "
            f"over the {m['base_rss_mb']:.0f} MiB before (compiled); peak including compilation "
            f"{m['first_peak_rss_mb']:.0f} MiB; {m['median']:.3f} s",
            flush=True,
        )
    print(f"load average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
