"""Holonomic distance constraints of particle integrators: SETTLE for rigid three-site
molecules and SHAKE/RATTLE for any other set of fixed distances.

A constraint k holds particles i_k and j_k at distance L_k. The integrators of the
velocity-Verlet family take a drift and then put the positions back on the constraints
(`Constraints.positions`), with corrections along the bond vectors of the positions the
drift started from (SHAKE, Ryckaert, Ciccotti & Berendsen, J. Comput. Phys. 23, 327
(1977)); after a kick they remove the velocity components along the bonds
(`Constraints.velocities`, RATTLE, Andersen, J. Comput. Phys. 52, 24 (1983)).

- Rigid triangles with two equal sides from one apex and equal masses at the other two
  corners (three-site water models) are solved in closed form by SETTLE (Miyamoto &
  Kollman, J. Comput. Chem. 13, 952 (1992)): the new triangle is the reference shape
  placed at the unconstrained centre of mass and rotated by the three angles of the
  paper, which is SHAKE's solution with corrections along the old bonds, exactly.
- Other constraints are solved by Newton's method on the multipliers of all of them at
  once (the matrix form of SHAKE, M-SHAKE: Kraeutler, van Gunsteren & Huenenberger,
  J. Comput. Chem. 22, 501 (2001)), to a relative tolerance on L_k^2. Constraints couple
  only within a molecule, so the matrix is solved as one m x m block per molecule, m the
  most constraints of one molecule (blocks of molecules with fewer padded with rows that
  hold nothing); where those blocks would cost more than one dense c x c matrix of all c
  constraints (one large molecule among small ones), as that matrix.

Velocity constraints and constraint forces are linear in the multipliers: one solve
(3 x 3 per rigid triangle, the blocks above for the rest). Positions are never wrapped
into the box by the integrators, so a molecule that starts whole stays whole and bond
vectors are plain differences.
"""

from __future__ import annotations

import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

Positions = Float[Array, "n dim"]
Masses = Float[Array, " n"]


