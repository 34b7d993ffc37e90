"""Prior distributions by name, with their arguments checked (NumPyro's parameterisations)."""

from __future__ import annotations

import math
from typing import Any

import jax.numpy as jnp
import numpyro.distributions as dist

from sim import Config
from solvers import did_you_mean

# name -> (required arguments, optional arguments with defaults, arguments that must be > 0)
_SPECS: dict[str, tuple[tuple[str, ...], dict[str, float], tuple[str, ...]]] = {
    "normal": (("loc", "scale"), {}, ("scale",)),
    "lognormal": (("loc", "scale"), {}, ("scale",)),
    "truncated_normal": (("loc", "scale"), {"low": -math.inf, "high": math.inf}, ("scale",)),
    "halfnormal": (("scale",), {}, ("scale",)),
    "uniform": (("low", "high"), {}, ()),
    "exponential": (("rate",), {}, ("rate",)),
    "gamma": (("concentration", "rate"), {}, ("concentration", "rate")),
    "beta": (("concentration1", "concentration0"), {}, ("concentration1", "concentration0")),
    "cauchy": (("loc", "scale"), {}, ("scale",)),
    "halfcauchy": (("scale",), {}, ("scale",)),
    "student_t": (("df", "loc", "scale"), {}, ("df", "scale")),
}
DISTRIBUTIONS = tuple(_SPECS)


def check_prior(config: Config, key: str, spec: Any) -> dict[str, Any]:
    """Validate one prior table `{ dist = "...", ...arguments }`; returns its arguments."""
    if not isinstance(spec, dict):
        raise config.error(
            key,
            f'expected a table like {{ dist = "normal", loc = 0.0, scale = 1.0 }}, got {spec!r}',
        )
    name = spec.get("dist")
    if name is None:
        raise config.error(
            f"{key}.dist", f"required key is missing (one of: {', '.join(DISTRIBUTIONS)})"
        )
    if name not in _SPECS:
        raise config.error(
            f"{key}.dist",
            f"unknown distribution {name!r} (distributions: "
            f"{', '.join(DISTRIBUTIONS)}).{did_you_mean(name, DISTRIBUTIONS)}",
        )
    required, optional, positive = _SPECS[name]
    allowed = required + tuple(optional)
    args = {}
    for arg, value in spec.items():
        if arg == "dist":
            continue
        if arg not in allowed:
            raise config.error(
                f"{key}.{arg}",
                f"{name} takes {', '.join(allowed)}; no {arg!r}.{did_you_mean(arg, allowed)}",
            )
        if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
            raise config.error(f"{key}.{arg}", f"expected a number, got {value!r}")
        args[arg] = float(value)
    for arg in required:
        if arg not in args:
            raise config.error(f"{key}.{arg}", f"required argument of {name} is missing")
    for arg in positive:
        if not (args[arg] > 0 and math.isfinite(args[arg])):
            raise config.error(f"{key}.{arg}", f"expected a positive number, got {spec[arg]!r}")
    for arg, default in optional.items():
        args.setdefault(arg, default)
    if "low" in args and "high" in args and not args["low"] < args["high"]:
        raise config.error(
            f"{key}.high", f"expected high > low = {args['low']:g}, got {args['high']:g}"
        )
    if "loc" in args and not math.isfinite(args["loc"]):
        raise config.error(f"{key}.loc", f"expected a finite number, got {args['loc']}")
    for arg in ("low", "high") if name == "uniform" else ():
        if not math.isfinite(args[arg]):
            raise config.error(
                f"{key}.{arg}",
                f"expected a finite bound of the uniform distribution, got {args[arg]}",
            )
    return {"dist": name, **args}


