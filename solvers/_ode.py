"""ODE strategy on diffrax: method, adaptive step control, adjoint, failure reporting."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, NamedTuple

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx
from jaxtyping import Array, Float, Int, PyTree

from ._grid_steps import GridThroughSaveTimes
from ._lean import lean_solve_differentiable, lean_solve_sensitivities
from ._newton import stage_krylov, stage_newton, stage_root_finder
from ._results import Result, from_diffrax, result_message
from ._types import Times
from ._words import did_you_mean


def _with(cls: type, root_finder: Callable) -> Callable[[], diffrax.AbstractSolver]:
    return lambda: cls(root_finder=root_finder())


class OdeMethod(NamedTuple):
    """What an ODE method declares, in one place.

    Attributes:
        make: builds the diffrax solver.
        kind: `explicit`, `implicit` (stiff problems) or `imex` (a right-hand side in two
            parts, the second stiff).
        order: the order of a step (diffrax's `order`).
        dense_order: the order of the dense output between the ends of a step (the save
            times a step passes over are filled from it), measured: the error of the
            output at a point inside one step from an exact start falls as
            h^(dense_order + 1) (tests/solvers/test_save_times.py fits it for every method).
        adaptive: whether a step estimates its error, so that the step-size controller
            can choose the steps (Euler's does not: it takes constant steps only).
        lean: whether the lean core (`solvers._lean`: one `while_loop` over a flat state,
            for small explicit solves) reproduces its solve.
        batched: whether `solve_batch` (the batched sweep loop) reproduces its solve.
    """

    make: Callable[[], diffrax.AbstractSolver]
    kind: str
    order: int
    dense_order: int
    adaptive: bool = True
    lean: bool = False
    batched: bool = False

    @property
    def steps_to_save_times(self) -> bool:
        """Whether steps land on the save times, so that every saved value is the end of
        a step, rather than being filled from the dense output.

        A dense output carries the accuracy the tolerances promise when its error within
        a step is no larger than the local error estimate the step controller holds to
        the tolerances. For an explicit method, whose steps are as long as accuracy
        allows, an output one order below the method's (the order of the estimate of
        its embedded pair) does. An implicit method's steps on a stiff problem are far
        longer, and an output built from the derivative at the step's end takes the
        error of the end value multiplied by the stiffness: there only an output of the
        method's own order does (Kvaerno4, with a third-order output, saved van der Pol
        at mu = 100 115 times less accurately than a solve ended at the save time; Tsit5
        and Dopri5 save to within 2.5 times its accuracy on a non-stiff problem).
        """
        return self.dense_order < (self.order - 1 if self.kind == "explicit" else self.order)


# The dense outputs (diffrax 0.7): Heun, Midpoint, Ralston, Bosh3 and the Kvaerno
# methods interpolate by a cubic Hermite polynomial from the values at a step's ends and
# the derivatives of its first and last stages, of order 3 at most, and of order 2 for
# Heun and 1 for Midpoint and Ralston, whose last stage is not at the step's end value;
# Euler, the implicit Euler method and the reversible Heun method (algebraically
# reversible: its steps can be undone exactly, as a backsolve adjoint wants) interpolate
# linearly; Tsit5 and Dopri5 have their
# methods' fourth-order dense output; Dopri8's degree-7 polynomial in the
# fourteen stages is of order 5 (its error at theta = 0.5 falls as h^6); the KenCarp
# methods' dense outputs (Kennedy & Carpenter, Appl. Numer. Math. 44, 2003) are of order
# 2, 3 and 3.
#
# The stage equations: Newton's method up to 64 states and the chord method above
# (`_newton.StageRootFinder`), to the step controller's tolerances, ended by whichever of
# two convergence tests holds first. With diffrax's default (the chord method and its
# rate test) the implicit methods reject step after step on stiff nonlinear models
# (Kvaerno5 on Fujita_SciSignal2010 at rtol 1e-8: 124,477 steps against 1,762). The
# IMEX methods keep Newton at every size: with the chord method the KenCarp methods
# rejected most steps of a diffusion problem (a 17-node heat equation to rtol 1e-5:
# 13,618 steps of which 8,013 rejected, against 8 and 0).
METHODS: dict[str, OdeMethod] = {
    "euler": OdeMethod(diffrax.Euler, "explicit", 1, 1, adaptive=False),
    "heun": OdeMethod(diffrax.Heun, "explicit", 2, 2),
    "midpoint": OdeMethod(diffrax.Midpoint, "explicit", 2, 1),
    "ralston": OdeMethod(diffrax.Ralston, "explicit", 2, 1),
    "bosh3": OdeMethod(diffrax.Bosh3, "explicit", 3, 3),
    "tsit5": OdeMethod(diffrax.Tsit5, "explicit", 5, 4, lean=True, batched=True),
    "dopri5": OdeMethod(diffrax.Dopri5, "explicit", 5, 4, lean=True),
    "dopri8": OdeMethod(diffrax.Dopri8, "explicit", 8, 5),
    "reversible_heun": OdeMethod(diffrax.ReversibleHeun, "explicit", 2, 1),
    "implicit_euler": OdeMethod(_with(diffrax.ImplicitEuler, stage_root_finder), "implicit", 1, 1),
    "kvaerno3": OdeMethod(_with(diffrax.Kvaerno3, stage_root_finder), "implicit", 3, 3),
    "kvaerno4": OdeMethod(_with(diffrax.Kvaerno4, stage_root_finder), "implicit", 4, 3),
    "kvaerno5": OdeMethod(_with(diffrax.Kvaerno5, stage_root_finder), "implicit", 5, 3),
    "kencarp3": OdeMethod(_with(diffrax.KenCarp3, stage_newton), "imex", 3, 2),
    "kencarp4": OdeMethod(_with(diffrax.KenCarp4, stage_newton), "imex", 4, 3),
    "kencarp5": OdeMethod(_with(diffrax.KenCarp5, stage_newton), "imex", 5, 3),
}
EXPLICIT_METHODS = tuple(name for name, m in METHODS.items() if m.kind == "explicit")
IMPLICIT_METHODS = tuple(name for name, m in METHODS.items() if m.kind == "implicit")
IMEX_METHODS = tuple(name for name, m in METHODS.items() if m.kind == "imex")
ONE_FIELD_METHODS = (*EXPLICIT_METHODS, *IMPLICIT_METHODS)
"""The methods of a right-hand side in one piece (IMEX methods take it in two)."""
ADJOINTS = ("recursive_checkpoint", "backsolve", "forward", "direct")
LINEAR_SOLVERS = ("dense", "gmres")
"""How implicit stages solve their linear systems (`OdeSolver.linear_solver`)."""
# The lean core takes a solve when its reverse pass would record at most this many
# numbers (max_steps x state size: 32 MiB), and its dense output at every save time per
# step at most this many.
_LEAN_RECORD_LIMIT = 2**22
_LEAN_SAVES_LIMIT = 2**16


def make_adjoint(name: str, solver: diffrax.AbstractSolver) -> diffrax.AbstractAdjoint:
    """The diffrax adjoint called `name` (one of ADJOINTS) for `solver`."""
    if name == "backsolve":
        return diffrax.BacksolveAdjoint(solver=solver)
    if name == "forward":
        return diffrax.ForwardMode()
    if name == "direct":
        return diffrax.DirectAdjoint()
    return diffrax.RecursiveCheckpointAdjoint()


class OdeSolution(eqx.Module):
    """What `OdeSolver.solve` returns.

    Attributes:
        ys: state at each requested time, [T, n] (NaN rows after a failure when
            `throw=False`).
        num_steps: accepted plus rejected steps taken, int scalar.
        num_accepted_steps: accepted steps, int scalar.
        result: a `Result` code, 0 on success (see `result_message`).
    """

    ys: PyTree
    num_steps: Int[Array, ""]
    num_accepted_steps: Int[Array, ""]
    result: Int[Array, ""]


class OdeSolver(eqx.Module):
    """Adaptive (or fixed-step) integration of dy/dt = f(t, y, args) with diffrax.

    Arguments:
        method: `tsit5` (default), `dopri5`, `dopri8`, `bosh3`, `heun`, `euler`,
            `midpoint`, `ralston`, `reversible_heun`; implicit for stiff problems:
            `kvaerno3`, `kvaerno4`, `kvaerno5`, `implicit_euler`; IMEX (implicit-explicit)
            for a right-hand side given as a pair (non-stiff part, stiff part):
            `kencarp3`, `kencarp4`, `kencarp5`.
        rtol, atol: relative and absolute tolerances of the PID step-size controller.
            They are traced: changing them does not recompile.
        dt0: first step (None: chosen automatically). With `adaptive=False` it is the
            constant step and is required.
        adaptive: False integrates with constant steps of `dt0`.
        max_steps: bound on the number of steps; reaching it is a failure.
        adjoint: how reverse-mode gradients flow: `recursive_checkpoint` (default,
            exact gradient of the discretisation, memory O(sqrt steps)), `backsolve`
            (continuous adjoint, O(1) memory), `forward` (forward-mode; use jax.jacfwd),
            `direct`.
        throw: True raises at run time when a solve fails; False returns the failure in
            `OdeSolution.result` (NaN states), for batched sweeps.
        max_events: the most events a solve with events (`solve_with_events`) may meet
            before its end; more is the failure `too_many_events`.
        linear_solver: how implicit and IMEX methods solve the linear systems of their
            stage equations: `dense` (default: the Jacobian formed and factorised) or
            `gmres` (matrix-free: GMRES on Jacobian-vector products, for states too
            large for a dense Jacobian or split over devices; `_newton.StageKrylov`).
    """

    method: str = eqx.field(static=True, default="tsit5")
    rtol: float | Array = 1e-6
    atol: float | Array = 1e-8
    dt0: float | Array | None = None
    adaptive: bool = eqx.field(static=True, default=True)
    max_steps: int = eqx.field(static=True, default=4096)
    adjoint: str = eqx.field(static=True, default="recursive_checkpoint")
    throw: bool = eqx.field(static=True, default=True)
    max_events: int = eqx.field(static=True, default=64)
    linear_solver: str = eqx.field(static=True, default="dense")

    methods: ClassVar[tuple[str, ...]] = tuple(METHODS)

    def __check_init__(self):
        if self.method not in METHODS:
            raise ValueError(
                f"unknown ODE method {self.method!r}; expected one of {', '.join(METHODS)}."
                + did_you_mean(self.method, METHODS)
            )
        if self.adjoint not in ADJOINTS:
            raise ValueError(
                f"unknown adjoint {self.adjoint!r}; expected one of {', '.join(ADJOINTS)}."
                + did_you_mean(self.adjoint, ADJOINTS)
            )
        if not self.adaptive and self.dt0 is None:
            raise ValueError("a fixed-step OdeSolver (adaptive=False) needs dt0")
        if self.adaptive and not METHODS[self.method].adaptive:
            raise ValueError(
                f"method {self.method!r} estimates no error, so it takes constant steps only: "
                "give adaptive=False and dt0, or an adaptive method"
            )
        if self.max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {self.max_steps}")
        if self.linear_solver not in LINEAR_SOLVERS:
            raise ValueError(
                f"unknown linear solver {self.linear_solver!r}; expected one of "
                f"{', '.join(LINEAR_SOLVERS)}.{did_you_mean(self.linear_solver, LINEAR_SOLVERS)}"
            )

    @property
    def kind(self) -> str:
        """`explicit`, `implicit` or `imex`."""
        return METHODS[self.method].kind

    @property
    def steps_to_save_times(self) -> bool:
        """Whether steps land on the save times (`OdeMethod.steps_to_save_times`: the
        method's dense output is of too low an order to fill them), so that every saved
        value is the end of a step: adaptive steps clipped to them, constant steps on
        their grid with the save times added (`GridThroughSaveTimes`)."""
        return METHODS[self.method].steps_to_save_times

    @property
    def implicit(self) -> bool:
        """Whether the method solves implicit stage equations (implicit and IMEX methods)."""
        return self.kind != "explicit"

    @property
    def lean(self) -> bool:
        """Whether solves of a flat state with forward sensitivities go through the lean
        core (`solvers._lean`: tsit5 and dopri5 with adaptive steps from diffrax's first
        step), which takes diffrax's steps without its per-step bookkeeping."""
        return (
            METHODS[self.method].lean
            and self.adaptive
            and self.dt0 is None
            and not self.steps_to_save_times
        )

    def _lean_solve(self, vector_field, ts, y0, error_norm, observe, observe_at) -> bool:
        """Whether `solve` goes through the lean core: a lean method, one flat state of a
        size whose recorded steps stay small (the reverse pass keeps every accepted step),
        the default error norm, states saved as they are, and an adjoint that
        differentiates the discrete steps (the lean core's reverse mode gives the same
        derivative; `backsolve` and `forward` stay with diffrax)."""
        return (
            self.lean
            and self.adjoint in ("recursive_checkpoint", "direct")
            and not isinstance(vector_field, tuple)
            and error_norm is None
            and observe is None
            and observe_at is None
            and isinstance(y0, (jax.Array, np.ndarray))
            and jnp.ndim(y0) == 1
            and jnp.issubdtype(jnp.result_type(y0), jnp.floating)
            and self.max_steps * jnp.size(y0) <= _LEAN_RECORD_LIMIT
            and jnp.shape(ts)[0] * jnp.size(y0) <= _LEAN_SAVES_LIMIT
        )

    def _failed(self, tree: PyTree, result: Array) -> PyTree:
        """A lean solve's outputs after its `result`: raised at run time with `throw`,
        else NaN where it failed (as diffrax's path reports failures)."""
        if self.throw:
            leaves, treedef = jax.tree.flatten(tree)
            code = jax.lax.stop_gradient(result)  # (an integer: nothing to differentiate)
            leaves[0] = eqx.branched_error_if(
                leaves[0], code != 0, code, [result_message(c) for c in Result]
            )
            return jax.tree.unflatten(treedef, leaves)
        return _nan_where(result != 0, tree)

    def diffrax_solver(self) -> diffrax.AbstractSolver:
        """The diffrax solver of `method` (an implicit one with the stage root finder of
        `linear_solver`)."""
        solver = METHODS[self.method].make()
        if self.implicit and self.linear_solver == "gmres":
            solver = eqx.tree_at(lambda s: s.root_finder, solver, stage_krylov())
        return solver

    def terms(self, vector_field) -> diffrax.AbstractTerm:
        """The diffrax terms of `vector_field`: f(t, y, args), or for IMEX methods the pair
        (non-stiff f, stiff g) of dy/dt = f + g (a pair given to another method is summed).

        Raises:
            TypeError: an IMEX method given one vector field.
        """
        if isinstance(vector_field, tuple):
            nonstiff, stiff = vector_field
            if self.kind == "imex":
                return diffrax.MultiTerm(diffrax.ODETerm(nonstiff), diffrax.ODETerm(stiff))

            def vector_field(t, y, args):
                return jax.tree.map(jnp.add, nonstiff(t, y, args), stiff(t, y, args))

        elif self.kind == "imex":
            raise TypeError(
                f"the IMEX method {self.method} needs the right-hand side as a pair (non-stiff "
                "part, stiff part)"
            )
        return diffrax.ODETerm(vector_field)

    def _controller(
        self, norm: Callable | None = None, ts: Times | None = None
    ) -> diffrax.AbstractStepSizeController:
        """The step-size controller of a solve; given the save times `ts`, one whose steps
        land on them where the method's dense output cannot fill them
        (`steps_to_save_times`)."""
        if not self.adaptive:
            if ts is None or not self.steps_to_save_times:
                return diffrax.ConstantStepSize()
            return GridThroughSaveTimes(jnp.asarray(ts, jnp.result_type(ts, self.dt0, float)))
        norm = norm or optx.rms_norm
        if self.implicit:
            # PI control damps step-size oscillation on stiff problems (Hairer & Wanner IV.2).
            controller = diffrax.PIDController(
                rtol=self.rtol, atol=self.atol, pcoeff=0.3, icoeff=0.4, norm=norm
            )
        else:
            controller = diffrax.PIDController(rtol=self.rtol, atol=self.atol, norm=norm)
        if ts is None or not self.steps_to_save_times:
            return controller
        # (in the solve's time precision, as diffeqsolve wants every time)
        time_dtype = jnp.result_type(ts, *(() if self.dt0 is None else (self.dt0,)), float)
        return diffrax.ClipStepSizeController(controller, step_ts=jnp.asarray(ts, time_dtype))

    def solve(
        self,
        vector_field: Callable[[Any, PyTree, Any], PyTree] | tuple[Callable, Callable],
        ts: Times,
        y0: PyTree,
        args: Any = None,
        *,
        error_norm: Callable[[PyTree], Array] | None = None,
        observe: Callable[[PyTree], PyTree] | None = None,
        observe_at: Callable[[Any, PyTree], PyTree] | None = None,
    ) -> OdeSolution:
        """Integrate from ts[0] to ts[-1], saving the state at every entry of `ts`.

        A save time is filled from the dense output of the step that passes over it,
        or, for the methods whose dense output is of too low an order for that
        (`steps_to_save_times`: dopri8, the Kvaerno methods of order 4 and 5, the
        KenCarp methods), is the end of a step: their steps land on the save times.

        Arguments:
            vector_field: f(t, y, args) -> dy/dt, same pytree structure as y; for IMEX
                methods the pair (non-stiff part, stiff part).
            ts: increasing save times [T], T >= 2.
            y0: initial state (any pytree of float arrays).
            args: passed through to `vector_field` (for example the params dict).
            error_norm: the norm of the scaled local error that step-size control
                uses (default: RMS over the whole state).
            observe: state -> pytree saved at every time instead of the state.
            observe_at: (t, state) -> pytree saved at every time instead of the state.

        Returns:
            An `OdeSolution` with `ys` of leading dimension T.
        """
        if self._lean_solve(vector_field, ts, y0, error_norm, observe, observe_at):
            ys, steps, accepted, result = lean_solve_differentiable(
                vector_field,
                ts,
                y0,
                args,
                method=self.method,
                rtol=self.rtol,
                atol=self.atol,
                max_steps=self.max_steps,
            )
            return OdeSolution(
                ys=self._failed(ys, result),
                num_steps=steps,
                num_accepted_steps=accepted,
                result=result,
            )
        solver = self.diffrax_solver()
        fn = None if observe is None else (lambda t, y, args: observe(y))
        if observe_at is not None:
            fn = lambda t, y, args: observe_at(t, y)  # noqa: E731
        sol = diffrax.diffeqsolve(
            self.terms(vector_field),
            solver,
            t0=ts[0],
            t1=ts[-1],
            dt0=self.dt0,
            y0=y0,
            args=args,
            saveat=diffrax.SaveAt(ts=ts) if fn is None else diffrax.SaveAt(ts=ts, fn=fn),
            stepsize_controller=self._controller(error_norm, ts),
            adjoint=make_adjoint(self.adjoint, solver),
            max_steps=self.max_steps,
            throw=self.throw,
        )
        result = from_diffrax(sol.result)
        # With throw=True a failure has already raised; otherwise mark it with NaN.
        ys = sol.ys if self.throw else _nan_where(result != 0, sol.ys)
        return OdeSolution(
            ys=ys,
            num_steps=sol.stats["num_steps"],
            num_accepted_steps=sol.stats["num_accepted_steps"],
            result=result,
        )

    def steady_state(
        self,
        vector_field: Callable[[Any, Array, Any], Array],
        y0: Float[Array, " n"],
        args: Any = None,
    ) -> Float[Array, " n"]:
        """The steady state reached from `y0`: dy/dt = f(t, y, args) integrated from t = 0
        until the time derivative is negligible against the tolerances (diffrax's
        steady-state event).

        Its derivative is that of the steady state itself, not of the solve that found it:
        the solve ends when the state has settled, but its sensitivities (those of the state
        at the step where it stopped) may still be far from their own limit, and the state
        at which a solve stops changes with the parameters in jumps that keep it near the
        steady state. `_settled_tangent` gives the limit: J dy = -(df/dargs) dargs, and
        along every conservation law of the model (a left null vector l of J with l . f = 0
        at `y0`), l . dy = l . dy0, so that with conserved quantities, common in
        biochemical models, the steady state follows the start's totals.

        Arguments:
            vector_field: f(t, y, args) -> dy/dt for a flat state [n] (one field: no IMEX
                pair), autonomous (evaluated at t = 0 for the derivative).
            y0: where the integration starts [n].
            args: passed through to `vector_field`.

        Returns:
            The steady state [n]; NaN when the solve fails or runs out of steps first.
        """
        method = self.diffrax_solver()

        @jax.custom_jvp
        def settled(y0, args):
            sol = diffrax.diffeqsolve(
                diffrax.ODETerm(vector_field),
                method,
                t0=0.0,
                t1=jnp.inf,
                dt0=None,
                y0=y0,
                args=args,
                saveat=diffrax.SaveAt(t1=True),
                stepsize_controller=diffrax.PIDController(rtol=self.rtol, atol=self.atol),
                event=diffrax.Event(diffrax.steady_state_event()),
                max_steps=self.max_steps,
                throw=False,
            )
            # (the event ends the solve; running out of steps first is a failure: NaN)
            return jnp.where(sol.result == diffrax.RESULTS.event_occurred, sol.ys[-1], jnp.nan)

        @settled.defjvp
        def settled_jvp(primals, tangents):
            y0, args = primals
            dy0, dargs = tangents
            y = settled(y0, args)
            return y, _settled_tangent(vector_field, y, y0, args, dy0, dargs)

        return settled(y0, args)

    def solve_sensitivities(
        self,
        vector_field: Callable[[Any, Array, Array], Array],
        ts: Times,
        y0: Float[Array, " n"],
        theta: Float[Array, " p"],
        sensitivities0: Float[Array, "n p"],
    ) -> SensitivitySolution:
        """Integrate dy/dt = f(t, y, theta) together with its forward sensitivities.

        The sensitivities S = dy/dtheta obey the variational equation
        dS/dt = (df/dy) S + df/dtheta (e.g. Hairer, Norsett & Wanner, "Solving ODEs I",
        section I.14), integrated alongside y with the same method and error control,
        so no derivative is taken through the step-size controller. For a few
        parameters this is the cheapest route to exact gradients of an adaptive solve.

        Arguments:
            vector_field: f(t, y, theta) -> dy/dt for a flat state [n] and a flat
                parameter vector theta [p].
            ts: increasing save times [T].
            y0: initial state [n].
            theta: parameters [p].
            sensitivities0: dy0/dtheta [n, p] (nonzero where theta sets initial values).

        Returns:
            A `SensitivitySolution` with `ys` [T, n] and `sensitivities` [T, n, p].
        """
        # Step size is controlled on the state alone, as CVODES does with errconS off:
        # the sensitivities ride along on the steps the state needs.
        if self.lean:
            ys, sens, steps, result = lean_solve_sensitivities(
                vector_field,
                ts,
                y0,
                theta,
                sensitivities0,
                method=self.method,
                rtol=self.rtol,
                atol=self.atol,
                max_steps=self.max_steps,
            )
            ys, sens = self._failed((ys, sens), result)
            return SensitivitySolution(ys=ys, sensitivities=sens, num_steps=steps, result=result)
        sol = self.solve(
            _sensitivity_field(vector_field),
            ts,
            (y0, sensitivities0),
            theta,
            error_norm=_state_norm,
        )
        ys, sens = sol.ys
        return SensitivitySolution(
            ys=ys, sensitivities=sens, num_steps=sol.num_steps, result=sol.result
        )


class SensitivitySolution(eqx.Module):
    """What `OdeSolver.solve_sensitivities` returns.

    Attributes:
        ys: state at each requested time, [T, n].
        sensitivities: d ys / d theta at each requested time, [T, n, p].
        num_steps, result: as in `OdeSolution`.
    """

    ys: Float[Array, "T n"]
    sensitivities: Float[Array, "T n p"]
    num_steps: Int[Array, ""]
    result: Int[Array, ""]


def _sensitivity_field(vector_field):
    """The variational system of dy/dt = f(t, y, theta): d(y, S)/dt = (f, J_y S + J_theta)."""

    def augmented(t, state, theta):
        y, sens = state
        p = theta.shape[0]

        def column(s, e):
            return jax.jvp(lambda yy, th: vector_field(t, yy, th), (y, theta), (s, e))[1]

        dsens = jax.vmap(column, in_axes=(1, 0), out_axes=1)(sens, jnp.eye(p, dtype=theta.dtype))
        return vector_field(t, y, theta), dsens

    return augmented


def _state_norm(error: PyTree) -> Array:
    return optx.rms_norm(error[0])


def _nan_where(failed: Array, tree: PyTree) -> PyTree:
    """Replace every leaf by NaN where `failed` (so a failure is never a plausible number)."""
    return jax.tree.map(lambda leaf: jnp.where(failed, jnp.nan, leaf), tree)


# A conservation law of the model is a left null vector of its Jacobian: at the steady
# state, a left singular vector whose singular value is zero to rounding (below this
# fraction of the largest; rounding leaves about n x 1e-16) and along which the field at
# the start has no component either (below `_ALONG` of its norm: a direction slow at the
# steady state but not conserved moves the start; the bound is loose, as a singular
# vector is computed to about 1e-16 over its gap to the next singular value).
_CONSERVED = 1e-11
_ALONG = 1e-6


def _settled_tangent(vector_field, y, y0, args, dy0, dargs):
    """The tangent of the steady state y of dy/dt = f(y, args) reached from y0 (the
    implicit function theorem with the model's conservation laws): dy solves
    J dy = -(df/dargs) dargs together with l . dy = l . dy0 for every conservation law l,
    the left singular vectors of J = df/dy with a negligible singular value along which
    the field at y0 has no component either (a slow but not conserved direction does
    not pass: away from its steady state the field moves along it). The stacked system
    is consistent and of full column rank, solved by its pseudo-inverse, which depends on
    the primal values alone (so reverse mode transposes this tangent). NaN where y is."""
    ok = jnp.all(jnp.isfinite(y))
    y_safe = jnp.where(ok, y, y0)
    field = lambda state, a: vector_field(0.0, state, a)  # noqa: E731
    jacobian = jax.jacfwd(field)(y_safe, args)
    u, s, _ = jnp.linalg.svd(jacobian)
    start = field(y0, args)
    along = jnp.abs(u.T @ start)
    conserved = (s <= _CONSERVED * s[0]) & (
        along <= _ALONG * jnp.linalg.norm(start) + jnp.finfo(y.dtype).tiny
    )
    laws = jnp.where(conserved[:, None], u.T, 0.0)
    stacked = jnp.concatenate([jacobian, laws])
    _, forcing = jax.jvp(lambda a: field(y_safe, a), (args,), (dargs,))
    rhs = jnp.concatenate([-forcing, laws @ dy0])
    dy = jnp.linalg.pinv(stacked) @ rhs
    return jnp.where(ok, dy, jnp.nan)
