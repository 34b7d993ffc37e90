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

A trigger is judged as its condition is: where g is NaN (a side of a comparison
undefined, as sqrt(x) for x < 0) the condition is false, so g counts as -1, and an
infinite g counts as +-1 (`finite_trigger`). The root finder keeps a bracket of the sign
change (`BracketedNewton`): Newton steps inside it, bisection where a Newton step would
leave it or meets a value without a derivative, so that a root next to the region where
the condition is undefined, or a jump of the condition there, is still located.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, NamedTuple

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import optimistix as optx
from jaxtyping import Array, PyTree, Scalar

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


def finite_trigger(
    trigger: Callable[[Any, Array, Any], Array],
) -> Callable[[Any, Array, Any], Array]:
    """`trigger` judged as a condition: NaN (undefined) counts as false, -1; an infinity
    by its sign, +-1; a finite value is kept, with its derivatives. Where the value is not
    finite the arguments are held constant (`stop_gradient`), so that no derivative
    there reaches a gradient as 0 * NaN."""

    def g(t, y, args):
        value = jax.lax.stop_gradient(trigger(t, y, args))
        finite = jnp.isfinite(value)
        held = jax.tree.map(lambda v: jnp.where(finite, v, jax.lax.stop_gradient(v)), (t, y, args))
        return jnp.where(finite, trigger(*held), jnp.where(jnp.isnan(value), -1.0, jnp.sign(value)))

    return g


class _BracketState(eqx.Module):
    lower: Scalar  # the end whose sign differs from the upper end's (or where h = 0)
    upper: Scalar  # the end on the side of the starting point
    upper_value: Scalar
    value: Scalar  # h at the last iterate
    diff: Scalar  # the last step
    last_diff: Scalar  # the step before it
    bisected: Array  # whether the last step was a bisection


def _total(fn, t, args):
    """The sum of the leaves of fn(t): the root function of the one event that fired
    (diffrax gives the others 0), or the distance to the end of the step when none did."""
    out, aux = fn(t, args)
    return sum(jax.tree.leaves(out)), aux


class BracketedNewton(optx.AbstractRootFinder):
    """A root finder for a scalar time in [lower, upper] (the `options` diffrax gives an
    event's root find) whose ends have values of opposite signs: Newton's method kept
    inside the bracket, a bisection step wherever the Newton step leaves the bracket,
    is not finite, or shrinks by less than half (as Numerical Recipes' rtsafe). It
    converges as Newton does on a smooth root, to within `atol + rtol * |t|` of a root
    whatever the function does elsewhere in the bracket (a constant value where a
    condition is undefined, a jump), and when it ends by bisection on the other side of
    a jump it ends at the bracket's end on the side of the starting point `upper` (where
    the condition holds). The
    derivative of the root is optimistix's, by the implicit function theorem."""

    rtol: float
    atol: float
    norm: Callable = jnp.abs

    def init(self, fn, y, args, options, f_struct, aux_struct, tags):
        del f_struct, aux_struct, tags
        lower, upper = (
            jnp.asarray(options["lower"], y.dtype),
            jnp.asarray(options["upper"], y.dtype),
        )
        upper_value, _ = _total(fn, upper, args)
        return _BracketState(
            lower=lower,
            upper=upper,
            upper_value=upper_value,
            value=upper_value,
            diff=jnp.where(upper_value == 0, 0.0, jnp.inf).astype(y.dtype),
            last_diff=jnp.asarray(jnp.inf, y.dtype),
            bisected=jnp.asarray(False),
        )

    def step(self, fn, y, args, options, state, tags):
        del options, tags
        (h, aux), (slope, _) = jax.jvp(lambda t: _total(fn, t, args), (y,), (jnp.ones_like(y),))
        same = jnp.sign(h) == jnp.sign(state.upper_value)
        lower = jnp.where(same, state.lower, y)
        upper = jnp.where(same, y, state.upper)
        newton = y - h / slope
        low, high = jnp.minimum(lower, upper), jnp.maximum(lower, upper)
        inside = jnp.isfinite(newton) & (newton >= low) & (newton <= high)
        # (a step below the tolerance is the last: Newton's, kept even where rounding
        # stops the steps from halving)
        small = jnp.abs(newton - y) <= self.atol + self.rtol * jnp.abs(y)
        fast = small | (jnp.abs(newton - y) <= 0.5 * jnp.abs(state.last_diff))
        bisected = (h != 0) & jnp.logical_not(inside & fast)
        new_y = jnp.where(h == 0, y, jnp.where(bisected, 0.5 * (lower + upper), newton))
        diff = new_y - y
        new_state = _BracketState(
            lower=lower,
            upper=upper,
            upper_value=state.upper_value,
            value=h,
            diff=diff,
            last_diff=state.diff,
            bisected=bisected,
        )
        return new_y, new_state, aux

    def terminate(self, fn, y, args, options, state, tags):
        del fn, args, options, tags
        return (jnp.abs(state.diff) <= self.atol + self.rtol * jnp.abs(y)) | (
            state.value == 0
        ), optx.RESULTS.successful

    def postprocess(self, fn, y, aux, args, options, state, tags, result):
        del options, tags, result
        # (a Newton step's end is the root to far better than the tolerance: kept; a
        # bisection's end on the other side of a jump is moved to the bracket's end on
        # the side where the condition holds, within the tolerance)
        h, _ = _total(fn, y, args)
        other_side = (jnp.sign(h) != jnp.sign(state.upper_value)) & (h != 0)
        near = jnp.abs(state.upper - y) <= self.atol + self.rtol * jnp.abs(y)
        return jnp.where(state.bisected & other_side & near, state.upper, y), aux, {}


