"""A diffrax solve that stops at a save time and resumes exactly: the time-stepping loop
of `diffrax.diffeqsolve` rebuilt from diffrax's public pieces, with its whole state in a
pytree of arrays.

`diffeqsolve` runs from t0 to t1 in one call; a run that is streamed to disk chunk by
chunk and checkpointed needs to stop after some save times, write its state, and later
go on as if it had never stopped. Restarting a solve at a chunk boundary would restart
the step-size control there (and, for constant steps, recompute the step grid), so the
numbers would depend on where chunks fall. `OdeLoop` instead keeps everything the next
step needs in `OdeLoopState` (time, state, the proposed next step, the controller's and
the solver's state (FSAL), the jump flag, the interpolation of the last accepted step,
the next save time to fill, step counts, the result) and `advance` fills the next `n`
save times (n traced: one compiled program for every chunk length).

The loop follows `diffeqsolve`'s own: `solver.init`, `stepsize_controller.init`, then
repeat `solver.step` and `stepsize_controller.adapt_step_size`, clip the last step to
land on t1 (within 100 ULPs), and fill the save times an accepted step passed over from
the solver's dense interpolation of that step. Where `OdeSolver.steps_to_save_times`
holds, the controller (`diffrax.ClipStepSizeController`, its position among the save
times part of the controller's state) makes every step that would pass a save time end
on it, as in `OdeSolver.solve`. The steps taken are the ones
`diffeqsolve` takes for the same problem; the saved values agree with it to rounding.

Build an `OdeLoop` inside the function you compile (it holds the vector field, a
Python callable), with `OdeLoop.from_ode_solver` or `OdeLoop.from_method_of_lines`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Int, PyTree

from ._diffrax_private import USE_STEPSIZE_TOL, WrapTerm, clip_floor, clip_to_end
from ._fd import FdGrid, MethodOfLines
from ._ode import OdeSolver
from ._results import from_diffrax


class OdeLoopState(eqx.Module):
    """Everything an `OdeLoop` needs to continue exactly (every leaf an array).

    Attributes:
        y: the state at `tprev`.
        tprev, tnext: the current time and the end of the proposed next step.
        made_jump: whether the last step made a jump (FSAL is then not reused).
        solver_state: the solver's state (the FSAL stage of Runge-Kutta methods).
        controller_state: the step-size controller's state.
        dense_t0, dense_t1, dense_info: the interval and interpolation data of the last
            step; `dense_valid` is False before the first step and after a rejected one.
        frame: the index of the next save time to fill.
        num_steps, num_accepted_steps: steps taken (accepted and rejected) and accepted.
        result: a `diffrax.RESULTS` (successful until a failure).
    """

    y: PyTree
    tprev: Array
    tnext: Array
    made_jump: Bool[Array, ""]
    solver_state: PyTree
    controller_state: PyTree
    dense_t0: Array
    dense_t1: Array
    dense_info: PyTree
    dense_valid: Bool[Array, ""]
    frame: Int[Array, ""]
    num_steps: Int[Array, ""]
    num_accepted_steps: Int[Array, ""]
    result: diffrax.RESULTS


_INT32_MAX = 2**31 - 1


def _promote(y: PyTree, time_dtype) -> PyTree:
    """As diffeqsolve: the state takes the time's precision when that is wider."""

    def one(leaf):
        with jax.numpy_dtype_promotion("standard"):
            dtype = jnp.result_type(leaf, time_dtype)
        return jnp.asarray(leaf, dtype=dtype)

    return jax.tree.map(one, y)


