"""The quantities of an imported SBML model and the values that rules and assignments give.

Three steps of the import, each on what the one before gave:
- `state_and_parameters`: which quantities the state holds (what reactions, rate rules
  and events change) and which are the model's parameters;
- `start_values`: the value of every id at the start of a run (attributes, initial
  assignments, assignment rules, in dependency order) and which of them follow the
  parameters of the run;
- `right_hand_side`: the formulas evaluated before the rates at every time (species
  concentrations, assignment rules, variable stoichiometries) and the constants of the
  run.
Ids read but defined nowhere, dependency loops and values set twice are refused here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import jax.numpy as jnp

from ._sbml_document import SbmlDocument
from ._sbml_math import TIME, Compiled, SbmlError
from ._sbml_program import _toposort


@dataclass(frozen=True)
class Layout:
    """Which quantities the state holds and which are the model's parameters."""

    # keys of the state components: reaction and event species by amount (under
    # "@amount:ID"), rate-rule targets by value, then what else events assign
    state: list[str]
    event_species: set[str]  # species that only events change (in the state by amount)
    settable_species: list[str]  # species nothing changes whose value is a parameter
    parameter_ids: list[str]


@dataclass(frozen=True)
class Start:
    """The values at the start of a run and the functions that compute them."""

    fns: dict[str, Compiled]  # id -> its start value as a function of the values so far
    deps: dict[str, set[str]]  # id -> the ids its start value reads
    order: list[str]  # the ids in dependency order
    initial: dict[str, Any]  # the start values with the default parameters
    rate_of: dict[str, Compiled]  # a reaction's id stands for its rate
    rate_deps: dict[str, set[str]]
    # the parameters of a run: those no initial assignment computes from other ids
    parameter_ids: list[str]

    def finite(self, sid: str) -> bool:
        """Whether the start value of `sid` is finite (one with no value is NaN)."""
        return math.isfinite(float(self.initial[sid]))

    def from_parameters(self) -> set[str]:
        """The ids whose start value the free parameters (those of finite value) change."""
        free = {pid for pid in self.parameter_ids if self.finite(pid)}
        reads_params: set[str] = set()
        for sid in self.order:
            if sid in free or self.deps[sid] & reads_params:
                reads_params.add(sid)
        return reads_params

    def recomputed(self, fixed: dict[str, float], reads_params: set[str]) -> list[str]:
        """The constants of the run that the parameters change (`reads_params`), with
        what they are computed from, in dependency order: what each run computes anew."""
        needed: set[str] = set()

        def need(sid: str) -> None:
            if sid not in needed:
                needed.add(sid)
                for dep in self.deps[sid]:
                    need(dep)

        for sid in fixed:
            if sid in reads_params:
                need(sid)
        return [sid for sid in self.order if sid in needed]


@dataclass(frozen=True)
class Formulas:
    """The formulas of the right-hand side, computed from the state and the parameters
    before the rates."""

    fns: dict[str, Compiled]  # id -> function of the values (reaction rates included)
    deps: dict[str, set[str]]  # id -> the ids it reads
    derived: list[tuple[str, Compiled]]  # (id, function), in dependency order
    fixed: dict[str, float]  # the constants of the run by id
    ids: set[str]  # every id a formula of the model may read


