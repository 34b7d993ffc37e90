"""An ensemble of SDE paths advanced save time by save time, resumable anywhere.

Each path has its own Brownian motion, a `diffrax.VirtualBrownianTree` over the whole
run drawn from `fold_in(key, path)`; between two save times the path takes equal steps
of at most `SdeSolver.dt`, starting from the state saved at the first. A step therefore
depends only on the path's key, the save times and the state at the last save time:
the loop state (the states of all paths at the last filled save time) is all a resumed
run needs, and a run cut into any chunks gives the same numbers as one call.

With `SdeEnsemble(devices=N)` the paths are split over the first N local devices, in
blocks of paths/N: the keys, the Brownian trees, the states and the saved frames carry
that split (XLA partitions the vectorised step by it), so each device steps its own
paths and only the ensemble's step count and result code are reduced across devices.
A path is the same numbers on any number of devices: its key does not depend on them.
"""

from __future__ import annotations

from collections.abc import Callable

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec
from jaxtyping import Array, Float, Int, PRNGKeyArray, PyTree

from ._results import Result
from ._sde import SdeSolver
from ._types import Times


class SdeEnsemble(eqx.Module):
    """`paths` independent paths of one SDE, each solved by `solver`.

    Arguments:
        solver: the `SdeSolver` (method and step).
        paths: the number of paths (static: changing it recompiles).
        devices: split the paths over the first `devices` local devices (it must divide
            `paths`); 1 keeps them on one.

    Raises:
        ValueError: paths or devices not a whole number >= 1, devices not dividing paths,
            or more devices than there are (when the ensemble is used).
    """

    solver: SdeSolver
    paths: int = eqx.field(static=True, default=1)
    devices: int = eqx.field(static=True, default=1)

    def __check_init__(self):
        for name in ("paths", "devices"):
            value = getattr(self, name)
            if not (isinstance(value, int) and not isinstance(value, bool) and value >= 1):
                raise ValueError(f"{name} must be a whole number >= 1, got {value!r}")
        if self.paths % self.devices:
            raise ValueError(
                f"devices = {self.devices} must divide paths = {self.paths} (each device "
                "steps an equal block of paths)"
            )

    def split(self, x: Array, axis: int = 0) -> Array:
        """`x` with its `axis` (the paths) split over the ensemble's devices (as it is with
        devices = 1)."""
        if self.devices == 1:
            return x
        available = len(jax.devices())
        if self.devices > available:
            raise ValueError(
                f"devices = {self.devices}: only {available} local devices (on a CPU, "
                "XLA_FLAGS=--xla_force_host_platform_device_count=N before JAX starts)"
            )
        mesh = Mesh(np.asarray(jax.devices()[: self.devices]), ("paths",))
        spec = PartitionSpec(*([None] * axis), "paths")
        return jax.lax.with_sharding_constraint(x, NamedSharding(mesh, spec))


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
        return self.ensemble.solver._check(
            self.drift, self.diffusion, self.ts, y0, self.args, self.noise
        )

    def _trees(self, dims: int, dtype) -> diffrax.VirtualBrownianTree:
        """The paths' Brownian motions, batched: path i's drawn from `fold_in(key, i)`."""
        paths = self.ensemble.split(jnp.arange(self.ensemble.paths))
        return jax.vmap(
            lambda i: self.ensemble.solver.brownian_motion(
                self.ts, jax.random.fold_in(self.key, i), dims, dtype
            )
        )(paths)

    def _interval(self, bm, k: Array, y: Array) -> tuple[Array, Array, Array]:
        """One path from save time k to k + 1: (state, steps, result code)."""
        return self.ensemble.solver.interval(
            self.drift, self.diffusion, self.ts, self.args, self.noise, bm, k, y
        )

    def init(self, y0: Float[Array, " n"]) -> SdeLoopState:
        """The state before the first save time is filled (every path at y0)."""
        self._dims(y0)
        y = self.ensemble.split(jnp.broadcast_to(y0, (self.ensemble.paths, *y0.shape)))
        zero = jnp.asarray(0, jnp.int32)
        return SdeLoopState(y=y, frame=zero, num_steps=zero, result=zero)

    def advance(
        self, state: SdeLoopState, frames: Int[Array, ""] | int, capacity: int
    ) -> tuple[SdeLoopState, Array]:
        """Fill the next `frames` save times (traced; at most `capacity`, static).

        Returns:
            (new state, saved states [capacity, paths, n] of which the first
            `new.frame - state.frame` rows are filled, NaN from a failure on).
        """
        paths, n = state.y.shape
        trees = self._trees(self._dims(state.y[0]), state.y.dtype)
        count = self.ts.shape[0]
        target = jnp.minimum(state.frame + jnp.asarray(frames, jnp.int32), count)
        buffer = self.ensemble.split(
            jnp.full((capacity, paths, n), jnp.nan, dtype=state.y.dtype), axis=1
        )
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
            y = self.ensemble.split(jnp.where(failed[:, None], jnp.nan, y))
            buf = buf.at[st.frame - base].set(y)
            new = SdeLoopState(
                y=jnp.where(code == 0, y, st.y),
                frame=st.frame + 1,
                num_steps=st.num_steps + jnp.sum(steps).astype(jnp.int32),
                result=code,
            )
            return new, buf

        return jax.lax.while_loop(more, body, (state, buffer))

    def solve(self, y0: Float[Array, " n"]) -> tuple[Float[Array, "paths T n"], SdeLoopState]:
        """Every save time in one call, differentiable in reverse mode (each path is
        `SdeSolver.solve` of its own key; the ensemble fails, NaN from then on, at the
        first failure of any path, as in `advance`): (states [paths, T, n], final loop
        state)."""
        solver = self.ensemble.solver
        trees = self._trees(self._dims(y0), y0.dtype)
        sol = jax.vmap(
            lambda bm: solver._path(
                self.drift, self.diffusion, self.ts, y0, self.args, bm, self.noise
            )
        )(trees)
        sol = eqx.tree_at(lambda s: s.ys, sol, self.ensemble.split(sol.ys))
        # [T]: the rows a failed path left NaN (a path is NaN from its first failure on)
        failed = jnp.any(jnp.isnan(sol.ys).any(axis=2) & (sol.result != 0)[:, None], axis=0)
        ys = jnp.where(jnp.cumsum(failed)[None, :, None] > 0, jnp.nan, sol.ys)
        final = SdeLoopState(
            y=ys[:, -1],
            frame=jnp.asarray(self.ts.shape[0], jnp.int32),
            num_steps=jnp.sum(sol.num_steps).astype(jnp.int32),
            result=jnp.max(sol.result).astype(jnp.int32),
        )
        return ys, final
