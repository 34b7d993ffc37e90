"""The events of an imported SBML model, as `physics.ode.Event`s.

`sbml_events` compiles each event's trigger (as a root function and as a condition),
its constant priority and its assignments, and orders the events as simultaneous ones
execute (decreasing priority, document order among equals). The functions it gives read
the values of the model's `_Program`, never the libsbml document, which is gone when
they run. Events whose order at one instant SBML leaves random, where that order changes
the outcome, are refused.
"""

from __future__ import annotations

from collections.abc import Callable

import jax.numpy as jnp

from ._events import Event
from ._sbml_document import SbmlDocument
from ._sbml_math import TIME, Compiled, SbmlError, _bool, _Compiler, _num
from ._sbml_program import _Program


def sbml_events(doc: SbmlDocument, program: _Program, ids: set[str]) -> tuple:
    """The model's events as `physics.ode.Event`s, in decreasing priority (document order
    among equals): the trigger as a root function and as a condition, the assignments
    (all computed from the values before the event; a species' value is its
    concentration unless it has only substance units, the state its amount).

    Raises:
        SbmlError: math that reads no id of the model (of `ids`), a priority that is not
            constant, or two events of equal priority whose order changes the outcome.
    """
    index = {key: i for i, key in enumerate(program.state)}
    out = []
    explicit = []  # (priority, label, event, compiler) of the events with a priority
    for label, event in doc.events:
        where = f"event {label!r}"
        c, root, condition = _trigger(doc, event, where, ids)
        priority = _priority(doc, event, where)
        if priority is not None:
            explicit.append((priority, label, event, c))
        assignments = _assignments(doc, event, where, ids)
        apply = _apply(
            program, _targets(doc, assignments, index), _rescaled(doc, assignments, index)
        )
        event_of_model = _event(label, event, program, root, condition, apply)
        out.append((-(0.0 if priority is None else priority), len(out), event_of_model))
    _refuse_random_order(doc.name, explicit, _rule_reads(doc))
    return tuple(e for _, _, e in sorted(out, key=lambda item: item[:2]))


def _trigger(
    doc: SbmlDocument, event, where: str, ids: set[str]
) -> tuple[_Compiler, Compiled, Compiled]:
    """The compiler of the event's trigger, the trigger as a root function, and as a
    condition."""
    c = doc.compiler(f"trigger of {where}")
    math_node = event.getTrigger().getMath()
    for dep in c.names(math_node):
        if dep not in ids:
            raise SbmlError(
                f"{doc.name}: trigger of {where} reads {dep!r}, which is no id of the model"
            )
    return c, c.root(math_node), c.compile(math_node)


def _priority(doc: SbmlDocument, event, where: str) -> float | None:
    """The event's priority, None when it has none; one that is not constant is refused."""
    if not (
        event.isSetPriority()
        and event.getPriority() is not None
        and event.getPriority().isSetMath()
    ):
        return None
    pc = doc.compiler(f"priority of {where}")
    node = pc.names(event.getPriority().getMath())
    if node or pc.reads_time(event.getPriority().getMath()):
        read = sorted(node)[0] if node else "time"
        raise SbmlError(
            f"{doc.name}: priority of {where} reads {read!r}: only constant priorities are "
            "supported"
        )
    return float(_num(pc.compile(event.getPriority().getMath())({TIME: 0.0})))


def _assignments(doc: SbmlDocument, event, where: str, ids: set[str]) -> list[tuple[str, Compiled]]:
    """(target, value) of the event's assignments that have math."""
    assignments = []
    for assignment in event.getListOfEventAssignments():
        if not assignment.isSetMath():
            continue
        target = assignment.getVariable()
        ac = doc.compiler(f"assignment of {where} to {target!r}")
        for dep in ac.names(assignment.getMath()):
            if dep not in ids:
                raise SbmlError(
                    f"{doc.name}: assignment of {where} to {target!r} reads {dep!r}, which is "
                    "no id of the model"
                )
        assignments.append((target, ac.compile(assignment.getMath())))
    return assignments


def _targets(doc: SbmlDocument, assignments: list, index: dict[str, int]) -> tuple:
    """(target, value, state row, compartment) of each assignment: a species in the
    state by amount has the compartment its assigned concentration is multiplied by
    (None for the rest). (What the assignments need of the document, read now.)"""
    targets = []
    for target, fn in assignments:
        key = f"@amount:{target}"
        if target in doc.species and key in index:
            per_size = None if doc.amount_valued(target) else doc.species[target].getCompartment()
            targets.append((target, fn, index[key], per_size))
        else:
            targets.append((target, fn, index[target], None))
    return tuple(targets)


