"""Array shape aliases shared by the physics package."""

from jaxtyping import Array, Float, Shaped

Scalar = Float[Array, ""] | float
State = Float[Array, " n"]
