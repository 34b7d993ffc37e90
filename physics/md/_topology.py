"""Molecules: which particles form one, their fixed distances, and a builder of boxes of
rigid molecules (the three-site water models SPC/E and TIP3P built in).

Pairs within one molecule do not interact through pair potentials (Lennard-Jones, the
real-space Coulomb term); a model whose long-range part sums over every pair (Ewald,
PME) subtracts those pairs' share (`LennardJonesCoulomb`). Rigid molecules keep their
shape through constraints that the integrators hold (SETTLE, SHAKE/RATTLE in `solvers`).
"""

from __future__ import annotations

import dataclasses
import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int, PRNGKeyArray

from ._space import Periodic


class Topology(eqx.Module):
    """The molecules of a system.

    Attributes:
        molecule: [n] the molecule of each particle (a particle alone is a molecule).
        pairs: [e, 2] every pair of particles within one molecule (i < j): the pairs that
            pair potentials leave out.
        constraints: [c, 2] pairs held at fixed distances.
        lengths: [c] those distances.
    """

    molecule: Int[Array, " n"]
    pairs: Int[Array, "e 2"]
    constraints: Int[Array, "c 2"]
    lengths: Float[Array, " c"]

    def astype(self, dtype) -> Topology:
        return Topology(self.molecule, self.pairs, self.constraints, self.lengths.astype(dtype))


@dataclasses.dataclass(frozen=True)
class Molecule:
    """A rigid molecule: its sites (species, mass, position in the molecule's frame) and
    which distances between them are fixed.

    Attributes:
        name: what it is called.
        species: species of each site.
        mass: mass of each site.
        sites: [k, 3] positions of the sites.
        constraints: (i, j) pairs of sites held at their distance in `sites`.
    """

    name: str
    species: tuple[int, ...]
    mass: tuple[float, ...]
    sites: tuple[tuple[float, float, float], ...]
    constraints: tuple[tuple[int, int], ...]

    @property
    def total_mass(self) -> float:
        return float(sum(self.mass))

    def centred(self) -> np.ndarray:
        """The sites [k, 3] with the centre of mass at the origin."""
        sites = np.asarray(self.sites, dtype=float)
        mass = np.asarray(self.mass, dtype=float)
        return sites - mass @ sites / mass.sum()

    def lengths(self) -> np.ndarray:
        sites = np.asarray(self.sites, dtype=float)
        return np.array([np.linalg.norm(sites[i] - sites[j]) for i, j in self.constraints])


OXYGEN_MASS = 15.9994
HYDROGEN_MASS = 1.008


