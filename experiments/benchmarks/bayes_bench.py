"""Bayesian inference benchmark: effective samples per second on the lynx-hare model.

Three sides sample the same posterior (data, priors, lognormal noise, tolerances rtol
1e-6 and atol 1e-5, a Dormand-Prince 5(4) method, NUTS settings, chains and seeds):

- simjax: the NumPyro model `inference.build_bayes_model` builds from a config, what
  `sim infer` samples (gradients by forward sensitivities on the lean core);
- NumPyro + odeint: the model written directly in NumPyro with
  `jax.experimental.ode.odeint` (continuous adjoint), as NumPyro's own predator-prey
  example does;
- NumPyro + diffrax: the same hand-written model with `diffrax.diffeqsolve` (Dopri5,
  PID control, backpropagation through the steps), to show where the time goes: its
  gradient cost only, unless `--diffrax-nuts` samples it too (with `DirectAdjoint`:
  diffrax's default checkpointed adjoint fails inside NumPyro's chains split over
  devices with this jax and equinox, and `DirectAdjoint` makes each run take minutes).

Every side runs its chains the same way: one per CPU device (the device count is set
to the number of cores before JAX starts, as `sim infer` does), several chains one
after another on each device when there are more chains than devices
(`inference._chains.chain_method`). For each seed the whole `MCMC.run` is timed (warmup
and sampling); the first seed of each side includes compilation and is reported apart.
Each `MCMC.run` traces its sampler anew (and compiles it or loads it from the
compilation cache), so a run of one warmup step and one draw is timed after each as
what a run pays before it samples. Printed per side: the median over the other seeds of
the wall time, of that fixed part, of the minimum bulk ESS over the sampled quantities,
of ESS/s over the whole run and over the run less its fixed part (sampling ESS/s), with
their spreads (min-max), and divergences; then the ratios of the medians. A second table gives the
cost of one log-density gradient at the posterior mean inside a compiled loop (what NUTS pays per
leapfrog step), in CPU time.

XLA settings: importing `sim` raises XLA's threshold for compiling a small loop whole
(`sim._xla_flags`), for every side of this process. To time every side with XLA's
default instead, run with
XLA_FLAGS=--xla_backend_extra_options=xla_cpu_small_while_loop_byte_threshold=1024
(experiments/benchmarks/RESULTS.md gives both).

Run: python experiments/benchmarks/bayes_bench.py [--chains 4 --warmup 500 --samples 500 --seeds 4]
[--rtol 1e-6 --atol 1e-5]. At these tolerances the posterior has a second mode (a poor fit,
40 nats below the main one) whose basin holds the prior median; a chain started there by
`init_to_median`, as the hand-written models start, can stay in it through 500 warmup
steps (its minimum ESS then falls to about 10). `sim infer`'s chains start at the best of
8 optimised points (`inference._nuts.SearchedNUTS`), inside the timed `MCMC.run`.
"""

from __future__ import annotations

import os

# (before JAX starts: one CPU device per core, as `sim infer` has)
_cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
if "xla_force_host_platform_device_count" not in os.environ.get("XLA_FLAGS", ""):
    os.environ["XLA_FLAGS"] = (
        f"{os.environ.get('XLA_FLAGS', '')} --xla_force_host_platform_device_count={_cores}".strip()
    )

import argparse  # noqa: E402
import platform  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import diffrax  # noqa: E402
import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import numpyro  # noqa: E402
import numpyro.distributions as dist  # noqa: E402
from jax.experimental.ode import odeint  # noqa: E402
from jax.flatten_util import ravel_pytree  # noqa: E402
from numpyro.infer import MCMC, NUTS, init_to_median  # noqa: E402
from numpyro.infer.util import log_density  # noqa: E402

import sim  # noqa: E402

sim.configure_jax()  # float64, the compilation cache, XLA's options (as the `sim` command)
from inference import build_bayes_model  # noqa: E402
from inference._chains import chain_method  # noqa: E402
from inference._diagnostics import ess_bulk  # noqa: E402
from inference._nuts import nuts_kernel  # noqa: E402

DATA = Path(__file__).resolve().parents[1] / "data" / "lynx_hare.h5"
RTOL, ATOL = 1e-6, 1e-5


