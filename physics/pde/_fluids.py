"""Incompressible 2D Navier-Stokes in vorticity form on a periodic box."""

from __future__ import annotations

import math
from typing import Any, ClassVar

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Inexact, PyTree

from .._base import Parameter
from ._initial import _per_axis
from .base import Field, SpectralPdeModel, as_domain, as_points


class NavierStokes2d(SpectralPdeModel):
    """w_t + (u . grad) w = nu Laplacian(w) - mu w + f, with velocity (u, v) = (psi_y, -psi_x)
    and streamfunction Laplacian(psi) = -w, on a periodic box.

    The forcing f is the curl of Kolmogorov's body force (A sin(n' y), 0), n' = 2 pi n / L_y:
    f = -A n' cos(n' y), with A the parameter `forcing` (0: unforced) and n the option
    `forcing_mode`. mu is a linear (Rayleigh) drag. Observables: `energy` (half the
    integral of |u|^2) and `enstrophy` (half the integral of w^2), both conserved
    when nu = mu = A = 0.

    Arguments:
        points: nodes per axis (even), two axes.
        domain: (low, high) per axis; default [0, 2 pi]^2.
        forcing_mode: n, the wavenumber (in periods of the box) of the forcing.
    """

    points: tuple[int, ...] = eqx.field(static=True, default=(64, 64), converter=as_points)
    domain: tuple[tuple[float, float], ...] | None = eqx.field(
        static=True, default=None, converter=as_domain
    )
    forcing_mode: int = eqx.field(static=True, default=4)

    name: ClassVar[str] = "navier_stokes_2d"
    description: ClassVar[str] = (
        "2D incompressible Navier-Stokes (vorticity), Kolmogorov forcing, drag; Fourier spectral"
    )
    parameters: ClassVar[tuple[Parameter, ...]] = (
        Parameter("viscosity", 1e-3, "length^2/time", "kinematic viscosity nu", "nonnegative"),
        Parameter("drag", 0.0, "1/time", "linear drag mu", "nonnegative"),
        Parameter(
            "forcing", 0.0, "length/time^2", "amplitude A of the Kolmogorov body force", "real"
        ),
    )
    field_names: ClassVar[tuple[str, ...]] = ("vorticity",)
    dims: ClassVar[tuple[int, ...]] = (2,)
    initial_kind: ClassVar[str] = "taylor_green"
    extra_observable_names: ClassVar[tuple[str, ...]] = ("energy", "enstrophy")

    def __check_init__(self):
        if (
            isinstance(self.forcing_mode, bool)
            or not isinstance(self.forcing_mode, int)
            or self.forcing_mode < 1
        ):
            raise ValueError(
                f"model {self.name!r}: forcing_mode = {self.forcing_mode!r}: expected a whole "
                "number >= 1"
            )
        if (
            isinstance(self.points, tuple)
            and len(self.points) == 2
            and isinstance(self.points[1], int)
        ):
            if self.forcing_mode >= self.points[1] // 3:
                raise ValueError(
                    f"model {self.name!r}: forcing_mode = {self.forcing_mode} is not resolved by "
                    f"points[1] = {self.points[1]} (dealiased modes < {self.points[1] // 3})"
                )

    def linear(self, params: PyTree, grid: Any) -> Inexact[Array, "..."]:
        return params["viscosity"] * grid.laplacian() - params["drag"]

    def _velocity_hat(self, w_hat, grid):
        lap = grid.laplacian()
        inverse = jnp.where(lap == 0, 0.0, -1.0 / jnp.where(lap == 0, 1.0, lap))  # 1 / |k|^2
        psi_hat = inverse.astype(w_hat.dtype) * w_hat
        return grid.derivative(1) * psi_hat, -grid.derivative(0) * psi_hat

    def forcing_hat(self, params: PyTree, grid: Any) -> Inexact[Array, "..."]:
        """The Fourier transform of f = -A n' cos(n' y) (a single rfft mode, built directly)."""
        n = self.forcing_mode
        (_, _), (ay, by) = self.domain
        k = 2 * math.pi * n / (by - ay)
        # the rfft of cos(n' y) is prod(points) / 2 at the mode (0, n) (found from the
        # grid's mode numbers, so that a grid split over devices finds it on its block)
        m0, m1 = grid.integer_wavenumbers()
        mask = jnp.where((m0 == 0) & (m1 == n), -k * math.prod(self.points) / 2, 0.0)
        # nodes start at ay: cos(n' y) = Re(e^{i n' ay} e^{i n' (y - ay)}), hence the phase
        spectrum = jnp.broadcast_to(mask * np.exp(1j * k * ay), grid.spectral_shape).astype(
            jnp.result_type(grid.derivative(0))
        )
        return params["forcing"].astype(spectrum.dtype) * spectrum

    def nonlinear(
        self, u_hat: Inexact[Array, "C ..."], params: PyTree, grid: Any
    ) -> Inexact[Array, "C ..."]:
        w_hat = u_hat[0]
        vx_hat, vy_hat = self._velocity_hat(w_hat, grid)
        # Four separate inverse transforms: on CPU, XLA runs them faster than one batched
        # transform of the stacked spectra (4.1 vs 6.4 ms per ETDRK4 step on 256 x 256).
        vx, vy = grid.irfft(vx_hat), grid.irfft(vy_hat)
        wx, wy = grid.irfft(grid.derivative(0) * w_hat), grid.irfft(grid.derivative(1) * w_hat)
        advection_hat = grid.rfft(vx * wx + vy * wy)
        return (self.forcing_hat(params, grid) - advection_hat)[None]

    def extra_observables(self, u: Field, params: PyTree, grid: Any) -> dict[str, Array]:
        vx_hat, vy_hat = self._velocity_hat(grid.rfft(u[0]), grid)
        vx, vy = grid.irfft(jnp.stack([vx_hat, vy_hat]))
        return {
            "energy": 0.5 * grid.integral(vx * vx + vy * vy),
            "enstrophy": 0.5 * grid.integral(u[0] * u[0]),
        }

    def special_initial_kinds(self) -> dict[str, Any]:
        return {"taylor_green": taylor_green_vorticity}


