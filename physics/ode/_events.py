"""Events of ODE models: what happens at a trigger (a condition becoming true, or given
times), as a model declares it.

An `Event` holds a trigger g(t, y, params), whose upward zero crossing fires it, the
assignments as a function (t, y, params) -> (y, params), and whether the run ends there.
`with_events` gives any ODE model (built in, from a file or written as text) the events
a config's `[[events]]` writes, by wrapping it (`ModelWithEvents`); solving with them is
the solvers' business (`solvers.solve_with_events`).
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp

from .._expressions import Expression, ExpressionError, parse
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
    an undefined side reaches a gradient through 0 * NaN).

    Arguments:
        sign: 1.0 for `left > right` (or >=), -1.0 for `left < right` (or <=).
        left: values -> the left side (the values a mapping of names, as the model's
            states, parameters and `t`).
        right: values -> the right side.

    Returns:
        values -> the root function g, a float scalar: sign * (left - right) where that
        is finite, -1 where it is NaN, +-1 where it is infinite.
    """

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


class _Condition(eqx.Module):
    """g(t, y, params) of a condition written as text (`condition_root`): it rises
    through zero where the condition becomes true. A value: equal texts over equal
    names are equal triggers."""

    text: str = eqx.field(static=True)
    symbols: frozenset[str] = eqx.field(static=True)
    state: tuple[str, ...] = eqx.field(static=True)

    def __call__(self, t, y, params):
        root = condition_root(ast.parse(self.text.strip(), mode="eval").body, set(self.symbols))
        return root(_values(self.state, t, y, params))


class _At(eqx.Module):
    """g(t, y, params) = t - time: it rises through zero at `time`."""

    time: float = eqx.field(static=True)

    def __call__(self, t, y, params):
        return t - self.time


class _Assignments(eqx.Module):
    """An event's assignments written as text, (t, y, params) -> (y, params): every
    assignment reads the values before the event."""

    state: tuple[str, ...] = eqx.field(static=True)
    assignments: tuple[tuple[str, Expression], ...] = eqx.field(static=True)

    def __call__(self, t, y, params):
        values = _values(self.state, t, y, params)
        new = {name: jnp.asarray(e(values), dtype=y.dtype) for name, e in self.assignments}
        y = jnp.stack([new.get(n, y[k]) for k, n in enumerate(self.state)]) if self.state else y
        params = {k: new.get(k, v) for k, v in params.items()}
        return y, params


def _values(state: tuple[str, ...], t, y, params) -> dict[str, Any]:
    values = dict(params)
    values.update({name: y[i] for i, name in enumerate(state)})
    values["t"] = t
    return values


def text_events(model: OdeModel, specs: list[dict[str, Any]]) -> tuple[Event, ...]:
    """The events of `specs` (each with `when` or `at`, `set`, `terminal`) for `model`:
    values, equal for equal specs and equal names of states and parameters, so that a
    model rebuilt with them compiles to the programs it compiled before.

    Arguments:
        model: the ODE model whose states and parameters the events read and set.
        specs: the events as a config's `[[events]]` writes them: `when` (a condition
            of the states, the parameters and `t`) or `at` (a list of times), `set`
            (state or parameter -> expression or number, every one read before the
            event; optional) and `terminal` (optional, default False).

    Returns:
        The `Event`s in the order of `specs`: one per spec with `when`, one per time of
        a spec with `at`.

    Raises:
        ValueError: naming the entry (`events.0.when`, `events.1.set.v`, ...) and, for an
            expression, the column.
    """
    state, parameters = tuple(model.state_names), tuple(model.parameter_names)
    symbols = frozenset(state) | frozenset(parameters) | {"t"}
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
        apply = _Assignments(state=state, assignments=tuple(assignments))
        terminal = bool(spec.get("terminal", False))
        if spec.get("when") is not None:
            text = spec["when"]
            try:
                parse(text, symbols)  # every check of the language, with its column
                condition_root(ast.parse(text.strip(), mode="eval").body, set(symbols))
            except ExpressionError as e:
                raise ValueError(f"{where}.when: {e}") from None
            trigger = _Condition(text=text, symbols=symbols, state=state)
            events.append(Event(trigger=trigger, apply=apply, terminal=terminal, label=text))
        else:
            for time in spec["at"]:
                events.append(
                    Event(
                        trigger=_At(time=float(time)),
                        apply=apply,
                        terminal=terminal,
                        label=f"t = {time:g}",
                    )
                )
    return tuple(events)


class ModelWithEvents(OdeModel):
    """An ODE model with events added to its own (`with_events`): it wraps `model`,
    whose equations, declarations and attributes it answers with, and holds the events
    as static fields, so that two models with equal events are equal and share their
    compiled programs."""

    model: OdeModel
    added: tuple[Event, ...] = eqx.field(static=True)

    @property
    def name(self) -> str:
        return self.model.name

    @property
    def description(self) -> str:
        return self.model.description

    @property
    def parameters(self):
        return self.model.parameters

    @property
    def state_names(self) -> tuple[str, ...]:
        return self.model.state_names

    @property
    def initial_defaults(self) -> dict[str, float]:
        return self.model.initial_defaults

    @property
    def initial_units(self) -> str:
        return self.model.initial_units

    @property
    def initial_constraint(self) -> str:
        return self.model.initial_constraint

    @property
    def parameter_dependent_initial(self) -> frozenset[str]:
        return self.model.parameter_dependent_initial

    @property
    def observable_names(self) -> tuple[str, ...]:
        return self.model.observable_names

    @property
    def checked_observables(self) -> tuple[str, ...] | None:
        return self.model.checked_observables

    @property
    def stiff(self) -> bool:
        return self.model.stiff

    def __getattr__(self, name: str):
        # What else the wrapped model has (an imported model's program, a network).
        if name == "model" or name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.model, name)

    def vector_field(self, t, y, params):
        return self.model.vector_field(t, y, params)

    def undefined(self, t, y, params):
        return self.model.undefined(t, y, params)

    def default_params(self):
        return self.model.default_params()

    def initial_state(self, initial=None, params=None):
        return self.model.initial_state(initial, params)

    def default_initial(self, params=None):
        return self.model.default_initial(params)

    def extra_observables(self, t, y, params):
        return self.model.extra_observables(t, y, params)

    def observables(self, t, y, params):
        return self.model.observables(t, y, params)

    def events(self) -> tuple:
        return self.model.events() + self.added


def with_events(model: OdeModel, events: tuple[Event, ...]) -> OdeModel:
    """`model` with `events` after its own (a `ModelWithEvents`; the model itself when
    there are none).

    Arguments:
        model: an ODE model (a `ModelWithEvents` gets the events added to its list).
        events: the events to add, fired after the model's own.

    Returns:
        A `ModelWithEvents` wrapping the model, or `model` itself when `events` is empty.
    """
    if not events:
        return model
    if isinstance(model, ModelWithEvents):
        return ModelWithEvents(model=model.model, added=model.added + tuple(events))
    return ModelWithEvents(model=model, added=tuple(events))