def state_and_parameters(doc: SbmlDocument) -> Layout:
    """The state (reaction species by amount, rate-rule targets by value, and what
    events assign: species by amount, the rest by value, constant between events) and
    the model's parameters.

    Raises:
        SbmlError: a rate rule for what is no species, compartment, parameter or
            stoichiometry.
    """
    species, rate_rules = doc.species, doc.rate_rules
    event_species = {
        t
        for t in doc.event_targets
        if t in species and t not in doc.changed_by_reactions and t not in rate_rules
    }
    event_values = [t for t in doc.event_targets if t not in species and t not in rate_rules]
    state = (
        [
            f"@amount:{sid}"
            for sid in species
            if sid in doc.changed_by_reactions or sid in event_species
        ]
        + list(rate_rules)
        + event_values
    )
    for target in rate_rules:
        if not doc.is_quantity(target):
            raise SbmlError(
                f"{doc.name}: rate rule for {target!r}, which is no species, compartment, "
                "parameter or stoichiometry"
            )

    # Model parameters: global parameters and constant compartments that no rule sets,
    # and the species nothing changes whose value is a number of their own (read as
    # given: an amount-valued species, or a concentration in a compartment of constant
    # size): a run, a sweep or a PEtab condition may set them as it sets a parameter.
    ruled = set(rate_rules) | set(doc.assignment_rules) | set(event_values)
    settable_species = [sid for sid in species if _constant_species(doc, sid, event_species, ruled)]
    parameter_ids = (
        [p for p in doc.parameters if p not in ruled]
        + [c for c in doc.compartments if c not in ruled]
        + settable_species
    )
    return Layout(state, event_species, settable_species, parameter_ids)


def _constant_species(
    doc: SbmlDocument, sid: str, event_species: set[str], ruled: set[str]
) -> bool:
    """Whether nothing changes the species and its value is a number of its own."""
    s = doc.species[sid]
    unchanged = (
        sid not in doc.changed_by_reactions
        and sid not in event_species
        and sid not in ruled
        and sid not in doc.initial_assignments
    )
    read_as_given = (s.isSetInitialAmount() and doc.amount_valued(sid)) or (
        s.isSetInitialConcentration()
        and not doc.amount_valued(sid)
        and s.getCompartment() not in ruled
    )
    return unchanged and read_as_given


def start_values(doc: SbmlDocument, layout: Layout) -> Start:
    """The values at the start: attributes, then initial assignments and assignment
    rules in dependency order (species from their amount or concentration and
    compartment), the reactions' rates among them.

    Raises:
        SbmlError: an id set by both an initial assignment and an assignment rule, a
            reaction without a kinetic law, a formula that reads no id of the model, or
            start values that depend on each other in a loop.
    """
    start, start_deps = _attribute_values(doc)
    assigned, assigned_deps = _assigned_values(doc)
    start.update(assigned)
    start_deps.update(assigned_deps)
    rate_of, rate_deps = _kinetic_laws(doc)
    start.update(rate_of)
    start_deps.update(rate_deps)
    _refuse_unknown_reads(doc, start_deps, start, rate_deps)
    amounts, amount_deps = _amounts_at_start(doc, layout)
    start.update(amounts)
    start_deps.update(amount_deps)
    # A parameter or compartment that an initial assignment computes from other ids is
    # no free parameter: its value follows theirs in every run.
    parameter_ids = [
        pid
        for pid in layout.parameter_ids
        if pid not in doc.initial_assignments or not start_deps[pid]
    ]
    start_order = _toposort(start_deps, "initial values")
    initial: dict[str, Any] = {TIME: jnp.asarray(0.0)}  # (initial assignments that read time see 0)
    for sid in start_order:
        initial[sid] = start[sid](initial)
    return Start(start, start_deps, start_order, initial, rate_of, rate_deps, parameter_ids)


def _attribute_values(doc: SbmlDocument) -> tuple[dict[str, Compiled], dict[str, set[str]]]:
    """The start values that the elements' attributes give (parameters' values,
    compartments' sizes, stoichiometries, species' initial amounts or concentrations)
    and the ids each reads."""
    start: dict[str, Compiled] = {}
    start_deps: dict[str, set[str]] = {}
    level = doc.level

    def constant_start(sid: str, value: float | None) -> None:
        # (no value: NaN, refused below if the model needs it)
        start[sid] = (
            lambda v, _x=math.nan if value is None else float(value): _x  # noqa: E701 (a lambda)
        )
        start_deps[sid] = set()

    for pid, p in doc.parameters.items():
        constant_start(pid, p.getValue() if p.isSetValue() else None)
    for cid, c in doc.compartments.items():
        constant_start(cid, c.getSize() if c.isSetSize() else (1.0 if level == 2 else None))
    for rid, ref in doc.references.items():
        constant_start(
            rid,
            ref.getStoichiometry() if ref.isSetStoichiometry() or level == 2 else None,
        )
    for sid, s in doc.species.items():
        cid = s.getCompartment()
        if s.isSetInitialAmount():
            amount, conc = s.getInitialAmount(), None
        elif s.isSetInitialConcentration():
            amount, conc = None, s.getInitialConcentration()
        else:
            constant_start(sid, None)
            continue
        is_amount = doc.amount_valued(sid)
        if amount is not None and is_amount or conc is not None and not is_amount:
            constant_start(sid, amount if amount is not None else conc)
        elif amount is not None:  # an amount, read as a concentration
            start[sid] = lambda v, _a=amount, _c=cid: _a / v[_c]
            start_deps[sid] = {cid}
        else:  # a concentration, read as an amount
            start[sid] = lambda v, _x=conc, _c=cid: _x * v[_c]
            start_deps[sid] = {cid}
    return start, start_deps


