"""What models written as text share (a config's `[model.states]`, `[model.noise]`,
`[model.parameters]`, `[model.observables]`): declarations checked and expressions parsed
into model fields, the evaluation of expressions at (t, y, params), and their
evaluation with symbolic derivatives (`differentiate`, `evaluate_symbolic`, `state_jacobian`)."""

from __future__ import annotations

import keyword
import math
import unicodedata
from collections.abc import Collection, Sequence
from functools import partial, reduce
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from jax.custom_derivatives import SymbolicZero
from jaxtyping import Array, Float, PyTree

from ._base import Parameter
from ._expressions import CONSTANTS, Expression, ExpressionError, parse
from ._types import Scalar, State

_PARAMETER_KEYS = ("value", "unit", "doc", "positive", "bounds")


def frozen(value: Any) -> Any:
    """`value` with every list (at any depth) a tuple: hashable, comparable by content."""
    if isinstance(value, (list, tuple)):
        return tuple(frozen(v) for v in value)
    return value


class Program:
    """What a text model computes, held by the model as a static field: equal (and
    hashed alike) when the parts it was made of are, so that two models of equal text are
    equal. A subclass says what its parts are in `_parts`, made hashable with `frozen`;
    the parts are never changed once the program is made."""

    def _parts(self) -> tuple:
        raise NotImplementedError

    def _key(self) -> tuple:
        key = self.__dict__.get("_frozen_parts")
        if key is None:
            key = self.__dict__["_frozen_parts"] = self._parts()
        return key

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if type(other) is not type(self):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        cached = self.__dict__.get("_hash")
        if cached is None:
            cached = self.__dict__["_hash"] = hash((type(self).__name__, self._key()))
        return cached


def values_at(state_names: tuple[str, ...], t: Scalar, y: State, params: PyTree) -> dict[str, Any]:
    """The values an expression reads: the parameters, the states by name and `t`."""
    return _named(state_names, t, y, params)


def _named(state_names: tuple[str, ...], t: Any, y: Any, params: PyTree) -> dict[str, Any]:
    # (the parameters first, so that a state or `t` wins over a parameter of its name)
    values = dict(params)
    values.update({name: y[i] for i, name in enumerate(state_names)})
    values["t"] = t
    return values


def evaluate(expressions, values: dict[str, Any], dtype) -> Array:
    """The expressions' values stacked into a vector of `dtype` (constants broadcast)."""
    return jnp.stack([jnp.broadcast_to(jnp.asarray(e(values), dtype), ()) for e in expressions])


Partials = tuple[tuple[str, Expression], ...]
"""An expression's derivatives that are not structurally zero: (symbol, derivative)."""


def differentiate(
    expressions: Sequence[Expression], state_names: Collection[str]
) -> tuple[Partials, ...]:
    """Each expression's symbolic derivatives by the symbols it reads, the states first
    (in their order), then the parameters and `t` by name; structural zeros left out."""
    out = []
    for e in expressions:
        order = [name for name in state_names if name in e.names] + sorted(
            e.names - set(state_names)
        )
        out.append(tuple((name, d) for name in order if not (d := e.derivative(name)).is_zero))
    return tuple(out)


def evaluate_symbolic(
    state_names: tuple[str, ...],
    expressions: tuple[Expression, ...],
    partials: tuple[Partials, ...],
    t: Scalar,
    y: State,
    params: PyTree,
) -> State:
    """`evaluate` of the expressions at (t, y, params) as a function whose every JVP
    (so `jax.jvp`, `jax.jacfwd`, the Newton iterations of implicit solvers, forward
    sensitivities, and reverse mode by transposition) is the sum of the non-zero
    `partials` (from `differentiate`) times the tangents of the states, the parameters
    and `t`; a parameter without a tangent (not differentiated, or an integer) costs
    nothing. The expressions, their partials and the state names are static.
    """
    reads = set().union(*(e.names for e in expressions))
    return _evaluate_symbolic(
        state_names,
        expressions,
        partials,
        t,
        y,
        {k: v for k, v in dict(params).items() if k in reads},
    )


@partial(jax.custom_jvp, nondiff_argnums=(0, 1, 2))
def _evaluate_symbolic(state_names, expressions, partials, t, y, params):
    return evaluate(expressions, values_at(state_names, t, y, params), y.dtype)


