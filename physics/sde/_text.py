"""SDE models written as text: a config's `[model.states]` (drifts) with `[model.noise]`
(diffusions, one Brownian motion per state)."""

from __future__ import annotations

from typing import Any

import equinox as eqx
from jaxtyping import Array, PyTree

from .._base import Parameter
from .._expressions import Expression
from .._text import declare, evaluate, values_at
from .._types import Scalar, State
from .base import SdeModel


class TextSdeModel(SdeModel):
    """An SDE model built by `sde_model`: dy_i = drifts[i] dt + diffusions[i] dW_i (Ito,
    diagonal noise; additive when no diffusion reads a state). A value, as
    `physics.ode.TextOdeModel` is: equal texts give equal models."""

    name: str = eqx.field(static=True)
    description: str = eqx.field(static=True)
    parameters: tuple[Parameter, ...] = eqx.field(static=True)
    state_names: tuple[str, ...] = eqx.field(static=True)
    initial_constraint: str = eqx.field(static=True)
    noise: str = eqx.field(static=True)
    drifts: tuple[Expression, ...] = eqx.field(static=True)
    diffusions: tuple[Expression | None, ...] = eqx.field(static=True)
    extras: tuple[tuple[str, Expression], ...] = eqx.field(static=True)

    @property
    def initial_defaults(self) -> dict[str, float]:
        """Every state starts at 0 unless a config's `[initial]` says otherwise."""
        return dict.fromkeys(self.state_names, 0.0)

    def drift(self, t: Scalar, y: State, params: PyTree) -> State:
        return evaluate(self.drifts, values_at(self.state_names, t, y, params), y.dtype)

    def diffusion(self, t: Scalar, y: State, params: PyTree) -> State:
        values = values_at(self.state_names, t, y, params)
        zero = lambda v: 0.0  # noqa: E731  (a state without noise)
        return evaluate([zero if e is None else e for e in self.diffusions], values, y.dtype)

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


def sde_model(
    label: str,
    states: dict[str, Any],
    noise: dict[str, str],
    parameters: dict[str, Any] | None = None,
    observables: dict[str, str] | None = None,
) -> TextSdeModel:
    """An `SdeModel` from text: `states` maps each state to its drift, `noise` (some of
    the states) to its diffusion, each state driven by its own Brownian motion;
    `parameters` and `observables` as for `physics.ode.ode_model`.

    Arguments:
        label: the model's name.
        states: state name -> its drift (an expression of the states, the parameters
            and `t`), or a table {rate = ..., positive = ...}; at least one state.
        noise: state name -> its diffusion (an expression), for at least one of the
            states; the others have none.
        parameters: parameter name -> its default (a number, or a table with `value`,
            `unit`, `doc`, `positive`); None for none.
        observables: observable name -> its expression; None for none.

    Returns:
        A `TextSdeModel` (Ito, diagonal noise; "additive" when no diffusion reads a
        state); every state starts at 0 unless its initial value is given.

    Example:
        >>> model = sde_model(
        ...     "ou", {"x": "-theta * x"}, {"x": "sigma"}, {"theta": 1.0, "sigma": 0.5}
        ... )

    Raises:
        ValueError: naming the entry and, for an expression, the column.
    """
    if not noise:
        raise ValueError("noise: expected at least one state = its diffusion")
    declared, drifts, extras, parsed = declare(
        "SDE", label, states, parameters, observables, noise=noise
    )
    by_state = dict(parsed["noise"])
    kind = "diagonal" if any(e.names & set(states) for e in by_state.values()) else "additive"
    return TextSdeModel(
        **declared,
        noise=kind,
        drifts=tuple(e for _, e in drifts),
        diffusions=tuple(by_state.get(name) for name in states),
        extras=tuple(extras),
    )
