"""A finite-difference grid split over devices in slabs of its first axis, whose
stencils take ghost planes from the neighbouring devices (halo exchange).

A field [..., N0, N1(, N2)] lies on the one-axis mesh of the split spectral grids (P
devices along `SLAB_AXIS`), each device holding N0 / P consecutive planes of the first
grid axis. The centred stencil of order 2r (r = 1 or 2) along that axis needs r planes
of each neighbour: every device sends its first r planes to the device below and its
last r planes to the device above (two `jax.lax.ppermute`s, cyclic on a periodic axis)
and applies `FdGrid`'s stencil to its slab padded with them. On a bounded axis the first
and the last device then replace their r rows nearest the side by `FdGrid`'s boundary
rows (one-sided differences of the same order, with the side's Dirichlet or Neumann
datum), which read up to 2r + 1 nodes in from the side: so a slab holds at least r
planes on a periodic axis, and 3 (order 2) or 4 (order 4) on a bounded one. The other
axes lie whole on every device, and `FdGrid`'s own operators apply to the slab along
them.

`HaloGrid` offers `FdGrid`'s methods on whole fields, global arrays split over the
devices: each stencil is one `jax.shard_map`, the integral a sum on every slab and one
`psum`; the geometry, the masks and the boundary values are `FdGrid`'s. A model written
against `FdGrid` runs on it unchanged, and gets `FdGrid`'s values: the same terms summed
in the same order. `MethodOfLines(devices=N)` integrates on it; its ODE state is the
field with the split axis first (`HaloGrid.ode_state`), so that the flat vectors of
diffrax's error norm and of lineax's Krylov inner products split as the field does (one
reduction over the devices each, no gather).
"""

from __future__ import annotations

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec
from jaxtyping import Array, Float, PyTree

from ._fd import (
    FdGrid,
    _boundary_rows,
    _centered,
    _central_rows,
    _one_sided_rows,
    stencil_weights,
)
from ._spectral_sharded import SLAB_AXIS, check_device_count, slab_mesh


def ghost_width(order: int) -> int:
    """The ghost planes a device takes from each neighbour: half the centred stencil."""
    return order // 2


def boundary_reach(order: int) -> int:
    """How many nodes in from a bounded side the boundary rows of `order` read
    (`FdGrid.second_derivative` and `FdGrid.derivative`, with and without a datum)."""
    rows = [
        (i, row)
        for kind in ("dirichlet", "neumann")
        for i, row in enumerate(_boundary_rows(kind, order))
    ]
    rows += [
        (i, row)
        for derivative in (1, 2)
        for flux in (False, True)
        for i, row in enumerate(_one_sided_rows(derivative, order, flux))
    ]
    return 1 + max(i + max(row.offsets, default=0) for i, row in rows if row is not None)


def minimum_slab(order: int, periodic: bool) -> int:
    """The fewest planes of the split axis a device may hold: its ghost width, and on a
    bounded axis what the boundary rows read beyond the ghosts."""
    ghost = ghost_width(order)
    return ghost if periodic else max(ghost, boundary_reach(order) - ghost)


def check_halo(
    points: tuple[int, ...],
    devices: int,
    *,
    order: int = 2,
    periodic: bool = False,
    available: int | None = None,
) -> None:
    """Raise ValueError unless a finite-difference grid of `points` splits over `devices`
    slabs of its first axis.

    Arguments:
        points: nodes per axis (1 to 3 axes).
        devices: the number of slabs (devices), >= 1.
        order: the order of the differences, 2 or 4 (its ghost width is order / 2).
        periodic: whether the first axis is periodic.
        available: the devices there are (None: `jax.device_count()`).
    """
    check_device_count(devices, available)
    if devices == 1:
        return
    n = points[0]
    if n % devices:
        raise ValueError(
            f"devices = {devices} does not divide points[0] = {n} (each device holds "
            "points[0] / devices planes of the first axis)"
        )
    slab, least = n // devices, minimum_slab(order, periodic)
    if slab < least:
        ghost = ghost_width(order)
        reason = (
            f"{ghost} ghost plane{'s' if ghost > 1 else ''} of each neighbour"
            if periodic
            else f"a bounded side's rows of order {order} read {boundary_reach(order)} nodes, "
            f"{ghost} of them ghost plane{'s' if ghost > 1 else ''}"
        )
        raise ValueError(
            f"devices = {devices}: slabs of {slab} plane{'s' if slab > 1 else ''} of points[0] "
            f"= {n} are thinner than the {least} a device needs ({reason}); take fewer devices "
            "or more points"
        )


