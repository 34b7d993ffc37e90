"""One spectral PDE run split over several devices: time per ETDRK4 step of the 3-D heat
equation and of 3-D Navier-Stokes (Taylor-Green, rotational form) at 64^3 on 1, 2 and 4
simulated CPU devices (`--xla_force_host_platform_device_count`), each device count in a
process of its own, with the largest difference of its final field from the 1-device one.

Simulated CPU devices share the machine's cores, so this table shows that the split run
is right and what its exchanges cost, not a speed-up: that needs several real devices
(GPUs).

Run: .venv/bin/python experiments/benchmarks/pde_sharded.py [--points 64] [--steps 20]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ONE_COUNT = r"""
import json, math, sys, time
import jax, jax.numpy as jnp, numpy as np
import sim
from physics.pde import Heat, NavierStokes3d
from solvers import Etdrk

sim.configure_jax()
devices, n, steps, out = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
assert len(jax.devices()) == devices
models = {
    "heat": (Heat(points=(n, n, n), domain=((0.0, 2 * math.pi),) * 3), {"diffusivity": 0.1}),
    "navier_stokes_3d": (NavierStokes3d(points=(n, n, n)), {"viscosity": 0.05}),
}
rows = {}
for name, (model, params) in models.items():
    p = {k: jnp.asarray(v) for k, v in params.items()}
    t = jnp.linspace(0.0, 0.005 * steps, 2)
    solver = Etdrk(order=4, steps_per_save=steps, devices=devices)
    run = jax.jit(lambda p: sim.simulate(model, p, t, solver=solver).final_state)
    began = time.perf_counter()
    compiled = run.lower(p).compile()
    compile_s = time.perf_counter() - began
    jax.block_until_ready(compiled(p))
    times = []
    for _ in range(3):
        began = time.perf_counter()
        final = jax.block_until_ready(compiled(p))
        times.append(time.perf_counter() - began)
    np.save(f"{out}_{name}_{devices}.npy", np.asarray(final))
    rows[name] = {"step_ms": 1e3 * sorted(times)[1] / steps, "compile_s": compile_s}
print(json.dumps(rows))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=64)
    parser.add_argument("--steps", type=int, default=20)
    args = parser.parse_args()
    root = Path(__file__).resolve().parents[2]
    import numpy as np

    results = {}
    with tempfile.TemporaryDirectory() as folder:
        out = str(Path(folder) / "final")
        for devices in (1, 2, 4):
            env = {
                **os.environ,
                "XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}",
                "PYTHONPATH": str(root),
            }
            done = subprocess.run(
                [
                    sys.executable,
                    "-c",
                    ONE_COUNT,
                    str(devices),
                    str(args.points),
                    str(args.steps),
                    out,
                ],
                env=env,
                capture_output=True,
                text=True,
                check=False,
            )
            if done.returncode != 0:
                sys.exit(done.stderr[-3000:])
            results[devices] = json.loads(done.stdout.strip().splitlines()[-1])
        print(
            f"ETDRK4 steps, {args.points}^3, float64, {args.steps} steps a run (median of 3), "
            f"on {os.cpu_count()} CPU cores shared by the simulated devices:"
        )
        print(f"{'model':<18} {'devices':>7} {'ms/step':>9} {'compile s':>10} {'max |diff|':>11}")
        for name in ("heat", "navier_stokes_3d"):
            one = np.load(f"{out}_{name}_1.npy")
            for devices, rows in results.items():
                field = np.load(f"{out}_{name}_{devices}.npy")
                diff = float(np.max(np.abs(field - one)))
                row = rows[name]
                print(
                    f"{name:<18} {devices:>7} {row['step_ms']:>9.1f} {row['compile_s']:>10.1f} "
                    f"{diff:>11.1e}"
                )
        print(
            "Simulated CPU devices share the cores: the table shows the split runs agree with "
            "one device and what the exchanges cost, not a speed-up (that needs real devices)."
        )


if __name__ == "__main__":
    main()