class Constraints(eqx.Module):
    """Fixed distances between particles.

    Attributes:
        pairs: [c, 2] particle ids held by SHAKE/RATTLE.
        lengths: [c] their distances.
        triangles: [w, 3] ids (apex, b, c) of the rigid triangles held by SETTLE, with
            |apex - b| = |apex - c| = `sides` and |b - c| = `bases`, m_b = m_c.
        sides, bases: [w] the triangles' two equal sides and their base.
        molecules: [n] each particle's rigid group, named by its lowest particle id
            (the particles joined by constraints; a free particle is its own group).
        tolerance: largest relative error |r^2 - L^2| / L^2 that SHAKE accepts.
        max_iterations: Newton iterations of SHAKE at most (static).
        slots: [b, m] the pairs (ids into `pairs`) of each block of constraints coupled
            only among themselves (one block per molecule), -1 for padding; None for one
            block of all.

    Build one from a list of pairs with `constraints_of`, which hands every rigid
    triangle to SETTLE.
    """

    pairs: Int[Array, "c 2"]
    lengths: Float[Array, " c"]
    triangles: Int[Array, "w 3"]
    sides: Float[Array, " w"]
    bases: Float[Array, " w"]
    molecules: Int[Array, " n"]
    tolerance: float = eqx.field(static=True, default=1e-13)
    max_iterations: int = eqx.field(static=True, default=50)
    slots: Int[Array, "b m"] | None = None

    @property
    def count(self) -> int:
        """Number of constraints (degrees of freedom removed)."""
        return int(self.pairs.shape[0]) + 3 * int(self.triangles.shape[0])

    # ------------------------------------------------------------------ positions

    def positions(self, reference: Positions, position: Positions, mass: Masses) -> Positions:
        """`position` (after an unconstrained move from `reference`, which satisfies the
        constraints) put back on the constraints: SETTLE for the triangles, SHAKE with
        corrections along the reference bonds for the pairs."""
        dtype = (
            position.dtype
        )  # (the lengths in the run's precision: float32 positions stay float32)
        if self.triangles.shape[0]:
            position = settle(
                reference,
                position,
                mass,
                self.triangles,
                self.sides.astype(dtype),
                self.bases.astype(dtype),
            )
        if self.pairs.shape[0]:
            pairs, lengths = self._blocks()
            position = shake(
                reference,
                position,
                mass,
                pairs,
                lengths.astype(dtype),
                self.tolerance,
                self.max_iterations,
            )
        return position

    def _blocks(self) -> tuple[Int[Array, "b m 2"], Float[Array, "b m"]]:
        """The SHAKE pairs and lengths as blocks of constraints coupled only among
        themselves [b, m, 2] and [b, m]. A padding entry pairs a particle with itself, at
        length 1: its bond is 0, and so is its multiplier."""
        if self.slots is None:
            return self.pairs[None], self.lengths[None]
        real = self.slots >= 0
        pairs = self.pairs[jnp.maximum(self.slots, 0)]
        pairs = jnp.where(real[..., None], pairs, pairs[..., :1])
        return pairs, jnp.where(real, self.lengths[jnp.maximum(self.slots, 0)], 1.0)

    # ------------------------------------------------------------------ velocities and forces

    def velocities(
        self, position: Positions, velocity: Float[Array, "n dim"], mass: Masses
    ) -> Float[Array, "n dim"]:
        """`velocity` without its components along the constrained bonds at `position`
        (RATTLE's second stage: d_k . (v_i - v_j) = 0 for every constraint)."""
        rates = [_relative(velocity, p) for p in self._groups()]
        return velocity + self._correction(
            position,
            mass,
            [
                -(jnp.sum(d * r, axis=-1))
                for d, r in zip(self._bonds(position), rates, strict=False)
            ],
        )

    def forces(
        self,
        position: Positions,
        velocity: Float[Array, "n dim"],
        force: Float[Array, "n dim"],
        mass: Masses,
    ) -> Float[Array, "n dim"]:
        """The constraint forces at a state that satisfies the constraints: those that keep
        d_k . (v_i - v_j) at zero, d/dt [d_k . v_k] = |v_k|^2 + d_k . (a_i - a_j) = 0 with
        a = (force + constraint force) / m (centripetal and force-projection parts)."""
        acceleration = force / mass[:, None]
        rhs = []
        for d, group in zip(self._bonds(position), self._groups(), strict=False):
            v = _relative(velocity, group)
            a = _relative(acceleration, group)
            rhs.append(-(jnp.sum(v * v, axis=-1) + jnp.sum(d * a, axis=-1)))
        return mass[:, None] * self._correction(position, mass, rhs)

    def virial(
        self, position: Positions, constraint_force: Float[Array, "n dim"]
    ) -> Float[Array, " dim"]:
        """The diagonal of the virial tensor of constraint forces [dim]: sum_i x_i,a G_i,a
        (the forces of each constraint sum to zero, so the origin does not matter)."""
        return jnp.sum(position * constraint_force, axis=0)

    def centres(self, x: Float[Array, "n dim"], mass: Masses) -> Float[Array, "n dim"]:
        """The mass-weighted mean of `x` (positions or velocities) over each particle's
        rigid group, at every particle of the group [n, dim]."""
        n = mass.shape[0]
        total = jax.ops.segment_sum(mass, self.molecules, num_segments=n)
        moment = jax.ops.segment_sum(mass[:, None] * x, self.molecules, num_segments=n)
        return moment[self.molecules] / total[self.molecules][:, None]

    def _groups(self) -> list[Array]:
        """The constrained pairs as [m, 2] ids: the triangles' three sides (apex-b,
        apex-c, b-c, each [w, 2]) then the SHAKE pairs."""
        groups = []
        if self.triangles.shape[0]:
            t = self.triangles
            groups.append(
                jnp.stack([t[:, [0, 1]], t[:, [0, 2]], t[:, [1, 2]]], axis=1)
            )  # [w, 3, 2]
        if self.pairs.shape[0]:
            groups.append(self._blocks()[0])  # [b, m, 2]
        return groups

    def _bonds(self, position: Positions) -> list[Array]:
        return [_relative(position, p) for p in self._groups()]

    def _correction(self, position: Positions, mass: Masses, rhs: list[Array]) -> Array:
        """The change of velocity (per unit multiplier) w_i sum_k mu_k (+-d_k) whose
        multipliers solve sum_l (d_k . d_l C_kl) mu_l = rhs_k, C the coupling of the
        constraints through shared particles and inverse masses."""
        out = jnp.zeros_like(position)
        inverse = 1.0 / mass
        for d, group, b in zip(self._bonds(position), self._groups(), rhs, strict=False):
            coupling = _coupling(group, inverse)  # [..., m, m]
            matrix = _padded(coupling * jnp.einsum("...ka,...la->...kl", d, d), _padding(group))
            mu = _solve(matrix, b)  # (0 on padding: its bond and right-hand side are 0)
            out = _scatter(out, group, mu[..., None] * d, inverse)
        return out


