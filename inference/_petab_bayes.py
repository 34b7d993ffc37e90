"""Bayesian inference for PEtab problems: NumPyro NUTS over the estimated parameters on
their PEtab scales.

The posterior is PEtab's: the likelihood of the measurements (the problem's objective)
times the objective priors of the parameter table; a parameter without one has a
uniform prior within its bounds on its scale (`parameterScaleUniform`, PEtab's default),
and every parameter stays within its bounds. A prior given for the linear value
(`normal`, `laplace`, `uniform`, `logNormal`, `logLaplace`) of a parameter estimated on
a log scale gains the Jacobian of the change of variables, so that the density sampled
is the prior's. Gradients of the likelihood come from the problem's `value_and_grad`
(forward sensitivities for few parameters), handed to NumPyro through a custom VJP.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from sim.core import Result, immediate, write_group, write_root_attrs
from solvers import checks_as_nan

from ._chains import chain_method, run_chains, sampled_on, spreads
from ._diagnostics import summarise
from ._petab_problem import PetabProblem, _negative_log_prior, to_linear
from ._result_text import summary_repr


def _log_jacobian(x, scale: str):
    """log |d value / d x| for a value on `scale`."""
    if scale == "log10":
        return x * math.log(10.0) + math.log(math.log(10.0))
    if scale == "log":
        return x
    return jnp.zeros_like(x)


class Heartbeat:
    """What NUTS is doing between two chunks of steps (`run_chains` reports each chunk,
    a tenth of the steps): a line at most every `every` seconds counting the
    evaluations of the likelihood and its gradient, each chain's, and the time each
    took. A NUTS step takes from 1 to 1023 of them (tree depth 10), and one evaluation
    of a PEtab problem solves every condition, so a chunk of a problem such as Boehm
    2014's may take an hour; this says it is at work, and how fast, and (given the
    run's `steps`, warmup and samples) what the whole run costs at that rate: a tuned
    chain's steps take 7 to 63 evaluations (trees of depth 3 to 6), a step early in the
    warmup up to 1023.

    Called on the host (`jax.debug.callback`) once per chain and evaluation."""

    def __init__(
        self, log: Callable[[str], None], chains: int, every: float = 10.0, steps: int | None = None
    ):
        self.log, self.chains, self.every, self.steps = log, chains, every, steps
        self.calls = 0
        self.start = self.last = time.monotonic()
        self.running = False  # (until the chains have started: before, the start is found)

    def restart(self) -> None:
        """Count from here (the chains have started: their compilation is behind)."""
        self.running = True
        self.calls = 0
        self.start = self.last = time.monotonic()

    def __call__(self, _value) -> None:
        self.calls += 1
        now = time.monotonic()
        count = self.calls // self.chains
        if self.running and count and now - self.last >= self.every:
            self.last = now
            each = (now - self.start) / max(count, 1)
            line = (
                f"NUTS: {count:,} evaluations of the likelihood and its gradient per chain in "
                f"{now - self.start:.0f} s ({each:.2g} s each; a step takes 1 to 1023)"
            )
            if self.steps:
                line += (
                    f"; at this rate the {self.steps:,} steps take "
                    f"{_duration(7 * self.steps * each)} to {_duration(63 * self.steps * each)} at "
                    "7 to 63 evaluations a step"
                )
            self.log(line)


def _duration(seconds: float) -> str:
    """A duration in the unit that reads best: 40 s, 12 min, 3.5 h, 2.1 days."""
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    if seconds < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


def numpyro_model(problem: PetabProblem, heartbeat: Heartbeat | None = None):
    """The NumPyro model of a PEtab problem's posterior: one site `x` [p] on the
    parameters' scales within their bounds; `heartbeat` is told of every evaluation of
    the likelihood's gradient."""
    import numpyro
    import numpyro.distributions as dist

    lower, upper = problem.bounds()
    value_and_grad = problem.value_and_grad()
    estimated = [p for p in problem.parameters if p.estimate]

    @jax.custom_vjp
    def likelihood(x):
        return problem.objective(x)

    def forward(x):
        f, g = value_and_grad(x)
        if heartbeat is not None:
            jax.debug.callback(heartbeat, f)
        return f, g

    def backward(g, cotangent):
        return (cotangent * g,)

    likelihood.defvjp(forward, backward)

    def model():
        # (the bounds as NumPy arrays: jnp arrays made while a chain's start is traced
        # would be tracers, kept by the kernel's transforms past the trace)
        x = numpyro.sample("x", dist.Uniform(lower, upper).to_event(1))
        prior = 0.0
        for k, p in enumerate(estimated):
            if p.prior:
                # (the box's uniform density is a constant; a prior multiplies it)
                prior = prior - _negative_log_prior(x[k], p)
                if not p.prior.startswith("parameterScale"):
                    prior = prior + _log_jacobian(x[k], p.scale)
        numpyro.factor("prior", prior)
        numpyro.factor("likelihood", -likelihood(x))

    return model


