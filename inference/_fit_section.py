"""The `[fit]` section of a config: what is free, the loss, the optimiser and its
settings, validated with messages that name the key."""

from __future__ import annotations

from typing import Literal

import pydantic
from pydantic import BaseModel, ConfigDict, Field

from sim import Config
from sim.core import SEED_MAX
from solvers import did_you_mean

LOSSES = ("normal", "lognormal", "mse")
OPTIMIZERS = ("levenberg_marquardt", "bfgs", "adam")


class FitSection(BaseModel):
    """`[fit]`: what is free, the loss, the optimiser and its settings."""

    model_config = ConfigDict(extra="forbid", strict=True, use_attribute_docstrings=True)
    free: list[str] = Field(min_length=1)
    """the quantities fitted: parameters, `initial.<state>`, an experiment's own parameters
    and the observation models' sigmas"""
    loss: Literal["normal", "lognormal", "mse"] = "normal"
    """the noise model of observables that name none"""
    optimizer: Literal["levenberg_marquardt", "bfgs", "adam"] = "levenberg_marquardt"
    """the optimiser (a likelihood that is no least-squares problem takes bfgs)"""
    max_steps: int | None = Field(default=None, ge=1)
    """the optimiser's step budget (none: its own default)"""
    rtol: float = Field(default=1e-8, gt=0)
    """relative tolerance of the optimiser's stop"""
    atol: float = Field(default=1e-8, gt=0)
    """absolute tolerance of the optimiser's stop"""
    learning_rate: float = Field(default=0.01, gt=0)
    """adam's learning rate"""
    starts: int = Field(default=1, ge=1)
    """the number of starts (the config's values, then a Latin hypercube)"""
    seed: int = Field(default=0, ge=0, le=SEED_MAX)
    """seed of the starts after the first"""
    checkpoint_every: int | None = Field(default=None, ge=1)
    """checkpoint every this many iterations (none: at most every 30 s)"""
    weights: dict[str, float] = {}
    """observable = the weight of its residuals"""
    bounds: dict[str, list[float]] = {}
    """free quantity = [low, high], within the parameter's own bounds"""


def fit_section(config: Config, without: tuple[str, ...] = ()) -> FitSection:
    """The config's `[fit]`, checked (`without`: keys a special fit checks itself)."""
    raw = config.spec.fit
    if raw is None:
        raise config.error("fit", 'required section is missing (at least: free = ["name", ...])')
    try:
        return FitSection.model_validate(
            {k: v for k, v in raw.items() if k not in without} if without else raw
        )
    except pydantic.ValidationError as e:
        err = e.errors()[0]
        key = "fit." + ".".join(str(p) for p in err["loc"] if not str(p).startswith("literal"))
        kind = err["type"]
        if kind == "extra_forbidden":
            msg = (
                "unknown key (expected one of: "
                f"{', '.join(FitSection.model_fields)})."
                f"{did_you_mean(err['loc'][-1], FitSection.model_fields)}"
            )
        elif kind == "literal_error":
            msg = f"expected one of {err['ctx']['expected']}, got {err['input']!r}"
        elif kind == "too_short":
            msg = "expected at least one free quantity"
        else:
            msg = f"{err['msg'][0].lower()}{err['msg'][1:]}, got {err.get('input')!r}"
        raise config.error(key, msg) from None
