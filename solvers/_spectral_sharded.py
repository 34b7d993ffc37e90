"""A periodic Fourier grid split over devices in slabs, its distributed real FFT, and
ETDRK on the split field.

Slab decomposition: a field [..., N0, N1(, N2)] lies on a one-axis mesh of P devices
(mesh axis `SLAB_AXIS`), each holding N0 / P consecutive planes of the first grid axis.
Its real transform is taken as jaxDecomp and the P3DFFT family take it: the real FFT
along the last axis and the complex FFT along the middle one (3-D) on each device's own
slab, one `jax.lax.all_to_all` that swaps which axis is split (the second grid axis is
cut into P blocks, the first gathered whole), and the complex FFT along the first axis.
The inverse runs the same way back. So in Fourier space each device holds every first-
axis wavenumber of one block of the second-axis wavenumbers.

The second axis of the transform (N1 complex modes in 3-D, N1 / 2 + 1 real-FFT modes in
2-D) is padded with zero modes up to a multiple of P, so that any P dividing N0 splits
it; the padded modes stay zero through every step (the forward transform gives zeros
there and the inverse ignores them) and every symbol of `SlabGrid` is zero on them.

`SlabGrid` is the grid a model sees inside `jax.shard_map`: the methods of
`FourierGrid` (wavenumbers, derivatives, Laplacian, dealiasing mask, rfft / irfft,
integral), each on the device's own block; reductions are summed over the mesh. A model
written against `FourierGrid` runs on it unchanged. `solve_slabs` is `Etdrk.solve` on
it, `EtdrkSlabLoop` the chunked loop of `EtdrkLoop`; the ETDRK coefficients are built on
every device for its own block of modes.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec
from jaxtyping import Array, Float, Inexact, Int, PyTree

from ._rollout import advance as _advance, rollout
from ._spectral import (
    NONFINITE,
    Etdrk,
    EtdrkCoefficients,
    FourierGrid,
    SpectralSolution,
    _complex_dtype,
    _mul,
)
from ._types import Times

#: The name of the mesh axis a grid is split along.
SLAB_AXIS = "grid"


def check_device_count(devices: int, available: int | None = None) -> None:
    """Raise ValueError unless `devices` is a whole number from 1 to `available` (None:
    `jax.device_count()`, the devices of every process of a distributed run)."""
    if isinstance(devices, bool) or not isinstance(devices, int) or devices < 1:
        raise ValueError(f"devices = {devices!r}: expected a whole number >= 1")
    if available is None:
        available = jax.device_count()
    if devices > available:
        raise ValueError(
            f"devices = {devices}: only {available} device"
            f"{'s are' if available != 1 else ' is'} available"
        )


def check_slabs(points: tuple[int, ...], devices: int, available: int | None = None) -> None:
    """Raise ValueError unless a grid of `points` can be split over `devices` slabs.

    Arguments:
        points: nodes per axis (2 or 3 axes).
        devices: the number of slabs (devices), >= 1.
        available: the devices there are (None: `jax.device_count()`).
    """
    check_device_count(devices, available)
    if devices == 1:
        return
    if len(points) not in (2, 3):
        raise ValueError(
            f"devices = {devices}: a grid is split over devices in slabs of its first axis, "
            f"which needs 2 or 3 axes; this one has {len(points)}"
        )
    if points[0] % devices:
        raise ValueError(
            f"devices = {devices} does not divide points[0] = {points[0]} (each device holds "
            "points[0] / devices planes of the first axis)"
        )


def slab_mesh(devices: int) -> Mesh:
    """A one-axis mesh (`SLAB_AXIS`) of the first `devices` devices (of every process,
    in a distributed run)."""
    available = jax.devices()
    if not 1 <= devices <= len(available):
        raise ValueError(f"devices = {devices}: {len(available)} devices are available")
    return Mesh(np.asarray(available[:devices]), (SLAB_AXIS,))


def _block(length: int, devices: int) -> int:
    return -(-length // devices)


class SlabGrid(eqx.Module):
    """A periodic grid split over `devices` devices in slabs of its first axis: inside
    `jax.shard_map` over `slab_mesh(devices)`, the methods of `FourierGrid` on the
    calling device's block (real fields [..., N0 / P, N1(, N2)], their transforms
    [..., N0, M1 / P(, N2 / 2 + 1)], M1 the padded second axis); outside it, the
    shardings of those layouts (`real_sharding`, `spectral_sharding`).

    Arguments:
        points: nodes per axis, 2 or 3 axes, each even and >= 4; `devices` divides
            points[0].
        domain: (low, high) per axis.
        dtype: "float64" or "float32".
        devices: the number of slabs, one per device.

    Raises:
        ValueError: a malformed grid, or one that does not split over `devices`.

    Example:
        >>> grid = SlabGrid((64, 64, 64), ((0.0, 2 * math.pi),) * 3, devices=4)
        >>> u_hat = slab_rfft(grid.shard(u), grid)
    """

    points: tuple[int, ...] = eqx.field(static=True)
    domain: tuple[tuple[float, float], ...] = eqx.field(static=True)
    dtype: str = eqx.field(static=True, default="float64")
    devices: int = eqx.field(static=True, default=1)

    def __check_init__(self):
        FourierGrid(self.points, self.domain, dtype=self.dtype)  # a periodic grid, its dtype
        if len(self.points) not in (2, 3):
            raise ValueError(
                f"a grid split in slabs has 2 or 3 axes, got points = {list(self.points)}"
            )
        check_slabs(self.points, self.devices, available=self.devices)

    # ------------------------------------------------------------------ shapes

    @property
    def whole(self) -> FourierGrid:
        """The same grid unsplit: its geometry is this grid's."""
        return FourierGrid(self.points, self.domain, dtype=self.dtype)

    @property
    def ndim(self) -> int:
        return len(self.points)

    @property
    def lengths(self) -> tuple[float, ...]:
        return self.whole.lengths

    @property
    def spacing(self) -> tuple[float, ...]:
        return self.whole.spacing

    @property
    def axes(self) -> tuple[int, ...]:
        """The (negative) array axes that carry space."""
        return self.whole.axes

    @property
    def swap_length(self) -> int:
        """Modes of the transform along the second axis (before padding)."""
        return _swap_sizes(self.points, self.devices)[0]

    @property
    def swap_padded(self) -> int:
        """M1: the second axis of the transform padded to a multiple of `devices`."""
        return _swap_sizes(self.points, self.devices)[1]

    @property
    def global_spectral_shape(self) -> tuple[int, ...]:
        """The shape of a whole transform: (N0, M1(, N2 / 2 + 1))."""
        return (self.points[0], self.swap_padded, *self.standard_spectral_shape[2:])

    @property
    def standard_spectral_shape(self) -> tuple[int, ...]:
        """The shape of `numpy.fft.rfftn` of a field: (*points[:-1], points[-1] / 2 + 1)."""
        return self.whole.spectral_shape

    @property
    def spectral_shape(self) -> tuple[int, ...]:
        """A device's block of a transform: (N0, M1 / P(, N2 / 2 + 1))."""
        shape = list(self.global_spectral_shape)
        shape[1] //= self.devices
        return tuple(shape)

    @property
    def slab_points(self) -> tuple[int, ...]:
        """A device's slab of a field: (N0 / P, N1(, N2))."""
        return (self.points[0] // self.devices, *self.points[1:])

    # ------------------------------------------------------------------ shardings

    def device_mesh(self) -> Mesh:
        """The mesh of the first `devices` local devices."""
        return slab_mesh(self.devices)

    def real_spec(self, leading: int = 1) -> PartitionSpec:
        """The partition of a field with `leading` axes before the grid's."""
        return PartitionSpec(*([None] * leading), SLAB_AXIS)

    def spectral_spec(self, leading: int = 1) -> PartitionSpec:
        """The partition of a transform with `leading` axes before the grid's."""
        return PartitionSpec(*([None] * (leading + 1)), SLAB_AXIS)

    def real_sharding(self, leading: int = 1) -> NamedSharding:
        return NamedSharding(self.device_mesh(), self.real_spec(leading))

    def spectral_sharding(self, leading: int = 1) -> NamedSharding:
        return NamedSharding(self.device_mesh(), self.spectral_spec(leading))

    def shard(self, u: Float[Array, "..."]) -> Float[Array, "..."]:
        """`u` [..., *points] placed on the devices in slabs (each device its own)."""
        return jax.device_put(u, self.real_sharding(u.ndim - self.ndim))

    # ------------------------------------------------------------------ inside shard_map

    def _index(self) -> Int[Array, ""]:
        return jax.lax.axis_index(SLAB_AXIS) if self.devices > 1 else jnp.asarray(0)

    def _local(self, table: np.ndarray, block: int) -> Array:
        """The calling device's block of a 1-D table."""
        if self.devices == 1:
            return jnp.asarray(table)
        return jax.lax.dynamic_slice_in_dim(jnp.asarray(table), self._index() * block, block)

    def _swap_table(self) -> tuple[np.ndarray, np.ndarray]:
        """Signed mode numbers along the padded second axis, and 1 on real modes."""
        n = self.points[1]
        if self.ndim == 3:
            modes = np.fft.fftfreq(n, 1.0 / n).round().astype(int)
        else:
            modes = np.arange(n // 2 + 1)
        pad = self.swap_padded - modes.shape[0]
        valid = np.concatenate([np.ones(modes.shape[0]), np.zeros(pad)])
        return np.concatenate([modes, np.zeros(pad, dtype=int)]), valid

    def _shaped(self, values: Array, axis: int) -> Array:
        shape = [1] * self.ndim
        shape[axis] = values.shape[0]
        return values.reshape(shape)

    def integer_wavenumbers(self) -> tuple[Array, ...]:
        """Signed mode numbers per axis on this device's block, shaped to broadcast
        against `spectral_shape` (0 on padded modes; `split_modes`)."""
        return split_modes(self.points, self.devices)

    def valid_modes(self, dtype=None) -> Array:
        """1 on the transform's real modes, 0 on the padded ones (this device's block)."""
        dtype = dtype or self.dtype
        valid = self._local(self._swap_table()[1], self.spectral_shape[1])
        return jnp.broadcast_to(self._shaped(valid.astype(dtype), 1), self.spectral_shape)

    def wavenumbers(self, dtype=None) -> tuple[Array, ...]:
        """Angular wavenumbers 2 pi m / L per axis (this device's block)."""
        dtype = dtype or self.dtype
        return tuple(
            (2.0 * np.pi / length * m).astype(dtype)
            for m, length in zip(self.integer_wavenumbers(), self.lengths, strict=True)
        )

    def derivative(self, axis: int, dtype=None) -> Array:
        """The symbol i k of d/dx_axis (this device's block), zero on the Nyquist mode
        of the axis and on padded modes."""
        dtype = dtype or self.dtype
        axis = axis % self.ndim
        m = self.integer_wavenumbers()[axis]
        n = self.points[axis]
        k = jnp.where(jnp.abs(m) == n // 2, 0.0, 2.0 * np.pi / self.lengths[axis] * m)
        if axis == 1:
            k = k * self._shaped(self._local(self._swap_table()[1], self.spectral_shape[1]), 1)
        return (1j * k).astype(_complex_dtype(dtype))

    def laplacian(self, dtype=None) -> Array:
        """The symbol -|k|^2 of the Laplacian on this device's block (0 on padded modes)."""
        dtype = dtype or self.dtype
        k2 = sum(
            (2.0 * np.pi / length * m.astype(float)) ** 2
            for m, length in zip(self.integer_wavenumbers(), self.lengths, strict=True)
        )
        return (-k2 * self.valid_modes(float)).astype(dtype)

    def dealias_mask(self, fraction: float = 2.0 / 3.0, dtype=None) -> Array:
        """1 on modes kept by the `fraction` rule, 0 elsewhere and on padded modes."""
        dtype = dtype or self.dtype
        keep = self.valid_modes(float) > 0
        for m, n in zip(self.integer_wavenumbers(), self.points, strict=True):
            keep = keep & (jnp.abs(m) < fraction * n / 2)
        return keep.astype(dtype)

    def coordinates(self) -> tuple[np.ndarray, ...]:
        """Node coordinates per axis of the whole grid (float64 numpy arrays)."""
        return self.whole.coordinates()

    def mesh(self, dtype=None) -> tuple[Array, ...]:
        """Node coordinates on this device's slab ('ij' indexing), one array per axis."""
        dtype = dtype or self.dtype
        axes = list(self.coordinates())
        axes[0] = self._local(axes[0], self.slab_points[0])
        return tuple(
            jnp.asarray(c).astype(dtype)
            for c in jnp.meshgrid(*map(jnp.asarray, axes), indexing="ij")
        )

    def rfft(self, u: Float[Array, "..."]) -> Inexact[Array, "..."]:
        """The distributed real FFT of this device's slab [..., *slab_points]: its block
        of the transform [..., *spectral_shape] (one all-to-all between the devices)."""
        return split_rfftn(u, self.points, self.devices)

    def irfft(self, u_hat: Inexact[Array, "..."]) -> Float[Array, "..."]:
        """Inverse of `rfft`: this device's slab of the real field."""
        return split_irfftn(u_hat, self.points, self.devices)

    def mean(self, u: Float[Array, "..."]) -> Float[Array, "..."]:
        """Average over the whole grid (summed over the devices)."""
        total = jnp.sum(u, axis=self.axes)
        if self.devices > 1:
            total = jax.lax.psum(total, SLAB_AXIS)
        return total / math.prod(self.points)

    def integral(self, u: Float[Array, "..."]) -> Float[Array, "..."]:
        """Integral over the box (the trapezoidal rule, spectrally accurate when periodic)."""
        return self.mean(u) * math.prod(self.lengths)

    def all_finite(self, u: Array) -> Array:
        """Whether every value of `u` on every device is finite."""
        bad = jnp.sum(~jnp.isfinite(u))
        if self.devices > 1:
            bad = jax.lax.psum(bad, SLAB_AXIS)
        return bad == 0


# ----------------------------------------------------------------------------- the transform


def _swap_sizes(points: tuple[int, ...], devices: int) -> tuple[int, int]:
    """Modes of the transform along the second axis, and that number padded to a
    multiple of `devices`."""
    length = points[1] if len(points) == 3 else points[1] // 2 + 1
    return length, _block(length, devices) * devices


def split_rfftn(u: Float[Array, "..."], points: tuple[int, ...], devices: int):
    """Inside `jax.shard_map` over `SLAB_AXIS`: the real FFT of a field of `points` (2 or
    3 axes, any sizes, `devices` dividing points[0]) from this device's slab
    [..., points[0] / devices, *points[1:]] to its block of the transform
    [..., points[0], M1 / devices(, points[2] / 2 + 1)] (the module's docstring)."""
    ndim = len(points)
    lead = u.ndim - ndim
    first, second = lead, lead + 1
    u_hat = jnp.fft.rfftn(u, axes=tuple(range(second, u.ndim)))
    length, padded = _swap_sizes(points, devices)
    if padded > length:
        widths = [(0, 0)] * u_hat.ndim
        widths[second] = (0, padded - length)
        u_hat = jnp.pad(u_hat, widths)
    if devices > 1:
        u_hat = jax.lax.all_to_all(
            u_hat, SLAB_AXIS, split_axis=second, concat_axis=first, tiled=True
        )
    return jnp.fft.fft(u_hat, axis=first)


def split_irfftn(u_hat: Inexact[Array, "..."], points: tuple[int, ...], devices: int):
    """Inverse of `split_rfftn`: this device's slab of the real field."""
    ndim = len(points)
    lead = u_hat.ndim - ndim
    first, second = lead, lead + 1
    u_hat = jnp.fft.ifft(u_hat, axis=first)
    if devices > 1:
        u_hat = jax.lax.all_to_all(
            u_hat, SLAB_AXIS, split_axis=first, concat_axis=second, tiled=True
        )
    u_hat = jax.lax.slice_in_dim(u_hat, 0, _swap_sizes(points, devices)[0], axis=second)
    return jnp.fft.irfftn(u_hat, s=points[1:], axes=tuple(range(second, u_hat.ndim)))


def split_modes(points: tuple[int, ...], devices: int) -> tuple[Array, ...]:
    """Inside `jax.shard_map` over `SLAB_AXIS`: the signed mode numbers per axis of this
    device's block of `split_rfftn`'s transform, shaped to broadcast against it (0 on
    the padded modes of the second axis)."""
    ndim = len(points)
    length, padded = _swap_sizes(points, devices)
    block = padded // devices
    out = []
    for axis, n in enumerate(points):
        if axis == ndim - 1:
            m = np.arange(n // 2 + 1)
        else:
            m = np.fft.fftfreq(n, 1.0 / n).round().astype(int)
        m = jnp.asarray(m)
        if axis == 1:
            m = jnp.pad(m, (0, padded - length))
            if devices > 1:
                start = jax.lax.axis_index(SLAB_AXIS) * block
                m = jax.lax.dynamic_slice_in_dim(m, start, block)
        shape = [1] * ndim
        shape[axis] = m.shape[0]
        out.append(m.reshape(shape))
    return tuple(out)


# ----------------------------------------------------------------------------- global arrays


def _map(grid: SlabGrid, fn, in_specs, out_specs):
    return jax.shard_map(fn, mesh=grid.device_mesh(), in_specs=in_specs, out_specs=out_specs)


def slab_rfft(u: Float[Array, "..."], grid: SlabGrid) -> Inexact[Array, "..."]:
    """The real FFT of a whole field [..., *points] over its grid axes, split over the
    devices: [..., N0, M1(, N2 / 2 + 1)] sharded along M1 (`grid.spectral_sharding`).
    `unpadded` turns it into `numpy.fft.rfftn`'s layout.

    Example:
        >>> u_hat = slab_rfft(grid.shard(u), grid)
    """
    lead = u.ndim - grid.ndim
    return _map(grid, grid.rfft, grid.real_spec(lead), grid.spectral_spec(lead))(u)


def slab_irfft(u_hat: Inexact[Array, "..."], grid: SlabGrid) -> Float[Array, "..."]:
    """Inverse of `slab_rfft`: the real field [..., *points], in slabs on the devices."""
    lead = u_hat.ndim - grid.ndim
    return _map(grid, grid.irfft, grid.spectral_spec(lead), grid.real_spec(lead))(u_hat)


def unpadded(u_hat: Inexact[Array, "..."], grid: SlabGrid) -> Inexact[Array, "..."]:
    """A whole transform of `slab_rfft` in `numpy.fft.rfftn`'s layout (padded modes dropped)."""
    return jax.lax.slice_in_dim(u_hat, 0, grid.swap_length, axis=u_hat.ndim - grid.ndim + 1)


def _specs(struct: PyTree, local: tuple[int, ...], spec: Callable[[int], PartitionSpec]):
    """Per leaf of `struct` (shapes on one device): `spec(leading axes)` for a leaf that
    ends in the block shape `local`, the replicated partition for any other (a value
    reduced over the devices)."""

    def one(leaf):
        shape = tuple(leaf.shape)
        if len(shape) >= len(local) and shape[len(shape) - len(local) :] == local:
            return spec(len(shape) - len(local))
        return PartitionSpec()

    return jax.tree.map(one, struct)


def _local_shapes(grid: SlabGrid, fn, in_specs, *args) -> PyTree:
    """The shapes `fn` gives on one device (of `args`, partitioned by `in_specs`)."""
    mapped = jax.shard_map(
        fn, mesh=grid.device_mesh(), in_specs=in_specs, out_specs=PartitionSpec(), check_vma=False
    )
    return jax.eval_shape(mapped, *args)


def _saved_specs(grid: SlabGrid, struct: PyTree) -> PyTree:
    """Partitions of observations stacked over save times (a leading time axis)."""
    return _specs(struct, grid.slab_points, lambda lead: grid.real_spec(lead + 1))


def _coefficient_specs(grid: SlabGrid, coefficients: EtdrkCoefficients):
    return _specs(coefficients, grid.spectral_shape, grid.spectral_spec)


def _coefficients(solver: Etdrk, grid: SlabGrid, linear, args, dt) -> EtdrkCoefficients:
    """This device's block of the ETDRK coefficients (the symbol broadcast to its full
    block, so that every coefficient array is split as the transform is)."""
    symbol = jnp.asarray(linear(args, grid))
    shape = jnp.broadcast_shapes(symbol.shape, grid.spectral_shape)
    return solver.coefficients(jnp.broadcast_to(symbol, shape), dt)


def slab_coefficients(
    solver: Etdrk,
    grid: SlabGrid,
    linear: Callable[[PyTree, SlabGrid], Array],
    args: PyTree,
    dt: Float[Array, ""] | float,
) -> EtdrkCoefficients:
    """The ETDRK coefficients of the symbol `linear(args, grid)` for steps of `dt`, each
    device building its own block (arrays sharded as the transform; `dt` replicated).

    Arguments:
        solver: the `Etdrk` strategy.
        grid: the split grid.
        linear: (args, grid) -> the symbol L on the calling device's block.
        args: what `linear` reads (parameters), the same on every device.
        dt: the step.
    """
    dt = jnp.asarray(dt)

    def body(args, dt):
        return _coefficients(solver, grid, linear, args, dt)

    replicated = (PartitionSpec(), PartitionSpec())
    struct = _local_shapes(grid, body, replicated, args, dt)
    return _map(grid, body, replicated, _coefficient_specs(grid, struct))(args, dt)


def _effective(solver: Etdrk, grid: SlabGrid, nonlinear, args):
    """u_hat -> N(u)_hat on this device's block, dealiased as the solver asks."""
    if solver.dealias is None:
        return lambda u_hat: nonlinear(u_hat, args, grid)
    mask = grid.dealias_mask(solver.dealias, dtype=solver.real_dtype)
    return lambda u_hat: _mul(mask, nonlinear(_mul(mask, u_hat), args, grid))


def _step_interval(solver: Etdrk, t: Array) -> Array:
    """dt = (t[1] - t[0]) / steps_per_save, with `Etdrk.solve`'s checks of `t`."""
    interval = t[1] - t[0]
    spacing_error = jnp.max(jnp.abs(jnp.diff(t) - interval))
    t = eqx.error_if(t, ~(interval > 0), "save times must increase (the step dt must be positive)")
    t = eqx.error_if(
        t,
        spacing_error > 1e-9 * jnp.maximum(jnp.abs(t[-1]), interval),
        "fixed-step solvers need equally spaced save times",
    )
    return (t[1] - t[0]) / solver.steps_per_save


def solve_slabs(
    solver: Etdrk,
    grid: SlabGrid,
    linear: Callable[[PyTree, SlabGrid], Array],
    nonlinear: Callable[[Array, PyTree, SlabGrid], Array],
    u0: Float[Array, "..."],
    t: Times,
    observe: Callable[[Array, PyTree, SlabGrid], PyTree] | None = None,
    args: PyTree = None,
) -> SpectralSolution:
    """`Etdrk.solve` with the field split over `grid.devices` devices in slabs: every
    step, its dealiasing and the pointwise products of `nonlinear` run on each device's
    own block, the transforms exchange blocks by all-to-all, and nothing is gathered.

    Arguments:
        solver: the `Etdrk` strategy (orders 1-4).
        grid: the split grid.
        linear: (args, grid) -> the symbol L on the calling device's block.
        nonlinear: (u_hat, args, grid) -> N(u)_hat on the calling device's block.
        u0: the initial field [..., *points] (placed on the devices in slabs here).
        t: equally spaced save times [T], T >= 2.
        observe: (physical slab, args, grid) -> pytree saved at each time: arrays that
            end in the slab's shape are saved split as the field; any other value must be
            the same on every device (a reduction over the grid). Default: the field.
        args: what the callables read (parameters), the same on every device;
            differentiable.

    Returns:
        A `SpectralSolution` whose `final` and field observations are split over the
        devices along the first grid axis.

    Raises:
        ValueError: `u0` does not end in the grid's shape.

    Example:
        >>> sol = solve_slabs(Etdrk(), grid, lambda p, g: p * g.laplacian(),
        ...                   lambda u, p, g: jnp.zeros_like(u), u0, t, args=0.1)
    """
    if tuple(u0.shape[-grid.ndim :]) != grid.points:
        raise ValueError(
            f"initial field has shape {u0.shape}; expected trailing grid shape {grid.points}"
        )
    if observe is None:
        observe = _field
    dtype = solver.real_dtype
    lead = u0.ndim - grid.ndim
    u0 = jax.lax.with_sharding_constraint(u0.astype(dtype), grid.real_sharding(lead))
    t = jnp.asarray(t)
    dt = _step_interval(solver, t)
    n_steps = (t.shape[0] - 1) * solver.steps_per_save

    def body(args, u0, dt):
        coefficients = _coefficients(solver, grid, linear, args, dt)
        n_eff = _effective(solver, grid, nonlinear, args)
        final_hat, saved = rollout(
            lambda u_hat: solver.step(coefficients, u_hat, n_eff),
            grid.rfft(u0),
            n_steps,
            save_every=solver.steps_per_save,
            observe=lambda u_hat: observe(grid.irfft(u_hat), args, grid),
            levels=solver.checkpoint_levels,
        )
        final = grid.irfft(final_hat)
        return saved, final, grid.all_finite(final)

    in_specs = (PartitionSpec(), grid.real_spec(lead), PartitionSpec())
    struct = _local_shapes(grid, lambda a, u: observe(u, a, grid), in_specs[:2], args, u0)
    out_specs = (_saved_specs(grid, struct), grid.real_spec(lead), PartitionSpec())
    saved, final, finite = _map(grid, body, in_specs, out_specs)(args, u0, dt)
    result = jnp.where(finite, 0, NONFINITE)
    return SpectralSolution(
        saved=saved, final=final, num_steps=jnp.asarray(n_steps), result=result, dt=dt
    )


def _field(u, args, grid):
    return u


class EtdrkSlabLoopState(eqx.Module):
    """An ETDRK run on a split grid between two frames: the transform (sharded as
    `SlabGrid.spectral_sharding`) and the index of the next frame to fill."""

    u_hat: Array
    frame: Int[Array, ""]


class EtdrkSlabLoop(eqx.Module):
    """`solve_slabs` a number of frames at a time (`EtdrkLoop` on a split grid): the
    state between chunks is the split transform, so chunks, checkpoints and resumes
    change no number.

    Arguments:
        solver: the `Etdrk` strategy.
        grid: the split grid.
        coefficients: `slab_coefficients(solver, grid, linear, args, dt)`.
        nonlinear: (u_hat, args, grid) -> N(u)_hat on the calling device's block.
        observe: (physical slab, args, grid) -> pytree saved at each frame (see
            `solve_slabs`).
        args: what the callables read, the same on every device.

    Build it inside the compiled function (it holds Python callables).
    """

    solver: Etdrk
    grid: SlabGrid
    coefficients: EtdrkCoefficients
    nonlinear: Callable = eqx.field(static=True)
    observe: Callable = eqx.field(static=True, default=_field)
    args: PyTree = None

    def init(self, u0: Array) -> EtdrkSlabLoopState:
        """The state at the first save time (frame 0 not yet filled)."""
        grid = self.grid
        if tuple(u0.shape[-grid.ndim :]) != grid.points:
            raise ValueError(
                f"initial field has shape {u0.shape}; expected trailing grid shape {grid.points}"
            )
        lead = u0.ndim - grid.ndim
        u0 = jax.lax.with_sharding_constraint(
            u0.astype(self.solver.real_dtype), grid.real_sharding(lead)
        )
        u_hat = slab_rfft(u0, grid)
        return EtdrkSlabLoopState(u_hat=u_hat, frame=jnp.asarray(0, jnp.int32))

    def advance(
        self, state: EtdrkSlabLoopState, frames: Int[Array, ""] | int, capacity: int
    ) -> tuple[EtdrkSlabLoopState, PyTree, Int[Array, ""]]:
        """Fill the next `frames` frames (traced, at most `capacity`); as
        `EtdrkLoop.advance`, with the saved fields split over the devices."""
        solver, grid, observe = self.solver, self.grid, self.observe
        every = solver.steps_per_save
        lead = state.u_hat.ndim - grid.ndim
        spectral = grid.spectral_spec(lead)
        frames = jnp.asarray(frames, jnp.int32)

        def body(args, coefficients, u_hat, frame, frames):
            n_eff = _effective(solver, grid, self.nonlinear, args)

            def step(u):
                return solver.step(coefficients, u, n_eff)

            def look(u):
                return observe(grid.irfft(u), args, grid)

            struct = jax.eval_shape(look, u_hat)
            buffer = jax.tree.map(
                lambda s, spec: _varying(jnp.zeros((capacity,) + s.shape, s.dtype), spec, grid),
                struct,
                _specs(struct, grid.slab_points, grid.real_spec),
            )
            base, target = frame, frame + frames

            def fill(carry):
                u, f, buf = carry
                u = jax.lax.cond(
                    f > 0, lambda v: _advance(step, v, every, levels=1), lambda v: v, u
                )
                seen = look(u)
                buf = jax.tree.map(lambda b, v: b.at[f - base].set(v.astype(b.dtype)), buf, seen)
                return u, f + 1, buf

            u_hat, frame, buffer = jax.lax.while_loop(
                lambda c: c[1] < target, fill, (u_hat, frame, buffer)
            )
            return u_hat, frame, buffer, grid.all_finite(grid.irfft(u_hat))

        replicated = PartitionSpec()
        coefficient_specs = _coefficient_specs(
            grid, jax.tree.map(lambda a: _block_shape(a, grid), self.coefficients)
        )
        in_specs = (replicated, coefficient_specs, spectral, replicated, replicated)
        struct = _local_shapes(
            grid,
            lambda a, u: observe(grid.irfft(u), a, grid),
            (replicated, spectral),
            self.args,
            state.u_hat,
        )
        out_specs = (spectral, replicated, _saved_specs(grid, struct), replicated)
        u_hat, frame, buffer, finite = _map(grid, body, in_specs, out_specs)(
            self.args, self.coefficients, state.u_hat, state.frame, frames
        )
        code = jnp.where(finite, 0, NONFINITE).astype(jnp.int32)
        return EtdrkSlabLoopState(u_hat=u_hat, frame=frame), buffer, code


def _varying(x: Array, spec: PartitionSpec, grid: SlabGrid) -> Array:
    """`x` marked as differing between devices when it is split (`spec` names the mesh
    axis): a loop's buffer then has the type of the slabs written into it."""
    if grid.devices > 1 and SLAB_AXIS in tuple(spec):
        return jax.lax.pcast(x, SLAB_AXIS, to="varying")
    return x


def _block_shape(leaf, grid: SlabGrid):
    """The shape one device holds of a whole coefficient array (split as the transform)."""
    shape = list(jnp.shape(leaf))
    if len(shape) >= grid.ndim and tuple(shape[len(shape) - grid.ndim :]) == (
        grid.global_spectral_shape
    ):
        shape[len(shape) - grid.ndim + 1] //= grid.devices
    return jax.ShapeDtypeStruct(tuple(shape), jnp.result_type(leaf))
