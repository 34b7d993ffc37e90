"""Particle integrators: velocity Verlet (NVE), Langevin BAOAB and Nose-Hoover chain (NVT),
FIRE minimisation, and the fixed-step loop that saves every few steps.

Model-agnostic: an integrator sees positions, velocities, masses and a force function
`force_fn(position, aux) -> (force, aux)`. `aux` is whatever the force function threads
from step to step (a neighbour list, or None); the integrator only carries it.
Units are reduced (Boltzmann's constant is 1): temperature is an energy.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from typing import Any, ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, Int, PRNGKeyArray, PyTree

from ._constraints import Constraints
from ._neighbours import Positions
from ._rollout import rollout

Velocities = Float[Array, "n dim"]
Forces = Float[Array, "n dim"]
Masses = Float[Array, " n"]
ForceFn = Callable[[Positions, Any], tuple[Forces, Any]]


class ParticleState(eqx.Module):
    """The state an integrator advances.

    Attributes:
        position: [n, dim], never wrapped into a periodic box (so displacements over a run
            are the true ones; wrap for output).
        velocity: [n, dim].
        force: [n, dim] at `position`.
        mass: [n].
        aux: what the force function threads along (a neighbour list, or None).
        thermostat: integrator-specific: the PRNG key of Langevin dynamics, the chain of a
            Nose-Hoover thermostat, None for velocity Verlet.
    """

    position: Positions
    velocity: Velocities
    force: Forces
    mass: Masses
    aux: PyTree
    thermostat: PyTree


def kinetic_energy(velocity: Velocities, mass: Masses) -> Float[Array, ""]:
    """Sum of m v^2 / 2.

    Arguments:
        velocity: velocities [n, dim].
        mass: masses [n].

    Returns:
        The total kinetic energy, a scalar (mass times velocity squared).
    """
    return 0.5 * jnp.sum(mass[:, None] * velocity * velocity)


class ParticleIntegrator(eqx.Module):
    """A fixed-step particle integrator: `init` then `step` (pure, jit/grad friendly).

    Concrete integrators set `conserves_momentum` (True when total momentum is constant,
    which removes `dim` degrees of freedom from the temperature) and hold `constraints`
    (`solvers.Constraints`, fixed distances kept by SETTLE and SHAKE/RATTLE after every
    drift and kick, each removing one degree of freedom; None without).
    """

    dt: eqx.AbstractVar[float | Array]
    # (`constraints`, declared by each concrete integrator after its own fields)
    conserves_momentum: ClassVar[bool]
    changes_box: ClassVar[bool] = False
    """True for integrators that change the periodic box (barostats): their state holds
    the box (`box`) and their force function is a `solvers.BoxForceFn`."""

    def init(
        self,
        force_fn: ForceFn,
        position: Positions,
        velocity: Velocities,
        mass: Masses,
        aux: PyTree = None,
        key: PRNGKeyArray | None = None,
    ) -> ParticleState:
        """The state at the start: evaluates the force once.

        Arguments:
            force_fn: (position, aux) -> (force, aux).
            position, velocity: [n, dim].
            mass: [n].
            aux: initial value threaded through `force_fn` (e.g. a built neighbour list).
            key: PRNG key (Langevin dynamics needs one).
        """
        force, aux = force_fn(position, aux)
        return ParticleState(
            position, velocity, force, mass, aux, self._init_thermostat(position, key)
        )

    def _init_thermostat(self, position: Positions, key: PRNGKeyArray | None) -> PyTree:
        return None

    @abc.abstractmethod
    def step(self, state: ParticleState, force_fn: ForceFn) -> ParticleState:
        """Advance one time step dt."""

    def degrees_of_freedom(self, n: int, dim: int) -> int:
        """Kinetic degrees of freedom of n particles in dim dimensions (less one per constraint)."""
        constrained = 0 if self.constraints is None else self.constraints.count
        return dim * n - (dim if self.conserves_momentum else 0) - constrained

    def thermostat_energy(self, state: ParticleState) -> Float[Array, ""]:
        """Energy stored in the thermostat (0 without one); added to the total energy it
        gives the integrator's conserved quantity."""
        return jnp.zeros((), state.position.dtype)

    @property
    def has_conserved_energy(self) -> bool:
        """Whether total energy plus `thermostat_energy` is a conserved quantity of its
        own, reported as the observable conserved_energy (not for velocity Verlet, whose
        total energy is the conserved quantity)."""
        return False

    def box(self, state: ParticleState) -> Float[Array, " dim"] | None:
        """The periodic box of `state` when the integrator changes it, else None."""
        return None


