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
import jax
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


def relation(
    sign: float, left: Callable[[Any], Any], right: Callable[[Any], Any]
) -> Callable[[Any], Any]:
    """The root function of one relation between two functions of the values: sign *
    (left - right), positive where `left > right` (sign 1) or `left < right` (sign -1)
    holds, made finite as the comparison judges it: where a side is NaN the relation is
    false (-1), and an infinite difference counts by its sign (+-1). Where the difference
    is finite it is the difference itself, and so is its derivative; elsewhere the
    derivative is zero (the values it reads are held constant there, so that no NaN of
    an undefined side reaches a gradient through 0 * NaN)."""

    def difference(values):
        return sign * (
            jnp.asarray(left(values), dtype=float) - jnp.asarray(right(values), dtype=float)
        )

    def g(values):
        d = jax.lax.stop_gradient(difference(values))
        finite = jnp.isfinite(d)
        return jnp.where(
            finite, difference(_Held(values, finite)), jnp.where(jnp.isnan(d), -1.0, jnp.sign(d))
        )

    return g


class _Held(dict):
    """The values as they are where `finite`, held constant (no derivative) elsewhere;
    each taken from `values` when first read (the values of an SBML model are such a
    mapping too)."""

    def __init__(self, values, finite):
        super().__init__()
        self._values, self._finite = values, finite

    def __missing__(self, key):
        value = self._values[key]
        if not callable(value):
            value = jnp.where(self._finite, value, jax.lax.stop_gradient(value))
        self[key] = value
        return value

    def __contains__(self, key):
        return key in self._values


def condition_root(tree: ast.expr, symbols: set[str]) -> Callable[[Any], Any]:
    """The root function of a condition's syntax tree: a function of the values that is
    finite, positive where the condition holds and negative where it does not (zero on a
    relation's boundary), and differentiable where the relations it reads are finite.
    A relation `<`, `<=`, `>`, `>=` gives its `relation`; `and` the minimum of its parts,
    `or` the maximum, `not` minus its part. A NaN side makes its relation false, as the
    comparison itself judges it (so `not (x > 1)` holds where x is NaN).

    Raises:
        ExpressionError: a part that is none of these (`==`, `!=`, a number, a function).
    """
    if isinstance(tree, ast.Compare) and len(tree.ops) == 1 and type(tree.ops[0]) in _COMPARISONS:
        left, right = (
            parse(ast.unparse(side), symbols) for side in (tree.left, tree.comparators[0])
        )
        return relation(_COMPARISONS[type(tree.ops[0])], left, right)
    if isinstance(tree, ast.BoolOp):
        parts = [condition_root(value, symbols) for value in tree.values]
        join = jnp.maximum if isinstance(tree.op, ast.Or) else jnp.minimum
        return lambda values: functools.reduce(join, (part(values) for part in parts))
    if isinstance(tree, ast.UnaryOp) and isinstance(tree.op, ast.Not):
        inner = condition_root(tree.operand, symbols)
        return lambda values: -inner(values)
    raise ExpressionError(
        "expected comparisons (<, <=, >, >=) joined by and, or, not, such as x < 0 or t > 5 and v "
        "< 0 "
        f"(the event fires when the condition becomes true), got {ast.unparse(tree)!r}"
    )


def _trigger(text: str, symbols: set[str], state: tuple[str, ...]) -> Callable:
    """g(t, y, params) of a condition (`condition_root`): it rises through zero where the
    condition becomes true."""
    parse(text, symbols)  # every check of the language, with its column
    root = condition_root(ast.parse(text.strip(), mode="eval").body, symbols)

    def g(t, y, params):
        return root(_values(state, t, y, params))

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
def _text_events(
    state: tuple[str, ...], parameters: tuple[str, ...], specs: list[dict[str, Any]]
) -> tuple[Event, ...]:
    symbols = set(state) | set(parameters) | {"t"}
    events: list[Event] = []
    for i, spec in enumerate(specs):
        where = f"events.{i}"
        assignments = []
        for name, value in (spec.get("set") or {}).items():
            if name not in state and name not in parameters:
                raise ValueError(
                    f"{where}.set.{name}: is no state or parameter of the model (state: "
                    f"{', '.join(state)}; parameters: {', '.join(parameters) or 'none'})"
                )
            try:
                expression = parse(value if isinstance(value, str) else repr(float(value)), symbols)
            except ExpressionError as e:
                raise ValueError(f"{where}.set.{name}: {e}") from None
            assignments.append((name, expression))

        def apply(t, y, params, _assignments=tuple(assignments)):
            values = _values(
                state, t, y, params
            )  # every assignment reads the values before the event
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
            events.append(
                Event(trigger=trigger, apply=apply, terminal=terminal, label=spec["when"])
            )
        else:
            for time in spec["at"]:
                events.append(
                    Event(
                        trigger=lambda t, y, p, _s=float(time): t - _s,
                        apply=apply,
                        terminal=terminal,
                        label=f"t = {time:g}",
                    )
                )
    return tuple(events)


@functools.cache
def _with_events_class(cls: type) -> type:
    """The subclass of `cls` that holds events: one per class, so that two models with
    equal events are equal (and share their compiled programs)."""
    namespace = {
        "__annotations__": {"event_list": tuple},
        "event_list": eqx.field(static=True, default=()),
        "__module__": cls.__module__,
        "__doc__": cls.__doc__,
    }
    return type(cls.__name__, (cls,), namespace)


def with_events(model: OdeModel, events: tuple[Event, ...]) -> OdeModel:
    """`model` with `events` (a subclass of its class whose `events()` returns them)."""
    if not events:
        return model
    sub = _with_events_class(type(model))
    options = {f.name: getattr(model, f.name) for f in dataclasses.fields(model) if f.init}
    return sub(**options, event_list=tuple(events))
