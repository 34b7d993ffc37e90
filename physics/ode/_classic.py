"""Classic ODE models: predator-prey, chaos, oscillators, epidemics, neurons, chemical
oscillators, stiff kinetics."""

from __future__ import annotations

from typing import ClassVar

import jax.numpy as jnp
from jaxtyping import Array, PyTree

from .._base import Parameter
from .._types import Scalar, State
from .base import OdeModel


class LotkaVolterra(OdeModel):
    """Predator-prey dynamics: dx/dt = alpha x - beta x y, dy/dt = delta x y - gamma y.

    Defaults are the posterior means of the Hudson's Bay lynx-hare fit in Carpenter,
    "Predator-Prey Population Dynamics: the Lotka-Volterra model in Stan" (2018),
    with populations in thousands of pelts and time in years.

    Example:
        >>> import sim, jax.numpy as jnp
        >>> model = LotkaVolterra()
        >>> traj = sim.simulate(model, model.default_params(), jnp.linspace(0, 20, 21))
    """

    name: ClassVar[str] = "lotka_volterra"
    description: ClassVar[str] = "predator-prey populations (Lotka 1925, Volterra 1926)"
    parameters: ClassVar[tuple[Parameter, ...]] = (
        Parameter("alpha", 0.55, "1/year", "prey birth rate", "positive"),
        Parameter("beta", 0.028, "1/(year*thousand)", "predation rate", "positive"),
        Parameter("gamma", 0.80, "1/year", "predator death rate", "positive"),
        Parameter(
            "delta", 0.024, "1/(year*thousand)", "predator growth per prey eaten", "positive"
        ),
    )
    state_names: ClassVar[tuple[str, ...]] = ("prey", "predator")
    initial_defaults: ClassVar[dict[str, float]] = {"prey": 30.0, "predator": 4.0}
    initial_units: ClassVar[str] = "thousand"
    initial_constraint: ClassVar[str] = "positive"

    def vector_field(self, t: Scalar, y: State, params: PyTree) -> State:
        x, z = y[0], y[1]
        dx = params["alpha"] * x - params["beta"] * x * z
        dz = params["delta"] * x * z - params["gamma"] * z
        return jnp.stack([dx, dz])


class Lorenz(OdeModel):
    """The Lorenz (1963) convection model with its classic chaotic parameters."""

    name: ClassVar[str] = "lorenz"
    description: ClassVar[str] = "Lorenz (1963) chaotic convection"
    parameters: ClassVar[tuple[Parameter, ...]] = (
        Parameter("sigma", 10.0, "1", "Prandtl number", "positive"),
        Parameter("rho", 28.0, "1", "Rayleigh number ratio", "positive"),
        Parameter("beta", 8.0 / 3.0, "1", "aspect-ratio factor", "positive"),
    )
    state_names: ClassVar[tuple[str, ...]] = ("x", "y", "z")
    initial_defaults: ClassVar[dict[str, float]] = {"x": 1.0, "y": 1.0, "z": 1.0}

    def vector_field(self, t: Scalar, y: State, params: PyTree) -> State:
        x, v, z = y[0], y[1], y[2]
        return jnp.stack(
            [
                params["sigma"] * (v - x),
                x * (params["rho"] - z) - v,
                x * v - params["beta"] * z,
            ]
        )


class VanDerPol(OdeModel):
    """Van der Pol oscillator x'' - mu (1 - x^2) x' + x = 0 as a first-order system."""

    name: ClassVar[str] = "van_der_pol"
    description: ClassVar[str] = "Van der Pol relaxation oscillator (stiff for large mu)"
    parameters: ClassVar[tuple[Parameter, ...]] = (
        Parameter("mu", 1.0, "1", "nonlinear damping strength", "nonnegative"),
    )
    state_names: ClassVar[tuple[str, ...]] = ("x", "v")
    initial_defaults: ClassVar[dict[str, float]] = {"x": 2.0, "v": 0.0}

    def vector_field(self, t: Scalar, y: State, params: PyTree) -> State:
        x, v = y[0], y[1]
        return jnp.stack([v, params["mu"] * (1.0 - x**2) * v - x])


class Sir(OdeModel):
    """SIR epidemic (Kermack-McKendrick 1927): S' = -beta S I / N, I' = beta S I / N - gamma I."""

    name: ClassVar[str] = "sir"
    description: ClassVar[str] = "SIR epidemic, Kermack-McKendrick (1927)"
    parameters: ClassVar[tuple[Parameter, ...]] = (
        Parameter("beta", 0.3, "1/day", "transmission rate", "positive"),
        Parameter("gamma", 0.1, "1/day", "recovery rate", "positive"),
    )
    state_names: ClassVar[tuple[str, ...]] = ("susceptible", "infected", "recovered")
    initial_defaults: ClassVar[dict[str, float]] = {
        "susceptible": 0.99,
        "infected": 0.01,
        "recovered": 0.0,
    }
    initial_constraint: ClassVar[str] = "nonnegative"

    def vector_field(self, t: Scalar, y: State, params: PyTree) -> State:
        s, i = y[0], y[1]
        n = jnp.sum(y)
        infection = params["beta"] * s * i / n
        recovery = params["gamma"] * i
        return jnp.stack([-infection, infection - recovery, recovery])

    def extra_observables(self, t: Scalar, y: State, params: PyTree) -> dict[str, Array]:
        return {"reproduction_number": params["beta"] / params["gamma"] * y[0] / jnp.sum(y)}


