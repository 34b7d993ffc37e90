"""Geometry: free space or a periodic orthorhombic box, passed to every energy function."""

from __future__ import annotations

import abc
from typing import ClassVar

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Float

from ._types import Edges, Positions, Scalar, ScalarLike


class Space(eqx.Module):
    """Where particles live: how displacements are measured and how big the box is."""

    periodic: ClassVar[bool]

    @property
    @abc.abstractmethod
    def dim(self) -> int:
        """Number of spatial dimensions."""

    @property
    @abc.abstractmethod
    def box(self) -> Edges | None:
        """Edge lengths [dim] of a periodic box, None in free space."""

    @abc.abstractmethod
    def displacement(self, dr: Float[Array, "*batch dim"]) -> Float[Array, "*batch dim"]:
        """The displacement to use for a raw difference of positions `dr`."""

    @abc.abstractmethod
    def displacement_component(self, dx: Array, axis: int) -> Array:
        """`displacement` for one Cartesian component `axis` of raw differences `dx`."""

    @abc.abstractmethod
    def volume(self) -> Scalar:
        """Volume (area in 2-D); NaN in free space."""

    @abc.abstractmethod
    def scaled(self, factor: ScalarLike) -> Space:
        """The space with every length multiplied by `factor`."""

    def wrap(self, position: Positions) -> Positions:
        """Positions mapped into the box (unchanged in free space)."""
        return position


class Free(Space):
    """Open space without boundaries (clusters, molecules in vacuum).

    Arguments:
        dim: number of dimensions (2 or 3).
    """

    ndim: int = eqx.field(static=True, default=3)
    periodic: ClassVar[bool] = False

    @property
    def dim(self) -> int:
        return self.ndim

    @property
    def box(self) -> None:
        return None

    def displacement(self, dr):
        return dr

    def displacement_component(self, dx, axis):
        return dx

    def volume(self) -> Scalar:
        return jnp.asarray(jnp.nan)

    def scaled(self, factor) -> Free:
        return self


class Periodic(Space):
    """A periodic orthorhombic box [0, L_1) x ... x [0, L_dim) with minimum-image displacements.

    Arguments:
        edges: edge lengths [dim] (positive).

    Example:
        >>> space = Periodic(jnp.array([10.0, 10.0, 10.0]))
    """

    edges: Edges
    periodic: ClassVar[bool] = True

    def __init__(self, edges):
        edges = jnp.asarray(edges)
        if edges.ndim != 1 or edges.shape[0] not in (1, 2, 3):
            raise ValueError(
                f"box edges must be a vector of 1 to 3 lengths, got shape {edges.shape}"
            )
        if not jnp.issubdtype(edges.dtype, jnp.floating):
            edges = edges.astype(float)
        self.edges = edges

    @property
    def dim(self) -> int:
        return self.edges.shape[0]

    @property
    def box(self) -> Edges:
        return self.edges

    def displacement(self, dr):
        return dr - self.edges * jnp.floor(dr / self.edges + 0.5)

    def displacement_component(self, dx, axis):
        edge = self.edges[axis]
        return dx - edge * jnp.floor(dx / edge + 0.5)

    def volume(self) -> Scalar:
        return jnp.prod(self.edges)

    def scaled(self, factor) -> Periodic:
        return Periodic(self.edges * factor)

    def wrap(self, position: Positions) -> Positions:
        return jnp.mod(position, self.edges)
