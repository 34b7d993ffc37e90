"""Array shape aliases shared by the solvers package."""

from jaxtyping import Array, Float

Times = Float[Array, " T"]
