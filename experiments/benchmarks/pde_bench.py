"""PDE benchmark: simjax's ETDRK4 against exponax on the same work, and the memory of
gradients through long rollouts.

Cases (float32, ETDRK4, 2/3 dealiasing, Kassam-Trefethen coefficients with 16 contour
points in both):
  1. Kuramoto-Sivashinsky (conservative form), 1D, N = 256, L = 32 pi, dt = 0.1,
     a batch of 64 initial fields, 2,000 steps.
  2. Kolmogorov flow (2D Navier-Stokes vorticity, forcing mode 4, drag 0.1, nu = 1e-3),
     256 x 256, L = 2 pi, dt = 5e-3, 200 steps.
Both libraries run the same number of steps inside one jitted call that takes a
physical field, transforms it once, steps in Fourier space and transforms the result
back: exponax through its stepper's `step_fourier` in a `lax.fori_loop` (no FFT round
trip per step: what exponax offers for long rollouts), simjax through
`SpectralStepper.simulate` with one save at the end. Both build their ETDRK
coefficients once, before timing (exponax's stepper, `sim.spectral_stepper`), and pass
them into the jitted call as an argument. After a warm-up call that compiles, the two
libraries' calls alternate for `--repeats` rounds; reported: steps per second from the
median time, with the min-max spread, and the speed ratio three ways: of the medians,
per round (median and range of the rounds' ratios: the two calls of a round see about
the same load) and of the fastest rounds.

Agreement: the two libraries' final fields after 100 steps in float64, on KS and on
Kolmogorov flow (relative L2 difference and max difference), and the relative
difference of the timed float32 runs' final fields (KS is chaotic: over 2,000 steps,
t = 200, float32 rounding differences grow to the size of the field). exponax's vorticity is the
negative of simjax's (see KOLMOGOROV below): exponax is given the negated initial field and
forcing, so that both compute the same flow.

Memory: the gradient of a loss after n steps of 1D Burgers (N = 256, float64) with respect
to the viscosity; XLA's buffer assignment of the compiled gradient (temporary bytes) for
n = 625 ... 10,000 with two checkpoint levels and with a plain scan, the fitted growth
exponent, and the 10,000-step gradient actually run (time and peak RSS).

Run: .venv/bin/python experiments/benchmarks/pde_bench.py [--quick] [--repeats N] [--no-memory]
"""

from __future__ import annotations

import argparse
import importlib.metadata
import math
import os
import resource
import time

os.environ.setdefault("SIMJAX_CACHE_DIR", "")  # (compile times are part of the memory runs)

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

import sim

sim.configure_jax()  # float64, the compilation cache, XLA's options (as the `sim` command)
from solvers import Etdrk

try:
    import exponax as ex
except ImportError as e:  # pragma: no cover
    raise SystemExit("exponax is needed for this benchmark: pip install 'simjax[bench]'") from e


# Kolmogorov flow, the same flow in both libraries. exponax's vorticity is the negative of
# simjax's: its stream function solves Laplacian(psi) = w with velocity (psi_y, -psi_x),
# simjax's Laplacian(psi) = -w. So exponax is given -w0 and the opposite forcing (its
# injection term is -gamma n cos(n y) on its vorticity, simjax's -A n cos(n y) on its own),
# and its final field is negated before comparing.
KOLMOGOROV_PARAMS = {"viscosity": 1e-3, "drag": 0.1, "forcing": 1.0}
KOLMOGOROV = {
    "diffusivity": 1e-3,
    "drag": -0.1,
    "injection_mode": 4,
    "injection_scale": -1.0,
    "order": 4,
}


def to32(tree):
    """Cast every floating array of a pytree (an exponax stepper) to 32 bits."""

    def cast(a):
        if isinstance(a, jax.Array) and jnp.issubdtype(a.dtype, jnp.complexfloating):
            return a.astype(jnp.complex64)
        if isinstance(a, jax.Array) and jnp.issubdtype(a.dtype, jnp.floating):
            return a.astype(jnp.float32)
        return a

    return jax.tree.map(cast, tree)


def interleaved_times(*calls, repeats=7):
    """Seconds of each call (fn, *args) in each of `repeats` rounds, the calls alternating
    so that both libraries see the same machine load (this machine's cores are shared);
    one warm-up call of each first (compiles)."""
    outs = [jax.block_until_ready(fn(*args)) for fn, *args in calls]
    times = [[] for _ in calls]
    for _ in range(repeats):
        for i, (fn, *args) in enumerate(calls):
            start = time.perf_counter()
            jax.block_until_ready(fn(*args))
            times[i].append(time.perf_counter() - start)
    return [np.asarray(t) for t in times], outs


