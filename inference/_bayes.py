"""Bayesian inference with NumPyro: priors on free quantities, a noise model for the
observations, NUTS through the differentiable solver, diagnostics and predictive checks
(`infer`, what `sim infer` does, and the posterior it writes)."""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import h5py
import jax
import jax.numpy as jnp
import numpy as np
import numpyro.distributions as dist
from numpyro.infer import init_to_value

import sim
from sim import Config, DataError, InputError
from sim.core import (
    Result,
    family_of,
    immediate,
    memory_problem,
    optional_module,
    resolved_toml,
    seed_problem,
    warn_if_float32,
    write_group,
    write_root_attrs,
)
from solvers import checks_as_nan

from ._bayes_model import BayesModel, InferSection, build_bayes_model, infer_section
from ._chains import NoValidStart, chain_method, run_chains, sampled_on, spreads
from ._data import Observations
from ._diagnostics import QUANTILES, summarise
from ._fit import Experiments, Problem
from ._nuts import nuts_kernel
from ._priors import flatten_priors
from ._result_text import summary_repr


@dataclasses.dataclass
class PosteriorResult(Result):
    """Posterior draws, diagnostics and posterior predictive quantiles.

    Attributes:
        posterior: name -> draws [chain, draw] (free quantities and `sigma.<observable>`).
        diverging: [chain, draw] booleans.
        summary: name -> {mean, sd, 5%, 50%, 95%, ess_bulk, r_hat}.
        time, predictive: posterior predictive 5/50/95% quantiles of each observed
            observable on a fine time grid (observation noise included; for observation
            models, the quantiles of the predicted quantity, without noise).
        observations: the data (the first experiment's with `[[experiments]]`).
        experiments: name -> (time, predictive, observations) of each experiment.
        last_state: the NUTS state of every chain after its last step (`ChainRun`).
    """

    model: str
    config: str
    seed: int
    posterior: dict[str, np.ndarray]
    diverging: np.ndarray
    summary: dict[str, dict[str, float]]
    time: np.ndarray
    predictive: dict[str, dict[str, np.ndarray]]
    observations: Observations
    last_state: Any = None
    experiments: (
        dict[str, tuple[np.ndarray, dict[str, dict[str, np.ndarray]], Observations]] | None
    ) = None

    @property
    def divergences(self) -> int:
        return int(np.sum(self.diverging))

    def __repr__(self) -> str:
        return summary_repr(
            "PosteriorResult", [f"model={self.model!r}"], self.summary, self.diverging
        )

    def write(self, f: h5py.File) -> None:
        """The posterior layout (docs/architecture.md, File layouts) in `f`."""
        write_root_attrs(
            f, format="simjax.posterior", model=self.model, config=self.config, seed=self.seed
        )
        f.attrs["devices"] = sampled_on()
        write_group(f, "posterior", self.posterior)
        write_group(f, "sample_stats", {"diverging": self.diverging})
        summary = f.create_group("summary")
        names = list(self.summary)
        summary.create_dataset("quantity", data=np.array(names, dtype="S"))
        for stat in ("mean", "sd", "5%", "50%", "95%", "ess_bulk", "r_hat"):
            summary.create_dataset(stat, data=np.array([self.summary[n][stat] for n in names]))
        pred = f.create_group("predictive")
        pred.create_dataset("time", data=self.time)
        for name, quantiles in self.predictive.items():
            write_group(pred, name, quantiles)
        data = f.create_group("data")
        data.create_dataset("time", data=self.observations.time)
        write_group(data, "observables", self.observations.values)
        for name, (time, predictive, obs) in (self.experiments or {}).items():
            group = f.require_group(f"experiments/{name}")
            group.create_dataset("predictive/time", data=time)
            for observable, quantiles in predictive.items():
                write_group(group["predictive"], observable, quantiles)
            group.create_dataset("data/time", data=obs.time)
            write_group(group["data"], "observables", obs.values)

    def to_arviz(self):
        """The posterior as ArviZ InferenceData (the `arviz` extra).

        Raises:
            MissingExtra: arviz is not installed (an `ImportError`).
        """
        az = optional_module("arviz", "arviz", "ArviZ exports")

        groups = {"posterior": dict(self.posterior), "sample_stats": {"diverging": self.diverging}}
        if int(az.__version__.split(".")[0]) >= 1:
            return az.from_dict(groups)
        return az.from_dict(**groups)


