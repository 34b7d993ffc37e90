"""Particles split over devices by space: each device owns the particles of one slab of
the periodic box (along its first axis) and holds copies of the particles within the
list's radius of its two faces (ghosts), as LAMMPS and HOOMD decompose a box.

A device's state is its own particles in `capacity` slots (padded with the id n), their
rows of the neighbour list over its own particles and its ghosts, and the lists of its
particles that its neighbours hold as ghosts. A step sends the ghosts'
new positions to the neighbours (two `ppermute`s of `ghosts` rows each way) and nothing
else; when some particle has moved more than skin / 2 since the last build (every device
agrees, through a `psum`), the particles that left a slab move to the device next to it
(at most `migrants` each way), the ghosts are chosen again and the list is built anew.
Nothing the size of the system is gathered or all-reduced inside a step.

The runs of any number of devices are the same bits: a particle's neighbours are listed
in the order of their ids, so its force is the same sum of the same terms wherever its
neighbours live (summed by one program for blocks of rows of one shape, `_slab_run`), and
the own particles of a device are kept sorted by id. Chunks of
steps start from the whole state in the order of the ids (`SlabRun`, in `_slab_run`), so
a run resumed from a chunk's end is the run that went on. A chunk whose slots did not suffice (more
particles in a slab, near a face, leaving it or around one particle than it has room
for) says so (`overflow`); the run then grows its capacities and computes the chunk
again, as the replicated runs do with their neighbour lists.

A slab must be at least as wide as the list's radius (the cutoff and the skin), twice
that on two devices (whose two neighbours are one device); a box too small for the
devices asked for is refused in one line (`slab_devices`).
"""

from __future__ import annotations

import dataclasses
import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Float, Int, PyTree

from ._neighbour_slots import _compact, _packed, by_row_blocks
from ._slab_mesh import SlabMesh
from ._spectral_sharded import SLAB_AXIS  # (the mesh axis of every split over devices)


def slab_devices(box_edge: float, radius: float, devices: int) -> str | None:
    """What keeps a box of edge `box_edge` (its first axis) from being split into
    `devices` slabs for a list of `radius` (cutoff + skin): None when it can be."""

    def fits(d: int) -> bool:
        return d == 1 or box_edge / d >= (2 * radius if d == 2 else radius)

    if devices < 1:
        return f"devices must be >= 1, got {devices}"
    if fits(devices):
        return None
    need = "twice the list's radius" if devices == 2 else "the list's radius"
    largest = max(d for d in range(1, devices + 1) if fits(d))
    return (
        f"a box {box_edge:g} long split into {devices} slabs gives slabs "
        f"{box_edge / devices:.4g} wide, narrower than {need} ({radius:g}: cutoff and skin); "
        f"at most {largest} fit"
    )


def cannot_split(model, system, devices: int, skin: float) -> str | None:
    """Why a run of `model` from `system` cannot be split into `devices` slabs with a
    list of skin `skin` (one line), or None when it can: a model that gives no forces of
    given rows (not a pair model) and has no mesh part (`mesh_part`), free space, bonds or
    molecules, slabs too narrow (`slab_devices`), or a mesh that does not split with them."""
    if system.space.box is None:
        return "a run split by slabs needs a periodic box"
    if system.bonds is not None or system.topology is not None:
        return "a system with bonds or molecules cannot be split by slabs"
    if not model.rows_apart:
        try:
            parts = mesh_slabs(model, system, devices, skin)
        except ValueError as e:
            return str(e)
        if parts is None:
            return f"{type(model).__name__} cannot be split by slabs (not a pair model)"
    edge = float(np.asarray(system.space.box)[0])
    return slab_devices(edge, model.cutoff + skin, devices)


def mesh_slabs(model, system, devices: int, skin: float):
    """The mesh part of `model` (`mesh_part`, for `devices` slabs) and the mesh's slabs
    (`SlabMesh`), or None for a model without one.

    Raises:
        ValueError: a mesh part that cannot be split so, in one line.
    """
    part = model.mesh_part(system, devices)
    if part is None:
        return None
    edge = float(np.asarray(system.space.box)[0])
    return part, SlabMesh.around(part.mesh, devices, edge, skin, part.order)