@dataclasses.dataclass
class PetabPosterior(Result):
    """Posterior draws of a PEtab problem's estimated parameters (linear scale), with
    the posterior layout of a config's `sim infer` (no predictive bands)."""

    problem: str
    model: str
    seed: int
    posterior: dict[str, np.ndarray]
    diverging: np.ndarray
    summary: dict[str, dict[str, float]]

    @property
    def divergences(self) -> int:
        return int(np.sum(self.diverging))

    def __repr__(self) -> str:
        head = [f"problem={self.problem!r}", f"model={self.model!r}"]
        return summary_repr("PetabPosterior", head, self.summary, self.diverging)

    def write(self, f) -> None:
        write_root_attrs(
            f, format="simjax.posterior", model=self.model, config=self.problem, seed=self.seed
        )
        f.attrs["devices"] = sampled_on()
        write_group(f, "posterior", self.posterior)
        write_group(f, "sample_stats", {"diverging": self.diverging})
        summary = f.create_group("summary")
        names = list(self.summary)
        summary.create_dataset("quantity", data=np.array(names, dtype="S"))
        for stat in ("mean", "sd", "5%", "50%", "95%", "ess_bulk", "r_hat"):
            summary.create_dataset(stat, data=np.array([self.summary[n][stat] for n in names]))


@checks_as_nan()
def infer_petab(
    problem: PetabProblem,
    *,
    chains: int = 4,
    warmup: int = 500,
    samples: int = 500,
    seed: int = 0,
    progress: bool = False,
    log: Callable[[str], None] | None = None,
) -> PetabPosterior:
    """Sample a PEtab problem's posterior with NUTS; the chains start at the nominal
    parameters (where they lie within the bounds). With `progress` and `log`, a
    `Heartbeat` line every 10 s between the chunks' progress.

    Arguments:
        problem: the PEtab problem (`load_petab`).
        chains: the number of chains.
        warmup: warmup (adaptation) steps per chain.
        samples: draws kept per chain.
        seed: the seed of the chains' PRNG key.
        progress: show the chains' progress.
        log: called with lines for the log (how the chains are laid out on the devices,
            and with `progress` the heartbeat); None for none.

    Returns:
        A `PetabPosterior`: the draws of every estimated parameter [chains, samples]
        (linear scale), the divergences [chains, samples] and the summary statistics.

    Raises:
        NoValidStart: a chain starts where the posterior density or its gradient is not
            finite.
    """
    from numpyro.infer import NUTS, init_to_median, init_to_value

    lower, upper = problem.bounds()
    nominal = problem.nominal()
    inside = np.all(np.isfinite(nominal)) and np.all((nominal > lower) & (nominal < upper))
    init = (
        init_to_value(values={"x": jnp.asarray(nominal)})
        if inside
        else init_to_median(num_samples=15)
    )
    heartbeat = (
        Heartbeat(log, chains, steps=warmup + samples) if progress and log is not None else None
    )
    kernel = NUTS(numpyro_model(problem, heartbeat), init_strategy=init)
    method, _, plan = chain_method(
        chains, progress, spread=spreads([(problem.model, problem.solver)])
    )

    def started() -> None:
        log(plan)
        if heartbeat is not None:
            heartbeat.restart()

    with jax.numpy_dtype_promotion("standard"), immediate("sampling"):
        run = run_chains(
            kernel,
            (),
            chains=chains,
            warmup=warmup,
            samples=samples,
            key=jax.random.PRNGKey(seed),
            method=method,
            progress=progress,
            started=None if log is None else started,
        )
    x = run.samples["x"]
    scales = [p.scale for p in problem.parameters if p.estimate]
    posterior = {
        name: np.asarray(to_linear(x[..., k], scales[k]))
        for k, name in enumerate(problem.estimated)
    }
    return PetabPosterior(
        str(problem.path), problem.model.name, seed, posterior, run.diverging, summarise(posterior)
    )
