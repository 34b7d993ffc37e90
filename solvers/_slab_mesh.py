"""The mesh part of a model's forces (particle-mesh Ewald) in a run split by slabs: the
mesh cut into slabs of its first axis that lie over the particles' slabs, each device
with a few planes more on either side, and the distributed real FFT of
`solvers._spectral_sharded` between them.

Each device spreads the charges of its own particles on its planes and the planes around
them: the B-spline of order p reaches p - 1 planes below a particle's plane, and a
particle may have moved half the list's skin past its slab's faces since the last build
(then it migrates). The planes around are added to the neighbours' own planes (one
`ppermute` each way), the devices transform the mesh together (one all-to-all), each
weighs its block of modes (the model's `on_modes`), the potential's transform goes back
(one all-to-all), each device receives the potential on the planes around its own (one
`ppermute` each way) and computes the forces on its own particles from it. The energy
and the virial are sums over the devices' blocks of modes.
"""

from __future__ import annotations

import dataclasses
import math

import jax
import jax.numpy as jnp
from jaxtyping import Array

from ._spectral_sharded import SLAB_AXIS, split_irfftn, split_modes, split_rfftn


@dataclasses.dataclass(frozen=True)
class SlabMesh:
    """The mesh of `points` cut into `devices` slabs of its first axis, each device holding
    its own planes and `below` and `above` planes on either side (none on one device:
    the mesh then wraps onto itself)."""

    points: tuple[int, ...]
    devices: int
    below: int
    above: int

    @classmethod
    def around(cls, points: tuple[int, ...], devices: int, edge: float, skin: float, order: int):
        """The slabs for a box of first edge `edge`, a list of skin `skin` and B-splines of
        order `order`.

        Raises:
            ValueError: slabs of the mesh thinner than the planes around them, in one line.
        """
        if points[0] % devices:
            raise ValueError(f"a mesh of {points[0]} planes does not split into {devices} slabs")
        if devices == 1:
            return cls(tuple(points), 1, 0, 0)
        drift = math.ceil(0.5 * skin / (edge / points[0]))
        below, above = drift + order, drift + 1
        own = points[0] // devices
        if max(below, above) > own or own + below + above > points[0]:
            raise ValueError(
                f"a mesh of {points[0]} planes split into {devices} slabs gives {own} planes a "
                f"slab, fewer than the {below} + {above} around it that B-splines of order "
                f"{order} and the skin {skin:g} reach; use fewer slabs or a finer mesh"
            )
        return cls(tuple(points), devices, below, above)

    @property
    def own(self) -> int:
        """Planes of the mesh a device owns."""
        return self.points[0] // self.devices

    @property
    def planes(self) -> int:
        """Planes a device spreads its charges on."""
        return self.own + self.below + self.above

    def _first(self) -> Array:
        """The global index of the calling device's first plane."""
        if self.devices == 1:
            return jnp.asarray(0, jnp.int32)
        return jax.lax.axis_index(SLAB_AXIS).astype(jnp.int32) * self.own - self.below

    def _shift(self, x: Array, step: int) -> Array:
        """`x` of the device `step` places below (step 1: from the device below)."""
        p = self.devices
        return jax.lax.ppermute(x, SLAB_AXIS, [(d, (d + step) % p) for d in range(p)])

    def _fold(self, q: Array) -> Array:
        """A device's own planes of the mesh, the planes the neighbours spread around it
        added to them."""
        if self.devices == 1:
            return q
        b, o = self.below, self.own
        own = q[b : b + o]
        from_above = self._shift(q[:b], -1)  # (the device above's planes below it)
        from_below = self._shift(q[b + o :], 1)
        return own.at[o - b :].add(from_above).at[: self.above].add(from_below)

    def _extend(self, phi: Array) -> Array:
        """A device's planes of the potential and the neighbours' planes around them."""
        if self.devices == 1:
            return phi
        below = self._shift(phi[self.own - self.below :], 1)
        above = self._shift(phi[: self.above], -1)
        return jnp.concatenate([below, phi, above])

    def _transform(self, part, position: Array, charges: Array, edges: Array):
        """This device's block of the transform of the whole charge mesh, and its modes."""
        q = part.spread(position, charges, edges, self._first(), self.planes)
        transform = split_rfftn(self._fold(q), self.points, self.devices)
        return transform, split_modes(self.points, self.devices)

    def forces(self, part, position: Array, charges: Array, edges: Array) -> Array:
        """Inside `jax.shard_map` over `SLAB_AXIS`: the forces of the mesh part `part` (a
        `physics.md.MeshEwald`) on the calling device's own particles (positions and
        charges; an empty slot has charge 0)."""
        transform, modes = self._transform(part, position, charges, edges)
        potential = part.potential(transform, modes, edges)
        phi = self._extend(split_irfftn(potential, self.points, self.devices))
        return part.forces(position, charges, edges, self._first(), phi)

    def energy(self, part, position: Array, charges: Array, edges: Array):
        """Inside `jax.shard_map` over `SLAB_AXIS`: the mesh part's whole energy and
        dU / d lambda per axis (summed over the devices)."""
        sums = part.on_modes(*self._transform(part, position, charges, edges), edges)
        return jax.lax.psum(sums, SLAB_AXIS) if self.devices > 1 else sums
