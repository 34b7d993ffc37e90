"""ODE solves with events: a trigger's time located by root finding, assignments to the
state and the arguments applied there, and the solve resumed, in one compiled program
through which gradients flow (event times included).

An `OdeEvent` fires when its trigger g(t, y, args) crosses zero upwards (a condition
`a < b` becomes true when b - a rises through zero). `solve_with_events` runs the solve
as a `lax.scan` over `solver.max_events + 1` segments: each segment is one
`diffrax.diffeqsolve` from the last event (or the start) that stops at the next event,
its time found by Newton's method on the step's dense interpolation (diffrax's `Event`
with a root finder: the event time is a differentiable function of the parameters,
by the implicit function theorem). The save times a segment covers take its values; the
assignments of the events that fired make the next segment's start. A terminal event
ends the run: later save times hold the state after the event.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import optimistix as optx
from jaxtyping import Array, PyTree

from ._ode import OdeSolution, OdeSolver, make_adjoint
from ._results import Result, from_diffrax


class OdeEvent(eqx.Module):
    """One event of an ODE.

    Arguments:
        trigger: g(t, y, args) -> scalar; the event fires where g crosses zero upwards.
        apply: (t, y, args) -> (y, args) after the event.
        terminal: whether the run ends at the event.
        holds: (t, y, args) -> bool, the condition itself (default: g > 0).
        initial_value: False fires the event at the start if its condition holds there
            (True: the condition counts as having held before the start).
        persistent: False drops the event when an event executed before it at the same
            time makes its condition false.
        values_at_trigger: True computes the assignments from the values where the
            event fired, before the events executed before it at the same time (`apply`
            then takes `source=(y, args)`, the values to read).
    """

    trigger: Callable[[Any, Array, Any], Array] = eqx.field(static=True)
    apply: Callable[[Any, Array, Any], tuple[Array, Any]] = eqx.field(static=True)
    terminal: bool = eqx.field(static=True, default=False)
    holds: Callable[[Any, Array, Any], Array] | None = eqx.field(static=True, default=None)
    initial_value: bool = eqx.field(static=True, default=True)
    persistent: bool = eqx.field(static=True, default=True)
    values_at_trigger: bool = eqx.field(static=True, default=False)


def _select(flag: Array, new: PyTree, old: PyTree) -> PyTree:
    return jax.tree.map(lambda a, b: jnp.where(flag, a, b), new, old)


def solve_with_events(
    solver: OdeSolver,
    vector_field: Callable,
    ts: Array,
    y0: Array,
    args: Any,
    events: tuple[OdeEvent, ...],
) -> tuple[OdeSolution, Array]:
    """Integrate from ts[0] to ts[-1] with `events`, saving the state at every `ts`.

    Returns:
        (an `OdeSolution` as `OdeSolver.solve` gives, the number of events that fired).
        More than `solver.max_events` events before the end is the failure
        `Result.too_many_events` (NaN states).
    """
    if isinstance(vector_field, tuple):
        raise TypeError("a solve with events takes one vector field (not an IMEX pair)")
    dsolver = solver.diffrax_solver()
    # The arguments of every segment carry which events are armed: an event whose
    # condition holds (or is about to hold) after it fires must first become false again
    # (a trigger fires on its transition from false to true, as SBML says). While
    # disarmed, its condition function is -g: the segment stops where g falls through
    # zero, and the event is armed again there.
    terms = solver.terms(lambda t, y, packed: vector_field(t, y, packed[0]))
    controller = solver._controller()
    adjoint = make_adjoint(solver.adjoint, dsolver)
    conditions = tuple(
        (lambda t, y, args, _i=i, _e=e, **kw: jnp.where(args[1][_i], 1.0, -1.0) * _e.trigger(t, y, args[0])) for i, e in enumerate(events)
    )
    event = diffrax.Event(
        cond_fn=conditions if len(conditions) > 1 else conditions[0],
        root_finder=optx.Newton(rtol=1e-12, atol=1e-12),
        direction=tuple(True for _ in events) if len(events) > 1 else True,
    )
    t_end = ts[-1]
    T = ts.shape[0]

    def armed(t, y, a) -> Array:
        """Per event: armed unless its condition holds, or (at its boundary) is about to."""
        flags = []
        for e in events:
            g, rate = jax.jvp(lambda tt, yy: e.trigger(tt, yy, a), (t, y), (jnp.ones_like(t), vector_field(t, y, a)))
            scale = 1e-9 * (1.0 + jnp.abs(t))
            flags.append(jnp.where(jnp.abs(g) <= scale, rate <= 0, g < 0))
        return jax.lax.stop_gradient(jnp.stack(flags))

    def holds(e: OdeEvent, t, y, a) -> Array:
        return jnp.asarray(e.holds(t, y, a) if e.holds is not None else e.trigger(t, y, a) > 0)

    def becoming(e: OdeEvent, t, y, a) -> Array:
        """Whether the condition holds, or is on its boundary and about to hold (a root
        of another event that the root finder stopped at first)."""
        g, rate = jax.jvp(lambda tt, yy: e.trigger(tt, yy, a), (t, y), (jnp.ones_like(t), vector_field(t, y, a)))
        scale = 1e-9 * (1.0 + jnp.abs(t))
        return jax.lax.stop_gradient(holds(e, t, y, a) | ((jnp.abs(g) <= scale) & (rate > 0)))

    def execute(t, y, a, fired, flags):
        """Apply the events that fired, in their order; an event that is not persistent
        only if its condition still holds. Then, once, the armed events that the
        assignments made true at this time (a cascade). Returns (y, args, terminal,
        whether a cascade fired)."""
        terminal = jnp.asarray(False)
        # How often each condition changes while the events execute one after another:
        # twice or more is a cascade deeper than the one pass below follows.
        before = jnp.stack([holds(e, t, y, a) for e in events])
        changes = jnp.zeros(len(events), jnp.int32)
        trigger_values = (y, a)
        for e, f in zip(events, fired):
            if not e.persistent:
                f = f & becoming(e, t, y, a)
            applied_y, applied_a = e.apply(t, y, a, source=trigger_values) if e.values_at_trigger else e.apply(t, y, a)
            y, a = _select(f, applied_y, y), _select(f, applied_a, a)
            terminal = terminal | (f & e.terminal)
            now = jnp.stack([holds(other, t, y, a) for other in events])
            changes = changes + (now != before).astype(jnp.int32)
            before = now
        deep = jnp.any(changes >= 2)
        cascade = jnp.asarray(False)
        for i, e in enumerate(events):
            f = flags[i] & jnp.logical_not(fired[i]) & becoming(e, t, y, a) & jnp.logical_not(terminal)
            applied_y, applied_a = e.apply(t, y, a)
            y, a = _select(f, applied_y, y), _select(f, applied_a, a)
            terminal = terminal | (f & e.terminal)
            cascade = cascade | f
        return y, a, terminal, cascade, deep

    def segment(carry, _):
        t0, y, a, finished, count, result, steps, frozen_from, frozen = carry
        start = jnp.where(finished, t_end, t0)
        flags = armed(start, y, a)
        sol = diffrax.diffeqsolve(
            terms, dsolver, t0=start, t1=t_end, dt0=solver.dt0, y0=y, args=(a, flags),
            saveat=diffrax.SaveAt(ts=jnp.clip(ts, start, t_end), t1=True),
            stepsize_controller=controller, adjoint=adjoint, event=event,
            max_steps=solver.max_steps, throw=False,
        )
        code = from_diffrax(sol.result)
        # diffrax stores the end of the solve (the event) right after the last save
        # time it reached: the entry after the finite ones.
        last = jnp.sum(jnp.isfinite(sol.ts)) - 1
        t_stop, y_stop = sol.ts[last], sol.ys[last]
        mask = sol.event_mask if isinstance(sol.event_mask, tuple) else (sol.event_mask,)
        stopped = [jnp.logical_and(m, jnp.logical_not(finished)) for m in mask]
        any_stop = jnp.any(jnp.stack(stopped))
        # Every armed event whose condition becomes true where the solve stopped fires
        # there (the root finder flags one of several simultaneous roots); a disarmed
        # event's stop only re-arms it.
        fired = [flags[i] & any_stop & (m | becoming(e, t_stop, y_stop, a)) for i, (e, m) in enumerate(zip(events, stopped))]
        any_fired = jnp.any(jnp.stack(fired))
        # The save times of this segment: from its start, up to (not at) where it stopped.
        covered = (ts >= start) & jnp.where(any_stop, ts < t_stop, True) & jnp.logical_not(finished)
        new_y, new_a, terminal, cascade, deep = execute(t_stop, y_stop, a, fired, flags)
        result = jnp.where((result == 0) & jnp.logical_not(finished), code, result)
        result = jnp.where((result == 0) & jnp.logical_not(finished) & any_fired & deep, int(Result.event_cascade), result)
        steps = steps + jnp.where(finished, 0, sol.stats["num_steps"])
        count = count + any_fired.astype(count.dtype) + cascade.astype(count.dtype)
        too_many = count > solver.max_events
        ends = jnp.logical_not(finished) & (jnp.logical_not(any_stop) | terminal | (code != 0) | too_many | (result != 0))
        result = jnp.where(ends & too_many & (result == 0), int(Result.too_many_events), result)
        frozen_from = jnp.where(ends & terminal, t_stop, frozen_from)
        frozen = _select(ends & terminal, new_y, frozen)
        carry = (t_stop, new_y, new_a, finished | ends, count, result, steps, frozen_from, frozen)
        return carry, (sol.ys[:-1], covered)

    # Events whose condition holds at the start and that do not count it as having held
    # before fire there.
    start_fired = [jnp.asarray(holds(e, ts[0], y0, args)) if not e.initial_value else jnp.asarray(False) for e in events]
    y_start, a_start, _, _, deep_start = execute(ts[0], y0, args, start_fired, [jnp.asarray(False)] * len(events))
    start_count = jnp.sum(jnp.stack(start_fired).astype(jnp.int32)) if events else jnp.asarray(0, jnp.int32)
    init = (ts[0], y_start, a_start, jnp.asarray(False), start_count, jnp.where(deep_start, int(Result.event_cascade), 0).astype(jnp.int32),
            jnp.asarray(0, jnp.int32), jnp.asarray(jnp.inf, ts.dtype), y_start)
    # Each event may need a second stop to re-arm it: twice as many segments as events.
    carry, (ys, covered) = jax.lax.scan(segment, init, None, length=2 * solver.max_events + 1)
    _, _, _, finished, count, result, steps, frozen_from, frozen = carry
    # Each save time is covered by one segment (or lies after a terminal event).
    weights = covered.reshape(covered.shape + (1,) * (ys.ndim - 2))
    saved = jnp.sum(jnp.where(weights, ys, 0.0), axis=0)
    after = (ts >= frozen_from).reshape((T,) + (1,) * (saved.ndim - 1))
    saved = jnp.where(after, frozen, saved)
    result = jnp.where((result == 0) & jnp.logical_not(finished), int(Result.too_many_events), result)
    failed = result != 0
    saved = jnp.where(failed, jnp.nan, saved)
    if solver.throw:
        saved = eqx.error_if(saved, failed, "the solve with events failed (more than max_events events, or a failed step)")
    return OdeSolution(ys=saved, num_steps=steps, num_accepted_steps=steps, result=result), count
