"""How a solve ended: one enumeration shared by every solver, each failure with its message.

Every solver reports an int32 `result` (a scalar, or one per run in a batch) whose values
are the members of `Result`. The codes are simjax's own, not a library's internal
numbering, so a code stored in a file keeps its meaning when a dependency changes: sweep
files keep `stats/result` per run, and `result_message` turns any code into the sentence
a user is shown.
"""

from __future__ import annotations

import enum

import diffrax
import jax.numpy as jnp
from jaxtyping import Array, Int


class Result(enum.IntEnum):
    """Outcome codes. 0 is success; every failure has its own code and message."""

    successful = 0
    max_steps_reached = 1
    step_size_too_small = 2
    implicit_solve_failed = 3
    nonfinite_state = 4
    neighbour_overflow = 5
    internal_error = 6
    too_many_events = 7
    event_cascade = 8


_MESSAGES: dict[Result, str] = {
    Result.successful: "successful",
    Result.max_steps_reached: (
        "the maximum number of solver steps was reached before the end time: the "
        "solution may blow up in finite time, the problem may be stiff (use an implicit "
        "method), or [solver] max_steps is too small"
    ),
    Result.step_size_too_small: (
        "the adaptive step control found no acceptable step (the step fell below its "
        "minimum or was rejected too often): the solution is likely singular (a "
        "finite-time blow-up) or the problem is very stiff"
    ),
    Result.implicit_solve_failed: (
        "the nonlinear (Newton) solve of an implicit step failed: it diverged, hit its "
        "iteration limit, or met a singular Jacobian; try tighter tolerances or a smaller dt0"
    ),
    Result.nonfinite_state: (
        "the state became non-finite (NaN or infinite): the dynamics blew up or the "
        "step is too large for the method's stability region"
    ),
    Result.neighbour_overflow: (
        "a neighbour list overflowed its capacity and could not be regrown inside a "
        "batched computation: particles came closer or denser than the list was built for"
    ),
    Result.internal_error: "an internal error occurred in the solver (a bug: please report it)",
    Result.event_cascade: (
        "events executed at one instant changed another event's condition more than once (a "
        "cascade of simultaneous events deeper than the solver follows); simulating it would "
        "give a different model"
    ),
    Result.too_many_events: (
        "more events fired than [solver] max_events allows before the end time: an event "
        "may trigger itself again at once (check its condition against its assignments), "
        "or raise max_events"
    ),
}


def result_message(code: int | Result) -> str:
    """The message of a result code; an unknown code says so rather than guessing."""
    try:
        return _MESSAGES[Result(int(code))]
    except ValueError:
        return f"unknown result code {int(code)}"


# Each diffrax outcome and the code it becomes. A terminating event is a successful end.
_FROM_DIFFRAX: tuple[tuple[str, Result], ...] = (
    ("successful", Result.successful),
    ("event_occurred", Result.successful),
    ("max_steps_reached", Result.max_steps_reached),
    ("max_steps_rejected", Result.step_size_too_small),
    ("dt_min_reached", Result.step_size_too_small),
    ("nonfinite", Result.nonfinite_state),
    ("nonlinear_max_steps_reached", Result.implicit_solve_failed),
    ("nonlinear_divergence", Result.implicit_solve_failed),
    ("singular", Result.implicit_solve_failed),
    ("breakdown", Result.implicit_solve_failed),
    ("stagnation", Result.implicit_solve_failed),
    ("conlim", Result.implicit_solve_failed),
    ("nonfinite_input", Result.implicit_solve_failed),
)


def from_diffrax(result: diffrax.RESULTS) -> Int[Array, "..."]:
    """The `Result` code of a diffrax outcome (works under jit and vmap).

    Only diffrax's public comparison of outcomes is used, so a renumbering inside
    diffrax cannot change a code; an outcome this table does not know (a new one in a
    later diffrax) becomes `internal_error`, never success.
    """
    code = jnp.asarray(Result.internal_error, dtype=jnp.int32)
    for name, ours in _FROM_DIFFRAX:
        if hasattr(diffrax.RESULTS, name):
            code = jnp.where(result == getattr(diffrax.RESULTS, name), jnp.int32(ours), code)
    return code
