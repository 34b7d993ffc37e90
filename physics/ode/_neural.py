"""Neural ODEs: vector fields that are (or contain) a multilayer perceptron.

The network's structure (sizes, depth, activation) is a static option of the model; its
weights are an ordinary pytree of float arrays inside `params` (under the key "net"), so
`sim.simulate` runs a neural model unchanged and `jax.grad` with respect to `params`
trains it (Chen, Rubanova, Bettencourt & Duvenaud, "Neural Ordinary Differential
Equations", NeurIPS 2018; hybrid models as in Rackauckas et al., "Universal Differential
Equations for Scientific Machine Learning", 2020).
"""

from __future__ import annotations

import difflib
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray, PyTree

from .._base import Parameter
from .._types import Scalar, State
from .base import OdeModel

MlpWeights = tuple[dict[str, Float[Array, "..."]], ...]
"""Weights of an `Mlp`: one {"weight": [out, in], "bias": [out]} per layer, input first."""

ACTIVATIONS = {
    "tanh": jnp.tanh,
    "relu": jax.nn.relu,
    "softplus": jax.nn.softplus,
    "silu": jax.nn.silu,
    "gelu": jax.nn.gelu,
    "elu": jax.nn.elu,
    "sigmoid": jax.nn.sigmoid,
}
FEATURES = {
    "identity": lambda y: y,
    "cubic": lambda y: y**3,
}

_NET_DEFAULT = "random (from the model's seed)"


def _did_you_mean(word: str, choices) -> str:
    close = difflib.get_close_matches(str(word), list(choices), n=1, cutoff=0.6)
    return f" Perhaps you meant {close[0]!r}?" if close else ""


def _check_choice(what: str, value: str, choices) -> None:
    if value not in choices:
        raise ValueError(
            f"unknown {what} {value!r}; expected one of "
            f"{', '.join(choices)}.{_did_you_mean(value, choices)}"
        )


def _floats(values) -> tuple[float, ...] | None:
    return None if values is None else tuple(float(v) for v in values)


class Mlp(eqx.Module):
    """The structure of a multilayer perceptron whose weights live outside it.

    `depth` hidden layers of `width` units with `activation` between them and a linear
    output layer (`depth = 0` is a single affine map), as `equinox.nn.MLP` counts them.

    Arguments:
        in_size: input features.
        out_size: outputs.
        width: units per hidden layer.
        depth: hidden layers (>= 0).
        activation: one of `tanh`, `relu`, `softplus`, `silu`, `gelu`, `elu`, `sigmoid`.

    Example:
        >>> mlp = Mlp(2, 2, width=16, depth=1)
        >>> weights = mlp.init(jax.random.key(0))
        >>> mlp(weights, jnp.ones(2)).shape
        (2,)
    """

    in_size: int = eqx.field(static=True)
    out_size: int = eqx.field(static=True)
    width: int = eqx.field(static=True, default=64)
    depth: int = eqx.field(static=True, default=2)
    activation: str = eqx.field(static=True, default="tanh")

    def __check_init__(self):
        for name in ("in_size", "out_size", "width"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"Mlp {name} must be a positive integer, got {value!r}")
        if isinstance(self.depth, bool) or not isinstance(self.depth, int) or self.depth < 0:
            raise ValueError(f"Mlp depth must be an integer >= 0, got {self.depth!r}")
        _check_choice("activation", self.activation, ACTIVATIONS)

    @property
    def sizes(self) -> tuple[int, ...]:
        """Layer sizes from input to output."""
        return (self.in_size,) + (self.width,) * self.depth + (self.out_size,)

    def init(self, key: PRNGKeyArray, *, final_scale: float = 1.0) -> MlpWeights:
        """Random weights: uniform in +-1/sqrt(fan_in) (the default of `equinox.nn.Linear`
        and `torch.nn.Linear`), the last layer multiplied by `final_scale`."""
        sizes = self.sizes
        keys = jax.random.split(key, len(sizes) - 1)
        layers = []
        for i, (k, n_in, n_out) in enumerate(zip(keys, sizes[:-1], sizes[1:], strict=False)):
            kw, kb = jax.random.split(k)
            bound = 1.0 / n_in**0.5
            scale = final_scale if i == len(sizes) - 2 else 1.0
            layers.append(
                {
                    "weight": scale
                    * jax.random.uniform(
                        kw, (n_out, n_in), minval=-bound, maxval=bound, dtype=float
                    ),
                    "bias": scale
                    * jax.random.uniform(kb, (n_out,), minval=-bound, maxval=bound, dtype=float),
                }
            )
        return tuple(layers)

    def __call__(
        self, weights: MlpWeights, x: Float[Array, " in_size"]
    ) -> Float[Array, " out_size"]:
        """The network's output for one input vector."""
        if len(weights) != self.depth + 1:
            raise ValueError(
                f"weights have {len(weights)} layers; this Mlp (depth {self.depth}) expects "
                f"{self.depth + 1}"
            )
        act = ACTIVATIONS[self.activation]
        for layer in weights[:-1]:
            x = act(layer["weight"] @ x + layer["bias"])
        return weights[-1]["weight"] @ x + weights[-1]["bias"]


