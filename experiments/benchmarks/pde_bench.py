"""PDE benchmark: simjax's ETDRK4 against exponax on the same work, and the memory of
gradients through long rollouts.

Cases (float32, ETDRK4, 2/3 dealiasing, Kassam-Trefethen coefficients in both):
  1. Kuramoto-Sivashinsky (conservative form), 1D, N = 256, L = 32 pi, dt = 0.1,
     a batch of 64 initial fields, 2,000 steps.
  2. Kolmogorov flow (2D Navier-Stokes vorticity, forcing mode 4, drag 0.1, nu = 1e-3),
     256 x 256, L = 2 pi, dt = 5e-3, 200 steps.
Both libraries run the same number of steps inside one jitted call and return the final
field in physical space; the best of several timed repeats (after a warm-up call that
compiles; the two libraries' calls alternate) gives steps per second. Both build their ETDRK coefficients once, before timing
(exponax's stepper, `sim.spectral_stepper`).

Memory: the gradient of a loss after n steps of 1D Burgers (N = 256, float64) with respect
to the viscosity; XLA's buffer assignment of the compiled gradient (temporary bytes) for
n = 625 ... 10,000 with two checkpoint levels and with a plain scan, the fitted growth
exponent, and the 10,000-step gradient actually run (time and peak RSS).

Run: .venv/bin/python experiments/benchmarks/pde_bench.py [--quick]
"""

from __future__ import annotations

import argparse
import math
import resource
import time

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

import sim
from solvers import Etdrk

try:
    import exponax as ex
except ImportError as e:  # pragma: no cover
    raise SystemExit("exponax is needed for this benchmark: pip install 'simjax[bench]'") from e


def to32(tree):
    """Cast every floating array of a pytree (an exponax stepper) to 32 bits."""

    def cast(a):
        if isinstance(a, jax.Array) and jnp.issubdtype(a.dtype, jnp.complexfloating):
            return a.astype(jnp.complex64)
        if isinstance(a, jax.Array) and jnp.issubdtype(a.dtype, jnp.floating):
            return a.astype(jnp.float32)
        return a

    return jax.tree.map(cast, tree)


def best_times(*calls, repeats=7):
    """Best time of each (fn, *args), the calls alternating so that both libraries see
    the same machine load (this machine's cores are shared)."""
    for fn, *args in calls:
        jax.block_until_ready(fn(*args))  # compile
    best = [math.inf] * len(calls)
    for _ in range(repeats):
        for i, (fn, *args) in enumerate(calls):
            start = time.perf_counter()
            jax.block_until_ready(fn(*args))
            best[i] = min(best[i], time.perf_counter() - start)
    return best


def exponax_runner(stepper, n_steps, batched):
    step = jax.vmap(stepper) if batched else stepper

    @jax.jit
    def run(u):
        return jax.lax.fori_loop(0, n_steps, lambda _, v: step(v), u)

    return run


def simjax_stepper(model, params, dt, n_steps):
    """Coefficients built once, before timing (as an exponax stepper is)."""
    solver = Etdrk(order=4, steps_per_save=n_steps, dtype="float32", contour_points=16)
    return sim.spectral_stepper(model, params, dt, solver=solver)


def simjax_runner(n_steps, batched):
    @eqx.filter_jit
    def run(stepper, u0):
        t = jnp.asarray([0.0, n_steps * stepper.dt])

        def one(u):
            return stepper.simulate(t, initial=u).final_state

        return jax.vmap(one)(u0) if batched else one(u0)

    return run


def case_ks(n_steps, batch=64):
    n, length, dt = 256, 32 * math.pi, 0.1
    model = sim.get_model("kuramoto_sivashinsky", points=[n], domain=[[0.0, length]])
    u0 = np.stack([model.initial_field("random", seed=s, max_mode=8) for s in range(batch)]).astype(np.float32)
    stepper = to32(ex.stepper.KuramotoSivashinskyConservative(1, length, n, dt, order=4))
    prepared = simjax_stepper(model, model.default_params(), dt, n_steps)
    t_exp, t_sim = best_times(
        (exponax_runner(stepper, n_steps, True), jnp.asarray(u0)),
        (simjax_runner(n_steps, True), prepared, jnp.asarray(u0)),
    )
    return {"name": f"Kuramoto-Sivashinsky 1D N={n} batch {batch}", "steps": n_steps, "exponax": n_steps / t_exp, "simjax": n_steps / t_sim}


