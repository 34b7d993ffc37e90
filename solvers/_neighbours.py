"""Neighbour lists for particles: a cell list that feeds a Verlet list with a skin.

The list is a dense array `index` [n, capacity]: row i holds the ids of the particles
within `cutoff + skin` of particle i (both directions: j is in row i and i in row j),
padded with `n`. It is rebuilt from a cell list whenever some particle has moved more
than half the skin since the last build, so between builds no pair can cross into the
cutoff unseen.

Capacities (neighbours per particle, particles per cell) are static, so a list can live
inside `jax.jit`. When a build finds more than fits, `Neighbours.overflow` becomes True
and stays True; the engine that runs the simulation checks it after each compiled chunk,
enlarges the list with `NeighbourList.grown` and reruns the chunk. Geometry is passed in:
`box` is the array of edge lengths of a periodic orthorhombic box, or None for free space.

The box may change between calls (a barostat). Displacements since the last build are
then measured in scaled coordinates, r - r_ref L / L_ref, and the rebuild threshold
shrinks with the box: a pair farther apart than cutoff + skin at the build is at least
s (cutoff + skin) apart after a scaling by s (the smallest ratio of edges, at most 1)
less what the two particles moved, so the list stays complete while every particle has
moved less than (skin - (1 - s)(cutoff + skin)) / 2. The cell grid is static: cells must
stay at least cutoff + skin wide, so a list for a changing box is allocated with cells
for a box `BOX_MARGIN` smaller than the first (`allocate(..., box_margin=...)`), and a
build in a box smaller than its grid allows is an overflow, after which `grown` coarsens
the grid for the smallest box seen.
"""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int

from ._neighbour_slots import _apart, _compact, _packed, by_row_blocks

Positions = Float[Array, "n dim"]
"""Particle positions, one row per particle."""
Box = Float[Array, " dim"]
"""Edge lengths of a periodic orthorhombic box."""

SHARD_AXIS = "particles"
"""The name of the device axis a run split by particle runs over (`NeighbourList.shards`)."""
CAPACITY_FACTOR = 1.05
"""Neighbours per particle a list has room for: the most counted times this (at least 2
more). The force pass costs in proportion to the width of the list, padding included:
on the LJ liquid of the benchmark (75 neighbours on average, 86 at most) a list 108 wide
(1.25) took 12.3 ms per force evaluation at 32,000 particles, 96 wide 9.7 ms; at 4,000
particles a step took 2.22 ms with a list 95 wide (1.1) and 2.17 ms 91 wide (1.05),
without an overflow in 1,000 steps. A list that overflows later is grown and the work
redone (`solvers.ParticleRun`): a denser moment costs a recompilation, never a result."""
CELL_FACTOR = 1.25
"""Particles per cell the grid has room for: the most counted times this."""
ID_TABLE_SIZE = 1 << 18
"""A build whose particles are not in cell order looks up a kept candidate's id in a
table of every cell's candidates when the table has at most this many entries (one
lookup a slot where the cell's id and its member made two: a build at 4,000 LJ
particles, a table of 168,000 entries, took 20% less time on one core), else through
the cell (at 32,000 particles the table of 1.5 million entries, beyond the core's
cache, made a build 10-30% slower)."""
BOX_MARGIN = 0.1
"""How much smaller than its first box (per edge) the cell grid of a list for a changing
box is sized for: a box that shrinks further overflows the list, which is then rebuilt
with a coarser grid."""


class Neighbours(eqx.Module):
    """A Verlet neighbour list: the data (all arrays, traced).

    Attributes:
        index: neighbour ids [n, capacity], padded with n (an id that is not a particle).
        reference: positions [n, dim] at the last build.
        overflow: True once a build did not fit (sticky until the list is reallocated).
        max_neighbours: the largest neighbour count any build has seen.
        max_occupancy: the largest number of particles any build found in one cell.
        builds: how many times the list has been built.
        reference_box: the box edges at the last build [dim] (None in free space).
        smallest_box: the smallest edges any build has met [dim] (None in free space).
        order: for a list in cell order (`NeighbourList.ordered`), the particle of each
            row [n]: row k is particle order[k]'s, and `index` holds rows, not particle
            ids (row k's neighbours are particles order[index[k]]). None: rows and ids
            are the particles'.
        place: the row of each particle [n] (the inverse of `order`), or None.
    """

    index: Int[Array, "n capacity"]
    reference: Float[Array, "n dim"]
    overflow: Bool[Array, ""]
    max_neighbours: Int[Array, ""]
    max_occupancy: Int[Array, ""]
    builds: Int[Array, ""]
    reference_box: Float[Array, " dim"] | None = None
    smallest_box: Float[Array, " dim"] | None = None
    order: Int[Array, " n"] | None = None
    place: Int[Array, " n"] | None = None


