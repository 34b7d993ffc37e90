"""Every detail of diffrax that is not public API and that simjax relies on, in one place.

Two loops reproduce `diffrax.diffeqsolve` step for step without calling it: the
resumable loop (`_ode_loop.OdeLoop`, whose state can be saved between chunks) and the
batched loop of sweeps (`_batched_ode`, a chunk of runs in one while loop). To take the
same steps they need the pieces below, which diffrax does not export. Each is pinned by
`tests/solvers/test_diffrax_private.py` against the installed diffrax, so an upgrade
that changes one fails there, by name, rather than as a drift in results.
"""

from __future__ import annotations

import jax.numpy as jnp
from jaxtyping import Array, ArrayLike

try:  # the marker diffeqsolve replaces by the step-size controller's tolerances
    from diffrax._root_finder import use_stepsize_tol as USE_STEPSIZE_TOL
except ImportError:  # pragma: no cover - a diffrax without it
    USE_STEPSIZE_TOL = None
try:  # how diffeqsolve hands the terms to the solver (it also changes the first step
    # the step-size controller picks: diffrax's initial-step heuristic only runs on a
    # bare ODETerm, a wrapped one starts with FIRST_STEP)
    from diffrax._term import WrapTerm as WrapTerm
except ImportError:  # pragma: no cover - a diffrax without it
    WrapTerm = None

#: The first step diffeqsolve takes when dt0 is None (its terms are wrapped).
FIRST_STEP = 0.01

#: A step ending within this many ULPs below t1 is stretched to end at t1.
CLIP_ULPS = 100


def prevbefore(x: Array) -> Array:
    """The largest float below `x` in its precision."""
    return jnp.nextafter(x, jnp.asarray(-jnp.inf, dtype=x.dtype))


def clip_floor(t1: ArrayLike) -> Array:
    """t1 minus CLIP_ULPS ULPs: a proposed step ending beyond it ends at t1."""
    floor = jnp.asarray(t1)
    for _ in range(CLIP_ULPS):
        floor = prevbefore(floor)
    return floor


def clip_to_end(
    tprev: ArrayLike, tnext: ArrayLike, t1: ArrayLike, floor: ArrayLike, keep_step: ArrayLike
) -> Array:
    """The end of the next step as diffeqsolve clips it near t1 (a rejected step that
    would be clipped goes half way instead)."""
    tclip = jnp.where(keep_step, t1, tprev + 0.5 * (t1 - tprev))
    return jnp.where(tnext > floor, tclip, tnext)


def linear_rescale(t0: ArrayLike, t: ArrayLike, t1: ArrayLike) -> Array:
    """(t - t0) / (t1 - t0), and 0 when t0 == t1 (as diffrax's dense output scales time)."""
    t0, t, t1 = jnp.asarray(t0), jnp.asarray(t), jnp.asarray(t1)
    same = t0 == t1
    return jnp.where(same, 0, t - t0) / jnp.where(same, 1, t1 - t0)


def tsit5_dense_weights(theta: ArrayLike) -> list[Array]:
    """The weights of Tsit5's seven stage increments in its dense output at `theta` in
    [0, 1] (diffrax's Tsit5 interpolation: y(theta) = y0 + sum_j w_j k_j)."""
    t = theta
    b1 = (
        -1.0530884977290216
        * t
        * (t - 1.3299890189751412)
        * (t**2 - 1.4364028541716351 * t + 0.7139816917074209)
    )
    b2 = 0.1017 * t**2 * (t**2 - 2.1966568338249754 * t + 1.2949852507374631)
    b3 = 2.490627285651252793 * t**2 * (t**2 - 2.38535645472061657 * t + 1.57803468208092486)
    b4 = -16.54810288924490272 * (t - 1.21712927295533244) * (t - 0.61620406037800089) * t**2
    b5 = 47.37952196281928122 * (t - 1.203071208372362603) * (t - 0.658047292653547382) * t**2
    b6 = -34.87065786149660974 * (t - 1.2) * (t - 0.666666666666666667) * t**2
    b7 = 2.5 * (t - 1) * (t - 0.6) * t**2
    return [b1, b2, b3, b4, b5, b6, b7]


def error_order(controller, solver, term) -> int | float:
    """The order the PID controller uses for the solver's local error (the controller's
    own when set, else the solver's), as diffrax's controller chooses it."""
    order = (
        controller.error_order if controller.error_order is not None else solver.error_order(term)
    )
    if order is None:
        raise ValueError(f"{type(solver).__name__} declares no error order for step-size control")
    return order
