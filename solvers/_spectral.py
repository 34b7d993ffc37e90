"""Periodic Fourier pseudo-spectral grids and exponential time differencing (ETDRK 1-4).

A semilinear PDE u_t = L u + N(u) on a periodic box is advanced in Fourier space: the
diagonal linear part L (a "Fourier symbol", one number per wavenumber) exactly through
exponentials, the nonlinear term N explicitly by the Runge-Kutta stages of Cox and
Matthews, "Exponential time differencing for stiff systems", J. Comput. Phys. 176 (2002)
430-455. The coefficients phi(L dt) are evaluated by the contour integral of Kassam and
Trefethen, "Fourth-order time-stepping for stiff PDEs", SIAM J. Sci. Comput. 26 (2005)
1214-1233, which avoids the cancellation of the direct formulas for small |L dt|.
Quadratic nonlinearities are dealiased by Orszag's 2/3 rule (J. Atmos. Sci. 28, 1971).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Inexact, Int, PyTree

from ._results import Result
from ._rollout import rollout
from ._types import Times

DTYPES = ("float32", "float64")

#: The result code reported when a fixed-step run becomes non-finite.
NONFINITE = int(Result.nonfinite_state)


def _complex_dtype(dtype) -> Any:
    return jnp.complex128 if jnp.dtype(dtype) == jnp.float64 else jnp.complex64


class FourierGrid(eqx.Module):
    """A periodic box of `points` equally spaced nodes per axis, with real FFTs.

    Node j of axis i sits at `domain[i][0] + j * L_i / points[i]` with `L_i` the period
    (the right end is the left end again). Fields have the grid's shape in their last
    `ndim` axes (any leading axes, such as channels, are carried along); their real
    Fourier transforms have `spectral_shape` = (*points[:-1], points[-1] // 2 + 1).

    Arguments:
        points: nodes per axis, each even and >= 4; 1 to 3 axes.
        domain: (low, high) per axis, high > low.
        dtype: "float64" or "float32": the default precision of the symbols it builds.

    Raises:
        ValueError: a malformed grid (names the offending axis and value).

    Example:
        >>> grid = FourierGrid((64,), ((0.0, 2 * math.pi),))
        >>> u_hat = grid.rfft(jnp.sin(grid.mesh()[0]))
    """

    points: tuple[int, ...] = eqx.field(static=True)
    domain: tuple[tuple[float, float], ...] = eqx.field(static=True)
    dtype: str = eqx.field(static=True, default="float64")

    def __check_init__(self):
        check_periodic_grid(self.points, self.domain)
        if self.dtype not in DTYPES:
            raise ValueError(f"grid dtype must be 'float32' or 'float64', got {self.dtype!r}")

    @property
    def ndim(self) -> int:
        return len(self.points)

    @property
    def lengths(self) -> tuple[float, ...]:
        return tuple(float(b - a) for a, b in self.domain)

    @property
    def spacing(self) -> tuple[float, ...]:
        return tuple(length / n for length, n in zip(self.lengths, self.points, strict=False))

    @property
    def spectral_shape(self) -> tuple[int, ...]:
        return (*self.points[:-1], self.points[-1] // 2 + 1)

    @property
    def axes(self) -> tuple[int, ...]:
        """The (negative) array axes that carry space."""
        return tuple(range(-self.ndim, 0))

    def coordinates(self) -> tuple[np.ndarray, ...]:
        """Node coordinates per axis (float64 numpy arrays [points[i]])."""
        return tuple(
            a + (b - a) * np.arange(n) / n
            for (a, b), n in zip(self.domain, self.points, strict=False)
        )

    def mesh(self, dtype=None) -> tuple[Array, ...]:
        """Node coordinates broadcast to the grid shape, one array per axis ('ij' indexing)."""
        dtype = dtype or self.dtype
        return tuple(
            jnp.asarray(c, dtype=dtype) for c in np.meshgrid(*self.coordinates(), indexing="ij")
        )

    def integer_wavenumbers(self) -> tuple[np.ndarray, ...]:
        """Signed integer mode numbers per axis, shaped to broadcast against `spectral_shape`."""
        out = []
        for i, n in enumerate(self.points):
            if i == self.ndim - 1:
                m = np.arange(n // 2 + 1)
            else:
                m = np.fft.fftfreq(n, 1.0 / n).round().astype(int)
            shape = [1] * self.ndim
            shape[i] = m.shape[0]
            out.append(m.reshape(shape))
        return tuple(out)

    def wavenumbers(self, dtype=None) -> tuple[Array, ...]:
        """Angular wavenumbers 2 pi m / L per axis, broadcastable to `spectral_shape`."""
        dtype = dtype or self.dtype
        return tuple(
            jnp.asarray(2.0 * np.pi * m / length, dtype=dtype)
            for m, length in zip(self.integer_wavenumbers(), self.lengths, strict=False)
        )

    def derivative(self, axis: int, dtype=None) -> Array:
        """The symbol i k of d/dx_axis, with the Nyquist mode of an even axis set to zero
        (its derivative is not representable by a real field)."""
        dtype = dtype or self.dtype
        k = np.asarray(
            2.0 * np.pi * self.integer_wavenumbers()[axis] / self.lengths[axis], dtype=float
        )
        n = self.points[axis]
        k = np.where(np.abs(self.integer_wavenumbers()[axis]) == n // 2, 0.0, k)
        return jnp.asarray(1j * k, dtype=_complex_dtype(dtype))

    def laplacian(self, dtype=None) -> Array:
        """The symbol -|k|^2 of the Laplacian, shaped `spectral_shape`."""
        dtype = dtype or self.dtype
        k2 = sum(
            (2.0 * np.pi * m / length) ** 2
            for m, length in zip(self.integer_wavenumbers(), self.lengths, strict=False)
        )
        return jnp.asarray(np.broadcast_to(-k2, self.spectral_shape), dtype=dtype)

    def dealias_mask(self, fraction: float = 2.0 / 3.0, dtype=None) -> Array:
        """1 on modes kept by the `fraction` rule, 0 elsewhere, shaped `spectral_shape`.

        A mode m of an axis of n points is kept when |m| < fraction * n / 2; with 2/3 the
        aliases of a quadratic product of kept modes all fall on removed modes.
        """
        dtype = dtype or self.dtype
        keep = np.ones(self.spectral_shape, dtype=bool)
        for m, n in zip(self.integer_wavenumbers(), self.points, strict=False):
            keep = keep & (np.abs(m) < fraction * n / 2)
        return jnp.asarray(keep, dtype=dtype)

    def rfft(self, u: Float[Array, "..."]) -> Inexact[Array, "..."]:
        """Real FFT over the grid axes (the last `ndim` axes of `u`)."""
        return jnp.fft.rfftn(u, axes=self.axes)

    def irfft(self, u_hat: Inexact[Array, "..."]) -> Float[Array, "..."]:
        """Inverse of `rfft`: a real field of the grid's shape."""
        return jnp.fft.irfftn(u_hat, s=self.points, axes=self.axes)

    def mean(self, u: Float[Array, "..."]) -> Float[Array, "..."]:
        """Average over the grid axes."""
        return jnp.mean(u, axis=self.axes)

    def integral(self, u: Float[Array, "..."]) -> Float[Array, "..."]:
        """Integral over the box (the trapezoidal rule, spectrally accurate when periodic)."""
        return self.mean(u) * math.prod(self.lengths)


def check_periodic_grid(points, domain) -> None:
    """Raise ValueError, naming the axis, unless (points, domain) describe a periodic grid."""
    if not isinstance(points, tuple) or not 1 <= len(points) <= 3:
        raise ValueError(f"grid points must list 1 to 3 axes, got {points!r}")
    if len(domain) != len(points):
        raise ValueError(
            f"grid domain has {len(domain)} axes but points has {len(points)}; "
            "expected one [low, high] pair per axis"
        )
    for i, n in enumerate(points):
        if isinstance(n, bool) or not isinstance(n, int) or n < 4 or n % 2:
            raise ValueError(
                f"grid points[{i}] = {n!r}: expected an even whole number >= 4 (a periodic Fourier "
                "axis)"
            )
    for i, pair in enumerate(domain):
        if len(pair) != 2:
            raise ValueError(f"grid domain[{i}] = {pair!r}: expected a [low, high] pair")
        a, b = pair
        if not (math.isfinite(a) and math.isfinite(b)) or not b > a:
            raise ValueError(f"grid domain[{i}] = [{a}, {b}]: expected finite low < high")


class EtdrkCoefficients(eqx.Module):
    """The per-mode coefficients of one ETDRK scheme for one step size (a pytree).

    Arguments:
        exp: exp(L dt).
        exp_half: exp(L dt / 2) (orders 3 and 4).
        q: dt phi1(L dt) for orders 1 and 2, (dt / 2) phi1(L dt / 2) for 3 and 4.
        b: order 1: none; 2: dt phi2(L dt); 3 and 4: the three final-stage weights.
        dt: the step they were built for (`Etdrk.solve` checks it against the save times
            when it is handed prebuilt coefficients).
    """

    exp: Inexact[Array, "..."]
    exp_half: Inexact[Array, "..."] | None
    q: Inexact[Array, "..."]
    b: tuple[Inexact[Array, "..."], ...]
    dt: Float[Array, ""] | None = None


class Etdrk(eqx.Module):
    """Exponential time differencing Runge-Kutta for u_t = L u + N(u), fixed steps.

    Cox and Matthews (2002): order 1 is ETD1 (exponential Euler), 2 is ETD2RK, 3 ETD3RK,
    4 ETDRK4; the coefficients use the Kassam-Trefethen (2005) contour integral on
    `contour_points` points of a circle of radius `contour_radius` around each L dt.
    The linear part is integrated exactly, so its stiffness never limits the step; the
    explicit treatment of N does (an advective CFL condition).

    Steps are fixed: between two consecutive save times there are `steps_per_save`
    equal steps, dt = (t[1] - t[0]) / steps_per_save, and the save times must be equally
    spaced. dt is traced (a new set of save times does not recompile).

    Arguments:
        order: 1, 2, 3 or 4.
        steps_per_save: steps between two save times (>= 1).
        dealias: fraction of modes kept for the nonlinear term (2/3: Orszag's rule;
            None: no dealiasing). The input to N and its output are both masked.
        dtype: "float64" or "float32"; the field, its transform and the coefficients
            are computed and held in this precision.
        contour_points: points of the contour integral on the full circle (even; 32
            gives float64 machine precision; for a real L only the upper half is
            evaluated).
        contour_radius: its radius.
        checkpoint_levels: nesting depth of the checkpointed rollout (2: reverse-mode
            memory O(sqrt(steps)); 1: plain scan).
        devices: the number of local devices one run's grid is split over, in slabs of
            its first axis (`solvers.SlabGrid`; 2-D and 3-D grids): with more than one,
            `solve_slabs` advances the run and `solve` refuses it.

    Raises:
        ValueError: an order outside 1-4, steps_per_save < 1, an unknown dtype, a
            dealias fraction outside (0, 1].

    Example:
        >>> solver = Etdrk(order=4, steps_per_save=10)
    """

    order: int = eqx.field(static=True, default=4)
    steps_per_save: int = eqx.field(static=True, default=1)
    dealias: float | None = eqx.field(static=True, default=2.0 / 3.0)
    dtype: str = eqx.field(static=True, default="float64")
    contour_points: int = eqx.field(static=True, default=32)
    contour_radius: float = eqx.field(static=True, default=1.0)
    checkpoint_levels: int = eqx.field(static=True, default=2)
    devices: int = eqx.field(static=True, default=1)

    orders: ClassVar[tuple[int, ...]] = (1, 2, 3, 4)

    def __check_init__(self):
        if self.order not in self.orders:
            raise ValueError(f"ETDRK order must be one of 1, 2, 3, 4, got {self.order!r}")
        if (
            isinstance(self.steps_per_save, bool)
            or not isinstance(self.steps_per_save, int)
            or self.steps_per_save < 1
        ):
            raise ValueError(
                f"steps_per_save must be a whole number >= 1, got {self.steps_per_save!r}"
            )
        if self.dtype not in DTYPES:
            raise ValueError(f"dtype must be 'float32' or 'float64', got {self.dtype!r}")
        if self.dealias is not None and not 0.0 < self.dealias <= 1.0:
            raise ValueError(f"dealias must be a fraction in (0, 1] or None, got {self.dealias!r}")
        if self.contour_points < 4 or self.contour_points % 2:
            raise ValueError(
                f"contour_points must be an even number >= 4, got {self.contour_points}"
            )
        if self.checkpoint_levels < 1:
            raise ValueError(f"checkpoint_levels must be >= 1, got {self.checkpoint_levels}")
        if isinstance(self.devices, bool) or not isinstance(self.devices, int) or self.devices < 1:
            raise ValueError(f"devices must be a whole number >= 1, got {self.devices!r}")

    @property
    def real_dtype(self):
        return jnp.dtype(self.dtype)

    def coefficients(
        self, linear: Inexact[Array, "..."], dt: Float[Array, ""] | float
    ) -> EtdrkCoefficients:
        """The scheme's coefficients for the symbol `linear` (any shape) and step `dt`.

        A real `linear` gives real coefficients (half the arithmetic per step); a complex
        one (dispersion, advection) complex coefficients.
        """
        is_real = not jnp.iscomplexobj(linear)
        # float64 runs build their coefficients in float64; float32 runs in float32.
        wide = (
            jnp.float64
            if self.dtype == "float64" and jax.config.read("jax_enable_x64")
            else jnp.float32
        )
        cwide = _complex_dtype(wide)
        dt_w = jnp.asarray(dt).astype(cwide)
        z = jnp.asarray(linear).astype(cwide) * dt_w
        m = self.contour_points
        if is_real:
            # For real z, f(conj w) = conj f(w): the mean over the full circle is the real
            # part of the mean over its upper half (Kassam and Trefethen 2005, sec. 5).
            theta = np.pi * (np.arange(m // 2) + 0.5) / (m // 2)
        else:
            theta = 2.0 * np.pi * (np.arange(m) + 0.5) / m
        roots = jnp.asarray(self.contour_radius * np.exp(1j * theta), dtype=cwide)
        w = z[..., None] + roots  # contour around each z

        def mean(values):
            return jnp.mean(values, axis=-1)

        ew2 = jnp.exp(w / 2)
        ew = ew2 * ew2
        exp = jnp.exp(z)
        if self.order == 1:
            q = dt_w * mean((ew - 1) / w)
            b: tuple = ()
            exp_half = None
        elif self.order == 2:
            q = dt_w * mean((ew - 1) / w)
            b = (dt_w * mean((ew - 1 - w) / w**2),)
            exp_half = None
        else:
            q = dt_w * mean((ew2 - 1) / w)
            w3 = w**3
            f1 = dt_w * mean((-4 - w + ew * (4 - 3 * w + w**2)) / w3)
            f2 = dt_w * mean((2 + w + ew * (w - 2)) / w3)
            f3 = dt_w * mean((-4 - 3 * w - w**2 + ew * (4 - w)) / w3)
            b = (f1, f2, f3)
            exp_half = jnp.exp(z / 2)

        target = self.real_dtype if is_real else _complex_dtype(self.real_dtype)

        def cast(x):
            if x is None:
                return None
            return (x.real if is_real else x).astype(target)

        return EtdrkCoefficients(
            exp=cast(exp),
            exp_half=cast(exp_half),
            q=cast(q),
            b=tuple(cast(x) for x in b),
            dt=jnp.asarray(dt),
        )

    def step(
        self,
        coefficients: EtdrkCoefficients,
        u_hat: Inexact[Array, "..."],
        nonlinear: Callable[[Array], Array],
    ) -> Inexact[Array, "..."]:
        """One step of size dt (the one `coefficients` were built for).

        Arguments:
            coefficients: from `coefficients(linear, dt)`.
            u_hat: the state in Fourier space.
            nonlinear: u_hat -> N(u) in Fourier space (already dealiased if wanted).

        Returns:
            u_hat one step later.
        """
        c = coefficients
        nu = nonlinear(u_hat)
        if self.order == 1:
            return _mul(c.exp, u_hat) + _mul(c.q, nu)
        if self.order == 2:
            a = _mul(c.exp, u_hat) + _mul(c.q, nu)
            return a + _mul(c.b[0], nonlinear(a) - nu)
        f1, f2, f3 = c.b
        if self.order == 3:
            a = _mul(c.exp_half, u_hat) + _mul(c.q, nu)
            na = nonlinear(a)
            # ETD3RK's second stage is a full step with weight dt phi1(L dt), which equals
            # (exp(L dt / 2) + 1) (dt / 2) phi1(L dt / 2): no extra coefficient array.
            b = _mul(c.exp, u_hat) + _mul((c.exp_half + 1) * c.q, 2 * na - nu)
            nb = nonlinear(b)
            return _mul(c.exp, u_hat) + _mul(f1, nu) + _mul(4 * f2, na) + _mul(f3, nb)
        a = _mul(c.exp_half, u_hat) + _mul(c.q, nu)
        na = nonlinear(a)
        b = _mul(c.exp_half, u_hat) + _mul(c.q, na)
        nb = nonlinear(b)
        cc = _mul(c.exp_half, a) + _mul(c.q, 2 * nb - nu)
        nc = nonlinear(cc)
        return _mul(c.exp, u_hat) + _mul(f1, nu) + _mul(f2, 2 * (na + nb)) + _mul(f3, nc)

    def solve(
        self,
        grid: FourierGrid,
        linear: Inexact[Array, "..."] | None,
        nonlinear: Callable[[Array], Array],
        u0: Float[Array, "..."],
        t: Times,
        observe: Callable[[Array], PyTree] | None = None,
        coefficients: EtdrkCoefficients | None = None,
    ) -> SpectralSolution:
        """Integrate u_t = L u + N(u) from t[0], observing the field at every save time.

        Arguments:
            grid: the periodic grid; fields have its shape in their last axes.
            linear: the symbol L, broadcastable to the Fourier transform of `u0` (None
                when `coefficients` are given).
            nonlinear: u_hat -> N(u)_hat, both in Fourier space (the solver applies
                the dealiasing mask to its input and its output).
            u0: the initial field, physical space, [..., *grid.points].
            t: equally spaced save times [T], T >= 2.
            observe: physical field -> pytree of arrays saved at each time (default:
                the field).
            coefficients: prebuilt `coefficients(linear, dt)` for this step (built once
                and reused across calls, as a stepper holds them); None builds them here.
                `linear` is then unused.

        Returns:
            A `SpectralSolution`.

        Raises:
            ValueError: `u0` does not end in the grid's shape.
            EqxRuntimeError (at run time): save times not equally spaced and increasing;
                prebuilt coefficients for another step than (t[1] - t[0]) / steps_per_save.
        """
        if self.devices > 1:
            raise ValueError(
                f"this Etdrk splits the grid over {self.devices} devices: advance it with "
                "solvers.solve_slabs on a solvers.SlabGrid"
            )
        if tuple(u0.shape[-grid.ndim :]) != grid.points:
            raise ValueError(
                f"initial field has shape {u0.shape}; expected trailing grid shape {grid.points}"
            )
        dtype = self.real_dtype
        u0 = u0.astype(dtype)
        t = jnp.asarray(t)
        interval = t[1] - t[0]
        spacing_error = jnp.max(jnp.abs(jnp.diff(t) - interval))
        t = eqx.error_if(
            t, ~(interval > 0), "save times must increase (the step dt must be positive)"
        )
        t = eqx.error_if(
            t,
            spacing_error > 1e-9 * jnp.maximum(jnp.abs(t[-1]), interval),
            "fixed-step solvers need equally spaced save times",
        )
        dt = (t[1] - t[0]) / self.steps_per_save
        if coefficients is None:
            if linear is None:
                raise ValueError("Etdrk.solve needs the linear symbol or prebuilt coefficients")
            coefficients = self.coefficients(linear, dt)
        elif coefficients.dt is not None:
            built = jnp.asarray(coefficients.dt).astype(dt.dtype)
            dt = eqx.error_if(
                dt,
                jnp.abs(built - dt) > 1e-5 * jnp.abs(dt),
                "the prebuilt ETDRK coefficients are for another step than (t[1] - t[0]) / "
                "steps_per_save",
            )

        if self.dealias is None:
            n_eff = nonlinear
        else:
            mask = grid.dealias_mask(self.dealias, dtype=dtype)

            def n_eff(u_hat):
                return _mul(mask, nonlinear(_mul(mask, u_hat)))

        def step(u_hat):
            return self.step(coefficients, u_hat, n_eff)

        if observe is None:
            observe = _identity
        n_steps = (t.shape[0] - 1) * self.steps_per_save
        final_hat, saved = rollout(
            step,
            grid.rfft(u0),
            n_steps,
            save_every=self.steps_per_save,
            observe=lambda u_hat: observe(grid.irfft(u_hat)),
            levels=self.checkpoint_levels,
        )
        final = grid.irfft(final_hat)
        finite = jnp.all(jnp.isfinite(final))
        result = jnp.where(finite, 0, NONFINITE)
        return SpectralSolution(
            saved=saved, final=final, num_steps=jnp.asarray(n_steps), result=result, dt=dt
        )


class SpectralSolution(eqx.Module):
    """What `Etdrk.solve` returns.

    Attributes:
        saved: the observations at each save time (leading dimension T).
        final: the field at the last save time, physical space.
        num_steps: steps taken.
        result: 0 on success, `NONFINITE` when the field became NaN or infinite.
        dt: the step used.
    """

    saved: PyTree
    final: Float[Array, "..."]
    num_steps: Int[Array, ""]
    result: Int[Array, ""]
    dt: Float[Array, ""]


def _identity(x):
    return x


def _mul(coefficient: Array, field: Array) -> Array:
    """coefficient * field, where a real coefficient may multiply a complex field (of the
    same precision) on purpose: half the arithmetic of a complex coefficient."""
    with jax.numpy_dtype_promotion("standard"):
        return coefficient * field
