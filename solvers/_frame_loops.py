"""Fixed-step loops that stop after any number of saved frames and resume exactly: the
ETDRK loop of `Etdrk.solve` and the particle loop of `integrate`, with their state in a
pytree of arrays and the frame count traced (one compiled program for every chunk
length).

They serve runs that are streamed to disk chunk by chunk and checkpointed: a chunk
fills the next `frames` save times into a buffer of `capacity` rows, and the numbers do
not depend on where chunks fall, since the state carried from one chunk to the next is
the loop's own (the field in Fourier space, the particle state), never recomputed from
what was saved. Forward only: for gradients use `Etdrk.solve` and `integrate`, whose
`rollout` checkpoints for reverse mode.
"""

from __future__ import annotations

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Bool, Int, PyTree

from ._particles import ForceFn, ParticleIntegrator, ParticleState
from ._rollout import advance as _advance
from ._spectral import NONFINITE, Etdrk, EtdrkCoefficients, FourierGrid, _mul


def _buffer(struct: PyTree, rows: int) -> PyTree:
    return jax.tree.map(lambda s: jnp.zeros((rows,) + s.shape, s.dtype), struct)


def _put(buffer: PyTree, row, value: PyTree) -> PyTree:
    return jax.tree.map(lambda b, v: b.at[row].set(v.astype(b.dtype)), buffer, value)


# ----------------------------------------------------------------------------- ETDRK


class EtdrkLoopState(eqx.Module):
    """An ETDRK run between two frames: the field in Fourier space and the index of the
    next frame to fill (frame 0 is the initial field)."""

    u_hat: Array
    frame: Int[Array, ""]


class EtdrkLoop(eqx.Module):
    """`Etdrk.solve` a number of frames at a time.

    Arguments:
        solver: the `Etdrk` strategy (order, steps per save, dealiasing, dtype).
        grid: the periodic grid.
        coefficients: `solver.coefficients(linear, dt)` for the step dt = save interval
            / steps_per_save (build them once per run: the same arrays every chunk).
        nonlinear: u_hat -> N(u)_hat (the loop applies the dealiasing mask).
        observe: physical field -> the pytree saved at each frame (default: the field).

    Build it inside the compiled function (it holds Python callables).
    """

    solver: Etdrk
    grid: FourierGrid
    coefficients: EtdrkCoefficients
    nonlinear: Callable[[Array], Array] = eqx.field(static=True)
    observe: Callable[[Array], PyTree] | None = eqx.field(static=True, default=None)

    def init(self, u0: Array) -> EtdrkLoopState:
        """The state at the first save time (frame 0 not yet filled)."""
        if tuple(u0.shape[-self.grid.ndim :]) != self.grid.points:
            raise ValueError(
                f"initial field has shape {u0.shape}; expected trailing grid shape "
                f"{self.grid.points}"
            )
        u_hat = self.grid.rfft(u0.astype(self.solver.real_dtype))
        return EtdrkLoopState(u_hat=u_hat, frame=jnp.asarray(0, jnp.int32))

    def _step(self) -> Callable[[Array], Array]:
        solver, grid, nonlinear = self.solver, self.grid, self.nonlinear
        if solver.dealias is None:
            n_eff = nonlinear
        else:
            mask = grid.dealias_mask(solver.dealias, dtype=solver.real_dtype)

            def n_eff(u_hat):
                return _mul(mask, nonlinear(_mul(mask, u_hat)))

        return lambda u_hat: solver.step(self.coefficients, u_hat, n_eff)

    def advance(
        self, state: EtdrkLoopState, frames: Int[Array, ""] | int, capacity: int
    ) -> tuple[EtdrkLoopState, PyTree, Int[Array, ""]]:
        """Fill the next `frames` frames (traced, at most `capacity`).

        Returns:
            (new state, saved values [capacity, ...] whose first `frames` rows are the
            frames `state.frame`, `state.frame + 1`, ..., result: 0, or `NONFINITE`
            when the field at the end is not finite).
        """
        grid = self.grid
        observe = self.observe or (lambda u: u)
        step = self._step()
        every = self.solver.steps_per_save
        struct = eqx.filter_eval_shape(lambda u: observe(grid.irfft(u)), state.u_hat)
        base = state.frame
        target = base + jnp.asarray(frames, jnp.int32)

        def body(carry):
            st, buf = carry
            u_hat = jax.lax.cond(
                st.frame > 0, lambda u: _advance(step, u, every, levels=1), lambda u: u, st.u_hat
            )
            buf = _put(buf, st.frame - base, observe(grid.irfft(u_hat)))
            return EtdrkLoopState(u_hat=u_hat, frame=st.frame + 1), buf

        state, buf = jax.lax.while_loop(
            lambda c: c[0].frame < target, body, (state, _buffer(struct, capacity))
        )
        finite = jnp.all(jnp.isfinite(grid.irfft(state.u_hat)))
        return state, buf, jnp.where(finite, 0, NONFINITE).astype(jnp.int32)