class NeuralOde(OdeModel):
    """A neural ODE: dy/dt = MLP(features(y)), the network's weights in `params["net"]`.

    Arguments (static options; changing one recompiles):
        state_names: names of the state components (their number is the network's input
            and output size).
        width, depth, activation: the network (see `Mlp`).
        features: what the network sees: `identity` (y) or `cubic` (y**3, the input of
            the spiral example of Chen et al. 2018).
        initial: default initial value of each state component (zeros if omitted).
        seed: seed of the random initial weights that `default_params` returns.

    Parameters:
        net: the network's weights (an `MlpWeights` pytree).

    Example:
        >>> import sim, jax.numpy as jnp
        >>> model = NeuralOde(state_names=("y1", "y2"), features="cubic", initial=(2.0, 0.0))
        >>> params = model.default_params()              # {"net": weights}
        >>> traj = sim.simulate(model, params, jnp.linspace(0.0, 1.0, 11))
        >>> traj.observables["y1"].shape
        (11,)
    """

    name: ClassVar[str] = "neural_ode"
    description: ClassVar[str] = "dy/dt = MLP(features(y)), Chen et al. (2018)"
    parameters: ClassVar[tuple[Parameter, ...]] = (
        Parameter("net", _NET_DEFAULT, "1", "weights of the vector-field network"),
    )

    state_names: tuple[str, ...] = eqx.field(static=True, default=("y1", "y2"), converter=tuple)
    width: int = eqx.field(static=True, default=64)
    depth: int = eqx.field(static=True, default=2)
    activation: str = eqx.field(static=True, default="tanh")
    features: str = eqx.field(static=True, default="identity")
    initial: tuple[float, ...] | None = eqx.field(static=True, default=None, converter=_floats)
    seed: int = eqx.field(static=True, default=0)

    def __check_init__(self):
        if len(self.state_names) < 1 or not all(isinstance(n, str) and n for n in self.state_names):
            raise ValueError(
                f"state_names must be one or more non-empty strings, got {self.state_names!r}"
            )
        if len(set(self.state_names)) != len(self.state_names):
            raise ValueError(f"state_names must be distinct, got {self.state_names!r}")
        _check_choice("features", self.features, FEATURES)
        if self.initial is not None and len(self.initial) != len(self.state_names):
            raise ValueError(
                f"initial has {len(self.initial)} values but the state has {len(self.state_names)} "
                f"components ({', '.join(self.state_names)})"
            )
        _ = self.net  # checks width, depth and activation

    @property
    def net(self) -> Mlp:
        """The network's structure."""
        n = len(self.state_names)
        return Mlp(n, n, width=self.width, depth=self.depth, activation=self.activation)

    @property
    def initial_defaults(self) -> dict[str, float]:
        values = self.initial if self.initial is not None else (0.0,) * len(self.state_names)
        return {name: float(v) for name, v in zip(self.state_names, values, strict=False)}

    def default_params(self) -> dict[str, PyTree]:
        """Random initial weights from `seed`: {"net": MlpWeights}."""
        return {"net": self.net.init(jax.random.key(self.seed))}

    def vector_field(self, t: Scalar, y: State, params: PyTree) -> State:
        return self.net(params["net"], FEATURES[self.features](y))


