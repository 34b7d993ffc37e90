"""Pair potentials: Lennard-Jones (truncated, or truncated and shifted, with tail
corrections), WCA, Morse, soft spheres, and a bead-spring polymer (WCA plus harmonic
bonds). Several species take per-pair parameters: a parameter may be a scalar (every
pair) or a symmetric [n_species, n_species] matrix.

Every pair model evaluates energy, forces and virial in one pass over a dense neighbour
list (or over all pairs): for each particle i and each neighbour j it needs phi(r_ij^2)
and d phi / d(r^2), which autodiff gives in the same forward pass (`jax.jvp`). The
neighbour list holds both (i, j) and (j, i), so the force on i is a plain sum over its
row, with no scatter.
"""

from __future__ import annotations

import abc
import functools
import math
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, PyTree

from .._base import Parameter
from ._types import Edges, Forces, NeighbourIndex, Scalar
from .base import ParticleModel, System

TWO_SIXTH = 2.0 ** (1.0 / 6.0)


class PairModel(ParticleModel):
    """Particles interacting through a pair potential phi(r) that vanishes beyond `cutoff`.

    Concrete models implement `pair_energy(r2, p)`: phi at squared distances `r2`
    (any shape) given per-pair parameter values `p` (name -> array broadcastable to r2),
    and list in `pair_parameters` which of their parameters may be per species pair.
    """

    pair_parameters: ClassVar[tuple[str, ...]]
    rows_apart: ClassVar[bool] = True

    @abc.abstractmethod
    def pair_energy(self, r2: Array, p: dict[str, Array]) -> Array:
        """phi at squared distances r2 (0 < r2 < cutoff^2)."""

    # bonded terms (none unless a model adds them)
    def bond_energy(self, system: System, params: PyTree) -> Scalar:
        return jnp.zeros((), system.position.dtype)

    def _pair_values(self, system: System, params: PyTree, i: Array, j: Array) -> dict[str, Array]:
        """Parameter values for the pairs (i[:, None], j): scalars, or looked up by species."""
        dtype = system.position.dtype
        out = {}
        for name in self.pair_parameters:
            value = jnp.asarray(params[name]).astype(dtype)
            if value.ndim == 0:
                out[name] = value
            else:
                s = system.species
                out[name] = value[s[i][:, None], s[j]]
        return out

    def _pass(
        self,
        system: System,
        params: PyTree,
        neighbours: NeighbourIndex | None,
        with_forces: bool,
        rows: Array | None = None,
    ):
        """Energy, and with_forces also forces and virial, of the pair interactions.

        Works per Cartesian component ([rows, k] arrays for x, y, z rather than one
        [rows, k, dim] array), which vectorises several times better on CPU, and a block
        of rows at a time, so that the intermediates stay in cache for large systems.
        With `rows` (particle ids), only those particles' rows: `neighbours` then holds
        their rows in that order, and the per-row results are theirs.
        """
        position = system.position
        n, dim = position.shape
        dtype = position.dtype
        rc2 = jnp.asarray(self.cutoff * self.cutoff, dtype)
        table = _row_table(position)

        def block(k, listed):
            i = k if rows is None else rows[k]
            if neighbours is None:
                j = jnp.broadcast_to(jnp.arange(n), (i.shape[0], n))
                valid = j != i[:, None]
            else:
                j = jnp.minimum(listed, n - 1)
                valid = listed < n
            components = []
            r2 = jnp.zeros(j.shape, dtype)
            others = _neighbour_coordinates(table, j, dim)
            for axis in range(dim):
                x = position[:, axis]
                d = system.space.displacement_component(x[i][:, None] - others[axis], axis)
                components.append(d)
                r2 = r2 + d * d
            if system.topology is not None:  # pairs within one molecule do not interact
                molecule = system.topology.molecule
                valid = valid & (molecule[i][:, None] != molecule[j])
            inside = valid & (r2 < rc2)
            safe = jnp.where(inside, r2, rc2)
            p = self._pair_values(system, params, i, j)
            if not with_forces:
                return (
                    jnp.sum(jnp.where(inside, self.pair_energy(safe, p), 0.0), axis=1),
                    None,
                    None,
                )
            e, de = jax.jvp(lambda x: self.pair_energy(x, p), (safe,), (jnp.ones_like(safe),))
            e = jnp.where(inside, e, 0.0)
            de = jnp.where(inside, de, 0.0)
            force = jnp.stack([-2.0 * jnp.sum(de * d, axis=1) for d in components], axis=1)
            virial = jnp.stack([-jnp.sum(de * d * d, axis=1) for d in components], axis=1)
            return jnp.sum(e, axis=1), force, virial

        width = n if neighbours is None else neighbours.shape[1]
        energy, force, virial = _by_row_blocks(
            block, n if rows is None else rows.shape[0], width, neighbours
        )
        return 0.5 * jnp.sum(energy), force, None if virial is None else jnp.sum(virial, axis=0)

    def interaction_energy(
        self, system: System, params: PyTree, neighbours: NeighbourIndex | None = None
    ) -> Scalar:
        energy, _, _ = self._pass(system, params, neighbours, with_forces=False)
        return energy + self.bond_energy(system, params)

    def forces(
        self,
        system: System,
        params: PyTree,
        neighbours: NeighbourIndex | None = None,
        rows: Array | None = None,
    ) -> Forces:
        """Minus the gradient of the energy [n, dim]; with `rows` (particle ids, and
        `neighbours` holding their rows), the forces on those particles only."""
        _, force, _ = self._pass(system, params, neighbours, with_forces=True, rows=rows)
        if system.bonds is not None:
            bonded = jax.grad(lambda r: self.bond_energy(system.at(r), params))(system.position)
            force = force - (bonded if rows is None else bonded[rows])
        return force

    def virial(
        self, system: System, params: PyTree, neighbours: NeighbourIndex | None = None
    ) -> Scalar:
        _, virial = self.pair_forces_and_virial(system, params, neighbours)
        return jnp.sum(virial)

    def pair_forces_and_virial(
        self,
        system: System,
        params: PyTree,
        neighbours: NeighbourIndex | None = None,
        rows: Array | None = None,
    ) -> tuple[Forces, Array]:
        """Forces [n, dim] and the diagonal of the virial tensor [dim] of the pair
        interactions and bonds, in one pass: what `forces_and_virial` is for the pair
        models of this module (a subclass that adds interactions beyond the pairs keeps
        the base class's `forces_and_virial`, which derives both from its energy).

        With `rows` (particle ids, `neighbours` holding their rows): the forces on those
        particles and their share of the virial: the halves of their pair terms, and the
        bonded terms where the rows begin at particle 0, so that the shares of blocks
        that cover every particle once sum to the whole."""
        _, force, virial = self._pass(system, params, neighbours, with_forces=True, rows=rows)
        if system.bonds is not None:
            bonded = jax.grad(lambda r: self.bond_energy(system.at(r), params))(system.position)
            force = force - (bonded if rows is None else bonded[rows])
            ones = jnp.ones(system.dim, system.position.dtype)
            bond_virial = jax.grad(lambda s: self.bond_energy(system.scaled(s), params))(ones)
            virial = virial - (
                bond_virial if rows is None else jnp.where(rows[0] == 0, bond_virial, 0.0)
            )
        return force, virial

    def rows_energy_and_virial(
        self, system: System, params: PyTree, neighbours: NeighbourIndex, rows: Array
    ) -> tuple[Scalar, Edges]:
        """The share of particles `rows` (ids; `neighbours` holds their rows) of the pair
        energy (half of each of their pair terms) and of the virial's diagonal, without
        bonded terms: shares of rows that cover every particle once sum to the whole."""
        energy, _, virial = self._pass(system, params, neighbours, with_forces=True, rows=rows)
        return energy, virial

    def _range_check(self, params: PyTree, name: str, factor: float, what: str) -> None:
        largest = float(jnp.max(jnp.asarray(params[name])))
        if factor * largest > self.cutoff + 1e-12:
            raise ValueError(
                f"{self.name}: {what} {factor * largest:g} (from {name} = {largest:g}) exceeds the "
                "model's "
                f"cutoff {self.cutoff:g}; raise the model option cutoff"
            )


