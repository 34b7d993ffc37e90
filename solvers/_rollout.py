"""Fixed-step rollouts on `lax.scan` whose reverse-mode memory grows sublinearly.

`rollout` is model-agnostic: it repeats any `step(state) -> state` on any pytree state
(a Fourier field, particle positions and velocities, ...), saving an observation every
`save_every` steps. The steps between two saves run as nested scans whose bodies are
wrapped in `jax.checkpoint`: the backward pass stores only the states at block
boundaries and recomputes the inside of one block at a time. With `levels` nested levels
a block of `n` steps keeps about `levels * n ** (1 / levels)` states alive instead of
`n` (Griewank and Walther, "Evaluating Derivatives", 2nd ed., SIAM 2008, ch. 12), at
the price of recomputing each step up to `levels - 1` extra times in the backward pass.
The forward pass alone costs nothing extra.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import jax
from jaxtyping import PyTree


def _plain(step: Callable[[PyTree], PyTree], state: PyTree, n: int) -> PyTree:
    if n == 0:
        return state
    if n == 1:
        return step(state)
    final, _ = jax.lax.scan(lambda s, _: (step(s), None), state, None, length=n)
    return final


def advance(step: Callable[[PyTree], PyTree], state: PyTree, n: int, levels: int = 2) -> PyTree:
    """Apply `step` to `state` `n` times with `levels`-deep nested checkpointing.

    Arguments:
        step: a pure function state -> state (same pytree structure, shapes, dtypes).
        state: the initial state (any pytree of arrays).
        n: number of steps (a Python int, >= 0).
        levels: nesting depth; 1 is a plain scan (reverse-mode memory linear in `n`),
            2 keeps O(sqrt(n)) states, `L` keeps O(L n^(1/L)).

    Returns:
        The state after `n` steps.
    """
    if levels <= 1 or n <= 2:
        return _plain(step, state, n)
    # Outer blocks of `block` steps each; the inside of a block is checkpointed, so the
    # backward pass stores one state per block and recomputes the block it is in.
    block = math.ceil(n ** ((levels - 1) / levels))
    count, remainder = divmod(n, block)

    @jax.checkpoint
    def run_block(s):
        return advance(step, s, block, levels - 1)

    if count == 1:
        state = run_block(state)
    elif count > 1:
        state, _ = jax.lax.scan(lambda s, _: (run_block(s), None), state, None, length=count)
    return advance(step, state, remainder, levels - 1)


def rollout(
    step: Callable[[PyTree], PyTree],
    state: PyTree,
    n_steps: int,
    *,
    save_every: int = 1,
    observe: Callable[[PyTree], Any] | None = None,
    include_initial: bool = True,
    levels: int = 2,
) -> tuple[PyTree, Any]:
    """Advance `state` by `n_steps` fixed steps, observing it every `save_every` steps.

    Reverse-mode memory is O(number of saves + levels * save_every ** (1 / levels))
    states rather than O(n_steps): take one save at the end (`save_every = n_steps`)
    to differentiate through a long run in O(sqrt(n_steps)) memory.

    Arguments:
        step: pure function state -> state for one step (close over dt, parameters,
            precomputed coefficients; they are differentiated through as usual).
        state: initial state, any pytree of arrays.
        n_steps: total number of steps, a Python int that `save_every` divides.
        save_every: steps between two observations.
        observe: state -> pytree of arrays saved at each observation (default: the
            state itself).
        include_initial: also observe the initial state (first entry of the output).
        levels: checkpoint nesting depth inside each save interval (see `advance`).

    Returns:
        `(final_state, saved)` where each leaf of `saved` has leading dimension
        `n_steps // save_every` (+ 1 with `include_initial`).

    Raises:
        ValueError: `n_steps` < 0, `save_every` < 1, or `save_every` does not divide
            `n_steps`.

    Example:
        >>> import jax.numpy as jnp
        >>> final, saved = rollout(lambda x: 0.5 * x, jnp.ones(3), 4, save_every=2)
        >>> saved.shape   # initial + 2 saves
        (3, 3)
    """
    if not isinstance(n_steps, int) or n_steps < 0:
        raise ValueError(f"n_steps must be a whole number >= 0, got {n_steps!r}")
    if not isinstance(save_every, int) or save_every < 1:
        raise ValueError(f"save_every must be a whole number >= 1, got {save_every!r}")
    if n_steps % save_every != 0:
        raise ValueError(
            f"save_every = {save_every} must divide n_steps = {n_steps} "
            f"(for example save_every = {math.gcd(n_steps, save_every) or 1})"
        )
    if observe is None:
        observe = _identity
    n_saves = n_steps // save_every

    @jax.checkpoint
    def interval(s):
        s = advance(step, s, save_every, levels)
        return s, observe(s)

    if n_saves > 0:
        final, saved = jax.lax.scan(lambda s, _: interval(s), state, None, length=n_saves)
    else:
        final = state
        saved = jax.tree.map(lambda leaf: leaf[None][:0], observe(state))
    if include_initial:
        first = observe(state)
        saved = jax.tree.map(lambda a, b: jax.numpy.concatenate([a[None], b], axis=0), first, saved)
    return final, saved


def _identity(x):
    return x