def _select(flag: Array, new: PyTree, old: PyTree) -> PyTree:
    return jax.tree.map(lambda a, b: jnp.where(flag, a, b), new, old)


@dataclasses.dataclass(frozen=True)
class _Rules:
    """The events of a solve with their triggers judged as conditions (`finite_trigger`):
    when each event is armed, holds and fires, and what executing the fired ones does.

    The arguments of every segment carry which events are armed: an event whose
    condition holds (or is about to hold) after it fires must first become false again
    (a trigger fires on its transition from false to true, as SBML says). While
    disarmed, its condition function is -g: the segment stops where g falls through
    zero, and the event is armed again there. The solve stops where the first of the
    conditions rises through zero: where their maximum does (a condition per event
    would locate, of several crossing within one step, the first listed rather than
    the earliest).
    """

    events: tuple[OdeEvent, ...]
    triggers: tuple[Callable[[Any, Array, Any], Array], ...]
    vector_field: Callable

    def conditions(self, t, y, a, flags) -> Array:
        """Per event: g where armed, -g where not."""
        return jnp.stack(
            [jnp.where(flags[i], 1.0, -1.0) * g(t, y, a) for i, g in enumerate(self.triggers)]
        )

    def armed(self, t, y, a) -> Array:
        """Per event: armed unless its condition holds, or (at its boundary) is about to."""
        flags = []
        for trigger in self.triggers:
            g, rate = jax.jvp(
                lambda tt, yy: trigger(tt, yy, a),
                (t, y),
                (jnp.ones_like(t), self.vector_field(t, y, a)),
            )
            scale = 1e-9 * (1.0 + jnp.abs(t))
            flags.append(jnp.where(jnp.abs(g) <= scale, rate <= 0, g < 0))
        return jax.lax.stop_gradient(jnp.stack(flags))

    def holds(self, i: int, t, y, a) -> Array:
        """Whether the condition of event i holds."""
        e = self.events[i]
        return jnp.asarray(
            e.holds(t, y, a) if e.holds is not None else self.triggers[i](t, y, a) > 0
        )

    def becoming(self, i: int, t, y, a) -> Array:
        """Whether the condition holds, or is on its boundary and about to hold (a root
        of another event that the root finder stopped at first)."""
        g, rate = jax.jvp(
            lambda tt, yy: self.triggers[i](tt, yy, a),
            (t, y),
            (jnp.ones_like(t), self.vector_field(t, y, a)),
        )
        scale = 1e-9 * (1.0 + jnp.abs(t))
        return jax.lax.stop_gradient(self.holds(i, t, y, a) | ((jnp.abs(g) <= scale) & (rate > 0)))

    def execute(self, t, y, a, fired, flags):
        """Apply the events that fired, in their order; an event that is not persistent
        only if its condition still holds. Then, once, the armed events that the
        assignments made true at this time (a cascade). Returns (y, args, terminal,
        whether a cascade fired, whether a condition changed twice or more)."""
        events = self.events
        terminal = jnp.asarray(False)
        # How often each condition changes while the events execute one after another:
        # twice or more is a cascade deeper than the one pass below follows.
        before = jnp.stack([self.holds(k, t, y, a) for k in range(len(events))])
        changes = jnp.zeros(len(events), jnp.int32)
        trigger_values = (y, a)
        for i, (e, f) in enumerate(zip(events, fired, strict=False)):
            if not e.persistent:
                f = f & self.becoming(i, t, y, a)
            applied_y, applied_a = (
                e.apply(t, y, a, source=trigger_values) if e.values_at_trigger else e.apply(t, y, a)
            )
            y, a = _select(f, applied_y, y), _select(f, applied_a, a)
            terminal = terminal | (f & e.terminal)
            now = jnp.stack([self.holds(k, t, y, a) for k in range(len(events))])
            changes = changes + (now != before).astype(jnp.int32)
            before = now
        deep = jnp.any(changes >= 2)
        cascade = jnp.asarray(False)
        for i, e in enumerate(events):
            f = (
                flags[i]
                & jnp.logical_not(fired[i])
                & self.becoming(i, t, y, a)
                & jnp.logical_not(terminal)
            )
            applied_y, applied_a = e.apply(t, y, a)
            y, a = _select(f, applied_y, y), _select(f, applied_a, a)
            terminal = terminal | (f & e.terminal)
            cascade = cascade | f
        return y, a, terminal, cascade, deep