def _by_row_blocks(fn, n: int, width: int, table: Array | None, elements: int = 1 << 17):
    """`fn(arange(n), table)` for a function of particle ids and their rows of `table`
    ([n, width], or None) whose work is [len(ids), width], a block of at most about
    `elements` entries at a time (`lax.map`); outputs are arrays (or None) with a leading
    axis of rows. One block when everything fits, else blocks of equal size: where a
    number of blocks up to twice the fewest divides n, the table is cut into them as it
    lies (each block a slice of whole rows, no gather); otherwise blocks padded by at most
    one row each (blocks of the largest size would pad the last one, by 44% for 2,000
    rows of 91), the table's rows gathered once for all of them."""
    most = max(8, elements // max(width, 1))
    if most >= n:
        return fn(jnp.arange(n), table)
    fewest = -(-n // most)
    blocks = next((b for b in range(fewest, 2 * fewest + 1) if n % b == 0), fewest)
    block = -(-n // blocks)
    if blocks * block == n:
        ids = jnp.arange(n).reshape(blocks, block)
        rows = None if table is None else table.reshape((blocks, block) + table.shape[1:])
    else:
        ids = jnp.minimum(jnp.arange(blocks * block), n - 1).reshape(blocks, block)
        rows = None if table is None else table[ids]
    out = jax.lax.map(lambda x: fn(*x), (ids, rows))
    return jax.tree.map(lambda a: a.reshape((blocks * block,) + a.shape[2:])[:n], out)


def _row_table(position: Array) -> Array:
    """The positions as a table for `_neighbour_coordinates`: padded to 4 columns in 3-D.
    The primal gathers rows of its first `dim` columns; the tangent reads it per axis."""
    return (
        jnp.pad(position, ((0, 0), (0, 4 - position.shape[1])))
        if position.shape[1] == 3
        else position
    )


@functools.partial(jax.custom_jvp, nondiff_argnums=(2,))
def _neighbour_coordinates(table: Array, j: Array, dim: int) -> tuple[Array, ...]:
    """The coordinates of particles `j` ([rows, k] ids), one [rows, k] array per axis,
    from `table` (`_row_table`).

    XLA on CPU runs a gather as a scalar loop, one element at a time: gathering each
    neighbour's coordinates as one row is one gather per pair where a gather per axis
    made three (a force pass 20% faster at 4,000 and 32,000 LJ particles on one core).
    The rows are the `dim` coordinates alone: rows of the 4 padded columns, 16 bytes
    where 12 do, made the pass take 1.1-1.2 times as long at 4,000 particles and
    1.05-1.5 times at 32,000 (the gathered rows are written once and read by a kernel
    per axis). The rows land axis first ([axis, rows, k]), so that each axis's
    coordinates are a plane for the vectorised work that reads them (11% faster than
    [rows, k, axis]). The ids are in bounds (the caller clamps the padding).

    Its tangent gathers per axis from the padded table, so that reverse mode, which
    transposes the tangent, scatter-adds per axis. The transpose of the row gather, a
    scatter-add of rows, made a gradient through the pass 1.5x slower. The same tangent
    taken from the positions themselves, unpadded, made the gradient of F.w through the
    pass 2.7x slower at 4,000 particles."""
    numbers = jax.lax.GatherDimensionNumbers(
        offset_dims=(0,), collapsed_slice_dims=(0,), start_index_map=(0,)
    )
    planes = jax.lax.gather(
        table[:, :dim], j[..., None], numbers, slice_sizes=(1, dim), mode="promise_in_bounds"
    )
    return tuple(planes[axis] for axis in range(dim))


@_neighbour_coordinates.defjvp
def _neighbour_coordinates_jvp(dim, primals, tangents):
    table, j = primals
    d_table, _ = tangents
    return _neighbour_coordinates(table, j, dim), tuple(d_table[:, axis][j] for axis in range(dim))


def _lj(r2, epsilon, sigma):
    s6 = (sigma * sigma / r2) ** 3
    return 4.0 * epsilon * (s6 * s6 - s6)


_EPSILON = Parameter("epsilon", 1.0, "reduced", "depth of the potential well", "positive")
_SIGMA = Parameter("sigma", 1.0, "reduced", "particle diameter (where phi = 0)", "positive")


def _species_counts(system: System, n_species: int, dtype) -> Array:
    return jnp.zeros(n_species, dtype).at[system.species].add(1.0)


class LennardJones(PairModel):
    """Lennard-Jones 12-6 fluid: phi(r) = 4 epsilon [(sigma/r)^12 - (sigma/r)^6], truncated
    at `cutoff` (absolute length) and optionally shifted to zero there.

    With `tail_correction`, the analytic contributions of the unshifted potential beyond
    the cutoff (uniform fluid, g = 1) are added to energy and pressure (Allen & Tildesley,
    Computer Simulation of Liquids, 2nd ed. 2017, eqs. 2.144-2.145):
        E_tail = (8 pi / 3V) sum_ab N_a N_b eps_ab sigma_ab^3 [(sigma/rc)^9 / 3 - (sigma/rc)^3]
        P_tail = (16 pi / 3V^2) sum_ab N_a N_b eps_ab sigma_ab^3 [2 (sigma/rc)^9 / 3 - (sigma/rc)^3]

    Arguments:
        cutoff: truncation distance (neighbour-list range).
        shift: subtract phi(cutoff) so the energy is continuous.
        force_shift: also subtract (r - cutoff) phi'(cutoff), so that energy and force are
            both continuous at the cutoff (the linear force-shifted potential of Toxvaerd
            & Dyre, J. Chem. Phys. 134, 081102 (2011)); trajectories are then smooth in
            the parameters, which gradients through long runs need.
        tail_correction: add the long-range corrections (3-D periodic systems).
        n_species: number of particle species; epsilon and sigma may then be
            [n_species, n_species] matrices.

    Example:
        >>> model = LennardJones(cutoff=2.5, shift=True)
        >>> params = model.default_params()        # {"epsilon": 1.0, "sigma": 1.0}
    """

    cutoff: float = eqx.field(static=True, default=2.5)
    shift: bool = eqx.field(static=True, default=False)
    force_shift: bool = eqx.field(static=True, default=False)
    tail_correction: bool = eqx.field(static=True, default=False)
    n_species: int = eqx.field(static=True, default=1)

    name: ClassVar[str] = "lennard_jones"
    description: ClassVar[str] = "Lennard-Jones 12-6 particles, truncated (and shifted) at a cutoff"
    parameters: ClassVar[tuple[Parameter, ...]] = (_EPSILON, _SIGMA)
    pair_parameters: ClassVar[tuple[str, ...]] = ("epsilon", "sigma")

    def __check_init__(self):
        _check_options(self)

    def pair_energy(self, r2, p):
        eps, sig = p["epsilon"], p["sigma"]
        e = _lj(r2, eps, sig)
        rc = jnp.asarray(self.cutoff, r2.dtype)
        if self.shift or self.force_shift:
            e = e - _lj(rc * rc, eps, sig)
        if self.force_shift:
            s6 = (sig / rc) ** 6
            slope = 4.0 * eps * (-12.0 * s6 * s6 + 6.0 * s6) / rc  # phi'(rc)
            e = e - (jnp.sqrt(r2) - rc) * slope
        return e

    def tail_energy(self, system: System, params: PyTree) -> Scalar:
        return lj_tail_energy(self, system, params)

    def tail_pressure(self, system: System, params: PyTree) -> Scalar:
        return lj_tail_pressure(self, system, params)

    forces_and_virial = PairModel.pair_forces_and_virial

    def check_params(self, system: System, params: PyTree) -> None:
        _check_species(self, system, params)
        if self.tail_correction and system.dim != 3:
            raise ValueError(
                f"lennard_jones: tail_correction is for 3-D systems, this one is {system.dim}-D"
            )


class Wca(PairModel):
    """Weeks-Chandler-Andersen: the repulsive part of Lennard-Jones, truncated at its
    minimum 2^(1/6) sigma and shifted up by epsilon (purely repulsive, smooth to first order).

    Arguments:
        cutoff: neighbour-list range; must be at least 2^(1/6) times the largest sigma.
        n_species: number of species (per-pair epsilon and sigma as matrices).
    """

    cutoff: float = eqx.field(static=True, default=1.5)
    n_species: int = eqx.field(static=True, default=1)

    name: ClassVar[str] = "wca"
    description: ClassVar[str] = "Weeks-Chandler-Andersen purely repulsive Lennard-Jones"
    parameters: ClassVar[tuple[Parameter, ...]] = (_EPSILON, _SIGMA)
    pair_parameters: ClassVar[tuple[str, ...]] = ("epsilon", "sigma")

    def __check_init__(self):
        _check_options(self)

    def pair_energy(self, r2, p):
        sigma2 = p["sigma"] * p["sigma"]
        inside = r2 < TWO_SIXTH**2 * sigma2
        return jnp.where(inside, _lj(r2, p["epsilon"], p["sigma"]) + p["epsilon"], 0.0)

    forces_and_virial = PairModel.pair_forces_and_virial

    def check_params(self, system: System, params: PyTree) -> None:
        _check_species(self, system, params)
        self._range_check(params, "sigma", TWO_SIXTH, "the WCA range 2^(1/6) sigma =")


class Morse(PairModel):
    """Morse potential phi(r) = epsilon [(1 - exp(-alpha (r - r0)))^2 - 1], truncated at
    `cutoff` (and shifted to zero there with `shift`).

    Arguments:
        cutoff: truncation distance.
        shift: subtract phi(cutoff).
        n_species: number of species (per-pair epsilon, alpha and r0 as matrices).
    """

    cutoff: float = eqx.field(static=True, default=2.5)
    shift: bool = eqx.field(static=True, default=False)
    n_species: int = eqx.field(static=True, default=1)

    name: ClassVar[str] = "morse"
    description: ClassVar[str] = "Morse pair potential, truncated (and shifted) at a cutoff"
    parameters: ClassVar[tuple[Parameter, ...]] = (
        Parameter("epsilon", 1.0, "reduced", "well depth", "positive"),
        Parameter("alpha", 5.0, "1/length", "inverse width of the well", "positive"),
        Parameter("r0", 1.0, "reduced", "distance of the minimum", "positive"),
    )
    pair_parameters: ClassVar[tuple[str, ...]] = ("epsilon", "alpha", "r0")

    def __check_init__(self):
        _check_options(self)

    def _phi(self, r, p):
        x = 1.0 - jnp.exp(-p["alpha"] * (r - p["r0"]))
        return p["epsilon"] * (x * x - 1.0)

    def pair_energy(self, r2, p):
        e = self._phi(jnp.sqrt(r2), p)
        if self.shift:
            e = e - self._phi(jnp.asarray(self.cutoff, r2.dtype), p)
        return e

    forces_and_virial = PairModel.pair_forces_and_virial

    def check_params(self, system: System, params: PyTree) -> None:
        _check_species(self, system, params)


class SoftSphere(PairModel):
    """Soft spheres: phi(r) = epsilon / alpha (1 - r / sigma)^alpha for r < sigma, else 0
    (harmonic contact for alpha = 2; foams, jamming).

    Arguments:
        cutoff: neighbour-list range; must be at least the largest sigma.
        n_species: number of species (per-pair epsilon and sigma as matrices).
    """

    cutoff: float = eqx.field(static=True, default=1.5)
    n_species: int = eqx.field(static=True, default=1)

    name: ClassVar[str] = "soft_sphere"
    description: ClassVar[str] = "soft repulsive spheres, epsilon/alpha (1 - r/sigma)^alpha"
    parameters: ClassVar[tuple[Parameter, ...]] = (
        _EPSILON,
        Parameter("sigma", 1.0, "reduced", "contact diameter", "positive"),
        Parameter("alpha", 2.0, "1", "exponent (2: harmonic contact)", "positive"),
    )
    pair_parameters: ClassVar[tuple[str, ...]] = ("epsilon", "sigma", "alpha")

    def __check_init__(self):
        _check_options(self)

    def pair_energy(self, r2, p):
        r = jnp.sqrt(r2)
        inside = r < p["sigma"]
        overlap = jnp.where(inside, 1.0 - r / p["sigma"], 1.0)
        return jnp.where(inside, p["epsilon"] / p["alpha"] * overlap ** p["alpha"], 0.0)

    forces_and_virial = PairModel.pair_forces_and_virial

    def check_params(self, system: System, params: PyTree) -> None:
        _check_species(self, system, params)
        self._range_check(params, "sigma", 1.0, "the contact distance sigma =")


class BeadSpring(PairModel):
    """Bead-spring polymers: WCA between all beads plus harmonic bonds
    (1/2) bond_k (r - bond_length)^2 between the bonded pairs of `System.bonds`
    (a Kremer-Grest-like chain model with harmonic instead of FENE springs).

    Arguments:
        cutoff: neighbour-list range; at least 2^(1/6) times the largest sigma.
        n_species: number of species.
    """

    cutoff: float = eqx.field(static=True, default=1.5)
    n_species: int = eqx.field(static=True, default=1)

    name: ClassVar[str] = "bead_spring"
    description: ClassVar[str] = "bead-spring polymer chains: WCA beads and harmonic bonds"
    bonded: ClassVar[bool] = True  # (a start file's bonds are its springs)
    parameters: ClassVar[tuple[Parameter, ...]] = (
        _EPSILON,
        _SIGMA,
        Parameter("bond_k", 100.0, "reduced", "spring constant of a bond", "positive"),
        Parameter("bond_length", 1.0, "reduced", "rest length of a bond", "positive"),
    )
    pair_parameters: ClassVar[tuple[str, ...]] = ("epsilon", "sigma")

    def __check_init__(self):
        _check_options(self)

    def pair_energy(self, r2, p):
        sigma2 = p["sigma"] * p["sigma"]
        inside = r2 < TWO_SIXTH**2 * sigma2
        return jnp.where(inside, _lj(r2, p["epsilon"], p["sigma"]) + p["epsilon"], 0.0)

    def bond_energy(self, system: System, params: PyTree) -> Scalar:
        return harmonic_bond_energy(system, params["bond_k"], params["bond_length"])

    forces_and_virial = PairModel.pair_forces_and_virial

    def check_params(self, system: System, params: PyTree) -> None:
        _check_species(self, system, params)
        self._range_check(params, "sigma", TWO_SIXTH, "the WCA range 2^(1/6) sigma =")
        if system.bonds is None:
            raise ValueError(
                "bead_spring needs bonds: start from physics.md.chains(...) or a system with bonds"
            )


def _lj_tail_sum(model: PairModel, system: System, params: PyTree, nine: float) -> Array:
    dtype = system.position.dtype
    eps = jnp.asarray(params["epsilon"]).astype(dtype)
    sig = jnp.asarray(params["sigma"]).astype(dtype)
    counts = _species_counts(system, model.n_species, dtype)
    pairs = counts[:, None] * counts[None, :]
    x3 = (sig / model.cutoff) ** 3
    terms = eps * sig**3 * (nine * x3**3 - x3)
    if terms.ndim == 0:
        return jnp.sum(pairs) * terms
    return jnp.sum(pairs * terms)


def lj_tail_energy(model: PairModel, system: System, params: PyTree) -> Scalar:
    """E_tail of a Lennard-Jones model with `tail_correction` (0 otherwise, or in free
    space): see `LennardJones`."""
    if not (model.tail_correction and system.space.periodic):
        return jnp.zeros((), system.position.dtype)
    return (
        8.0
        * math.pi
        / (3.0 * system.space.volume())
        * _lj_tail_sum(model, system, params, 1.0 / 3.0)
    )


def lj_tail_pressure(model: PairModel, system: System, params: PyTree) -> Scalar:
    """P_tail of a Lennard-Jones model with `tail_correction` (0 otherwise)."""
    if not (model.tail_correction and system.space.periodic):
        return jnp.zeros((), system.position.dtype)
    volume = system.space.volume()
    return 16.0 * math.pi / (3.0 * volume * volume) * _lj_tail_sum(model, system, params, 2.0 / 3.0)


def harmonic_bond_energy(system: System, k: Array | float, length: Array | float) -> Scalar:
    """Sum over `system.bonds` of (1/2) k (r - length)^2 (0 without bonds).

    Arguments:
        system: the system; its `bonds` [b, 2] are the bonded pairs, r their distances
            (minimum image in a periodic box).
        k: the spring constant (energy / length^2), a scalar or one per bond [b].
        length: the rest length, a scalar or one per bond [b].

    Returns:
        The bond energy, a scalar of the positions' dtype.
    """
    if system.bonds is None:
        return jnp.zeros((), system.position.dtype)
    dtype = system.position.dtype
    i, j = system.bonds[:, 0], system.bonds[:, 1]
    dr = system.space.displacement(system.position[i] - system.position[j])
    r = jnp.sqrt(jnp.sum(dr * dr, axis=-1))
    k = jnp.asarray(k).astype(dtype)
    length = jnp.asarray(length).astype(dtype)
    return 0.5 * jnp.sum(k * (r - length) ** 2)


def _check_options(model: PairModel) -> None:
    if not (model.cutoff > 0 and math.isfinite(model.cutoff)):
        raise ValueError(f"{model.name}: cutoff must be a positive number, got {model.cutoff!r}")
    if model.n_species < 1:
        raise ValueError(f"{model.name}: n_species must be >= 1, got {model.n_species!r}")


def _check_species(model: PairModel, system: System, params: PyTree) -> None:
    s = model.n_species
    species = jnp.asarray(system.species)
    if species.size and (int(jnp.min(species)) < 0 or int(jnp.max(species)) >= s):
        raise ValueError(
            f"{model.name}: particle species must be in 0..{s - 1} (n_species = {s}), "
            f"got {int(jnp.min(species))}..{int(jnp.max(species))}"
        )
    for name in model.pair_parameters:
        value = jnp.asarray(params[name])
        if value.ndim == 0:
            continue
        if value.shape != (s, s):
            raise ValueError(
                f"{model.name}: parameter {name} must be a scalar or a [{s}, {s}] matrix "
                f"(n_species = {s}), "
                f"got shape {value.shape}"
            )
        if not bool(jnp.allclose(value, value.T)):
            raise ValueError(f"{model.name}: the {name} matrix must be symmetric (phi_ab = phi_ba)")