def _assigned_values(doc: SbmlDocument) -> tuple[dict[str, Compiled], dict[str, set[str]]]:
    """The start values that initial assignments, then assignment rules, compute, and
    the ids each reads."""
    start: dict[str, Compiled] = {}
    start_deps: dict[str, set[str]] = {}
    for sid, assignment in doc.initial_assignments.items():
        if sid in doc.assignment_rules:
            raise SbmlError(
                f"{doc.name}: {sid!r} has both an initial assignment and an assignment rule"
            )
        c = doc.compiler(f"initial assignment to {sid!r}")
        start[sid] = c.compile(assignment.getMath())
        start_deps[sid] = c.names(assignment.getMath())
    for sid, rule in doc.assignment_rules.items():
        c = doc.compiler(f"assignment rule for {sid!r}")
        start[sid] = c.compile(rule.getMath())
        start_deps[sid] = c.names(rule.getMath())
    return start, start_deps


def _kinetic_laws(doc: SbmlDocument) -> tuple[dict[str, Compiled], dict[str, set[str]]]:
    """Each reaction's rate (its kinetic law) by the reaction's id, and the ids it reads."""
    rate_of: dict[str, Compiled] = {}
    rate_deps: dict[str, set[str]] = {}
    for reaction in doc.reactions:
        law = reaction.getKineticLaw()
        rid = reaction.getId()
        if law is None or law.getMath() is None:
            raise SbmlError(f"{doc.name}: reaction {rid!r} has no kinetic law")
        c = doc.compiler(f"kinetic law of {rid!r}")
        rate_of[rid], rate_deps[rid] = c.compile(law.getMath()), c.names(law.getMath())
    return rate_of, rate_deps


def _amounts_at_start(
    doc: SbmlDocument, layout: Layout
) -> tuple[dict[str, Compiled], dict[str, set[str]]]:
    """The amount at the start ("@amount0:ID") of each species whose amount nothing
    changes, read by concentration: a constant of the run (the concentration follows the
    size of a compartment that changes)."""
    start: dict[str, Compiled] = {}
    start_deps: dict[str, set[str]] = {}
    for sid, s in doc.species.items():
        if (
            sid not in doc.changed_by_reactions
            and sid not in layout.event_species
            and sid not in doc.rate_rules
            and sid not in doc.assignment_rules
            and not doc.amount_valued(sid)
            and sid not in layout.settable_species
        ):
            cid = s.getCompartment()
            start[f"@amount0:{sid}"] = lambda v, _s=sid, _c=cid: v[_s] * v[_c]
            start_deps[f"@amount0:{sid}"] = {sid, cid}
    return start, start_deps