class SlabState(eqx.Module):
    """One device's particles (inside `jax.shard_map`; outside, every array has a leading
    axis of devices). Slots past a device's particles hold the id n. Positions are wrapped
    into the box; `image` counts the box edges each particle has crossed."""

    ids: Int[Array, " capacity"]
    position: Float[Array, "capacity dim"]
    velocity: Float[Array, "capacity dim"]
    force: Float[Array, "capacity dim"]
    image: Int[Array, "capacity dim"]
    reference: Float[Array, "capacity dim"]
    send: Int[Array, "2 ghosts"]
    ghost_ids: Int[Array, " ghosts2"]
    ghost_position: Float[Array, "ghosts2 dim"]
    index: Int[Array, "capacity neighbours"]
    overflow: Bool[Array, " 5"]
    builds: Int[Array, ""]


ROOMS = ("capacity", "ghosts", "migrants", "neighbours", "cell_capacity")
"""The rooms of a device, in the order of `SlabState.overflow`'s flags."""


def _flag(s: SlabState, room: str, flag: Array) -> Array:
    """`s.overflow` with the flag of `room` raised where `flag` is true."""
    i = ROOMS.index(room)
    return s.overflow.at[i].set(s.overflow[i] | flag)


def _by_ids(table: Array, key: Array, size: int, n: int) -> Array:
    """Each row of `table` (local indices < `size` + 1) sorted by `key` (their ids, at most
    n), as one sort of a single integer that holds both where one fits (8x faster on CPU
    than a sort of the two, which took 330 of a build's 420 ms at 32,000 particles)."""
    shift = (size + 1).bit_length()
    width = shift + (n + 1).bit_length()
    if width <= 31 or (width <= 63 and jax.config.jax_enable_x64):
        kind = jnp.int32 if width <= 31 else jnp.int64
        packed = jnp.left_shift(key.astype(kind), shift) | table.astype(kind)
        return (jnp.sort(packed, axis=1) & ((1 << shift) - 1)).astype(jnp.int32)
    return jax.lax.sort((key, table), dimension=1, num_keys=1)[1]


def _wrap(d: Array, edge: Array) -> Array:
    """Differences along an axis of length `edge` brought to [-edge / 2, edge / 2]."""
    return d - edge * jnp.round(d / edge)


def _padded(a: Array, value) -> Array:
    """`a` with one more row of `value` (the row that slot `len(a)` reads)."""
    return jnp.concatenate([a, jnp.full((1,) + a.shape[1:], value, a.dtype)])