class _Carry(NamedTuple):
    """What a segment of the solve hands the next."""

    t0: Array  # where the last segment stopped
    y: Array
    args: Any
    finished: Array  # whether the run has ended (later segments do nothing)
    count: Array  # events fired
    result: Array  # a `Result` code
    steps: Array
    frozen_from: Array  # the time of a terminal event (inf: none)
    frozen: Array  # the state after it


@dataclasses.dataclass(frozen=True, eq=False)  # (hashed by identity: `lax.scan` hashes it)
class _Segment:
    """A step of the solve's `lax.scan`: one `diffrax.diffeqsolve` from the last stop
    (or the start) that stops at the next event (or ts[-1]), and the events that fire
    there executed."""

    rules: _Rules
    solver: OdeSolver
    terms: Any
    dsolver: Any
    controller: Any
    adjoint: Any
    event: Any
    ts: Array
    t_end: Array

    def _solve(self, start, y, a, flags):
        """The segment's diffeqsolve from `start` (saving at the save times after it)."""
        return diffrax.diffeqsolve(
            self.terms,
            self.dsolver,
            t0=start,
            t1=self.t_end,
            dt0=self.solver.dt0,
            y0=y,
            args=(a, flags),
            saveat=diffrax.SaveAt(ts=jnp.clip(self.ts, start, self.t_end), t1=True),
            stepsize_controller=self.controller,
            adjoint=self.adjoint,
            event=self.event,
            max_steps=self.solver.max_steps,
            throw=False,
        )

    def _fired(self, t_stop, y_stop, a, flags, any_stop) -> list:
        """Per event, whether it fires where the segment stopped: the event whose
        condition stopped the solve (the largest there), and every armed event whose
        condition becomes true there (the root finder meets one of several simultaneous
        roots); a disarmed event's stop only re-arms it."""
        rules = self.rules
        first = jnp.argmax(jax.lax.stop_gradient(rules.conditions(t_stop, y_stop, a, flags)))
        return [
            flags[i] & any_stop & ((first == i) | rules.becoming(i, t_stop, y_stop, a))
            for i in range(len(rules.events))
        ]

    def __call__(self, carry: _Carry, _) -> tuple[_Carry, tuple[Array, Array]]:
        """The carry after this segment, and its saves with the save times it covers."""
        t0, y, a, finished, count, result, steps, frozen_from, frozen = carry
        start = jnp.where(finished, self.t_end, t0)
        flags = self.rules.armed(start, y, a)
        sol = self._solve(start, y, a, flags)
        code = from_diffrax(sol.result)
        # diffrax stores the end of the solve (the event) right after the last save
        # time it reached: the entry after the finite ones.
        last = jnp.sum(jnp.isfinite(sol.ts)) - 1
        t_stop, y_stop = sol.ts[last], sol.ys[last]
        any_stop = sol.event_mask & jnp.logical_not(finished)
        fired = self._fired(t_stop, y_stop, a, flags, any_stop)
        any_fired = jnp.any(jnp.stack(fired))
        # The save times of this segment: from its start, up to (not at) where it stopped.
        covered = (
            (self.ts >= start)
            & jnp.where(any_stop, self.ts < t_stop, True)
            & jnp.logical_not(finished)
        )
        new_y, new_a, terminal, cascade, deep = self.rules.execute(t_stop, y_stop, a, fired, flags)
        result = jnp.where((result == 0) & jnp.logical_not(finished), code, result)
        result = jnp.where(
            (result == 0) & jnp.logical_not(finished) & any_fired & deep,
            int(Result.event_cascade),
            result,
        )
        steps = steps + jnp.where(finished, 0, sol.stats["num_steps"])
        count = count + any_fired.astype(count.dtype) + cascade.astype(count.dtype)
        too_many = count > self.solver.max_events
        ends = jnp.logical_not(finished) & (
            jnp.logical_not(any_stop) | terminal | (code != 0) | too_many | (result != 0)
        )
        result = jnp.where(ends & too_many & (result == 0), int(Result.too_many_events), result)
        frozen_from = jnp.where(ends & terminal, t_stop, frozen_from)
        frozen = _select(ends & terminal, new_y, frozen)
        carry = _Carry(
            t_stop, new_y, new_a, finished | ends, count, result, steps, frozen_from, frozen
        )
        return carry, (sol.ys[:-1], covered)


