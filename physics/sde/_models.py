"""Classic SDE models: mean reversion, exponential growth with noise, noisy predator-prey."""

from __future__ import annotations

from typing import ClassVar

import jax.numpy as jnp
from jaxtyping import PyTree

from .._base import Parameter
from .._types import Scalar, State
from ..ode import LotkaVolterra
from .base import SdeModel


class OrnsteinUhlenbeck(SdeModel):
    """Mean-reverting noise: dx = theta (mu - x) dt + sigma dW.

    Uhlenbeck & Ornstein, "On the theory of the Brownian motion", Phys. Rev. 36, 823
    (1930). x is Gaussian with mean mu + (x0 - mu) exp(-theta t) and variance
    sigma^2 (1 - exp(-2 theta t)) / (2 theta); the noise is additive.
    """

    name: ClassVar[str] = "ornstein_uhlenbeck"
    description: ClassVar[str] = (
        "Ornstein-Uhlenbeck mean-reverting process (Uhlenbeck & Ornstein 1930)"
    )
    parameters: ClassVar[tuple[Parameter, ...]] = (
        Parameter("theta", 1.0, "1/s", "rate of reversion to the mean", "positive"),
        Parameter("mu", 0.0, "1", "long-term mean", "real"),
        Parameter("sigma", 0.5, "1/sqrt(s)", "noise amplitude", "nonnegative"),
    )
    state_names: ClassVar[tuple[str, ...]] = ("x",)
    initial_defaults: ClassVar[dict[str, float]] = {"x": 1.0}
    noise: ClassVar[str] = "additive"

    def drift(self, t: Scalar, y: State, params: PyTree) -> State:
        return params["theta"] * (params["mu"] - y)

    def diffusion(self, t: Scalar, y: State, params: PyTree) -> State:
        return params["sigma"] * jnp.ones_like(y)


class GeometricBrownianMotion(SdeModel):
    """Exponential growth with proportional noise: dx = mu x dt + sigma x dW.

    The model of Black & Scholes, "The Pricing of Options and Corporate Liabilities",
    J. Polit. Econ. 81, 637 (1973), for a price x with time in years. Its solution is
    x0 exp((mu - sigma^2 / 2) t + sigma W_t) (e.g. Higham, "An Algorithmic Introduction
    to Numerical Simulation of Stochastic Differential Equations", SIAM Review 43, 525
    (2001)); the noise is diagonal.
    """

    name: ClassVar[str] = "geometric_brownian_motion"
    description: ClassVar[str] = "geometric Brownian motion (Black & Scholes 1973)"
    parameters: ClassVar[tuple[Parameter, ...]] = (
        Parameter("mu", 0.05, "1/year", "drift rate (expected growth rate)", "real"),
        Parameter("sigma", 0.2, "1/sqrt(year)", "volatility", "nonnegative"),
    )
    state_names: ClassVar[tuple[str, ...]] = ("x",)
    initial_defaults: ClassVar[dict[str, float]] = {"x": 1.0}
    initial_constraint: ClassVar[str] = "positive"
    noise: ClassVar[str] = "diagonal"

    def drift(self, t: Scalar, y: State, params: PyTree) -> State:
        return params["mu"] * y

    def diffusion(self, t: Scalar, y: State, params: PyTree) -> State:
        return params["sigma"] * y


_LOTKA_VOLTERRA = LotkaVolterra()


class StochasticLotkaVolterra(SdeModel):
    """Predator-prey dynamics with environmental noise on both per-capita rates.

    d prey = (alpha prey - beta prey predator) dt + sigma_prey prey dW_1,
    d predator = (delta prey predator - gamma predator) dt + sigma_predator predator dW_2.

    The drift is `physics.ode.LotkaVolterra`'s, with its parameters and defaults (the
    Hudson's Bay lynx-hare fit, populations in thousands, time in years). The noise is
    environmental: each per-capita rate (alpha, gamma) is replaced by its mean plus white
    noise, the construction of Gard, "Persistence in stochastic food web models", Bull.
    Math. Biol. 46, 357 (1984). The noise is diagonal, each g_i depending on y_i alone,
    so Milstein's method applies.
    """

    name: ClassVar[str] = "stochastic_lotka_volterra"
    description: ClassVar[str] = "predator-prey populations with environmental noise"
    parameters: ClassVar[tuple[Parameter, ...]] = LotkaVolterra.parameters + (
        Parameter(
            "sigma_prey",
            0.1,
            "1/sqrt(year)",
            "noise amplitude of the prey growth rate",
            "nonnegative",
        ),
        Parameter(
            "sigma_predator",
            0.1,
            "1/sqrt(year)",
            "noise amplitude of the predator growth rate",
            "nonnegative",
        ),
    )
    state_names: ClassVar[tuple[str, ...]] = LotkaVolterra.state_names
    initial_defaults: ClassVar[dict[str, float]] = dict(LotkaVolterra.initial_defaults)
    initial_units: ClassVar[str] = LotkaVolterra.initial_units
    initial_constraint: ClassVar[str] = "positive"
    noise: ClassVar[str] = "diagonal"

    def drift(self, t: Scalar, y: State, params: PyTree) -> State:
        return _LOTKA_VOLTERRA.vector_field(t, y, params)

    def diffusion(self, t: Scalar, y: State, params: PyTree) -> State:
        return jnp.stack([params["sigma_prey"] * y[0], params["sigma_predator"] * y[1]])