def _posterior_predictive(
    model: BayesModel, problem: Problem, samples: dict[str, np.ndarray], draws: int, key
) -> tuple[np.ndarray, dict]:
    t0, t1 = float(problem.t_sim[0]), float(problem.t_sim[-1])
    flat = {k: np.asarray(v).reshape(-1) for k, v in samples.items()}
    total = len(next(iter(flat.values())))
    idx = np.linspace(0, total - 1, min(draws, total)).astype(int)
    t = jnp.linspace(t0, t1, 201)

    @jax.jit
    def one(x, sigma, k):
        if problem.observation is not None:
            curves = problem.curves(x, t)
            return {o.name: curves[o.name] for o in problem.observation.observed}
        obs = problem.simulate(x, t).observables
        out = {}
        for i, name in enumerate(problem.observed):
            mean = obs[name]
            kk = jax.random.fold_in(k, i)
            if model.noise == "poisson":
                out[name] = jax.random.poisson(kk, jnp.clip(mean, 0.0, None)).astype(float)
            elif model.noise == "lognormal":
                out[name] = mean * jnp.exp(sigma[name] * jax.random.normal(kk, mean.shape))
            else:
                out[name] = mean + sigma[name] * jax.random.normal(kk, mean.shape)
        return out

    xs = {f.name: jnp.asarray(flat[f.name][idx]) for f in problem.free}
    sigmas = {
        name: jnp.asarray(flat[f"sigma.{name}"][idx])
        if f"sigma.{name}" in flat
        else jnp.zeros(len(idx))
        for name in problem.observed
    }
    keys = jax.random.split(key, len(idx))
    sims = jax.vmap(one)(xs, sigmas, keys)
    pred = {}
    for name, values in sims.items():
        v = np.asarray(values)
        with warnings.catch_warnings():  # a time where every draw failed is NaN, silently
            warnings.simplefilter("ignore", RuntimeWarning)
            q = np.nanquantile(v, QUANTILES, axis=0)
        pred[name] = {"5%": q[0], "50%": q[1], "95%": q[2]}
    return np.asarray(t), pred


@checks_as_nan()
def infer(
    config: Config,
    data: str | Path | None = None,
    *,
    chains: int | None = None,
    warmup: int | None = None,
    samples: int | None = None,
    seed: int | None = None,
    init_from: str | Path | None = None,
    progress: bool = False,
    log: Callable[[str], None] | None = None,
) -> PosteriorResult:
    """Sample the posterior of a config's free quantities with NUTS (what `sim infer` does).

    Arguments:
        config: with `[data]` and `[infer]` (priors, noise, sampler settings).
        data: an HDF5 file that replaces `data.file`.
        chains, warmup, samples, seed: override the config's values.
        init_from: a fit file (`sim fit -o`); its estimates start the chains.
        progress: the sampling's progress on stderr (`run_chains`): a bar on a
            terminal, a line every tenth of the steps elsewhere.
        log: called with one sentence saying how the chains run on the devices
            (`chain_method`), once the chains have started.

    Returns:
        A `PosteriorResult`; `.save(path)` writes the posterior layout.

    Raises:
        InputError: a `seed` outside 0 to 2**63 - 1 (named `--seed`, the option that
            hands it in); ConfigError and DataError for the config and data.

    Examples:
        >>> posterior = infer(sim.load_config("experiments/lynx_hare.toml"), chains=2)
        >>> posterior.summary["alpha"]["mean"]
    """
    warn_if_float32("inference.infer")
    if seed is not None and seed_problem(seed):
        # (`sim infer --seed` hands its value here)
        raise InputError("--seed", "", seed_problem(seed))
    overrides = {"chains": chains, "warmup": warmup, "samples": samples, "seed": seed}
    section = infer_section(config, overrides)
    model, obs, section = build_bayes_model(config, data, section)
    _refuse_events(config, model)
    _check_memory(config, section, model, obs)
    init = None if init_from is None else _start_at_fit(init_from, model)
    method, _, plan = chain_method(
        section.chains, progress, spread=spreads((p.model, p.solver) for _, p in model.parts)
    )
    key = jax.random.PRNGKey(section.seed)
    solved = model.parts[0][1].model
    try:
        with jax.numpy_dtype_promotion("standard"), immediate("sampling"):
            run = run_chains(
                nuts_kernel(model, section, init),
                (model.problem.observed,),
                chains=section.chains,
                warmup=section.warmup,
                samples=section.samples,
                key=key,
                method=method,
                progress=progress,
                started=None if log is None else lambda: log(plan),
                notes=family_of(solved).solver_notes(solved, config),
            )
    except NoValidStart:
        raise _no_valid_start(config, model, init_from) from None
    draws = run.samples
    posterior = {k: np.asarray(v) for k, v in draws.items()}
    diverging = run.diverging
    with jax.numpy_dtype_promotion("standard"):
        predictions = [
            _posterior_predictive(
                model, p, draws, section.predictive_draws, jax.random.fold_in(key, 1 + k)
            )
            for k, (_, p) in enumerate(model.parts)
        ]
    time, predictive = predictions[0]
    observations = obs if isinstance(obs, list) else [obs]
    return PosteriorResult(
        model=model.problem.model.name,
        config=_resolved_config(config, section),
        seed=section.seed,
        posterior=posterior,
        diverging=diverging,
        summary=summarise(posterior),
        time=time,
        predictive=predictive,
        observations=observations[0],
        last_state=run.last_state,
        experiments={
            name: (*pred, o)
            for name, pred, o in zip(model.problem.names, predictions, observations, strict=False)
        }
        if isinstance(model.problem, Experiments)
        else None,
    )