def exponax_runner(n_steps, batched):
    """All steps in Fourier space: one forward transform, `step_fourier` n times, one
    inverse transform (the stepper is an argument, as simjax's is)."""

    @eqx.filter_jit
    def run(stepper, u):
        d, n = stepper.num_spatial_dims, stepper.num_points

        def one(v):
            v_hat = ex.fft(v, num_spatial_dims=d)
            v_hat = jax.lax.fori_loop(0, n_steps, lambda _, w: stepper.step_fourier(w), v_hat)
            return ex.ifft(v_hat, num_spatial_dims=d, num_points=n)

        return jax.vmap(one)(u) if batched else one(u)

    return run


def relative_difference(a, b):
    """||a - b|| / ||b|| over the whole array (L2)."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


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


def case_ks(n_steps, repeats, batch=64):
    n, length, dt = 256, 32 * math.pi, 0.1
    model = sim.get_model("kuramoto_sivashinsky", points=[n], domain=[[0.0, length]])
    u0 = np.stack([model.initial_field("random", seed=s, max_mode=8) for s in range(batch)]).astype(
        np.float32
    )
    stepper = to32(ex.stepper.KuramotoSivashinskyConservative(1, length, n, dt, order=4))
    prepared = simjax_stepper(model, model.default_params(), dt, n_steps)
    (t_exp, t_sim), (u_exp, u_sim) = interleaved_times(
        (exponax_runner(n_steps, True), stepper, jnp.asarray(u0)),
        (simjax_runner(n_steps, True), prepared, jnp.asarray(u0)),
        repeats=repeats,
    )
    return {
        "name": f"Kuramoto-Sivashinsky 1D N={n} batch {batch}",
        "steps": n_steps,
        "exponax": t_exp,
        "simjax": t_sim,
        "difference": relative_difference(u_sim, u_exp),
    }


def case_kolmogorov(n_steps, repeats):
    n, dt = 256, 5e-3
    model = sim.get_model("navier_stokes_2d", points=[n, n], forcing_mode=4)
    w0 = model.initial_field("random", seed=0, max_mode=6).astype(np.float32)
    stepper = to32(ex.stepper.KolmogorovFlowVorticity(2, 2 * math.pi, n, dt, **KOLMOGOROV))
    prepared = simjax_stepper(model, KOLMOGOROV_PARAMS, dt, n_steps)
    (t_exp, t_sim), (u_exp, u_sim) = interleaved_times(
        (exponax_runner(n_steps, False), stepper, -jnp.asarray(w0)),
        (simjax_runner(n_steps, False), prepared, jnp.asarray(w0)),
        repeats=repeats,
    )
    return {
        "name": f"Kolmogorov flow 2D {n}x{n}",
        "steps": n_steps,
        "exponax": t_exp,
        "simjax": t_sim,
        "difference": relative_difference(u_sim, -u_exp),
    }


def agreement(model, params, stepper, u0, dt, n_steps=100, sign=1.0):
    """Relative L2 and max differences of the two libraries' fields after n_steps in
    float64, and the max of |field| (the scale of the max difference). `sign`: exponax's
    field is sign times simjax's (-1 for the vorticity, see KOLMOGOROV)."""
    u_exp = sign * exponax_runner(n_steps, False)(stepper, sign * jnp.asarray(u0))
    solver = Etdrk(order=4, steps_per_save=n_steps, contour_points=16)
    u_sim = sim.simulate(
        model, params, jnp.asarray([0.0, n_steps * dt]), initial=u0, solver=solver
    ).final_state
    return (
        relative_difference(u_sim, u_exp),
        float(jnp.max(jnp.abs(u_exp - u_sim))),
        float(jnp.max(jnp.abs(u_exp))),
    )


def ks_agreement(n_steps=100):
    n, length, dt = 256, 32 * math.pi, 0.1
    model = sim.get_model("kuramoto_sivashinsky", points=[n], domain=[[0.0, length]])
    stepper = ex.stepper.KuramotoSivashinskyConservative(1, length, n, dt, order=4)
    return agreement(model, None, stepper, model.initial_field(), dt, n_steps)


