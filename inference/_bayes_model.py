"""The `[infer]` section of a config and the NumPyro model it builds (`BayesModel`):
priors on the free quantities and the likelihood of the observations."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Literal

import jax
import jax.numpy as jnp
import numpy as np
import numpyro
import numpyro.distributions as dist
import pydantic
from pydantic import BaseModel, ConfigDict, Field

from sim import Config, DataError
from sim.core import seed_problem
from solvers import did_you_mean

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


class NoiseSection(BaseModel):
    """`[infer.noise]`: the noise model of observables without their own, and the prior
    of its sigma (one sigma per observable)."""

    model_config = ConfigDict(extra="forbid", strict=True, use_attribute_docstrings=True)
    model: Literal["normal", "lognormal", "poisson"] = "normal"
    """the noise model"""
    sigma: dict[str, Any] | None = None
    """the prior of each observable's sigma, a table like a prior's"""


class InferSection(BaseModel):
    """`[infer]`: sampler settings, priors (their keys are the free quantities), noise."""

    model_config = ConfigDict(extra="forbid", strict=True, use_attribute_docstrings=True)
    chains: int = Field(default=4, ge=1)
    """the number of chains"""
    warmup: int = Field(default=1000, ge=1)
    """warmup steps per chain"""
    samples: int = Field(default=1000, ge=1)
    """draws kept per chain"""
    seed: int = 0
    """seed of the sampler"""
    dense_mass: bool = False
    """a dense mass matrix (false: diagonal)"""
    target_accept: float = Field(default=0.8, gt=0, lt=1)
    """NUTS's target acceptance probability"""
    max_tree_depth: int = Field(default=10, ge=1, le=20)
    """the deepest NUTS tree (at most 2**depth - 1 steps)"""
    predictive_draws: int = Field(default=200, ge=1)
    """posterior draws simulated for the predictive bands"""
    start_candidates: int = Field(default=8, ge=1, le=64)
    """short optimisations each chain's start is chosen from (1: the prior median)"""
    priors: dict[str, Any] = Field(min_length=1)
    """free quantity = { dist = "...", ... }: the free quantities and their priors"""
    noise: NoiseSection = NoiseSection()
    """the noise model (`[infer.noise]`)"""


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


def _noise_scale_prior(config: Config, noise):
    """The checked prior of `[infer.noise] sigma` (lognormal(-1, 1) by default); None
    for poisson noise, which has no scale."""
    if noise.model == "poisson":
        if noise.sigma is not None:
            raise config.error("infer.noise.sigma", "the poisson noise model has no sigma")
        return None
    spec = check_prior(
        config, "infer.noise.sigma", noise.sigma or {"dist": "lognormal", "loc": -1.0, "scale": 1.0}
    )
    if prior_support(spec)[0] < 0:
        raise config.error(
            "infer.noise.sigma.dist",
            "a noise scale must be positive: use halfnormal, halfcauchy, lognormal, "
            "exponential, gamma or a truncated_normal with low >= 0",
        )
    return spec


def build_bayes_model(
    config: Config, data: str | Path | None = None, section: InferSection | None = None
) -> tuple[BayesModel, Observations | list[Observations], InferSection]:
    """Validate `[data]` (or `[[experiments]]`) and `[infer]` against the model; build
    the NumPyro model.

    Arguments:
        config: with `[infer]` and `[data]` or `[[experiments]]`.
        data: a file that replaces `data.file`, or None.
        section: the `[infer]` section, validated; None reads it from `config`.

    Returns:
        (`BayesModel`, observations (a list with `[[experiments]]`), `[infer]` section).

    Raises:
        ConfigError: a prior or noise model that does not fit (negative values for a
            positive parameter, a sigma for poisson noise), or another problem.
        DataError: observations the noise model cannot take (lognormal: not positive;
            poisson: not whole numbers >= 0), or a data file that cannot be read.
    """
    section = section or infer_section(config)
    priors_raw = flatten_priors(section.priors)
    priors = {}
    for name, spec in priors_raw.items():
        priors[name] = check_prior(config, f"infer.priors.{name}", spec)
    noise = section.noise
    sigma_spec = _noise_scale_prior(config, noise)
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