def _refuse_events(config: Config, model: BayesModel) -> None:
    """Refuse a model with events: NUTS cannot sample it yet."""
    if getattr(model.problem.model, "events", tuple)():
        # (NUTS differentiates the log density in reverse mode; the event loop's
        # derivatives through event times are forward mode only)
        raise config.error(
            "events" if "events" in config.raw else "model",
            "sim infer does not sample models with events yet: NUTS needs reverse-mode gradients, "
            "which the event solver does not give; fit them with sim fit (levenberg_marquardt)",
        )


def _check_memory(
    config: Config, section: InferSection, model: BayesModel, obs: Observations | list
) -> None:
    """Refuse, before sampling, chains whose draws cannot fit in memory (each draw of
    every free quantity and observed observable, twice, float64)."""
    stored = (
        section.chains
        * section.samples
        * (
            len(model.priors)
            + sum(len(o.values) for o in (obs if isinstance(obs, list) else [obs]))
        )
    )
    problem = memory_problem(
        8 * 2 * stored, f"{section.chains:,} chains of {section.samples:,} draws"
    )
    if problem:
        raise config.error(
            "infer.samples" if section.samples >= section.chains else "infer.chains", problem
        )


def _start_at_fit(init_from: str | Path, model: BayesModel):
    """The init strategy that starts the chains at a fit file's estimates, each within
    the support of its prior."""
    values = _fit_estimates(init_from, list(model.priors))
    for name, value in values.items():
        if not bool(model.priors[name].support.check(jnp.asarray(value))):
            raise DataError(
                init_from,
                f"/estimate/{name}",
                f"{value:g} is outside the support of its prior (infer.priors.{name}); the "
                "chains cannot start there",
            )
    # (typed float64: a weakly typed start, from a Python float, gave the chains' state
    # other types after the first chunk than before it, and the chunk program was
    # compiled twice)
    return init_to_value(values={k: jnp.asarray(v, dtype=float) for k, v in values.items()})


def _resolved_config(config: Config, section: InferSection) -> str:
    """The config's text with `[infer]` as resolved (overrides and defaults in)."""
    resolved = section.model_dump()
    resolved["priors"] = {k: v for k, v in flatten_priors(section.priors).items()}
    resolved["noise"] = {k: v for k, v in resolved["noise"].items() if v is not None}
    return resolved_toml(config, infer=resolved)


def _no_valid_start(config: Config, model: BayesModel, init_from: str | Path | None) -> Exception:
    """The error for chains NumPyro found no start for (a zero or non-finite posterior
    density at every start it tried)."""
    if init_from is not None:
        return DataError(
            init_from,
            "/estimate",
            "the chains cannot start at these estimates: the posterior density there is zero or "
            "not finite (the solve fails, or the noise model rules the predictions out)",
        )
    # (the chains start near each prior's median: a prior that reaches beyond the allowed
    # range is to blame only where its median lies outside that range)
    reaching = [
        name
        for name, (low, high, closed) in model.limits.items()
        if not _allowed(_prior_median(model.priors[name]), low, high, closed)
    ]
    if reaching:
        names = ", ".join(reaching)
        return config.error(
            f"infer.priors.{reaching[0]}",
            "the chains found no valid start: they start at the median of a few prior draws, "
            f"which fell where {names} may not be "
            "(the prior reaches beyond the allowed range); give a prior with most of its "
            "probability in the allowed range",
        )
    return config.error(
        "infer.priors",
        "the chains found no valid start: at the median of a few prior draws the posterior density "
        "is zero or not finite "
        "(the solve fails, or the noise model rules the predictions out); move the priors or start "
        "from a fit with --init-from",
    )


def _prior_median(prior: dist.Distribution) -> float:
    """The median of a prior, estimated from 1,001 draws."""
    return float(np.median(np.asarray(prior.sample(jax.random.PRNGKey(0), (1001,)))))


def _allowed(value: float, low: float, high: float, closed: bool) -> bool:
    """Whether `value` lies in the allowed range of a free quantity (`BayesModel.limits`)."""
    return ((value >= low) if closed else (value > low)) and value <= high


def _fit_estimates(path: str | Path, names: list[str]) -> dict[str, float]:
    record = sim.read(path)
    if record.format != "simjax.fit":
        raise DataError(
            path, "", f"expected a fit file (format simjax.fit), got format {record.format!r}"
        )
    if "estimate" not in record or not isinstance(record["estimate"], dict):
        raise DataError(path, "/estimate", "no such group")
    values = {}
    for k, v in record["estimate"].items():
        if k not in names:
            continue
        value = np.asarray(v)
        if value.shape != () or value.dtype.kind not in "biuf":
            raise DataError(
                path,
                f"/estimate/{k}",
                f"expected a number, got {value.dtype} of shape {value.shape}",
            )
        values[k] = float(value)
        if not np.isfinite(values[k]):
            raise DataError(path, f"/estimate/{k}", f"expected a finite number, got {values[k]}")
    if not values:
        raise DataError(
            path, "/estimate", f"holds none of the free quantities ({', '.join(names)})"
        )
    return values
