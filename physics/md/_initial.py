"""Starting states: fcc, bcc and simple cubic lattices at a density, random
non-overlapping packings, bead-spring chains, H5MD files; Maxwell-Boltzmann velocities."""

from __future__ import annotations

import dataclasses
import itertools
import math
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, PRNGKeyArray

from .._hdf5 import unstored
from ._space import Free, Periodic, Space
from ._topology import Topology
from ._types import Masses, Velocities
from ._units import Units, unit_factor
from .base import System

_FCC = ((0.0, 0.0, 0.0), (0.5, 0.5, 0.0), (0.5, 0.0, 0.5), (0.0, 0.5, 0.5))
# The basis of each lattice's unit cell, in fractions of the cell edge.
LATTICE_BASIS = {
    "sc": ((0.0, 0.0, 0.0),),
    "bcc": ((0.0, 0.0, 0.0), (0.5, 0.5, 0.5)),
    "fcc": ((0.0, 0.0, 0.0), (0.5, 0.5, 0.0), (0.5, 0.0, 0.5), (0.0, 0.5, 0.5)),
    # two-species (ionic) crystals: species 0 on the first half of the basis, 1 on the rest
    "rocksalt": _FCC + tuple((x + 0.5, y, z) for x, y, z in _FCC),
    "caesium_chloride": ((0.0, 0.0, 0.0), (0.5, 0.5, 0.5)),
    "zincblende": _FCC + tuple((x + 0.25, y + 0.25, z + 0.25) for x, y, z in _FCC),
}
_BASIS = LATTICE_BASIS
_TWO_SPECIES = ("rocksalt", "caesium_chloride", "zincblende")
LATTICES = tuple(_BASIS)