class OdeLoop(eqx.Module):
    """A diffrax solve over save times `ts`, advanced a number of save times at a time.

    Arguments:
        terms: the diffrax terms.
        solver: the diffrax solver.
        controller: the step-size controller (`PIDController`, `ConstantStepSize`).
        ts: increasing save times [T]; the solve runs from ts[0] to ts[-1].
        args: passed to the terms.
        fn: (t, y, args) -> the pytree saved at each save time (default: y).
        dt0: the first step (None: chosen by the controller).
        max_steps: bound on the number of steps (accepted and rejected) of the whole
            solve; reaching it is the failure `max_steps_reached`.

    Example:
        >>> @jax.jit
        ... def chunk(state, n):
        ...     loop = OdeLoop.from_ode_solver(OdeSolver(), vector_field, ts, params)
        ...     return loop.advance(state, n, capacity=64)
    """

    terms: PyTree
    solver: diffrax.AbstractSolver
    controller: diffrax.AbstractStepSizeController
    ts: Array
    args: PyTree = None
    fn: Callable[[Any, PyTree, Any], PyTree] | None = eqx.field(static=True, default=None)
    dt0: Any = None
    max_steps: int = eqx.field(static=True, default=4096)

    def __check_init__(self):
        if self.max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {self.max_steps}")

    # ------------------------------------------------------------------ constructors

    @staticmethod
    def from_ode_solver(
        ode_solver: OdeSolver,
        vector_field: Callable[[Any, PyTree, Any], PyTree] | tuple[Callable, Callable],
        ts: Array,
        args: Any = None,
        *,
        fn: Callable[[Any, PyTree, Any], PyTree] | None = None,
        error_norm: Callable | None = None,
    ) -> OdeLoop:
        """The loop of `ode_solver.solve(vector_field, ts, y0, args)`: its method,
        step-size controller (whose steps land on the save times where the solver's do),
        first step and step budget."""
        return OdeLoop(
            terms=ode_solver.terms(vector_field),
            solver=ode_solver.diffrax_solver(),
            controller=ode_solver._controller(error_norm, ts),
            ts=jnp.asarray(ts),
            args=args,
            fn=fn,
            dt0=ode_solver.dt0,
            max_steps=ode_solver.max_steps,
        )

    @staticmethod
    def from_method_of_lines(
        mol: MethodOfLines,
        grid: FdGrid,
        diffusivities: Array,
        reaction: Callable[[Array], Array],
        u0: Array,
        ts: Array,
        observe: Callable[[Array], PyTree] | None = None,
    ) -> tuple[OdeLoop, Array]:
        """The loop of `mol.solve(grid, diffusivities, reaction, u0, ts, observe)` and
        its initial state (the field cast to the solver's dtype, Dirichlet nodes set; on
        several devices in the layout of `HaloGrid.ode_state`, the saved fields split).

        The run-time check of a fixed explicit step against the diffusive stability
        limit that `MethodOfLines.solve` makes is not repeated here: check
        `mol.stable_step` (the limit of the linearised right-hand side) before, as
        `sim._pde` does.
        """
        u0, _, field = mol.problem(grid, diffusivities, reaction, u0)
        split = mol.split(grid)
        if isinstance(split, FdGrid):
            fn = None if observe is None else (lambda t, y, args: observe(y))
        else:  # (the state's layout turned back into fields, kept split)
            look = observe or (lambda u: u)
            fn = lambda t, y, args: split.constrain(look(split.ode_fields(y)))  # noqa: E731
        return OdeLoop.from_ode_solver(mol.stepper, field, ts, fn=fn), u0

    # ------------------------------------------------------------------ the loop

    def _time_dtype(self):
        leaves = [self.ts] + ([] if self.dt0 is None else [self.dt0])
        return jnp.result_type(*leaves, float)

    def _prepared(
        self,
    ) -> tuple[
        PyTree, diffrax.AbstractSolver, diffrax.AbstractStepSizeController, Array, Array, Any
    ]:
        """(terms, solver with the controller's tolerances where it asks for them,
        controller, ts, t1, dt0) in the time dtype, as diffeqsolve prepares them for a
        solve forward in time."""
        time_dtype = self._time_dtype()
        ts = jnp.asarray(self.ts, dtype=time_dtype)
        t1 = ts[-1]
        dt0 = None if self.dt0 is None else jnp.asarray(self.dt0, dtype=time_dtype)
        direction = jnp.where(ts[0] < t1, 1, -1)  # 1: the loop runs forward only
        controller = self.controller.wrap(direction)
        terms = self.terms
        if WrapTerm is not None:
            terms = jax.tree.map(
                lambda term: WrapTerm(term, direction),
                terms,
                is_leaf=lambda x: (
                    isinstance(x, diffrax.AbstractTerm) and not isinstance(x, diffrax.MultiTerm)
                ),
            )
        solver = self.solver
        if isinstance(solver, diffrax.AbstractImplicitSolver):
            attrs = [
                a
                for a in ("rtol", "atol", "norm")
                if getattr(solver.root_finder, a) is USE_STEPSIZE_TOL
            ]
            if attrs:
                if not isinstance(controller, diffrax.AbstractAdaptiveStepSizeController):
                    raise ValueError(
                        "an implicit method with a fixed step needs the tolerances of its root "
                        "finder; "
                        "use an adaptive step (no dt) for implicit methods"
                    )
                solver = eqx.tree_at(
                    lambda s: tuple(getattr(s.root_finder, a) for a in attrs),
                    solver,
                    tuple(getattr(controller, a) for a in attrs),
                )
        return terms, solver, controller, ts, t1, dt0

    def init(self, y0: PyTree) -> OdeLoopState:
        """The state at ts[0], before any step (no save time filled yet)."""
        terms, solver, controller, ts, t1, dt0 = self._prepared()
        y0 = _promote(y0, ts.dtype)
        t0 = ts[0]
        error_order = solver.error_order(terms)
        tnext, controller_state = controller.init(
            terms, t0, t1, y0, dt0, self.args, solver.func, error_order
        )
        tnext = jnp.minimum(tnext, t1)
        solver_state = solver.init(terms, t0, tnext, y0, self.args)
        _, _, dense_struct, _, _ = eqx.filter_eval_shape(
            solver.step, terms, t0, tnext, y0, self.args, solver_state, False
        )
        dense_info = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), dense_struct)
        as_array = lambda x: jnp.asarray(x)  # noqa: E731 - Python bools and numbers as arrays
        return OdeLoopState(
            y=y0,
            tprev=jnp.asarray(t0, ts.dtype),
            tnext=jnp.asarray(tnext, ts.dtype),
            made_jump=jnp.asarray(False),
            solver_state=jax.tree.map(as_array, solver_state),
            controller_state=jax.tree.map(as_array, controller_state),
            dense_t0=jnp.asarray(t0, ts.dtype),
            dense_t1=jnp.asarray(t0, ts.dtype),
            dense_info=dense_info,
            dense_valid=jnp.asarray(False),
            frame=jnp.asarray(0, jnp.int32),
            num_steps=jnp.asarray(0, jnp.int32),
            num_accepted_steps=jnp.asarray(0, jnp.int32),
            result=diffrax.RESULTS.successful,
        )

    def _saved_struct(self, state: OdeLoopState) -> PyTree:
        fn = self.fn or (lambda t, y, args: y)
        return eqx.filter_eval_shape(fn, state.tprev, state.y, self.args)

    def advance(
        self, state: OdeLoopState, frames: Int[Array, ""] | int, capacity: int
    ) -> tuple[OdeLoopState, PyTree]:
        """Fill the next `frames` save times (fewer at the end of ts, or after a failure).

        Arguments:
            state: from `init` or a previous `advance`.
            frames: how many save times to fill (traced: any value in [0, capacity]
                runs the same compiled program).
            capacity: rows of the returned buffer (static), at least `frames`.

        Returns:
            The new state and the saved values, each leaf [capacity + 1, ...]: row i
            holds save time `state.frame + i` of the input state; rows past the frames
            filled (`new.frame - state.frame`) are undefined. Check `new.result` (0:
            success).
        """
        terms, solver, controller, ts, t1, _ = self._prepared()
        fn = self.fn or (lambda t, y, args: y)
        args = self.args
        t1_clip_floor = clip_floor(t1)
        error_order = solver.error_order(terms)
        base = state.frame
        target = jnp.minimum(base + jnp.asarray(frames, jnp.int32), ts.shape[0])
        struct = self._saved_struct(state)
        buffer = jax.tree.map(lambda s: jnp.zeros((capacity + 1,) + s.shape, s.dtype), struct)
        # As diffeqsolve: a made_jump that the controller never sets stays the static
        # False, so that FSAL solvers reuse their last stage without a select.
        static_jump = _jump_is_static(controller, args, error_order, state)
        chunk = _Chunk(
            terms=terms,
            solver=solver,
            controller=controller,
            ts=ts,
            t1=t1,
            t1_clip_floor=t1_clip_floor,
            args=args,
            fn=fn,
            error_order=error_order,
            made_jump=False if static_jump else None,
            base=base,
            target=target,
            capacity=capacity,
            zeros=jax.tree.map(lambda x: jnp.zeros(x.shape, x.dtype), struct),
            budget=min(self.max_steps, _INT32_MAX),  # step counts are int32
        )
        state, buffer = jax.lax.while_loop(chunk.more, chunk.body, (state, buffer))
        exhausted = (
            (state.frame < target)
            & diffrax.is_okay(state.result)
            & (state.num_steps >= chunk.budget)
        )
        result = diffrax.RESULTS.where(exhausted, diffrax.RESULTS.max_steps_reached, state.result)
        return eqx.tree_at(lambda s: s.result, state, result), buffer