def right_hand_side(doc: SbmlDocument, layout: Layout, start: Start) -> Formulas:
    """The formulas evaluated before the rates (reaction rates, species' values from
    their amounts, assignment rules, variable stoichiometries) in dependency order, and
    the constants of the run: every start value that no formula, state component or
    free parameter gives.

    Raises:
        SbmlError: assignment rules that depend on each other in a loop, or a formula
            that reads no id of the model.
    """
    derived_fns: dict[str, Compiled] = dict(start.rate_of)
    derived_deps: dict[str, set[str]] = dict(start.rate_deps)
    for fns, deps in (_species_values(doc, layout, start), _rules_and_stoichiometries(doc)):
        derived_fns.update(fns)
        derived_deps.update(deps)
    order = _toposort(derived_deps, "assignment rules")
    derived = [(sid, derived_fns[sid]) for sid in order]

    initial = start.initial
    known = (
        set(layout.state)
        | set(derived_fns)
        | {pid for pid in start.parameter_ids if start.finite(pid)}
    )
    fixed = {sid: float(initial[sid]) for sid in initial if sid != TIME and sid not in known}
    all_ids = known | set(fixed)
    _refuse_unknown_reads(doc, derived_deps, all_ids, start.rate_deps)
    return Formulas(derived_fns, derived_deps, derived, fixed, all_ids)


def _species_values(
    doc: SbmlDocument, layout: Layout, start: Start
) -> tuple[dict[str, Compiled], dict[str, set[str]]]:
    """The value of each species that its amount gives (in the state, or at the start
    when nothing changes it), and the ids each reads."""
    fns: dict[str, Compiled] = {}
    deps: dict[str, set[str]] = {}
    for sid in doc.species:
        if sid in doc.changed_by_reactions or sid in layout.event_species:
            key, cid = f"@amount:{sid}", doc.species[sid].getCompartment()
            if doc.amount_valued(sid):
                fns[sid], deps[sid] = (lambda v, _k=key: v[_k]), set()
            else:
                fns[sid], deps[sid] = (
                    (lambda v, _k=key, _c=cid: v[_k] / v[_c]),
                    {cid},
                )
        elif f"@amount0:{sid}" in start.fns:
            # Nothing changes its amount: in a compartment that changes size, its
            # concentration follows the size.
            cid = doc.species[sid].getCompartment()
            fns[sid], deps[sid] = (
                (lambda v, _a=f"@amount0:{sid}", _c=cid: v[_a] / v[_c]),
                {cid},
            )
    return fns, deps


def _rules_and_stoichiometries(
    doc: SbmlDocument,
) -> tuple[dict[str, Compiled], dict[str, set[str]]]:
    """The assignment rules' formulas, then the stoichiometries that math gives, by the
    id they set, and the ids each reads."""
    fns: dict[str, Compiled] = {}
    deps: dict[str, set[str]] = {}
    for sid, rule in doc.assignment_rules.items():
        c = doc.compiler(f"assignment rule for {sid!r}")
        fns[sid], deps[sid] = c.compile(rule.getMath()), c.names(rule.getMath())
    for rid, ref in doc.references.items():
        if ref.isSetStoichiometryMath() and ref.getStoichiometryMath().getMath() is not None:
            c = doc.compiler(f"stoichiometry of {rid!r}")
            math_node = ref.getStoichiometryMath().getMath()
            fns[rid], deps[rid] = c.compile(math_node), c.names(math_node)
    return fns, deps


def _refuse_unknown_reads(
    doc: SbmlDocument, reads: dict[str, set[str]], ids, rate_deps: dict[str, set[str]]
) -> None:
    """Refuses the first formula of `reads` (id -> what it reads) that reads no id of
    `ids`, naming the element that defines it."""
    for sid, deps in reads.items():
        for dep in deps:
            if dep not in ids:
                raise SbmlError(
                    f"{doc.name}: {_element(doc, rate_deps, sid)} reads {dep!r}, which is no id "
                    "of the model"
                )


def _element(doc: SbmlDocument, rate_deps: dict[str, set[str]], sid: str) -> str:
    """The element that defines `sid`'s value, for a message."""
    if sid in rate_deps:
        return f"kinetic law of {sid!r}"
    if sid in doc.assignment_rules:
        return f"assignment rule for {sid!r}"
    if sid in doc.initial_assignments:
        return f"initial assignment to {sid!r}"
    return f"stoichiometry of {sid!r}" if sid in doc.references else repr(sid)
