"""One program over several processes (`--distributed`) against one process of as many
devices, on this machine's loopback interface: the same Lotka-Volterra sweep and the same
split Navier-Stokes run, `sim` commands timed from start to exit, rounds interleaved.

Simulated CPU devices share the machine's cores, so two processes of two devices cannot
beat one process of four here: what the table shows is what the processes cost (their
starts, joining, gloo's copies between them, the lead writing every block) against the
same work in one process, and that the files agree.

    python experiments/benchmarks/processes_bench.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import h5py
import numpy as np

SIM = str(Path(sys.executable).parent / "sim")

SWEEP = """
[model]
name = "lotka_volterra"
[params]
gamma = 0.80
delta = 0.024
[initial]
prey = 30.0
predator = 4.0
[time]
t1 = 2000.0
save = 201
[solver]
rtol = 1e-6
atol = 1e-8
max_steps = 10000000
[sweep]
mode = "grid"
chunk = 256
save = "full"
[sweep.params]
alpha = { linspace = [0.3, 0.8, 32] }
beta = { logspace = [-2.0, -1.3, 32] }
"""

FLOW = """
[model]
name = "navier_stokes_2d"
forcing_mode = 2
[grid]
points = [256, 256]
[params]
viscosity = 0.001
forcing = 0.5
[time]
t1 = 2.0
save = 11
dt = 0.005
"""


def _env(devices: int) -> dict[str, str]:
    env = {**os.environ, "XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}"}
    env.pop("NPROC", None)
    return env


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def one_process(args: list[str], cwd: Path) -> float:
    began = time.perf_counter()
    subprocess.run(
        [SIM, *args, "--devices", "4", "--quiet"], cwd=cwd, env=_env(4), check=True, timeout=900
    )
    return time.perf_counter() - began


def two_processes(args: list[str], cwd: Path) -> float:
    port = _port()
    began = time.perf_counter()
    started = [
        subprocess.Popen(
            [SIM, *args, "--distributed", "--coordinator", f"127.0.0.1:{port}"]
            + ["--processes", "2", "--process-id", str(i), "--quiet"],
            cwd=cwd,
            env=_env(2),
        )
        for i in (1, 0)
    ]
    for p in started:
        if p.wait(timeout=900):
            raise SystemExit(f"a process of the distributed run failed ({p.returncode})")
    return time.perf_counter() - began


def largest_difference(a: Path, b: Path) -> float:
    out = 0.0
    with h5py.File(a, "r") as f, h5py.File(b, "r") as g:
        names = []
        f.visititems(lambda n, o: names.append(n) if isinstance(o, h5py.Dataset) else None)
        for name in names:
            x, y = f[name][()], g[name][()]
            if np.asarray(x).dtype.kind == "f":
                out = max(out, float(np.nanmax(np.abs(x - y))) if np.size(x) else 0.0)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    rounds = parser.parse_args().rounds
    with tempfile.TemporaryDirectory() as folder:
        cwd = Path(folder)
        (cwd / "sweep.toml").write_text(SWEEP)
        (cwd / "flow.toml").write_text(FLOW)
        one_process(["sweep", "sweep.toml", "-o", "warm.h5"], cwd)  # (the compilation cache)
        two_processes(["sweep", "sweep.toml", "-o", "warm2.h5"], cwd)
        print("| work | round | 1 process x 4 devices, s | 2 processes x 2 devices, s | ratio |")
        print("| --- | --- | --- | --- | --- |")
        for work, config, command in (
            ("1,024 LV runs, sweep", "sweep.toml", "sweep"),
            ("Navier-Stokes 256^2, 400 steps", "flow.toml", "run"),
        ):
            for r in range(rounds):
                for name in ("one.h5", "two.h5"):
                    (cwd / name).unlink(missing_ok=True)
                one = one_process([command, config, "-o", "one.h5"], cwd)
                two = two_processes([command, config, "-o", "two.h5"], cwd)
                print(f"| {work} | {r + 1} | {one:.2f} | {two:.2f} | {two / one:.2f} |", flush=True)
            difference = largest_difference(cwd / "one.h5", cwd / "two.h5")
            print(f"| {work}: largest difference between the files | | | | {difference:.1e} |")


if __name__ == "__main__":
    main()