@dataclasses.dataclass(frozen=True)
class Slabs:
    """The split of one run: how many devices and the room each has (static sizes).

    Attributes:
        devices: slabs of the box's first axis, one per device.
        capacity: own particles a device has room for.
        ghosts: particles near one face that a device has room to send (and receive).
        migrants: particles a device has room to send across one face at a build.
        neighbours: the width of a particle's row of the list.
        cutoff: the model's interaction range.
        skin: the list's extra shell.
        cells: the cells of the grid a build sorts the particles into, per axis (the
            first over the slab and its ghosts' layers).
        cell_capacity: particles a cell has room for.
    """

    devices: int
    capacity: int
    ghosts: int
    migrants: int
    neighbours: int
    cutoff: float
    skin: float
    cells: tuple[int, ...] = (1, 1, 1)
    cell_capacity: int = 64

    @property
    def radius(self) -> float:
        return self.cutoff + self.skin

    def grown(self, rooms) -> Slabs:
        """The rooms named in `rooms` (of `ROOMS`) larger, the others as they are (so that
        a split that overflowed keeps the rows of one that did not): the slots of own
        particles by a tenth (a slab's count drifts by a few of its square roots), the
        others by half."""
        factor = {"capacity": 1.1}
        return dataclasses.replace(
            self, **{r: int(math.ceil(getattr(self, r) * factor.get(r, 1.5))) + 1 for r in rooms}
        )

    def bytes_per_device(self, dim: int, itemsize: int = 8) -> int:
        """The bytes of one device's state (`SlabState`)."""
        own = self.capacity * (4 + 4 * dim * itemsize + 4 * self.neighbours)
        return own + 2 * self.ghosts * (4 + 4 + dim * itemsize)

    # ------------------------------------------------------------------ communication

    def _shift(self, tree: PyTree, step: int) -> PyTree:
        """`tree` sent to the device `step` slabs up (each device receives the tree of
        the device `step` slabs below)."""
        d = self.devices
        perm = [(i, (i + step) % d) for i in range(d)]
        return jax.tree.map(lambda x: jax.lax.ppermute(x, SLAB_AXIS, perm), tree)

    def _any(self, flag: Array) -> Array:
        return jax.lax.psum(flag.astype(jnp.int32), SLAB_AXIS) > 0

    def _offsets(self, x: Array, box: Array) -> tuple[Array, Array]:
        """Positions along the first axis relative to the centre of this device's slab
        (in [-edge / 2, edge / 2]) and the slab's width."""
        width = box[0] / self.devices
        lower = jax.lax.axis_index(SLAB_AXIS).astype(x.dtype) * width
        return _wrap(x - lower - 0.5 * width, box[0]), width

    # ------------------------------------------------------------------ a build

    def _migrate(self, s: SlabState, n: int, box: Array) -> SlabState:
        """The particles that left this device's slab sent to the device they entered,
        the arrivals put in free slots, and the own particles sorted by id."""
        if self.devices == 1:
            return s
        c, m = self.capacity, self.migrants
        valid = s.ids < n
        offset, width = self._offsets(s.position[:, 0], box)
        down, up = valid & (offset < -0.5 * width), valid & (offset >= 0.5 * width)
        fields = (s.ids, s.position, s.velocity, s.force, s.image)
        fills = (n, 0.0, 0.0, 0.0, 0)

        def pack(mask):
            slots = jnp.nonzero(mask, size=m, fill_value=c)[0]
            return tuple(_padded(a, v)[slots] for a, v in zip(fields, fills, strict=True))

        migrants = (jnp.sum(down) > m) | (jnp.sum(up) > m)
        from_above, from_below = self._shift(pack(down), -1), self._shift(pack(up), 1)
        arrivals = tuple(
            jnp.concatenate([a, b]) for a, b in zip(from_below, from_above, strict=True)
        )
        ids = jnp.where(down | up, n, s.ids)
        free = jnp.nonzero(ids >= n, size=2 * m, fill_value=c)[0]
        coming = arrivals[0] < n
        rank = jnp.cumsum(coming) - 1
        crowded = jnp.sum(coming) > jnp.sum(ids >= n)
        target = jnp.where(coming, free[jnp.minimum(rank, 2 * m - 1)], c)
        placed = [
            a.at[target].set(b, mode="drop")
            for a, b in zip((ids, *fields[1:]), arrivals, strict=True)
        ]
        order = jnp.argsort(placed[0], stable=True)
        ids, position, velocity, force, image = (a[order] for a in placed)
        s = eqx.tree_at(
            lambda t: (t.ids, t.position, t.velocity, t.force, t.image, t.overflow),
            s,
            (ids, position, velocity, force, image, _flag(s, "migrants", migrants)),
        )
        return eqx.tree_at(lambda t: t.overflow, s, _flag(s, "capacity", crowded))

    def _choose_ghosts(self, s: SlabState, n: int, box: Array) -> SlabState:
        """The particles within the radius of each face sent to the device beyond it
        (their ids and positions); the slots of those sent kept for the steps after."""
        c, g = self.capacity, self.ghosts
        valid = s.ids < n
        offset, width = self._offsets(s.position[:, 0], box)
        low = valid & (offset < -0.5 * width + self.radius)
        high = valid & (offset >= 0.5 * width - self.radius)
        send = jnp.stack(
            [
                jnp.nonzero(low, size=g, fill_value=c)[0],
                jnp.nonzero(high, size=g, fill_value=c)[0],
            ]
        )
        overflow = (jnp.sum(low) > g) | (jnp.sum(high) > g)
        ids, position = self._ghosts(s.ids, s.position, send, n)
        return eqx.tree_at(
            lambda t: (t.send, t.ghost_ids, t.ghost_position, t.overflow),
            s,
            (send, ids, position, _flag(s, "ghosts", overflow)),
        )

    def _ghosts(self, ids: Array, position: Array, send: Array, n: int):
        """The ghosts' ids and positions, those from the device below first: what this
        device's neighbours send of the slots `send` (low face, high face)."""
        ids, position = _padded(ids, n), _padded(position, 0.0)
        low = (ids[send[0]], position[send[0]])
        high = (ids[send[1]], position[send[1]])
        from_below, from_above = self._shift(high, 1), self._shift(low, -1)
        return (
            jnp.concatenate([from_below[0], from_above[0]]),
            jnp.concatenate([from_below[1], from_above[1]]),
        )

    def _local_first_axis(self, s: SlabState, box: Array) -> Array:
        """The first coordinate of the own particles and ghosts measured from the slab's
        lower face without wrapping (ghosts from below negative, from above past the
        width), so that no pair is found twice across the periodic boundary."""
        offset, width = self._offsets(s.position[:, 0], box)
        g = self.ghosts
        lower = jax.lax.axis_index(SLAB_AXIS).astype(box.dtype) * width
        below = _wrap(s.ghost_position[:g, 0] - lower, box[0])
        above = width + _wrap(s.ghost_position[g:, 0] - lower - width, box[0])
        return jnp.concatenate([offset + 0.5 * width, below, above])

    def _cell_table(self, first: Array, local: Array, valid: Array, box: Array):
        """The cell of every local particle and each cell's members ([cells + 1, room],
        padded with the number of local particles; the last row an empty cell, the
        neighbour of the cells at the ends of the first axis). The first axis runs over
        the slab and its ghosts' layers, unwrapped; the others over the periodic box."""
        size = local.shape[0]
        margin = self.radius + self.skin
        width = box[0] / self.devices
        lengths = [width + 2 * margin, *(box[a] for a in range(1, local.shape[1]))]
        coords = [first + margin, *(local[:, a] for a in range(1, local.shape[1]))]
        cell = jnp.zeros(size, jnp.int32)
        stride = 1
        for axis, count in enumerate(self.cells):
            c = jnp.floor(coords[axis] / (lengths[axis] / count)).astype(jnp.int32)
            c = jnp.clip(c, 0, count - 1) if axis == 0 else jnp.mod(c, count)
            cell = cell + stride * c
            stride *= count
        total = stride
        key = jnp.where(valid, cell, total)
        order = jnp.argsort(key, stable=True).astype(jnp.int32)
        starts = jnp.searchsorted(key[order], jnp.arange(total + 1, dtype=jnp.int32))
        starts = starts.astype(jnp.int32)
        counts = starts[1:] - starts[:-1]
        slot = jnp.arange(self.cell_capacity, dtype=jnp.int32)
        members = jnp.where(
            slot < counts[:, None],
            order[jnp.minimum(starts[:-1, None] + slot, size - 1)],
            size,
        )
        members = jnp.concatenate([members, jnp.full((1, self.cell_capacity), size, jnp.int32)])
        return cell, members, jnp.max(counts) > self.cell_capacity

    def _stencil(self, cell: Array) -> Array:
        """The cells around each of `cell` (ids [rows] -> [rows, stencil]): +-1 along
        every axis of three cells or more, the empty cell past the ends of the first."""
        total = math.prod(self.cells)
        coords, rest = [], cell
        for count in self.cells:
            coords.append(rest % count)
            rest = rest // count
        out = jnp.zeros(cell.shape + (1,), jnp.int32)
        outside = jnp.zeros(cell.shape + (1,), bool)
        stride = 1
        for axis, count in enumerate(self.cells):
            near = (-1, 0, 1) if (count >= 3 or axis == 0) and count > 1 else (0,)
            steps = jnp.asarray(near, jnp.int32)
            c = coords[axis][:, None] + steps[None, :]
            if axis == 0:
                off = (c < 0) | (c >= count)
                c = jnp.clip(c, 0, count - 1)
            else:
                off = jnp.zeros(c.shape, bool)
                c = jnp.mod(c, count)
            out = (out[:, :, None] + stride * c[:, None, :]).reshape(cell.shape[0], -1)
            outside = (outside[:, :, None] | off[:, None, :]).reshape(cell.shape[0], -1)
            stride *= count
        return jnp.where(outside, total, out)

    def _build_list(self, s: SlabState, n: int, box: Array) -> SlabState:
        """Each own particle's row: the own particles and ghosts within the radius, in
        the order of their ids, padded with the number of local particles. A particle's
        candidates are the members of the cells around its own, gathered once per cell;
        the test, its packed mask and the compaction are the replicated list's
        (`_neighbour_slots`)."""
        c, k = self.capacity, self.neighbours
        local = jnp.concatenate([s.position, s.ghost_position])
        ids = jnp.concatenate([s.ids, s.ghost_ids])
        size, dim = local.shape
        first = self._local_first_axis(s, box)
        valid = ids < n
        cell, members, crowded = self._cell_table(first, local, valid, box)
        cells = jnp.arange(members.shape[0] - 1, dtype=jnp.int32)
        hood = members[self._stencil(cells)].reshape(cells.shape[0], -1)  # [cells, m]
        m = hood.shape[1]
        hood_x = [_padded(first, jnp.inf)[hood]]
        hood_x += [_padded(local[:, a], 0.0)[hood] for a in range(1, dim)]
        r2max = jnp.asarray(self.radius**2, local.dtype)

        def test(i):
            group = cell[i]
            r2 = jnp.square(first[i][:, None] - hood_x[0][group])
            for axis in range(1, dim):
                d = local[i, axis][:, None] - hood_x[axis][group]
                r2 = r2 + jnp.square(_wrap(d, box[axis]))
            keep = (r2 < r2max) & (hood[group] != i[:, None]) & valid[i][:, None]
            return _packed(keep)

        words = by_row_blocks(test, c, m)
        table, count = _compact(
            words, m, lambda rows, column: hood[cell[rows][:, None], column], k, size
        )
        table = _by_ids(table, _padded(ids, n)[table], size, n)
        s = eqx.tree_at(lambda t: t.overflow, s, _flag(s, "cell_capacity", crowded))
        return eqx.tree_at(
            lambda t: (t.index, t.reference, t.overflow, t.builds),
            s,
            (table, s.position, _flag(s, "neighbours", jnp.max(count) > k), s.builds + 1),
        )

    def build(self, s: SlabState, n: int, box: Array) -> SlabState:
        """Migration, ghosts and the list, anew."""
        s = self._migrate(s, n, box)
        s = self._choose_ghosts(s, n, box)
        return self._build_list(s, n, box)

    def refresh(self, s: SlabState, n: int) -> SlabState:
        """The ghosts' positions, sent again by their owners (same slots as at the build)."""
        _, position = self._ghosts(s.ids, s.position, s.send, n)
        return eqx.tree_at(lambda t: t.ghost_position, s, position)

    def needs_build(self, s: SlabState, n: int, box: Array) -> Array:
        """Whether some particle on any device moved more than skin / 2 since the build."""
        moved2 = 0.0
        for axis in range(s.position.shape[1]):
            d = s.position[:, axis] - s.reference[:, axis]
            moved2 = moved2 + jnp.square(_wrap(d, box[axis]))
        return self._any(jnp.any((s.ids < n) & (moved2 > (0.5 * self.skin) ** 2)))