@dataclasses.dataclass(frozen=True)
class WaterModel:
    """A rigid three-site water model (real units: nm, kJ/mol, e): an O-H distance, the
    H-O-H angle, the charges and the Lennard-Jones parameters of the oxygens (the
    hydrogens have none)."""

    name: str
    oh: float
    angle: float  # degrees
    oxygen_charge: float
    epsilon: float
    sigma: float
    reference: str

    def molecule(self) -> Molecule:
        half = math.radians(self.angle) / 2.0
        sites = (
            (0.0, 0.0, 0.0),
            (self.oh * math.sin(half), self.oh * math.cos(half), 0.0),
            (-self.oh * math.sin(half), self.oh * math.cos(half), 0.0),
        )
        return Molecule(
            self.name,
            (0, 1, 1),
            (OXYGEN_MASS, HYDROGEN_MASS, HYDROGEN_MASS),
            sites,
            ((0, 1), (0, 2), (1, 2)),
        )

    def params(self) -> dict[str, np.ndarray]:
        """The `lj_coulomb` parameters of the model (species 0: O, 1: H): epsilon only
        between oxygens, one sigma, the charges."""
        return {
            "epsilon": np.array([[self.epsilon, 0.0], [0.0, 0.0]]),
            "sigma": np.asarray(self.sigma),
            "charges": np.array([self.oxygen_charge, -0.5 * self.oxygen_charge]),
        }

    def waters(
        self, position, species, topology: Topology, *, tolerance: float = 1e-3
    ) -> tuple[Topology, np.ndarray]:
        """`topology` (of molecules read from a file) as waters of this model: every
        molecule three sites, an oxygen (species 0) and two hydrogens (species 1), held
        at the model's O-H distance and H-H distance (from its angle).

        Returns:
            (the topology with the model's constraint lengths, the masses [n] of O and H).

        Raises:
            ValueError: the first molecule that is not such a water, or whose distances
                differ from the model's by more than `tolerance` (relative).
        """
        species = np.asarray(species)
        molecule = np.asarray(topology.molecule)
        constraints = np.asarray(topology.constraints)
        sizes = np.bincount(molecule)
        hh = 2.0 * self.oh * math.sin(math.radians(self.angle) / 2.0)
        for m in range(sizes.shape[0]):
            ids = np.flatnonzero(molecule == m)
            if ids.shape[0] != 3 or sorted(species[ids].tolist()) != [0, 1, 1]:
                raise ValueError(
                    f"molecule {m} (particles "
                    f"{', '.join(map(str, ids[:6].tolist()))}{', ...' if ids.shape[0] > 6 else ''}"
                    ", species "
                    f"{species[ids[:6]].tolist()}) is not a {self.name} water: expected three "
                    "sites, an oxygen of species 0 and two hydrogens of species 1"
                )
        position = np.asarray(position, dtype=float)
        length = np.linalg.norm(position[constraints[:, 0]] - position[constraints[:, 1]], axis=-1)
        hydrogens = (species[constraints[:, 0]] == 1) & (species[constraints[:, 1]] == 1)
        target = np.where(hydrogens, hh, self.oh)
        off = np.abs(length / target - 1.0) > tolerance
        if np.any(off):
            k = int(np.argmax(off))
            i, j = constraints[k]
            what = "H-H" if hydrogens[k] else "O-H"
            raise ValueError(
                f"molecule {molecule[i]} is not a {self.name} water: its {what} distance "
                f"(particles {i}, {j}) is {length[k]:.6g}, "
                f"the model's is {target[k]:.6g} (O-H {self.oh:g}, H-O-H {self.angle:g} degrees; "
                f"tolerance {tolerance:g} relative)"
            )
        mass = np.where(species == 0, OXYGEN_MASS, HYDROGEN_MASS)
        return Topology(
            topology.molecule, topology.pairs, topology.constraints, jnp.asarray(target)
        ), mass


WATER_MODELS = {
    # Berendsen, Grigera & Straatsma, J. Phys. Chem. 91, 6269 (1987): r_OH 1 A, HOH
    # 109.47 deg, q_H = 0.4238 e, sigma_OO 3.166 A, epsilon_OO 0.6502 kJ/mol.
    "spce": WaterModel("spce", 0.1, 109.47, -0.8476, 0.6502, 0.3166, "Berendsen et al. 1987"),
    # Jorgensen, Chandrasekhar, Madura, Impey & Klein, J. Chem. Phys. 79, 926 (1983):
    # r_OH 0.9572 A, HOH 104.52 deg, q_H = 0.417 e, A = 582.0e3 kcal A^12/mol and
    # C = 595.0 kcal A^6/mol, so sigma = (A/C)^(1/6) = 3.15061 A, epsilon = C^2/(4A)
    # = 0.152 kcal/mol = 0.6364 kJ/mol.
    "tip3p": WaterModel(
        "tip3p", 0.09572, 104.52, -0.834, 0.6364, 0.315061, "Jorgensen et al. 1983"
    ),
}


def topology_of(molecule_sizes, constraints, lengths) -> Topology:
    """A `Topology` from the number of particles of each molecule, in order, and the
    constrained pairs [c, 2] with their distances [c] (particle ids).

    Arguments:
        molecule_sizes: particles per molecule [m], the molecules' particles consecutive
            in molecule order (n = their sum).
        constraints: the constrained pairs of particle ids [c, 2].
        lengths: their distances [c] (length unit of the positions).

    Returns:
        A `Topology`: each particle's molecule [n], every intramolecular pair, and the
        constraints with their lengths.
    """
    sizes = np.asarray(molecule_sizes, dtype=np.int64)
    return topology_of_molecules(np.repeat(np.arange(len(sizes)), sizes), constraints, lengths)


