"""Sweep benchmark: 10,000 Lotka-Volterra runs with `sim.sweep` against a Python loop over
scipy's `solve_ivp`, scaling from one to two host devices, and peak memory with chunks of
256 against one chunk of 10,000.

The runs: a 100 x 100 grid over alpha in [0.3, 0.8] and beta in [0.01, 0.05], t in
[0, 20] with 201 save points, tsit5 (simjax) and RK45 / LSODA (scipy), both at rtol 1e-6,
atol 1e-8. The scipy loop is timed on an evenly spaced subset of the runs and scaled to
10,000. simjax writes the full trajectories to an HDF5 sweep file, as `sim sweep` does.
Device scaling and memory are measured in fresh processes (XLA's host device count is
fixed at start-up; peak RSS is per process).

    python experiments/benchmarks/sweep_bench.py            # everything (about five minutes)
    python experiments/benchmarks/sweep_bench.py --quick    # 1,024 runs, fewer repeats
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

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


def time_sweep(config_path: Path, repeats: int, devices: int | None = None) -> dict:
    """First call (trace + compile + run) and the best of `repeats` further calls, with
    the peak RSS of the process over those calls (compiled code already resident). Runs
    what `sim sweep` runs: results go to the file, nothing is read back."""
    import sim
    from sim._sweep import execute

    config = sim.load_config(config_path)
    out = config_path.with_suffix(".h5")
    start = time.perf_counter()
    execute(config, out, devices=devices)
    first = time.perf_counter() - start
    first_peak = status_mb("VmHWM")
    base = status_mb("VmRSS")
    reset_peak()
    times = []
    for _ in range(repeats):
        out.unlink()
        start = time.perf_counter()
        summary, _ = execute(config, out, devices=devices)
        times.append(time.perf_counter() - start)
    return {
        "first": first,
        "best": min(times) if times else first,
        "runs": summary.runs if times else None,
        "failed": summary.failed if times else None,
        "base_rss_mb": base,
        "peak_rss_mb": status_mb("VmHWM"),
        "first_peak_rss_mb": first_peak,
        "path": str(out),
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


def scipy_loop(alphas: np.ndarray, betas: np.ndarray, method: str) -> tuple[float, np.ndarray]:
    """Seconds per run of a Python loop over solve_ivp, and the prey trajectories."""
    from scipy.integrate import solve_ivp

    gamma, delta = 0.80, 0.024
    t_eval = np.linspace(0.0, 20.0, 201)
    out = []
    start = time.perf_counter()
    for alpha, beta in zip(alphas, betas):

        def f(t, y, alpha=alpha, beta=beta):
            x, z = y
            return [alpha * x - beta * x * z, delta * x * z - gamma * z]

        sol = solve_ivp(f, (0.0, 20.0), [30.0, 4.0], method=method, t_eval=t_eval, rtol=RTOL, atol=ATOL)
        out.append(sol.y[0])
    return (time.perf_counter() - start) / len(alphas), np.asarray(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
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
    repeats = 2 if args.quick else 3
    subset = 50 if args.quick else 200
    folder = Path(tempfile.mkdtemp(prefix="sweep_bench_"))
    print(f"{runs} Lotka-Volterra runs, t in [0, 20], 201 saves, rtol {RTOL}, atol {ATOL}", flush=True)

    # simjax in this process: one device, chunks of 256
    import sim

    config = write_config(folder, side, 256)
    timing = time_sweep(config, repeats)
    result = sim.SweepResult.read(timing["path"])
    print(f"simjax sweep (1 device, chunk 256): first call {timing['first']:.2f} s (trace + compile + run), "
          f"then best {timing['best']:.3f} s = {timing['best'] / runs * 1e6:.1f} us/run; {timing['failed']} failed", flush=True)

    # scipy on an evenly spaced subset, scaled
    pick = np.linspace(0, runs - 1, subset).astype(int)
    alphas, betas = result.params["alpha"][pick], result.params["beta"][pick]
    reference = result.observables["prey"][pick]
    for method in ("RK45", "LSODA"):
        per_run = min(scipy_loop(alphas, betas, method)[0] for _ in range(2))
        _, prey = scipy_loop(alphas, betas, method)
        error = np.max(np.abs(prey - reference) / np.abs(reference))
        total = per_run * runs
        print(f"scipy solve_ivp {method}: {per_run * 1e6:.0f} us/run on {subset} runs -> {total:.1f} s for {runs}; "
              f"simjax {total / timing['best']:.0f}x faster (steady state), {total / timing['first']:.1f}x "
              f"including compilation; max relative difference {error:.1e}", flush=True)

    # chunk size: how many runs one vmapped batch holds (one device)
    for chunk in (64, 128, 512, 1024):
        t = time_sweep(write_config(folder, side, chunk), repeats)
        print(f"chunk {chunk}: best {t['best']:.3f} s = {t['best'] / runs * 1e6:.1f} us/run", flush=True)

    # 1 vs 2 host devices, each in a fresh process with two host devices available
    for chunk in (256, 1024):
        path = write_config(folder, side, chunk)
        scaling = {d: run_child(path, repeats, d, host_devices=2) for d in (1, 2)}
        one, two = scaling[1]["best"], scaling[2]["best"]
        print(f"chunk {chunk}, devices: 1 -> {one:.3f} s, 2 -> {two:.3f} s: speed-up {one / two:.2f}x", flush=True)

    # peak memory: chunks of 256 vs one chunk of every run, fresh processes, one device
    one_chunk = write_config(folder, side, runs)
    memory = {chunk: run_child(path, 1, None, host_devices=1) for chunk, path in ((256, config), (runs, one_chunk))}
    for chunk, m in memory.items():
        print(f"chunk {chunk}: peak RSS while sweeping {m['peak_rss_mb']:.0f} MiB, {m['peak_rss_mb'] - m['base_rss_mb']:.0f} MiB "
              f"over the {m['base_rss_mb']:.0f} MiB before (compiled); peak including compilation "
              f"{m['first_peak_rss_mb']:.0f} MiB; best {m['best']:.3f} s", flush=True)


if __name__ == "__main__":
    main()
