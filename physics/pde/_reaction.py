"""Reaction-diffusion on periodic boxes: Allen-Cahn and Gray-Scott."""

from __future__ import annotations

from typing import Any, ClassVar

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Inexact, PyTree

from .._base import Parameter
from .base import Field, SpectralPdeModel, as_domain, as_points


class AllenCahn(SpectralPdeModel):
    """Allen-Cahn phase separation u_t = D Laplacian(u) + r (u - u^3) on a periodic box
    (Allen and Cahn, Acta Metall. 27, 1979).

    A gradient flow: the `free_energy`, integral of D |grad u|^2 / 2 + r (u^2 - 1)^2 / 4,
    never increases. A spatially uniform field follows the ODE u' = r (u - u^3).

    Arguments:
        points: nodes per axis (even); 1 to 3 axes.
        domain: (low, high) per axis; default [0, 2 pi].
    """

    points: tuple[int, ...] = eqx.field(static=True, default=(128,), converter=as_points)
    domain: tuple[tuple[float, float], ...] | None = eqx.field(
        static=True, default=None, converter=as_domain
    )

    name: ClassVar[str] = "allen_cahn"
    description: ClassVar[str] = "Allen-Cahn phase separation on a periodic box, Fourier spectral"
    parameters: ClassVar[tuple[Parameter, ...]] = (
        Parameter(
            "diffusivity",
            0.01,
            "length^2/time",
            "interface energy coefficient D (epsilon^2)",
            "positive",
        ),
        Parameter("rate", 1.0, "1/time", "reaction rate r", "positive"),
    )
    field_names: ClassVar[tuple[str, ...]] = ("u",)
    dims: ClassVar[tuple[int, ...]] = (1, 2, 3)
    initial_kind: ClassVar[str] = "random"
    initial_defaults: ClassVar[dict[str, Any]] = {"amplitude": 0.5, "max_mode": 8}
    extra_observable_names: ClassVar[tuple[str, ...]] = ("free_energy",)

    def linear(self, params: PyTree, grid: Any) -> Inexact[Array, "..."]:
        return params["diffusivity"] * grid.laplacian() + params["rate"]

    def nonlinear(
        self, u_hat: Inexact[Array, "C ..."], params: PyTree, grid: Any
    ) -> Inexact[Array, "C ..."]:
        u = grid.irfft(u_hat)
        return grid.rfft(-params["rate"] * u * u * u)

    def extra_observables(self, u: Field, params: PyTree, grid: Any) -> dict[str, Array]:
        u_hat = grid.rfft(u[0])
        grad2 = sum(grid.irfft(grid.derivative(i) * u_hat) ** 2 for i in range(grid.ndim))
        density = 0.5 * params["diffusivity"] * grad2 + 0.25 * params["rate"] * (u[0] ** 2 - 1) ** 2
        return {"free_energy": grid.integral(density)}


class GrayScott(SpectralPdeModel):
    """Gray-Scott reaction-diffusion (Gray and Scott 1984; Pearson, Science 261, 1993):

        u_t = D_u Laplacian(u) - u v^2 + F (1 - u)
        v_t = D_v Laplacian(v) + u v^2 - (F + k) v

    The defaults are Pearson's setup: D_u = 2e-5, D_v = 1e-5 on a periodic [0, 2.5]^2,
    started from u = 1, v = 0 with a perturbed central square (initial kind `pearson`).

    Arguments:
        points: nodes per axis (even); 1 to 3 axes (2 is the classic).
        domain: (low, high) per axis; default [0, 2.5].
    """

    points: tuple[int, ...] = eqx.field(static=True, default=(128, 128), converter=as_points)
    domain: tuple[tuple[float, float], ...] | None = eqx.field(
        static=True, default=None, converter=as_domain
    )

    name: ClassVar[str] = "gray_scott"
    description: ClassVar[str] = (
        "Gray-Scott reaction-diffusion patterns (Pearson 1993), Fourier spectral"
    )
    parameters: ClassVar[tuple[Parameter, ...]] = (
        Parameter("feed", 0.035, "1/time", "feed rate F of u", "nonnegative"),
        Parameter("kill", 0.065, "1/time", "removal rate k of v", "nonnegative"),
        Parameter("diffusivity_u", 2e-5, "length^2/time", "diffusion coefficient D_u", "positive"),
        Parameter("diffusivity_v", 1e-5, "length^2/time", "diffusion coefficient D_v", "positive"),
    )
    field_names: ClassVar[tuple[str, ...]] = ("u", "v")
    dims: ClassVar[tuple[int, ...]] = (1, 2, 3)
    default_domain: ClassVar[tuple[float, float]] = (0.0, 2.5)
    initial_kind: ClassVar[str] = "pearson"

    def linear(self, params: PyTree, grid: Any) -> Inexact[Array, "..."]:
        lap = grid.laplacian()
        lu = params["diffusivity_u"] * lap - params["feed"]
        lv = params["diffusivity_v"] * lap - (params["feed"] + params["kill"])
        return jnp.stack([lu, lv])

    def nonlinear(
        self, u_hat: Inexact[Array, "C ..."], params: PyTree, grid: Any
    ) -> Inexact[Array, "C ..."]:
        u, v = grid.irfft(u_hat)
        uvv = u * v * v
        return grid.rfft(jnp.stack([params["feed"] - uvv, uvv]))

    def special_initial_kinds(self) -> dict[str, Any]:
        return {"pearson": pearson_square}


def pearson_square(
    model: Any, params: PyTree, *, size: float = 0.078125, noise: float = 0.01, seed: int = 0
) -> np.ndarray:
    """Pearson's (1993) start: u = 1, v = 0, except a central box of side `size` (a
    fraction of the domain; 20/256 by default) where u = 1/2, v = 1/4; then every value
    is perturbed by a relative uniform noise of +- `noise`."""
    if not 0 < size < 1:
        raise ValueError(
            f"initial option size = {size!r}: expected a fraction of the domain in (0, 1)"
        )
    rng = np.random.default_rng(seed)
    mesh = model.mesh()
    inside = np.ones(mesh[0].shape, dtype=bool)
    for x, (a, b) in zip(mesh, model.domain, strict=False):
        centre, half = (a + b) / 2, size * (b - a) / 2
        inside &= np.abs(x - centre) <= half
    u = np.where(inside, 0.5, 1.0)
    v = np.where(inside, 0.25, 0.0)
    u = u * (1 + noise * rng.uniform(-1, 1, u.shape))
    v = v * (1 + noise * rng.uniform(-1, 1, v.shape))
    return np.stack([u, v])
