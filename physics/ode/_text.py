"""ODE models whose right-hand sides are written as text (a config's `[model.states]`)."""

from __future__ import annotations

import math
from typing import Any

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, PyTree

from .._base import Parameter
from .._expressions import CONSTANTS, Expression, ExpressionError, parse
from .._types import Scalar, State
from .base import OdeModel

_PARAMETER_KEYS = ("value", "unit", "doc", "positive")


class TextOdeModel(OdeModel):
    """An ODE model built by `ode_model`: dy_i/dt is the expression `rates[i]` of the
    states, the parameters and `t`; `extras` are derived observables."""

    rates: tuple[Expression, ...] = eqx.field(static=True)
    extras: tuple[tuple[str, Expression], ...] = eqx.field(static=True)

    def _values(self, t: Scalar, y: State, params: PyTree) -> dict[str, Any]:
        values = dict(params)
        values.update({name: y[i] for i, name in enumerate(self.state_names)})
        values["t"] = t
        return values

    def vector_field(self, t: Scalar, y: State, params: PyTree) -> State:
        values = self._values(t, y, params)
        return jnp.stack([jnp.broadcast_to(jnp.asarray(rate(values), y.dtype), ()) for rate in self.rates])

    def extra_observables(self, t: Scalar, y: State, params: PyTree) -> dict[str, Array]:
        values = self._values(t, y, params)
        return {name: jnp.broadcast_to(jnp.asarray(e(values), y.dtype), ()) for name, e in self.extras}


def _parameter(name: str, spec: Any) -> Parameter:
    if isinstance(spec, dict):
        unknown = [k for k in spec if k not in _PARAMETER_KEYS]
        if unknown:
            raise ValueError(f"parameters.{name}: unknown key {unknown[0]!r} (keys: {', '.join(_PARAMETER_KEYS)})")
        if "value" not in spec:
            raise ValueError(f"parameters.{name}: expected a value = ... in its table")
        value, unit, doc = spec["value"], spec.get("unit", "1"), spec.get("doc", "")
        positive = spec.get("positive", False)
        if not isinstance(positive, bool):
            raise ValueError(f"parameters.{name}.positive: expected true or false, got {positive!r}")
        if not isinstance(unit, str) or not isinstance(doc, str):
            raise ValueError(f"parameters.{name}: expected unit and doc as text")
    else:
        value, unit, doc, positive = spec, "1", "", False
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"parameters.{name}: expected a finite number, got {value!r}")
    if positive and not value > 0:
        raise ValueError(f"parameters.{name}: expected a positive value (it is declared positive), got {value!r}")
    return Parameter(name, float(value), unit, doc, "positive" if positive else "real")


def _identifier(kind: str, name: str) -> None:
    if not name.isidentifier() or name == "t" or name in CONSTANTS:
        raise ValueError(f"{kind}.{name}: expected a name of letters, digits and _ (not t, pi or e)")


def ode_model(label: str, states: dict[str, str], parameters: dict[str, Any] | None = None, observables: dict[str, str] | None = None) -> TextOdeModel:
    """An `OdeModel` from text: `states` maps each state to the right-hand side of its
    time derivative, `parameters` each parameter to a default (a number, or a table
    with value, unit, doc, positive), `observables` derived quantities to expressions.

    Example:
        >>> model = ode_model("decay", {"x": "-k * x"}, {"k": 0.5})

    Raises:
        ValueError: naming the entry (`states.S`, `parameters.beta`, ...) and, for an
            expression, the column.
    """
    parameters = dict(parameters or {})
    observables = dict(observables or {})
    if not states:
        raise ValueError("states: expected at least one state = its right-hand side")
    for kind, names in (("states", states), ("parameters", parameters), ("observables", observables)):
        for name in names:
            _identifier(kind, name)
    for name in parameters:
        if name in states:
            raise ValueError(f"parameters.{name}: is also a state")
    for name in observables:
        if name in states or name in parameters:
            raise ValueError(f"observables.{name}: is also a {'state' if name in states else 'parameter'}")
    declared = tuple(_parameter(name, spec) for name, spec in parameters.items())
    symbols = set(states) | set(parameters) | {"t"}

    def compile_all(kind: str, table: dict[str, str]) -> list[tuple[str, Expression]]:
        out = []
        for name, text in table.items():
            try:
                out.append((name, parse(text, symbols)))
            except ExpressionError as e:
                raise ValueError(f"{kind}.{name}: {e}") from None
        return out

    rates = compile_all("states", states)
    extras = compile_all("observables", observables)
    namespace = {
        "name": label,
        "description": f"an ODE model written in its config ({len(states)} states)",
        "parameters": declared,
        "state_names": tuple(states),
        "initial_defaults": {name: 0.0 for name in states},
        "__module__": __name__,
        "__doc__": f"The ODE model {label!r} written as text.",
    }
    cls = type(f"Text_{label}" if label.isidentifier() else "TextModel", (TextOdeModel,), namespace)
    return cls(rates=tuple(e for _, e in rates), extras=tuple(extras))


