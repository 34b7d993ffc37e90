"""The abstract PDE families: `SpectralPdeModel` (periodic, Fourier symbol + nonlinear term)
and `GridPdeModel` (bounded domains, finite-difference diffusion + reaction).

A PDE model holds its grid as static options: `points` (nodes per axis; the length is the
dimension) and `domain` ((low, high) per axis). Its parameters (viscosity, diffusivity,
...) live in the params dict, so changing them never recompiles. A model never builds its
own discretisation: `sim.simulate` hands it a grid object from `solvers` (a Fourier grid or
a finite-difference grid) whose methods it calls:

- Fourier grid: `wavenumbers()`, `derivative(axis)` (the symbol i k), `laplacian()`
  (-|k|^2), `rfft(u)`, `irfft(u_hat)`, `integral(u)`, `dtype`.
- Finite-difference grid: `laplacian(u)` (boundary conditions included), `integral(u)`.

Fields are arrays [C, *points] with one channel per name in `field_names`.
"""

from __future__ import annotations

import abc
import math
from typing import Any, ClassVar

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Inexact, PyTree

from .._base import Model
from . import _initial

Field = Float[Array, "C *points"]

BOUNDARY_KINDS = ("dirichlet", "neumann", "periodic")


def as_points(value: Any) -> tuple[int, ...]:
    """Grid points as a tuple of ints (an int is one axis); anything else is left for
    the model's check to reject with a clear message."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        return (int(value),)
    if isinstance(value, (list, tuple)):
        return tuple(
            int(v) if isinstance(v, (int, np.integer)) and not isinstance(v, bool) else v
            for v in value
        )
    return value


def as_domain(value: Any) -> Any:
    """A domain as a tuple of (low, high) float pairs, or None for the model's default."""
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        out = []
        for pair in value:
            if isinstance(pair, (list, tuple)) and all(
                isinstance(v, (int, float, np.number)) and not isinstance(v, bool) for v in pair
            ):
                out.append(tuple(float(v) for v in pair))
            else:
                out.append(pair)
        return tuple(out)
    return value


def check_grid_options(
    name: str, points: Any, domain: Any, dims: tuple[int, ...], *, even: bool, minimum: int
) -> None:
    """Raise ValueError naming the option unless `points` and `domain` form a grid of one
    of the dimensions `dims`."""
    dims_text = " or ".join(str(d) for d in dims)
    if not isinstance(points, tuple) or len(points) not in dims:
        raise ValueError(
            f"model {name!r}: points = {points!r}: expected a list of {dims_text} whole numbers "
            "(one per axis)"
        )
    for i, n in enumerate(points):
        if not isinstance(n, int) or n < minimum or (even and n % 2):
            what = f"an even whole number >= {minimum}" if even else f"a whole number >= {minimum}"
            raise ValueError(f"model {name!r}: points[{i}] = {n!r}: expected {what}")
    if not isinstance(domain, tuple) or len(domain) != len(points):
        raise ValueError(
            f"model {name!r}: domain = {domain!r}: expected one [low, high] pair per axis "
            f"({len(points)} for points = {list(points)}), e.g. domain = "
            f"{[[0.0, 1.0]] * len(points)}"
        )
    for i, pair in enumerate(domain):
        if (
            not isinstance(pair, tuple)
            or len(pair) != 2
            or not all(isinstance(v, float) for v in pair)
        ):
            raise ValueError(
                f"model {name!r}: domain[{i}] = {pair!r}: expected a [low, high] pair of numbers"
            )
        low, high = pair
        if not (math.isfinite(low) and math.isfinite(high)) or not high > low:
            raise ValueError(
                f"model {name!r}: domain[{i}] = [{low}, {high}]: expected finite low < high"
            )
        # Differences of the grid divide by the spacing squared (and a spectral grid's
        # wavenumbers square 2 pi / spacing): a square beyond the float range, or below
        # its normal numbers (where compiled code may flush it to 0), gives no number.
        # (both spacings of the axis, periodic or bounded: width / points, / (points - 1))
        width, n = high - low, points[i]
        fine, coarse = width / n, width / (n - 1)
        if not (
            math.isfinite(width)
            and coarse * coarse < math.inf
            and fine * fine >= np.finfo(float).tiny
        ):
            raise ValueError(
                f"model {name!r}: domain[{i}] = [{low!r}, {high!r}]: the grid spacing ({fine:.3g} "
                f"over {n} points) squared is outside "
                "the range of normal floats; expected a width whose spacing lies between about "
                "1e-154 and 1e154"
            )