def lattice(kind: str, cells: int | tuple[int, int, int], density: float, *, dtype=float) -> System:
    """Particles on a cubic lattice filling a periodic box, at rest, unit masses, species 0
    (the ionic crystals: species 0 and 1).

    Arguments:
        kind: "fcc" (4 per cell), "bcc" (2) or "sc" (1); or an ionic crystal of two
            species, "rocksalt" (NaCl, 8 per cell), "caesium_chloride" (CsCl, 2) or
            "zincblende" (ZnS, 8).
        cells: unit cells per side (an int, or three ints).
        density: number density n / V (> 0).

    Returns:
        A `System` of n = basis * prod(cells) particles in a `Periodic` box.

    Raises:
        ValueError: unknown kind (with a suggestion), non-positive cells or density.

    Example:
        >>> system = lattice("fcc", 5, density=0.8442)       # 500 particles
    """
    if kind not in _BASIS:
        raise ValueError(
            f"unknown lattice {kind!r}; expected one of "
            f"{', '.join(LATTICES)}.{_did_you_mean(kind, LATTICES)}"
        )
    counts = (cells,) * 3 if isinstance(cells, (int, np.integer)) else tuple(int(c) for c in cells)
    if len(counts) != 3 or min(counts) < 1:
        raise ValueError(f"cells must be a positive integer or three of them, got {cells!r}")
    if not (isinstance(density, (int, float)) and density > 0 and math.isfinite(density)):
        raise ValueError(f"density must be a positive number, got {density!r}")
    basis = np.asarray(_BASIS[kind])
    a = (len(basis) / density) ** (1.0 / 3.0)
    origins = np.asarray(list(itertools.product(*[range(c) for c in counts])), dtype=float)
    position = ((origins[:, None, :] + basis[None, :, :]) * a).reshape(-1, 3)
    edges = np.asarray(counts, dtype=float) * a
    if kind in _TWO_SPECIES:  # (a basis site may sit on the far face of a cell)
        position = np.mod(position, edges)
    system = _at_rest(position, Periodic(jnp.asarray(edges, dtype)), dtype)
    if kind in _TWO_SPECIES:
        species = np.tile(np.repeat(np.arange(2, dtype=np.int32), len(basis) // 2), len(origins))
        system = dataclasses.replace(system, species=jnp.asarray(species))
    return system


def _at_rest(position: np.ndarray, space: Space, dtype, bonds=None) -> System:
    n = position.shape[0]
    return System(
        position=jnp.asarray(position, dtype),
        velocity=jnp.zeros(position.shape, dtype),
        mass=jnp.ones(n, dtype),
        species=jnp.zeros(n, jnp.int32),
        space=space,
        bonds=bonds,
    )


def _box_for(n: int, density: float, dim: int) -> float:
    if not (n >= 1 and density > 0 and math.isfinite(density)):
        raise ValueError(
            f"need n >= 1 particles and a positive density, got n={n}, density={density!r}"
        )
    return (n / density) ** (1.0 / dim)


def random_packing(
    key: PRNGKeyArray,
    n: int,
    density: float,
    *,
    min_distance: float = 0.8,
    dim: int = 3,
    tries: int = 64,
    dtype=float,
) -> System:
    """n particles placed one by one at random in a periodic cubic box, each at least
    `min_distance` from all earlier ones (random sequential addition).

    Arguments:
        key: the PRNG key of the placements.
        n: the number of particles (>= 1).
        density: number density n / V (> 0); the box edge is (n / density)^(1 / dim).
        min_distance: the smallest distance between two particles (minimum image).
        dim: the dimension of space.
        tries: random candidate spots per particle.
        dtype: the floating-point type of the arrays.

    Returns:
        A `System` of n particles at rest, unit masses, species 0, in a `Periodic` cube.

    Raises:
        ValueError: when some particle finds no free spot in `tries` attempts (the
            density is too high for `min_distance`; lower either); n < 1 or a density
            that is not a positive number.
    """
    edge = _box_for(n, density, dim)
    space = Periodic(jnp.full(dim, edge, dtype))
    position, ok = _sequential_addition(key, n, dim, edge, min_distance, tries, dtype, None, 0.0)
    if not bool(ok):
        fraction = (
            math.pi / 6 * density * min_distance**3
            if dim == 3
            else math.pi / 4 * density * min_distance**2
        )
        raise ValueError(
            f"random_packing could not place {n} particles {min_distance} apart at density "
            f"{density} "
            f"(covered fraction {fraction:.2f}); lower the density or min_distance, or start from "
            "a lattice"
        )
    return _at_rest(np.asarray(position), space, dtype)


def chains(
    key: PRNGKeyArray,
    n_chains: int,
    length: int,
    density: float,
    *,
    bond_length: float = 1.0,
    min_distance: float = 0.9,
    tries: int = 64,
    dtype=float,
) -> System:
    """Bead-spring chains grown as random walks with steps of `bond_length` in a periodic
    cubic box, every bead at least `min_distance` from all earlier beads; bonds join
    consecutive beads of a chain.

    Arguments:
        key: the PRNG key of the walks.
        n_chains: the number of chains (>= 1).
        length: beads per chain (>= 1).
        density: number density of the beads (> 0); the box edge is
            (n_chains length / density)^(1 / 3).
        bond_length: the distance between consecutive beads of a chain.
        min_distance: the smallest distance between two beads (minimum image).
        tries: random candidate spots per bead.
        dtype: the floating-point type of the arrays.

    Returns:
        A 3-D `System` of n_chains length beads at rest, unit masses, species 0, in a
        `Periodic` cube, chain c holding beads c length .. (c + 1) length - 1, with
        `bonds` [n_chains (length - 1), 2].

    Raises:
        ValueError: a bead found no free spot (lower the density); n_chains or length
            below 1, or a density that is not a positive number.
    """
    if length < 1 or n_chains < 1:
        raise ValueError(f"need n_chains >= 1 and length >= 1, got {n_chains}, {length}")
    n = n_chains * length
    edge = _box_for(n, density, 3)
    position, ok = _sequential_addition(
        key, n, 3, edge, min_distance, tries, dtype, length, bond_length
    )
    if not bool(ok):
        raise ValueError(
            f"chains: could not grow {n_chains} chains of {length} beads at density {density}; "
            "lower it"
        )
    first = np.arange(n).reshape(n_chains, length)
    bonds = np.stack([first[:, :-1].ravel(), first[:, 1:].ravel()], axis=1).astype(np.int32)
    return _at_rest(
        np.asarray(position), Periodic(jnp.full(3, edge, dtype)), dtype, jnp.asarray(bonds)
    )


def _sequential_addition(key, n, dim, edge, min_distance, tries, dtype, chain_length, bond_length):
    """Random sequential addition; with chain_length, bead i > chain start is placed at
    bond_length from bead i - 1 in a random direction."""
    box = jnp.full(dim, edge, dtype)
    ids = jnp.arange(n)

    def body(i, carry):
        position, key, ok = carry
        key, k1, k2 = jax.random.split(key, 3)
        anywhere = jax.random.uniform(k1, (tries, dim), dtype) * edge
        if chain_length is None:
            candidates = anywhere
        else:
            direction = jax.random.normal(k2, (tries, dim), dtype)
            direction = direction / jnp.linalg.norm(direction, axis=1, keepdims=True)
            step = position[jnp.maximum(i - 1, 0)] + bond_length * direction
            starts_chain = (i % chain_length) == 0
            candidates = jnp.where(starts_chain, anywhere, step)
        dr = candidates[:, None, :] - position[None, :, :]
        dr = dr - box * jnp.round(dr / box)
        r2 = jnp.sum(dr * dr, axis=-1)
        clear = jnp.all((r2 >= min_distance**2) | (ids[None, :] >= i), axis=1)
        pick = jnp.argmax(clear)
        return position.at[i].set(candidates[pick]), key, ok & jnp.any(clear)

    position = jnp.zeros((n, dim), dtype)
    position, _, ok = jax.lax.fori_loop(0, n, body, (position, key, jnp.asarray(True)))
    return position, ok


def maxwell_boltzmann(
    key: PRNGKeyArray,
    mass: Masses,
    temperature: float | Array,
    *,
    dim: int = 3,
    exact: bool = True,
) -> Velocities:
    """Velocities drawn from the Maxwell-Boltzmann distribution at `temperature` (k_B = 1),
    with zero total momentum; with `exact`, rescaled so the kinetic temperature
    2K / (dim (n - 1)) equals `temperature` exactly.

    Arguments:
        key: the PRNG key of the draws.
        mass: masses [n].
        temperature: the temperature (an energy, k_B = 1), >= 0.
        dim: the dimension of space.
        exact: rescale to the exact kinetic temperature (for n > 1).

    Returns:
        Velocities [n, dim] of the dtype of `mass`.

    Raises:
        ValueError: a negative temperature (concrete values only).
    """
    if not isinstance(temperature, jax.core.Tracer) and float(temperature) < 0:
        raise ValueError(f"temperature must be >= 0, got {float(temperature)!r}")
    n = mass.shape[0]
    dtype = mass.dtype
    kt = jnp.asarray(temperature, dtype)
    v = jax.random.normal(key, (n, dim), dtype) * jnp.sqrt(kt / mass)[:, None]
    v = v - jnp.sum(mass[:, None] * v, axis=0) / jnp.sum(mass)
    if exact and n > 1:
        dof = dim * (n - 1)
        current = jnp.sum(mass[:, None] * v * v) / dof
        v = v * jnp.where(current > 0, jnp.sqrt(kt / jnp.where(current > 0, current, 1.0)), 0.0)
    return v


def thermalize(system: System, key: PRNGKeyArray, temperature: float | Array) -> System:
    """`system` with Maxwell-Boltzmann velocities at `temperature` (zero total momentum).

    Arguments:
        system: the system whose positions and masses are kept.
        key: the PRNG key of the draws.
        temperature: the temperature (an energy, k_B = 1), >= 0; the velocities are
            rescaled to it exactly (`maxwell_boltzmann` with `exact`).

    Returns:
        The `System` with the new velocities [n, dim].

    Raises:
        ValueError: a negative temperature (concrete values only).
    """
    return system.at(
        system.position, maxwell_boltzmann(key, system.mass, temperature, dim=system.dim)
    )


QUANTITIES = {"position": "length", "velocity": "velocity", "mass": "mass"}
"""The elements of an H5MD particle group that `read_h5md` converts into a run's units."""


def read_h5md(
    path: str | Path,
    *,
    group: str = "all",
    frame: int = -1,
    dtype=float,
    max_bytes: int | None = None,
    units: Units | None = None,
) -> System:
    """A system from an H5MD file: the positions (and velocities, species, masses when
    present) of `frame` of `/particles/<group>` and its box.

    The bonds (`System.bonds`) are the pairs of the file's connectivity for the group
    (H5MD 1.1): every [b, 2] dataset in `/connectivity/<group>` (such as `bonds`), a
    dataset `/connectivity/<group>` itself, and the [b, 2] datasets directly in
    `/connectivity` whose `particles_group` attribute refers to `/particles/<group>`;
    particle ids are row numbers, or the values of `/particles/<group>/id` when it
    exists. Molecule ids in `/particles/<group>/molecule` (which simjax writes) come as a
    `Topology` without constraints, for `bonded_molecules` to check. With `max_bytes`,
    what a dataset declares is checked before it is read: a file may declare billions
    of values without storing any. With `units`, the positions, velocities, box edges and
    masses that carry an H5MD `unit` attribute are converted into them (`unit_factor`:
    Angstrom and fs to nm and ps, say); without, the attributes are not read.

    Arguments:
        path: the H5MD file.
        group: the particle group, `/particles/<group>`.
        frame: the frame of the time-dependent elements (-1: the last).
        dtype: the floating-point type of positions, velocities, masses and the box.
        max_bytes: the most bytes a dataset may declare (8 per value); None for no check.
        units: the run's `Units` to convert into; None to take the numbers as they are.

    Returns:
        A `System`: positions [n, dim], velocities (0 when absent), masses (1 when
        absent), species (0 when absent), a `Periodic` box when every side is periodic
        (else `Free`), the bonds (None when there are none) and the molecules' `Topology`
        (None without `/particles/<group>/molecule`).

    Raises:
        ValueError: missing file or group, or a layout that is not H5MD (naming the
            dataset that is missing or wrong: a frame beyond the file's, a box with
            fewer frames than the positions, bonds that are not pairs of particle ids
            in range, a dataset larger than `max_bytes`, a unit that `units` cannot take).
    """
    import h5py

    path = Path(path)
    if not path.is_file():
        raise ValueError(f"{path}: no such H5MD file")
    try:
        f = h5py.File(path, "r")
    except OSError as e:
        raise ValueError(f"{path}: not a readable HDF5 file ({str(e).splitlines()[0]})") from None

    with f:
        base = f"particles/{group}"
        if base not in f:
            have = ", ".join(f["particles"]) if "particles" in f else "no /particles group"
            raise ValueError(f"{path}: /{base} is missing (found: {have}); expected an H5MD file")
        reader = _H5mdGroup(path, f[base], base, frame, max_bytes, units)
        position, velocity, species, mass = _particles(reader)
        n = position.shape[0]
        space = _space(reader, position, dtype)
        ids = reader.element("id", False)
        if ids is not None and (ids.shape != (n,) or np.unique(ids).shape[0] != n):
            raise ValueError(
                f"{path}: /{base}/id must hold {n} distinct particle ids, got shape {ids.shape}"
            )
        bonds = _connectivity(f, path, group, n, ids, reader.read)
        molecule = reader.element("molecule", False)
        if molecule is not None and molecule.shape != (n,):
            raise ValueError(
                f"{path}: /{base}/molecule has shape {molecule.shape}; expected one molecule id "
                f"per particle ({n})"
            )
    topology = None
    if molecule is not None:
        none = jnp.zeros((0, 2), jnp.int32)
        topology = Topology(jnp.asarray(molecule, jnp.int32), none, none, jnp.zeros(0, dtype))
    return System(
        position=jnp.asarray(position, dtype),
        velocity=jnp.asarray(velocity if velocity is not None else np.zeros_like(position), dtype),
        mass=jnp.asarray(np.broadcast_to(mass, (n,)) if mass is not None else np.ones(n), dtype),
        species=jnp.asarray(species if species is not None else np.zeros(n), jnp.int32),
        space=space,
        bonds=None if bonds is None else jnp.asarray(bonds, jnp.int32),
        topology=topology,
    )


class _H5mdGroup:
    """One particle group of an open H5MD file (`g`, at `base`), whose datasets are read
    checked: against `max_bytes` and the frames they hold, for the numbers they hold,
    and converted into `units`."""

    def __init__(self, path: Path, g, base: str, frame: int, max_bytes, units):
        self.path, self.g, self.base, self.frame = path, g, base, frame
        self.max_bytes, self.units = max_bytes, units

    def read(self, node, where, frame=None):
        """The values of the dataset `node` (of one frame of it), checked first against
        `max_bytes` and the frames it holds."""
        path, max_bytes = self.path, self.max_bytes
        if frame is not None:
            if not node.shape:
                raise ValueError(
                    f"{path}: {where}/value is not a dataset of frames; expected an H5MD "
                    "time-dependent element"
                )
            frames = node.shape[0]
            if not -frames <= frame < frames:
                raise ValueError(
                    f"{path}: {where} has {frames} frames; frame {frame} is not one of them "
                    f"(0..{frames - 1}, or -1 for the last)"
                )
        shape = node.shape if frame is None else node.shape[1:]
        size = 8 * math.prod(shape)
        if max_bytes is not None and size > max_bytes:
            raise ValueError(
                f"{path}: {where} declares {math.prod(shape):,} values (shape "
                f"{shape}{' per frame' if frame is not None else ''}), "
                f"more than this machine's memory holds"
            )
        missing = unstored(node)
        if missing:
            raise ValueError(f"{path}: {node.name} {missing}")
        return np.asarray(node[()] if frame is None else node[frame])

    def element(self, name, required):
        """The values of the group's element `name` (of the frame, when it is
        time-dependent) in `units`, or None when it is missing and not `required`."""
        import h5py

        path, base, g = self.path, self.base, self.g
        if name not in g:
            if required:
                raise ValueError(
                    f"{path}: /{base}/{name} is missing; expected an H5MD particle group"
                )
            return None
        node = g[name]
        if isinstance(node, h5py.Group):
            if not isinstance(node.get("value"), h5py.Dataset) or node["value"].ndim < 1:
                raise ValueError(
                    f"{path}: /{base}/{name}/value is missing or not a dataset of frames; "
                    "expected an H5MD time-dependent element"
                )
            node = node["value"]
            value = self.read(node, f"/{base}/{name}", self.frame)
        else:
            value = self.read(node, f"/{base}/{name}")
        value = self.numbers(
            value, f"/{base}/{name}", integer=name in ("species", "id", "molecule")
        )
        return self.converted(node, value, QUANTITIES.get(name))

    def converted(self, node, value, quantity):
        """`value`, read from `node`, in `units` (unchanged without them, or for
        what has no unit attribute)."""
        units = self.units
        unit = node.attrs.get("unit") if units is not None and quantity is not None else None
        if unit is None:
            return value
        unit = unit.decode() if isinstance(unit, bytes) else str(unit)
        try:
            factor = unit_factor(units, quantity, unit)
        except ValueError as e:
            raise ValueError(f"{self.path}: {node.name} {e}") from None
        return value if factor == 1.0 else value * factor

    def numbers(self, value, where, integer=False):
        """`value`, refused unless it holds integers (`integer`) or finite numbers."""
        if value.dtype.kind not in ("iu" if integer else "iuf"):
            raise ValueError(
                f"{self.path}: {where} holds {value.dtype} values; expected "
                f"{'integers' if integer else 'numbers'}"
            )
        if not integer and not np.all(np.isfinite(value)):
            raise ValueError(f"{self.path}: {where} holds NaN or infinity; expected finite numbers")
        return value


def _particles(reader: _H5mdGroup) -> tuple:
    """(position, velocity, species, mass) of the group's frame, the last three None when
    missing, checked against each other: shapes that fit the positions, positive
    masses, a finite kinetic energy."""
    path, base = reader.path, reader.base
    position = reader.element("position", True)
    if position.ndim != 2 or position.shape[0] < 1 or position.shape[1] not in (1, 2, 3):
        raise ValueError(
            f"{path}: /{base}/position/value must be [time, n, dim] with dim 1, 2 or 3, got a "
            f"frame of shape {position.shape}"
        )
    n, dim = position.shape
    velocity = reader.element("velocity", False)
    species = reader.element("species", False)
    mass = reader.element("mass", False)
    shapes = {"velocity": [(n, dim)], "species": [(n,)], "mass": [(n,), ()]}
    for name, value in (("velocity", velocity), ("species", species), ("mass", mass)):
        if value is not None and value.shape not in shapes[name]:
            raise ValueError(
                f"{path}: /{base}/{name} has shape {value.shape}, which does not fit {n} "
                f"particles in {dim} dimensions"
            )
    if mass is not None and np.any(mass <= 0):
        raise ValueError(f"{path}: /{base}/mass holds masses <= 0; expected positive masses")
    if velocity is not None:
        with np.errstate(over="ignore", invalid="ignore"):
            energy = np.sum(
                (1.0 if mass is None else np.broadcast_to(mass, (n,))[:, None])
                * velocity.astype(float) ** 2
            )
        if not np.isfinite(energy):
            raise ValueError(f"{path}: /{base}/velocity is too large for a finite kinetic energy")
    return position, velocity, species, mass


def _space(reader: _H5mdGroup, position, dtype) -> Space:
    """The group's box: `Periodic` with its edges when every side is periodic, else
    `Free`; positions too far from it are refused."""
    path, base, g = reader.path, reader.base, reader.g
    dim = position.shape[1]
    if "box" not in g:
        raise ValueError(f"{path}: /{base}/box is missing; expected an H5MD particle group")
    box = g["box"]
    boundary = [
        b.decode() if isinstance(b, bytes) else str(b)
        for b in np.atleast_1d(box.attrs.get("boundary", ["none"] * dim))
    ]
    periodic = all(b == "periodic" for b in boundary)
    if not periodic:
        if np.any(np.abs(position) > 1e100):
            raise ValueError(f"{path}: /{base}/position holds coordinates beyond 1e100")
        return Free(ndim=dim)
    edges = _edges(reader, box, dim)
    # Unwrapped positions may lie some boxes away; a million boxes is not a start.
    if np.any(np.abs(position) > 1e6 * np.max(edges)):
        raise ValueError(
            f"{path}: /{base}/position lies more than a million box lengths from the box"
        )
    return Periodic(jnp.asarray(edges, dtype))


def _edges(reader: _H5mdGroup, box, dim: int):
    """The `dim` positive edge lengths of a periodic box (of the frame, when they are
    time-dependent), from one length, `dim` lengths or an orthorhombic box matrix."""
    import h5py

    path, base = reader.path, reader.base
    edges = box["edges"]
    if isinstance(edges, h5py.Group):
        edges = edges["value"]
        value = reader.read(edges, f"/{base}/box/edges", reader.frame)
    else:
        value = reader.read(edges, f"/{base}/box/edges")
    edges = reader.converted(edges, reader.numbers(value, f"/{base}/box/edges"), "length")
    if edges.ndim == 0:  # a cube
        edges = np.full(dim, edges)
    if edges.ndim == 2 and edges.shape == (
        dim,
        dim,
    ):  # a full box matrix: orthorhombic only
        if np.any(np.abs(edges - np.diag(np.diag(edges))) > 0):
            raise ValueError(f"{path}: only orthorhombic boxes are supported, got a triclinic box")
        edges = np.diag(edges)
    if edges.shape != (dim,) or np.any(edges <= 0):
        raise ValueError(
            f"{path}: /{base}/box/edges must be {dim} positive lengths, got "
            f"{np.round(edges, 6).tolist()}"
        )
    return edges


def _connectivity(f, path: Path, group: str, n: int, ids, read) -> np.ndarray | None:
    """The pairs [b, 2] (row numbers) of the connectivity of `/particles/<group>` in
    an open H5MD file, or None when it has none (see `read_h5md`, whose `read` reads
    each dataset)."""
    import h5py

    if "connectivity" not in f:
        return None
    top = f["connectivity"]
    found = []
    if group in top:
        node = top[group]
        found = (
            [node]
            if isinstance(node, h5py.Dataset)
            else [
                d
                for d in node.values()
                if isinstance(d, h5py.Dataset) and d.ndim == 2 and d.shape[1] == 2
            ]
        )
    target = f[f"particles/{group}"]
    for node in top.values():
        ref = (
            node.attrs.get("particles_group")
            if isinstance(node, h5py.Dataset) and node.ndim == 2 and node.shape[1] == 2
            else None
        )
        if isinstance(ref, h5py.Reference) and ref and f[ref] == target and node not in found:
            found.append(node)
    if not found:
        return None
    pairs = []
    for node in found:
        value = read(node, node.name)
        if value.dtype.kind not in "iu" or value.ndim != 2 or value.shape[1] != 2:
            raise ValueError(
                f"{path}: {node.name} must be [b, 2] integer particle ids (pairs), got "
                f"{value.dtype} of shape {value.shape}"
            )
        if ids is not None:
            order = np.argsort(ids)
            at = np.clip(np.searchsorted(ids, value, sorter=order), 0, n - 1)
            known = ids[order[at]] == value
            if not np.all(known):
                raise ValueError(
                    f"{path}: {node.name} names particle id {value[~known][0]}, which "
                    f"/particles/{group}/id does not hold"
                )
            value = order[at]
        elif value.size and (value.min() < 0 or value.max() >= n):
            bad = value[(value < 0) | (value >= n)][0]
            raise ValueError(
                f"{path}: {node.name} holds particle index {bad}; expected indices 0..{n - 1} of "
                f"the {n} particles of /particles/{group}"
            )
        pairs.append(value.astype(np.int64))
    return np.concatenate(pairs)


def _did_you_mean(word: str, choices) -> str:
    import difflib

    close = difflib.get_close_matches(str(word), [str(c) for c in choices], n=1, cutoff=0.6)
    return f" Perhaps you meant {close[0]!r}?" if close else ""
