"""The rates of an imported SBML model's state: reactions, stoichiometries, rate rules.

`state_rates` gives one function per state component: a species changed by reactions
changes at the sum of stoichiometry times rate over its reactions (times its conversion
factor), a rate rule's target at its rule's rate, what only events change not at all.
`vector_rates` gives the same species' rates for a large model as arrays: its reactions
grouped by the form of their kinetic laws and one sum over the stoichiometry
(`_sbml_vector` evaluates them).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ._sbml_document import SbmlDocument
from ._sbml_math import Compiled, SbmlError, _num
from ._sbml_vector import Group, VectorRates, law_shape, slot_names


def stoichiometry(doc: SbmlDocument, ref) -> Compiled:
    """The stoichiometry of a species reference as a function of the values: its id's
    value, its math, or the number it gives."""
    if ref.isSetId() and ref.getId():
        rid = ref.getId()
        return lambda v, _r=rid: v[_r]
    if ref.isSetStoichiometryMath() and ref.getStoichiometryMath().getMath() is not None:
        return doc.compiler("stoichiometry").compile(ref.getStoichiometryMath().getMath())
    value = ref.getStoichiometry() if ref.isSetStoichiometry() or doc.level == 2 else 1.0
    return lambda v, _x=float(value): _x


def state_rates(doc: SbmlDocument, state: list[str], ids: set[str]) -> list[Compiled]:
    """d(state)/dt, one function of the values per state component.

    Raises:
        SbmlError: a rate rule that reads no id of the model (of `ids`).
    """
    terms = _reaction_terms(doc)
    rates: list[Compiled] = []
    for key in state:
        if key.startswith("@amount:"):
            rates.append(_species_rate(doc, key.removeprefix("@amount:"), terms))
        elif key not in doc.rate_rules:  # (changed by events only)
            rates.append(lambda v: 0.0)
        else:
            c = doc.compiler(f"rate rule for {key!r}")
            rates.append(c.compile(doc.rate_rules[key].getMath()))
            for dep in c.names(doc.rate_rules[key].getMath()):
                if dep not in ids:
                    raise SbmlError(
                        f"{doc.name}: rate rule for {key!r} reads {dep!r}, which is no id of "
                        "the model"
                    )
    return rates


def _reaction_terms(doc: SbmlDocument) -> dict[str, list[tuple[float, Compiled, Compiled]]]:
    """(sign, stoichiometry, rate) of each reaction that changes a species, by species,
    in the order of the reactions (reactants before products)."""
    terms: dict[str, list[tuple[float, Compiled, Compiled]]] = {
        sid: [] for sid in doc.changed_by_reactions
    }
    for reaction in doc.reactions:
        rid = reaction.getId()
        for sign, refs in (
            (-1.0, reaction.getListOfReactants()),
            (1.0, reaction.getListOfProducts()),
        ):
            for ref in refs:
                if ref.getSpecies() in terms:
                    terms[ref.getSpecies()].append(
                        (sign, stoichiometry(doc, ref), lambda v, _r=rid: v[_r])
                    )
    return terms


def _species_rate(doc: SbmlDocument, sid: str, terms: dict) -> Compiled:
    """The rate of change of a species' amount: its reaction terms summed, times its
    conversion factor."""
    factor_id = doc.conversion_factor(sid)
    parts = terms.get(sid, [])  # (none for a species only events change)

    def rate(v):
        total = 0.0
        for sign, stoich, flux in parts:
            total = total + sign * _num(stoich(v)) * _num(flux(v))
        return total * v[factor_id] if factor_id else total

    return rate


def vector_rates(
    doc: SbmlDocument,
    state: list[str],
    derived_fns: dict[str, Compiled],
    derived_deps: dict[str, set[str]],
) -> VectorRates | None:
    """The model's reactions grouped by the form of their kinetic laws, and its species'
    rates as a sum over the stoichiometry (see `_sbml_vector`), or None when no two
    kinetic laws share a form. A reaction whose rate another formula of the right-hand
    side reads stays on its own (its rate must exist before that formula runs). Only
    the species whose amount reactions change have terms."""
    species = doc.species
    row_of = {key: i for i, key in enumerate(state)}
    species_rows = [
        (row_of[f"@amount:{sid}"], sid) for sid in species if f"@amount:{sid}" in row_of
    ]
    compartments = sorted(
        {species[sid].getCompartment() for _, sid in species_rows if not doc.amount_valued(sid)}
    )
    if any(c in derived_fns for c in compartments):
        return (
            None  # (a compartment an assignment rule sizes is computed among the species' values)
        )
    members = _same_forms(doc, derived_deps)
    if not members:
        return None
    species_ids = tuple(sid for _, sid in species_rows)
    others, groups = _groups(doc, members, species_ids)
    grouped = tuple(rid for group in members for rid, _, _ in group)
    single = tuple(r.getId() for r in doc.reactions if r.getId() not in set(grouped))
    rate_position = {rid: j for j, rid in enumerate(grouped + single)}
    rows, positions, coefficients, variable = _stoichiometry_terms(doc, row_of, rate_position)
    factors = tuple(
        doc.conversion_factor(key.removeprefix("@amount:")) if key.startswith("@amount:") else ""
        for key in state
    )
    return VectorRates(
        groups=tuple(groups),
        grouped=grouped,
        single=single,
        species_rows=np.asarray([r for r, _ in species_rows], dtype=int),
        species_ids=species_ids,
        per_size=np.asarray(
            [
                -1 if doc.amount_valued(sid) else compartments.index(species[sid].getCompartment())
                for sid in species_ids
            ],
            dtype=int,
        ),
        compartments=tuple(compartments),
        others=tuple(others),
        term_rows=np.asarray(rows, dtype=int),
        term_rates=np.asarray(positions, dtype=int),
        term_coefficients=np.asarray(coefficients, dtype=float),
        variable_terms=tuple(variable),
        factors=factors if any(factors) else (),
    )


def _same_forms(
    doc: SbmlDocument, derived_deps: dict[str, set[str]]
) -> list[list[tuple[str, Any, list[str]]]]:
    """The groups of two or more reactions whose kinetic laws share a form (`law_shape`),
    each reaction as (id, law, the ids its slots read); the reactions whose rate a
    formula reads are left out."""
    read_by_formulas = set().union(*derived_deps.values()) if derived_deps else set()
    shapes: dict[tuple, list[tuple[str, Any, list[str]]]] = {}
    for reaction in doc.reactions:
        rid = reaction.getId()
        if rid in read_by_formulas:
            continue
        node = reaction.getKineticLaw().getMath()
        shape, names = law_shape(doc.libsbml, node)
        shapes.setdefault(shape, []).append((rid, node, names))
    return [group for group in shapes.values() if len(group) > 1]


def _groups(
    doc: SbmlDocument, members: list, species_ids: tuple[str, ...]
) -> tuple[list[str], list[Group]]:
    """The ids the groups read besides the species (in the order first read), and each
    group's law compiled once on its slots, with where each slot reads its members'
    values (the species' values, then those ids')."""
    position = {sid: j for j, sid in enumerate(species_ids)}
    others: list[str] = []
    for group in members:
        for _, _, names in group:
            for n in names:
                if n not in position and n not in others:
                    others.append(n)
    where = {**position, **{n: len(species_ids) + k for k, n in enumerate(others)}}
    groups = []
    for group in members:
        rid, node, names = group[0]
        law = doc.compiler(f"kinetic law of {rid!r}").compile(slot_names(doc.libsbml, node))
        reads = tuple(
            np.asarray([where[g_names[k]] for _, _, g_names in group]) for k in range(len(names))
        )
        groups.append(Group(law, reads, len(group)))
    return others, groups


def _stoichiometry_terms(
    doc: SbmlDocument, row_of: dict[str, int], rate_position: dict[str, int]
) -> tuple[list[int], list[int], list[float], list]:
    """The terms of the species' rates, one per species reference of a changing species:
    the state row it adds to, the position of its reaction's rate, its coefficient (0
    where the stoichiometry varies), and (term, sign, stoichiometry) of those that vary."""
    rows, positions, coefficients, variable = [], [], [], []
    for reaction in doc.reactions:
        for sign, refs in (
            (-1.0, reaction.getListOfReactants()),
            (1.0, reaction.getListOfProducts()),
        ):
            for ref in refs:
                key = f"@amount:{ref.getSpecies()}"
                if ref.getSpecies() not in doc.changed_by_reactions:
                    continue
                fixed = not (ref.isSetId() and ref.getId()) and not (
                    ref.isSetStoichiometryMath()
                    and ref.getStoichiometryMath().getMath() is not None
                )
                if fixed:
                    coefficients.append(sign * float(_num(stoichiometry(doc, ref)({}))))
                else:
                    varying = stoichiometry(doc, ref)
                    variable.append((len(rows), sign, lambda v, _s=varying: _num(_s(v))))
                    coefficients.append(0.0)
                rows.append(row_of[key])
                positions.append(rate_position[reaction.getId()])
    return rows, positions, coefficients, variable