def support(spec: dict[str, Any]) -> tuple[float, float]:
    """The interval [low, high] (ends possibly infinite) a checked prior spec puts its
    probability on."""
    name = spec["dist"]
    if name in ("uniform", "truncated_normal"):
        return spec["low"], spec["high"]
    if name in ("normal", "cauchy", "student_t"):
        return -math.inf, math.inf
    if name == "beta":
        return 0.0, 1.0
    return 0.0, math.inf  # lognormal, halfnormal, halfcauchy, exponential, gamma


# A free quantity's transform (inference._fit.Free) -> the values it may take.
_ALLOWED = {
    "identity": "any real number",
    "log": "positive (> 0)",
    "softplus": "nonnegative (>= 0)",
}


def allowed_range(transform: str, low: float = 0.0, high: float = 1.0) -> tuple[float, float, str]:
    """(low, high, description) of the values a free quantity with `transform` may take."""
    if transform == "log":
        return 0.0, math.inf, _ALLOWED["log"]
    if transform == "softplus":
        return 0.0, math.inf, _ALLOWED["softplus"]
    if transform == "logistic":
        return low, high, f"in [{low:g}, {high:g}]"
    return -math.inf, math.inf, _ALLOWED["identity"]


def support_conflict(
    spec: dict[str, Any], name: str, transform: str, low: float = 0.0, high: float = 1.0
) -> str | None:
    """Why a prior leaves no valid value (hence no start for the chains) for a free
    quantity `name`: its support and the quantity's allowed range do not overlap (or
    only in a point). None when they do."""
    s_low, s_high = support(spec)
    a_low, a_high, what = allowed_range(transform, low, high)
    if max(s_low, a_low) < min(s_high, a_high):
        return None
    return (
        f"a {spec['dist']} prior on [{s_low:g}, {s_high:g}] leaves no valid value: {name} must be "
        f"{what}, "
        "so the chains have no valid start; give a prior whose support overlaps that range"
    )


def outside_allowed(
    spec: dict[str, Any], transform: str, low: float = 0.0, high: float = 1.0
) -> bool:
    """Whether a prior also puts probability where the free quantity is not allowed
    (e.g. uniform [-1, 2] on a positive parameter)."""
    s_low, s_high = support(spec)
    a_low, a_high, _ = allowed_range(transform, low, high)
    return s_low < a_low or s_high > a_high


def make_distribution(spec: dict[str, Any]) -> dist.Distribution:
    """The NumPyro distribution of a checked prior spec."""
    name = spec["dist"]
    a = {k: jnp.asarray(v, dtype=float) for k, v in spec.items() if k != "dist"}
    if name == "normal":
        return dist.Normal(a["loc"], a["scale"])
    if name == "lognormal":
        return dist.LogNormal(a["loc"], a["scale"])
    if name == "truncated_normal":
        low = None if not math.isfinite(spec["low"]) else a["low"]
        high = None if not math.isfinite(spec["high"]) else a["high"]
        return dist.TruncatedNormal(a["loc"], a["scale"], low=low, high=high)
    if name == "halfnormal":
        return dist.HalfNormal(a["scale"])
    if name == "uniform":
        return dist.Uniform(a["low"], a["high"])
    if name == "exponential":
        return dist.Exponential(a["rate"])
    if name == "gamma":
        return dist.Gamma(a["concentration"], a["rate"])
    if name == "beta":
        return dist.Beta(a["concentration1"], a["concentration0"])
    if name == "cauchy":
        return dist.Cauchy(a["loc"], a["scale"])
    if name == "halfcauchy":
        return dist.HalfCauchy(a["scale"])
    return dist.StudentT(a["df"], a["loc"], a["scale"])


def flatten_priors(priors: dict[str, Any]) -> dict[str, Any]:
    """Accept both `"initial.prey" = {...}` and `initial = { prey = {...} }`."""
    out = {}
    for key, value in priors.items():
        if (
            isinstance(value, dict)
            and "dist" not in value
            and all(isinstance(v, dict) for v in value.values())
            and value
        ):
            for sub, spec in value.items():
                out[f"{key}.{sub}"] = spec
        else:
            out[key] = value
    return out
