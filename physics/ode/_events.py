"""Events of ODE models: what happens at a trigger (a condition becoming true, or given
times), as a model declares it.

An `Event` holds a trigger g(t, y, params), whose upward zero crossing fires it, the
assignments as a function (t, y, params) -> (y, params), and whether the run ends there.
`with_events` gives any ODE model (built in, from a file or written as text) the events
a config's `[[events]]` writes, as a subclass whose `events()` returns them; solving with
them is the solvers' business (`solvers.solve_with_events`).
"""

from __future__ import annotations

import ast
import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax.numpy as jnp

from .._expressions import ExpressionError, parse
from .._text import remembered
from .base import OdeModel


class Event(eqx.Module):
    """One event: `trigger` g(t, y, params) fires it where g rises through zero; `apply`
    (t, y, params) -> (y, params) makes its assignments; `terminal` ends the run.

    Optional (SBML's reading of triggers): `holds` (t, y, params) -> bool, the condition
    itself; with `initial_value` False an event whose condition holds at the start fires
    there; an event that is not `persistent` is dropped when an event executed before it
    at the same time makes its condition false; with `values_at_trigger` its assignments
    read the values where it fired, before the events executed before it at that time
    (`apply` then takes `source=(y, params)`)."""

    trigger: Callable[[Any, Any, Any], Any] = eqx.field(static=True)
    apply: Callable[[Any, Any, Any], tuple[Any, Any]] = eqx.field(static=True)
    terminal: bool = eqx.field(static=True, default=False)
    label: str = eqx.field(static=True, default="event")
    holds: Callable[[Any, Any, Any], Any] | None = eqx.field(static=True, default=None)
    initial_value: bool = eqx.field(static=True, default=True)
    persistent: bool = eqx.field(static=True, default=True)
    values_at_trigger: bool = eqx.field(static=True, default=False)


_COMPARISONS = {ast.Lt: -1.0, ast.LtE: -1.0, ast.Gt: 1.0, ast.GtE: 1.0}


def _trigger(text: str, symbols: set[str], state: tuple[str, ...]) -> Callable:
    """g for a condition `a < b` (b - a) or `a > b` (a - b): it rises through zero where
    the condition becomes true."""
    parse(text, symbols)  # every check of the language, with its column
    tree = ast.parse(text.strip(), mode="eval").body
    if not (isinstance(tree, ast.Compare) and len(tree.ops) == 1 and type(tree.ops[0]) in _COMPARISONS):
        raise ExpressionError("expected one comparison, such as x < 0 or t > 5 (the event fires when it becomes true)")
    sign = _COMPARISONS[type(tree.ops[0])]
    left = parse(ast.unparse(tree.left), symbols)
    right = parse(ast.unparse(tree.comparators[0]), symbols)

    def g(t, y, params):
        values = _values(state, t, y, params)
        return sign * (jnp.asarray(left(values), dtype=float) - jnp.asarray(right(values), dtype=float))

    return g


def _values(state: tuple[str, ...], t, y, params) -> dict[str, Any]:
    values = dict(params)
    values.update({name: y[i] for i, name in enumerate(state)})
    values["t"] = t
    return values


def text_events(model: OdeModel, specs: list[dict[str, Any]]) -> tuple[Event, ...]:
    """The events of `specs` (each with `when` or `at`, `set`, `terminal`) for `model`
    (the same `Event`s for the same specs and the same names of states and parameters, so
    that a model rebuilt with them compiles to the programs it compiled before).

    Raises:
        ValueError: naming the entry (`events.0.when`, `events.1.set.v`, ...) and, for an
            expression, the column.
    """
    return _text_events(tuple(model.state_names), tuple(model.parameter_names), specs)


@remembered
def _text_events(state: tuple[str, ...], parameters: tuple[str, ...], specs: list[dict[str, Any]]) -> tuple[Event, ...]:
    symbols = set(state) | set(parameters) | {"t"}
    events: list[Event] = []
    for i, spec in enumerate(specs):
        where = f"events.{i}"
        assignments = []
        for name, value in (spec.get("set") or {}).items():
            if name not in state and name not in parameters:
                raise ValueError(f"{where}.set.{name}: is no state or parameter of the model (state: {', '.join(state)}; parameters: {', '.join(parameters) or 'none'})")
            try:
                expression = parse(value if isinstance(value, str) else repr(float(value)), symbols)
            except ExpressionError as e:
                raise ValueError(f"{where}.set.{name}: {e}") from None
            assignments.append((name, expression))

        def apply(t, y, params, _assignments=tuple(assignments)):
            values = _values(state, t, y, params)  # every assignment reads the values before the event
            new = {name: jnp.asarray(e(values), dtype=y.dtype) for name, e in _assignments}
            y = jnp.stack([new.get(n, y[k]) for k, n in enumerate(state)]) if state else y
            params = {k: new.get(k, v) for k, v in params.items()}
            return y, params

        terminal = bool(spec.get("terminal", False))
        if spec.get("when") is not None:
            try:
                trigger = _trigger(spec["when"], symbols, state)
            except ExpressionError as e:
                raise ValueError(f"{where}.when: {e}") from None
            events.append(Event(trigger=trigger, apply=apply, terminal=terminal, label=spec["when"]))
        else:
            for time in spec["at"]:
                events.append(Event(trigger=lambda t, y, p, _s=float(time): t - _s, apply=apply, terminal=terminal, label=f"t = {time:g}"))
    return tuple(events)


@functools.cache
def _with_events_class(cls: type) -> type:
    """The subclass of `cls` that holds events: one per class, so that two models with
    equal events are equal (and share their compiled programs)."""
    namespace = {"__annotations__": {"event_list": tuple}, "event_list": eqx.field(static=True, default=()), "__module__": cls.__module__, "__doc__": cls.__doc__}
    return type(cls.__name__, (cls,), namespace)


def with_events(model: OdeModel, events: tuple[Event, ...]) -> OdeModel:
    """`model` with `events` (a subclass of its class whose `events()` returns them)."""
    if not events:
        return model
    sub = _with_events_class(type(model))
    options = {f.name: getattr(model, f.name) for f in dataclasses.fields(model) if f.init}
    return sub(**options, event_list=tuple(events))