def _jump_is_static(controller, args, error_order, state: OdeLoopState) -> bool:
    """Whether the controller's made_jump is a Python bool (never set), whatever the step.

    (whether the controller sets it depends on the controller, not on the step: the
    state stands in for the step's new value and error, which have its structure, so
    that the step is not traced once more for this)"""

    def adapted_jump(st):
        return controller.adapt_step_size(
            st.tprev, st.tnext, st.y, st.y, args, st.y, error_order, st.controller_state
        )[3]

    return isinstance(eqx.filter_eval_shape(adapted_jump, state), bool)


def _as_dtypes_of(new: PyTree, old: PyTree) -> PyTree:
    """`new` with the dtypes of `old`, leaf by leaf."""
    return jax.tree.map(lambda a, b: jnp.asarray(a, jnp.result_type(b)), new, old)


def _stepped(
    st: OdeLoopState,
    keep_step,
    y: PyTree,
    tprev,
    tnext,
    made_jump,
    solver_state: PyTree,
    controller_state: PyTree,
    dense_info: PyTree,
    result: diffrax.RESULTS,
) -> OdeLoopState:
    """The state after a step from `st` (accepted where keep_step), in the dtypes of `st`;
    the step's interval and interpolation are the dense output until the next step."""
    return OdeLoopState(
        y=y,
        tprev=jnp.asarray(tprev, st.tprev.dtype),
        tnext=jnp.asarray(tnext, st.tnext.dtype),
        made_jump=jnp.asarray(made_jump, bool),
        solver_state=_as_dtypes_of(solver_state, st.solver_state),
        controller_state=_as_dtypes_of(controller_state, st.controller_state),
        dense_t0=st.tprev,
        dense_t1=st.tnext,
        dense_info=dense_info,
        dense_valid=jnp.asarray(keep_step, bool),
        frame=st.frame,
        num_steps=st.num_steps + 1,
        num_accepted_steps=st.num_accepted_steps + jnp.where(keep_step, 1, 0).astype(jnp.int32),
        result=result,
    )