def _sized(
    position: np.ndarray, edges: np.ndarray, cutoff: float, skin: float, devices: int, factor
) -> Slabs:
    """The room of each device for the configuration `position` (wrapped into the box):
    `factor` times the most particles counted near a face, in a cell and around one
    particle (a list's count), and for migrants those within skin / 2 of a face; a slab's
    own particles with room for five square roots of their count and 2% more."""
    from ._neighbours import NeighbourList

    radius = cutoff + skin
    width = edges[0] / devices
    x = position[:, 0]
    owner = np.minimum((x // width).astype(int), devices - 1)
    offset = x - (owner + 0.5) * width
    per_slab = np.bincount(owner, minlength=devices)
    low = np.bincount(owner[offset < -0.5 * width + radius], minlength=devices)
    high = np.bincount(owner[offset >= 0.5 * width - radius], minlength=devices)
    near = np.abs(np.abs(offset) - 0.5 * width) < 0.5 * skin
    crossing = np.bincount(owner[near], minlength=devices)
    neighbours = NeighbourList.allocate(position, edges, cutoff, skin).capacity
    up = lambda k: int(math.ceil(factor * k)) + 8  # noqa: E731
    lengths = [width + 2 * (radius + skin), *edges[1:]]
    cells = [max(1, int(length // radius)) for length in lengths]
    cells = [cells[0]] + [c if c >= 3 else 1 for c in cells[1:]]
    # the most particles in a cell of that size, counted over a grid of the whole box
    grid = [max(1, int(round(edges[a] / (lengths[a] / cells[a])))) for a in range(len(edges))]
    at = np.minimum((position / (edges / np.asarray(grid))).astype(int), np.asarray(grid) - 1)
    crowd = np.bincount(np.ravel_multi_index(at.T, grid)).max()
    n = position.shape[0]
    slab = per_slab.max()
    return Slabs(
        devices=devices,
        # (a slab's count drifts as the system moves: room for five of its square roots
        # and 2% more)
        capacity=min(n, int(math.ceil(slab * 1.02 + 5 * math.sqrt(slab))) + 8),
        ghosts=up(max(low.max(), high.max())),
        migrants=up(crossing.max()),
        neighbours=min(up(neighbours), position.shape[0] + 2 * up(max(low.max(), high.max()))),
        cutoff=float(cutoff),
        skin=float(skin),
        cells=tuple(cells),
        cell_capacity=up(crowd),
    )