def config(rtol: float, atol: float) -> str:
    """The `sim infer` config of the model, at these tolerances."""
    return f"""
[model]
name = "lotka_volterra"
[time]
t0 = 0.0
[solver]
method = "dopri5"
rtol = {rtol}
atol = {atol}
max_steps = 1000
[data]
file = "{DATA}"
time = "/year"
time_offset = 1900.0
[data.observables]
prey = "/hare"
predator = "/lynx"
[infer.priors]
alpha = {{ dist = "truncated_normal", loc = 1.0, scale = 0.5, low = 0.0 }}
beta = {{ dist = "truncated_normal", loc = 0.05, scale = 0.05, low = 0.0 }}
gamma = {{ dist = "truncated_normal", loc = 1.0, scale = 0.5, low = 0.0 }}
delta = {{ dist = "truncated_normal", loc = 0.05, scale = 0.05, low = 0.0 }}
"initial.prey" = {{ dist = "lognormal", loc = 2.302585092994046, scale = 1.0 }}
"initial.predator" = {{ dist = "lognormal", loc = 2.302585092994046, scale = 1.0 }}
[infer.noise]
model = "lognormal"
sigma = {{ dist = "lognormal", loc = -1.0, scale = 1.0 }}
"""


# A point near the posterior mean (Carpenter 2018, as `sim infer` reproduces it).
POINT = {
    "alpha": 0.55,
    "beta": 0.028,
    "gamma": 0.8,
    "delta": 0.024,
    "initial.prey": 34.0,
    "initial.predator": 6.0,
    "sigma": 0.25,
}


def lotka_volterra(z, t, theta):
    alpha, beta, gamma, delta = theta[0], theta[1], theta[2], theta[3]
    prey, predator = z[0], z[1]
    return jnp.stack(
        [alpha * prey - beta * prey * predator, delta * prey * predator - gamma * predator]
    )


def _priors():
    z_init = numpyro.sample("z_init", dist.LogNormal(jnp.log(10.0), 1.0).expand([2]))
    theta = numpyro.sample(
        "theta",
        dist.TruncatedNormal(
            loc=jnp.array([1.0, 0.05, 1.0, 0.05]), scale=jnp.array([0.5, 0.05, 0.5, 0.05]), low=0.0
        ),
    )
    return z_init, theta


def odeint_model(years, observed):
    """The lynx-hare model written directly in NumPyro with odeint."""
    z_init, theta = _priors()
    z = odeint(lotka_volterra, z_init, years, theta, rtol=RTOL, atol=ATOL, mxstep=1000)
    sigma = numpyro.sample("sigma", dist.LogNormal(-1.0, 1.0).expand([2]))
    numpyro.sample("y", dist.LogNormal(jnp.log(z), sigma), obs=observed)


def diffrax_model(years, observed, adjoint=None):
    """The same model with diffrax's Dopri5 (reverse mode through the steps)."""
    z_init, theta = _priors()
    # (diffrax's loop needs the state's dtype fixed: no weakly typed draws)
    z_init, theta = (jnp.asarray(v, dtype=jnp.float64) for v in (z_init, theta))
    solution = diffrax.diffeqsolve(
        diffrax.ODETerm(lambda t, z, p: lotka_volterra(z, t, p)),
        diffrax.Dopri5(),
        t0=years[0],
        t1=years[-1],
        dt0=None,
        y0=z_init,
        args=theta,
        saveat=diffrax.SaveAt(ts=years),
        stepsize_controller=diffrax.PIDController(rtol=RTOL, atol=ATOL),
        max_steps=1000,
        adjoint=adjoint or diffrax.RecursiveCheckpointAdjoint(),
        throw=False,
    )
    sigma = numpyro.sample("sigma", dist.LogNormal(-1.0, 1.0).expand([2]))
    numpyro.sample("y", dist.LogNormal(jnp.log(solution.ys), sigma), obs=observed)


def min_ess(samples: dict) -> float:
    values = []
    for draws in samples.values():
        draws = np.asarray(draws)
        flat = draws.reshape(draws.shape[0], draws.shape[1], -1)
        values += [ess_bulk(flat[:, :, i]) for i in range(flat.shape[2])]
    return float(min(values))


