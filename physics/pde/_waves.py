"""Korteweg-de Vries and Kuramoto-Sivashinsky on periodic intervals."""

from __future__ import annotations

import math
from typing import Any, ClassVar

import equinox as eqx
import numpy as np
from jaxtyping import Array, Inexact, PyTree

from .._base import Parameter
from ._transport import complex_dtype
from .base import Field, SpectralPdeModel, as_domain, as_points


class KortewegDeVries(SpectralPdeModel):
    """u_t + a u u_x + b u_xxx = 0 on a periodic interval (Korteweg and de Vries, 1895).

    The classic scaling is a = 6, b = 1, whose soliton is
    u = (c / 2) sech^2(sqrt(c) (x - x0 - c t) / 2). Conserved: `mass` (integral of u),
    `momentum` (half the integral of u^2) and `energy` (the Hamiltonian, integral of
    b u_x^2 / 2 - a u^3 / 6).

    Arguments:
        points: nodes (even), one axis.
        domain: (low, high); default [-20, 20].
    """

    points: tuple[int, ...] = eqx.field(static=True, default=(256,), converter=as_points)
    domain: tuple[tuple[float, float], ...] | None = eqx.field(
        static=True, default=None, converter=as_domain
    )

    name: ClassVar[str] = "kdv"
    description: ClassVar[str] = (
        "Korteweg-de Vries solitary waves on a periodic interval, Fourier spectral"
    )
    parameters: ClassVar[tuple[Parameter, ...]] = (
        Parameter("nonlinearity", 6.0, "1", "coefficient a of u u_x", "real"),
        Parameter("dispersion", 1.0, "length^3/time", "coefficient b of u_xxx", "positive"),
    )
    field_names: ClassVar[tuple[str, ...]] = ("u",)
    dims: ClassVar[tuple[int, ...]] = (1,)
    default_domain: ClassVar[tuple[float, float]] = (-20.0, 20.0)
    initial_kind: ClassVar[str] = "soliton"
    extra_observable_names: ClassVar[tuple[str, ...]] = ("mass", "momentum", "energy")

    def linear(self, params: PyTree, grid: Any) -> Inexact[Array, "..."]:
        d = grid.derivative(0)
        return -params["dispersion"].astype(complex_dtype(grid)) * d * d * d

    def nonlinear(
        self, u_hat: Inexact[Array, "C ..."], params: PyTree, grid: Any
    ) -> Inexact[Array, "C ..."]:
        u = grid.irfft(u_hat)
        a = params["nonlinearity"].astype(complex_dtype(grid))
        return -0.5 * a * grid.derivative(0) * grid.rfft(u * u)

    def extra_observables(self, u: Field, params: PyTree, grid: Any) -> dict[str, Array]:
        ux = grid.irfft(grid.derivative(0) * grid.rfft(u[0]))
        a, b = params["nonlinearity"], params["dispersion"]
        return {
            "mass": grid.integral(u[0]),
            "momentum": 0.5 * grid.integral(u[0] ** 2),
            "energy": grid.integral(0.5 * b * ux**2 - a / 6.0 * u[0] ** 3),
        }

    def special_initial_kinds(self) -> dict[str, Any]:
        return {"soliton": soliton}


def soliton(
    model: Any, params: PyTree, *, speed: float = 1.0, position: float | None = None
) -> np.ndarray:
    """The KdV soliton of speed c centred at `position` (default: a quarter of the way
    into the domain): u = (3 c / a) sech^2(sqrt(c / b) (x - position) / 2), summed over
    the periodic images that matter."""
    if not speed > 0:
        raise ValueError(f"initial option speed = {speed!r}: expected a positive soliton speed")
    a = float(params["nonlinearity"])
    b = float(params["dispersion"])
    ((low, high),) = model.domain
    length = high - low
    x0 = low + 0.25 * length if position is None else float(position)
    (x,) = model.mesh()
    u = np.zeros_like(x)
    for image in (-1, 0, 1):
        xi = math.sqrt(speed / b) * (x - x0 - image * length) / 2
        u = u + 3 * speed / a / np.cosh(xi) ** 2
    return u[None]


class KuramotoSivashinsky(SpectralPdeModel):
    """u_t + (a / 2) (u^2)_x + p u_xx + q u_xxxx = 0 on a periodic interval, conservative
    form (Kuramoto 1978, Sivashinsky 1977); chaotic for long intervals (L > about 60).

    The mean of u is conserved (`mass`). The default is the Kassam-Trefethen (2005)
    example: [0, 32 pi], u0 = cos(x / 16) (1 + sin(x / 16)) (initial kind
    `kassam_trefethen`).

    Arguments:
        points: nodes (even), one axis.
        domain: (low, high); default [0, 32 pi].
    """

    points: tuple[int, ...] = eqx.field(static=True, default=(128,), converter=as_points)
    domain: tuple[tuple[float, float], ...] | None = eqx.field(
        static=True, default=None, converter=as_domain
    )

    name: ClassVar[str] = "kuramoto_sivashinsky"
    description: ClassVar[str] = (
        "Kuramoto-Sivashinsky spatio-temporal chaos on a periodic interval, Fourier spectral"
    )
    parameters: ClassVar[tuple[Parameter, ...]] = (
        Parameter("nonlinearity", 1.0, "1", "coefficient a of (u^2)_x / 2", "real"),
        Parameter(
            "anti_diffusivity",
            1.0,
            "length^2/time",
            "coefficient p of u_xx (destabilising)",
            "real",
        ),
        Parameter(
            "hyper_diffusivity",
            1.0,
            "length^4/time",
            "coefficient q of u_xxxx (stabilising)",
            "positive",
        ),
    )
    field_names: ClassVar[tuple[str, ...]] = ("u",)
    dims: ClassVar[tuple[int, ...]] = (1,)
    default_domain: ClassVar[tuple[float, float]] = (0.0, 32.0 * math.pi)
    initial_kind: ClassVar[str] = "kassam_trefethen"
    extra_observable_names: ClassVar[tuple[str, ...]] = ("mass", "energy")

    def linear(self, params: PyTree, grid: Any) -> Inexact[Array, "..."]:
        lap = grid.laplacian()
        return -params["anti_diffusivity"] * lap - params["hyper_diffusivity"] * lap * lap

    def nonlinear(
        self, u_hat: Inexact[Array, "C ..."], params: PyTree, grid: Any
    ) -> Inexact[Array, "C ..."]:
        u = grid.irfft(u_hat)
        a = params["nonlinearity"].astype(complex_dtype(grid))
        return -0.5 * a * grid.derivative(0) * grid.rfft(u * u)

    def extra_observables(self, u: Field, params: PyTree, grid: Any) -> dict[str, Array]:
        return {"mass": grid.integral(u[0]), "energy": 0.5 * grid.integral(u[0] ** 2)}

    def special_initial_kinds(self) -> dict[str, Any]:
        return {"kassam_trefethen": kassam_trefethen}


def kassam_trefethen(model: Any, params: PyTree) -> np.ndarray:
    """u0 = cos(2 pi x / L) (1 + sin(2 pi x / L)): Kassam and Trefethen's (2005) initial
    condition cos(x / 16) (1 + sin(x / 16)) on [0, 32 pi], rescaled to the domain."""
    (x,) = model.mesh()
    ((low, high),) = model.domain
    s = 2 * np.pi * (x - low) / (high - low)
    return (np.cos(s) * (1 + np.sin(s)))[None]
