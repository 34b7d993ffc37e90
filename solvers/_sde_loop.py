"""An ensemble of SDE paths advanced save time by save time, resumable anywhere.

Each path has its own Brownian motion, a `diffrax.VirtualBrownianTree` over the whole
run drawn from `fold_in(key, path)`; between two save times the path takes equal steps
of at most `SdeSolver.dt`, starting from the state saved at the first. A step therefore
depends only on the path's key, the save times and the state at the last save time:
the loop state (the states of all paths at the last filled save time) is all a resumed
run needs, and a run cut into any chunks gives the same numbers as one call.
"""

from __future__ import annotations

from collections.abc import Callable
import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int, PRNGKeyArray, PyTree

from ._results import Result, from_diffrax
from ._sde import _METHODS, SdeSolver, _Diagonal
from ._types import Times


class SdeEnsemble(eqx.Module):
    """`paths` independent paths of one SDE, each solved by `solver`.

    Arguments:
        solver: the `SdeSolver` (method and step).
        paths: the number of paths (static: changing it recompiles).
    """

    solver: SdeSolver
    paths: int = eqx.field(static=True, default=1)

    def __check_init__(self):
        if not (isinstance(self.paths, int) and not isinstance(self.paths, bool) and self.paths >= 1):
            raise ValueError(f"paths must be a whole number >= 1, got {self.paths!r}")


class SdeLoopState(eqx.Module):
    """Everything an `SdeLoop` needs to continue exactly.

    Attributes:
        y: the state of every path at the last filled save time, [paths, n].
        frame: the index of the next save time to fill.
        num_steps: steps taken, summed over paths.
        result: a `Result` code (the first failure of any path; 0 while all succeed).
    """

    y: Float[Array, "paths n"]
    frame: Int[Array, ""]
    num_steps: Int[Array, ""]
    result: Int[Array, ""]


