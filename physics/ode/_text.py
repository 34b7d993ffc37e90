"""ODE models whose right-hand sides are written as text (a config's `[model.states]`)."""

from __future__ import annotations

from typing import Any

import equinox as eqx
from jaxtyping import Array, Float, PyTree

from .._base import Parameter
from .._expressions import Expression
from .._text import (
    Partials,
    declare,
    differentiate,
    evaluate,
    evaluate_symbolic,
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
    evaluation of the rates instead (the same values to rounding). `stiff` is what the
    text declares (`OdeModel.stiff`): True has a config that names no method solved by an
    implicit one.

    A text model is a value: its declarations and parsed expressions are static fields,
    so two models of equal text are equal and share their compiled programs."""

    name: str = eqx.field(static=True)
    description: str = eqx.field(static=True)
    parameters: tuple[Parameter, ...] = eqx.field(static=True)
    state_names: tuple[str, ...] = eqx.field(static=True)
    initial_constraint: str = eqx.field(static=True)
    rates: tuple[Expression, ...] = eqx.field(static=True)
    extras: tuple[tuple[str, Expression], ...] = eqx.field(static=True)
    partials: tuple[Partials, ...] = eqx.field(static=True)
    symbolic_jacobian: bool = eqx.field(static=True, default=True)
    # (an instance's value of `OdeModel.stiff`, given by name)
    stiff: bool = eqx.field(static=True, default=False, kw_only=True)

    @property
    def initial_defaults(self) -> dict[str, float]:
        """Every state starts at 0 unless a config's `[initial]` says otherwise."""
        return dict.fromkeys(self.state_names, 0.0)

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


def ode_model(
    label: str,
    states: dict[str, Any],
    parameters: dict[str, Any] | None = None,
    observables: dict[str, str] | None = None,
    stiff: bool = False,
) -> TextOdeModel:
    """An `OdeModel` from text: `states` maps each state to the right-hand side of its
    time derivative (text, or a table with `rate` and `positive`: every state or none
    declared positive), `parameters` each parameter to a default (a number, or a table
    with value, unit, doc, positive), `observables` derived quantities to expressions.
    Each rate is differentiated symbolically by every state, parameter and `t` it reads.

    Arguments:
        label: the model's name.
        states: state name -> its rate dS/dt (an expression of the states, the parameters
            and `t`), or a table {rate = ..., positive = ...}; at least one state.
        parameters: parameter name -> its default (a number, or a table with `value`,
            `unit`, `doc`, `positive`); None for none.
        observables: observable name -> its expression; None for none.
        stiff: the equations are stiff (`OdeModel.stiff`): a config that names no
            `[solver] method` solves them with an implicit method.

    Returns:
        A `TextOdeModel`; every state starts at 0 unless its initial value is given.

    Example:
        >>> model = ode_model("decay", {"x": "-k * x"}, {"k": 0.5})

    Raises:
        ValueError: naming the entry (`states.S`, `parameters.beta`, `stiff`, ...) and, for
            an expression, the column.
    """
    if not isinstance(stiff, bool):
        raise ValueError(f"stiff: expected true or false, got {stiff!r}")
    declared, rates, extras, _ = declare("ODE", label, states, parameters, observables)
    expressions = tuple(e for _, e in rates)
    return TextOdeModel(
        **declared,
        rates=expressions,
        extras=tuple(extras),
        partials=differentiate(expressions, declared["state_names"]),
        stiff=stiff,
    )
