"""ODE benchmark: simjax against raw diffrax and scipy's solve_ivp on the same problem.

The problem: Lotka-Volterra at the lynx-hare parameters, t in [0, 20] with 201 save
points, rtol = 1e-6 and atol = 1e-8 for every solver (tsit5 for simjax and diffrax).

Prints, side by side:
  - per-solve time: simjax vs raw diffrax (called from Python, and inside jax.jit);
  - per-solve time: simjax vs scipy solve_ivp (LSODA and RK45);
  - gradient time / forward time (reverse mode through the solver);
  - first-call compile time.

Run: python experiments/benchmarks/ode_bench.py [--repeats N]
"""

from __future__ import annotations

import argparse
import platform
import statistics
import time

import diffrax
import jax
import jax.numpy as jnp
import numpy as np
from scipy.integrate import solve_ivp

import sim
from solvers import OdeSolver

RTOL, ATOL = 1e-6, 1e-8


def per_call(fn, repeats: int, inner: int = 20) -> float:
    """Best seconds per call over `repeats` batches of `inner` calls (after one warm-up).

    The minimum, not the mean, is the estimate least disturbed by other load."""
    return interleaved([fn], repeats, inner)[0]


def interleaved(fns, repeats: int, inner: int = 20) -> list[float]:
    """Best seconds per call of each function, measured in alternation so that a change
    in machine load affects all of them alike."""
    for fn in fns:
        jax.block_until_ready(fn())
    best = [float("inf")] * len(fns)
    for _ in range(repeats):
        for i, fn in enumerate(fns):
            start = time.perf_counter()
            for _ in range(inner):
                out = fn()
            jax.block_until_ready(out)
            best[i] = min(best[i], (time.perf_counter() - start) / inner)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=60)
    args = parser.parse_args()

    model = sim.get_model("lotka_volterra")
    params = model.default_params()
    initial = model.default_initial()
    t = jnp.linspace(0.0, 20.0, 201)
    solver = OdeSolver(method="tsit5", rtol=RTOL, atol=ATOL)
    y0 = model.initial_state(initial)

    # --- first call: trace + compile + run
    start = time.perf_counter()
    jax.block_until_ready(sim.simulate(model, params, t, initial=initial, solver=solver))
    compile_s = time.perf_counter() - start

    def lv(t, y, p):
        x, z = y[0], y[1]
        return jnp.stack([p["alpha"] * x - p["beta"] * x * z, p["delta"] * x * z - p["gamma"] * z])

    def raw_diffrax(p):
        return diffrax.diffeqsolve(
            diffrax.ODETerm(lv), diffrax.Tsit5(), t[0], t[-1], None, y0, p,
            saveat=diffrax.SaveAt(ts=t), stepsize_controller=diffrax.PIDController(rtol=RTOL, atol=ATOL),
            max_steps=4096,
        ).ys

    def ours(p):
        return sim.simulate(model, p, t, initial=initial, solver=solver).observables

    # Called from Python: each library's own dispatch.
    simjax_py, diffrax_py = interleaved([lambda: ours(params), lambda: raw_diffrax(params)], args.repeats)
    # Inside the caller's jax.jit.
    ours_jit, raw_jit = jax.jit(ours), jax.jit(raw_diffrax)
    simjax_jit, diffrax_jit = interleaved([lambda: ours_jit(params), lambda: raw_jit(params)], args.repeats)

    # scipy on the same problem and tolerances.
    p = {k: float(v) for k, v in params.items()}

    def lv_np(t, y):
        return [p["alpha"] * y[0] - p["beta"] * y[0] * y[1], p["delta"] * y[0] * y[1] - p["gamma"] * y[1]]

    t_np = np.asarray(t)
    scipy_times = {}
    for method in ("LSODA", "RK45"):
        scipy_times[method] = per_call(
            lambda m=method: solve_ivp(lv_np, (0.0, 20.0), np.asarray(y0), method=m, t_eval=t_np, rtol=RTOL, atol=ATOL),
            max(3, args.repeats // 3), inner=10,
        )
    ref = solve_ivp(lv_np, (0.0, 20.0), np.asarray(y0), method="DOP853", t_eval=t_np, rtol=1e-12, atol=1e-12).y
    err = float(np.max(np.abs(np.asarray(ours_jit(params)["prey"]) - ref[0]) / np.abs(ref[0])))

    # Gradient / forward.
    def loss(p):
        obs = sim.simulate(model, p, t, initial=initial, solver=solver).observables
        return jnp.sum(obs["prey"] ** 2 + obs["predator"] ** 2)

    forward = jax.jit(loss)
    backward = jax.jit(jax.grad(loss))
    fwd_s, grad_s = interleaved([lambda: forward(params), lambda: backward(params)], args.repeats)

    # The same gradient by the forward sensitivity equations (what `sim fit` with a
    # gradient optimiser and `sim infer` use for a few free quantities).
    names = list(params)

    def field(t, y, theta):
        return model.vector_field(t, y, dict(zip(names, theta)))

    theta0 = jnp.stack([params[n] for n in names])
    sens0 = jnp.zeros((2, len(names)))

    @jax.jit
    def sensitivity_grad(theta):
        sol = solver.solve_sensitivities(field, t, y0, theta, sens0)
        cot = 2.0 * sol.ys  # d loss / d ys for loss = sum(ys ** 2)
        return jnp.einsum("tn,tnp->p", cot, sol.sensitivities)

    np.testing.assert_allclose(sensitivity_grad(theta0), jnp.stack([backward(params)[n] for n in names]), rtol=1e-4)
    (sens_s,) = interleaved([lambda: sensitivity_grad(theta0)], args.repeats)

    print(f"machine: {platform.machine()}, {platform.processor() or platform.system()}, "
          f"jax {jax.__version__} on {jax.default_backend()}, diffrax {diffrax.__version__}")
    print("problem: Lotka-Volterra, t in [0, 20], 201 saves, tsit5, rtol 1e-6, atol 1e-8; "
          f"max relative error vs DOP853 at 1e-12: {err:.1e}")
    print(f"{'':32} {'per solve':>12} {'ratio':>10}")
    print(f"{'raw diffrax (from Python)':32} {diffrax_py * 1e6:10.1f} us {1.0:9.3f}x")
    print(f"{'simjax (from Python)':32} {simjax_py * 1e6:10.1f} us {simjax_py / diffrax_py:9.3f}x  overhead {100 * (simjax_py / diffrax_py - 1):+.1f}%")
    print(f"{'raw diffrax (in jax.jit)':32} {diffrax_jit * 1e6:10.1f} us {1.0:9.3f}x")
    print(f"{'simjax (in jax.jit)':32} {simjax_jit * 1e6:10.1f} us {simjax_jit / diffrax_jit:9.3f}x  overhead {100 * (simjax_jit / diffrax_jit - 1):+.1f}%")
    for method, secs in scipy_times.items():
        print(f"{'scipy solve_ivp ' + method:32} {secs * 1e6:10.1f} us   simjax (in jit) is {secs / simjax_jit:.1f}x faster")
    print(f"{'gradient / forward (reverse)':32} {grad_s * 1e6:10.1f} us / {fwd_s * 1e6:.1f} us = {grad_s / fwd_s:.2f}")
    print(f"{'gradient / forward (fwd. sens.)':32} {sens_s * 1e6:10.1f} us / {fwd_s * 1e6:.1f} us = {sens_s / fwd_s:.2f}")
    print(f"{'first call (trace + compile)':32} {compile_s:10.2f} s")


if __name__ == "__main__":
    main()
