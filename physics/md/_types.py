"""Array shape aliases of the particle models."""

from jaxtyping import Array, Float, Int

Positions = Float[Array, "n dim"]
Velocities = Float[Array, "n dim"]
Forces = Float[Array, "n dim"]
Masses = Float[Array, " n"]
Species = Int[Array, " n"]
Bonds = Int[Array, "b 2"]
Edges = Float[Array, " dim"]
NeighbourIndex = Int[Array, "n k"]
"""Dense neighbour ids, row i listing the particles near i, padded with n."""
Scalar = Float[Array, ""]
ScalarLike = Float[Array, ""] | float
