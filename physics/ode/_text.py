"""ODE models whose right-hand sides are written as text (a config's `[model.states]`)."""

from __future__ import annotations

from typing import Any

import equinox as eqx
from jaxtyping import Array, Float, PyTree

from .._expressions import Expression
from .._text import (
    Partials,
    class_name,
    declare,
    differentiate,
    evaluate,
    evaluate_symbolic,
    remembered,
    state_jacobian,
    values_at,
)
from .._types import Scalar, State
from .base import OdeModel


class TextOdeModel(OdeModel):
    """An ODE model built by `ode_model`: dy_i/dt is the expression `rates[i]` of the
    states, the parameters and `t`; `extras` are derived observables. `partials` are the
    rates' symbolic derivatives (`physics._text.differentiate`): every JVP of the vector
    field (the Jacobians of implicit solvers' Newton iterations, sensitivities, gradients)
    is computed from them, with `symbolic_jacobian=True`; False lets JAX differentiate the
    evaluation of the rates instead (the same values to rounding)."""

    rates: tuple[Expression, ...] = eqx.field(static=True)
    extras: tuple[tuple[str, Expression], ...] = eqx.field(static=True)
    partials: tuple[Partials, ...] = eqx.field(static=True)
    symbolic_jacobian: bool = eqx.field(static=True, default=True)

    def vector_field(self, t: Scalar, y: State, params: PyTree) -> State:
        if self.symbolic_jacobian:
            return evaluate_symbolic(self.state_names, self.rates, self.partials, t, y, params)
        return evaluate(self.rates, values_at(self.state_names, t, y, params), y.dtype)

    def jacobian(self, t: Scalar, y: State, params: PyTree) -> Float[Array, "n n"]:
        """d(vector_field)/dy [n, n] at (t, y), evaluated from the symbolic derivatives
        (entries that are structurally zero are not evaluated).

        Example:
            >>> model = ode_model("decay", {"x": "-k * x ** 2"}, {"k": 0.5})
            >>> model.jacobian(0.0, jnp.array([2.0]), model.default_params())
            Array([[-2.]], dtype=float64)
        """
        return state_jacobian(
            self.state_names, self.partials, values_at(self.state_names, t, y, params), y.dtype
        )

    def extra_observables(self, t: Scalar, y: State, params: PyTree) -> dict[str, Array]:
        values = values_at(self.state_names, t, y, params)
        return (
            dict(
                zip(
                    [n for n, _ in self.extras],
                    evaluate([e for _, e in self.extras], values, y.dtype),
                    strict=False,
                )
            )
            if self.extras
            else {}
        )


@remembered
def ode_model(
    label: str,
    states: dict[str, Any],
    parameters: dict[str, Any] | None = None,
    observables: dict[str, str] | None = None,
) -> TextOdeModel:
    """An `OdeModel` from text: `states` maps each state to the right-hand side of its
    time derivative (text, or a table with `rate` and `positive`: every state or none
    declared positive), `parameters` each parameter to a default (a number, or a table
    with value, unit, doc, positive), `observables` derived quantities to expressions.
    Each rate is differentiated symbolically by every state, parameter and `t` it reads.

    Example:
        >>> model = ode_model("decay", {"x": "-k * x"}, {"k": 0.5})

    Raises:
        ValueError: naming the entry (`states.S`, `parameters.beta`, ...) and, for an
            expression, the column.
    """
    namespace, rates, extras, _ = declare("ODE", label, states, parameters, observables)
    cls = type(class_name(label), (TextOdeModel,), {**namespace, "__module__": __name__})
    expressions = tuple(e for _, e in rates)
    return cls(
        rates=expressions,
        extras=tuple(extras),
        partials=differentiate(expressions, namespace["state_names"]),
    )
