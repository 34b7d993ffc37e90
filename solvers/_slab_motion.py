"""The time steps of a run split by slabs, one device's own particles at a time (inside
`jax.shard_map`): velocity Verlet, Langevin dynamics by BAOAB and the Nose-Hoover chain,
as `solvers.VelocityVerlet`, `solvers.LangevinBaoab` and `solvers.NoseHooverChain` step
the whole system.

Langevin noise is drawn per particle from the step's key folded with the particle's id,
so that a particle receives the same numbers on whichever device owns it (the run is
the same bits on any number of devices, as at constant energy; the numbers are not those
of the replicated run, which draws one array for all particles). The Nose-Hoover chain's
variables are the same on every device: each computes them from the kinetic energy
summed over the devices.
"""

from __future__ import annotations

from collections.abc import Callable

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, PyTree

from ._domains import SLAB_AXIS, Slabs, SlabState
from ._particles import LangevinBaoab, NoseHooverChain, ParticleIntegrator, VelocityVerlet

#: The integrators a run split by slabs takes.
SLAB_INTEGRATORS = (VelocityVerlet, LangevinBaoab, NoseHooverChain)


def cannot_step(integrator: ParticleIntegrator) -> str | None:
    """Why a run split by slabs cannot take `integrator` (one line), or None."""
    if type(integrator) not in SLAB_INTEGRATORS:
        names = ", ".join(c.__name__ for c in SLAB_INTEGRATORS)
        return f"a run split by slabs steps by {names}, not {type(integrator).__name__}"
    if integrator.constraints is not None:
        return "a run split by slabs keeps no constraints (molecules are not split)"
    return None


def _own(s: SlabState, n: int) -> Array:
    return (s.ids < n)[:, None]


def kick(s: SlabState, n: int, mass: Array, force: Array, dt) -> Array:
    """The velocities after half a kick by `force` (`mass` indexed by id)."""
    return jnp.where(_own(s, n), s.velocity + 0.5 * dt * force / mass[s.ids][:, None], 0.0)


def kinetic(s: SlabState, n: int, mass: Array) -> Array:
    """The kinetic energy of every device's particles (summed over the devices)."""
    own = _own(s, n)
    local = 0.5 * jnp.sum(jnp.where(own, mass[s.ids][:, None] * s.velocity**2, 0.0))
    return jax.lax.psum(local, SLAB_AXIS)


def _moved(slabs: Slabs, s: SlabState, n: int, box: Array, moved: Array, velocity: Array):
    """`s` with its particles at `moved` (wrapped into the box, the edges crossed
    counted) and `velocity`, the ghosts sent again or, when a particle moved far enough,
    everything built anew."""
    own = _own(s, n)
    crossed = jnp.floor(moved / box)
    position = jnp.where(own, moved - crossed * box, s.position)
    image = jnp.where(own, s.image + crossed.astype(s.image.dtype), s.image)
    s = eqx.tree_at(lambda t: (t.position, t.velocity, t.image), s, (position, velocity, image))
    return jax.lax.cond(
        slabs.needs_build(s, n, box),
        lambda s: slabs.build(s, n, box),
        lambda s: slabs.refresh(s, n),
        s,
    )


def step(
    slabs: Slabs,
    integrator: ParticleIntegrator,
    forces: Callable[[SlabState], Array],
    n: int,
    mass: Array,
    box: Array,
    dof: int,
    s: SlabState,
    thermostat: PyTree,
) -> tuple[SlabState, PyTree]:
    """One step of `integrator` on the calling device's particles; `forces(s)` gives the
    forces on its own particles, `thermostat` is the integrator's state (None, the key
    of Langevin dynamics, the chain)."""
    dtype = s.position.dtype
    dt = jnp.asarray(integrator.dt, dtype)
    if isinstance(integrator, NoseHooverChain):
        thermostat, scale = integrator._half_chain(thermostat, 2.0 * kinetic(s, n, mass), dof, dt)
        s = eqx.tree_at(lambda t: t.velocity, s, scale * s.velocity)
    velocity = kick(s, n, mass, s.force, dt)
    if isinstance(integrator, LangevinBaoab):
        # B A O A: the two half drifts, the friction and noise between them
        thermostat, noise_key = jax.random.split(thermostat)
        kt = jnp.asarray(integrator.temperature, dtype)
        c1 = jnp.exp(-jnp.asarray(integrator.friction, dtype) * dt)
        c2 = jnp.sqrt(1.0 - c1 * c1)
        dim = s.position.shape[1]
        noise = jax.vmap(
            lambda i: jax.random.normal(jax.random.fold_in(noise_key, i), (dim,), dtype)
        )(s.ids)
        m = mass[s.ids][:, None]
        half = s.position + 0.5 * dt * velocity
        velocity = jnp.where(_own(s, n), c1 * velocity + c2 * jnp.sqrt(kt / m) * noise, 0.0)
        moved = half + 0.5 * dt * velocity
    else:
        moved = s.position + dt * velocity
    s = _moved(slabs, s, n, box, moved, velocity)
    force = forces(s)
    s = eqx.tree_at(lambda t: (t.force, t.velocity), s, (force, kick(s, n, mass, force, dt)))
    if isinstance(integrator, NoseHooverChain):
        thermostat, scale = integrator._half_chain(thermostat, 2.0 * kinetic(s, n, mass), dof, dt)
        s = eqx.tree_at(lambda t: t.velocity, s, scale * s.velocity)
    return s, thermostat