def _padding(pairs: Array) -> Array:
    """Which entries of the pairs [..., m, 2] are padding: a particle paired with itself."""
    return pairs[..., 0] == pairs[..., 1]


def _padded(matrix: Array, pad: Array) -> Array:
    """`matrix` [..., m, m] with 1 on the diagonal of padding entries (whose rows and
    columns are 0: their bond is a particle with itself)."""
    return matrix + jnp.eye(matrix.shape[-1], dtype=matrix.dtype) * pad[..., None].astype(
        matrix.dtype
    )


def _solve(matrix: Array, rhs: Array) -> Array:
    """x with matrix x = rhs for blocks [..., m, m] and [..., m] (a division for m = 1:
    a batch of 1 x 1 LU factorisations costs many times more)."""
    if matrix.shape[-1] == 1:
        return rhs / matrix[..., 0]
    return jnp.linalg.solve(matrix, rhs[..., None])[..., 0]


def _relative(x: Array, pairs: Array) -> Array:
    """x_i - x_j for the pairs [..., 2]: [..., dim]."""
    return x[pairs[..., 0]] - x[pairs[..., 1]]


def _coupling(pairs: Array, inverse: Array) -> Array:
    """C_kl = w_i_k ([i_k = i_l] - [i_k = j_l]) - w_j_k ([j_k = i_l] - [j_k = j_l]): how a
    multiplier of constraint l along its bond moves the bond of constraint k."""
    i, j = pairs[..., 0], pairs[..., 1]
    same = lambda a, b: (a[..., :, None] == b[..., None, :]).astype(inverse.dtype)  # noqa: E731
    return inverse[i][..., :, None] * (same(i, i) - same(i, j)) - inverse[j][..., :, None] * (
        same(j, i) - same(j, j)
    )


def _scatter(out: Array, pairs: Array, impulse: Array, inverse: Array) -> Array:
    """out with w_i impulse_k added to i_k and -w_j impulse_k to j_k of every pair."""
    i = pairs[..., 0].reshape(-1)
    j = pairs[..., 1].reshape(-1)
    impulse = impulse.reshape(-1, impulse.shape[-1])
    out = out.at[i].add(inverse[i][:, None] * impulse)
    return out.at[j].add(-inverse[j][:, None] * impulse)


# ----------------------------------------------------------------------------- SHAKE


