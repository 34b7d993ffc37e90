"""Streamed-run benchmark: peak memory of `sim run` with 100x more saved frames.

Two runs of the same simulation, one saving T frames and one saving 100 (T - 1) + 1, each
in a fresh process (peak RSS is per process), streamed to HDF5 as `sim run` does; and
for comparison the 100x run held whole in memory and then saved (`sim.run(config)`
followed by `.save`, what a run without streaming costs).

- MD: Lennard-Jones, 864 particles (fcc 6^3), Langevin, 2,000 steps, saving every 100
  steps (21 frames) or every step (2,001 frames: 83 MB of positions and velocities).
- PDE: Gray-Scott on 128 x 128 (two fields), ETDRK4, 2,000 steps of dt = 1, saving 21
  or 2,001 frames (2,001 frames of both fields: 524 MB).

    python experiments/benchmarks/stream_bench.py
"""

from __future__ import annotations

import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

EXPERIMENTS = Path(__file__).resolve().parents[1]

CASES = {
    "MD (LJ, 864 particles, 2,000 steps)": (
        "lj_fluid.toml",
        ["system.cells=6", "params.cutoff=2.5", "time.steps=2000"],
        {"small": ["time.save_every=100"], "large": ["time.save_every=1"]},
    ),
    "PDE (Gray-Scott 128x128, 2,000 steps)": (
        "gray_scott.toml",
        ["time.t1=2000.0"],
        {"small": ["time.save=21"], "large": ["time.save=2001"]},
    ),
}

CHILD = """
import sys, sim
sim.configure_jax()
config = sim.load_config(sys.argv[1], sys.argv[4:])
if sys.argv[3] == "stream":
    sim.run(config, output=sys.argv[2])
else:
    sim.run(config).save(sys.argv[2])
"""


def peak_rss(config: str, sets: list[str], mode: str, folder: str) -> tuple[float, float, float]:
    """(peak RSS in MiB, wall time in s, output size in MiB) of one run in a fresh process."""
    out = os.path.join(folder, f"out-{mode}.h5")
    args = [sys.executable, "-c", CHILD, str(EXPERIMENTS / config), out, mode, *sets]
    start = time.perf_counter()
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if status != 0:
        raise RuntimeError(proc.stderr.read().decode())
    size = os.path.getsize(out) / 2**20
    os.unlink(out)
    return usage.ru_maxrss / 1024, wall, size


def main() -> None:
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    )
    for name, (config, base, variants) in CASES.items():
        with tempfile.TemporaryDirectory() as folder:
            small = peak_rss(config, base + variants["small"], "stream", folder)
            large = peak_rss(config, base + variants["large"], "stream", folder)
            whole = peak_rss(config, base + variants["large"], "memory", folder)
        print(f"\n{name}")
        print(
            f"  streamed, few frames:   peak {small[0]:7.0f} MiB  ({small[1]:5.1f} s, file "
            f"{small[2]:6.1f} MiB)"
        )
        print(
            f"  streamed, 100x frames:  peak {large[0]:7.0f} MiB  ({large[1]:5.1f} s, file "
            f"{large[2]:6.1f} MiB)"
        )
        print(f"  in memory, 100x frames: peak {whole[0]:7.0f} MiB  ({whole[1]:5.1f} s)")
        print(
            f"  growth with 100x frames: streamed {100 * (large[0] / small[0] - 1):+.1f}%, in "
            f"memory {100 * (whole[0] / small[0] - 1):+.1f}%"
        )


if __name__ == "__main__":
    main()