def _evaluate_symbolic_jvp(state_names, expressions, partials, primals, tangents):
    t, y, params = primals
    values = values_at(state_names, t, y, params)
    return evaluate(expressions, values, y.dtype), symbolic_tangent(
        partials, values, _tangent_values(state_names, *tangents), y.dtype
    )


_evaluate_symbolic.defjvp(_evaluate_symbolic_jvp, symbolic_zeros=True)


def _tangent_values(state_names: tuple[str, ...], t_dot, y_dot, params_dot) -> dict[str, Array]:
    """The tangent of each value an expression reads, under the key `values_at` gives the
    value; none where the tangent is a symbolic zero or has no tangent space (an integer)."""
    states = [None] * len(state_names) if isinstance(y_dot, SymbolicZero) else y_dot
    tangents = _named(state_names, t_dot, states, params_dot)
    return {
        name: tangent
        for name, tangent in tangents.items()
        if isinstance(tangent, (jax.Array, np.ndarray))
        and jnp.issubdtype(tangent.dtype, jnp.inexact)
    }


def symbolic_tangent(
    partials: tuple[Partials, ...], values: dict[str, Any], tangents: dict[str, Array], dtype
) -> Array:
    """The JVP of the expressions whose `partials` these are: for each, the sum over its
    non-zero partial derivatives of the derivative's value times the symbol's tangent
    (symbols without a tangent skipped), a vector of `dtype`."""
    rows = []
    for row in partials:
        terms = [
            jnp.asarray(d(values), dtype) * jnp.asarray(tangents[name], dtype)
            for name, d in row
            if name in tangents
        ]
        rows.append(reduce(jnp.add, terms) if terms else jnp.zeros((), dtype))
    return jnp.stack(rows)


def state_jacobian(
    state_names: tuple[str, ...], partials: tuple[Partials, ...], values: dict[str, Any], dtype
) -> Float[Array, "n n"]:
    """d(expression i)/d(state j) [n, n] from the symbolic `partials`: the structural
    zeros are not evaluated."""
    column = {name: j for j, name in enumerate(state_names)}
    rows = []
    for row in partials:
        entries = [jnp.zeros((), dtype)] * len(state_names)
        for name, d in row:
            if name in column:
                entries[column[name]] = jnp.broadcast_to(jnp.asarray(d(values), dtype), ())
        rows.append(jnp.stack(entries))
    return jnp.stack(rows)


def _parameter(name: str, spec: Any) -> Parameter:
    if isinstance(spec, dict):
        unknown = [k for k in spec if k not in _PARAMETER_KEYS]
        if unknown:
            raise ValueError(
                f"parameters.{name}: unknown key {unknown[0]!r} (keys: "
                f"{', '.join(_PARAMETER_KEYS)})"
            )
        if "value" not in spec:
            raise ValueError(f"parameters.{name}: expected a value = ... in its table")
        value, unit, doc = spec["value"], spec.get("unit", "1"), spec.get("doc", "")
        positive = spec.get("positive", False)
        if not isinstance(positive, bool):
            raise ValueError(
                f"parameters.{name}.positive: expected true or false, got {positive!r}"
            )
        if not isinstance(unit, str) or not isinstance(doc, str):
            raise ValueError(f"parameters.{name}: expected unit and doc as text")
        bounds = spec.get("bounds")
        if bounds is not None:
            if not (
                isinstance(bounds, list)
                and len(bounds) == 2
                and all(
                    isinstance(b, (int, float)) and not isinstance(b, bool) and math.isfinite(b)
                    for b in bounds
                )
                and bounds[0] < bounds[1]
            ):
                raise ValueError(
                    f"parameters.{name}.bounds: expected [low, high], finite numbers with low < "
                    f"high, got {bounds!r}"
                )
            bounds = (float(bounds[0]), float(bounds[1]))
    else:
        value, unit, doc, positive, bounds = spec, "1", "", False, None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"parameters.{name}: expected a finite number, got {value!r}")
    if positive and not value > 0:
        raise ValueError(
            f"parameters.{name}: expected a positive value (it is declared positive), got {value!r}"
        )
    if bounds is not None and not bounds[0] <= value <= bounds[1]:
        raise ValueError(
            f"parameters.{name}: expected a value within its bounds [{bounds[0]:g}, "
            f"{bounds[1]:g}], got {value!r}"
        )
    if positive and bounds is not None and bounds[1] <= 0:
        raise ValueError(
            f"parameters.{name}.bounds: a positive parameter needs high > 0, got {list(bounds)!r}"
        )
    return Parameter(name, float(value), unit, doc, "positive" if positive else "real", bounds)