class SdeLoop(eqx.Module):
    """The paths of an `SdeEnsemble` from save time to save time.

    Arguments:
        ensemble: solver and number of paths.
        drift, diffusion: f(t, y, args) and g(t, y, args) as in `SdeSolver.solve`.
        ts: increasing save times [T], T >= 2.
        args: passed to `drift` and `diffusion`.
        key: the run's key; path i draws its Brownian motion from `fold_in(key, i)`, so a
            path does not depend on how many paths there are.
        noise: the noise kind (see `solvers.NOISE_KINDS`).
    """

    ensemble: SdeEnsemble
    drift: Callable
    diffusion: Callable
    ts: Times
    args: PyTree
    key: PRNGKeyArray
    noise: str = eqx.field(static=True, default="diagonal")

    def _dims(self, y0: Array) -> int:
        return self.ensemble.solver._check(self.drift, self.diffusion, self.ts, y0, self.args, self.noise)

    def _steps(self) -> Array:
        """Steps per save interval [T - 1]: the fewest of at most dt each."""
        return jnp.ceil(jnp.diff(self.ts) / self.ensemble.solver.dt)

    def _brownian(self, path: Array, dims: int, dtype) -> diffrax.VirtualBrownianTree:
        # Resolved to half of the smallest step of the run.
        tol = jnp.min(jnp.diff(self.ts) / self._steps()) / 2
        return diffrax.VirtualBrownianTree(
            self.ts[0], self.ts[-1], tol=tol, shape=jax.ShapeDtypeStruct((dims,), dtype),
            key=jax.random.fold_in(self.key, path), levy_area=_METHODS[self.ensemble.solver.method].levy_area,
        )

    def _interval(self, bm, k: Array, y: Array) -> tuple[Array, Array, Array]:
        """One path from save time k to k + 1: (state, steps, result code)."""
        solver = self.ensemble.solver
        t0, t1 = self.ts[k], self.ts[k + 1]
        field = self.diffusion if self.noise == "general" else _Diagonal(self.diffusion)
        terms = diffrax.MultiTerm(diffrax.ODETerm(self.drift), diffrax.ControlTerm(field, bm))
        sol = diffrax.diffeqsolve(
            terms, _METHODS[solver.method].solver(), t0=t0, t1=t1, dt0=(t1 - t0) / self._steps()[k], y0=y,
            args=self.args, saveat=diffrax.SaveAt(t1=True), stepsize_controller=diffrax.ConstantStepSize(),
            max_steps=solver.max_steps, throw=False,
        )
        return sol.ys[0], jnp.asarray(sol.stats["num_steps"], jnp.int32), from_diffrax(sol.result)

    def init(self, y0: Float[Array, " n"]) -> SdeLoopState:
        """The state before the first save time is filled (every path at y0)."""
        self._dims(y0)
        y = jnp.broadcast_to(y0, (self.ensemble.paths, *y0.shape))
        zero = jnp.asarray(0, jnp.int32)
        return SdeLoopState(y=y, frame=zero, num_steps=zero, result=zero)

    def advance(self, state: SdeLoopState, frames: Int[Array, ""] | int, capacity: int) -> tuple[SdeLoopState, Array]:
        """Fill the next `frames` save times (traced; at most `capacity`, static).

        Returns:
            (new state, saved states [capacity, paths, n] of which the first
            `new.frame - state.frame` rows are filled, NaN from a failure on).
        """
        paths, n = state.y.shape
        dims = self._dims(state.y[0])
        trees = jax.vmap(lambda i: self._brownian(i, dims, state.y.dtype))(jnp.arange(paths))
        count = self.ts.shape[0]
        target = jnp.minimum(state.frame + jnp.asarray(frames, jnp.int32), count)
        buffer = jnp.full((capacity, paths, n), jnp.nan, dtype=state.y.dtype)
        base = state.frame

        def more(carry):
            st, _ = carry
            return (st.frame < target) & (st.result == Result.successful)

        def body(carry):
            st, buf = carry

            def first(_):  # save time 0 is the initial state
                return st.y, jnp.zeros(paths, jnp.int32), jnp.zeros(paths, jnp.int32)

            def step(_):
                return jax.vmap(self._interval, in_axes=(0, None, 0))(trees, st.frame - 1, st.y)

            y, steps, codes = jax.lax.cond(st.frame == 0, first, step, None)
            failed = codes != Result.successful
            code = jnp.max(jnp.where(failed, codes, 0)).astype(jnp.int32)
            y = jnp.where(failed[:, None], jnp.nan, y)
            buf = buf.at[st.frame - base].set(y)
            new = SdeLoopState(
                y=jnp.where(code == 0, y, st.y), frame=st.frame + 1,
                num_steps=st.num_steps + jnp.sum(steps).astype(jnp.int32), result=code,
            )
            return new, buf

        return jax.lax.while_loop(more, body, (state, buffer))

    def solve(self, y0: Float[Array, " n"]) -> tuple[Float[Array, "paths T n"], SdeLoopState]:
        """Every save time in one call, differentiable in reverse mode (a scan over the
        save intervals, each stepped as `advance` steps it): (states [paths, T, n],
        final loop state)."""
        state = self.init(y0)
        paths, n = state.y.shape
        dims = self._dims(y0)
        trees = jax.vmap(lambda i: self._brownian(i, dims, state.y.dtype))(jnp.arange(paths))

        def interval(carry, k):
            y, steps, code = carry
            y1, taken, codes = jax.vmap(self._interval, in_axes=(0, None, 0))(trees, k, y)
            failed = codes != Result.successful
            code = jnp.where(code == 0, jnp.max(jnp.where(failed, codes, 0)), code).astype(jnp.int32)
            y1 = jnp.where((code != 0) | failed[:, None], jnp.nan, y1)
            return (y1, steps + jnp.sum(taken).astype(jnp.int32), code), y1

        zero = jnp.asarray(0, jnp.int32)
        (y, steps, code), ys = jax.lax.scan(interval, (state.y, zero, zero), jnp.arange(self.ts.shape[0] - 1))
        ys = jnp.concatenate([state.y[None], ys])  # [T, paths, n]
        final = SdeLoopState(y=y, frame=jnp.asarray(self.ts.shape[0], jnp.int32), num_steps=steps, result=code)
        return jnp.moveaxis(ys, 0, 1), final
