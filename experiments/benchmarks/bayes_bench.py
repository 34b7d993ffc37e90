"""Bayesian inference benchmark: effective samples per second on the lynx-hare model.

simjax (`inference.build_bayes_model`: Lotka-Volterra through diffrax with
forward-sensitivity gradients) against the same model written directly in NumPyro with
`jax.experimental.ode.odeint`, as NumPyro's own predator-prey example does. Both sides
use the same data, priors, noise model, tolerances (rtol 1e-6, atol 1e-5), a
Dormand-Prince 5(4) method, NUTS settings, chains and seeds.

Each side runs twice; the second run reuses the compiled sampler and is the one timed.
Printed: minimum bulk ESS over the quantities, sampling time, ESS/s and the ratio.

Run: python experiments/benchmarks/bayes_bench.py [--warmup N --samples N --chains N]
"""

from __future__ import annotations

import argparse
import platform
import tempfile
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
from jax.experimental.ode import odeint
from numpyro.infer import MCMC, NUTS, init_to_median

import sim
from inference import build_bayes_model
from inference._bayes import ess_bulk, nuts_kernel

DATA = Path(__file__).resolve().parents[1] / "data" / "lynx_hare.h5"
RTOL, ATOL = 1e-6, 1e-5

CONFIG = f"""
[model]
name = "lotka_volterra"
[time]
t0 = 0.0
[solver]
method = "dopri5"
rtol = {RTOL}
atol = {ATOL}
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


def lotka_volterra(z, t, theta):
    alpha, beta, gamma, delta = theta[0], theta[1], theta[2], theta[3]
    prey, predator = z[0], z[1]
    return jnp.stack([alpha * prey - beta * prey * predator, delta * prey * predator - gamma * predator])


def direct_model(years, observed):
    """The lynx-hare model written directly in NumPyro with odeint."""
    z_init = numpyro.sample("z_init", dist.LogNormal(jnp.log(10.0), 1.0).expand([2]))
    theta = numpyro.sample(
        "theta",
        dist.TruncatedNormal(loc=jnp.array([1.0, 0.05, 1.0, 0.05]), scale=jnp.array([0.5, 0.05, 0.5, 0.05]), low=0.0),
    )
    z = odeint(lotka_volterra, z_init, years, theta, rtol=RTOL, atol=ATOL, mxstep=1000)
    sigma = numpyro.sample("sigma", dist.LogNormal(-1.0, 1.0).expand([2]))
    numpyro.sample("y", dist.LogNormal(jnp.log(z), sigma), obs=observed)


def min_ess(samples: dict) -> float:
    values = []
    for draws in samples.values():
        draws = np.asarray(draws)
        flat = draws.reshape(draws.shape[0], draws.shape[1], -1)
        values += [ess_bulk(flat[:, :, i]) for i in range(flat.shape[2])]
    return float(min(values))


def timed_runs(mcmc: MCMC, *args) -> tuple[float, float, int]:
    key = jax.random.PRNGKey(0)
    start = time.perf_counter()
    with jax.numpy_dtype_promotion("standard"):
        mcmc.run(key, *args, extra_fields=("diverging",))
        first = time.perf_counter() - start
        start = time.perf_counter()
        mcmc.run(jax.random.PRNGKey(1), *args, extra_fields=("diverging",))
    second = time.perf_counter() - start
    divergences = int(np.sum(np.asarray(mcmc.get_extra_fields()["diverging"])))
    return first, second, divergences


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--warmup", type=int, default=500)
    parser.add_argument("--samples", type=int, default=500)
    parser.add_argument("--chains", type=int, default=1)
    args = parser.parse_args()
    settings = dict(num_warmup=args.warmup, num_samples=args.samples, num_chains=args.chains, progress_bar=False)

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "bench.toml"
        path.write_text(CONFIG)
        model, obs, section = build_bayes_model(sim.load_config(path))
    ours = MCMC(nuts_kernel(model, section), **settings)
    ours_first, ours_time, ours_div = timed_runs(ours, model.problem.observed)
    ours_ess = min_ess(ours.get_samples(group_by_chain=True))

    years = jnp.asarray(obs.time)
    observed = jnp.stack([jnp.asarray(obs.values["prey"]), jnp.asarray(obs.values["predator"])], axis=1)
    theirs = MCMC(NUTS(direct_model, init_strategy=init_to_median(num_samples=15)), **settings)
    theirs_first, theirs_time, theirs_div = timed_runs(theirs, years, observed)
    theirs_ess = min_ess(theirs.get_samples(group_by_chain=True))

    print(f"machine: {platform.machine()}, jax {jax.__version__} on {jax.default_backend()}, numpyro {numpyro.__version__}")
    print(f"lynx-hare Lotka-Volterra, NUTS, {args.chains} chain(s) x ({args.warmup} warmup + {args.samples} samples), "
          f"rtol {RTOL}, atol {ATOL}")
    print(f"{'':30} {'first run':>10} {'timed run':>10} {'min ESS':>8} {'ESS/s':>8} {'divergences':>12}")
    print(f"{'NumPyro + odeint':30} {theirs_first:9.1f}s {theirs_time:9.1f}s {theirs_ess:8.0f} {theirs_ess / theirs_time:8.2f} {theirs_div:12d}")
    print(f"{'simjax':30} {ours_first:9.1f}s {ours_time:9.1f}s {ours_ess:8.0f} {ours_ess / ours_time:8.2f} {ours_div:12d}")
    print(f"ESS/s ratio simjax / NumPyro+odeint: {(ours_ess / ours_time) / (theirs_ess / theirs_time):.2f}x")


if __name__ == "__main__":
    main()