def shake(
    reference: Positions,
    position: Positions,
    mass: Masses,
    pairs: Array,
    lengths: Array,
    tolerance: float,
    max_iterations: int,
) -> Positions:
    """SHAKE in matrix form: position + W A^T lambda with A the reference bond vectors,
    lambda by Newton's method on |d_k(lambda)|^2 = L_k^2 until every relative error is
    below `tolerance` (or `max_iterations`). The pairs [..., m, 2] and lengths [..., m]
    may come in blocks along leading axes, no constraint coupled to one of another block:
    each Newton step then solves one m x m system per block. A pair of a particle with
    itself is padding, which holds nothing (its residual and multiplier are 0).

    Arguments:
        reference: positions [n, dim] whose bond vectors give the directions of the
            corrections (where the drift started).
        position: the unconstrained positions [n, dim].
        mass: masses [n].
        pairs: particle ids [..., m, 2] of the constraints.
        lengths: their distances [..., m] (length unit of the positions).
        tolerance: the largest relative error |r^2 - L^2| / L^2 accepted.
        max_iterations: Newton iterations at most.

    Returns:
        The constrained positions [n, dim].
    """
    inverse = 1.0 / mass
    pad = _padding(pairs)
    s = _relative(reference, pairs)  # directions of the corrections [..., m, dim]
    coupling = _coupling(pairs, inverse)  # [..., m, m]
    target = lengths * lengths
    zero = jnp.zeros(pairs.shape[:-1], position.dtype)

    def moved(lam):
        return _scatter(position, pairs, lam[..., None] * s, inverse)

    def error(lam):
        d = _relative(moved(lam), pairs)
        residual = jnp.sum(d * d, axis=-1) - target
        return jnp.where(pad, 0.0, residual), d

    def unconverged(carry):
        lam, k = carry
        residual, _ = error(lam)
        return (jnp.max(jnp.abs(residual) / target) > tolerance) & (k < max_iterations)

    def newton(carry):
        lam, k = carry
        residual, d = error(lam)
        jacobian = _padded(2.0 * coupling * jnp.einsum("...ka,...la->...kl", d, s), pad)
        return lam - _solve(jacobian, residual), k + 1

    lam, _ = jax.lax.while_loop(unconverged, newton, (zero, jnp.zeros((), jnp.int32)))
    return moved(lam)


# ----------------------------------------------------------------------------- SETTLE


def _unit(v):
    return v / jnp.sqrt(jnp.sum(v * v, axis=-1, keepdims=True))


def _dot(a, b):
    return jnp.sum(a * b, axis=-1)


def settle(
    reference: Positions,
    position: Positions,
    mass: Masses,
    triangles: Array,
    sides: Array,
    bases: Array,
) -> Positions:
    """SETTLE (Miyamoto & Kollman 1992) for every rigid triangle (apex a, corners b, c):
    the positions that SHAKE with corrections along the reference bonds would give,
    in closed form. In the triangle's frame the apex sits ra from the centre of mass
    along the bisector, the corners rb behind it and rc = |b - c| / 2 to either side.

    Arguments:
        reference: positions [n, 3] that give each triangle's reference shape and plane
            (where the drift started).
        position: the unconstrained positions [n, 3].
        mass: masses [n]; the two corners b, c of a triangle have equal masses.
        triangles: particle ids [w, 3] (apex, b, c).
        sides: the two equal sides |apex - b| = |apex - c| [w].
        bases: the bases |b - c| [w].

    Returns:
        The positions [n, 3] with every triangle's particles placed on its constraints
        (the others as in `position`).
    """
    a, b, c = triangles[:, 0], triangles[:, 1], triangles[:, 2]
    ma, mb = mass[a][:, None], mass[b][:, None]
    total = ma + 2.0 * mb
    rc = 0.5 * bases
    height = jnp.sqrt(sides * sides - rc * rc)
    ra = 2.0 * mb[:, 0] * height / total[:, 0]
    rb = height - ra

    a0, b0, c0 = reference[a], reference[b], reference[c]
    a1, b1, c1 = position[a], position[b], position[c]
    centre = (ma * a1 + mb * (b1 + c1)) / total
    a1, b1, c1 = a1 - centre, b1 - centre, c1 - centre
    b0, c0 = b0 - a0, c0 - a0  # the reference shape, from its apex

    z = _unit(jnp.cross(b0, c0))  # normal of the reference plane
    x = _unit(jnp.cross(a1, z))
    y = jnp.cross(z, x)

    xb0, yb0 = _dot(b0, x), _dot(b0, y)
    xc0, yc0 = _dot(c0, x), _dot(c0, y)
    za1 = _dot(a1, z)
    xb1, yb1, zb1 = _dot(b1, x), _dot(b1, y), _dot(b1, z)
    xc1, yc1, zc1 = _dot(c1, x), _dot(c1, y), _dot(c1, z)

    sinphi = za1 / ra
    cosphi = jnp.sqrt(1.0 - sinphi * sinphi)
    sinpsi = (zb1 - zc1) / (2.0 * rc * cosphi)
    cospsi = jnp.sqrt(1.0 - sinpsi * sinpsi)

    ya2 = ra * cosphi
    xb2 = -rc * cospsi
    t1 = -rb * cosphi
    t2 = rc * sinpsi * sinphi
    yb2 = t1 - t2
    yc2 = t1 + t2

    alpha = xb2 * (xb0 - xc0) + yb0 * yb2 + yc0 * yc2
    beta = xb2 * (yc0 - yb0) + xb0 * yb2 + xc0 * yc2
    gamma = xb0 * yb1 - xb1 * yb0 + xc0 * yc1 - xc1 * yc0
    norm = alpha * alpha + beta * beta
    sintheta = (alpha * gamma - beta * jnp.sqrt(norm - gamma * gamma)) / norm
    costheta = jnp.sqrt(1.0 - sintheta * sintheta)

    def place(u, v, w):
        return centre + u[:, None] * x + v[:, None] * y + w[:, None] * z

    a3 = place(-ya2 * sintheta, ya2 * costheta, za1)
    b3 = place(xb2 * costheta - yb2 * sintheta, xb2 * sintheta + yb2 * costheta, zb1)
    c3 = place(-xb2 * costheta - yc2 * sintheta, -xb2 * sintheta + yc2 * costheta, zc1)
    return position.at[a].set(a3).at[b].set(b3).at[c].set(c3)


