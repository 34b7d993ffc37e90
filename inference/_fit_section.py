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

    model_config = ConfigDict(extra="forbid", strict=True)
    free: list[str] = Field(min_length=1)
    loss: Literal["normal", "lognormal", "mse"] = "normal"
    optimizer: Literal["levenberg_marquardt", "bfgs", "adam"] = "levenberg_marquardt"
    max_steps: int | None = Field(default=None, ge=1)
    rtol: float = Field(default=1e-8, gt=0)
    atol: float = Field(default=1e-8, gt=0)
    learning_rate: float = Field(default=0.01, gt=0)
    starts: int = Field(default=1, ge=1)
    seed: int = Field(default=0, ge=0, le=SEED_MAX)
    checkpoint_every: int | None = Field(default=None, ge=1)
    weights: dict[str, float] = {}
    bounds: dict[str, list[float]] = {}


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
