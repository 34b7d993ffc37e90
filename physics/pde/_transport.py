"""Diffusion, advection-diffusion and viscous Burgers on periodic boxes."""

from __future__ import annotations

import math
from typing import Any, ClassVar

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Inexact, PyTree

from .._base import Parameter
from .base import Field, SpectralPdeModel, as_domain, as_points


def complex_dtype(grid: Any):
    return jnp.complex128 if jnp.dtype(grid.dtype) == jnp.float64 else jnp.complex64


def as_direction(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return tuple(
            float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v
            for v in value
        )
    return value


class Heat(SpectralPdeModel):
    """Diffusion u_t = D Laplacian(u) on a periodic box (1 to 3 dimensions).

    Solved exactly in time by the linear part of ETDRK (each Fourier mode decays as
    exp(-D |k|^2 t)). Observable `mass` (the integral of u) is conserved.

    Arguments:
        points: nodes per axis (even), e.g. (64,) or (64, 64).
        domain: (low, high) per axis; default [0, 2 pi] on every axis.

    Example:
        >>> model = Heat(points=(64,))
    """

    points: tuple[int, ...] = eqx.field(static=True, default=(64,), converter=as_points)
    domain: tuple[tuple[float, float], ...] | None = eqx.field(
        static=True, default=None, converter=as_domain
    )

    name: ClassVar[str] = "heat"
    description: ClassVar[str] = "diffusion (heat equation) on a periodic box, Fourier spectral"
    parameters: ClassVar[tuple[Parameter, ...]] = (
        Parameter("diffusivity", 0.1, "length^2/time", "diffusion coefficient D", "positive"),
    )
    field_names: ClassVar[tuple[str, ...]] = ("u",)
    dims: ClassVar[tuple[int, ...]] = (1, 2, 3)
    initial_kind: ClassVar[str] = "sine"
    extra_observable_names: ClassVar[tuple[str, ...]] = ("mass",)

    def linear(self, params: PyTree, grid: Any) -> Inexact[Array, "..."]:
        return params["diffusivity"] * grid.laplacian()

    def nonlinear(
        self, u_hat: Inexact[Array, "C ..."], params: PyTree, grid: Any
    ) -> Inexact[Array, "C ..."]:
        return jnp.zeros_like(u_hat)

    def extra_observables(self, u: Field, params: PyTree, grid: Any) -> dict[str, Array]:
        return {"mass": grid.integral(u[0])}


class AdvectionDiffusion(SpectralPdeModel):
    """u_t + velocity * (direction . grad u) = D Laplacian(u) on a periodic box.

    Arguments:
        points: nodes per axis (even).
        domain: (low, high) per axis; default [0, 2 pi].
        direction: the unit direction of transport (normalised here); default the
            first axis. The speed is the parameter `velocity`.

    Each Fourier mode moves at the speed and decays as exp(-D |k|^2 t); `mass` is
    conserved.
    """

    points: tuple[int, ...] = eqx.field(static=True, default=(64,), converter=as_points)
    domain: tuple[tuple[float, float], ...] | None = eqx.field(
        static=True, default=None, converter=as_domain
    )
    direction: tuple[float, ...] | None = eqx.field(
        static=True, default=None, converter=as_direction
    )

    name: ClassVar[str] = "advection_diffusion"
    description: ClassVar[str] = (
        "advection-diffusion at constant velocity on a periodic box, Fourier spectral"
    )
    parameters: ClassVar[tuple[Parameter, ...]] = (
        Parameter("velocity", 1.0, "length/time", "transport speed along `direction`", "real"),
        Parameter("diffusivity", 0.01, "length^2/time", "diffusion coefficient D", "nonnegative"),
    )
    field_names: ClassVar[tuple[str, ...]] = ("u",)
    dims: ClassVar[tuple[int, ...]] = (1, 2, 3)
    initial_kind: ClassVar[str] = "gaussian"
    initial_defaults: ClassVar[dict[str, Any]] = {"width": 0.5}
    extra_observable_names: ClassVar[tuple[str, ...]] = ("mass",)

    def __check_init__(self):
        if self.direction is not None:
            d = self.direction
            if (
                not isinstance(d, tuple)
                or len(d) != len(self.points)
                or not all(isinstance(v, float) and math.isfinite(v) for v in d)
                or not any(d)
            ):
                raise ValueError(
                    f"model {self.name!r}: direction = {d!r}: expected {len(self.points)} finite "
                    "numbers, not all zero"
                )

    @property
    def unit_direction(self) -> tuple[float, ...]:
        d = self.direction if self.direction is not None else (1.0,) + (0.0,) * (self.ndim - 1)
        norm = math.sqrt(sum(v * v for v in d))
        return tuple(v / norm for v in d)

    def linear(self, params: PyTree, grid: Any) -> Inexact[Array, "..."]:
        cdtype = complex_dtype(grid)
        advect = sum(
            di * grid.derivative(i) for i, di in enumerate(self.unit_direction) if di != 0.0
        )
        velocity = params["velocity"].astype(cdtype)
        diffusion = (params["diffusivity"] * grid.laplacian()).astype(cdtype)
        return diffusion - velocity * advect

    def nonlinear(
        self, u_hat: Inexact[Array, "C ..."], params: PyTree, grid: Any
    ) -> Inexact[Array, "C ..."]:
        return jnp.zeros_like(u_hat)

    def extra_observables(self, u: Field, params: PyTree, grid: Any) -> dict[str, Array]:
        return {"mass": grid.integral(u[0])}


class Burgers(SpectralPdeModel):
    """Viscous Burgers on a periodic box: u_t + (u . grad) u = nu Laplacian(u).

    1D: the scalar equation in conservative form u_t + (u^2 / 2)_x = nu u_xx, field `u`;
    `mass` (the integral of u) is conserved and, with nu = 0, the `energy` (half the
    integral of u^2) too until a shock forms (dealiased Galerkin form).
    2D: the velocity vector (u, v) in advective form, fields `u` and `v`; curl-free
    initial velocities stay curl-free and follow the Cole-Hopf solution.

    Arguments:
        points: nodes per axis (even); 1 or 2 axes.
        domain: (low, high) per axis; default [0, 2 pi].
    """

    points: tuple[int, ...] = eqx.field(static=True, default=(128,), converter=as_points)
    domain: tuple[tuple[float, float], ...] | None = eqx.field(
        static=True, default=None, converter=as_domain
    )

    name: ClassVar[str] = "burgers"
    description: ClassVar[str] = (
        "viscous Burgers (1D scalar, 2D vector) on a periodic box, Fourier spectral"
    )
    parameters: ClassVar[tuple[Parameter, ...]] = (
        Parameter("viscosity", 0.01, "length^2/time", "kinematic viscosity nu", "nonnegative"),
    )
    dims: ClassVar[tuple[int, ...]] = (1, 2)
    initial_kind: ClassVar[str] = "sine"

    @property
    def field_names(self) -> tuple[str, ...]:
        return ("u",) if len(self.points) == 1 else ("u", "v")

    @property
    def extra_observable_names(self) -> tuple[str, ...]:
        return ("mass", "energy") if len(self.points) == 1 else ("energy",)

    def linear(self, params: PyTree, grid: Any) -> Inexact[Array, "..."]:
        return params["viscosity"] * grid.laplacian()

    def nonlinear(
        self, u_hat: Inexact[Array, "C ..."], params: PyTree, grid: Any
    ) -> Inexact[Array, "C ..."]:
        if grid.ndim == 1:
            u = grid.irfft(u_hat)
            return -0.5 * grid.derivative(0) * grid.rfft(u * u)
        dx, dy = grid.derivative(0), grid.derivative(1)
        # Separate transforms per component: faster on CPU than one batched transform.
        u, v, ux, vx, uy, vy = (grid.irfft(c) for c in (*u_hat, *(dx * u_hat), *(dy * u_hat)))
        return -jnp.stack([grid.rfft(u * ux + v * uy), grid.rfft(u * vx + v * vy)])

    def extra_observables(self, u: Field, params: PyTree, grid: Any) -> dict[str, Array]:
        energy = 0.5 * grid.integral(jnp.sum(u * u, axis=0))
        if grid.ndim == 1:
            return {"mass": grid.integral(u[0]), "energy": energy}
        return {"energy": energy}

    def special_initial_kinds(self) -> dict[str, Any]:
        return {"taylor_green": taylor_green_velocity} if len(self.points) == 2 else {}


def taylor_green_velocity(
    model: Any, params: PyTree, *, amplitude: float = 1.0, modes: Any = 1
) -> Any:
    """The Taylor-Green velocity u = A sin(kx x) cos(ky y), v = -A (kx / ky) cos(kx x) sin(ky y)
    (divergence free), with k = 2 pi m / L per axis."""
    import numpy as np

    from ._initial import _per_axis

    m = _per_axis("modes", modes, 2)
    x, y = model.mesh()
    (ax, bx), (ay, by) = model.domain
    kx, ky = 2 * np.pi * m[0] / (bx - ax), 2 * np.pi * m[1] / (by - ay)
    u = amplitude * np.sin(kx * (x - ax)) * np.cos(ky * (y - ay))
    v = -amplitude * (kx / ky) * np.cos(kx * (x - ax)) * np.sin(ky * (y - ay))
    return np.stack([u, v])