def gradient_cost(model, args, point, rounds: int = 5, loop: int = 200) -> float:
    """CPU microseconds per log-density gradient at `point`, in a compiled loop."""
    flat, unravel = ravel_pytree(point)
    value_and_grad = jax.value_and_grad(lambda v: log_density(model, args, {}, unravel(v))[0])

    def looped(v):
        return jax.lax.fori_loop(0, loop, lambda i, c: c + 1e-12 * value_and_grad(c)[1], v)

    with jax.numpy_dtype_promotion("standard"):
        fn = jax.jit(looped)
        fn(flat).block_until_ready()
        costs = []
        for _ in range(rounds):
            start = time.process_time()
            fn(flat).block_until_ready()
            costs.append((time.process_time() - start) / loop * 1e6)
    return statistics.median(costs)


def main() -> None:
    global RTOL, ATOL  # (set from the options: the hand-written models read them)
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warmup", type=int, default=500)
    parser.add_argument("--samples", type=int, default=500)
    parser.add_argument("--chains", type=int, default=4)
    parser.add_argument(
        "--seeds",
        type=int,
        default=4,
        help="runs per side: the first compiles, the others are timed",
    )
    parser.add_argument(
        "--rtol",
        type=float,
        default=RTOL,
        help="every side's relative tolerance (the full `sim infer` config: 1e-8)",
    )
    parser.add_argument("--atol", type=float, default=ATOL)
    parser.add_argument(
        "--diffrax-nuts", action="store_true", help="also sample the NumPyro + diffrax model (slow)"
    )
    args = parser.parse_args()
    RTOL, ATOL = args.rtol, args.atol
    method, _, plan = chain_method(args.chains, False)

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.toml"
        path.write_text(config(RTOL, ATOL))
        model, obs, section = build_bayes_model(sim.load_config(path))
    years = jnp.asarray(obs.time)
    observed = jnp.stack(
        [jnp.asarray(obs.values["prey"]), jnp.asarray(obs.values["predator"])], axis=1
    )
    settings = dict(
        num_warmup=args.warmup,
        num_samples=args.samples,
        num_chains=args.chains,
        chain_method=method,
        progress_bar=False,
    )
    init = init_to_median(num_samples=15)
    sides = {
        "simjax": (nuts_kernel(model, section), (model.problem.observed,)),
        "NumPyro + odeint": (NUTS(odeint_model, init_strategy=init), (years, observed)),
    }
    if args.diffrax_nuts:
        # (the checkpointed loop of diffrax's default adjoint is closure-converted with
        # another pytree than it is called with inside the chains' pmap and lax.map)
        sides["NumPyro + diffrax"] = (
            NUTS(diffrax_model, init_strategy=init),
            (years, observed, diffrax.DirectAdjoint()),
        )
    runs: dict[str, list[tuple[float, float, int]]] = {name: [] for name in sides}
    fixed: dict[str, list[float]] = {name: [] for name in sides}
    load_before = os.getloadavg()

    def run(name: str, seed: int, warmup: int, samples: int) -> tuple[float, MCMC]:
        kernel, model_args = sides[name]
        mcmc = MCMC(kernel, **{**settings, "num_warmup": warmup, "num_samples": samples})
        start = time.perf_counter()
        with jax.numpy_dtype_promotion("standard"):
            mcmc.run(jax.random.PRNGKey(seed), *model_args, extra_fields=("diverging", "num_steps"))
        return time.perf_counter() - start, mcmc

    for seed in range(args.seeds):  # (seeds interleaved across the sides)
        for name in sides:
            wall, mcmc = run(name, seed, args.warmup, args.samples)
            divergences = int(np.sum(np.asarray(mcmc.get_extra_fields()["diverging"])))
            leapfrogs = float(np.mean(np.asarray(mcmc.get_extra_fields()["num_steps"])))
            runs[name].append((wall, min_ess(mcmc.get_samples(group_by_chain=True)), divergences))
            # Every MCMC.run traces the sampler again (and compiles it, or loads it from
            # the compilation cache): timed by a run of one warmup step and one draw.
            fixed[name].append(run(name, seed, 1, 1)[0])
            print(
                f"  seed {seed} {name}: {wall:.1f} s (of which {fixed[name][-1]:.1f} s each run "
                "pays before sampling), "
                f"min ESS {runs[name][-1][1]:.0f}, {divergences} divergences, {leapfrogs:.1f} "
                "leapfrog steps a draw",
                flush=True,
            )
    load_after = os.getloadavg()

    ours = {
        "alpha": POINT["alpha"],
        "beta": POINT["beta"],
        "gamma": POINT["gamma"],
        "delta": POINT["delta"],
        "initial.prey": POINT["initial.prey"],
        "initial.predator": POINT["initial.predator"],
        "sigma.prey": POINT["sigma"],
        "sigma.predator": POINT["sigma"],
    }
    theirs = {
        "theta": jnp.array([POINT[k] for k in ("alpha", "beta", "gamma", "delta")]),
        "z_init": jnp.array([POINT["initial.prey"], POINT["initial.predator"]]),
        "sigma": jnp.full(2, POINT["sigma"]),
    }
    costs = {
        "simjax": gradient_cost(
            model, (model.problem.observed,), {k: jnp.asarray(v) for k, v in ours.items()}
        ),
        "NumPyro + odeint": gradient_cost(odeint_model, (years, observed), theirs),
        "NumPyro + diffrax": gradient_cost(diffrax_model, (years, observed), theirs),
    }

    print(
        f"\nmachine: {platform.machine()}, {_cores} cores, jax {jax.__version__} on "
        f"{jax.default_backend()} "
        f"({jax.local_device_count()} devices), numpyro {numpyro.__version__}, diffrax "
        f"{diffrax.__version__}"
    )
    print(f"load average before {load_before[0]:.2f}, after {load_after[0]:.2f}")
    print(f"XLA_FLAGS (every side): {os.environ.get('XLA_FLAGS', '')}")
    print(
        f"lynx-hare Lotka-Volterra, NUTS, {plan}, {args.warmup} warmup + {args.samples} samples "
        f"per chain, rtol {RTOL}, atol {ATOL}"
    )
    print(
        "ESS/s: minimum bulk ESS over the wall time of the whole MCMC.run; sampling ESS/s: over "
        "that time less what a"
    )
    print(
        "run of one warmup step and one draw takes (tracing, compiling or loading the sampler, "
        "finding a start)"
    )
    print(
        f"{'':20} {'first run':>10} {'wall':>8} {'fixed':>7} {'min ESS':>8} {'ESS/s':>14} "
        f"{'sampling ESS/s':>20} {'div.*':>5} {'gradient':>10}"
    )
    rate, sampling = {}, {}
    if "NumPyro + diffrax" not in runs:
        print(
            f"{'NumPyro + diffrax':20} {'(not sampled: --diffrax-nuts)':>86} "
            f"{costs['NumPyro + diffrax']:8.0f}us"
        )
    for name, results in runs.items():
        keep = slice(1, None) if len(results) > 1 else slice(None)
        timed, costs_fixed = results[keep], fixed[name][keep]
        rates = [ess / wall for wall, ess, _ in timed]
        net = [
            ess / max(wall - f, 1e-9) for (wall, ess, _), f in zip(timed, costs_fixed, strict=False)
        ]
        rate[name], sampling[name] = statistics.median(rates), statistics.median(net)
        print(
            f"{name:20} {results[0][0]:9.1f}s {statistics.median(w for w, _, _ in timed):7.1f}s "
            f"{statistics.median(costs_fixed):6.1f}s "
            f"{statistics.median(e for _, e, _ in timed):8.0f} {rate[name]:5.1f} "
            f"({min(rates):.1f}-{max(rates):.1f}) "
            f"{sampling[name]:9.1f} ({min(net):.1f}-{max(net):.1f}) "
            f"{max(d for _, _, d in timed):5d} {costs[name]:8.0f}us"
        )
    print("* divergences of the worst timed seed")
    for other in (n for n in runs if n != "simjax"):
        print(
            f"simjax / {other}: ESS/s {rate['simjax'] / rate[other]:.2f}x, sampling ESS/s "
            f"{sampling['simjax'] / sampling[other]:.2f}x, "
            f"gradient cost {costs[other] / costs['simjax']:.2f}x"
        )


if __name__ == "__main__":
    main()
