"""Reaction networks in molecule counts under mass-action kinetics (`MassAction`), and
reactions as written, "S + I -> 2 I" (`parse_reactions`).

A network of S species and R reactions is the reactant and product counts of each
reaction; its propensities a_r(x) are k_r times the number of distinct sets of reactant
molecules, C(x_s, n_rs) per species (Gillespie, J. Phys. Chem. 81, 2340 (1977)).
`solvers.gillespie` simulates its paths exactly; `rates_of_change` gives the reaction rate
equations and `noise` the chemical Langevin equation's diffusion, both in counts with the
same rate constants.
"""

from __future__ import annotations

import math
import re

import equinox as eqx
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int


def _table(rows) -> tuple[tuple[int, ...], ...]:
    """A [reactions, species] table of whole numbers as nested tuples (a static field)."""
    array = np.asarray(rows)
    if array.ndim != 2 or not np.issubdtype(array.dtype, np.integer):
        raise ValueError(f"expected a [reactions, species] table of whole numbers, got {rows!r}")
    return tuple(tuple(int(v) for v in row) for row in array)


class MassAction(eqx.Module):
    """A reaction network under mass-action kinetics, in molecule counts.

    Arguments:
        reactants: [R, S] how many of each species a reaction consumes.
        products: [R, S] how many it makes.

    Example:
        >>> birth_death = MassAction(reactants=[[0], [1]], products=[[1], [0]])
        >>> birth_death.propensities(jnp.asarray([5]), jnp.asarray([10.0, 1.0]))  # [10, 5]
    """

    reactants_table: tuple[tuple[int, ...], ...] = eqx.field(static=True, converter=_table)
    products_table: tuple[tuple[int, ...], ...] = eqx.field(static=True, converter=_table)

    def __init__(self, reactants, products):
        self.reactants_table = reactants
        self.products_table = products

    def __check_init__(self):
        r, p = self.reactants, self.products
        if r.ndim != 2 or r.shape != p.shape or r.shape[0] < 1:
            raise ValueError(
                "reactants and products must be [reactions, species] tables of one shape, got "
                f"{r.shape} and {p.shape}"
            )
        if np.any(r < 0) or np.any(p < 0):
            raise ValueError("reactant and product counts must be whole numbers >= 0")

    @property
    def reactants(self) -> np.ndarray:
        """[R, S]: how many of each species each reaction consumes."""
        return np.asarray(self.reactants_table, int).reshape(len(self.reactants_table), -1)

    @property
    def products(self) -> np.ndarray:
        """[R, S]: how many of each species each reaction makes."""
        return np.asarray(self.products_table, int).reshape(len(self.products_table), -1)

    @property
    def stoichiometry(self) -> np.ndarray:
        """[R, S]: the change of the counts when each reaction fires."""
        return self.products - self.reactants

    def _sparse(self) -> tuple[np.ndarray, np.ndarray]:
        """Each reaction's reactant species and counts, padded to the most any reaction
        has ([R, K] each; padding: species 0, count 0)."""
        r = self.reactants
        k = max(1, int(np.max(np.sum(r > 0, axis=1))))
        species = np.zeros((r.shape[0], k), int)
        counts = np.zeros((r.shape[0], k), int)
        for i, row in enumerate(r):
            nonzero = np.flatnonzero(row)
            species[i, : nonzero.size] = nonzero
            counts[i, : nonzero.size] = row[nonzero]
        return species, counts

    def propensities(self, x: Int[Array, " S"], rates: Float[Array, " R"]) -> Float[Array, " R"]:
        """a_r(x) = k_r prod_s C(x_s, n_rs): the rate constants times the number of
        distinct combinations of reactant molecules (0 where too few are left). One
        vectorised program whatever the number of reactions: each reaction's few
        reactants gathered, C(x, n) as prod_{m < n} (x - m) / (m + 1)."""
        species, counts = self._sparse()
        most = max(1, int(counts.max()))
        dtype = rates.dtype
        m = np.arange(most)
        count = x.astype(dtype)[species][..., None]  # [R, K, 1]
        factor = jnp.maximum(count - m.astype(dtype), 0.0) / (m + 1).astype(dtype)  # [R, K, M]
        factor = jnp.where(m < counts[..., None], factor, 1.0)
        return rates * jnp.prod(factor, axis=(1, 2))

    def continuous_propensities(
        self, x: Float[Array, " S"], rates: Float[Array, " R"]
    ) -> Float[Array, " R"]:
        """a_r(x) = k_r prod_s x_s^n_rs / n_rs! for counts taken as real numbers (the
        propensities of many molecules, where C(x, n) -> x^n / n!), negative counts read
        as 0."""
        species, counts = self._sparse()
        dtype = rates.dtype
        level = jnp.maximum(x.astype(dtype), 0.0)[species]  # [R, K]
        fact = np.asarray([math.factorial(int(c)) for c in counts.ravel()]).reshape(counts.shape)
        terms = level ** counts.astype(dtype) / fact.astype(dtype)
        return rates * jnp.prod(terms, axis=1)

    def rates_of_change(
        self, x: Float[Array, " S"], rates: Float[Array, " R"]
    ) -> Float[Array, " S"]:
        """dx/dt = nu^T a(x): the reaction rate equations in molecule counts, with the
        rate constants of the stochastic network (`continuous_propensities`)."""
        a = self.continuous_propensities(x, rates)
        return jnp.asarray(self.stoichiometry.T, a.dtype) @ a

    def noise(self, x: Float[Array, " S"], rates: Float[Array, " R"]) -> Float[Array, "S R"]:
        """The chemical Langevin equation's diffusion, nu^T diag(sqrt(a(x))) [S, R]:
        dx = nu^T a dt + nu^T diag(sqrt(a)) dW with one Wiener process per reaction
        (Gillespie, J. Chem. Phys. 113, 297 (2000))."""
        a = self.continuous_propensities(x, rates)
        return jnp.asarray(self.stoichiometry.T, a.dtype) * jnp.sqrt(a)[None, :]


