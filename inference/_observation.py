"""Observation models: what each observed quantity is and how it is noisy.

An observed quantity is a model observable, or a formula of the model's states,
observables and parameters (and of free quantities that are not the model's), written
in the expression language of text models (`physics._expressions.parse`). Its noise is
one of `NOISE_MODELS`: normal or Laplace, on the linear, natural-log or log10 scale of
the data and the prediction alike (PEtab's noise models), with a sigma that is a dataset
of the observation file, a number, or a formula (a bare name of a free quantity being
the simplest). The negative log-likelihood keeps every normalising constant, the
Jacobian of the log transformations included (the PEtab convention), and
`inference._petab_objective` uses the same density.

A config writes observation models in `[data.observables]` or an experiment's
`observables` as tables:

    observables = { total = { path = "/y", formula = "prey + predator", noise = "laplace", sigma = "s_total" } }

A plain dataset path (`prey = "/prey"`) is the model observable of that name. A
section with no table keeps the `[fit] loss` on its model observables (and its sigma
datasets, or one sigma at its maximum-likelihood value).
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Collection
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pydantic
from jaxtyping import Array

from physics.expressions import Expression, ExpressionError, parse
from sim import Config
from solvers import did_you_mean

# name -> (distribution, transformation of data and prediction)
NOISE_MODELS: dict[str, tuple[str, str]] = {
    "normal": ("normal", "lin"),
    "laplace": ("laplace", "lin"),
    "lognormal": ("normal", "log"),
    "log10-normal": ("normal", "log10"),
}


class ObservableTable(pydantic.BaseModel):
    """An observed quantity as a table (in `[data.observables]` or an experiment's
    `observables`): its dataset, what the model predicts for it, its noise."""

    path: str = pydantic.Field(
        description="the dataset of the observations", json_schema_extra={"required": True}
    )
    formula: str | None = pydantic.Field(
        None,
        description="the prediction, an expression of the states, observables, parameters and t",
        json_schema_extra={"default": "the observable of the table's name"},
    )
    noise: str | None = pydantic.Field(
        None,
        description="normal, laplace, lognormal or log10-normal",
        json_schema_extra={"default": "[fit] loss"},
    )
    sigma: float | str | None = pydantic.Field(
        None,
        description="a number, a dataset path, a formula, or a free quantity's name",
    )


OBSERVABLE_KEYS = tuple(ObservableTable.model_fields)
# Fisher information of log sigma per observation (normal: 2, Laplace: 1); that of the
# location is 1 / sigma^2 for both.
_SCALE_INFORMATION = {"normal": 2.0, "laplace": 1.0}
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def negative_log_likelihood(y, h, sigma, transformation: str, distribution: str):
    """-log p(y | h, sigma) per measurement, PEtab's noise models: the transformation
    (lin, log, log10) applies to data and model value, sigma is on the transformed
    scale, and the density is of the untransformed data (the Jacobian of the
    transformation included). A sigma that is not positive (a noise formula that goes
    negative at some parameters) has no density: NaN, never the density of |sigma|."""
    sigma = jnp.asarray(sigma)
    if transformation == "lin":
        ty, th, jac = y, h, 0.0
    elif transformation == "log":
        ty, th, jac = jnp.log(y), jnp.log(h), jnp.log(y)
    else:
        ty, th, jac = jnp.log10(y), jnp.log10(h), jnp.log(y * math.log(10.0))
    if distribution == "normal":
        value = 0.5 * jnp.log(2 * math.pi * sigma**2) + 0.5 * ((ty - th) / sigma) ** 2 + jac
    else:
        value = jnp.log(2 * sigma) + jnp.abs(ty - th) / sigma + jac
    return jnp.where(sigma > 0, value, jnp.nan)


def transformed(v, transformation: str):
    """A value on the scale of a noise model (lin, log, log10)."""
    return (
        v if transformation == "lin" else (jnp.log(v) if transformation == "log" else jnp.log10(v))
    )


# ----------------------------------------------------------------------------- the config


@dataclasses.dataclass(frozen=True)
class ObservableSpec:
    """One observed quantity as a config writes it (checked for its form, not yet
    against the model). `sigma` is a dataset path ('/...'), a number, a formula or
    None; `key` is its config key."""

    name: str
    key: str
    path: str
    formula: str | None
    noise: str | None
    sigma: str | float | None


def observable_specs(
    config: Config, section: dict[str, Any], prefix: str, *, force: bool = False
) -> list[ObservableSpec] | None:
    """The observed quantities of a `[data]` section (or an experiment, `prefix` being
    its key), or None when every one is a plain dataset path of a model observable (the
    `[fit] loss` then applies, as without observation models) unless `force`.

    Raises:
        ConfigError: a table with an unknown key or no `path`, an unknown noise model, a
            sigma given twice or not a dataset, number or formula, a negative sigma.
    """
    observables = section.get("observables")
    if not isinstance(observables, dict) or not (
        force or any(isinstance(v, dict) for v in observables.values())
    ):
        return None
    sigmas = section.get("sigma") if isinstance(section.get("sigma"), dict) else {}
    specs = []
    for name, entry in observables.items():
        key = f"{prefix}.observables.{name}"
        if isinstance(entry, str):
            entry = {"path": entry}
        elif not isinstance(entry, dict):
            raise config.error(
                key,
                f"expected a dataset path or a table ({', '.join(OBSERVABLE_KEYS)}), got {entry!r}",
            )
        for k in entry:
            if k not in OBSERVABLE_KEYS:
                raise config.error(
                    f"{key}.{k}",
                    "unknown key (an observable has "
                    f"{', '.join(OBSERVABLE_KEYS)}).{did_you_mean(k, OBSERVABLE_KEYS)}",
                )
        if not isinstance(entry.get("path"), str):
            raise config.error(f"{key}.path", 'required: the dataset of the observed values ("/y")')
        formula = entry.get("formula")
        if formula is not None and not isinstance(formula, str):
            raise config.error(
                f"{key}.formula", f'expected a formula as text ("prey + predator"), got {formula!r}'
            )
        noise = entry.get("noise")
        if noise is not None and noise not in NOISE_MODELS:
            raise config.error(
                f"{key}.noise",
                f"unknown noise model {noise!r} (noise models: "
                f"{', '.join(NOISE_MODELS)}).{did_you_mean(noise, NOISE_MODELS)}",
            )
        sigma, sigma_key = entry.get("sigma"), f"{key}.sigma"
        if name in sigmas:
            if sigma is not None:
                raise config.error(
                    f"{prefix}.sigma.{name}", f"{name!r} has a sigma in its own table already"
                )
            sigma, sigma_key = sigmas[name], f"{prefix}.sigma.{name}"
        if isinstance(sigma, bool) or not (sigma is None or isinstance(sigma, (str, int, float))):
            raise config.error(
                sigma_key,
                'expected a dataset path ("/sigma"), a number, a formula or the name of a free '
                f"quantity, got {sigma!r}",
            )
        if isinstance(sigma, (int, float)):
            if not (math.isfinite(sigma) and sigma > 0):
                raise config.error(
                    sigma_key, f"expected a positive standard deviation, got {sigma!r}"
                )
            if not 0 < sigma * sigma < math.inf:  # (the density reads sigma squared)
                raise config.error(
                    sigma_key,
                    f"expected a standard deviation between 1e-150 and 1e150, got {sigma!r}",
                )
            sigma = float(sigma)
        specs.append(ObservableSpec(name, key, entry["path"], formula, noise, sigma))
    for name in sigmas:
        if name not in observables:
            raise config.error(
                f"{prefix}.sigma.{name}",
                f"{name!r} has a sigma but is not listed in {prefix}.observables",
            )
    return specs


def loader_section(section: dict[str, Any]) -> dict[str, Any]:
    """A `[data]` section as the observation loader reads it: each observable's dataset
    path, and the sigma datasets among the sigmas."""
    observables, sigmas = {}, {}
    for name, entry in (section.get("observables") or {}).items():
        path = entry.get("path") if isinstance(entry, dict) else entry
        observables[name] = path
        sigma = (
            entry.get("sigma")
            if isinstance(entry, dict)
            else (section.get("sigma") or {}).get(name)
        )
        if isinstance(sigma, str) and sigma.startswith("/"):
            sigmas[name] = sigma
    return {**section, "observables": observables, "sigma": sigmas}


def formula_names(
    config: Config,
    specs: list[ObservableSpec],
    symbols: Collection[str],
    free: Collection[str],
    free_key: str,
) -> dict[str, set[str]]:
    """Parse every formula and formula sigma against `symbols` (the model's states,
    observables and parameters, `t`) and the free quantities; returns the names that
    the formulas ("formula") and the sigmas ("sigma") read.

    Raises:
        ConfigError: a formula that does not parse or names an unknown symbol (with its
            column); a sigma naming a quantity that is neither free nor the model's.
    """
    known = set(symbols) | {n for n in free if _NAME.match(n)}
    used: dict[str, set[str]] = {"formula": set(), "sigma": set()}
    for spec in specs:
        if spec.formula is not None:
            used["formula"] |= _parse(config, f"{spec.key}.formula", spec.formula, known).names
        if isinstance(spec.sigma, str) and not spec.sigma.startswith("/"):
            text = spec.sigma.strip()
            if _NAME.match(text) and text not in known:
                raise config.error(
                    f"{spec.key}.sigma",
                    f"{text!r} is neither a free quantity ({free_key}: {', '.join(free)}) nor a "
                    "parameter or observable of the model; "
                    f"list it in {free_key} to estimate it.{did_you_mean(text, known)}",
                )
            used["sigma"] |= _parse(config, f"{spec.key}.sigma", text, known).names
    return used


def _parse(config: Config, key: str, text: str, known: set[str]) -> Expression:
    try:
        return parse(text, known)
    except ExpressionError as e:
        raise config.error(key, str(e)) from None


# ----------------------------------------------------------------------------- evaluation


class Observed(eqx.Module):
    """One observed quantity: its formula (None: the model observable `name`), noise
    model, and sigma (a formula, or values: a dataset [T, ...] or a number)."""

    name: str = eqx.field(static=True)
    formula: Expression | None = eqx.field(static=True)
    distribution: str = eqx.field(static=True)
    transformation: str = eqx.field(static=True)
    sigma_formula: Expression | None = eqx.field(static=True)
    sigma: Array | None
    key: str = eqx.field(static=True, default="")  # its config key

    def prediction(self, values: dict[str, Array]) -> tuple[Array, Array]:
        """(prediction, sigma) from the values of the symbols."""
        h = values[self.name] if self.formula is None else self.formula(values)
        sigma = self.sigma if self.sigma_formula is None else self.sigma_formula(values)
        return jnp.asarray(h, dtype=float), jnp.asarray(sigma, dtype=float)


class Observation(eqx.Module):
    """The observation models of one data set.

    Attributes:
        observed: one `Observed` per observed quantity (the data's order).
        outputs: the model observables the formulas read (predicted at the data's times).
        least_squares: every noise model is normal (on some scale) with a sigma that no
            free quantity changes: the negative log-likelihood is then half a sum of
            squared residuals plus a constant, and Levenberg-Marquardt applies.
    """

    observed: tuple[Observed, ...]
    outputs: tuple[str, ...] = eqx.field(static=True)
    least_squares: bool = eqx.field(static=True)

    def _evaluated(self, values: dict[str, Array], data: dict[str, Array]):
        """Per observed quantity: (it, its data, where they are missing, prediction and
        sigma broadcast to the data's shape). A sigma that is not positive is NaN: no
        density, no residual, never those of |sigma|."""
        for o in self.observed:
            y = data[o.name]
            h, sigma = o.prediction(values)
            sigma = jnp.where(sigma > 0, sigma, jnp.nan)
            yield o, y, jnp.isnan(y), jnp.broadcast_to(h, y.shape), jnp.broadcast_to(sigma, y.shape)

    def rekeyed(self, prefix: str, into: str) -> Observation:
        """The same models with their config keys under `into` where they were under
        `prefix` (an experiment's, built as a config's `[data]`)."""
        observed = tuple(
            dataclasses.replace(o, key=into + o.key[len(prefix) :])
            if o.key.startswith(prefix + ".")
            else o
            for o in self.observed
        )
        return dataclasses.replace(self, observed=observed)

    def check_sigma(
        self, config: Config, values: dict[str, Array], data: dict[str, Array], where: str
    ) -> None:
        """Refuse a noise formula that is not positive at an observation for `values`
        (the start of a fit: the data there would have no density).

        Raises:
            ConfigError: naming the formula's key, its value and the observation.
        """
        for o, y, missing, _, sigma in self._evaluated(values, data):
            if o.sigma_formula is None:
                continue
            bad = np.flatnonzero(np.asarray(~missing & jnp.isnan(sigma)).ravel())
            if bad.size:
                i = int(bad[0])
                value = np.broadcast_to(
                    np.asarray(o.prediction(values)[1], dtype=float), y.shape
                ).ravel()[i]
                t = np.broadcast_to(
                    np.asarray(values["t"], dtype=float).reshape((-1,) + (1,) * (y.ndim - 1)),
                    y.shape,
                ).ravel()[i]
                raise config.error(
                    f"{o.key}.sigma",
                    f"the noise formula {o.sigma_formula.text!r} must be positive at every "
                    f"observation, but is {value:g} at t = {t:g} "
                    f"(observation {i}) {where}",
                )

    def terms(
        self, values: dict[str, Array], data: dict[str, Array], weight: dict[str, Array]
    ) -> Array:
        """The weighted negative log-likelihood of every observation (0 where missing)."""
        out = []
        for o, y, missing, h, sigma in self._evaluated(values, data):
            t = weight[o.name] * negative_log_likelihood(
                jnp.where(missing, 1.0, y), h, sigma, o.transformation, o.distribution
            )
            out.append(jnp.where(missing, 0.0, t).ravel())
        return jnp.concatenate(out)

    def whitened(
        self, values: dict[str, Array], data: dict[str, Array], weight: dict[str, Array]
    ) -> Array:
        """With `least_squares`: the residuals sqrt(w) (T(y) - T(h)) / sigma on each
        noise model's scale T, whose half sum of squares is the negative log-likelihood
        up to a constant. Otherwise a vector whose Jacobian J gives the expected Fisher
        information J^T J of the noise models (location terms T(h) / sigma with sigma
        held fixed, and sqrt(c) log sigma with c = 2 for normal and 1 for Laplace
        noise): what the covariance of the estimates is built from."""
        out = []
        for o, y, missing, h, sigma in self._evaluated(values, data):
            w = jnp.sqrt(weight[o.name])
            if self.least_squares:
                parts = [
                    w
                    * (
                        transformed(jnp.where(missing, 1.0, y), o.transformation)
                        - transformed(h, o.transformation)
                    )
                    / sigma
                ]
            else:
                scale = math.sqrt(_SCALE_INFORMATION[o.distribution])
                parts = [
                    w * transformed(h, o.transformation) / jax.lax.stop_gradient(sigma),
                    w * scale * jnp.log(sigma),
                ]
            out.extend(jnp.where(missing, 0.0, r).ravel() for r in parts)
        return jnp.concatenate(out)


def build_observation(
    config: Config,
    specs: list[ObservableSpec],
    *,
    model_observables: Collection[str],
    symbols: Collection[str],
    free: Collection[str],
    free_key: str,
    varying: Collection[str],
    sigma_data: dict[str, Any],
    default_noise: str,
) -> Observation:
    """The `Observation` of a data set's specs.

    Arguments:
        config: for error messages.
        specs: from `observable_specs`.
        model_observables: the model's observables (what a formula may read over time).
        symbols: every name a formula may read but the free quantities (observables,
            parameters, `t`).
        free, free_key: the free quantities and the config key that lists them.
        varying: the names whose value the free quantities change (free and
            condition-specific parameters, the other free quantities, the observables).
        sigma_data: observable name -> its sigma dataset's values (loaded).
        default_noise: the noise model of an observable that names none.

    Raises:
        ConfigError: an observable with no formula that is not the model's; one with no sigma.
    """
    known = set(symbols) | {n for n in free if _NAME.match(n)}
    observed, outputs, least_squares = [], [], True
    for spec in specs:
        formula = None
        if spec.formula is not None:
            formula = _parse(config, f"{spec.key}.formula", spec.formula, known)
            outputs.extend(n for n in formula.names if n in model_observables)
        else:
            if spec.name not in model_observables:
                raise config.error(
                    spec.key,
                    f"the model has no observable {spec.name!r} (observables: "
                    f"{', '.join(model_observables)}); give a formula to observe something else."
                    f"{did_you_mean(spec.name, model_observables)}",
                )
            outputs.append(spec.name)
        if spec.sigma is None:
            raise config.error(
                f"{spec.key}.sigma",
                'required with observation models: a dataset ("/sigma"), a number, a formula or a '
                "free quantity",
            )
        sigma_formula, sigma = None, None
        if isinstance(spec.sigma, float):
            sigma = jnp.asarray(spec.sigma)
        elif spec.sigma.startswith("/"):
            sigma = jnp.asarray(sigma_data[spec.name])
        else:
            sigma_formula = _parse(config, f"{spec.key}.sigma", spec.sigma, known)
            outputs.extend(n for n in sigma_formula.names if n in model_observables)
        distribution, transformation = NOISE_MODELS[spec.noise or default_noise]
        if distribution != "normal" or (
            sigma_formula is not None and sigma_formula.names & set(varying)
        ):
            least_squares = False
        observed.append(
            Observed(
                spec.name, formula, distribution, transformation, sigma_formula, sigma, spec.key
            )
        )
    return Observation(tuple(observed), tuple(dict.fromkeys(outputs)), least_squares)