@dataclasses.dataclass(frozen=True, eq=False)  # (hashed by identity: `lax.while_loop` hashes it)
class _Chunk:
    """The while loop of one `OdeLoop.advance`, over (state, buffer).

    One iteration either fills the next save time from the last step's interpolation
    (while one is pending) or takes a step: a single compiled instance of each, whatever
    the chunk, so that a save time is computed with the same rounding wherever chunks
    fall. The buffer is written outside the branch (a step writes zeros into the spare
    last row), so it is never copied.
    """

    terms: PyTree
    solver: diffrax.AbstractSolver
    controller: diffrax.AbstractStepSizeController
    ts: Array
    t1: Array
    t1_clip_floor: Array
    args: PyTree
    fn: Callable[[Any, PyTree, Any], PyTree]
    error_order: Any
    made_jump: bool | None  # the static made_jump of every step (None: the state's)
    base: Array  # the frame of the chunk's first save time
    target: Array  # the frame to stop before
    capacity: int
    zeros: PyTree  # what a step writes into the buffer's spare row
    budget: int  # steps of the whole solve

    def take_step(self, st: OdeLoopState) -> OdeLoopState:
        """The state after one step (accepted or rejected) from `st`, clipped to land on
        t1 as diffeqsolve clips it."""
        made_jump = self.made_jump if self.made_jump is not None else st.made_jump
        y, y_error, dense_info, solver_state, solver_result = self.solver.step(
            self.terms, st.tprev, st.tnext, st.y, self.args, st.solver_state, made_jump
        )
        y_error = jax.tree.map(lambda x: jnp.where(jnp.isnan(x), jnp.inf, x), y_error)
        keep_step, tprev, tnext, new_jump, controller_state, controller_result = (
            self.controller.adapt_step_size(
                st.tprev,
                st.tnext,
                st.y,
                y,
                self.args,
                y_error,
                self.error_order,
                st.controller_state,
            )
        )
        tprev = jnp.minimum(tprev, self.t1)
        tnext = clip_to_end(tprev, tnext, self.t1, self.t1_clip_floor, keep_step)
        keep = lambda a, b: jnp.where(keep_step, a, b)  # noqa: E731
        y = jax.tree.map(keep, y, st.y)
        solver_state = jax.tree.map(keep, solver_state, st.solver_state)
        new_jump = jnp.where(keep_step, new_jump, st.made_jump)
        solver_result = diffrax.RESULTS.where(keep_step, solver_result, diffrax.RESULTS.successful)
        result = diffrax.RESULTS.where(diffrax.is_okay(st.result), solver_result, st.result)
        result = diffrax.RESULTS.where(diffrax.is_okay(result), controller_result, result)
        return _stepped(
            st,
            keep_step,
            y,
            tprev,
            tnext,
            new_jump,
            solver_state,
            controller_state,
            dense_info,
            result,
        )

    def pending(self, st: OdeLoopState):
        """Whether the next save time of the chunk lies in the last accepted step."""
        count = self.ts.shape[0]
        index = jnp.minimum(st.frame, count - 1)
        return st.dense_valid & (st.frame < self.target) & (self.ts[index] <= st.dense_t1)

    def save_one(self, st: OdeLoopState):
        """(the state with the next save time filled, its buffer row, its value)."""
        t = self.ts[jnp.minimum(st.frame, self.ts.shape[0] - 1)]
        interpolator = self.solver.interpolation_cls(
            t0=st.dense_t0, t1=st.dense_t1, **st.dense_info
        )
        value = self.fn(t, interpolator.evaluate(t), self.args)
        return eqx.tree_at(lambda s: s.frame, st, st.frame + 1), st.frame - self.base, value

    def step_one(self, st: OdeLoopState):
        """(the state after a step, the buffer's spare row, zeros)."""
        return self.take_step(st), jnp.asarray(self.capacity, jnp.int32), self.zeros

    def more(self, carry) -> Array:
        """Whether the chunk goes on: save times left, no failure, and a save pending or
        a step within the budget."""
        st, _ = carry
        can_step = st.num_steps < self.budget
        return (st.frame < self.target) & diffrax.is_okay(st.result) & (self.pending(st) | can_step)

    def body(self, carry):
        """(state, buffer) after filling a save time or taking a step."""
        st, buf = carry
        st, row, value = jax.lax.cond(self.pending(st), self.save_one, self.step_one, st)
        buf = jax.tree.map(lambda b, v: b.at[row].set(v.astype(b.dtype)), buf, value)
        return st, buf


def result_code(result: diffrax.RESULTS) -> Array:
    """The `Result` code of the loop's diffrax outcome (0 for success; see `result_message`)."""
    return from_diffrax(result)