def _start(rules: _Rules, ts: Array, y0: Array, args: Any) -> _Carry:
    """The carry of the first segment: the events whose condition holds at the start and
    that do not count it as having held before fire there."""
    events = rules.events
    start_fired = [
        jnp.asarray(rules.holds(i, ts[0], y0, args)) if not e.initial_value else jnp.asarray(False)
        for i, e in enumerate(events)
    ]
    y_start, a_start, _, _, deep_start = rules.execute(
        ts[0], y0, args, start_fired, [jnp.asarray(False)] * len(events)
    )
    start_count = (
        jnp.sum(jnp.stack(start_fired).astype(jnp.int32)) if events else jnp.asarray(0, jnp.int32)
    )
    return _Carry(
        ts[0],
        y_start,
        a_start,
        jnp.asarray(False),
        start_count,
        jnp.where(deep_start, int(Result.event_cascade), 0).astype(jnp.int32),
        jnp.asarray(0, jnp.int32),
        jnp.asarray(jnp.inf, ts.dtype),
        y_start,
    )


def _solution(
    solver: OdeSolver, ts: Array, carry: _Carry, ys: Array, covered: Array
) -> OdeSolution:
    """The solution at the save times from every segment's saves (each save time is
    covered by one segment, or lies after a terminal event); NaN after a failure."""
    T = ts.shape[0]
    _, _, _, finished, count, result, steps, frozen_from, frozen = carry
    weights = covered.reshape(covered.shape + (1,) * (ys.ndim - 2))
    saved = jnp.sum(jnp.where(weights, ys, 0.0), axis=0)
    after = (ts >= frozen_from).reshape((T,) + (1,) * (saved.ndim - 1))
    saved = jnp.where(after, frozen, saved)
    result = jnp.where(
        (result == 0) & jnp.logical_not(finished), int(Result.too_many_events), result
    )
    failed = result != 0
    saved = jnp.where(failed, jnp.nan, saved)
    if solver.throw:
        saved = eqx.error_if(
            saved,
            failed,
            "the solve with events failed (more than max_events events, or a failed step)",
        )
    return OdeSolution(ys=saved, num_steps=steps, num_accepted_steps=steps, result=result)


def solve_with_events(
    solver: OdeSolver,
    vector_field: Callable,
    ts: Array,
    y0: Array,
    args: Any,
    events: tuple[OdeEvent, ...],
) -> tuple[OdeSolution, Array]:
    """Integrate from ts[0] to ts[-1] with `events`, saving the state at every `ts`.

    Arguments:
        solver: the `OdeSolver` (its method, step control, adjoint, `max_events` and
            `throw`).
        vector_field: (t, y, args) -> dy/dt, one function (not an IMEX pair).
        ts: the save times [T] (the time unit of the model).
        y0: the state at ts[0].
        args: the arguments passed to `vector_field` and to the events, which may assign
            to them.
        events: the `OdeEvent`s to watch for.

    Returns:
        (an `OdeSolution` as `OdeSolver.solve` gives, the number of events that fired).
        More than `solver.max_events` events before the end is the failure
        `Result.too_many_events` (NaN states).

    Raises:
        TypeError: `vector_field` is a tuple (an IMEX pair).
    """
    if isinstance(vector_field, tuple):
        raise TypeError("a solve with events takes one vector field (not an IMEX pair)")
    dsolver = solver.diffrax_solver()
    # (the segments' arguments are (args, which events are armed): see `_Rules`)
    terms = solver.terms(lambda t, y, packed: vector_field(t, y, packed[0]))
    controller = solver._controller(
        ts=ts
    )  # (steps onto the save times where the dense output is short)
    adjoint = make_adjoint(solver.adjoint, dsolver)
    rules = _Rules(events, tuple(finite_trigger(e.trigger) for e in events), vector_field)
    event = diffrax.Event(
        cond_fn=lambda t, y, args, **kw: jnp.max(rules.conditions(t, y, *args)),
        root_finder=BracketedNewton(rtol=1e-12, atol=1e-12),
        direction=True,
    )
    segment = _Segment(rules, solver, terms, dsolver, controller, adjoint, event, ts, ts[-1])
    init = _start(rules, ts, y0, args)
    # Each event may need a second stop to re-arm it: twice as many segments as events.
    carry, (ys, covered) = jax.lax.scan(segment, init, None, length=2 * solver.max_events + 1)
    return _solution(solver, ts, carry, ys, covered), carry.count
