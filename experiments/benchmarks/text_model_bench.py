"""A model written as text against the same model written in Python, and a stiff text
model's symbolic Jacobian against JAX autodiff.

Lotka-Volterra as the built-in `lotka_volterra` (Python) and as `[model.states]` text
(`physics.ode.ode_model`), each solved by `sim.simulate` under `jax.jit` (tsit5, rtol
1e-8) and, batched, as a `jax.vmap` over 1,000 parameter sets, and each differentiated
(`jax.grad` of the final prey). Both are compiled first; the best of several repeats is
timed. Printed: microseconds per call and the ratio text / Python (1.0: the same speed).

Then Robertson's stiff kinetics as text, solved by Kvaerno5 (rtol 1e-8, atol 1e-12, to
t = 1e4) and differentiated (`jax.grad` of the final y3 by the rate k1), once with the
vector field's JVPs (the Jacobians of the Newton iterations, the gradient) from the
symbolic derivatives of the text and once from JAX autodiff through its evaluation
(`symbolic_jacobian=False`). Printed: milliseconds per call and the ratio symbolic /
autodiff (below 1.0: the symbolic Jacobian is faster), and the steps each solve takes.

Run: python experiments/benchmarks/text_model_bench.py [--repeats N]
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import time

import jax
import jax.numpy as jnp
import numpy as np

import sim

sim.configure_jax()  # float64, the compilation cache, XLA's options (as the `sim` command)
from physics.ode import ode_model
from solvers import OdeSolver

jax.config.update("jax_enable_x64", True)

LV = {
    "prey": "alpha * prey - beta * prey * predator",
    "predator": "delta * prey * predator - gamma * predator",
}
ROBERTSON = {
    "y1": "-k1 * y1 + k3 * y2 * y3",
    "y2": "k1 * y1 - k3 * y2 * y3 - k2 * y2 ** 2",
    "y3": "k2 * y2 ** 2",
}


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
    print(
        f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores, load "
        f"{os.getloadavg()[0]:.2f}"
    )
    print(f"{'work':<28}{'python (us)':>14}{'text (us)':>14}{'ratio':>8}")
    for label, make in [
        (
            "one solve",
            lambda m: jax.jit(
                lambda a: sim.simulate(
                    m, {**m.default_params(), "alpha": a}, t, initial=initial, solver=solver
                ).observables["prey"]
            ),
        ),
        (
            "1,000 solves (vmap)",
            lambda m: jax.jit(
                jax.vmap(
                    lambda a: sim.simulate(
                        m, {**m.default_params(), "alpha": a}, t, initial=initial, solver=solver
                    ).observables["prey"]
                )
            ),
        ),
        (
            "gradient of one solve",
            lambda m: jax.jit(
                jax.grad(
                    lambda a: sim.simulate(
                        m, {**m.default_params(), "alpha": a}, t, initial=initial, solver=solver
                    ).observables["prey"][-1]
                )
            ),
        ),
    ]:
        x = alphas if "vmap" in label else jnp.asarray(0.55)
        fp, ft = make(python), make(text)
        np.testing.assert_allclose(np.asarray(ft(x)), np.asarray(fp(x)), rtol=1e-12)
        a, b = best(fp, x, repeats=args.repeats), best(ft, x, repeats=args.repeats)
        print(f"{label:<28}{a * 1e6:>14.1f}{b * 1e6:>14.1f}{b / a:>8.2f}")
    stiff(args.repeats)


def best_alternating(fa, fb, *args, repeats: int) -> tuple[float, float]:
    """The best times of two compiled functions, called in turn (so that a change of the
    machine's load between them weighs on both)."""
    times: tuple[list[float], list[float]] = ([], [])
    for _ in range(repeats):
        for fn, out in zip((fa, fb), times, strict=False):
            start = time.perf_counter()
            jax.block_until_ready(fn(*args))
            out.append(time.perf_counter() - start)
    return min(times[0]), min(times[1])


def stiff(repeats: int) -> None:
    symbolic = ode_model("robertson", ROBERTSON, {"k1": 0.04, "k2": 3e7, "k3": 1e4})
    autodiff = dataclasses.replace(symbolic, symbolic_jacobian=False)
    t = jnp.asarray(np.concatenate([[0.0], np.logspace(-5, 4, 10)]))
    solver = OdeSolver(method="kvaerno5", rtol=1e-8, atol=1e-12)
    initial = {"y1": 1.0, "y2": 0.0, "y3": 0.0}

    def solve(m, k1):
        return sim.simulate(m, {**m.default_params(), "k1": k1}, t, initial=initial, solver=solver)

    print("\nRobertson (text), kvaerno5: JVPs of the vector field by JAX autodiff and symbolic")
    print(f"{'work':<28}{'autodiff (ms)':>14}{'symbolic (ms)':>14}{'ratio':>8}")
    for label, make in [
        ("one solve", lambda m: jax.jit(lambda k1: solve(m, k1).observables["y3"])),
        (
            "gradient of one solve",
            lambda m: jax.jit(jax.grad(lambda k1: solve(m, k1).observables["y3"][-1])),
        ),
    ]:
        x = jnp.asarray(0.04)
        fa, fs = make(autodiff), make(symbolic)
        # The Newton iterations converge to the same stage values (to their tolerance).
        np.testing.assert_allclose(np.asarray(fs(x)), np.asarray(fa(x)), rtol=1e-6)
        a, b = best_alternating(fa, fs, x, repeats=repeats)
        print(f"{label:<28}{a * 1e3:>14.2f}{b * 1e3:>14.2f}{b / a:>8.2f}")
    steps = [int(solve(m, 0.04).stats["num_steps"]) for m in (autodiff, symbolic)]
    print(f"steps (accepted and rejected): autodiff {steps[0]}, symbolic {steps[1]}")


if __name__ == "__main__":
    main()
