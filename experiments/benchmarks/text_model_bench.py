"""A model written as text against the same model written in Python.

Lotka-Volterra as the built-in `lotka_volterra` (Python) and as `[model.states]` text
(`physics.ode.ode_model`), each solved by `sim.simulate` under `jax.jit` (tsit5, rtol
1e-8) and, batched, as a `jax.vmap` over 1,000 parameter sets, and each differentiated
(`jax.grad` of the final prey). Both are compiled first; the best of several repeats is
timed. Printed: microseconds per call and the ratio text / Python (1.0: the same speed).

Run: python experiments/benchmarks/text_model_bench.py [--repeats N]
"""

from __future__ import annotations

import argparse
import os
import platform
import time

import jax
import jax.numpy as jnp
import numpy as np

import sim
from physics.ode import ode_model
from solvers import OdeSolver

jax.config.update("jax_enable_x64", True)

LV = {"prey": "alpha * prey - beta * prey * predator", "predator": "delta * prey * predator - gamma * predator"}


def best(fn, *args, repeats: int) -> float:
    jax.block_until_ready(fn(*args))  # compile
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    python = sim.get_model("lotka_volterra")
    text = ode_model("lv", LV, {k: float(v) for k, v in python.default_params().items()})
    t = jnp.linspace(0.0, 20.0, 41)
    solver = OdeSolver(method="tsit5", rtol=1e-8, atol=1e-8)
    initial = {"prey": 30.0, "predator": 4.0}
    alphas = jnp.linspace(0.4, 0.7, 1000)
    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, load {os.getloadavg()[0]:.2f}")
    print(f"{'work':<28}{'python (us)':>14}{'text (us)':>14}{'ratio':>8}")
    for label, make in [
        ("one solve", lambda m: jax.jit(lambda a: sim.simulate(m, {**m.default_params(), "alpha": a}, t, initial=initial, solver=solver).observables["prey"])),
        ("1,000 solves (vmap)", lambda m: jax.jit(jax.vmap(lambda a: sim.simulate(m, {**m.default_params(), "alpha": a}, t, initial=initial, solver=solver).observables["prey"]))),
        ("gradient of one solve", lambda m: jax.jit(jax.grad(lambda a: sim.simulate(m, {**m.default_params(), "alpha": a}, t, initial=initial, solver=solver).observables["prey"][-1]))),
    ]:
        x = alphas if "vmap" in label else jnp.asarray(0.55)
        fp, ft = make(python), make(text)
        np.testing.assert_allclose(np.asarray(ft(x)), np.asarray(fp(x)), rtol=1e-12)
        a, b = best(fp, x, repeats=args.repeats), best(ft, x, repeats=args.repeats)
        print(f"{label:<28}{a * 1e6:>14.1f}{b * 1e6:>14.1f}{b / a:>8.2f}")


if __name__ == "__main__":
    main()