class HaloGrid(eqx.Module):
    """An `FdGrid` split over `devices` devices in slabs of its first axis: `FdGrid`'s
    methods on fields [..., *points] that lie split over the devices (`shard`), each
    stencil computed on every device's slab with ghost planes exchanged with its
    neighbours (`jax.lax.ppermute`), and the values `FdGrid` gives.

    Arguments:
        points, domain, boundaries, values, order: as `FdGrid`.
        devices: the number of slabs, one per device; it divides points[0], and each
            slab is at least `minimum_slab(order, periodic)` planes thick.

    Raises:
        ValueError: a malformed grid (as `FdGrid`), or one that does not split over
            `devices`.

    Example:
        >>> grid = HaloGrid.of(FdGrid((64, 64), ((0.0, 1.0),) * 2, (("dirichlet",) * 2,) * 2,
        ...                           ((0.0, 0.0),) * 2), devices=4)
        >>> lap_u = jax.jit(grid.laplacian)(grid.shard(u))
    """

    points: tuple[int, ...] = eqx.field(static=True)
    domain: tuple[tuple[float, float], ...] = eqx.field(static=True)
    boundaries: tuple[tuple[str, str], ...] = eqx.field(static=True)
    values: tuple[tuple[float, float], ...] = eqx.field(static=True)
    order: int = eqx.field(static=True, default=2)
    devices: int = eqx.field(static=True, default=1)

    def __check_init__(self):
        whole = self.whole  # (FdGrid's checks)
        check_halo(
            self.points,
            self.devices,
            order=self.order,
            periodic=whole.periodic(0),
            available=self.devices,
        )

    @staticmethod
    def of(grid: FdGrid, devices: int) -> HaloGrid:
        """`grid` split over `devices` devices."""
        return HaloGrid(grid.points, grid.domain, grid.boundaries, grid.values, grid.order, devices)

    # ------------------------------------------------------------------ geometry

    @property
    def whole(self) -> FdGrid:
        """The same grid unsplit: its geometry, masks and boundary values are this grid's."""
        return FdGrid(self.points, self.domain, self.boundaries, self.values, self.order)

    @property
    def ndim(self) -> int:
        return len(self.points)

    @property
    def ghost(self) -> int:
        """Ghost planes taken from each neighbour (half the stencil)."""
        return ghost_width(self.order)

    @property
    def slab_points(self) -> tuple[int, ...]:
        """A device's slab of a field: (N0 / P, N1(, N2))."""
        return (self.points[0] // self.devices, *self.points[1:])

    def periodic(self, axis: int) -> bool:
        return self.whole.periodic(axis)

    @property
    def spacing(self) -> tuple[float, ...]:
        return self.whole.spacing

    def coordinates(self) -> tuple[np.ndarray, ...]:
        """Node coordinates per axis of the whole grid (float64 numpy)."""
        return self.whole.coordinates()

    def fixed_mask(self) -> np.ndarray:
        """True on Dirichlet nodes, the whole grid's shape (as `FdGrid`)."""
        return self.whole.fixed_mask()

    def boundary_field(self) -> np.ndarray:
        """The Dirichlet values on Dirichlet nodes, the whole grid's shape (as `FdGrid`)."""
        return self.whole.boundary_field()

    def apply_boundary(self, u: Float[Array, "..."]) -> Float[Array, "..."]:
        """`u` with its Dirichlet nodes set to their boundary values (node by node: no
        exchange)."""
        return self.whole.apply_boundary(u)

    def spectral_radius(self) -> float:
        """The Gershgorin bound of `FdGrid.spectral_radius`."""
        return self.whole.spectral_radius()

    # ------------------------------------------------------------------ shardings

    def device_mesh(self) -> Mesh:
        """The mesh of the first `devices` devices (`solvers.slab_mesh`)."""
        return slab_mesh(self.devices)

    def spec(self, leading: int = 1) -> PartitionSpec:
        """The partition of a field with `leading` axes before the grid's."""
        return PartitionSpec(*([None] * leading), SLAB_AXIS)

    def sharding(self, leading: int = 1) -> NamedSharding:
        return NamedSharding(self.device_mesh(), self.spec(leading))

    def shard(self, u: Float[Array, "..."]) -> Float[Array, "..."]:
        """`u` [..., *points] placed on the devices in slabs (each device its own)."""
        return jax.device_put(u, self.sharding(u.ndim - self.ndim))

    def constrain(self, tree: PyTree) -> PyTree:
        """Inside a compiled function: every leaf of `tree` that ends in the grid's shape
        kept split in slabs (the others, reductions over the grid, as they are)."""

        def one(leaf):
            shape = jnp.shape(leaf)
            if len(shape) >= self.ndim and tuple(shape[len(shape) - self.ndim :]) == self.points:
                return jax.lax.with_sharding_constraint(leaf, self.sharding(len(shape) - self.ndim))
            return leaf

        return jax.tree.map(one, tree)

    # ------------------------------------------------------------------ the ODE state

    def ode_state(self, u: Float[Array, "*lead ..."]) -> Array:
        """The state a method of lines integrates: the field [*lead, *points] with the
        split axis first [N0, *lead, N1, ...], so that its flattening (diffrax's norms,
        lineax's inner products) splits as the field does."""
        lead = u.ndim - self.ndim
        y = jnp.moveaxis(u, lead, 0)
        return jax.lax.with_sharding_constraint(y, self.sharding(0))

    def ode_fields(self, y: Array) -> Array:
        """The field [*lead, *points] of an `ode_state`."""
        return self.constrain(jnp.moveaxis(y, 0, y.ndim - self.ndim))

    def ode_rhs(self, field: Callable | tuple[Callable, Callable]):
        """A right-hand side f(t, u, args) of fields (or an IMEX pair of them) as one of
        `ode_state`s."""
        if isinstance(field, tuple):
            return tuple(self.ode_rhs(f) for f in field)

        def on_states(t, y, args):
            return self.ode_state(field(t, self.ode_fields(y), args))

        return on_states

    # ------------------------------------------------------------------ stencils

    def _map(self, fn, in_specs, out_specs):
        return jax.shard_map(fn, mesh=self.device_mesh(), in_specs=in_specs, out_specs=out_specs)

    def _padded(self, v: Array) -> Array:
        """This device's slab (split axis first) with `ghost` planes of each neighbour
        before and after it (zeros beyond a bounded side)."""
        g, p = self.ghost, self.devices
        down = [(i, i + 1) for i in range(p - 1)]
        up = [(i + 1, i) for i in range(p - 1)]
        if self.periodic(0):
            down.append((p - 1, 0))
            up.append((0, p - 1))
        below = jax.lax.ppermute(v[-g:], SLAB_AXIS, down)
        above = jax.lax.ppermute(v[:g], SLAB_AXIS, up)
        return jnp.concatenate([below, v, above], axis=0)

    def _along_split(self, v: Array, derivative: int, sides: Callable) -> Array:
        """A derivative along the split axis on this device's slab `v` (that axis
        first): the centred stencil on the padded slab, the first and last devices'
        rows nearest a bounded side from `sides(padded, low node, high node)`."""
        h = self.spacing[0]
        r = self.order // 2
        offsets = tuple(range(-r, r + 1))
        weights = (
            _centered(self.order)[1]
            if derivative == 2
            else stencil_weights(offsets, derivative=derivative)[0]
        )
        g, slab = self.ghost, v.shape[0]
        padded = self._padded(v)
        out = _central_rows(padded, g, slab, offsets, weights)
        if not self.periodic(0):
            low, high = sides(padded, g, g + slab - 1)
            index = jax.lax.axis_index(SLAB_AXIS)
            first = jnp.concatenate([jnp.stack(low), out[len(low) :]], axis=0)
            last = jnp.concatenate([out[: slab - len(high)], jnp.stack(high[::-1])], axis=0)
            out = jnp.where(index == 0, first, out)
            out = jnp.where(index == self.devices - 1, last, out)
        return out / h**derivative

    def _local_second(self, u: Array, axis: int) -> Array:
        """`FdGrid.second_derivative` of this device's slab [..., *slab_points]."""
        if axis != 0:
            return self.whole.second_derivative(u, axis)
        lead = u.ndim - self.ndim
        whole = self.whole
        out = self._along_split(
            jnp.moveaxis(u, lead, 0),
            2,
            lambda padded, low, high: whole._second_sides(padded, 0, low, high),
        )
        return jnp.moveaxis(out, 0, lead)

    def second_derivative(self, u: Float[Array, "..."], axis: int) -> Float[Array, "..."]:
        """d^2 u / dx_axis^2 of a split field, as `FdGrid.second_derivative`."""
        spec = self.spec(u.ndim - self.ndim)
        return self._map(lambda v: self._local_second(v, axis), (spec,), spec)(u)

    def laplacian(self, u: Float[Array, "..."]) -> Float[Array, "..."]:
        """The Laplacian of a split field (one exchange of ghost planes), as
        `FdGrid.laplacian`."""

        def local(v):
            total = 0
            for axis in range(self.ndim):
                total = total + self._local_second(v, axis)
            return total

        spec = self.spec(u.ndim - self.ndim)
        return self._map(local, (spec,), spec)(u)

    def _flux_spec(self, u: Array, axis: int, flux) -> PartitionSpec:
        """The partition of a side's datum of `derivative` along `axis`: split where it
        runs along the split axis (a side of another axis), else whole on every device."""
        shape = jnp.shape(flux)
        side = u.ndim - 1  # (the side's shape: u's without `axis`)
        at = (u.ndim - self.ndim) - (side - len(shape))
        if axis != 0 and 0 <= at < len(shape) and shape[at] == self.points[0]:
            return PartitionSpec(*([None] * at), SLAB_AXIS)
        return PartitionSpec()

    def derivative(
        self,
        u: Float[Array, "..."],
        axis: int,
        derivative: int,
        fluxes: tuple[Array | float | None, Array | float | None] = (None, None),
    ) -> Float[Array, "..."]:
        """The first or second derivative of a split field along `axis`, with boundary
        data by value, as `FdGrid.derivative`: a side's datum is a number or an array over
        that side's nodes (split with the field where it runs along the split axis)."""
        if derivative not in (1, 2):
            raise ValueError(f"derivative must be 1 or 2, got {derivative!r}")
        numbers = (int, float)
        given = [i for i, f in enumerate(fluxes) if f is not None and not isinstance(f, numbers)]
        data = [jnp.asarray(fluxes[i]) for i in given]
        whole = self.whole

        def local(v, *local_data):
            sides = list(fluxes)
            for i, value in zip(given, local_data, strict=True):
                sides[i] = value
            sides = tuple(sides)
            if axis != 0:
                return whole.derivative(v, axis, derivative, sides)
            lead = v.ndim - self.ndim
            out = self._along_split(
                jnp.moveaxis(v, lead, 0),
                derivative,
                lambda padded, low, high: whole._derivative_sides(
                    padded, 0, derivative, sides, low, high
                ),
            )
            return jnp.moveaxis(out, 0, lead)

        spec = self.spec(u.ndim - self.ndim)
        in_specs = (spec, *(self._flux_spec(u, axis, d) for d in data))
        return self._map(local, in_specs, spec)(u, *data)

    def integral(self, u: Float[Array, "..."]) -> Float[Array, "..."]:
        """Integral over the box (trapezoidal on bounded axes, rectangles on periodic
        ones): every device sums its slab, one `psum` adds the slabs."""
        whole = self.whole

        def local(v):
            k = v.ndim - self.ndim  # (the first grid axis, the split one)
            for axis in range(self.ndim - 1, 0, -1):  # (the whole axes, last first)
                h = whole.spacing[axis]
                at = k + axis
                if whole.periodic(axis):
                    v = jnp.sum(v, axis=at) * h
                else:
                    v = (
                        jnp.sum(v, axis=at)
                        - 0.5 * (jnp.take(v, 0, axis=at) + jnp.take(v, -1, axis=at))
                    ) * h
            total = jnp.sum(v, axis=k)
            if not whole.periodic(0):
                index = jax.lax.axis_index(SLAB_AXIS)
                first = jnp.where(index == 0, jnp.take(v, 0, axis=k), 0.0)
                last = jnp.where(index == self.devices - 1, jnp.take(v, -1, axis=k), 0.0)
                total = total - 0.5 * (first + last)
            return jax.lax.psum(total, SLAB_AXIS) * whole.spacing[0]

        return self._map(local, (self.spec(u.ndim - self.ndim),), PartitionSpec())(u)
