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
        sites = ((0.0, 0.0, 0.0), (self.oh * math.sin(half), self.oh * math.cos(half), 0.0), (-self.oh * math.sin(half), self.oh * math.cos(half), 0.0))
        return Molecule(self.name, (0, 1, 1), (OXYGEN_MASS, HYDROGEN_MASS, HYDROGEN_MASS), sites, ((0, 1), (0, 2), (1, 2)))

    def params(self) -> dict[str, np.ndarray]:
        """The `lj_coulomb` parameters of the model (species 0: O, 1: H): epsilon only
        between oxygens, one sigma, the charges."""
        return {
            "epsilon": np.array([[self.epsilon, 0.0], [0.0, 0.0]]),
            "sigma": np.asarray(self.sigma),
            "charges": np.array([self.oxygen_charge, -0.5 * self.oxygen_charge]),
        }


WATER_MODELS = {
    # Berendsen, Grigera & Straatsma, J. Phys. Chem. 91, 6269 (1987): r_OH 1 A, HOH
    # 109.47 deg, q_H = 0.4238 e, sigma_OO 3.166 A, epsilon_OO 0.6502 kJ/mol.
    "spce": WaterModel("spce", 0.1, 109.47, -0.8476, 0.6502, 0.3166, "Berendsen et al. 1987"),
    # Jorgensen, Chandrasekhar, Madura, Impey & Klein, J. Chem. Phys. 79, 926 (1983):
    # r_OH 0.9572 A, HOH 104.52 deg, q_H = 0.417 e, A = 582.0e3 kcal A^12/mol and
    # C = 595.0 kcal A^6/mol, so sigma = (A/C)^(1/6) = 3.15061 A, epsilon = C^2/(4A)
    # = 0.152 kcal/mol = 0.6364 kJ/mol.
    "tip3p": WaterModel("tip3p", 0.09572, 104.52, -0.834, 0.6364, 0.315061, "Jorgensen et al. 1983"),
}


def topology_of(molecule_sizes, constraints, lengths) -> Topology:
    """A `Topology` from the number of particles of each molecule, in order, and the
    constrained pairs [c, 2] with their distances [c] (particle ids)."""
    sizes = np.asarray(molecule_sizes, dtype=np.int64)
    molecule = np.repeat(np.arange(len(sizes)), sizes)
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    pairs = [(s + a, s + b) for s, k in zip(starts.tolist(), sizes.tolist()) for a in range(k) for b in range(a + 1, k)]
    return Topology(
        molecule=jnp.asarray(molecule, jnp.int32),
        pairs=jnp.asarray(np.asarray(pairs, dtype=np.int64).reshape(-1, 2), jnp.int32),
        constraints=jnp.asarray(np.asarray(constraints, dtype=np.int64).reshape(-1, 2), jnp.int32),
        lengths=jnp.asarray(np.asarray(lengths, dtype=float).reshape(-1)),
    )


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


def molecular_box(key: PRNGKeyArray, molecule: Molecule, count: int, mass_density: float, *, min_distance: float, tries: int = 200):
    """`count` copies of a rigid `molecule` in a cubic periodic box of the given mass
    density (mass / length^3), at rest: centres of mass on a simple cubic grid, each
    molecule turned at random (uniform rotations) until its sites are at least
    `min_distance` from those of the molecules already placed.

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
    grid = np.stack(np.unravel_index(np.sort(cells), (per_side,) * 3), axis=1) * spacing + 0.5 * spacing
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
                f"cannot place {molecule.name} molecule {m} of {count} at least {min_distance:g} from the others in "
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