def kolmogorov_agreement(n_steps=100):
    n, dt = 256, 5e-3
    model = sim.get_model("navier_stokes_2d", points=[n, n], forcing_mode=4)
    stepper = ex.stepper.KolmogorovFlowVorticity(2, 2 * math.pi, n, dt, **KOLMOGOROV)
    return agreement(
        model,
        KOLMOGOROV_PARAMS,
        stepper,
        model.initial_field("random", seed=0, max_mode=6),
        dt,
        n_steps,
        -1.0,
    )


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
            return jnp.sum(
                sim.simulate(model, {"viscosity": nu}, t, initial=u0, solver=solver).final_state
                ** 2
            )

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
        return jnp.sum(
            sim.simulate(model, {"viscosity": nu}, t, initial=u0, solver=solver).final_state ** 2
        )

    grad = jax.jit(jax.grad(loss))
    start = time.perf_counter()
    g = float(grad(jnp.asarray(0.05)))
    elapsed = time.perf_counter() - start
    return g, elapsed, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def show(times, steps):
    """steps/s from the median time, with the spread (from the slowest and fastest)."""
    return f"{steps / np.median(times):.1f} ({steps / times.max():.1f}-{steps / times.min():.1f})"


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer steps (a smoke run)")
    parser.add_argument("--repeats", type=int, default=9, help="interleaved rounds of each case")
    parser.add_argument("--no-memory", action="store_true", help="skip the gradient-memory part")
    args = parser.parse_args()
    ks_steps, kol_steps = (200, 20) if args.quick else (2000, 200)
    load_before = os.getloadavg()
    print(
        f"jax {jax.__version__}, exponax {importlib.metadata.version('exponax')}, devices "
        f"{jax.devices()}, "
        f"{os.cpu_count()} cores; load average {load_before[0]:.2f}"
    )
    for name, check in (("KS", ks_agreement), ("Kolmogorov", kolmogorov_agreement)):
        rel, abs_max, scale = check()
        print(
            f"{name} agreement (float64, 100 steps): relative L2 difference {rel:.2e}, "
            f"max |simjax - exponax| {abs_max:.2e} (max |u| {scale:.2f})",
            flush=True,
        )
    for case in (case_ks(ks_steps, args.repeats), case_kolmogorov(kol_steps, args.repeats)):
        ratio = np.median(case["exponax"]) / np.median(case["simjax"])
        paired = (
            case["exponax"] / case["simjax"]
        )  # the two calls of one round saw about the same load
        print(
            f"{case['name']}: {case['steps']} steps, {args.repeats} interleaved rounds; steps/s "
            "median (min-max): "
            f"simjax {show(case['simjax'], case['steps'])}, exponax "
            f"{show(case['exponax'], case['steps'])}; "
            f"simjax/exponax speed ratio {ratio:.2f} (of the medians), {np.median(paired):.2f} "
            f"({paired.min():.2f}-{paired.max():.2f}) per round, "
            f"{case['exponax'].min() / case['simjax'].min():.2f} "
            "(fastest rounds); final fields' relative difference (float32) "
            f"{case['difference']:.1e}",
            flush=True,
        )
    print(f"load average after the timed cases {os.getloadavg()[0]:.2f}", flush=True)
    if args.no_memory:
        return
    steps = [625, 1250, 2500, 5000, 10000]
    nested = gradient_memory(steps, 2)
    plain = gradient_memory(steps[:3], 1)
    p_nested = np.polyfit(np.log(steps), np.log(nested), 1)[0]
    p_plain = np.polyfit(np.log(steps[:3]), np.log(plain), 1)[0]
    print("gradient temp memory (MiB), Burgers N=256 float64:")
    print("  steps        " + " ".join(f"{n:>8d}" for n in steps))
    print(
        "  checkpointed "
        + " ".join(f"{b / 2**20:8.2f}" for b in nested)
        + f"   exponent {p_nested:.2f}"
    )
    print(
        "  plain scan   "
        + " ".join(f"{b / 2**20:8.2f}" for b in plain)
        + f"   exponent {p_plain:.2f}"
    )
    g, elapsed, rss = gradient_run()
    print(
        f"10,000-step gradient d(loss)/d(viscosity) = {g:.6g} in {elapsed:.1f} s (incl. compile), "
        f"peak RSS {rss:.0f} MiB"
    )


if __name__ == "__main__":
    main()
