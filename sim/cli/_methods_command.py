"""`sim methods`: the ODE methods a config's `[solver] method` may name, with what each
declares (`solvers.ODE_METHODS`): kind, order, dense-output order, adaptive steps."""

from __future__ import annotations

from ._app import _Command, app
from ._console import _plain_table, out


@app.command(cls=_Command)
def methods() -> None:
    """List the ODE methods with their kind (explicit, implicit for stiff problems, IMEX),
    the order of a step, the order of the values between steps, and whether the steps
    adapt to rtol and atol (else constant steps of [time] dt)."""
    from solvers import ODE_METHODS

    rows = [
        (
            name,
            method.kind,
            str(method.order),
            str(method.dense_order),
            "yes" if method.adaptive else "no ([time] dt)",
        )
        for name, method in ODE_METHODS.items()
    ]
    columns = ("method", "kind", "order", "dense order", "adaptive")
    out.print(_plain_table(columns, rows))