def topology_of_molecules(molecule, constraints, lengths) -> Topology:
    """A `Topology` from the molecule id of each particle [n] (a molecule's particles
    need not be consecutive) and the constrained pairs [c, 2] with their distances [c].

    Arguments:
        molecule: each particle's molecule id [n].
        constraints: the constrained pairs of particle ids [c, 2].
        lengths: their distances [c] (length unit of the positions).

    Returns:
        A `Topology`: `molecule`, every pair (i < j) of particles of one molecule, and the
        constraints with their lengths.
    """
    molecule = np.asarray(molecule, dtype=np.int64)
    order = np.argsort(molecule, kind="stable")
    cuts = np.flatnonzero(np.diff(molecule[order])) + 1
    pairs = [
        (int(a), int(b))
        for members in np.split(order, cuts)
        for k, a in enumerate(members)
        for b in members[k + 1 :]
    ]
    return Topology(
        molecule=jnp.asarray(molecule, jnp.int32),
        pairs=jnp.asarray(np.asarray(pairs, dtype=np.int64).reshape(-1, 2), jnp.int32),
        constraints=jnp.asarray(np.asarray(constraints, dtype=np.int64).reshape(-1, 2), jnp.int32),
        lengths=jnp.asarray(np.asarray(lengths, dtype=float).reshape(-1)),
    )


def molecules_of(n: int, bonds) -> np.ndarray:
    """The molecule of each of `n` particles [n]: the connected components of the graph
    of `bonds` [b, 2], numbered in the order of their first particles (a particle without
    bonds is a molecule of its own).

    Arguments:
        n: the number of particles.
        bonds: the bonded pairs of particle ids [b, 2] (ids in 0..n - 1).

    Returns:
        The molecule id of each particle [n] (int64), 0 .. molecules - 1.
    """
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    bonds = np.asarray(bonds, dtype=np.int64).reshape(-1, 2)
    graph = coo_matrix((np.ones(bonds.shape[0]), (bonds[:, 0], bonds[:, 1])), shape=(n, n))
    _, labels = connected_components(graph, directed=False)
    _, first = np.unique(labels, return_index=True)
    rank = np.empty(first.shape[0], dtype=np.int64)
    rank[np.argsort(first)] = np.arange(first.shape[0])
    return rank[labels]


LENGTH_SPREAD = 0.05
"""How far (relative) a bond of a molecule read from a file may lie from the mean of the
same bond over the molecules of its kind: farther, it is not the same bond."""


# Below this ratio of the smallest to the largest singular value of the constraints'
# gradients, they are taken as dependent (three sites on a line held as a triangle:
# 1e-17 for sites at 0, 0.1 and 0.2); a triangle bent by 0.001 degrees gives 1e-10.
DEPENDENT = 1e-12


def _on_a_line(a, b, c) -> bool:
    u, v = np.asarray(b, float) - np.asarray(a, float), np.asarray(c, float) - np.asarray(a, float)
    cross = np.linalg.norm(np.cross(np.pad(u, (0, 3 - u.size)), np.pad(v, (0, 3 - v.size))))
    return bool(cross <= math.sqrt(DEPENDENT) * np.linalg.norm(u) * np.linalg.norm(v))


def dependent_constraints(sites, pairs) -> str | None:
    """Why the distance constraints `pairs` [c, 2] between `sites` [k, dim] are not
    independent, or None when they are: constraints that do not fix independent
    directions (three sites on a line constrained as a triangle, whose third side
    follows from the other two) give SHAKE and SETTLE a singular system, and the first
    step blows up.

    Arguments:
        sites: the sites' positions [k, dim].
        pairs: the constrained pairs of site ids [c, 2].

    Returns:
        A sentence saying which constraints are dependent (three sites on a line held as
        a triangle, or constraints that are not independent at these sites), or None.
    """
    sites = np.asarray(sites, dtype=float)
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    if not pairs.size:
        return None
    for a, (i, j) in enumerate(pairs.tolist()):
        for b, (k, m) in enumerate(pairs.tolist()[a + 1 :], a + 1):  # noqa: B007
            shared = {i, j} & {k, m}
            if len(shared) != 1:
                continue
            ends = sorted(({i, j} | {k, m}) - shared)
            third = next((c for c, p in enumerate(pairs.tolist()) if sorted(p) == ends), None)
            (apex,) = shared
            if third is not None and _on_a_line(sites[apex], sites[ends[0]], sites[ends[1]]):
                trio = sorted((apex, *ends))
                return (
                    f"sites {trio[0]}, {trio[1]} and {trio[2]} lie on a line and are constrained "
                    "as a triangle: the third "
                    "distance follows from the other two, so the constraints cannot hold the "
                    "sites; constrain two of the distances"
                )
    # (in general: the gradients of the squared distances, one row per constraint)
    gradient = np.zeros((pairs.shape[0], sites.size))
    d = sites.shape[1]
    for row, (i, j) in enumerate(pairs.tolist()):
        r = sites[i] - sites[j]
        gradient[row, d * i : d * i + d], gradient[row, d * j : d * j + d] = r, -r
    values = np.linalg.svd(gradient, compute_uv=False)
    if pairs.shape[0] > sites.size or values[-1] <= DEPENDENT * values[0]:
        return (
            f"the {pairs.shape[0]} constraints are not independent at these sites (more than "
            "the sites' positions can satisfy apart); remove the redundant ones"
        )
    return None