# ----------------------------------------------------------------------------- particles


def integrate_frames(
    integrator: ParticleIntegrator,
    state: ParticleState,
    force_fn: ForceFn,
    *,
    frames: Int[Array, ""] | int,
    steps_per_save: Int[Array, ""] | int,
    observe: Callable[[ParticleState], PyTree],
    capacity: int,
    refuse: Callable[[ParticleState], Bool[Array, ""]] | None = None,
) -> tuple[ParticleState, PyTree, Int[Array, ""], Bool[Array, ""], ParticleState]:
    """Take `steps_per_save` steps per frame for `frames` frames, observing the state
    at the end of each, or stop at the first frame in which a step is refused.

    `refuse` flags a state that must not be used (a neighbour list that overflowed):
    the frame in which it appears is abandoned and the loop returns the state at that
    frame's start, so the caller can enlarge what overflowed and redo the frame. Where
    that happens depends only on the run, not on how it is cut into calls, so a run
    gives the same numbers whatever its chunks.

    Arguments:
        integrator: the particle integrator.
        state: the state at a frame.
        force_fn: (position, aux) -> (force, aux).
        frames: frames to fill (traced).
        steps_per_save: steps per frame (traced).
        observe: particle state -> the pytree saved at each frame.
        capacity: rows of the saved buffer (static, at least `frames`).
        refuse: state -> True when it must not be used (None: never).

    Returns:
        (the state at the last frame filled, saved values [capacity + 1, ...] of which
        the first `filled` rows are the frames, filled, refused: True when the loop
        stopped at a refused frame, the refused state (the input when none was)).
    """
    every = jnp.asarray(steps_per_save, jnp.int32)
    frames = jnp.asarray(frames, jnp.int32)
    bad_fn = (
        (lambda s: jnp.asarray(False)) if refuse is None else (lambda s: jnp.asarray(refuse(s)))
    )
    struct = eqx.filter_eval_shape(observe, state)
    buf = _buffer(struct, capacity + 1)  # the last row takes the write of a refused frame

    def more(carry):
        _, _, filled, refused, _ = carry
        return (filled < frames) & ~refused

    def frame(carry):
        st, buf, filled, _, _ = carry

        def steps_left(c):
            j, s = c
            return (j < every) & ~bad_fn(s)

        def one_step(c):
            j, s = c
            return j + 1, integrator.step(s, force_fn)

        _, new = jax.lax.while_loop(steps_left, one_step, (jnp.asarray(0, jnp.int32), st))
        bad = bad_fn(new)
        buf = _put(buf, jnp.where(bad, capacity, filled), observe(new))
        kept = jax.lax.cond(bad, lambda: st, lambda: new)
        return kept, buf, filled + (~bad).astype(jnp.int32), bad, new

    init = (state, buf, jnp.asarray(0, jnp.int32), jnp.asarray(False), state)
    return jax.lax.while_loop(more, frame, init)
