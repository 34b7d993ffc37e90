"""The reaction rates and species rates of a large SBML model as array operations.

Traced one expression per reaction, a model of hundreds of reactions becomes a program
of tens of thousands of scalar operations, and the Jacobian an implicit solver takes of
it (one tangent per state) one of millions: Chen et al. 2009 (500 species, 827
reactions) did not compile in 20 GB. Here reactions whose kinetic laws have the same
form (the same tree of operations and numbers, read on different ids: mass action
`cyt * (k1 * A * B - k2 * AB)` for hundreds of reactions) form a group, evaluated once
on arrays: each place of the form where an id is read gathers, for every reaction of
the group, the value it reads there. The species' rates are then one gather of the
rates and one segment sum over the stoichiometry (in the order the per-reaction sum
adds them).

Nothing here knows SBML's document: `law_shape` and `slot_names` read a libsbml math
tree, and the rest works on the closures and index arrays `_sbml` gives it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np


def slot(k: int) -> str:
    """The key under which a form reads its k-th id (no SBML id can take it)."""
    return f"@slot{k}"


def _walk(node):
    """The nodes of a math tree in one fixed order (depth first, children in order)."""
    stack = [node]
    while stack:
        current = stack.pop()
        yield current
        stack.extend(current.getChild(i) for i in reversed(range(current.getNumChildren())))


def law_shape(libsbml, node) -> tuple[tuple, list[str]]:
    """The form of a formula (its nodes' types and arities, its numbers and the functions
    it calls, with the ids it reads left out) and the ids it reads, in the order of
    `_walk`: two formulas of the same form differ only in those ids."""
    numbers = (libsbml.AST_INTEGER, libsbml.AST_REAL, libsbml.AST_REAL_E, libsbml.AST_RATIONAL)
    shape, names = [], []
    for n in _walk(node):
        kind = n.getType()
        if kind == libsbml.AST_NAME:
            names.append(n.getName())
            shape.append((kind,))
        elif kind in numbers:
            shape.append((kind, float(n.getValue()), n.getNumChildren()))
        elif kind == libsbml.AST_FUNCTION:
            shape.append((kind, n.getName(), n.getNumChildren()))
        else:
            shape.append((kind, n.getNumChildren()))
    return tuple(shape), names


def slot_names(libsbml, node):
    """A copy of a formula whose k-th id read (in the order of `_walk`) is `slot(k)`."""
    copy = node.deepCopy()
    k = 0
    for n in _walk(copy):
        if n.getType() == libsbml.AST_NAME:
            n.setName(slot(k))
            k += 1
    return copy


@dataclasses.dataclass(frozen=True, eq=False)
class Group:
    """Reactions whose kinetic laws share a form: `law` computes the form from the values
    by slot (arrays, one entry per reaction) and time; `reads[k]` indexes, for each
    reaction, the value its k-th slot reads."""

    law: Callable[[dict[str, Any]], Any]
    reads: tuple[np.ndarray, ...]
    size: int

    def rates(self, read, time_key: str, t) -> jax.Array:
        values = {time_key: t, **{slot(k): read[index] for k, index in enumerate(self.reads)}}
        out = self.law(values)
        return jnp.broadcast_to(
            jnp.asarray(
                jnp.where(out, 1.0, 0.0) if getattr(out, "dtype", None) == jnp.bool_ else out, float
            ),
            (self.size,),
        )


@dataclasses.dataclass(frozen=True, eq=False)
class VectorRates:
    """The rates of an imported model's reactions and species as arrays.

    Attributes:
        groups: the grouped reactions' forms; their rates come first in the vector of
            all rates, group after group.
        grouped: the ids of those reactions, in that order.
        single: the other reactions, whose rates the per-reaction program computes
            (they follow in the vector of rates).
        species_rows [m]: the state rows of the species changed by reactions or events
            (their state is the amount); `species_ids` [m] their ids.
        per_size [m]: index into `compartments` of each such species' compartment, or
            -1 for a species whose symbol is its amount.
        compartments: the compartments that divide amounts.
        others: the ids (not among `species_ids`) that a group reads; the vector a
            group gathers from is the species' values, then these.
        term_rows, term_rates, term_coefficients [nnz]: each stoichiometric term of a
            species' rate (state row, position of the reaction in the vector of rates,
            sign times stoichiometry), in the order the per-reaction sum adds them.
        variable_terms: (position among the terms, sign, stoichiometry) of the terms
            whose stoichiometry is computed (its coefficient replaced at each call).
        factors: per state row, the id of the species' conversion factor ('' for none),
            or () when no species has one.
    """

    groups: tuple[Group, ...]
    grouped: tuple[str, ...]
    single: tuple[str, ...]
    species_rows: np.ndarray
    species_ids: tuple[str, ...]
    per_size: np.ndarray
    compartments: tuple[str, ...]
    others: tuple[str, ...]
    term_rows: np.ndarray
    term_rates: np.ndarray
    term_coefficients: np.ndarray
    variable_terms: tuple[tuple[int, float, Callable], ...]
    factors: tuple[str, ...]

    def species_values(self, y, values) -> jax.Array:
        """The SBML values [m] of the species in the state: amount / compartment size,
        or the amount itself."""
        amounts = y[self.species_rows]
        if not self.compartments:
            return amounts
        sizes = jnp.stack(
            [*(jnp.asarray(values[c], y.dtype) for c in self.compartments), jnp.ones((), y.dtype)]
        )
        divide = np.where(self.per_size < 0, len(self.compartments), self.per_size)
        return jnp.where(self.per_size < 0, amounts, amounts / sizes[divide])

    def rates(self, species, values, time_key: str, t) -> jax.Array:
        """The vector of every reaction's rate: the groups', then the single ones'."""
        read = species
        if self.others:
            read = jnp.concatenate(
                [species, jnp.stack([jnp.asarray(values[i], species.dtype) for i in self.others])]
            )
        parts = [g.rates(read, time_key, t) for g in self.groups]
        if self.single:
            parts.append(jnp.stack([jnp.asarray(values[r], species.dtype) for r in self.single]))
        return jnp.concatenate(parts)

    def species_rates(self, rates, values, n: int) -> jax.Array:
        """d(amount)/dt [n] of every state row: the sum of coefficient times rate over
        each species' terms (zero for rows that are no such species), times the
        conversion factor."""
        coefficients = jnp.asarray(self.term_coefficients, rates.dtype)
        if self.variable_terms:
            where = np.asarray([k for k, _, _ in self.variable_terms])
            computed = jnp.stack(
                [
                    jnp.asarray(sign * stoichiometry(values), rates.dtype)
                    for _, sign, stoichiometry in self.variable_terms
                ]
            )
            coefficients = coefficients.at[where].set(computed)
        out = jax.ops.segment_sum(
            coefficients * rates[self.term_rates], self.term_rows, num_segments=n
        )
        if self.factors:
            out = out * jnp.stack(
                [jnp.asarray(values[f] if f else 1.0, rates.dtype) for f in self.factors]
            )
        return out