def bonded_molecules(
    position, species, mass, bonds, edges=None, *, claimed=None, spread: float = LENGTH_SPREAD
):
    """Rigid molecules from a list of bonds (an H5MD file's connectivity): each connected
    group of bonded particles is one molecule, each bond a constraint, and a three-site
    molecule whose two bonds share a site is closed into a rigid triangle (the third side
    is constrained too: three-site water, which SETTLE holds).

    Molecules of one kind (the same species in particle order and the same bonds between
    them) get the same constraint lengths: each length's mean over the kind's molecules;
    the two sides of a closed triangle whose far sites are alike (species and mass) get
    their common mean, so that the triangle is isosceles as SETTLE needs.

    Arguments:
        position: [n, dim] positions (periodic images of a molecule's sites allowed).
        species, mass: [n].
        bonds: [b, 2] bonded particle ids (either order; repeats count once).
        edges: [dim] the periodic box, or None in free space.
        claimed: [n] molecule ids the file gives, or None: each must be one connected
            group of bonds.
        spread: the largest relative distance of a bond from its kind's mean.

    Returns:
        (position [n, dim] with every molecule whole: each site the nearest image of the
        site it is bonded to, `Topology`).

    Raises:
        ValueError: a bond of a particle with itself or out of range, a bond not shorter
            than half the box's shortest edge, a claimed molecule that is not one
            connected group, a bond farther than `spread` from its kind's mean.
    """
    position = np.asarray(position, dtype=float)
    species = np.asarray(species)
    mass = np.asarray(mass, dtype=float)
    n = position.shape[0]
    bonds = np.asarray(bonds, dtype=np.int64).reshape(-1, 2)
    if bonds.size and (bonds.min() < 0 or bonds.max() >= n):
        k = int(np.argmax(np.any((bonds < 0) | (bonds >= n), axis=1)))
        raise ValueError(
            f"bond {k} joins particles {bonds[k, 0]} and {bonds[k, 1]}; expected particle ids in "
            f"0..{n - 1}"
        )
    if np.any(bonds[:, 0] == bonds[:, 1]):
        k = int(np.argmax(bonds[:, 0] == bonds[:, 1]))
        raise ValueError(f"bond {k} joins particle {bonds[k, 0]} to itself")
    bonds = np.unique(np.sort(bonds, axis=1), axis=0)
    molecule = molecules_of(n, bonds)
    if claimed is not None:
        _check_claimed(np.asarray(claimed), molecule, bonds)
    position = _whole(position, bonds, edges)
    # three-site molecules with two bonds from one site: the third side closes them
    sizes = np.bincount(molecule)
    counts = np.bincount(molecule[bonds[:, 0]], minlength=sizes.shape[0])
    closing = []
    for m in np.flatnonzero((sizes == 3) & (counts == 2)).tolist():
        ends = bonds[molecule[bonds[:, 0]] == m]
        apex = np.intersect1d(ends[0], ends[1])
        if apex.size == 1:
            far = sorted(set(ends.ravel().tolist()) - {int(apex[0])})
            # (not a linear molecule: its third side would follow from the other two)
            if not _on_a_line(position[int(apex[0])], position[far[0]], position[far[1]]):
                closing.append(far)
    constraints = np.concatenate([bonds, np.asarray(closing, dtype=np.int64).reshape(-1, 2)])
    for m in np.unique(molecule[constraints[:, 0]]).tolist() if constraints.size else []:
        own = constraints[molecule[constraints[:, 0]] == m]
        ids = np.unique(own)
        problem = dependent_constraints(position[ids], np.searchsorted(ids, own))
        if problem is not None:
            raise ValueError(
                f"molecule {m} (particles {', '.join(map(str, ids.tolist()))}): {problem}"
            )
    length = np.linalg.norm(position[constraints[:, 0]] - position[constraints[:, 1]], axis=-1)
    if edges is not None and constraints.shape[0]:
        half = 0.5 * float(np.min(edges))
        far = length[: bonds.shape[0]] >= half
        if np.any(far):
            k = int(np.argmax(far))
            raise ValueError(
                f"the bond between particles {bonds[k, 0]} and {bonds[k, 1]} is {length[k]:.6g} "
                "long, not shorter than half the "
                f"box's shortest edge ({half:.6g}): a bond cannot be told from its periodic images"
            )
    lengths = _kind_lengths(constraints, length, molecule, species, mass, spread)
    return position, topology_of_molecules(molecule, constraints, lengths)


