"""A first look at simjax from Python: simulate, batch with vmap, differentiate.

Run: python experiments/quickstart.py
"""

import time

import jax
import jax.numpy as jnp

import sim

sim.configure_jax()  # float64, the compilation cache, XLA's options (as the `sim` command)

model = sim.get_model("lotka_volterra")
params = model.default_params()
t = jnp.linspace(0.0, 20.0, 201)

traj = sim.simulate(model, params, t)
prey = traj.observables["prey"]
print(
    f"{model.name}: prey from {float(prey[0]):.1f} to a peak of {float(prey.max()):.1f} thousand "
    f"({int(traj.stats['num_steps'])} solver steps)"
)

# One compiled call runs 1,000 parameter sets.
alphas = jnp.linspace(0.3, 0.8, 1000)
sweep = jax.jit(
    jax.vmap(lambda a: sim.simulate(model, {**params, "alpha": a}, t).observables["prey"].max())
)
sweep(alphas).block_until_ready()
start = time.perf_counter()
peaks = sweep(alphas).block_until_ready()
print(
    f"1,000 runs in {1e3 * (time.perf_counter() - start):.1f} ms: peak prey from "
    f"{float(peaks.min()):.1f} to {float(peaks.max()):.1f}"
)


# Gradients flow through the adaptive time stepping.
def mean_prey(p):
    return jnp.mean(sim.simulate(model, p, t).observables["prey"])


grads = jax.grad(mean_prey)(params)
print("d mean(prey) / d params:", {k: round(float(v), 3) for k, v in grads.items()})