def _half_kick(velocity, force, mass, dt):
    return velocity + (0.5 * dt) * force / mass[:, None]


def _drift(constraints: Constraints | None, position, velocity, mass, dt):
    """position + dt velocity, put back on the constraints (SETTLE, SHAKE) with the
    velocity that makes the constrained move: (new - old) / dt."""
    moved = position + dt * velocity
    if constraints is None:
        return moved, velocity
    moved = constraints.positions(position, moved, mass)
    return moved, (moved - position) / dt


def _project(constraints: Constraints | None, position, velocity, mass):
    """velocity without its components along the constrained bonds (RATTLE)."""
    return velocity if constraints is None else constraints.velocities(position, velocity, mass)


class VelocityVerlet(ParticleIntegrator):
    """Velocity Verlet: symplectic, time-reversible, second order; conserves energy (NVE).

    Arguments:
        dt: time step (traced: a new value does not recompile).
        constraints: fixed distances (`solvers.Constraints`): RATTLE, the drift put back
            on them by SETTLE/SHAKE and the kicked velocities projected on them.

    Example:
        >>> vv = VelocityVerlet(dt=0.005)
        >>> state = vv.init(force_fn, position, velocity, mass)
        >>> state = vv.step(state, force_fn)
    """

    dt: float | Array
    constraints: Constraints | None = None
    conserves_momentum: ClassVar[bool] = True

    def step(self, state: ParticleState, force_fn: ForceFn) -> ParticleState:
        dt = jnp.asarray(self.dt, state.position.dtype)
        velocity = _half_kick(state.velocity, state.force, state.mass, dt)
        position, velocity = _drift(self.constraints, state.position, velocity, state.mass, dt)
        force, aux = force_fn(position, state.aux)
        velocity = _project(
            self.constraints, position, _half_kick(velocity, force, state.mass, dt), state.mass
        )
        return ParticleState(position, velocity, force, state.mass, aux, state.thermostat)


class LangevinBaoab(ParticleIntegrator):
    """Langevin dynamics by the BAOAB splitting (Leimkuhler & Matthews 2013): canonical
    (NVT) sampling with configurational averages exact to second order in dt.

    Arguments:
        dt: time step.
        temperature: target kT (> 0).
        friction: collision rate gamma (> 0), in inverse time units.
        constraints: fixed distances (`solvers.Constraints`): each A step put back on
            them by SETTLE/SHAKE, the velocities after B and O projected on them.
    """

    dt: float | Array
    temperature: float | Array
    friction: float | Array = 1.0
    constraints: Constraints | None = None
    conserves_momentum: ClassVar[bool] = False

    def _init_thermostat(self, position, key):
        if key is None:
            raise ValueError("LangevinBaoab needs a PRNG key: pass key=jax.random.key(seed)")
        return key

    def step(self, state: ParticleState, force_fn: ForceFn) -> ParticleState:
        dtype = state.position.dtype
        dt = jnp.asarray(self.dt, dtype)
        kt = jnp.asarray(self.temperature, dtype)
        gamma = jnp.asarray(self.friction, dtype)
        key, noise_key = jax.random.split(state.thermostat)
        constraints, mass = self.constraints, state.mass
        velocity = _half_kick(state.velocity, state.force, mass, dt)
        position, velocity = _drift(constraints, state.position, velocity, mass, 0.5 * dt)
        c1 = jnp.exp(-gamma * dt)
        c2 = jnp.sqrt(1.0 - c1 * c1)
        noise = jax.random.normal(noise_key, velocity.shape, dtype)
        velocity = _project(
            constraints, position, c1 * velocity + c2 * jnp.sqrt(kt / mass)[:, None] * noise, mass
        )
        position, velocity = _drift(constraints, position, velocity, mass, 0.5 * dt)
        force, aux = force_fn(position, state.aux)
        velocity = _project(constraints, position, _half_kick(velocity, force, mass, dt), mass)
        return ParticleState(position, velocity, force, mass, aux, key)


class ChainState(eqx.Module):
    """Positions `xi` and velocities `v_xi` [chain_length] of a Nose-Hoover chain."""

    xi: Float[Array, " m"]
    v_xi: Float[Array, " m"]


# Suzuki-Yoshida fourth-order weights for the thermostat propagator.
_W = 1.0 / (2.0 - 2.0 ** (1.0 / 3.0))
_SUZUKI_YOSHIDA = (_W, 1.0 - 2.0 * _W, _W)