def _check_claimed(claimed: np.ndarray, molecule: np.ndarray, bonds: np.ndarray) -> None:
    """Each molecule id a file claims is one connected group of its bonds."""
    if claimed.shape != molecule.shape:
        raise ValueError(
            f"molecule ids: expected one per particle ({molecule.shape[0]}), got shape "
            f"{claimed.shape}"
        )
    across = claimed[bonds[:, 0]] != claimed[bonds[:, 1]]
    if np.any(across):
        k = int(np.argmax(across))
        i, j = bonds[k]
        raise ValueError(
            f"the bond between particles {i} and {j} joins molecules {claimed[i]} and "
            f"{claimed[j]}; a bond lies within one molecule"
        )
    for c in np.unique(claimed).tolist():
        members = np.flatnonzero(claimed == c)
        if np.unique(molecule[members]).shape[0] > 1:
            apart = members[molecule[members] != molecule[members[0]]]
            raise ValueError(
                f"molecule {c} (particles "
                f"{', '.join(map(str, members[:8].tolist()))}"
                f"{', ...' if members.shape[0] > 8 else ''}) is not "
                f"connected by its bonds: particle {apart[0]} is joined to particle {members[0]} "
                "by no chain of bonds"
            )


def _whole(position: np.ndarray, bonds: np.ndarray, edges) -> np.ndarray:
    """Positions with each bonded site moved to the periodic image nearest the site it
    is bonded to, walking each molecule's bonds breadth first from its first particle."""
    if edges is None or bonds.shape[0] == 0:
        return position
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import breadth_first_order

    edges = np.asarray(edges, dtype=float)
    n = position.shape[0]
    graph = coo_matrix((np.ones(bonds.shape[0]), (bonds[:, 0], bonds[:, 1])), shape=(n, n)).tocsr()
    out = position.copy()
    seen = np.zeros(n, bool)
    for root in range(n):
        if seen[root]:
            continue
        order, parent = breadth_first_order(graph, root, directed=False, return_predecessors=True)
        seen[order] = True
        for i in order[1:].tolist():  # a parent is placed before its children
            d = out[i] - out[parent[i]]
            out[i] = out[parent[i]] + d - edges * np.round(d / edges)
    return out


def _kind_lengths(constraints, length, molecule, species, mass, spread) -> np.ndarray:
    """Each constraint's length: its mean over the molecules of its kind (the two sides
    of a triangle from one apex to alike sites share theirs); refuses a length farther
    than `spread` from it."""
    members: dict[int, list[int]] = {}
    for i, m in enumerate(molecule.tolist()):
        members.setdefault(m, []).append(i)
    local = np.empty(molecule.shape[0], dtype=np.int64)
    for ids in members.values():
        local[ids] = np.arange(len(ids))
    pairs_of: dict[int, list[tuple[int, int]]] = {}
    for i, j in constraints.tolist():
        pairs_of.setdefault(int(molecule[i]), []).append((int(local[i]), int(local[j])))
    kinds = {
        m: (tuple(species[members[m]].tolist()), tuple(sorted(pairs)))
        for m, pairs in pairs_of.items()
    }

    def slot_of(i, j):
        m = int(molecule[i])
        ids, a, b = members[m], int(local[i]), int(local[j])
        if len(ids) == 3:  # a triangle: sides from an apex to two alike sites are one length
            c = 3 - a - b

            def alike(x, y):
                return species[ids[x]] == species[ids[y]] and mass[ids[x]] == mass[ids[y]]

            for apex, other in ((a, b), (b, a)):
                if alike(other, c) and not alike(apex, c):
                    return (kinds[m], "side", apex)
        return (kinds[m], a, b)

    slot = [slot_of(i, j) for i, j in constraints.tolist()]
    keys = {key: k for k, key in enumerate(dict.fromkeys(slot))}
    index = np.asarray([keys[key] for key in slot], dtype=np.int64)
    mean = np.bincount(index, weights=length) / np.bincount(index)
    off = np.abs(length - mean[index]) > spread * mean[index]
    if np.any(off):
        k = int(np.argmax(off))
        i, j = constraints[k]
        raise ValueError(
            f"the bond between particles {i} and {j} is {length[k]:.6g} long, "
            f"{abs(length[k] / mean[index[k]] - 1):.1%} from the "
            f"{mean[index[k]]:.6g} of the same bond in the other molecules of its kind (at most "
            f"{spread:.0%}): the molecules "
            f"of a kind are copies of one rigid molecule"
        )
    return mean[index]