class PdeModel(Model):
    """What both PDE families share: named fields on a grid, initial fields, observables.

    Concrete classes set the class attributes below and declare the fields `points` and
    `domain` (static options, converted by `as_points` / `as_domain`; a `domain` of None
    becomes `default_domain` on every axis).

    Class attributes:
        field_names: one name per channel, e.g. ("u",) or ("u", "v").
        dims: the dimensions the model supports, e.g. (1, 2, 3).
        default_domain: (low, high) used on every axis when `domain` is not given.
        initial_kind: the named initial field used when none is given.
        initial_defaults: options of that default initial field.
    """

    points: eqx.AbstractVar[tuple[int, ...]]
    domain: eqx.AbstractVar[tuple[tuple[float, float], ...]]

    field_names: ClassVar[tuple[str, ...]]
    dims: ClassVar[tuple[int, ...]]
    default_domain: ClassVar[tuple[float, float]] = (0.0, 2.0 * math.pi)
    initial_kind: ClassVar[str] = "sine"
    initial_defaults: ClassVar[dict[str, Any]] = {}

    def __post_init__(self):
        points = as_points(self.points)
        if self.domain is None and isinstance(points, tuple):
            self.domain = (tuple(float(v) for v in self.default_domain),) * len(points)

    @property
    def ndim(self) -> int:
        return len(self.points)

    @property
    def field_shape(self) -> tuple[int, ...]:
        """Shape of the model's state: (channels, *points)."""
        return (len(self.field_names), *self.points)

    @property
    def lengths(self) -> tuple[float, ...]:
        return tuple(b - a for a, b in self.domain)

    @abc.abstractmethod
    def coordinates(self) -> tuple[np.ndarray, ...]:
        """Node coordinates per axis, float64 numpy arrays [points[i]]."""

    def mesh(self) -> tuple[np.ndarray, ...]:
        """Node coordinates broadcast to the grid shape ('ij' indexing), one per axis."""
        return tuple(np.meshgrid(*self.coordinates(), indexing="ij"))

    @property
    def periodic_axes(self) -> tuple[bool, ...]:
        return (True,) * self.ndim

    @property
    def initial_kinds(self) -> tuple[str, ...]:
        """Names accepted by `initial_field`."""
        return tuple(_initial.GENERATORS) + tuple(self.special_initial_kinds())

    def special_initial_kinds(self) -> dict[str, Any]:
        """Model-specific initial fields: kind -> function(model, params, **options) ->
        [C, *points]."""
        return {}

    def initial_field(
        self, kind: str | None = None, params: PyTree | None = None, **options: Any
    ) -> np.ndarray:
        """A named initial field [C, *points] (float64 numpy).

        Arguments:
            kind: a name from `initial_kinds` (default: the model's `initial_kind`, with
                its `initial_defaults` under any options given).
            params: parameter values, for kinds that depend on them (a soliton's speed);
                default: the model's defaults.
            **options: the generator's options (see `physics.pde.initial_field_doc`).

        Raises:
            ValueError: unknown kind or option, or a bad option value.

        Example:
            >>> model.initial_field("gaussian", width=0.3)
        """
        if kind is None:
            kind = self.initial_kind
            options = {**self.initial_defaults, **options}
        special = self.special_initial_kinds()
        if params is None:
            params = self.default_params()
        if kind in special:
            _initial.check_options(kind, special[kind], options, skip=2)
            field = np.asarray(special[kind](self, params, **options), dtype=float)
        elif kind in _initial.GENERATORS:
            generator = _initial.GENERATORS[kind]
            _initial.check_options(kind, generator, options, skip=2)
            channels = []
            for c in range(len(self.field_names)):
                opts = dict(options)
                seed = opts.get("seed")
                if isinstance(seed, int) and not isinstance(
                    seed, bool
                ):  # (the generator refuses anything else)
                    opts["seed"] = seed + c
                channels.append(generator(self.mesh(), self.domain, **opts))
            field = np.stack(channels)
        else:
            kinds = self.initial_kinds
            raise ValueError(
                f"model {self.name!r} has no initial field kind {kind!r} (kinds: "
                f"{', '.join(kinds)}).{_initial.did_you_mean(kind, kinds)}"
            )
        if field.shape != self.field_shape:
            raise ValueError(
                f"initial field {kind!r} has shape {field.shape}; expected {self.field_shape}"
            )
        return field

    def observables(self, u: Field, params: PyTree, grid: Any) -> dict[str, Array]:
        """Every observable at one time: each field by name [*points], plus the extras."""
        out = {name: u[i] for i, name in enumerate(self.field_names)}
        out.update(self.extra_observables(u, params, grid))
        return out

    def extra_observables(self, u: Field, params: PyTree, grid: Any) -> dict[str, Array]:
        """Derived observables (conserved or dissipated quantities); none by default."""
        return {}

    extra_observable_names: ClassVar[tuple[str, ...]] = ()

    @property
    def observable_names(self) -> tuple[str, ...]:
        return tuple(self.field_names) + tuple(self.extra_observable_names)


