"""Bayesian inference with NumPyro: priors on free quantities, a noise model for the
observations, NUTS through the differentiable solver, diagnostics and predictive checks."""

from __future__ import annotations

import dataclasses
import json
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import h5py
import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import optax
import pydantic
from numpyro.diagnostics import effective_sample_size, gelman_rubin
from numpyro.infer import NUTS, init_to_median, init_to_value
from pydantic import BaseModel, ConfigDict, Field
from scipy import stats

import sim
from sim import Config, DataError, InputError
from sim.core import (
    Result,
    immediate,
    memory_problem,
    resolved_toml,
    seed_problem,
    warn_if_float32,
    write_group,
    write_root_attrs,
)
from solvers import OdeSolver, checks_as_nan, did_you_mean

from ._data import Observations
from ._fit import Experiments, FitSection, Problem, experiment_problems, make_problem
from ._observation import NOISE_MODELS as OBSERVATION_NOISE
from ._priors import (
    allowed_range,
    check_prior,
    flatten_priors,
    make_distribution,
    outside_allowed,
    support as prior_support,
    support_conflict,
)

NOISE_MODELS = ("normal", "lognormal", "poisson")
QUANTILES = (0.05, 0.5, 0.95)


class NoiseSection(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    model: Literal["normal", "lognormal", "poisson"] = "normal"
    sigma: dict[str, Any] | None = None


class InferSection(BaseModel):
    """`[infer]`: sampler settings, priors (their keys are the free quantities), noise."""

    model_config = ConfigDict(extra="forbid", strict=True)
    chains: int = Field(default=4, ge=1)
    warmup: int = Field(default=1000, ge=1)
    samples: int = Field(default=1000, ge=1)
    seed: int = 0
    dense_mass: bool = False
    target_accept: float = Field(default=0.8, gt=0, lt=1)
    max_tree_depth: int = Field(default=10, ge=1, le=20)
    predictive_draws: int = Field(default=200, ge=1)
    start_candidates: int = Field(default=8, ge=1, le=64)
    priors: dict[str, Any] = Field(min_length=1)
    noise: NoiseSection = NoiseSection()


def infer_section(config: Config, overrides: dict[str, Any] | None = None) -> InferSection:
    raw = config.spec.infer
    if raw is None:
        raise config.error(
            "infer", "required section is missing (at least: [infer.priors] with one prior)"
        )
    raw = {**raw, **{k: v for k, v in (overrides or {}).items() if v is not None}}
    try:
        section = InferSection.model_validate(raw)
    except pydantic.ValidationError as e:
        err = e.errors()[0]
        key = "infer." + ".".join(str(p) for p in err["loc"] if not str(p).startswith("literal"))
        kind = err["type"]
        if kind == "extra_forbidden":
            fields = (
                InferSection.model_fields if len(err["loc"]) == 1 else NoiseSection.model_fields
            )
            msg = (
                "unknown key (expected one of: "
                f"{', '.join(fields)}).{did_you_mean(err['loc'][-1], fields)}"
            )
        elif kind == "literal_error":
            msg = f"expected one of {err['ctx']['expected']}, got {err['input']!r}"
        elif kind == "too_short":
            msg = "expected at least one prior (the free quantities)"
        elif kind == "missing":
            msg = "required key is missing"
        else:
            msg = f"{err['msg'][0].lower()}{err['msg'][1:]}, got {err.get('input')!r}"
        raise config.error(key, msg) from None
    problem = seed_problem(section.seed)
    if problem:
        raise config.error("infer.seed", problem)
    return section


@dataclasses.dataclass
class BayesModel:
    """A NumPyro model over a simjax simulator: call it (no arguments) inside NumPyro.

    The likelihood is the product over the experiments of `[[experiments]]` (one
    `Problem` each, in `Experiments`) of their observations' densities: under the
    observation models of their observables (`inference._observation`) where they
    have them, else under `noise` with one sigma per observable name (`sigma.<name>`,
    shared by the experiments that observe it).

    Attributes:
        problem: the simulator, fixed settings and data (`inference.make_problem`), or
            several experiments (`inference._fit.experiment_problems`).
        priors: free quantity name -> NumPyro distribution.
        noise: normal | lognormal | poisson (observables without observation models).
        sigma_prior: the prior of each observable's noise scale (not for poisson).
        limits: free quantities whose prior reaches beyond the values they may take
            (uniform [-1, 2] on a positive parameter) -> (low, high, whether low itself
            is allowed): outside, the posterior density is zero (the prior is truncated
            to the allowed range; the model is never run there for a result).
    """

    problem: Problem | Experiments
    priors: dict[str, dist.Distribution]
    noise: str
    sigma_prior: dist.Distribution | None
    limits: dict[str, tuple[float, float, bool]] = dataclasses.field(default_factory=dict)

    def sample_free(self) -> dict[str, jax.Array]:
        x = {name: numpyro.sample(name, prior) for name, prior in self.priors.items()}
        for name, (low, high, closed) in self.limits.items():
            v = x[name]
            ok = ((v >= low) if closed else (v > low)) & (v <= high)
            numpyro.factor(f"allowed.{name}", jnp.where(ok, 0.0, -jnp.inf))
        return x

    @property
    def parts(self) -> list[tuple[str, Problem]]:
        """(site prefix, problem) of each experiment ('' for a config's one `[data]`)."""
        if isinstance(self.problem, Experiments):
            return [
                (f"{name}.", p)
                for name, p in zip(self.problem.names, self.problem.problems, strict=False)
            ]
        return [("", self.problem)]

    def sample_sigma(self) -> dict[str, jax.Array]:
        if self.noise == "poisson":
            return {}
        names = dict.fromkeys(
            name for _, p in self.parts if p.observation is None for name in p.observed
        )
        return {name: numpyro.sample(f"sigma.{name}", self.sigma_prior) for name in names}

    def likelihood(self, mean: jax.Array, sigma: jax.Array | None) -> dist.Distribution:
        """The distribution of one observation given the model's prediction `mean`."""
        if self.noise == "lognormal":
            return dist.LogNormal(jnp.log(mean), sigma)
        if self.noise == "normal":
            return dist.Normal(mean, sigma)
        return dist.Poisson(mean)

    def __call__(
        self, observed: dict[str, jax.Array] | tuple[dict[str, jax.Array], ...] | None = None
    ) -> None:
        """The NumPyro model. `observed` (name -> [T]; one such per experiment) replaces
        the problem's data, so one compiled sampler serves many data sets of the same shape."""
        x = self.sample_free()
        sigma = self.sample_sigma()
        observed = self.problem.observed if observed is None else observed
        for (prefix, problem), data in zip(
            self.parts, observed if isinstance(observed, tuple) else (observed,), strict=False
        ):
            if problem.observation is not None:
                # (a failed solve, or a prediction outside a noise model's support: zero likelihood)
                terms = problem.terms(x, data)
                ok = jnp.all(jnp.isfinite(terms))
                numpyro.factor(
                    f"{prefix}likelihood",
                    jnp.where(ok, -jnp.sum(jnp.where(jnp.isfinite(terms), terms, 0.0)), -jnp.inf),
                )
            else:
                self._sample_observed(prefix, problem.predict(x), data, sigma)

    def _sample_observed(
        self,
        prefix: str,
        pred: dict[str, jax.Array],
        observed: dict[str, jax.Array],
        sigma: dict[str, jax.Array],
    ) -> None:
        for name, y in observed.items():
            observed = jnp.isfinite(y)
            mean = pred[name]
            if self.noise in ("lognormal", "poisson"):
                # A failed solve or a non-positive prediction has zero likelihood.
                ok = jnp.all(jnp.isfinite(mean) & (mean > 0))
                mean = jnp.where(jnp.isfinite(mean) & (mean > 0), mean, 1.0)
            else:
                ok = jnp.all(jnp.isfinite(mean))
                mean = jnp.where(jnp.isfinite(mean), mean, 0.0)
            numpyro.factor(f"solved.{prefix}{name}", jnp.where(ok, 0.0, -jnp.inf))
            y_safe = jnp.where(observed, y, 1.0)
            with numpyro.handlers.mask(mask=observed):
                numpyro.sample(
                    f"obs.{prefix}{name}", self.likelihood(mean, sigma.get(name)), obs=y_safe
                )


def build_bayes_model(
    config: Config, data: str | Path | None = None, section: InferSection | None = None
) -> tuple[BayesModel, Observations | list[Observations], InferSection]:
    """Validate `[data]` (or `[[experiments]]`) and `[infer]` against the model; build
    the NumPyro model. The observations are a list with `[[experiments]]`."""
    section = section or infer_section(config)
    priors_raw = flatten_priors(section.priors)
    priors = {}
    for name, spec in priors_raw.items():
        priors[name] = check_prior(config, f"infer.priors.{name}", spec)
    noise = section.noise
    sigma_spec = None
    if noise.model == "poisson":
        if noise.sigma is not None:
            raise config.error("infer.noise.sigma", "the poisson noise model has no sigma")
    else:
        sigma_spec = check_prior(
            config,
            "infer.noise.sigma",
            noise.sigma or {"dist": "lognormal", "loc": -1.0, "scale": 1.0},
        )
        if prior_support(sigma_spec)[0] < 0:
            raise config.error(
                "infer.noise.sigma.dist",
                "a noise scale must be positive: use halfnormal, halfcauchy, lognormal, "
                "exponential, gamma or a truncated_normal with low >= 0",
            )
    if config.spec.experiments is not None:
        problem, _, obs = experiment_problems(
            config,
            data,
            FitSection(free=list(priors)),
            gradient="forward_sensitivity",
            free_key="infer.priors",
        )
        parts = list(zip(problem.problems, obs, strict=False))
    else:
        problem, _, obs = make_problem(config, data, list(priors), free_key="infer.priors")
        parts = [(problem, obs)]
    legacy = [o for p, o in parts if p.observation is None]
    if not legacy and "noise" in (config.spec.infer or {}):
        raise config.error(
            "infer.noise",
            f"the observables name their own noise models ({', '.join(OBSERVATION_NOISE)}) and "
            "sigmas; remove [infer.noise]",
        )
    for o in legacy:
        if noise.model == "lognormal":
            for name, y in o.values.items():
                if np.any(y[np.isfinite(y)] <= 0):
                    raise DataError(
                        o.path, name, "the lognormal noise model needs positive observations"
                    )
        if noise.model == "poisson":
            for name, y in o.values.items():
                v = y[np.isfinite(y)]
                if np.any(v < 0) or np.any(v != np.round(v)):
                    raise DataError(
                        o.path, name, "the poisson noise model needs counts (whole numbers >= 0)"
                    )
    limits = {}
    for f in problem.free:
        model_constraint = f.transform
        support = make_distribution(priors[f.name]).support
        if model_constraint == "log" and support is dist.constraints.real:
            raise config.error(
                f"infer.priors.{f.name}.dist",
                f"{f.name} must be positive but a {priors[f.name]['dist']} prior allows negative "
                "values; use lognormal, halfnormal, halfcauchy, gamma, exponential or "
                "truncated_normal with low = 0",
            )
        # A prior with no probability where the quantity is allowed leaves the chains no
        # valid start (and would sample values the model does not take).
        conflict = support_conflict(priors[f.name], f.name, f.transform, f.low, f.high)
        if conflict:
            raise config.error(f"infer.priors.{f.name}", conflict)
        if outside_allowed(priors[f.name], f.transform, f.low, f.high):
            low, high, _ = allowed_range(f.transform, f.low, f.high)
            limits[f.name] = (low, high, f.transform != "log")
    model = BayesModel(
        problem=problem,
        priors={k: make_distribution(v) for k, v in priors.items()},
        noise=noise.model,
        sigma_prior=make_distribution(sigma_spec) if sigma_spec else None,
        limits=limits,
    )
    return model, obs, section


# ----------------------------------------------------------------------------- diagnostics


def _rank_normalise(draws: np.ndarray) -> np.ndarray:
    """Rank-normalised draws [chain, draw] (Vehtari et al. 2021, Bayesian Analysis 16(2))."""
    flat = draws.ravel()
    ranks = stats.rankdata(flat, method="average")
    z = stats.norm.ppf((ranks - 3.0 / 8.0) / (flat.size + 0.25))
    return z.reshape(draws.shape)


def ess_bulk(draws: np.ndarray) -> float:
    """Bulk effective sample size: the ESS of the rank-normalised split chains.

    NaN when it cannot be estimated: fewer than 4 draws per chain, draws that do not
    vary, or an estimate that is not a positive finite number (the autocorrelation
    estimate of a short run can make it negative: it is reported as NaN, never clamped
    to a made-up value)."""
    if draws.shape[1] < 4:
        return float("nan")
    with np.errstate(all="ignore"):
        ess = float(effective_sample_size(_rank_normalise(_split_chains(draws))))
    return ess if np.isfinite(ess) and ess > 0 else float("nan")


def _split_chains(draws: np.ndarray) -> np.ndarray:
    """Each chain's first and second half as two chains [2 chain, draw // 2]."""
    half = draws.shape[1] // 2
    return np.concatenate([draws[:, :half], draws[:, -half:]], axis=0)


def r_hat(draws: np.ndarray) -> float:
    """Rank-normalised split R-hat, the larger of its bulk and tail (folded) versions
    (Vehtari et al. 2021); NaN when it cannot be estimated (fewer than 4 draws per
    chain, draws that do not vary)."""
    if draws.shape[1] < 4:
        return float("nan")
    # (the chains split first, then ranked, as Vehtari et al. and ArviZ do: with an odd
    # number of draws the middle one takes no part)
    split = _split_chains(draws)
    with np.errstate(all="ignore"):
        bulk = gelman_rubin(_rank_normalise(split))
        folded = np.abs(split - np.median(split))
        tail = gelman_rubin(_rank_normalise(folded))
    value = float(max(bulk, tail))
    return value if np.isfinite(value) else float("nan")


def ess_tail(draws: np.ndarray) -> float:
    """Tail effective sample size: the smaller ESS of the indicators of the draws below
    their 5% and above their 95% quantile, over split chains (Vehtari et al. 2021); NaN
    when it cannot be estimated (see `ess_bulk`)."""
    if draws.shape[1] < 4:
        return float("nan")
    split = _split_chains(draws)
    low, high = np.quantile(split, [0.05, 0.95])
    out = []
    for indicator in (split <= low, split >= high):
        with np.errstate(all="ignore"):
            out.append(float(effective_sample_size(indicator.astype(float))))
    ess = min(out)
    return ess if np.isfinite(ess) and ess > 0 else float("nan")


def _listed(items: list[str], most: int = 4) -> str:
    more = f" and {len(items) - most} more" if len(items) > most else ""
    return ", ".join(items[:most]) + more


def sampling_warnings(
    posterior: dict[str, np.ndarray], diverging: np.ndarray, summary: dict[str, dict[str, float]]
) -> list[str]:
    """Lines that tell when the draws cannot be trusted, each with what to try: an r_hat
    above 1.01, a bulk or tail ESS below 100 per chain (the thresholds of Vehtari et al.
    2021, Bayesian Analysis 16(2)), any divergent transition. Empty when all is well."""
    chains = next(iter(posterior.values())).shape[0] if posterior else 1
    out = []
    mixing = [f"{n} {s['r_hat']:.3f}" for n, s in summary.items() if not s["r_hat"] <= 1.01]
    if mixing:
        out.append(
            f"warning: r_hat above 1.01 (or not estimable) for {_listed(mixing)}: the chains have "
            "not mixed; "
            "run a longer warmup and more samples (--warmup, --samples), or reparametrise (priors "
            "on the scale the data inform, e.g. log)"
        )
    need = 100 * chains
    thin = []
    for n, s in summary.items():
        tail = ess_tail(np.asarray(posterior[n], dtype=float)) if n in posterior else float("nan")
        if not (s["ess_bulk"] >= need and tail >= need):
            thin.append(f"{n} {s['ess_bulk']:.0f}/{tail:.0f}")
    if thin:
        out.append(
            f"warning: bulk/tail ESS below 100 per chain ({need} for {chains} "
            f"chain{'s' if chains > 1 else ''}) for {_listed(thin)}: "
            "means and 5%/95% quantiles are unreliable; run more samples (--samples) and warmup "
            "(--warmup), or reparametrise"
        )
    count = int(np.sum(diverging))
    if count:
        out.append(
            f"warning: {count} divergent transition{'s' if count > 1 else ''} "
            f"({100 * count / max(np.size(diverging), 1):.2g}% of draws): "
            "the sampler missed part of the posterior; raise [infer] target_accept (e.g. 0.95, "
            "--set infer.target_accept=0.95) or reparametrise"
        )
    return out


def summarise(posterior: dict[str, np.ndarray]) -> dict[str, dict[str, float]]:
    """mean, sd, 5%, 50%, 95%, ess_bulk and r_hat of each scalar quantity [chain, draw].
    A statistic that cannot be estimated from the draws (sd of one draw; ess_bulk and
    r_hat of a short run, see `ess_bulk`) is NaN; ess_bulk is never negative."""
    out = {}
    for name, draws in posterior.items():
        draws = np.asarray(draws, dtype=float)
        q = np.quantile(draws, QUANTILES)
        out[name] = {
            "mean": float(draws.mean()),
            "sd": float(draws.std(ddof=1)) if draws.size > 1 else float("nan"),
            "5%": float(q[0]),
            "50%": float(q[1]),
            "95%": float(q[2]),
            "ess_bulk": ess_bulk(draws),
            "r_hat": r_hat(draws),
        }
    return out


# ----------------------------------------------------------------------------- results


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
        """The posterior as ArviZ InferenceData (needs arviz)."""
        import arviz as az

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

    Example:
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
    if getattr(model.problem.model, "events", tuple)():
        # (NUTS differentiates the log density in reverse mode; the event loop's
        # derivatives through event times are forward mode only)
        raise config.error(
            "events" if "events" in config.raw else "model",
            "sim infer does not sample models with events yet: NUTS needs reverse-mode gradients, "
            "which the event solver does not give; fit them with sim fit (levenberg_marquardt)",
        )
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
    init = None
    if init_from is not None:
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
        init = init_to_value(values={k: jnp.asarray(v, dtype=float) for k, v in values.items()})
    method, _, plan = chain_method(
        section.chains, progress, spread=spreads(p.solver for _, p in model.parts)
    )
    key = jax.random.PRNGKey(section.seed)
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
    resolved = section.model_dump()
    resolved["priors"] = {k: v for k, v in flatten_priors(section.priors).items()}
    resolved["noise"] = {k: v for k, v in resolved["noise"].items() if v is not None}
    text = resolved_toml(config, infer=resolved)
    return PosteriorResult(
        model=model.problem.model.name,
        config=text,
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


def chain_method(chains: int, progress: bool, *, spread: bool = True) -> tuple[Any, bool, str]:
    """How `chains` chains run on this machine's devices: (a NumPyro chain_method,
    whether NumPyro's progress bar can follow it, a sentence for the log).

    The draws depend neither on the layout nor on the process's device count. Every
    chain is the same one-chain program (`_OnDevices`): the chains run in rounds over as many
    devices as divide their number (at most the device count; on one device, one chain after
    another), each on its own device, so a chain waits for no deeper tree of another and does
    the same arithmetic on one device as on four. `spread=False` (models solved by an
    implicit method, `spreads`) keeps every chain on one device, vectorised, whatever
    the device count. `sim infer` starts with one CPU device per core."""
    devices = jax.local_device_count()
    kind = jax.default_backend().upper()
    if chains == 1:
        return _OnDevices(1), False, "1 chain"
    if not spread:
        why = (
            " (an implicit solver's Newton iterations do not trace in a one-chain program)"
            if devices > 1
            else ""
        )
        return "vectorized", progress, f"{chains} chains vectorised on one {kind} device{why}"
    used = max(k for k in range(1, min(devices, chains) + 1) if chains % k == 0)
    if used == chains:
        return _OnDevices(used), False, f"{chains} chains in parallel, one per {kind} device"
    if used > 1:
        return (
            _OnDevices(used),
            False,
            f"{chains} chains on {used} {kind} devices, {chains // used} after one another on each",
        )
    return _OnDevices(1), False, f"{chains} chains on one {kind} device, one after another"


def spreads(solvers) -> bool:
    """Whether chains whose log density runs these solvers can be laid over several
    devices (`_OnDevices`): not with an implicit or IMEX ODE method, whose Newton
    iterations (optimistix's root find inside diffrax's steps) do not trace in a
    chain's start compiled alone with this jax, equinox and diffrax (a tracer escapes
    NumPyro's `init`; under `jax.pmap`, "pytree does not match out_structure")."""
    return not any(isinstance(s, OdeSolver) and s.kind != "explicit" for s in solvers)


def sampled_on() -> str:
    """The devices of this process, as a posterior file records them (JSON: platform and
    count). The draws do not depend on the count (`_OnDevices`); on another platform
    (GPU, CPU) the compiled arithmetic differs in the last bits, which NUTS turns into
    other draws."""
    return json.dumps({"platform": jax.default_backend(), "devices": jax.local_device_count()})


@dataclasses.dataclass(frozen=True)
class _OnDevices:
    """A NumPyro chain_method: the chains (leading axis) run in rounds of `count`, one
    chain per device of the first `count` devices in each round (chain c in round
    c // count, on device c % count).

    Every chain runs the same program: one chain's, compiled for a single device (by
    `jax.jit`, once per device used) and dispatched to each device of a round before
    any is waited for. So a chain's draws are the same bits for every `count` and in a
    process of any device count. (A program replicated by `jax.pmap` over two or more
    devices is partitioned by XLA's SPMD pass and optimised otherwise than the same
    program on one device: an ODE posterior's draws parted from the first chunk on,
    between rounds of one device and rounds of two, however many devices the process
    had. Chains vectorised or mapped one after another inside a device's program,
    NumPyro's other layouts, drift apart the same way.)"""

    count: int

    def __call__(self, one_chain: Callable) -> Callable:
        program = self.compiled(one_chain)

        def run(chain_args):
            return _joined([program(part) for part in _rounds(chain_args, self.count)])

        return run

    def compiled(self, one_chain: Callable) -> Callable:
        """`one_chain` over a round of chains [count, ...] -> their results [count, ...]
        (NumPy arrays), chain i on device i; its attribute `program` is the one-chain
        program (`jax.jit`)."""
        program = jax.jit(one_chain)
        devices = jax.local_devices()[: self.count]

        def run(chains):
            count = jax.tree.leaves(chains)[0].shape[0]
            parts = [
                program(jax.device_put(jax.tree.map(lambda x: x[i], chains), devices[i]))
                for i in range(count)
            ]
            return jax.tree.map(lambda *each: np.stack([np.asarray(x) for x in each]), *parts)

        run.program = program
        return run


def _rounds(tree, count: int) -> list:
    """[chain, ...] -> the rounds [count, ...] of `_OnDevices`."""
    chains = jax.tree.leaves(tree)[0].shape[0]
    return [jax.tree.map(lambda x: x[r : r + count], tree) for r in range(0, chains, count)]


def _joined(rounds: list):
    """The rounds [count, ...] of `_OnDevices` -> [chain, ...]."""
    return jax.tree.map(
        lambda *parts: jnp.concatenate(parts) if len(parts) > 1 else parts[0], *rounds
    )


def chunk_length(total: int) -> int:
    """Steps per chunk of a run of `total` steps: about a tenth of them (8 to 16 chunks),
    a length that divides `total` where one does, else the one that pads the last chunk
    least (the padded steps are run and dropped, so every chunk is the same program)."""
    best = None
    for n in range(min(8, total), min(16, total) + 1):
        length = -(-total // n)
        chunks = -(-total // length)
        rank = (chunks * length - total, abs(chunks - 10))
        if best is None or rank < best[0]:
            best = (rank, length)
    return best[1]


@dataclasses.dataclass
class ChainRun:
    """What `run_chains` gives: the draws after warmup and the chains' last state.

    Attributes:
        samples: site -> draws [chain, draw, ...] (constrained, as `MCMC.get_samples`).
        diverging: [chain, draw] booleans.
        last_state: the kernel's state of every chain after its last step (leading axis
            the chain), from which the chains could go on.
    """

    samples: dict[str, np.ndarray]
    diverging: np.ndarray
    last_state: Any


class NoValidStart(RuntimeError):
    """Some chain's start has a zero or non-finite posterior density (or gradient)."""


def run_chains(
    kernel,
    model_args: tuple,
    *,
    chains: int,
    warmup: int,
    samples: int,
    key: jax.Array,
    method,
    progress: bool = False,
    started: Callable[[], None] | None = None,
) -> ChainRun:
    """Run `chains` chains of an MCMC kernel (NUTS) for `warmup` + `samples` steps, in
    chunks: the draws NumPyro's `MCMC.run` gives for the same key, settings and
    `method`, and (`_OnDevices`) the same draws on any number of devices, in a process of
    any device count.

    One program starts the chains (`kernel.init`, one key per chain as MCMC makes
    them; see `chain_programs`), one compiled program advances the chains of a round
    (`_OnDevices`; all of them when vectorised) by `chunk_length` steps of
    `kernel.sample` and returns each step's constrained sites and divergence; warmup
    and sampling steps are the same program (the kernel adapts while its step counter
    is below `warmup`). Between two chunks the host reports progress (`sim._progress`)
    and is at a safe point for an interrupt; no program holds a host callback, so both
    are saved in the persistent compilation cache and the next run loads them.

    Arguments:
        kernel: a fresh NumPyro kernel (its `init` sets it up for this model).
        model_args: the model's arguments, constants of the compiled programs.
        method: how the chains lie on the devices (`chain_method`): `_OnDevices(count)`
            or "vectorized".
        progress: a bar on a terminal, a line every tenth of the steps elsewhere.
        started: called once every chain has a valid start, before the first chunk
            (a failed start prints nothing but its error).

    Raises:
        NoValidStart: a chain starts where the log density or its gradient is not
            finite (its initialisation found no valid point).
    """
    from sim.core import Progress, safe_point

    total = warmup + samples
    length = chunk_length(total)
    keys = jax.random.split(key, chains) if chains > 1 else key[None]
    init, chunk = chain_programs(kernel, model_args, warmup=warmup, length=length, method=method)
    rounds = _rounds(keys, method.count) if isinstance(method, _OnDevices) else [keys]
    parts, flags = [], []
    with Progress(enabled=progress, description="warmup") as bar:
        bar.start(total)
        try:
            states = [init(k) for k in rounds]
        except RuntimeError as e:  # (NumPyro's own check, when the start runs op by op)
            if "Cannot find valid initial parameters" not in str(e):
                raise
            raise NoValidStart(str(e)) from None
        for state in states:
            if not all(
                bool(np.all(np.isfinite(x)))
                for x in (state.potential_energy, *jax.tree.leaves(state.z_grad))
            ):
                raise NoValidStart("Cannot find valid initial parameters")
        if started is not None:
            started()
        for begin in range(0, total, length):
            safe_point()
            # (every round is dispatched before any is waited for)
            states, outs = zip(*(chunk(state) for state in states), strict=False)
            keep = slice(max(warmup - begin, 0), min(total - begin, length))
            if keep.start < keep.stop:
                z, diverging = jax.tree.map(
                    lambda *p: np.concatenate([np.asarray(x) for x in p]), *outs
                )
                parts.append(jax.tree.map(lambda x: x[:, keep], z))
                flags.append(diverging[:, keep])
            else:
                jax.block_until_ready(outs)
            done = min(begin + length, total)
            bar.describe("warmup" if done <= warmup else "sampling")
            bar.advance(done - begin)
    draws = {name: np.concatenate([p[name] for p in parts], axis=1) for name in parts[0]}
    return ChainRun(draws, np.concatenate(flags, axis=1), _joined(list(states)))


def chain_programs(
    kernel, model_args: tuple, *, warmup: int, length: int, method
) -> tuple[Callable, Callable]:
    """The two programs of `run_chains`: init(keys) -> the chains' states, and
    chunk(states) -> (the states `length` steps on, (constrained sites, diverging) of
    each step [chain, step, ...]), for the chains of one round of `_OnDevices` (one
    chain per device, each the same one-chain program) or all chains "vectorized" on
    one device.

    One chain per device starts as NumPyro's MCMC.run starts it with one chain per
    device (compiled), vectorised chains as MCMC.run starts those (op by op)."""

    def start(key):
        return kernel.init(key, warmup, None, model_args=model_args, model_kwargs={})

    vectorized = method == "vectorized"  # (then `kernel.init` vmaps itself and its `sample`)

    # (a step is a program of its own inside the loop, as in NumPyro's `fori_collect`:
    # inlined, XLA fuses it differently and the draws drift from MCMC.run's)
    @jax.jit
    def step(state):
        state = kernel.sample(state, model_args, {})
        constrain = kernel.postprocess_fn(model_args, {})
        return state, ((jax.vmap(constrain) if vectorized else constrain)(state.z), state.diverging)

    def advance(state):
        state, out = jax.lax.scan(lambda s, _: step(s), state, None, length=length)
        return state, jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), out) if vectorized else out

    if vectorized:
        return start, jax.jit(advance)
    return method.compiled(start), method.compiled(advance)


def nuts_kernel(model: BayesModel, section: InferSection, init=None) -> NUTS:
    """The NUTS kernel for a model and `[infer]` settings. Unless `init` says where the
    chains start, each chain starts where the best of `section.start_candidates`
    optimised points lies (`SearchedNUTS`)."""
    settings = dict(
        dense_mass=section.dense_mass,
        target_accept_prob=section.target_accept,
        max_tree_depth=section.max_tree_depth,
    )
    if init is not None:
        return NUTS(model, init_strategy=init, **settings)
    return SearchedNUTS(model, candidates=section.start_candidates, **settings)


class SearchedNUTS(NUTS):
    """NUTS whose chains start at the lowest potential energy that `candidates` short
    optimisations reach, each chain from its own points.

    The candidates are the median of 15 prior draws and `candidates - 1` prior draws,
    each followed by `START_STEPS` Adam steps on the potential energy in the
    unconstrained space (a point where the density is zero or not finite counts as
    infinite). A posterior may have a local mode that a chain reaches from the prior
    and leaves only by chance: lynx-hare's at rtol 1e-6 (a poor fit, 40 nats below the
    main mode, with sigma near 1) holds the optimisation from the prior median in 3 of
    4 seeds and from half of the prior draws, and a chain started there was still in
    it after 500 warmup steps in 3 of 4 seeds (experiments/benchmarks/RESULTS.md).
    With one candidate, the chain starts at the prior median, unoptimised. The search
    runs inside `init`, so it is part of each chain's start program (compiled
    with the chain) and of every `MCMC.run`.
    """

    def __init__(self, model, *, candidates: int = 8, **settings):
        super().__init__(model, init_strategy=init_to_median(num_samples=15), **settings)
        self.candidates = candidates

    def init(
        self,
        rng_key,
        num_warmup,
        init_params=None,
        model_args=(),
        model_kwargs={},  # noqa: B006 (numpyro's signature; not mutated)
    ):
        if init_params is None and self.candidates > 1:
            search = lambda key: _searched_start(
                self.model, key, self.candidates, model_args, model_kwargs
            )  # noqa: E731
            key = (
                jax.random.fold_in(rng_key, 1)
                if jnp.ndim(rng_key) == 1
                else jax.vmap(jax.random.fold_in, (0, None))(rng_key, 1)
            )
            init_params = search(key) if jnp.ndim(rng_key) == 1 else jax.lax.map(search, key)
        return super().init(rng_key, num_warmup, init_params, model_args, model_kwargs)


# Adam steps of each candidate start and their size in the unconstrained space: from
# lynx-hare's prior draws, the best of 8 reaches each seed's main mode within 0.1% of its
# potential energy. (L-BFGS with its line search settles in fewer steps, but its program
# took 6x as long to compile and 20x as long to run, 1.6 s a chain, as NUTS's warmup.)
START_STEPS = 200
START_RATE = 0.1


def _searched_start(model, key, candidates: int, model_args, model_kwargs) -> dict[str, jax.Array]:
    """The unconstrained point of lowest potential energy that `START_STEPS` Adam steps
    from each of `candidates` points reach (`SearchedNUTS`)."""
    from jax.flatten_util import ravel_pytree
    from numpyro.infer import init_to_sample
    from numpyro.infer.util import initialize_model

    median_key, draws_key = jax.random.split(key)
    info = initialize_model(
        median_key,
        model,
        init_strategy=init_to_median(num_samples=15),
        model_args=model_args,
        model_kwargs=model_kwargs,
        dynamic_args=True,
    )
    potential = info.potential_fn(*model_args, **model_kwargs)
    drawn = initialize_model(
        jax.random.split(draws_key, candidates - 1),
        model,
        init_strategy=init_to_sample,
        model_args=model_args,
        model_kwargs=model_kwargs,
    )
    start, unravel = ravel_pytree(info.param_info.z)
    points = jnp.concatenate(
        [start[None], jax.vmap(lambda z: ravel_pytree(z)[0])(drawn.param_info.z)]
    )

    def energy(flat):
        value = potential(unravel(flat))
        return jnp.where(jnp.isfinite(value), value, jnp.inf)

    optimiser = optax.adam(START_RATE)

    def optimised(point):
        def step(carry, _):
            point, state = carry
            grad = jax.grad(energy)(point)
            updates, state = optimiser.update(
                jnp.where(jnp.isfinite(grad), grad, 0.0), state, point
            )
            return (optax.apply_updates(point, updates), state), None

        (point, _), _ = jax.lax.scan(step, (point, optimiser.init(point)), None, length=START_STEPS)
        return point, energy(point)

    ends, values = jax.vmap(optimised)(points)  # (`energy` is inf wherever it is not finite)
    best = jnp.argmin(values)
    # (where every optimisation failed, the prior median: its own check then refuses it)
    return unravel(jnp.where(jnp.isfinite(values[best]), ends[best], start))


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