class NoseHooverChain(ParticleIntegrator):
    """Nose-Hoover chain thermostat (Martyna, Klein & Tuckerman 1992) with the
    time-reversible integrator of Martyna, Tuckerman, Tobias & Klein (1996): velocity
    Verlet between two half steps of the chain, each a Suzuki-Yoshida product.
    Deterministic NVT; `thermostat_energy` plus the total energy is conserved.

    Arguments:
        dt: time step.
        temperature: target kT (> 0).
        tau: thermostat period (time units); masses Q_1 = N_f kT tau^2, Q_j = kT tau^2.
        chain_length: number of thermostats in the chain (static).
        substeps: multiple-time-step factor of the chain propagator (static).
        constraints: fixed distances (`solvers.Constraints`), kept as by `VelocityVerlet`
            (the chain's scaling keeps velocity constraints).
    """

    dt: float | Array
    temperature: float | Array
    tau: float | Array = 0.5
    chain_length: int = eqx.field(static=True, default=3)
    substeps: int = eqx.field(static=True, default=1)
    constraints: Constraints | None = None
    conserves_momentum: ClassVar[bool] = True

    def __check_init__(self):
        if self.chain_length < 1 or self.substeps < 1:
            raise ValueError(
                f"chain_length and substeps must be >= 1, got {self.chain_length}, {self.substeps}"
            )

    def _init_thermostat(self, position, key):
        m = self.chain_length
        return ChainState(jnp.zeros(m, position.dtype), jnp.zeros(m, position.dtype))

    def _masses(self, dof: int, dtype) -> Float[Array, " m"]:
        kt = jnp.asarray(self.temperature, dtype)
        tau = jnp.asarray(self.tau, dtype)
        q = jnp.full(self.chain_length, kt * tau * tau, dtype)
        return q.at[0].multiply(dof)

    def _half_chain(
        self, chain: ChainState, kinetic2: Array, dof: int, dt: Array
    ) -> tuple[ChainState, Array]:
        """Propagate the chain over dt / 2 given 2K; returns the chain and the factor the
        particle velocities are scaled by."""
        dtype = kinetic2.dtype
        kt = jnp.asarray(self.temperature, dtype)
        q = self._masses(dof, dtype)
        m = self.chain_length
        xi, v = chain.xi, chain.v_xi
        scale = jnp.ones((), dtype)
        for w in _SUZUKI_YOSHIDA:
            delta = w * dt / self.substeps
            for _ in range(self.substeps):
                # forces on the thermostats, from the end of the chain to its start
                g = _chain_forces(v, q, kinetic2 * scale * scale, dof, kt)
                v = v.at[m - 1].add(0.25 * delta * g[m - 1])
                for j in range(m - 2, -1, -1):
                    shrink = jnp.exp(-0.125 * delta * v[j + 1])
                    g_j = _chain_force(j, v, q, kinetic2 * scale * scale, dof, kt)
                    v = v.at[j].set((v[j] * shrink + 0.25 * delta * g_j) * shrink)
                scale = scale * jnp.exp(-0.5 * delta * v[0])
                xi = xi + 0.5 * delta * v
                for j in range(m - 1):
                    shrink = jnp.exp(-0.125 * delta * v[j + 1])
                    g_j = _chain_force(j, v, q, kinetic2 * scale * scale, dof, kt)
                    v = v.at[j].set((v[j] * shrink + 0.25 * delta * g_j) * shrink)
                g_last = _chain_force(m - 1, v, q, kinetic2 * scale * scale, dof, kt)
                v = v.at[m - 1].add(0.25 * delta * g_last)
        return ChainState(xi, v), scale

    def step(self, state: ParticleState, force_fn: ForceFn) -> ParticleState:
        dtype = state.position.dtype
        dt = jnp.asarray(self.dt, dtype)
        n, dim = state.position.shape
        dof = self.degrees_of_freedom(n, dim)
        chain, scale = self._half_chain(
            state.thermostat, 2.0 * kinetic_energy(state.velocity, state.mass), dof, dt
        )
        velocity = _half_kick(scale * state.velocity, state.force, state.mass, dt)
        position, velocity = _drift(self.constraints, state.position, velocity, state.mass, dt)
        force, aux = force_fn(position, state.aux)
        velocity = _project(
            self.constraints, position, _half_kick(velocity, force, state.mass, dt), state.mass
        )
        chain, scale = self._half_chain(chain, 2.0 * kinetic_energy(velocity, state.mass), dof, dt)
        return ParticleState(position, scale * velocity, force, state.mass, aux, chain)

    def thermostat_energy(self, state: ParticleState) -> Float[Array, ""]:
        n, dim = state.position.shape
        return self.chain_energy(
            state.thermostat, self.degrees_of_freedom(n, dim), state.position.dtype
        )

    def chain_energy(self, chain: ChainState, dof: int, dtype) -> Float[Array, ""]:
        """Energy stored in the chain: its kinetic energy plus kT (N_f xi_1 + sum of the other
        xi)."""
        kt = jnp.asarray(self.temperature, dtype)
        q = self._masses(dof, dtype)
        return 0.5 * jnp.sum(q * chain.v_xi**2) + kt * (dof * chain.xi[0] + jnp.sum(chain.xi[1:]))

    @property
    def has_conserved_energy(self) -> bool:
        return True


