"""Array shape aliases shared by the physics package."""

from jaxtyping import Array, Float

Scalar = Float[Array, ""] | float
State = Float[Array, " n"]