class SpectralPdeModel(PdeModel):
    """u_t = L u + N(u) on a periodic box, for Fourier pseudo-spectral ETDRK solvers.

    Concrete classes implement `linear` (the Fourier symbol L, diagonal in wavenumber and
    channel) and `nonlinear` (N evaluated pseudo-spectrally: Fourier in, Fourier out).
    Nodes sit at low + j L / n, j = 0..n-1 (the high end is the low end again); `points`
    must be even.
    """

    def __check_init__(self):
        check_grid_options(self.name, self.points, self.domain, self.dims, even=True, minimum=4)

    def coordinates(self) -> tuple[np.ndarray, ...]:
        return tuple(
            a + (b - a) * np.arange(n) / n
            for (a, b), n in zip(self.domain, self.points, strict=False)
        )

    @abc.abstractmethod
    def linear(self, params: PyTree, grid: Any) -> Inexact[Array, "..."]:
        """The symbol L, broadcastable to [C, *spectral_shape]: real when L is
        dissipative, complex when it disperses or advects."""

    @abc.abstractmethod
    def nonlinear(
        self, u_hat: Inexact[Array, "C ..."], params: PyTree, grid: Any
    ) -> Inexact[Array, "C ..."]:
        """N(u) in Fourier space, [C, *spectral_shape], for the state `u_hat` (same shape)."""


class GridPdeModel(PdeModel):
    """u_t = D Laplacian(u) + R(u) on a box with boundary conditions, for the method of lines.

    Concrete classes implement `diffusivities` (D per channel) and `reaction` (R, any
    local function of the fields), and declare the options `boundary` and
    `boundary_value`:

    - `boundary`: one kind for every side ("dirichlet", "neumann" or "periodic"), or per
      axis a kind or a [low, high] pair of kinds; periodic must hold on both sides.
    - `boundary_value`: the Dirichlet value of u, or the Neumann outward normal
      derivative du/dn; one number for every side, or per axis a number or a pair.

    Nodes on a bounded axis include both ends, low + j L / (n - 1); on a periodic axis
    they are low + j L / n. The diffusive part is linear and stiff (implicit in IMEX
    methods), the reaction part is explicit.
    """

    boundary: eqx.AbstractVar[Any]
    boundary_value: eqx.AbstractVar[Any]

    default_domain: ClassVar[tuple[float, float]] = (0.0, 1.0)

    def __check_init__(self):
        check_grid_options(self.name, self.points, self.domain, self.dims, even=False, minimum=5)
        self.boundary_kinds  # noqa: B018  (validates)
        self.boundary_values  # noqa: B018

    @property
    def boundary_kinds(self) -> tuple[tuple[str, str], ...]:
        """(low, high) boundary kind per axis."""
        per_axis = _per_axis(self.name, "boundary", self.boundary, self.ndim, str)
        for i, (low, high) in enumerate(per_axis):
            for side, kind in (("low", low), ("high", high)):
                if kind not in BOUNDARY_KINDS:
                    raise ValueError(
                        f"model {self.name!r}: boundary[{i}] {side} side = {kind!r}: unknown "
                        "boundary kind "
                        "(kinds: "
                        f"{', '.join(BOUNDARY_KINDS)})."
                        f"{_initial.did_you_mean(kind, BOUNDARY_KINDS)}"
                    )
            if (low == "periodic") != (high == "periodic"):
                raise ValueError(
                    f"model {self.name!r}: boundary[{i}] = [{low!r}, {high!r}]: periodic must be "
                    "on both sides of an axis"
                )
        return per_axis

    @property
    def boundary_values(self) -> tuple[tuple[float, float], ...]:
        """(low, high) Dirichlet value or Neumann outward derivative per axis."""
        return _per_axis(self.name, "boundary_value", self.boundary_value, self.ndim, float)

    @property
    def periodic_axes(self) -> tuple[bool, ...]:
        return tuple(low == "periodic" for low, _ in self.boundary_kinds)

    def coordinates(self) -> tuple[np.ndarray, ...]:
        out = []
        for (a, b), n, periodic in zip(self.domain, self.points, self.periodic_axes, strict=False):
            out.append(a + (b - a) * np.arange(n) / n if periodic else np.linspace(a, b, n))
        return tuple(out)

    @abc.abstractmethod
    def diffusivities(self, params: PyTree) -> Float[Array, " C"]:
        """Diffusion coefficient of each channel."""

    @abc.abstractmethod
    def reaction(self, u: Field, params: PyTree) -> Field:
        """The local (non-stiff) part of the right-hand side, [C, *points]."""


def _per_axis(
    model: str, key: str, value: Any, ndim: int, kind: type
) -> tuple[tuple[Any, Any], ...]:
    def scalar(v):
        if kind is float:
            return isinstance(v, (int, float, np.number)) and not isinstance(v, bool)
        return isinstance(v, str)

    def convert(v):
        return float(v) if kind is float else v

    if scalar(value):
        return ((convert(value), convert(value)),) * ndim
    if isinstance(value, (list, tuple)) and len(value) == ndim:
        out = []
        for item in value:
            if scalar(item):
                out.append((convert(item), convert(item)))
            elif (
                isinstance(item, (list, tuple)) and len(item) == 2 and all(scalar(v) for v in item)
            ):
                out.append((convert(item[0]), convert(item[1])))
            else:
                break
        else:
            return tuple(out)
    what = "a kind name" if kind is str else "a number"
    raise ValueError(
        f"model {model!r}: {key} = {value!r}: expected {what} for every side, or one {what} or "
        f"[low, high] pair per axis ({ndim} axes)"
    )


def spectral_dtype(grid: Any):
    """The real dtype a grid computes in."""
    return jnp.dtype(grid.dtype)
