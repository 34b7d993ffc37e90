"""ODE models whose right-hand sides are written as text (a config's `[model.states]`)."""

from __future__ import annotations

from typing import Any

import equinox as eqx
from jaxtyping import Array, PyTree

from .._expressions import Expression
from .._text import class_name, declare, evaluate, values_at
from .._types import Scalar, State
from .base import OdeModel


class TextOdeModel(OdeModel):
    """An ODE model built by `ode_model`: dy_i/dt is the expression `rates[i]` of the
    states, the parameters and `t`; `extras` are derived observables."""

    rates: tuple[Expression, ...] = eqx.field(static=True)
    extras: tuple[tuple[str, Expression], ...] = eqx.field(static=True)

    def vector_field(self, t: Scalar, y: State, params: PyTree) -> State:
        return evaluate(self.rates, values_at(self.state_names, t, y, params), y.dtype)

    def extra_observables(self, t: Scalar, y: State, params: PyTree) -> dict[str, Array]:
        values = values_at(self.state_names, t, y, params)
        return dict(zip([n for n, _ in self.extras], evaluate([e for _, e in self.extras], values, y.dtype))) if self.extras else {}


def ode_model(label: str, states: dict[str, Any], parameters: dict[str, Any] | None = None, observables: dict[str, str] | None = None) -> TextOdeModel:
    """An `OdeModel` from text: `states` maps each state to the right-hand side of its
    time derivative (text, or a table with `rate` and `positive`: every state or none
    declared positive), `parameters` each parameter to a default (a number, or a table
    with value, unit, doc, positive), `observables` derived quantities to expressions.

    Example:
        >>> model = ode_model("decay", {"x": "-k * x"}, {"k": 0.5})

    Raises:
        ValueError: naming the entry (`states.S`, `parameters.beta`, ...) and, for an
            expression, the column.
    """
    namespace, rates, extras, _ = declare("ODE", label, states, parameters, observables)
    cls = type(class_name(label), (TextOdeModel,), {**namespace, "__module__": __name__})
    return cls(rates=tuple(e for _, e in rates), extras=tuple(extras))
