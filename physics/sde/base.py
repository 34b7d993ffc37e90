"""The abstract SDE family."""

from __future__ import annotations

import abc
from typing import ClassVar

from jaxtyping import Array, Float, PyTree

from .._base import NamedStateModel
from .._types import Scalar, State

NOISE_KINDS = ("diagonal", "additive", "general")
"""How the Brownian motions enter `SdeModel.diffusion` (see `SdeModel`)."""

Diffusion = Float[Array, " n"] | Float[Array, "n m"]


class SdeModel(NamedStateModel):
    """A system dy = f(t, y; params) dt + g(t, y; params) dW (Ito) with named state components.

    Concrete classes set `state_names` (one per component of the state vector, in
    order), `initial_defaults` (a default initial value per component) and `noise`, and
    implement `drift` (f) and `diffusion` (g); `initial_constraint` (one of
    physics.CONSTRAINTS) says which initial values make sense. Observables default to
    the state components by name; a model adds derived ones by overriding
    `extra_observables`.

    The noise kind says what `diffusion` returns and which solvers apply:

    - `diagonal`: g is a vector [n] and component i has its own Brownian motion,
      dy_i = f_i dt + g_i dW_i. Milstein's method needs each g_i to depend on y_i
      alone (commutative noise, Kloeden & Platen, "Numerical Solution of Stochastic
      Differential Equations", 1992, section 10.3), which is not checked.
    - `additive`: diagonal, with g independent of y (it may depend on t); the Ito
      and Stratonovich solutions coincide, which the high-order additive-noise
      methods (SRA1, ShARK) need.
    - `general`: g is a matrix [n, m] driven by m = `brownian_dims` independent
      Brownian motions, dy_i = f_i dt + sum_j g_ij dW_j.

    The state is a flat float vector `y` of shape [n].

    Example (an ensemble of 100 paths with `solvers.SdeSolver`):
        >>> import jax, jax.numpy as jnp
        >>> from physics.sde import OrnsteinUhlenbeck
        >>> from solvers import SdeSolver
        >>> model = OrnsteinUhlenbeck()
        >>> sol = SdeSolver(method="sra1", dt=0.01).solve_ensemble(
        ...     model.drift, model.diffusion, jnp.linspace(0.0, 5.0, 51), model.initial_state(),
        ...     model.default_params(), jax.random.key(0), 100, noise=model.noise)
        >>> sol.ys.shape
        (100, 51, 1)
    """

    noise: ClassVar[str]
    brownian_dims: ClassVar[int | None] = None

    def __check_init__(self):
        noise = getattr(self, "noise", None)
        if noise not in NOISE_KINDS:
            raise ValueError(
                f"model {self.name!r}: noise = {noise!r} is not one of {', '.join(NOISE_KINDS)}"
            )
        dims = self.brownian_dims
        if noise == "general" and not (isinstance(dims, int) and dims >= 1):
            raise ValueError(
                f"model {self.name!r}: general noise needs brownian_dims, the number of "
                f"Brownian motions (an int >= 1), got {dims!r}"
            )
        if noise != "general" and dims is not None:
            raise ValueError(
                f"model {self.name!r}: brownian_dims is for general noise only ({noise} noise "
                f"has one Brownian motion per state component)"
            )

    @abc.abstractmethod
    def drift(self, t: Scalar, y: State, params: PyTree) -> State:
        """The drift f [n] at time `t` for state `y` [n] and parameters `params`."""

    @abc.abstractmethod
    def diffusion(self, t: Scalar, y: State, params: PyTree) -> Diffusion:
        """The diffusion g at time `t` for state `y` [n]: shape `diffusion_shape`."""

    @property
    def diffusion_shape(self) -> tuple[int, ...]:
        """What `diffusion` returns: (n,) for diagonal and additive noise, (n, m) for general."""
        n = len(self.state_names)
        return (n, self.brownian_dims) if self.noise == "general" else (n,)
