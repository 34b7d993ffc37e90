"""Reaction-diffusion on bounded boxes (finite differences): heat and Fisher-KPP."""

from __future__ import annotations

from typing import Any, ClassVar

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float, PyTree

from .._base import Parameter
from .base import Field, GridPdeModel, as_domain, as_points


def freeze(value: Any) -> Any:
    """Lists (from TOML) to tuples, recursively, so that options are hashable."""
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    return value


class HeatFd(GridPdeModel):
    """Diffusion u_t = D Laplacian(u) on a box with Dirichlet, Neumann or periodic sides,
    by finite differences (1 or 2 dimensions).

    Arguments:
        points: nodes per axis, both ends included on bounded axes; default (65,).
        domain: (low, high) per axis; default [0, 1].
        boundary: "dirichlet" (default), "neumann" or "periodic" for every side, or per
            axis a kind or [low, high] kinds.
        boundary_value: Dirichlet value or Neumann outward derivative, for every side or
            per axis (a number or a [low, high] pair); default 0.

    With homogeneous Neumann (or periodic) sides the `mass` (integral of u) is conserved.
    """

    points: tuple[int, ...] = eqx.field(static=True, default=(65,), converter=as_points)
    domain: tuple[tuple[float, float], ...] | None = eqx.field(
        static=True, default=None, converter=as_domain
    )
    boundary: Any = eqx.field(static=True, default="dirichlet", converter=freeze)
    boundary_value: Any = eqx.field(static=True, default=0.0, converter=freeze)

    name: ClassVar[str] = "heat_fd"
    description: ClassVar[str] = (
        "diffusion on a bounded box (Dirichlet/Neumann/periodic), finite differences"
    )
    parameters: ClassVar[tuple[Parameter, ...]] = (
        Parameter("diffusivity", 0.1, "length^2/time", "diffusion coefficient D", "positive"),
    )
    field_names: ClassVar[tuple[str, ...]] = ("u",)
    dims: ClassVar[tuple[int, ...]] = (1, 2)
    initial_kind: ClassVar[str] = "sine"
    initial_defaults: ClassVar[dict[str, Any]] = {"modes": 0.5}
    extra_observable_names: ClassVar[tuple[str, ...]] = ("mass",)

    def diffusivities(self, params: PyTree) -> Float[Array, " C"]:
        return params["diffusivity"][None]

    def reaction(self, u: Field, params: PyTree) -> Field:
        return jnp.zeros_like(u)

    def extra_observables(self, u: Field, params: PyTree, grid: Any) -> dict[str, Array]:
        return {"mass": grid.integral(u[0])}


class FisherKpp(GridPdeModel):
    """Fisher-KPP invasion u_t = D Laplacian(u) + r u (1 - u) on a box, by finite
    differences (Fisher 1937; Kolmogorov, Petrovsky and Piskunov 1937).

    Fronts into u = 0 travel at 2 sqrt(r D) asymptotically; the Ablowitz-Zeppetella (1979)
    front u = (1 + C exp(sqrt(r / (6 D)) x - 5 r t / 6))^(-2) is an exact solution.

    Arguments:
        points: nodes per axis (both ends included on bounded axes); default (201,).
        domain: (low, high) per axis; default [0, 1].
        boundary: kinds as for `heat_fd`; default "neumann" (no flux).
        boundary_value: Dirichlet values or Neumann outward derivatives; default 0.
    """

    points: tuple[int, ...] = eqx.field(static=True, default=(201,), converter=as_points)
    domain: tuple[tuple[float, float], ...] | None = eqx.field(
        static=True, default=None, converter=as_domain
    )
    boundary: Any = eqx.field(static=True, default="neumann", converter=freeze)
    boundary_value: Any = eqx.field(static=True, default=0.0, converter=freeze)

    name: ClassVar[str] = "fisher_kpp"
    description: ClassVar[str] = "Fisher-KPP travelling fronts on a bounded box, finite differences"
    parameters: ClassVar[tuple[Parameter, ...]] = (
        Parameter("diffusivity", 1e-3, "length^2/time", "diffusion coefficient D", "positive"),
        Parameter("rate", 1.0, "1/time", "growth rate r", "positive"),
    )
    field_names: ClassVar[tuple[str, ...]] = ("u",)
    dims: ClassVar[tuple[int, ...]] = (1, 2)
    initial_kind: ClassVar[str] = "tanh_front"
    initial_defaults: ClassVar[dict[str, Any]] = {"position": 0.1, "width": 0.02}
    extra_observable_names: ClassVar[tuple[str, ...]] = ("mass",)

    def diffusivities(self, params: PyTree) -> Float[Array, " C"]:
        return params["diffusivity"][None]

    def reaction(self, u: Field, params: PyTree) -> Field:
        return params["rate"] * u * (1 - u)

    def extra_observables(self, u: Field, params: PyTree, grid: Any) -> dict[str, Array]:
        return {"mass": grid.integral(u[0])}