def case_kolmogorov(n_steps):
    n, dt = 256, 5e-3
    model = sim.get_model("navier_stokes_2d", points=[n, n], forcing_mode=4)
    params = {"viscosity": 1e-3, "drag": 0.1, "forcing": 1.0}
    w0 = model.initial_field("random", seed=0, max_mode=6).astype(np.float32)
    stepper = to32(
        ex.stepper.KolmogorovFlowVorticity(
            2, 2 * math.pi, n, dt, diffusivity=1e-3, drag=-0.1, injection_mode=4, injection_scale=1.0, order=4
        )
    )
    prepared = simjax_stepper(model, params, dt, n_steps)
    t_exp, t_sim = best_times(
        (exponax_runner(stepper, n_steps, False), jnp.asarray(w0)),
        (simjax_runner(n_steps, False), prepared, jnp.asarray(w0)),
    )
    return {"name": f"Kolmogorov flow 2D {n}x{n}", "steps": n_steps, "exponax": n_steps / t_exp, "simjax": n_steps / t_sim}


def ks_agreement(n_steps=100):
    """Max difference of the two libraries' KS fields after n_steps in float64."""
    n, length, dt = 256, 32 * math.pi, 0.1
    model = sim.get_model("kuramoto_sivashinsky", points=[n], domain=[[0.0, length]])
    u0 = model.initial_field()
    stepper = ex.stepper.KuramotoSivashinskyConservative(1, length, n, dt, order=4)
    u_exp = jax.jit(exponax_runner(stepper, n_steps, False))(jnp.asarray(u0))
    solver = Etdrk(order=4, steps_per_save=n_steps, contour_points=16)
    u_sim = sim.simulate(model, None, jnp.asarray([0.0, n_steps * dt]), initial=u0, solver=solver).final_state
    return float(jnp.max(jnp.abs(u_exp - u_sim)))


def gradient_memory(steps, levels):
    model = sim.get_model("burgers", points=[256])
    (x,) = model.coordinates()
    u0 = jnp.asarray(np.sin(x) + 0.5 * np.cos(3 * x))
    dt = 1e-3
    out = []
    for n in steps:
        solver = Etdrk(order=4, steps_per_save=n, checkpoint_levels=levels)
        t = jnp.asarray([0.0, n * dt])

        def loss(nu):
            return jnp.sum(sim.simulate(model, {"viscosity": nu}, t, initial=u0, solver=solver).final_state ** 2)

        compiled = jax.jit(jax.grad(loss)).lower(jnp.asarray(0.05)).compile()
        out.append(compiled.memory_analysis().temp_size_in_bytes)
    return out


def gradient_run(n_steps=10_000):
    model = sim.get_model("burgers", points=[256])
    (x,) = model.coordinates()
    u0 = jnp.asarray(np.sin(x) + 0.5 * np.cos(3 * x))
    solver = Etdrk(order=4, steps_per_save=n_steps)
    t = jnp.asarray([0.0, n_steps * 1e-3])

    def loss(nu):
        return jnp.sum(sim.simulate(model, {"viscosity": nu}, t, initial=u0, solver=solver).final_state ** 2)

    grad = jax.jit(jax.grad(loss))
    start = time.perf_counter()
    g = float(grad(jnp.asarray(0.05)))
    elapsed = time.perf_counter() - start
    return g, elapsed, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps (a smoke run)")
    args = parser.parse_args()
    ks_steps, kol_steps = (200, 20) if args.quick else (2000, 200)
    print(f"jax {jax.__version__}, exponax {ex.__version__ if hasattr(ex, '__version__') else '?'}, devices {jax.devices()}")
    print(f"KS agreement (float64, 100 steps, max |simjax - exponax|): {ks_agreement():.2e}")
    for case in (case_ks(ks_steps), case_kolmogorov(kol_steps)):
        ratio = case["simjax"] / case["exponax"]
        print(
            f"{case['name']}: {case['steps']} steps; simjax {case['simjax']:.1f} steps/s, "
            f"exponax {case['exponax']:.1f} steps/s, ratio {ratio:.2f}x"
        )
    steps = [625, 1250, 2500, 5000, 10000]
    nested = gradient_memory(steps, 2)
    plain = gradient_memory(steps[:3], 1)
    p_nested = np.polyfit(np.log(steps), np.log(nested), 1)[0]
    p_plain = np.polyfit(np.log(steps[:3]), np.log(plain), 1)[0]
    print("gradient temp memory (MiB), Burgers N=256 float64:")
    print("  steps        " + " ".join(f"{n:>8d}" for n in steps))
    print("  checkpointed " + " ".join(f"{b / 2**20:8.2f}" for b in nested) + f"   exponent {p_nested:.2f}")
    print("  plain scan   " + " ".join(f"{b / 2**20:8.2f}" for b in plain) + f"   exponent {p_plain:.2f}")
    g, elapsed, rss = gradient_run()
    print(f"10,000-step gradient d(loss)/d(viscosity) = {g:.6g} in {elapsed:.1f} s (incl. compile), peak RSS {rss:.0f} MiB")


if __name__ == "__main__":
    main()
