"""What an experiment of `[[experiments]]` sets beyond its data: condition-specific
parameters (a model parameter that is, in this experiment, a free quantity of its
own), a preequilibration (a run to steady state before the experiment starts), and the
free quantities that are not the model's (those, and the sigmas and scale factors of
observation models).

The problems themselves are built in `inference._fit` (`experiment_problems`); this
module reads and checks the tables and holds the steady-state start.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection
from typing import Any

import equinox as eqx
import jax.numpy as jnp
import pydantic
from jaxtyping import Array

from sim import Config
from sim.core import Fittable, family_of
from solvers import OdeSolver, did_you_mean

from ._observation import ObservableSpec, formula_names


class PreequilibrationTable(pydantic.BaseModel):
    """An experiment's `preequilibrate = { ... }`: the values of a run to steady state
    (ODE models) that the experiment starts from."""

    params: dict[str, float | str] = pydantic.Field(
        {}, description="parameter values of the steady-state run"
    )
    initial: dict[str, float] = pydantic.Field(
        {}, description="its initial values (the others: the config's [initial])"
    )


PREEQUILIBRATION_KEYS = tuple(PreequilibrationTable.model_fields)


@dataclasses.dataclass(frozen=True)
class Extra:
    """A free quantity that is not the model's: a condition-specific parameter (it takes
    the constraint, bounds and value of the model parameter it stands for) or a quantity
    of the observation models (positive when a sigma reads it, else real; starts at 1)."""

    constraint: str
    bounds: tuple[float, float] | None
    start: float


def split_params(
    config: Config,
    where: str,
    table: dict[str, Any],
    parameters: Collection[str],
    free: Collection[str],
    free_key: str,
) -> tuple[dict[str, Any], dict[str, str]]:
    """An experiment's (or a preequilibration's) `params` table split into fixed values
    and condition-specific free quantities (model parameter -> free quantity).

    Raises:
        ConfigError: a parameter the model does not have; a name that is not free.
    """
    fixed, aliases = {}, {}
    for key, value in table.items():
        if key not in parameters:
            raise config.error(
                f"{where}.{key}",
                f"the model has no parameter {key!r} (parameters: "
                f"{', '.join(parameters)}).{did_you_mean(key, parameters)}",
            )
        if isinstance(value, str):
            if value not in free:
                raise config.error(
                    f"{where}.{key}",
                    f"{value!r} is not a free quantity ({free_key}: {', '.join(free)}); a "
                    "condition-specific parameter must be listed "
                    f"there.{did_you_mean(value, free)}",
                )
            aliases[key] = value
        else:
            fixed[key] = value
    return fixed, aliases


def free_extras(
    config: Config,
    free: list[str],
    free_key: str,
    model,
    values: dict[str, Any],
    specs: list[list[ObservableSpec]],
    aliases: list[dict[str, str]],
) -> dict[str, Extra]:
    """The free quantities that are not the model's parameters or initial values, with
    what they stand for.

    Arguments:
        values: the model's parameter values (the config's, over the model's defaults).
        specs: the observation models of each data set.
        aliases: the condition-specific parameters of each experiment (and preequilibration).
    """
    symbols = set(model.observable_names) | set(values) | {"t"}
    used: dict[str, set[str]] = {"formula": set(), "sigma": set()}
    for group in specs:
        for kind, names in formula_names(config, group, symbols, free, free_key).items():
            used[kind] |= names
    stands_for = {}
    for table in aliases:
        for key, name in table.items():
            stands_for.setdefault(name, key)
    out = {}
    for name in free:
        if name.startswith("initial.") or name in values:
            continue
        if name in stands_for:
            p = model.parameter(stands_for[name])
            out[name] = Extra(p.constraint, p.bounds, float(values[stands_for[name]]))
        elif name in used["sigma"]:
            out[name] = Extra("positive", None, 1.0)
        elif name in used["formula"]:
            out[name] = Extra("real", None, 1.0)
    return out


class Preequilibration(eqx.Module):
    """A run to steady state before an experiment starts (ODE models).

    The run starts from `initial` (the config's initial values with the
    preequilibration's over them; free initial values set it) with the experiment's
    parameters, `params` over them and the free quantities of `aliases` in place; the
    experiment starts from its steady state, but for the components it sets itself
    (`replaced`), which take its own values."""

    params: dict[str, Array]
    initial: dict[str, Array]
    aliases: tuple[tuple[str, str], ...] = eqx.field(static=True)
    replaced: tuple[str, ...] = eqx.field(static=True)

    def start(
        self,
        model,
        solver: OdeSolver,
        params: dict[str, Any],
        initial: dict[str, Any],
        x: dict[str, Any],
        free_initial: Collection[str],
    ) -> Array:
        """The experiment's initial state [n] at natural free values `x`."""
        during = {**params, **self.params, **{key: x[name] for key, name in self.aliases}}
        start = {**self.initial, **{key: initial[key] for key in free_initial}}
        y_ss = solver.steady_state(model.vector_field, model.initial_state(start, during), during)
        if not self.replaced:
            return y_ss
        mask = jnp.asarray([n in self.replaced for n in model.state_names])
        return jnp.where(mask, model.initial_state(initial, params), y_ss)


def preequilibration(
    config: Config,
    where: str,
    table: Any,
    model,
    solver,
    base_initial: dict[str, Any],
    replaced: Collection[str],
    free: list[str],
    free_key: str,
) -> Preequilibration:
    """The `Preequilibration` of an experiment's `preequilibrate` table.

    Raises:
        ConfigError: not a table, an unknown key, parameter or state; a model that is no
            ODE model or a solver that is no ODE solver.
    """
    if not isinstance(table, dict):
        raise config.error(
            where, "expected a table: preequilibrate = { params = { ... }, initial = { ... } }"
        )
    for key in table:
        if key not in PREEQUILIBRATION_KEYS:
            raise config.error(
                f"{where}.{key}",
                "unknown key (a preequilibration has "
                f"{', '.join(PREEQUILIBRATION_KEYS)}).{did_you_mean(key, PREEQUILIBRATION_KEYS)}",
            )
        if not isinstance(table[key], dict):
            raise config.error(f"{where}.{key}", "expected a table (name = value)")
    family = family_of(model)
    if not (isinstance(family, Fittable) and family.preequilibrates(model, solver)):
        raise config.error(
            where,
            f"a preequilibration runs an ODE model to steady state; {model.name!r} is not one (or "
            "[solver] is not an ODE method of one field)",
        )
    if getattr(model, "events", tuple)():
        raise config.error(
            where,
            "a preequilibration of a model with events is not supported (the steady state ignores "
            "them)",
        )
    states = list(model.state_names)
    for key, value in table.get("initial", {}).items():
        if key not in states:
            raise config.error(
                f"{where}.initial.{key}",
                f"the model has no state {key!r} (states: "
                f"{', '.join(states)}).{did_you_mean(key, states)}",
            )
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise config.error(f"{where}.initial.{key}", f"expected a number, got {value!r}")
    fixed, aliases = split_params(
        config,
        f"{where}.params",
        table.get("params", {}),
        list(model.parameter_names),
        free,
        free_key,
    )
    for key, value in fixed.items():
        if key in free:
            raise config.error(
                f"{where}.params.{key}",
                f"{key} is free ({free_key}): a preequilibration cannot also fix it; give a free "
                "quantity of its own by name",
            )
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise config.error(
                f"{where}.params.{key}",
                f"expected a number or the name of a free quantity, got {value!r}",
            )
    start = {
        k: jnp.asarray(v, dtype=float)
        for k, v in {**base_initial, **table.get("initial", {})}.items()
    }
    return Preequilibration(
        params={k: jnp.asarray(v, dtype=float) for k, v in fixed.items()},
        initial=start,
        aliases=tuple(aliases.items()),
        replaced=tuple(n for n in states if n in replaced),
    )