def _identifier(kind: str, name: str) -> None:
    if not name.isidentifier() or name == "t" or name in CONSTANTS:
        raise ValueError(
            f"{kind}.{name}: expected a name of letters, digits and _ (not t, pi or e)"
        )
    if keyword.iskeyword(name):
        # (soft keywords, match or type, are names to Python's parser wherever an
        # expression can hold them)
        raise ValueError(
            f"{kind}.{name}: is a Python keyword, which no expression can read as a name; expected "
            "another name"
        )
    if unicodedata.normalize("NFKC", name) != name:
        # Python's parser reads such a name as its normal form (a mathematical italic x
        # as x): an expression would read another quantity than the one written.
        raise ValueError(
            f"{kind}.{name}: expected a name in its normal Unicode form "
            f"({unicodedata.normalize('NFKC', name)!r} reads the same in an expression)"
        )


def declare(
    kind: str,
    label: str,
    states: dict[str, Any],
    parameters: dict[str, Any] | None,
    observables: dict[str, str] | None,
    **tables: dict[str, str],
) -> tuple[
    dict[str, Any],
    list[tuple[str, Expression]],
    list[tuple[str, Expression]],
    dict[str, list[tuple[str, Expression]]],
]:
    """Check a text model's declarations and parse its expressions: (the declarations,
    the fields every text model has: name, description, parameters, state names and the
    initial values' constraint; the parsed states, the parsed observables, the parsed
    `tables` by name, such as the noise).

    Raises:
        ValueError: naming the entry (`states.S`, `parameters.beta`, ...) and, for an
            expression, the column.
    """
    parameters = dict(parameters or {})
    observables = dict(observables or {})
    if not states:
        raise ValueError("states: expected at least one state = its right-hand side")
    states, constraint = _states(states)
    for group, names in (
        ("states", states),
        ("parameters", parameters),
        ("observables", observables),
    ):
        for name in names:
            _identifier(group, name)
    for name in parameters:
        if name in states:
            raise ValueError(f"parameters.{name}: is also a state")
    for name in observables:
        if name in states or name in parameters:
            raise ValueError(
                f"observables.{name}: is also a {'state' if name in states else 'parameter'}"
            )
    for group, table in tables.items():
        for name in table:
            if name not in states:
                raise ValueError(f"{group}.{name}: is not a state (states: {', '.join(states)})")
    symbols = set(states) | set(parameters) | {"t"}

    def compile_all(group: str, table: dict[str, str]) -> list[tuple[str, Expression]]:
        out = []
        for name, text in table.items():
            try:
                out.append((name, parse(text, symbols)))
            except ExpressionError as e:
                raise ValueError(f"{group}.{name}: {e}") from None
        return out

    declared = {
        "name": label,
        "description": f"an {kind} model written in its config ({len(states)} states)",
        "parameters": tuple(_parameter(name, spec) for name, spec in parameters.items()),
        "state_names": tuple(states),
        "initial_constraint": constraint,
    }
    parsed = {group: compile_all(group, table) for group, table in tables.items()}
    return declared, compile_all("states", states), compile_all("observables", observables), parsed


def _states(states: dict[str, Any]) -> tuple[dict[str, str], str]:
    """Each state's expression (given as text, or as a table with `rate` and
    `positive`) and the constraint of the initial values: positive when every state is
    declared positive (a fit then transforms the initial values by log), else real."""
    texts, positive = {}, []
    for name, spec in states.items():
        if isinstance(spec, dict):
            unknown = [k for k in spec if k not in ("rate", "positive")]
            if unknown or "rate" not in spec:
                raise ValueError(
                    f'states.{name}: expected text, or a table with rate = "..." and positive = '
                    "true or false"
                )
            if not isinstance(spec.get("positive", False), bool):
                raise ValueError(
                    f"states.{name}.positive: expected true or false, got {spec['positive']!r}"
                )
            texts[name] = spec["rate"]
            positive.append(spec.get("positive", False))
        else:
            texts[name] = spec
            positive.append(False)
    if any(positive) and not all(positive):
        declared = [name for name, p in zip(states, positive, strict=False) if p]
        raise ValueError(
            f"states.{declared[0]}.positive: declare every state positive or none (the initial "
            "values share one constraint)"
        )
    return texts, "positive" if all(positive) else "real"
