"""The reciprocal part of smooth particle-mesh Ewald as the pieces a run split over devices
computes (`MeshEwald`): each device spreads its own charges on the mesh planes around its
slab, the devices add their planes and transform the mesh together, each weighs its block
of modes, and the potential on the mesh, transformed back, gives each device the forces on
its own particles.

With F the transform of the charge mesh Q (`numpy.fft.fftn`'s sign and no factor), the
energy of SPME (Essmann et al., J. Chem. Phys. 103, 8577 (1995), eq. 4.7) is

    U = c sum_m W(m) |F(m)|^2,   c = 1 / (2 pi V),
    W(m) = exp(-pi^2 |m|^2 / alpha^2) / |m|^2 B(m)   (0 at m = 0),

over the whole spectrum. Its derivative with respect to the mesh, the potential
phi = dU / dQ = 2 c K ifftn(W F) (K the number of mesh points), is real, and the force on
a particle is minus the derivative of sum_x Q(x) phi(x) with respect to its position at
phi fixed, through the B-spline weights that spread its charge. The virial's diagonal is
minus dU / d lambda_a under the stretch x_a -> lambda_a x_a, L_a -> lambda_a L_a, which
leaves Q (fractional coordinates) and changes W and V only.
"""

from __future__ import annotations

import math

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Inexact, Int, PyTree

from ._electrostatics import bspline_moduli, self_energy, spread_charges
from ._types import Edges, Forces, Positions, Scalar


class MeshEwald(eqx.Module):
    """SPME's reciprocal part of a sized `LennardJonesCoulomb` in pieces (the module's
    docstring). Mesh planes along the first axis are addressed from `first`, the global
    index of a device's first plane: a device holding `planes` planes from `first` keeps
    the charges that fall there (the others are dropped).

    Arguments:
        alpha: the Ewald splitting parameter.
        mesh: mesh points per axis (K_x, K_y, K_z).
        order: the B-spline order of the spreading.
        coulomb: Coulomb's constant of the model's units.
    """

    alpha: float = eqx.field(static=True)
    mesh: tuple[int, ...] = eqx.field(static=True)
    order: int = eqx.field(static=True)
    coulomb: float = eqx.field(static=True, default=1.0)

    def charges(self, params: PyTree, species: Int[Array, " n"], dtype) -> Float[Array, " n"]:
        """Each particle's charge times sqrt(Coulomb's constant), from its species."""
        q = jnp.asarray(params["charges"]).astype(dtype)
        return q[species] * math.sqrt(self.coulomb)

    def self_energy(self, charges: Float[Array, " n"]) -> Scalar:
        """The Ewald self energy -alpha / sqrt(pi) sum_i q_i^2 of charges from `charges`."""
        return self_energy(charges, self.alpha)

    def spread(
        self, position: Positions, charges: Float[Array, " n"], edges: Edges, first, planes: int
    ) -> Float[Array, "planes k1 k2"]:
        """The charge mesh on the `planes` planes from plane `first` (`spread_charges`)."""
        return spread_charges(position, charges, edges, self.mesh, self.order, first, planes)

    def _weights(self, modes: tuple[Array, ...], edges: Edges) -> Array:
        """c W(m) on the modes (the module's docstring)."""
        dtype = edges.dtype
        m2 = sum((n.astype(dtype) / edges[a]) ** 2 for a, n in enumerate(modes))
        b = 1.0
        for n, size in zip(modes, self.mesh, strict=True):
            b = b * jnp.asarray(bspline_moduli(size, self.order), dtype)[jnp.mod(n, size)]
        origin = m2 == 0
        safe = jnp.where(origin, 1.0, m2)
        influence = jnp.where(origin, 0.0, jnp.exp(-(math.pi**2) * safe / self.alpha**2) / safe)
        return influence * b / (2.0 * math.pi * jnp.prod(edges))

    def _times(self, modes: tuple[Array, ...], dtype) -> Array:
        """How many modes of the whole spectrum each mode of the half spectrum stands for:
        1 on the planes n_z = 0 and n_z = K_z / 2, 2 elsewhere."""
        last, size = modes[-1], self.mesh[-1]
        once = (last == 0) | ((size % 2 == 0) & (last == size // 2))
        return jnp.where(once, 1.0, 2.0).astype(dtype)

    def on_modes(
        self, transform: Inexact[Array, "..."], modes: tuple[Array, ...], edges: Edges
    ) -> tuple[Scalar, Float[Array, " 3"]]:
        """What a block of modes of the real transform of Q (the half spectrum, last axis
        n_z >= 0) contributes to U and to dU / d lambda per axis.

        Arguments:
            transform: a block of `numpy.fft.rfftn(Q)` (any modes; zeros count nothing).
            modes: the signed mode numbers per axis of the block, broadcasting against it.
            edges: the box edges [3].
        """
        power = jnp.real(transform) ** 2 + jnp.imag(transform) ** 2
        times = self._times(modes, edges.dtype)
        energy = lambda s: jnp.sum(times * self._weights(modes, edges * s) * power)  # noqa: E731
        ones = jnp.ones(3, edges.dtype)
        return energy(ones), jax.grad(energy)(ones)

    def potential(
        self, transform: Inexact[Array, "..."], modes: tuple[Array, ...], edges: Edges
    ) -> Inexact[Array, "..."]:
        """The transform of the potential phi on a block of modes of the real transform
        of Q (as `on_modes`): the inverse real transform of the whole gives phi."""
        weights = (2.0 * math.prod(self.mesh)) * self._weights(modes, edges)
        return weights.astype(transform.dtype) * transform

    def forces(
        self,
        position: Positions,
        charges: Float[Array, " n"],
        edges: Edges,
        first,
        potential: Float[Array, "planes k1 k2"],
    ) -> Forces:
        """The forces on the particles from the potential phi on the planes from `first`
        (which must hold every point their charges spread to)."""
        planes = potential.shape[0]
        gain = lambda r: jnp.sum(self.spread(r, charges, edges, first, planes) * potential)
        return -jax.grad(gain)(position)


def mesh_with_first(mesh: tuple[int, ...], multiple: int, smooth) -> tuple[int, ...]:
    """`mesh` with its first size raised to the next 2-3-5 size that `multiple` divides."""
    first = mesh[0]
    while first % multiple:
        first = smooth(first + 1)
    return (first, *mesh[1:])