def _chain_force(j: int, v: Array, q: Array, kinetic2: Array, dof: int, kt: Array) -> Array:
    if j == 0:
        return (kinetic2 - dof * kt) / q[0]
    return (q[j - 1] * v[j - 1] ** 2 - kt) / q[j]


def _chain_forces(v, q, kinetic2, dof, kt):
    return jnp.stack([_chain_force(j, v, q, kinetic2, dof, kt) for j in range(v.shape[0])])


# ----------------------------------------------------------------------------- FIRE


class FireState(eqx.Module):
    """State of FIRE minimisation: the particle state plus the adaptive step and mixing."""

    particles: ParticleState
    dt: Float[Array, ""]
    alpha: Float[Array, ""]
    positive_steps: Int[Array, ""]
    steps: Int[Array, ""]


class Fire(eqx.Module):
    """FIRE energy minimisation (Bitzek, Koskinen, Gaehler, Moseler & Gumbsch 2006):
    damped dynamics that mixes the velocity towards the force and restarts when the
    power F.v turns negative.

    Arguments:
        dt_start, dt_max: initial and largest time step.
        n_min: steps of positive power before the step may grow.
        f_inc, f_dec: growth and shrink factors of the step.
        alpha_start, f_alpha: initial mixing and its decay factor.
    """

    dt_start: float = 0.1
    dt_max: float = 0.4
    n_min: int = eqx.field(static=True, default=5)
    f_inc: float = 1.1
    f_dec: float = 0.5
    alpha_start: float = 0.1
    f_alpha: float = 0.99

    def init(
        self, force_fn: ForceFn, position: Positions, mass: Masses | None = None, aux: PyTree = None
    ) -> FireState:
        """Start at rest at `position`."""
        dtype = position.dtype
        mass = jnp.ones(position.shape[0], dtype) if mass is None else mass
        force, aux = force_fn(position, aux)
        particles = ParticleState(position, jnp.zeros_like(position), force, mass, aux, None)
        return FireState(
            particles,
            jnp.asarray(self.dt_start, dtype),
            jnp.asarray(self.alpha_start, dtype),
            jnp.zeros((), jnp.int32),
            jnp.zeros((), jnp.int32),
        )

    def step(self, state: FireState, force_fn: ForceFn) -> FireState:
        """One FIRE step: velocity Verlet with the adaptive step, then the FIRE mixing."""
        p = state.particles
        dtype = p.position.dtype
        dt = state.dt
        velocity = _half_kick(p.velocity, p.force, p.mass, dt)
        position = p.position + dt * velocity
        force, aux = force_fn(position, p.aux)
        velocity = _half_kick(velocity, force, p.mass, dt)
        power = jnp.sum(force * velocity)
        f_norm = jnp.sqrt(jnp.sum(force * force))
        v_norm = jnp.sqrt(jnp.sum(velocity * velocity))
        direction = force / jnp.where(f_norm > 0, f_norm, 1.0)
        alpha = state.alpha
        mixed = (1.0 - alpha) * velocity + alpha * v_norm * direction
        positive = power > 0
        grow = positive & (state.positive_steps > self.n_min)
        dt_new = jnp.where(
            grow,
            jnp.minimum(dt * jnp.asarray(self.f_inc, dtype), jnp.asarray(self.dt_max, dtype)),
            jnp.where(positive, dt, dt * jnp.asarray(self.f_dec, dtype)),
        )
        alpha_new = jnp.where(
            grow,
            alpha * jnp.asarray(self.f_alpha, dtype),
            jnp.where(positive, alpha, jnp.asarray(self.alpha_start, dtype)),
        )
        velocity = jnp.where(positive, mixed, jnp.zeros_like(mixed))
        count = jnp.where(positive, state.positive_steps + 1, 0)
        particles = ParticleState(position, velocity, force, p.mass, aux, None)
        return FireState(particles, dt_new, alpha_new, count, state.steps + 1)

    def minimize(
        self,
        force_fn: ForceFn,
        position: Positions,
        *,
        mass: Masses | None = None,
        aux: PyTree = None,
        force_tolerance: float = 1e-6,
        max_steps: int = 10000,
    ) -> FireState:
        """Run FIRE until the largest force component is below `force_tolerance` or
        `max_steps` steps are taken (check `state.steps`)."""
        state = self.init(force_fn, position, mass, aux)

        def unconverged(s: FireState):
            return (jnp.max(jnp.abs(s.particles.force)) > force_tolerance) & (s.steps < max_steps)

        return jax.lax.while_loop(unconverged, lambda s: self.step(s, force_fn), state)