class DampedPendulum(OdeModel):
    """Pendulum with linear damping: theta'' = -(g / length) sin(theta) - damping theta'."""

    name: ClassVar[str] = "damped_pendulum"
    description: ClassVar[str] = "nonlinear pendulum with linear damping"
    parameters: ClassVar[tuple[Parameter, ...]] = (
        Parameter("g", 9.81, "m/s^2", "gravitational acceleration", "positive"),
        Parameter("length", 1.0, "m", "pendulum length", "positive"),
        Parameter("damping", 0.1, "1/s", "damping rate", "nonnegative"),
    )
    state_names: ClassVar[tuple[str, ...]] = ("theta", "omega")
    initial_defaults: ClassVar[dict[str, float]] = {"theta": 1.0, "omega": 0.0}

    def vector_field(self, t: Scalar, y: State, params: PyTree) -> State:
        theta, omega = y[0], y[1]
        return jnp.stack(
            [omega, -params["g"] / params["length"] * jnp.sin(theta) - params["damping"] * omega]
        )

    def extra_observables(self, t: Scalar, y: State, params: PyTree) -> dict[str, Array]:
        theta, omega = y[0], y[1]
        length = params["length"]
        energy = 0.5 * length**2 * omega**2 + params["g"] * length * (1.0 - jnp.cos(theta))
        return {"energy": energy}


class FitzHughNagumo(OdeModel):
    """FitzHugh-Nagumo neuron: v' = v - v^3/3 - w + current, w' = (v + a - b w) / tau."""

    name: ClassVar[str] = "fitzhugh_nagumo"
    description: ClassVar[str] = "FitzHugh (1961) - Nagumo (1962) excitable neuron"
    parameters: ClassVar[tuple[Parameter, ...]] = (
        Parameter("a", 0.7, "1", "recovery offset", "real"),
        Parameter("b", 0.8, "1", "recovery coupling", "nonnegative"),
        Parameter("tau", 12.5, "1", "recovery time scale", "positive"),
        Parameter("current", 0.5, "1", "external stimulus current", "real"),
    )
    state_names: ClassVar[tuple[str, ...]] = ("v", "w")
    initial_defaults: ClassVar[dict[str, float]] = {"v": -1.0, "w": 1.0}

    def vector_field(self, t: Scalar, y: State, params: PyTree) -> State:
        v, w = y[0], y[1]
        dv = v - v**3 / 3.0 - w + params["current"]
        dw = (v + params["a"] - params["b"] * w) / params["tau"]
        return jnp.stack([dv, dw])


class Brusselator(OdeModel):
    """The Brusselator (Prigogine & Lefever 1968), an autocatalytic chemical oscillator:
    x' = A + x^2 y - (B + 1) x, y' = B x - x^2 y. Its one fixed point (A, B / A) is stable
    for B < 1 + A^2; above, the concentrations settle on a limit cycle (a Hopf
    bifurcation at B = 1 + A^2)."""

    name: ClassVar[str] = "brusselator"
    description: ClassVar[str] = "Prigogine-Lefever (1968) autocatalytic chemical oscillator"
    parameters: ClassVar[tuple[Parameter, ...]] = (
        Parameter("A", 1.0, "1", "feed concentration of the first reactant", "positive"),
        Parameter("B", 3.0, "1", "feed concentration of the second reactant", "positive"),
    )
    state_names: ClassVar[tuple[str, ...]] = ("x", "y")
    initial_defaults: ClassVar[dict[str, float]] = {"x": 1.0, "y": 1.0}
    initial_constraint: ClassVar[str] = "nonnegative"

    def vector_field(self, t: Scalar, y: State, params: PyTree) -> State:
        u, v = y[0], y[1]
        autocatalysis = u**2 * v
        return jnp.stack(
            [params["A"] + autocatalysis - (params["B"] + 1.0) * u, params["B"] * u - autocatalysis]
        )


class Robertson(OdeModel):
    """Robertson (1966) stiff chemical kinetics, the classic stiff test problem.

    y1' = -k1 y1 + k3 y2 y3, y2' = k1 y1 - k2 y2^2 - k3 y2 y3, y3' = k2 y2^2.
    Use an implicit method (kvaerno5).
    """

    name: ClassVar[str] = "robertson"
    description: ClassVar[str] = "Robertson (1966) stiff chemical kinetics"
    stiff: ClassVar[bool] = True
    parameters: ClassVar[tuple[Parameter, ...]] = (
        Parameter("k1", 0.04, "1/s", "rate of A -> B", "positive"),
        Parameter("k2", 3.0e7, "1/s", "rate of 2B -> B + C", "positive"),
        Parameter("k3", 1.0e4, "1/s", "rate of B + C -> A + C", "positive"),
    )
    state_names: ClassVar[tuple[str, ...]] = ("y1", "y2", "y3")
    initial_defaults: ClassVar[dict[str, float]] = {"y1": 1.0, "y2": 0.0, "y3": 0.0}
    initial_constraint: ClassVar[str] = "nonnegative"

    def vector_field(self, t: Scalar, y: State, params: PyTree) -> State:
        y1, y2, y3 = y[0], y[1], y[2]
        r1 = params["k1"] * y1
        r2 = params["k2"] * y2**2
        r3 = params["k3"] * y2 * y3
        return jnp.stack([-r1 + r3, r1 - r2 - r3, r2])
