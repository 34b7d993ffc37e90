"""Exact stochastic simulation of reaction networks: Gillespie's direct method (Gillespie,
J. Phys. Chem. 81, 2340 (1977)) as one compiled program for a batch of paths, each path
its own PRNG key.

A network of S species and R reactions is its stoichiometry and its propensities a_r(x)
(`physics.reactions.MassAction`, or any object with `stoichiometry` [R, S] and
`propensities(x, rates)`). From counts x at time t a path waits tau ~ Exp(a_0),
a_0 = sum_r a_r(x), then fires reaction r with probability a_r / a_0: x += nu_r. The
counts at each save time are those before the first event after it. A path whose
propensities all vanish waits for ever (its counts stay). The paths of a batch are
`jax.vmap` of one path's `while_loop`, so a path's counts depend on its key alone, not
on the batch it runs in.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int, Key, PRNGKeyArray, PyTree


class SsaPaths(eqx.Module):
    """The paths of `gillespie`: counts [paths, T, S] at the save times, events fired per
    path [paths], and whether a path reached `max_events` before the last save [paths]."""

    counts: Int[Array, "paths T S"]
    events: Int[Array, " paths"]
    unfinished: Array


def _path(propensities: Callable, stoichiometry: np.ndarray, times, max_events: int):
    nu = jnp.asarray(stoichiometry, jnp.int32)
    end = times[-1]

    def one(x0: Int[Array, " S"], params: PyTree, key: PRNGKeyArray):
        saved = jnp.broadcast_to(x0, (times.shape[0], x0.shape[0]))

        def going(carry):
            t, _, _, _, events = carry
            return (t <= end) & (events < max_events)

        def event(carry):
            t, x, key, saved, events = carry
            key, wait, pick = jax.random.split(key, 3)
            a = propensities(x, params)
            a0 = jnp.sum(a)
            u = jax.random.uniform(wait, (), times.dtype, minval=jnp.finfo(times.dtype).tiny)
            tau = jnp.where(a0 > 0, -jnp.log(u) / jnp.where(a0 > 0, a0, 1.0), jnp.inf)
            later = t + tau
            # the saves in [t, later) hold the counts before this event
            saved = jnp.where(((times >= t) & (times < later))[:, None], x, saved)
            threshold = jax.random.uniform(pick, (), a.dtype) * a0
            r = jnp.minimum(jnp.sum(jnp.cumsum(a) <= threshold), a.shape[0] - 1)
            x = jnp.where(jnp.isfinite(later), x + nu[r], x)
            return later, x, key, saved, events + jnp.isfinite(later).astype(jnp.int32)

        t0 = jnp.asarray(times[0], times.dtype)
        carry = (t0, x0, key, saved, jnp.zeros((), jnp.int32))
        t, x, _, saved, events = jax.lax.while_loop(going, event, carry)
        saved = jnp.where((times >= t)[:, None], x, saved)  # (a path that stopped early)
        return saved, events, t <= end

    return one


def gillespie(
    network: Any,
    x0: Int[Array, "paths S"] | Int[Array, " S"],
    rates: Float[Array, " R"],
    times: Float[Array, " T"],
    keys: Key[Array, " paths"],
    *,
    max_events: int = 1_000_000,
    propensities: Callable | None = None,
) -> SsaPaths:
    """Paths of the network by Gillespie's direct method, one per key, in one compiled
    program (the module's docstring).

    Arguments:
        network: the reactions (`physics.reactions.MassAction`: `stoichiometry` [R, S]
            and `propensities(x, rates)`).
        x0: the counts at times[0], [S] for every path or [paths, S].
        rates: the rate constants k_r [R] (for `propensities`: its parameters).
        times: the save times [T], increasing, the first the start.
        keys: one PRNG key per path [paths].
        max_events: events a path may fire before the last save time at most; a path
            that reaches it is `unfinished` (its later saves hold its last counts).
        propensities: (x, rates) -> a [R] instead of the network's mass action.

    Returns:
        `SsaPaths`: the counts at the save times [paths, T, S], events per path, and
        which paths are unfinished.
    """
    times = jnp.asarray(times)
    if times.ndim != 1 or times.shape[0] < 1:
        raise ValueError(f"times must be a 1-D array of save times, got shape {times.shape}")
    x0 = jnp.asarray(x0, jnp.int32)
    paths = keys.shape[0]
    if x0.ndim == 1:
        x0 = jnp.broadcast_to(x0, (paths, x0.shape[0]))
    species = np.shape(network.stoichiometry)[1]
    if x0.shape[1] != species:
        raise ValueError(f"x0 holds {x0.shape[1]} species, the network {species}")
    rule = network.propensities if propensities is None else propensities
    counts, events, unfinished = _compiled(
        rule, network, max_events, x0, jnp.asarray(rates), times, keys
    )
    return SsaPaths(counts, events, unfinished)


@eqx.filter_jit
def _compiled(rule, network, max_events, x0, rates, times, keys):
    one = _path(rule, network.stoichiometry, times, max_events)
    return jax.vmap(one, in_axes=(0, None, 0))(x0, rates, keys)