_TERM = re.compile(r"\s*(?:(\d+)\s*)?([A-Za-z_][A-Za-z0-9_]*)\s*$")


def _side(text: str, reaction: str) -> dict[str, int]:
    """The species counts of one side of a reaction ("0" or "" for none)."""
    if text.strip() in ("0", "", "\u2205"):
        return {}
    counts: dict[str, int] = {}
    for term in text.split("+"):
        match = _TERM.match(term)
        if match is None:
            raise ValueError(
                f"reaction {reaction!r}: {term.strip()!r} is not a species with an optional "
                "whole-number count (such as '2 I')"
            )
        count = int(match.group(1)) if match.group(1) is not None else 1
        if count < 1:
            raise ValueError(f"reaction {reaction!r}: {term.strip()!r} counts no molecule")
        counts[match.group(2)] = counts.get(match.group(2), 0) + count
    return counts


def parse_reactions(reactions: list[str], species: list[str] | None = None) -> MassAction:
    """A `MassAction` network from reactions written as "S + I -> 2 I" (a side "0" for
    none; a species repeated on one side counts twice).

    Arguments:
        reactions: one string per reaction.
        species: the species in their order (None: in the order they first appear).

    Raises:
        ValueError: a malformed reaction or an unknown species, in one line naming it.
    """
    sides = []
    for reaction in reactions:
        parts = reaction.split("->")
        if len(parts) != 2:
            raise ValueError(f"reaction {reaction!r}: expected one '->' between two sides")
        sides.append((_side(parts[0], reaction), _side(parts[1], reaction)))
    if species is None:
        species = list(dict.fromkeys(n for left, right in sides for n in (*left, *right)))
    known = set(species)
    for reaction, (left, right) in zip(reactions, sides, strict=True):
        unknown = sorted((set(left) | set(right)) - known)
        if unknown:
            raise ValueError(
                f"reaction {reaction!r}: unknown species {', '.join(unknown)} (species: "
                f"{', '.join(species)})"
            )

    def table(counts: list[dict[str, int]]) -> list[list[int]]:
        return [[c.get(name, 0) for name in species] for c in counts]

    return MassAction(table([left for left, _ in sides]), table([right for _, right in sides]))
