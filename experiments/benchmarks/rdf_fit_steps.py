"""How the g(r) fit's bounded step is damped decides how fast it gets there: the fit of
`experiments/lj_rdf_fit.toml` from a start 15% low in epsilon and 12% high in sigma,
with the fit's own step (Levenberg's damping, a multiple of the identity in the
logarithms) and with Marquardt's (a multiple of diag(J^T J)), side by side.

The target is the time-averaged g(r) of a `sim run` at epsilon = sigma = 1 (seed 7 by
default, `--target-steps` steps), written once to the output folder and reused. Each
side runs `inference.fit` with `fit.replicas` copies per step and prints its path run by
run: loss, epsilon, sigma, and the step the run led to. Both sides use the same trust
radius and the same rules for accepting runs and ending the fit; only the damping of a
step held to the radius differs (`--damping` picks one side).

Usage:
    python experiments/benchmarks/rdf_fit_steps.py [--damping levenberg marquardt]
        [--seed 7] [--start 0.85 1.12] [--replicas 4] [--target-steps 64000] [--out DIR]
"""

from __future__ import annotations

import argparse
import functools
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1]))

import sim  # noqa: E402

sim.configure_jax()  # float64, the compilation cache, XLA's options (as the `sim` command)
from inference import _fit_rdf, fit  # noqa: E402

EXPERIMENT = HERE.parent / "lj_rdf_fit.toml"


def target(folder: Path, seed: int, steps: int) -> Path:
    path = folder / f"rdf_target_seed{seed}_{steps}.h5"
    if not path.exists():
        truth = [
            "params.epsilon=1.0",
            "params.sigma=1.0",
            f"system.seed={seed}",
            f"time.steps={steps}",
        ]
        config = sim.load_config(EXPERIMENT, [*truth, f'data.file="{folder / "unused.h5"}"'])
        partial = path.with_suffix(f".{os.getpid()}.h5")
        sim.run(config).save(partial)
        os.replace(partial, path)
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--damping",
        nargs="+",
        default=["levenberg", "marquardt"],
        choices=["levenberg", "marquardt"],
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--start", type=float, nargs=2, default=[0.85, 1.12], metavar=("EPSILON", "SIGMA")
    )
    parser.add_argument("--replicas", type=int, default=4)
    parser.add_argument("--target-steps", type=int, default=64000)
    parser.add_argument("--max-steps", type=int, default=20)
    parser.add_argument("--out", type=Path, default=Path("rdf_fit_steps"))
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    data = target(args.out, args.seed, args.target_steps)
    levenberg = _fit_rdf._BlockSums.step
    print(
        f"machine: {os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}; target seed "
        f"{args.seed}, "
        f"{args.target_steps} steps; start epsilon {args.start[0]}, sigma {args.start[1]}; "
        f"{args.replicas} runs per step"
    )
    for damping in args.damping:
        _fit_rdf._BlockSums.step = (
            functools.partialmethod(levenberg, scaling="diagonal")
            if damping == "marquardt"
            else levenberg
        )
        sets = [
            f'data.file="{data}"',
            f"params.epsilon={args.start[0]}",
            f"params.sigma={args.start[1]}",
            f"fit.replicas={args.replicas}",
            f"fit.max_steps={args.max_steps}",
        ]
        began = time.perf_counter()
        result = fit(sim.load_config(EXPERIMENT, sets))
        wall = time.perf_counter() - began
        print(
            f"\n{damping}: {len(result.loss_history)} runs, "
            f"{'converged' if result.converged else 'not converged'}, "
            f"estimate epsilon {result.estimate['epsilon']:.5f}, sigma "
            f"{result.estimate['sigma']:.5f}, {wall:.0f} s"
        )
        for k, loss in enumerate(result.loss_history):
            print(
                f"  run {k + 1:2d}: loss {loss:.4g} +- {result.loss_stderr[k]:.2g}, epsilon "
                f"{result.path['epsilon'][k]:.4f}, "
                f"sigma {result.path['sigma'][k]:.4f} -> step to {result.aim['epsilon'][k]:.4f}, "
                f"{result.aim['sigma'][k]:.4f}"
            )
    _fit_rdf._BlockSums.step = levenberg


if __name__ == "__main__":
    main()