def _rotation(q: np.ndarray) -> np.ndarray:
    """The rotation matrix of a unit quaternion (w, x, y, z)."""
    w, x, y, z = q
    return np.array(
        [
            [1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
            [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
            [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)],
        ]
    )


def molecular_box(
    key: PRNGKeyArray,
    molecule: Molecule,
    count: int,
    mass_density: float,
    *,
    min_distance: float,
    tries: int = 200,
):
    """`count` copies of a rigid `molecule` in a cubic periodic box of the given mass
    density (mass / length^3), at rest: centres of mass on a simple cubic grid, each
    molecule turned at random (uniform rotations) until its sites are at least
    `min_distance` from those of the molecules already placed.

    Arguments:
        key: the PRNG key of the grid cells and the rotations.
        molecule: the rigid molecule to copy.
        count: the number of molecules (>= 1).
        mass_density: mass per unit volume, in the units of the molecule's masses and
            sites; the box edge is (count total mass / mass_density)^(1 / 3).
        min_distance: the smallest distance between sites of different molecules
            (minimum image).
        tries: random orientations per molecule.

    Returns:
        A `physics.md.System` with a `Topology` (molecule ids, intramolecular pairs, the
        molecule's constraints for each copy).

    Raises:
        ValueError: a count below 1, or a molecule that cannot be placed in `tries`
            orientations (the density is too high for `min_distance`).
    """
    from .base import System

    if count < 1:
        raise ValueError(f"the number of molecules must be >= 1, got {count}")
    edge = (count * molecule.total_mass / mass_density) ** (1.0 / 3.0)
    per_side = math.ceil(count ** (1.0 / 3.0) - 1e-9)
    spacing = edge / per_side
    k_site, k_turn = jax.random.split(key)
    cells = np.asarray(jax.random.permutation(k_site, per_side**3))[:count]
    grid = (
        np.stack(np.unravel_index(np.sort(cells), (per_side,) * 3), axis=1) * spacing
        + 0.5 * spacing
    )
    turns = np.array(jax.random.normal(k_turn, (count, tries, 4)))
    turns /= np.linalg.norm(turns, axis=-1, keepdims=True)
    template = molecule.centred()
    placed = np.zeros((0, 3))
    positions = []
    for m in range(count):
        for t in range(tries):
            sites = template @ _rotation(turns[m, t]).T + grid[m]
            if placed.shape[0] == 0:
                break
            d = sites[:, None, :] - placed[None, :, :]
            d -= edge * np.round(d / edge)
            if np.sqrt(np.min(np.sum(d * d, axis=-1))) >= min_distance:
                break
        else:
            raise ValueError(
                f"cannot place {molecule.name} molecule {m} of {count} at least {min_distance:g} "
                "from the others in "
                f"{tries} orientations: the density is too high; lower it"
            )
        positions.append(sites)
        placed = np.concatenate([placed, sites])
    k = len(molecule.sites)
    position = np.concatenate(positions)
    offsets = np.repeat(np.arange(count) * k, len(molecule.constraints))
    constraints = np.tile(np.asarray(molecule.constraints), (count, 1)) + offsets[:, None]
    topology = topology_of([k] * count, constraints, np.tile(molecule.lengths(), count))
    return System(
        position=jnp.asarray(position),
        velocity=jnp.zeros((count * k, 3)),
        mass=jnp.asarray(np.tile(molecule.mass, count), dtype=float),
        species=jnp.asarray(np.tile(molecule.species, count), jnp.int32),
        space=Periodic(jnp.full(3, edge)),
        topology=topology,
    )
