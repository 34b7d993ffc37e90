"""Cold start: how long whole `sim` processes take, against importing JAX and diffrax.

Each command runs as a fresh process; the rounds are interleaved (each round runs every
command once, in the same order), so a change in machine load hits all of them alike.
Reported per command: wall time and CPU time (user + system, of the process and its
children, from `wait4`), minimum and median over the rounds.

The commands:
  - `python -c "import jax, diffrax"`: the floor, what any JAX + diffrax program pays;
  - `sim run experiments/lotka_volterra.toml -o <tmp>` with an empty compilation cache
    (`SIMJAX_CACHE_DIR` a fresh empty folder for every run): import, trace, compile, run,
    write;
  - the same with a warm cache (one folder, filled by one run before the rounds): what a
    user pays the second time;
  - `sim --help`, `sim models`, `sim info`.
The ratio the target is about: warm-cache `sim run` / import (medians, and minima).

Before the rounds every command runs once untimed (Python's bytecode files written, the
files in the page cache).

Run: python experiments/benchmarks/cold_start_bench.py [--rounds N]
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "experiments" / "lotka_volterra.toml"


def sim_command() -> list[str]:
    """The `sim` command of this Python's environment."""
    found = Path(sys.executable).parent / "sim"
    if found.exists():
        return [str(found)]
    which = shutil.which("sim")
    if which is None:
        raise SystemExit("the `sim` command is not installed in this environment")
    return [which]


def timed(command: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds (user + system) of one process; raises if it fails."""
    start = time.perf_counter()
    process = subprocess.Popen(
        command, env=env, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    stderr = process.stderr.read().decode(errors="replace")
    process.stderr.close()
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed (exit {process.returncode}):\n{stderr}")
    return wall, usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds")
    args = parser.parse_args()
    sim = sim_command()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="cold-start-") as tmp:
        tmp = Path(tmp)
        # (bytecode written as an installed package has it; no cache of JAX's own)
        base_env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("JAX_COMPILATION_CACHE_DIR", "PYTHONDONTWRITEBYTECODE")
        }
        warm_dir = tmp / "warm-cache"
        warm_dir.mkdir()
        warm_env = {**base_env, "SIMJAX_CACHE_DIR": str(warm_dir)}
        runs = iter(range(10**6))

        def output() -> str:
            return str(tmp / f"lv-{next(runs)}.h5")

        def cold_env() -> dict[str, str]:
            folder = tmp / f"cold-cache-{next(runs)}"
            folder.mkdir()
            return {**base_env, "SIMJAX_CACHE_DIR": str(folder)}

        commands = {
            "import jax, diffrax": lambda: (
                [sys.executable, "-c", "import jax, diffrax"],
                base_env,
            ),
            "sim run, empty cache": lambda: (
                [*sim, "run", str(CONFIG), "-o", output()],
                cold_env(),
            ),
            "sim run, warm cache": lambda: ([*sim, "run", str(CONFIG), "-o", output()], warm_env),
            "sim --help": lambda: ([*sim, "--help"], warm_env),
            "sim models": lambda: ([*sim, "models"], warm_env),
            "sim info": lambda: ([*sim, "info"], warm_env),
        }
        for make in commands.values():  # untimed: bytecode written, the warm cache filled
            timed(*make())
        samples: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
        for _ in range(args.rounds):
            for name, make in commands.items():
                samples[name].append(timed(*make()))
    load_after = os.getloadavg()

    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, "
        f"{platform.processor() or platform.platform()}; "
        f"Python {platform.python_version()}; load average before {load_before[0]:.2f}, after "
        f"{load_after[0]:.2f}"
    )
    print(f"{args.rounds} interleaved rounds; seconds per process, minimum / median")
    print(f"{'command':24} {'wall min':>9} {'wall med':>9} {'cpu min':>9} {'cpu med':>9}")
    stats = {}
    for name, values in samples.items():
        wall = np.array([w for w, _ in values])
        cpu = np.array([c for _, c in values])
        stats[name] = (wall.min(), np.median(wall), cpu.min(), np.median(cpu))
        print(
            f"{name:24} {wall.min():9.2f} {np.median(wall):9.2f} {cpu.min():9.2f} "
            f"{np.median(cpu):9.2f}"
        )
    floor, warm = stats["import jax, diffrax"], stats["sim run, warm cache"]
    print(
        f"warm-cache sim run / import jax, diffrax: wall {warm[1] / floor[1]:.2f} (medians), "
        f"{warm[0] / floor[0]:.2f} (minima); "
        f"cpu {warm[3] / floor[3]:.2f} (medians), {warm[2] / floor[2]:.2f} (minima)"
    )


if __name__ == "__main__":
    main()