def minimum_image(dr: Float[Array, "*batch dim"], box: Box | None) -> Float[Array, "*batch dim"]:
    """Displacements `dr` mapped to their nearest periodic image (unchanged when box is None).

    Arguments:
        dr: displacements [..., dim].
        box: periodic box edges [dim], or None for free space.

    Returns:
        dr - box * round(dr / box) [..., dim]: each component in [-box / 2, box / 2].
    """
    if box is None:
        return dr
    return dr - box * jnp.round(dr / box)


class NeighbourList(eqx.Module):
    """How to build and update a Verlet list; every field is static.

    Build one with `NeighbourList.allocate` (sizes the capacities from a configuration),
    then `build` it and `update` it every step (it rebuilds only when needed).

    Arguments:
        cutoff: interaction range (same length unit as positions).
        skin: extra shell; the list holds pairs within cutoff + skin.
        capacity: neighbours per particle.
        cell_capacity: particles per cell.
        cells: cells per side of the grid; () means no cell list (all pairs are
            candidates), used when the box holds fewer than 3 cells per side.
        lower: lower corner of the cell grid in free space (ignored when periodic);
            particles outside the grid are binned into its border cells, which stays
            correct, only slower.
        cell_size: edge of a cell in free space (periodic boxes use box / cells).
        periodic: True for a periodic box (then `box` must be given to every call).
        ordered: a list in cell order: each build numbers the particles anew, sorted by
            cell (`Neighbours.order`), and the list's rows and ids follow that
            numbering. A force pass over the particles in that order (`ParticleProblem`) reads
            neighbours that lie close together in memory however far the particles have
            wandered from their first order, for two gathers of n rows per step.
            Without a cell grid the order is the particles' own.
        shards: the list of a run split over this many devices by particle (inside
            `jax.shard_map` over the axis `SHARD_AXIS`): each device's `index` holds the
            rows of its own block of n / shards particles (`rows`), and what a build
            counts is combined over the devices, so that every device takes the same
            decisions. 1: every row.

    Example:
        >>> nl = NeighbourList.allocate(position, box, cutoff=2.5, skin=0.3)
        >>> nbrs = nl.build(position, box)
        >>> nbrs = nl.update(nbrs, new_position, box)
    """

    cutoff: float = eqx.field(static=True)
    skin: float = eqx.field(static=True)
    capacity: int = eqx.field(static=True)
    cell_capacity: int = eqx.field(static=True)
    cells: tuple[int, ...] = eqx.field(static=True)
    lower: tuple[float, ...] = eqx.field(static=True)
    cell_size: tuple[float, ...] = eqx.field(static=True)
    periodic: bool = eqx.field(static=True)
    shards: int = eqx.field(static=True, default=1)
    ordered: bool = eqx.field(static=True, default=False)

    def __check_init__(self):
        if not self.cutoff > 0:
            raise ValueError(f"neighbour list cutoff must be > 0, got {self.cutoff}")
        if not self.skin >= 0:
            raise ValueError(f"neighbour list skin must be >= 0, got {self.skin}")
        if self.capacity < 1 or self.cell_capacity < 1:
            raise ValueError(
                f"neighbour list capacities must be >= 1, got capacity={self.capacity}, "
                f"cell_capacity={self.cell_capacity}"
            )

    @property
    def radius(self) -> float:
        """cutoff + skin: the range of pairs the list holds."""
        return self.cutoff + self.skin

    # ------------------------------------------------------------------ allocation

    @staticmethod
    def allocate(
        position: Float[Array | np.ndarray, "n dim"],
        box: Float[Array | np.ndarray, " dim"] | None,
        cutoff: float,
        skin: float = 0.3,
        *,
        factor: float = CAPACITY_FACTOR,
        capacity: int | None = None,
        box_margin: float = 0.0,
    ) -> NeighbourList:
        """A list sized for `position` with room to spare (outside jit: needs concrete values).

        Arguments:
            position: a representative configuration [n, dim].
            box: periodic box edges [dim], or None for free space.
            cutoff, skin: see the class.
            factor: neighbours per particle are the most counted times this factor
                (particles per cell: `CELL_FACTOR` times the most counted).
            capacity: force this many neighbours per particle instead of counting.
            box_margin: size the cell grid for a box this fraction smaller per edge (a
                box that a barostat may shrink; `BOX_MARGIN`), and the neighbour
                capacity for the density of that box (`factor / (1 - box_margin)^dim`).

        Raises:
            ValueError: a periodic box shorter than 2 (cutoff + skin) in some direction
                (a particle would meet its own image), or non-positive sizes.
        """
        # (numpy stays numpy: under jax.jit even stop_gradient of a constant is traced)
        pos = np.asarray(
            position if isinstance(position, np.ndarray) else jax.lax.stop_gradient(position),
            dtype=float,
        )
        n, dim = pos.shape
        radius = cutoff + skin
        periodic = box is not None
        if periodic:
            edges = np.asarray(
                box if isinstance(box, np.ndarray) else jax.lax.stop_gradient(box), dtype=float
            )
            if edges.shape != (dim,):
                raise ValueError(
                    f"box must have shape ({dim},) for {dim}-D positions, got {edges.shape}"
                )
            if np.any(edges < 2 * cutoff):
                raise ValueError(
                    f"box edges {edges.tolist()} must be at least twice the cutoff "
                    f"({2 * cutoff:g}): "
                    "use more particles or a shorter cutoff"
                )
            cells = tuple(int(c) for c in np.floor(edges * (1.0 - box_margin) / radius))
            lower = (0.0,) * dim
            size = tuple(float(e / c) for e, c in zip(edges, cells, strict=False))
        else:
            lo, hi = pos.min(axis=0), pos.max(axis=0)
            extent = np.maximum(hi - lo, radius)
            cells = tuple(int(max(1, c)) for c in np.floor(extent / radius))
            lower = tuple(float(v) for v in lo)
            size = tuple(float(e / c) for e, c in zip(extent, cells, strict=False))
        if min(cells) < 3:
            cells = ()
        probe = NeighbourList(
            cutoff=float(cutoff),
            skin=float(skin),
            capacity=max(n - 1, 1),
            cell_capacity=max(n, 1),
            cells=cells,
            lower=lower,
            cell_size=size,
            periodic=periodic,
        )
        # The counts are numbers now, also when a traced program (jax.jit) allocates a
        # list for a system it closes over.
        with jax.ensure_compile_time_eval():
            pos_j = jnp.asarray(pos)
            box_j = None if box is None else jnp.asarray(edges)
            cell_capacity = _padded(_occupancy(probe, pos_j, box_j), CELL_FACTOR, n)
            probe = dataclasses.replace(probe, cell_capacity=cell_capacity)
            if capacity is None:
                # a box that may shrink by box_margin per edge packs the particles denser
                dense = factor / (1.0 - box_margin) ** dim
                capacity = _padded(_max_count(probe, pos_j, box_j), dense, n - 1)
        return dataclasses.replace(probe, capacity=max(capacity, 1))

    def grown(self, nbrs: Neighbours, n: int) -> NeighbourList:
        """A larger list after `nbrs` overflowed: room for the most it saw, times the
        factor, and a coarser cell grid if a build met a box too small for the grid."""
        capacity = max(
            _padded(int(nbrs.max_neighbours), CAPACITY_FACTOR, n - 1),
            min(self.capacity + 1, max(n - 1, 1)),
        )
        cell_capacity = self.cell_capacity
        if int(nbrs.max_occupancy) > self.cell_capacity:
            cell_capacity = min(_padded(int(nbrs.max_occupancy), CELL_FACTOR, n), n)
        cells = self.cells
        if cells and nbrs.smallest_box is not None:
            smallest = np.asarray(nbrs.smallest_box, dtype=float)
            if not self.grid_fits(smallest):
                coarse = tuple(
                    int(c) for c in np.floor(smallest * (1.0 - BOX_MARGIN) / self.radius)
                )
                cells = () if min(coarse) < 3 else coarse
                grow = math.prod(self.cells) / (math.prod(cells) if cells else 1)
                cell_capacity = min(int(math.ceil(cell_capacity * grow)), n)
        return dataclasses.replace(
            self, capacity=capacity, cell_capacity=cell_capacity, cells=cells
        )

    def grid_fits(self, box) -> bool | Bool[Array, ""]:
        """Whether every cell of the grid is at least cutoff + skin wide in `box` (always
        without a cell grid, or in free space)."""
        if not (self.cells and self.periodic):
            return True
        if isinstance(box, np.ndarray):
            return bool(np.all(box * (1.0 + 1e-12) >= np.asarray(self.cells) * self.radius))
        return jnp.all(
            box * (1.0 + 1e-12) >= jnp.asarray(self.cells, dtype=box.dtype) * self.radius
        )

    # ------------------------------------------------------------------ build / update

    def rows(self, n: int) -> Int[Array, " rows"]:
        """The particles whose rows this device's list holds: all n, or with `shards`
        the block of n / shards of the device's place on `SHARD_AXIS`."""
        if self.shards == 1:
            return jnp.arange(n, dtype=jnp.int32)
        block = n // self.shards
        return jax.lax.axis_index(SHARD_AXIS).astype(jnp.int32) * block + jnp.arange(
            block, dtype=jnp.int32
        )

    def build(self, position: Positions, box: Box | None) -> Neighbours:
        """A fresh list for `position` (no gradient flows through the list)."""
        position = jax.lax.stop_gradient(position)
        n = position.shape[0]
        order = place = None
        at = position
        if self.ordered and not self.cells:  # (a list grown to no grid keeps its structure)
            order = place = jnp.arange(n, dtype=jnp.int32)
        elif self.ordered:
            order = self._cell_order(self._wrapped(position, box), box)
            place = _inverse(order)
            at = position[order]
        candidates = self._candidates(at, box, in_cell_order=order is not None)
        occupancy = candidates[-1]
        index, count = self._lists(box, candidates, None if self.shards == 1 else self.rows(n))
        max_count = jnp.max(count, initial=0)
        if self.shards > 1:  # the same overflow and counts on every device
            max_count = jax.lax.pmax(max_count, SHARD_AXIS)
        overflow = (max_count > self.capacity) | (occupancy > self.cell_capacity)
        if box is not None:
            box = jax.lax.stop_gradient(box)
            overflow = overflow | jnp.logical_not(self.grid_fits(box))
        return Neighbours(
            index=index,
            reference=position,
            overflow=overflow,
            max_neighbours=max_count.astype(jnp.int32),
            max_occupancy=occupancy.astype(jnp.int32),
            builds=jnp.ones((), jnp.int32),
            reference_box=box,
            smallest_box=box,
            order=order,
            place=place,
        )

    def needs_rebuild(
        self, nbrs: Neighbours, position: Positions, box: Box | None
    ) -> Bool[Array, ""]:
        """True when some particle moved more than skin / 2 since the last build (in a
        box that changed: in scaled coordinates, against a threshold that shrinks with
        the box; see the module docstring)."""
        threshold = 0.5 * self.skin
        reference = nbrs.reference
        if box is not None and nbrs.reference_box is not None:
            ratio = jax.lax.stop_gradient(box) / nbrs.reference_box
            reference = reference * ratio
            shrink = jnp.minimum(jnp.min(ratio), 1.0)
            threshold = 0.5 * (self.skin - (1.0 - shrink) * self.radius)
        # per axis ([n] columns, not [n, dim] rows summed over their last axis): 4x faster
        # on CPU (0.2 ms against 0.8 at 32,000 particles, a step is 14-18 ms)
        moved2 = None
        for axis in range(position.shape[1]):
            d = position[:, axis] - reference[:, axis]
            if box is not None:
                d = d - box[axis] * jnp.round(d / box[axis])
            moved2 = d * d if moved2 is None else moved2 + d * d
        # any particle past the threshold, not the largest displacement against it: XLA
        # on CPU hands a max over floats to a library kernel that took 0.68-0.74 ms a
        # check at 32,000 particles, the `any` of the comparisons 0.042-0.047 ms
        return jnp.any(moved2 > threshold * threshold) | (threshold <= 0)

    def update(self, nbrs: Neighbours, position: Positions, box: Box | None) -> Neighbours:
        """`nbrs`, rebuilt for `position` if some particle moved more than skin / 2."""

        def rebuild(_):
            fresh = self.build(position, box)
            return Neighbours(
                index=fresh.index,
                reference=fresh.reference,
                overflow=nbrs.overflow | fresh.overflow,
                max_neighbours=jnp.maximum(nbrs.max_neighbours, fresh.max_neighbours),
                max_occupancy=jnp.maximum(nbrs.max_occupancy, fresh.max_occupancy),
                builds=nbrs.builds + 1,
                reference_box=fresh.reference_box,
                smallest_box=None
                if box is None
                else jnp.minimum(nbrs.smallest_box, fresh.smallest_box),
                order=fresh.order,
                place=fresh.place,
            )

        return jax.lax.cond(self.needs_rebuild(nbrs, position, box), rebuild, lambda _: nbrs, None)

    # ------------------------------------------------------------------ internals

    def _lists(
        self,
        box: Box | None,
        candidates: tuple,
        ids: Int[Array, " rows"] | None = None,
        elements: int = 1 << 18,
    ) -> tuple[Int[Array, "rows capacity"], Int[Array, " rows"]]:
        """The rows `ids` (every particle: None) of the list from `_candidates`, and the
        number of neighbours each has (which may exceed the capacity).

        The candidate test and its mask, packed into words (`_packed`), go a block of rows
        at a time (`by_row_blocks`, at most about `elements` candidates a block), so that
        each block's distances stay in cache; the slots are then found over all the rows
        at once (`_compact`).
        """
        at, candidate_ids, hood_x, group, own, _ = candidates
        n, m = at.shape[0], hood_x[0].shape[1]
        words = by_row_blocks(
            lambda i: _packed(self._keep(at, box, hood_x, group, own, i)), n, m, elements, ids=ids
        )
        groups = group if ids is None else group[ids]
        return _compact(
            words, m, lambda rows, column: candidate_ids(groups[rows], column), self.capacity, n
        )

    def _cell_coords(self, position: Positions, box: Box | None) -> Int[Array, "n dim"]:
        """The cell of each particle; periodic positions must be wrapped into the box
        (`_wrapped`), so that a particle lies in its cell, up to rounding at its faces."""
        cells = jnp.asarray(self.cells, dtype=jnp.int32)
        if self.periodic:
            size = box / cells.astype(position.dtype)
            c = jnp.floor(position / size).astype(jnp.int32)
            return jnp.clip(c, 0, cells - 1)
        lower = jnp.asarray(self.lower, dtype=position.dtype)
        size = jnp.asarray(self.cell_size, dtype=position.dtype)
        c = jnp.floor((position - lower) / size).astype(jnp.int32)
        return jnp.clip(c, 0, cells - 1)

    def _cell_order(self, at: Positions, box: Box | None) -> Int[Array, " n"]:
        """The particles sorted by cell, in their own order within a cell, from
        positions `at` wrapped into the box (`_wrapped`)."""
        n = at.shape[0]
        strides = np.cumprod((1,) + self.cells[:-1]).astype(np.int32)
        group = self._cell_coords(at, box) @ jnp.asarray(strides)
        if (
            math.prod(self.cells) * n < 2**31
        ):  # one int32 key (cell, id): sorted alone, 6x faster than argsort
            return jax.lax.sort(group * n + jnp.arange(n, dtype=jnp.int32)) % n
        return jnp.argsort(group, stable=True).astype(jnp.int32)

    def _cell_members(
        self, at: Positions, box: Box | None, in_cell_order: bool
    ) -> tuple[Array, Array, Array, Array, Array]:
        """(the cell of each particle [n], the particles sorted by cell [n], each cell's
        start in that order [n_cells + 1], its count [n_cells], the table of cells: each
        cell's members [n_cells + 1, width], padded with n) from positions `at` wrapped
        into the box. The table's last row is an empty cell: the neighbour of border
        cells off a free-space grid.

        Its rows have a width that is a multiple of 8, so that 28 stencil columns (the
        27 cells and, where needed, the empty cell) make whole 32-bit words of
        candidates for `_compact`, without copying to pad.
        """
        n = at.shape[0]
        coords = self._cell_coords(at, box)
        strides = np.cumprod((1,) + self.cells[:-1]).astype(np.int32)
        group = coords @ jnp.asarray(strides)
        n_cells = math.prod(self.cells)
        order = jnp.arange(n, dtype=jnp.int32) if in_cell_order else self._cell_order(at, box)
        starts = jnp.searchsorted(group[order], jnp.arange(n_cells + 1, dtype=jnp.int32)).astype(
            jnp.int32
        )
        counts = starts[1:] - starts[:-1]
        width = -(-self.cell_capacity // 8) * 8
        slot = jnp.arange(width, dtype=jnp.int32)
        members = jnp.where(
            slot < counts[:, None], order[jnp.minimum(starts[:-1, None] + slot, n - 1)], n
        )
        members = jnp.concatenate([members, jnp.full((1, width), n, jnp.int32)])
        return group, order, starts, counts, members

    def _candidates(
        self, position: Positions, box: Box | None, in_cell_order: bool = False
    ) -> tuple[
        Positions,
        Callable,
        tuple[Float[Array, "g m"], ...],
        Int[Array, " n"],
        Int[Array, " n"],
        Int[Array, ""],
    ]:
        """The candidate pairs, grouped by cell.

        Returns:
            at: the positions the candidate test measures from: wrapped into a periodic
                box with a cell grid, else as given.
            ids: `ids(group, column)`, the ids of the candidates in columns [b, k] of
                cells `group` [b] (padding: n, or for particles `in_cell_order` any
                number: only kept candidates are looked up). A cell's candidates are the particles
                in it and in the 3^dim cells around it, one cell's table row after
                another (m columns). Without a cell list: one group holding every
                particle. (Only the kept candidates' ids are looked up; an
                [n_cells, m] table of ids is made only when it fits the cache,
                `ID_TABLE_SIZE`.)
            hood_x: the coordinates of the candidates, one [n_cells, m] array per
                axis. In a periodic box with a cell grid each is the image nearest to
                the cell (wrapped, shifted by a box edge where the stencil crosses the
                box's face), so that a particle's displacement to its candidates needs
                no minimum-image rounding. Padding entries are at infinity.
            group: the cell of each particle [n]: particle i's candidates are those of group[i].
            own: the column of each particle among its own candidates [n].
            occupancy: the largest number of particles in one cell.

        Particles are sorted by cell (`_cell_order`), so the members of every cell are a
        run of the sorted order, found with `searchsorted` (no scatter); particles
        `in_cell_order` are sorted already.
        """
        dim = position.shape[1]
        if not self.cells:
            at, ids, hood_x, group, own, occupancy = _all_pairs(position)
        else:
            at = self._wrapped(position, box)
            group, order, starts, counts, members = self._cell_members(at, box, in_cell_order)
            width = members.shape[1]
            stencil, images = _stencil_in_words(self.cells, self.periodic, width)
            ids = _candidate_ids(members, starts, stencil, in_cell_order)
            hood_x = _hood_coordinates(at, box, members, stencil, images, self.periodic)
            # a particle's own cell is the middle of its 3^dim stencil; its rank in the
            # cell is its place in the sorted order after the cell's start
            rank = order if in_cell_order else _inverse(order)
            own = (3**dim // 2) * width + rank - starts[group]
            occupancy = jnp.max(counts)
        if hood_x[0].shape[1] % 32:  # whole 32-bit words of candidates (padding at infinity)
            pad = ((0, 0), (0, -hood_x[0].shape[1] % 32))
            hood_x = tuple(jnp.pad(x, pad, constant_values=jnp.inf) for x in hood_x)
        return at, ids, hood_x, group, own, occupancy

    def _wrapped(self, position: Positions, box: Box | None) -> Positions:
        """Periodic positions mapped into [0, L) per axis (free space: unchanged)."""
        if not self.periodic:
            return position
        return position - box * jnp.floor(position / box)

    def _keep(
        self,
        at: Positions,
        box: Box | None,
        hood_x: tuple[Float[Array, "g m"], ...],
        group: Int[Array, " n"],
        own: Int[Array, " n"],
        i: Int[Array, " b"],
    ) -> Bool[Array, "b m"]:
        """Whether each candidate of the particles `i` is within cutoff + skin and not i
        itself (`_candidates` gives what these arrays are; padding is at infinity).

        `hood_x` are the candidates' coordinates per cell (one array per axis), so each
        particle takes whole rows of them rather than gathering element by element.
        """
        r2 = None
        for axis, hx in enumerate(hood_x):
            d = at[i, axis][:, None] - hx[group[i]]
            if box is not None and not self.cells:  # all pairs: minimum images here
                d = d - box[axis] * jnp.round(d / box[axis])
            r2 = d * d if r2 is None else r2 + d * d
        column = jnp.arange(r2.shape[1], dtype=jnp.int32)
        return (r2 < self.radius * self.radius) & (column != own[i][:, None])


def _stencil(cells: tuple[int, ...], periodic: bool) -> tuple[np.ndarray, np.ndarray]:
    """For every cell, the flat ids of the 3^dim cells around it (itself included, in
    the middle), and for a periodic grid the periodic image each of them is taken in.

    Returns:
        stencil: [n_cells, 3^dim] cell ids. In free space a neighbour cell off the grid
            is the id n_cells: an extra table row that holds no particle.
        images: [n_cells, 3^dim, dim] integers in {-1, 0, 1}: a particle of that cell,
            wrapped into the box, is nearest to the cell at its position plus images
            times the box edges (zero in free space).
    """
    dim = len(cells)
    grid = np.stack(np.meshgrid(*[np.arange(c) for c in cells], indexing="ij"), axis=-1).reshape(
        -1, dim
    )
    strides = np.cumprod((1,) + cells[:-1])
    rows, shifts = [], []
    for offset in itertools.product((-1, 0, 1), repeat=dim):
        nb = grid + np.asarray(offset)
        if periodic:
            rows.append(np.mod(nb, cells) @ strides)
            shifts.append(np.floor_divide(nb, cells))
        else:
            outside = np.any((nb < 0) | (nb >= np.asarray(cells)), axis=1)
            rows.append(np.where(outside, len(grid), nb @ strides))
            shifts.append(np.zeros_like(nb))
    at = grid @ strides
    stencil = np.empty((len(grid), len(rows)), np.int32)
    stencil[at] = np.stack(rows, axis=1)
    images = np.empty((len(grid), len(rows), dim), np.int8)
    images[at] = np.stack(shifts, axis=1)
    return stencil, images


def _stencil_in_words(
    cells: tuple[int, ...], periodic: bool, width: int
) -> tuple[np.ndarray, np.ndarray]:
    """`_stencil`, with a column of the empty cell (id n_cells) added where its 3^dim
    columns of cell table rows `width` wide would not make whole 32-bit words."""
    stencil, images = _stencil(cells, periodic)
    n_cells, dim = stencil.shape[0], len(cells)
    if (stencil.shape[1] * width) % 32:
        stencil = np.concatenate([stencil, np.full((n_cells, 1), n_cells, stencil.dtype)], axis=1)
        images = np.concatenate([images, np.zeros((n_cells, 1, dim), images.dtype)], axis=1)
    return stencil, images


def _all_pairs(position: Positions) -> tuple:
    """`NeighbourList._candidates` without a cell list: one group holding every particle."""
    n, dim = position.shape

    def ids(group, column):
        return jnp.where(column < n, column, n)

    group = jnp.zeros(n, jnp.int32)
    occupancy = jnp.asarray(0, jnp.int32)
    hood_x = tuple(position[None, :, axis] for axis in range(dim))
    own = jnp.arange(n, dtype=jnp.int32)
    return position, ids, hood_x, group, own, occupancy


def _candidate_ids(
    members: Array, starts: Array, stencil: np.ndarray, in_cell_order: bool
) -> Callable[[Array, Array], Array]:
    """`ids(group, column)`: the ids of the candidates in columns [b, k] of cells
    `group` [b], from the table of cells `members` and each cell's `stencil`. Particles
    `in_cell_order`: a cell's members are a run of ids from its start, one lookup a slot
    (not two); else, when it fits `ID_TABLE_SIZE`, each cell's candidates' ids as a row
    of a table, one lookup a slot; else through the cell and its member."""
    n_cells, width = stencil.shape[0], members.shape[1]
    stencil_j = jnp.asarray(stencil)
    if in_cell_order:
        first = starts[stencil_j]

        def ids(group, column):
            return first[group[:, None], column // width] + column % width

        return ids
    if n_cells * stencil.shape[1] * width <= ID_TABLE_SIZE:
        table = _apart(
            lambda cells: members[stencil_j[cells]].reshape(cells.shape[0], -1),
            n_cells,
            stencil.shape[1] * width,
        )

        def ids(group, column):
            return table[group[:, None], column]

        return ids

    def ids(group, column):
        cell = stencil_j[group[:, None], column // width]
        return members[cell, column % width]

    return ids


def _hood_coordinates(
    at: Positions,
    box: Box | None,
    members: Array,
    stencil: np.ndarray,
    images: np.ndarray,
    periodic: bool,
) -> tuple[Array, ...]:
    """The coordinates of every cell's candidates, one [n_cells, m] array per axis
    (padding at infinity), from the table of cells `members` and the `stencil`; in a
    periodic box each the image nearest to the cell (`images` times the box edges).

    Each cell's members' coordinates are made first, in a loop of two halves of the
    cells, so that they are a table of their own: the stencil's gather then copies whole
    rows of it, where fused it gathered twice per entry (a build at 32,000 particles took
    48 ms against 54 on one core).
    """
    n, dim = at.shape
    n_cells, width = stencil.shape[0], members.shape[1]
    safe = jnp.minimum(members, n - 1)

    def coordinates(cells):
        return tuple(
            jnp.where(members[cells] < n, at[:, axis][safe[cells]], jnp.inf) for axis in range(dim)
        )

    tables = _apart(coordinates, n_cells + 1, width)
    hood_x = []
    for axis in range(dim):
        x = tables[axis][stencil]  # [n_cells, columns, width]
        if periodic:
            x = x + (jnp.asarray(images[:, :, axis], at.dtype) * box[axis])[:, :, None]
        hood_x.append(x.reshape(n_cells, -1))
    return tuple(hood_x)


def _occupancy(nl: NeighbourList, position: Positions, box: Box | None) -> int:
    """The largest number of particles in one cell of `nl`'s grid (0 without cells)."""
    if not nl.cells:
        return 0
    coords = nl._cell_coords(nl._wrapped(position, box), box)
    strides = np.cumprod((1,) + nl.cells[:-1]).astype(np.int32)
    cell = np.asarray(coords @ jnp.asarray(strides))
    return int(np.bincount(cell, minlength=math.prod(nl.cells)).max())


def _max_count(nl: NeighbourList, position: Positions, box: Box | None) -> int:
    """The largest number of neighbours within cutoff + skin of any particle."""
    return int(_neighbour_counts(nl, position, box))


@eqx.filter_jit
def _neighbour_counts(nl: NeighbourList, position: Positions, box: Box | None) -> Int[Array, ""]:
    n = position.shape[0]
    at, _, hood_x, group, own, _ = nl._candidates(position, box)

    def rows(i):
        return jnp.sum(nl._keep(at, box, hood_x, group, own, i), axis=1, dtype=jnp.int32)

    return jnp.max(by_row_blocks(rows, n, hood_x[0].shape[1]), initial=0)


def _inverse(order: Int[Array, " n"]) -> Int[Array, " n"]:
    """The inverse of a permutation: the place of each element in `order`."""
    n = order.shape[0]
    return (
        jnp.zeros(n, jnp.int32).at[order].set(jnp.arange(n, dtype=jnp.int32), unique_indices=True)
    )


def _padded(count: int, factor: float, limit: int) -> int:
    """count * factor rounded up, at least count + 2, at most `limit` (when limit >= 1)."""
    value = max(int(math.ceil(count * factor)), count + 2)
    return max(1, min(value, limit)) if limit >= 1 else max(value, 1)