# ----------------------------------------------------------------------------- building


def constraints_of(
    pairs, lengths, mass, *, settle_triangles: bool = True, tolerance: float = 1e-13
) -> Constraints:
    """Constraints for the pairs [c, 2] at distances [c] of particles of masses [n]
    (concrete arrays): each rigid triangle (three constraints among three particles, two
    equal sides from one apex, equal masses at the other corners) goes to SETTLE unless
    `settle_triangles` is False, the rest to SHAKE.

    Arguments:
        pairs: particle ids [c, 2] (any shape that reshapes to it).
        lengths: the distances of the pairs [c] (length unit of the positions).
        mass: the masses of all particles [n].
        settle_triangles: give the rigid triangles to SETTLE (False: all to SHAKE).
        tolerance: the largest relative error |r^2 - L^2| / L^2 that SHAKE accepts.

    Returns:
        A `Constraints` holding the triangles, the other pairs, each particle's rigid
        group and SHAKE's pairs in one block per molecule (`slots`; None where one
        matrix of all of them costs less to solve).

    Raises:
        ValueError: a different number of pairs and lengths, a pair of a particle with
            itself, a repeated pair, a particle id out of range, or a length that is not
            positive and finite.
    """
    pairs = np.asarray(pairs, dtype=np.int64).reshape(-1, 2)
    lengths = np.asarray(lengths, dtype=float).reshape(-1)
    mass = np.asarray(mass, dtype=float)
    n = mass.shape[0]
    if pairs.shape[0] != lengths.shape[0]:
        raise ValueError(f"constraints: {pairs.shape[0]} pairs but {lengths.shape[0]} lengths")
    if pairs.size and (pairs.min() < 0 or pairs.max() >= n):
        raise ValueError(
            f"constraints: particle ids must be in 0..{n - 1}, got {pairs.min()}..{pairs.max()}"
        )
    if np.any(pairs[:, 0] == pairs[:, 1]):
        raise ValueError("constraints: a particle cannot be constrained to itself")
    keys = {tuple(sorted(p)) for p in pairs.tolist()}
    if len(keys) != pairs.shape[0]:
        raise ValueError("constraints: a pair is constrained twice")
    if not np.all(np.isfinite(lengths) & (lengths > 0)):
        raise ValueError("constraints: every length must be a positive number")
    used = np.zeros(pairs.shape[0], bool)
    triangles, sides, bases = [], [], []
    if settle_triangles:
        by_particle: dict[int, list[int]] = {}
        for k, (i, j) in enumerate(pairs.tolist()):
            by_particle.setdefault(i, []).append(k)
            by_particle.setdefault(j, []).append(k)
        for k, (i, j) in enumerate(pairs.tolist()):  # noqa: B007
            if used[k]:
                continue
            found = _triangle(k, pairs, lengths, mass, by_particle, used)
            if found is not None:
                ids, side, base, ks = found
                triangles.append(ids)
                sides.append(side)
                bases.append(base)
                used[list(ks)] = True
    rest = ~used
    # rigid groups: the connected parts of the constraint graph, each named by its lowest id
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    graph = coo_matrix((np.ones(pairs.shape[0]), (pairs[:, 0], pairs[:, 1])), shape=(n, n))
    _, labels = connected_components(graph, directed=False)
    lowest = np.full(labels.max(initial=-1) + 1, n)
    np.minimum.at(lowest, labels, np.arange(n))
    molecules = lowest[labels]
    # the SHAKE pairs molecule by molecule, in blocks of one molecule each (the matrix of
    # SHAKE is block-diagonal), unless the blocks padded to the largest cost more to
    # solve than one matrix of all
    shaken = np.flatnonzero(rest)
    shaken = shaken[np.argsort(molecules[pairs[shaken, 0]], kind="stable")]
    _, first, counts = np.unique(molecules[pairs[shaken, 0]], return_index=True, return_counts=True)
    slots = None
    if counts.size and counts.size * counts.max() ** 3 <= shaken.size**3:
        slots = np.full((counts.size, counts.max()), -1)
        for b, (start, size) in enumerate(zip(first, counts, strict=False)):
            slots[b, :size] = np.arange(start, start + size)
    return Constraints(
        pairs=jnp.asarray(pairs[shaken].reshape(-1, 2), jnp.int32),
        lengths=jnp.asarray(lengths[shaken]),
        triangles=jnp.asarray(np.asarray(triangles, dtype=np.int64).reshape(-1, 3), jnp.int32),
        sides=jnp.asarray(np.asarray(sides, dtype=float)),
        bases=jnp.asarray(np.asarray(bases, dtype=float)),
        molecules=jnp.asarray(molecules, jnp.int32),
        tolerance=tolerance,
        slots=None if slots is None else jnp.asarray(slots, jnp.int32),
    )