def taylor_green_vorticity(
    model: Any, params: PyTree, *, amplitude: float = 1.0, modes: Any = 1
) -> np.ndarray:
    """The Taylor-Green vortex (Taylor and Green 1937): streamfunction
    psi = A sin(kx x) sin(ky y), vorticity w = (kx^2 + ky^2) psi, k = 2 pi m / L per axis.
    An exact steady shape: it decays as exp(-(nu |k|^2 + mu) t) without forcing."""
    m = _per_axis("modes", modes, 2)
    x, y = model.mesh()
    (ax, bx), (ay, by) = model.domain
    kx, ky = 2 * np.pi * m[0] / (bx - ax), 2 * np.pi * m[1] / (by - ay)
    psi = amplitude * np.sin(kx * (x - ax)) * np.sin(ky * (y - ay))
    return ((kx**2 + ky**2) * psi)[None]


NAVIER_STOKES_FORMS = ("rotational", "advective")


class NavierStokes3d(SpectralPdeModel):
    """u_t = P[N(u)] + nu Laplacian(u), div u = 0: incompressible Navier-Stokes for the
    velocity (u, v, w) on a periodic box, the pressure removed by the projection P onto
    divergence-free fields (P = I - k k^T / |k|^2 per Fourier mode).

    The nonlinear term is N = u x omega (`form = "rotational"`, omega = curl u: three
    inverse and three forward transforms fewer than the advective form) or
    N = -(u . grad) u (`form = "advective"`); the two differ by grad(|u|^2 / 2), which P
    removes, so they give the same flow. Dealiased by the solver (2/3 rule).
    Observables: `energy` (half the integral of |u|^2) and `enstrophy` (half the integral
    of |omega|^2); without forcing dE/dt = -2 nu enstrophy.

    Arguments:
        points: nodes per axis (even), three axes.
        domain: (low, high) per axis; default [0, 2 pi]^3.
        form: "rotational" or "advective".

    Example:
        >>> model = NavierStokes3d(points=(32, 32, 32))
    """

    points: tuple[int, ...] = eqx.field(static=True, default=(32, 32, 32), converter=as_points)
    domain: tuple[tuple[float, float], ...] | None = eqx.field(
        static=True, default=None, converter=as_domain
    )
    form: str = eqx.field(static=True, default="rotational")

    name: ClassVar[str] = "navier_stokes_3d"
    description: ClassVar[str] = (
        "3D incompressible Navier-Stokes (velocity, projected), rotational or advective form; "
        "Fourier spectral"
    )
    parameters: ClassVar[tuple[Parameter, ...]] = (
        Parameter("viscosity", 0.01, "length^2/time", "kinematic viscosity nu", "nonnegative"),
    )
    field_names: ClassVar[tuple[str, ...]] = ("u", "v", "w")
    dims: ClassVar[tuple[int, ...]] = (3,)
    initial_kind: ClassVar[str] = "taylor_green"
    extra_observable_names: ClassVar[tuple[str, ...]] = ("energy", "enstrophy")

    def __check_init__(self):
        if self.form not in NAVIER_STOKES_FORMS:
            raise ValueError(
                f"model {self.name!r}: form = {self.form!r}: expected one of "
                f"{', '.join(NAVIER_STOKES_FORMS)}"
            )

    def linear(self, params: PyTree, grid: Any) -> Inexact[Array, "..."]:
        return (params["viscosity"] * grid.laplacian())[None]

    def project(self, f_hat: Inexact[Array, "3 ..."], grid: Any) -> Inexact[Array, "3 ..."]:
        """The divergence-free part of a vector field in Fourier space: f - D (D . f) / (D . D)
        with D_i the derivative symbols (so the divergence D . f of the result is zero on
        every mode; the mean mode is left as it is)."""
        d = [grid.derivative(i) for i in range(3)]
        squared = sum(di * di for di in d)  # -|k|^2 (real, with the Nyquist modes dropped)
        inverse = jnp.where(squared == 0, 0.0, 1.0 / jnp.where(squared == 0, 1.0, squared))
        div = sum(di * f_hat[i] for i, di in enumerate(d))
        return jnp.stack([f_hat[i] - d[i] * inverse * div for i in range(3)])

    def _vorticity_hat(self, u_hat, grid):
        d = [grid.derivative(i) for i in range(3)]
        return jnp.stack(
            [
                d[1] * u_hat[2] - d[2] * u_hat[1],
                d[2] * u_hat[0] - d[0] * u_hat[2],
                d[0] * u_hat[1] - d[1] * u_hat[0],
            ]
        )

    def nonlinear(
        self, u_hat: Inexact[Array, "C ..."], params: PyTree, grid: Any
    ) -> Inexact[Array, "C ..."]:
        u = grid.irfft(u_hat)
        if self.form == "rotational":
            w = grid.irfft(self._vorticity_hat(u_hat, grid))
            n = jnp.stack(
                [
                    u[1] * w[2] - u[2] * w[1],
                    u[2] * w[0] - u[0] * w[2],
                    u[0] * w[1] - u[1] * w[0],
                ]
            )
        else:
            d = [grid.derivative(i) for i in range(3)]
            n = -sum(u[j] * grid.irfft(d[j] * u_hat) for j in range(3))
        return self.project(grid.rfft(n), grid)

    def extra_observables(self, u: Field, params: PyTree, grid: Any) -> dict[str, Array]:
        w = grid.irfft(self._vorticity_hat(grid.rfft(u), grid))
        return {
            "energy": 0.5 * grid.integral(jnp.sum(u * u, axis=0)),
            "enstrophy": 0.5 * grid.integral(jnp.sum(w * w, axis=0)),
        }

    def special_initial_kinds(self) -> dict[str, Any]:
        return {"taylor_green": taylor_green_velocity}


def taylor_green_velocity(
    model: Any, params: PyTree, *, amplitude: float = 1.0, modes: Any = 1
) -> np.ndarray:
    """The 3-D Taylor-Green vortex (Taylor and Green 1937): u = A sin(kx x) cos(ky y)
    cos(kz z), v = -A (kx / ky) cos(kx x) sin(ky y) cos(kz z), w = 0, k = 2 pi m / L per
    axis, divergence-free (with the coordinates measured from the domain's low ends; on
    [0, 2 pi]^3 with m = 1: u = sin x cos y cos z, v = -cos x sin y cos z)."""
    m = _per_axis("modes", modes, 3)
    x, y, z = (c - low for c, (low, _) in zip(model.mesh(), model.domain, strict=True))
    kx, ky, kz = (2 * np.pi * mi / (b - a) for mi, (a, b) in zip(m, model.domain, strict=True))
    u = amplitude * np.sin(kx * x) * np.cos(ky * y) * np.cos(kz * z)
    v = -amplitude * (kx / ky) * np.cos(kx * x) * np.sin(ky * y) * np.cos(kz * z)
    return np.stack([u, v, np.zeros_like(u)])