# ----------------------------------------------------------------------------- the loop


class ParticleSolver(eqx.Module):
    """An integrator plus how forces find neighbours: what `sim.simulate` takes for
    particle models (a bare integrator means the defaults below).

    Arguments:
        integrator: `VelocityVerlet`, `LangevinBaoab` or `NoseHooverChain`.
        neighbour_list: use a cell list + Verlet list (False: all pairs, O(n^2)).
        skin: Verlet skin; the list is rebuilt when a particle has moved skin / 2.
        capacity: neighbours per particle to start with (None: counted from the initial
            configuration with 5% to spare, 25% inside the caller's `jax.jit`, where
            it cannot grow). The engine grows it when it overflows.
        chunk_steps: steps per compiled chunk; after each chunk the engine checks the
            neighbour list and, if it overflowed, reruns the chunk with a larger one.
        checkpoint_levels: nesting of checkpoints inside a save interval for
            reverse-mode differentiation (see `solvers.rollout`).
        shards: over how many devices a run from Python (not inside the caller's
            `jax.jit`, `jax.vmap` or `jax.grad`) splits its particles, each device
            computing the forces on its block (models with `rows_apart`; a divisor of
            the particle count). None: one per CPU device, in blocks of at least
            `solvers.PARTICLES_PER_SHARD` particles; 1: never.
        slabs: split the run over this many devices by slabs of the box instead
            (`solvers.SlabRun`: each device owns the particles of its slab and holds
            ghosts of its neighbours'; a pair model or charges by particle-mesh Ewald in
            a periodic box, at constant energy or with a Langevin or Nose-Hoover
            thermostat). None: not.
    """

    integrator: ParticleIntegrator
    neighbour_list: bool = eqx.field(static=True, default=True)
    skin: float = eqx.field(static=True, default=0.3)
    capacity: int | None = eqx.field(static=True, default=None)
    chunk_steps: int = eqx.field(static=True, default=5000)
    checkpoint_levels: int = eqx.field(static=True, default=2)
    shards: int | None = eqx.field(static=True, default=None)
    slabs: int | None = eqx.field(static=True, default=None)

    def __check_init__(self):
        if self.shards is not None and self.shards < 1:
            raise ValueError(f"shards must be >= 1 (or None), got {self.shards}")
        if self.slabs is not None and self.slabs < 1:
            raise ValueError(f"slabs must be >= 1 (or None), got {self.slabs}")
        if not isinstance(self.integrator, ParticleIntegrator):
            raise TypeError(
                f"ParticleSolver needs a particle integrator (VelocityVerlet, LangevinBaoab, "
                f"NoseHooverChain), got {type(self.integrator).__name__}"
            )
        if not self.skin >= 0:
            raise ValueError(f"skin must be >= 0, got {self.skin}")
        if self.chunk_steps < 1:
            raise ValueError(f"chunk_steps must be >= 1, got {self.chunk_steps}")


def integrate(
    integrator: ParticleIntegrator,
    state: ParticleState,
    force_fn: ForceFn,
    *,
    saves: int,
    steps_per_save: int,
    observe: Callable[[ParticleState], PyTree],
    levels: int = 2,
) -> tuple[ParticleState, PyTree]:
    """Take `saves * steps_per_save` steps, observing the state after every
    `steps_per_save` of them (the initial state is not observed here).

    Runs on `solvers.rollout`: reverse-mode differentiation stores the state at save
    points and at checkpoint blocks only, recomputing the steps in between.

    Arguments:
        integrator: the particle integrator whose `step` is taken.
        state: the state to start from (from `integrator.init`).
        force_fn: (position, aux) -> (force, aux), as the integrator takes it.
        saves: the number of observations.
        steps_per_save: integrator steps between observations.
        observe: state -> a pytree of observables.
        levels: checkpoint nesting depth inside each save interval (`solvers.rollout`).

    Returns:
        (the final state, the observations stacked along a leading axis [saves, ...]).
    """
    return rollout(
        lambda s: integrator.step(s, force_fn),
        state,
        saves * steps_per_save,
        save_every=steps_per_save,
        observe=observe,
        include_initial=False,
        levels=levels,
    )