class HybridLotkaVolterra(OdeModel):
    """Lotka-Volterra with a learned interaction: known growth and death, unknown coupling.

        dx/dt = alpha x + c_x(x, y),    dy/dt = -gamma y + c_y(x, y),
        (c_x, c_y) = scale * MLP((x, y) / scale)

    The network stands in for the interaction terms (-beta x y, +delta x y in the
    classic model), which it recovers when trained on predator-prey trajectories with
    alpha and gamma known (Rackauckas et al. 2020).

    Arguments (static options):
        width, depth, activation: the network (see `Mlp`).
        scale: typical population size (thousand): the network sees and returns
            populations in units of `scale`.
        seed: seed of the random initial weights; the last layer starts 100 times
            smaller than usual, so an untrained model is close to its known part.

    Parameters:
        alpha, gamma: as in `LotkaVolterra`; net: the correction network's weights.

    Example:
        >>> model = HybridLotkaVolterra()
        >>> params = model.default_params()     # {"alpha": .., "gamma": .., "net": weights}
        >>> model.correction(jnp.array([30.0, 4.0]), params).shape
        (2,)
    """

    name: ClassVar[str] = "hybrid_lotka_volterra"
    description: ClassVar[str] = "Lotka-Volterra, known growth and death, learned interaction"
    parameters: ClassVar[tuple[Parameter, ...]] = (
        Parameter("alpha", 0.55, "1/year", "prey birth rate", "positive"),
        Parameter("gamma", 0.80, "1/year", "predator death rate", "positive"),
        Parameter("net", _NET_DEFAULT, "1", "weights of the interaction network"),
    )
    state_names: ClassVar[tuple[str, ...]] = ("prey", "predator")
    initial_defaults: ClassVar[dict[str, float]] = {"prey": 30.0, "predator": 4.0}
    initial_units: ClassVar[str] = "thousand"
    initial_constraint: ClassVar[str] = "positive"

    width: int = eqx.field(static=True, default=32)
    depth: int = eqx.field(static=True, default=2)
    activation: str = eqx.field(static=True, default="tanh")
    scale: float = eqx.field(static=True, default=20.0)
    seed: int = eqx.field(static=True, default=0)

    def __check_init__(self):
        if not (isinstance(self.scale, (int, float)) and self.scale > 0):
            raise ValueError(f"scale must be a positive number, got {self.scale!r}")
        _ = self.net  # checks width, depth and activation

    @property
    def net(self) -> Mlp:
        """The correction network's structure."""
        return Mlp(2, 2, width=self.width, depth=self.depth, activation=self.activation)

    def default_params(self) -> dict[str, PyTree]:
        """alpha and gamma at their defaults, the network's weights random from `seed`."""
        params: dict[str, PyTree] = {
            p.name: jnp.asarray(p.default, dtype=float) for p in self.parameters if p.name != "net"
        }
        params["net"] = self.net.init(jax.random.key(self.seed), final_scale=1e-2)
        return params

    def known(self, y: State, params: PyTree) -> State:
        """The known part of the vector field: (alpha x, -gamma y)."""
        return jnp.stack([params["alpha"] * y[0], -params["gamma"] * y[1]])

    def correction(self, y: State, params: PyTree) -> State:
        """The learned part of the vector field at state `y` [2] (thousand per year)."""
        return self.scale * self.net(params["net"], y / self.scale)

    def vector_field(self, t: Scalar, y: State, params: PyTree) -> State:
        return self.known(y, params) + self.correction(y, params)