def _rescaled(doc: SbmlDocument, assignments: list, index: dict[str, int]) -> tuple:
    """(state row, compartment) of each species whose state is its concentration (a rate
    rule) in a compartment the event resizes: it keeps its amount, the concentration (an
    assigned one being of the size before the event) scaled by old / new size."""
    assigned = {target for target, _ in assignments}
    species = doc.species
    return tuple(
        (index[sid], species[sid].getCompartment())
        for sid in species
        if sid in index and not doc.amount_valued(sid) and species[sid].getCompartment() in assigned
    )


def _apply(program: _Program, targets: tuple, rescaled: tuple) -> Callable:
    """The event's `apply` (t, y, params, source=None) -> (y, params): the assignments'
    values from the values before the event (or of `source`, those where it fired)."""

    def apply(t, y, params, source=None):
        values = program.values(t, *(source if source is not None else (y, params)))
        now = program.values(t, y, params) if source is not None else values
        new = {target: _num(fn(values)) for target, fn, _, _ in targets}
        for target, _, i, compartment in targets:
            # (a concentration assigned with its compartment: of the size before the event)
            value = new[target] if compartment is None else new[target] * now[compartment]
            y = y.at[i].set(jnp.asarray(value, y.dtype))
        for i, compartment in rescaled:
            y = y.at[i].set(jnp.asarray(y[i] * _num(now[compartment]) / new[compartment], y.dtype))
        return y, params

    return apply


def _event(
    label: str, event, program: _Program, root: Compiled, condition: Compiled, apply: Callable
) -> Event:
    """The `Event` of an SBML event: its trigger and condition on the program's values,
    and the attributes of its trigger (read now)."""
    trigger = event.getTrigger()

    def trigger_fn(t, y, params):
        return jnp.asarray(_num(root(program.values(t, y, params))), float)

    def holds(t, y, params):
        return _bool(condition(program.values(t, y, params)))

    return Event(
        trigger=trigger_fn,
        apply=apply,
        label=label,
        holds=holds,
        initial_value=trigger.getInitialValue() if trigger.isSetInitialValue() else True,
        persistent=trigger.getPersistent() if trigger.isSetPersistent() else True,
        values_at_trigger=event.getUseValuesFromTriggerTime()
        if event.isSetUseValuesFromTriggerTime()
        else True,
    )


def _rule_reads(doc: SbmlDocument) -> dict[str, set[str]]:
    """The ids each assignment rule's formula reads, by the variable it sets."""
    return {
        target: doc.compiler(f"rule for {target!r}").names(rule.getMath())
        for target, rule in doc.assignment_rules.items()
        if rule.isSetMath()
    }


def _refuse_random_order(name: str, explicit: list, rules: dict) -> None:
    """Two events of equal priority that fire together execute in random order (SBML
    4.12.6); the order changes the outcome when one assigns what the other reads (its
    trigger, if it is not persistent, or its assignments) or assigns the same variable.
    Such a pair is refused; `rules` maps a variable set by an assignment rule to the ids
    its formula reads, so that a read through a rule counts."""

    def closure(ids: set[str]) -> set[str]:
        out, todo = set(), list(ids)
        while todo:
            key = todo.pop()
            if key not in out:
                out.add(key)
                todo.extend(rules.get(key, ()))
        return out

    def profile(event, c):
        targets = {a.getVariable() for a in event.getListOfEventAssignments() if a.isSetMath()}
        reads = set()
        for a in event.getListOfEventAssignments():
            if a.isSetMath():
                reads |= c.names(a.getMath())
        if not (
            event.getTrigger().getPersistent() if event.getTrigger().isSetPersistent() else True
        ):
            reads |= c.names(event.getTrigger().getMath())
        return targets, closure(reads)

    seen = [(priority, label, *profile(event, c)) for priority, label, event, c in explicit]
    for i, (p1, l1, t1, r1) in enumerate(seen):
        for p2, l2, t2, r2 in seen[i + 1 :]:
            if p1 == p2 and (t1 & (r2 | t2) or t2 & r1):
                raise SbmlError(
                    f"{name}: events {l1!r} and {l2!r} have the same priority and change what the "
                    "other reads: "
                    "their order at one instant is random in SBML, which is not supported"
                )
