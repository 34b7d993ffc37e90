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
"""

from __future__ import annotations

import dataclasses
import itertools
import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int

Positions = Float[Array, "n dim"]
"""Particle positions, one row per particle."""
Box = Float[Array, " dim"]
"""Edge lengths of a periodic orthorhombic box."""

CAPACITY_FACTOR = 1.25


class Neighbours(eqx.Module):
    """A Verlet neighbour list: the data (all arrays, traced).

    Attributes:
        index: neighbour ids [n, capacity], padded with n (an id that is not a particle).
        reference: positions [n, dim] at the last build.
        overflow: True once a build did not fit (sticky until the list is reallocated).
        max_neighbours: the largest neighbour count any build has seen.
        max_occupancy: the largest number of particles any build found in one cell.
        builds: how many times the list has been built.
    """

    index: Int[Array, "n capacity"]
    reference: Float[Array, "n dim"]
    overflow: Bool[Array, ""]
    max_neighbours: Int[Array, ""]
    max_occupancy: Int[Array, ""]
    builds: Int[Array, ""]


def minimum_image(dr: Float[Array, "*batch dim"], box: Box | None) -> Float[Array, "*batch dim"]:
    """Displacements `dr` mapped to their nearest periodic image (unchanged when box is None)."""
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
    ) -> NeighbourList:
        """A list sized for `position` with room to spare (outside jit: needs concrete values).

        Arguments:
            position: a representative configuration [n, dim].
            box: periodic box edges [dim], or None for free space.
            cutoff, skin: see the class.
            factor: capacities are the counts found times this factor.
            capacity: force this many neighbours per particle instead of counting.

        Raises:
            ValueError: a periodic box shorter than 2 (cutoff + skin) in some direction
                (a particle would meet its own image), or non-positive sizes.
        """
        pos = np.asarray(jax.lax.stop_gradient(position), dtype=float)
        n, dim = pos.shape
        radius = cutoff + skin
        periodic = box is not None
        if periodic:
            edges = np.asarray(jax.lax.stop_gradient(box), dtype=float)
            if edges.shape != (dim,):
                raise ValueError(f"box must have shape ({dim},) for {dim}-D positions, got {edges.shape}")
            if np.any(edges < 2 * cutoff):
                raise ValueError(
                    f"box edges {edges.tolist()} must be at least twice the cutoff ({2 * cutoff:g}): "
                    "use more particles or a shorter cutoff"
                )
            cells = tuple(int(c) for c in np.floor(edges / radius))
            lower = (0.0,) * dim
            size = tuple(float(e / c) for e, c in zip(edges, cells))
        else:
            lo, hi = pos.min(axis=0), pos.max(axis=0)
            extent = np.maximum(hi - lo, radius)
            cells = tuple(int(max(1, c)) for c in np.floor(extent / radius))
            lower = tuple(float(v) for v in lo)
            size = tuple(float(e / c) for e, c in zip(extent, cells))
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
        pos_j = jnp.asarray(pos)
        box_j = None if box is None else jnp.asarray(edges)
        cell_capacity = _padded(_occupancy(probe, pos_j, box_j), factor, n)
        probe = dataclasses.replace(probe, cell_capacity=cell_capacity)
        if capacity is None:
            capacity = _padded(_max_count(probe, pos_j, box_j), factor, n - 1)
        return dataclasses.replace(probe, capacity=max(capacity, 1))

    def grown(self, nbrs: Neighbours, n: int) -> NeighbourList:
        """A larger list after `nbrs` overflowed: room for the most it saw, times the factor."""
        capacity = max(_padded(int(nbrs.max_neighbours), CAPACITY_FACTOR, n - 1), min(self.capacity + 1, max(n - 1, 1)))
        cell_capacity = self.cell_capacity
        if int(nbrs.max_occupancy) > self.cell_capacity:
            cell_capacity = min(_padded(int(nbrs.max_occupancy), CAPACITY_FACTOR, n), n)
        return dataclasses.replace(self, capacity=capacity, cell_capacity=cell_capacity)

    # ------------------------------------------------------------------ build / update

    def build(self, position: Positions, box: Box | None) -> Neighbours:
        """A fresh list for `position`."""
        candidates, occupancy = self._candidates(position, box)
        index, count = _select(position, candidates, box, self.radius, self.capacity)
        max_count = jnp.max(count, initial=0)
        overflow = (max_count > self.capacity) | (occupancy > self.cell_capacity)
        return Neighbours(
            index=index,
            reference=position,
            overflow=overflow,
            max_neighbours=max_count.astype(jnp.int32),
            max_occupancy=occupancy.astype(jnp.int32),
            builds=jnp.ones((), jnp.int32),
        )

    def needs_rebuild(self, nbrs: Neighbours, position: Positions, box: Box | None) -> Bool[Array, ""]:
        """True when some particle moved more than skin / 2 since the last build."""
        dr = minimum_image(position - nbrs.reference, box)
        moved2 = jnp.max(jnp.sum(dr * dr, axis=-1))
        return moved2 > (0.5 * self.skin) ** 2

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
            )

        return jax.lax.cond(self.needs_rebuild(nbrs, position, box), rebuild, lambda _: nbrs, None)

    # ------------------------------------------------------------------ internals

    def _cell_coords(self, position: Positions, box: Box | None) -> Int[Array, "n dim"]:
        cells = jnp.asarray(self.cells, dtype=jnp.int32)
        if self.periodic:
            size = box / cells.astype(position.dtype)
            c = jnp.floor(position / size).astype(jnp.int32)
            return jnp.mod(c, cells)
        lower = jnp.asarray(self.lower, dtype=position.dtype)
        size = jnp.asarray(self.cell_size, dtype=position.dtype)
        c = jnp.floor((position - lower) / size).astype(jnp.int32)
        return jnp.clip(c, 0, cells - 1)

    def _candidates(self, position: Positions, box: Box | None) -> tuple[Int[Array, "n m"], Int[Array, ""]]:
        """Candidate ids per particle (padded with n) and the largest cell occupancy."""
        n = position.shape[0]
        if not self.cells:
            ids = jnp.broadcast_to(jnp.arange(n, dtype=jnp.int32), (n, n))
            return ids, jnp.asarray(0, jnp.int32)
        coords = self._cell_coords(position, box)
        strides = np.cumprod((1,) + self.cells[:-1]).astype(np.int32)
        cell = coords @ jnp.asarray(strides)
        n_cells = math.prod(self.cells)
        order = jnp.argsort(cell)
        sorted_cell = cell[order]
        counts = jnp.zeros(n_cells, jnp.int32).at[cell].add(1)
        starts = jnp.cumsum(counts) - counts
        slot = jnp.arange(n, dtype=jnp.int32) - starts[sorted_cell]
        table = jnp.full((n_cells + 1, self.cell_capacity), n, jnp.int32)
        table = table.at[sorted_cell, slot].set(order.astype(jnp.int32), mode="drop")
        stencil = jnp.asarray(_stencil(self.cells, self.periodic))
        # [n_cells, 3^dim] neighbour cells -> [n, 3^dim * cell_capacity] candidate ids
        candidates = table[stencil[cell]].reshape(n, -1)
        return candidates, jnp.max(counts)


def _stencil(cells: tuple[int, ...], periodic: bool) -> np.ndarray:
    """For every cell, the flat ids of the 3^dim cells around it (itself included).

    In free space a neighbour cell off the grid is the id n_cells: an extra table row
    that holds no particle.
    """
    dim = len(cells)
    grid = np.stack(np.meshgrid(*[np.arange(c) for c in cells], indexing="ij"), axis=-1).reshape(-1, dim)
    strides = np.cumprod((1,) + cells[:-1])
    rows = []
    for offset in itertools.product((-1, 0, 1), repeat=dim):
        nb = grid + np.asarray(offset)
        if periodic:
            rows.append(np.mod(nb, cells) @ strides)
        else:
            outside = np.any((nb < 0) | (nb >= np.asarray(cells)), axis=1)
            rows.append(np.where(outside, len(grid), nb @ strides))
    stencil = np.empty((len(grid), len(rows)), np.int32)
    stencil[grid @ strides] = np.stack(rows, axis=1)
    return stencil


def _select(
    position: Positions,
    candidates: Int[Array, "n m"],
    box: Box | None,
    radius: float,
    capacity: int,
) -> tuple[Int[Array, "n capacity"], Int[Array, " n"]]:
    """Keep, per row, the candidates within `radius` (not the particle itself), as a
    [n, capacity] array padded with n, sorted by decreasing id; also the full count per row.

    Compaction is a `top_k` on the candidate ids as float32 keys (exact below 2^24
    particles): on CPU it is several times faster than a scatter of the kept entries.
    """
    n = position.shape[0]
    safe = jnp.minimum(candidates, n - 1)
    r2 = jnp.zeros(candidates.shape, position.dtype)
    for axis in range(position.shape[1]):
        x = position[:, axis]
        d = x[:, None] - x[safe]
        if box is not None:
            d = d - box[axis] * jnp.floor(d / box[axis] + 0.5)
        r2 = r2 + d * d
    keep = (candidates < n) & (candidates != jnp.arange(n, dtype=candidates.dtype)[:, None]) & (r2 < radius * radius)
    count = jnp.sum(keep, axis=1, dtype=jnp.int32)
    if capacity >= candidates.shape[1]:
        keys = jnp.where(keep, candidates, -1)
        keys = jnp.concatenate([keys, jnp.full((n, capacity - candidates.shape[1]), -1, keys.dtype)], axis=1)
        ids = -jnp.sort(-keys, axis=1)
    else:
        keys = jnp.where(keep, candidates.astype(jnp.float32), jnp.float32(-1.0))
        ids, _ = jax.lax.top_k(keys, capacity)
    index = jnp.where(ids >= 0, ids, n).astype(jnp.int32)
    return index, count


def _occupancy(nl: NeighbourList, position: Positions, box: Box | None) -> int:
    """The largest number of particles in one cell of `nl`'s grid (0 without cells)."""
    if not nl.cells:
        return 0
    coords = nl._cell_coords(position, box)
    strides = np.cumprod((1,) + nl.cells[:-1]).astype(np.int32)
    cell = coords @ jnp.asarray(strides)
    return int(jnp.max(jnp.zeros(math.prod(nl.cells), jnp.int32).at[cell].add(1)))


def _max_count(nl: NeighbourList, position: Positions, box: Box | None) -> int:
    """The largest number of neighbours within cutoff + skin of any particle."""
    candidates, _ = nl._candidates(position, box)
    _, count = _select(position, candidates, box, nl.radius, 1)
    return int(jnp.max(count, initial=0))


def _padded(count: int, factor: float, limit: int) -> int:
    """count * factor rounded up, at least count + 2, at most `limit` (when limit >= 1)."""
    value = max(int(math.ceil(count * factor)), count + 2)
    return max(1, min(value, limit)) if limit >= 1 else max(value, 1)