def _triangle(k, pairs, lengths, mass, by_particle, used):
    """The rigid triangle that constraint k closes with two others of its particles, if
    its particles take part in no other constraint and it suits SETTLE."""
    i, j = pairs[k]
    members = {int(i), int(j)}
    ks = set(by_particle[int(i)]) | set(by_particle[int(j)])
    for other in list(ks):
        members |= set(int(p) for p in pairs[other])
    if len(members) != 3:
        return None
    ks = set().union(*(by_particle[m] for m in members))
    if (
        len(ks) != 3
        or any(used[q] for q in ks)
        or any(not {int(p) for p in pairs[q]} <= members for q in ks)
    ):
        return None  # (not three sides of three particles: a chain 0-1-2-3 has ks of 3 too)
    length = {frozenset(int(p) for p in pairs[q]): float(lengths[q]) for q in ks}
    for apex in members:
        b, c = sorted(members - {apex})
        side_b, side_c = length[frozenset((apex, b))], length[frozenset((apex, c))]
        base = length[frozenset((b, c))]
        if (
            math.isclose(side_b, side_c, rel_tol=1e-12)
            and math.isclose(mass[b], mass[c], rel_tol=1e-12)
            and base < 2 * side_b
        ):
            return (apex, b, c), side_b, base, ks
    return None
