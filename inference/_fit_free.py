"""The free quantities of a config fit: where each listed name goes (a model parameter,
an initial value, or a quantity that only the observation models read), the transform
onto its allowed range (from its constraint, the model's bounds or `[fit] bounds`), and
its start value, each checked against the model with a message that names the key."""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
from jaxtyping import Array

from physics import Model
from sim import Config
from sim.core import family_of
from solvers import did_you_mean

from ._experiments import Extra
from ._fit_problem import _TRANSFORMS, Free


def free_quantities(
    config: Config,
    free_names: list[str],
    free_key: str,
    model: Model,
    setup: Any,
    extras: dict[str, Extra],
    bounds: dict[str, list[float]],
) -> tuple[list[Free], dict[str, Array]]:
    """The free quantities `free_names` (listed by `free_key`) of a set-up's model and
    their start values in natural units; `bounds` (`[fit] bounds`) must name free ones.

    Raises:
        ConfigError: a name listed twice, one the model does not have, bounds that are
            not an interval (or leave the model's), a start value outside the range.
    """
    free = []
    start = {}
    seen = set()
    for name in free_names:
        if name in seen:
            raise config.error(free_key, f"{name!r} is listed twice")
        seen.add(name)
        kind, key, constraint, value = _placed(config, name, free_key, model, setup, extras)
        transform, low, high = _range(config, name, kind, key, constraint, model, extras, bounds)
        value = float(value)
        _check_start(config, name, kind, key, free_key, value, constraint, transform, low, high)
        free.append(Free(name=name, kind=kind, key=key, transform=transform, low=low, high=high))
        start[name] = jnp.asarray(value, dtype=float)
    for name in bounds:
        if name not in seen:
            raise config.error(
                f"fit.bounds.{name}",
                f"{name!r} is not a free quantity (free: {', '.join(free_names)})",
            )
    return free, start


def _placed(
    config: Config,
    name: str,
    free_key: str,
    model: Model,
    setup: Any,
    extras: dict[str, Extra],
) -> tuple[str, str, str, Any]:
    """(kind, key, constraint, start value) of free quantity `name`: an initial value
    (`initial.<component>`), a quantity of the observation models (`extras`) or a
    parameter."""
    kind, _, key = name.partition(".") if name.startswith("initial.") else ("params", "", name)
    if kind == "initial":
        reason = family_of(model).no_free_initial
        if reason is not None:
            raise config.error(
                free_key, f"{name!r}: {reason} (fit [params] such as {', '.join(setup.params)})"
            )
        names = list(getattr(model, "state_names", ())) if isinstance(setup.initial, dict) else []
        if key not in names:
            raise config.error(
                free_key,
                f"{name!r}: the model has no initial value {key!r} (initial values: "
                f"{', '.join(names)}).{did_you_mean(key, names)}",
            )
        constraint = getattr(model, "initial_constraint", "real")
        value = (
            setup.initial[key] if key in setup.initial else model.default_initial(setup.params)[key]
        )
    elif key in extras and key not in setup.params:
        kind, constraint, value = "extra", extras[key].constraint, extras[key].start
    else:
        if key not in setup.params:
            raise config.error(
                free_key,
                f"{name!r}: the model has no parameter {key!r} (parameters: "
                f"{', '.join(setup.params)}).{did_you_mean(key, setup.params)}",
            )
        constraint = model.parameter(key).constraint
        value = setup.params[key]
    return kind, key, constraint, value


def _range(
    config: Config,
    name: str,
    kind: str,
    key: str,
    constraint: str,
    model: Model,
    extras: dict[str, Extra],
    bounds: dict[str, list[float]],
) -> tuple[str, Any, Any]:
    """(transform, low, high) of free quantity `name`: logistic within `[fit] bounds` or
    the model's own bounds, else the transform of its constraint."""
    transform = _TRANSFORMS[constraint]
    low, high = 0.0, 1.0
    declared = (
        model.parameter(key).bounds
        if kind == "params"
        else (extras[key].bounds if kind == "extra" else None)
    )
    if name in bounds:
        pair = bounds[name]
        if len(pair) != 2 or not pair[0] < pair[1]:
            raise config.error(
                f"fit.bounds.{name}", f"expected [low, high] with low < high, got {pair}"
            )
        low, high = float(pair[0]), float(pair[1])
        transform = "logistic"
        if declared is not None and not declared[0] <= low < high <= declared[1]:
            raise config.error(
                f"fit.bounds.{name}",
                f"expected bounds within the model's bounds of {name}, [{declared[0]:g}, "
                f"{declared[1]:g}]; got {pair}",
            )
    elif declared is not None:  # the model's own bounds of the parameter
        low, high = declared
        transform = "logistic"
    return transform, low, high


def _check_start(
    config: Config,
    name: str,
    kind: str,
    key: str,
    free_key: str,
    value: float,
    constraint: str,
    transform: str,
    low: Any,
    high: Any,
) -> None:
    """Refuse a start value outside the open range of its transform (naming the key
    that set it)."""
    if (
        transform in ("log", "softplus")
        and value <= 0
        or transform == "logistic"
        and not low < value < high
    ):
        where = {"params": f"params.{key}", "initial": f"initial.{key}"}.get(kind, free_key)
        allowed = f"({low:g}, {high:g})" if transform == "logistic" else constraint
        raise config.error(
            where,
            f"start value {value:g} must lie strictly inside the allowed range of {name} "
            f"({allowed})",
        )
