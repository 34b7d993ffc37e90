"""Pressure control: stochastic cell rescaling (Bernetti & Bussi, J. Chem. Phys. 153,
114107 (2020)), isotropic or per axis of an orthorhombic box, around a Langevin or
Nose-Hoover chain thermostat (NPT).

The box follows a first-order stochastic equation: the logarithm of the volume drifts
with the difference between the instantaneous pressure and the target, at a rate set by
a compressibility estimate beta and a time constant tau, plus a noise that makes the
volume sample the isothermal-isobaric distribution p(V) ~ V^N exp(-(U + P V) / kT).
Positions and box are scaled by the same factor s and velocities by 1 / s, so the
kinetic pressure 2K / (dim V) enters as measured.

Isotropic coupling integrates lambda = sqrt(V), whose noise is additive (diffusion
D = kT beta / (4 tau), force f = -2 lambda (P - P_int - kT / (2V))), with the
time-reversible scheme of the paper: the scaling joins the drift of velocity Verlet,
r <- s r + (s + 1/s) / 2 v dt, between the two half kicks and inside the thermostat's
half steps (O B [C A] B O). Its effective energy K + U + P V + (energy taken out by the
thermostat and by the barostat's noise) is conserved up to the integration error; the
barostat's share is the paper's estimate from the forces before and after the move,
dlambda (f + f') / 2 + (D / kT) dt (f'^2 - f^2) / 4 - kT / 2 ln(V' / V). Per-axis
coupling (diagonal box) integrates each eps_a = ln L_a by Euler-Maruyama,
d eps_a = beta / (dim tau) (P_aa - P) dt + sqrt(2 kT beta dt / (dim tau V)) xi_a,
the Ito form whose stationary law is the same distribution over the edges; it has no
effective energy.

The force function of a barostat sees the box: `(position, box, aux) -> (force,
virial, aux)`, with the diagonal of the virial tensor [dim] (tail corrections included)
from which the pressure is taken.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Array, Float, PRNGKeyArray, PyTree

from ._neighbours import Box, Positions
from ._particles import (
    ChainState,
    Forces,
    LangevinBaoab,
    Masses,
    NoseHooverChain,
    ParticleIntegrator,
    ParticleState,
    Velocities,
    _half_kick,
    _project,
    kinetic_energy,
)

Virial = Float[Array, " dim"]
"""The diagonal of the virial tensor, W_aa = sum over pairs of x_ij,a f_ij,a."""
BoxForceFn = Callable[[Positions, Box, Any], tuple[Forces, Virial, Any]]
COUPLINGS = ("isotropic", "anisotropic")


class BarostatState(eqx.Module):
    """What a barostat carries besides the particles.

    Attributes:
        box: edge lengths of the periodic box [dim].
        virial: diagonal of the virial tensor at the state's positions [dim].
        heat: energy taken out of the system by the thermostat and the barostat's noise
            (its sum with K + U + P V is the effective energy).
        key: the PRNG key of the barostat (and of a Langevin thermostat).
        chain: the Nose-Hoover chain, or None with a Langevin thermostat.
    """

    box: Box
    virial: Virial
    heat: Float[Array, ""]
    key: PRNGKeyArray
    chain: ChainState | None


class StochasticCellRescaling(ParticleIntegrator):
    """Stochastic cell rescaling barostat around a thermostat (NPT).

    Arguments:
        thermostat: `LangevinBaoab` or `NoseHooverChain`: the time step, the temperature
            and how the particles are thermostatted.
        pressure: target pressure P (reduced units).
        tau: relaxation time of the volume (time units, > 0).
        compressibility: estimate beta of the isothermal compressibility (> 0); the
            volume relaxes in about tau when it is the true one.
        coupling: "isotropic" (one scaling factor, cubic stays cubic) or "anisotropic"
            (each edge of the orthorhombic box by its own pressure P_aa) (static).

    Example:
        >>> npt = StochasticCellRescaling(LangevinBaoab(0.005, 0.85), pressure=0.5, tau=1.0)
    """

    thermostat: LangevinBaoab | NoseHooverChain
    pressure: float | Array
    tau: float | Array
    compressibility: float | Array
    coupling: str = eqx.field(static=True)
    dt: float | Array
    conserves_momentum: ClassVar[bool] = False  # (the thermostat's degrees of freedom are used)
    changes_box: ClassVar[bool] = True

    def __init__(self, thermostat, pressure, tau=1.0, compressibility=0.1, coupling: str = "isotropic"):
        if not isinstance(thermostat, (LangevinBaoab, NoseHooverChain)):
            raise TypeError(
                "a barostat needs a thermostat: LangevinBaoab or NoseHooverChain, got "
                f"{type(thermostat).__name__} (stochastic cell rescaling samples the volume at a temperature)"
            )
        if coupling not in COUPLINGS:
            raise ValueError(f"barostat coupling must be one of {', '.join(COUPLINGS)}, got {coupling!r}")
        self.thermostat = thermostat
        self.pressure = pressure
        self.tau = tau
        self.compressibility = compressibility
        self.coupling = coupling
        self.dt = thermostat.dt  # the thermostat's time step

    def degrees_of_freedom(self, n: int, dim: int) -> int:
        return self.thermostat.degrees_of_freedom(n, dim)

    @property
    def constraints(self):
        """The thermostat's constraints: positions scaled with the box are put back on
        them, and their forces' virial joins the pressure."""
        return self.thermostat.constraints

    def _constraint_virial(self, position, velocity, force, mass):
        """The virial diagonal of the constraint forces at a state on the constraints."""
        c = self.constraints
        return c.virial(position, c.forces(position, velocity, force, mass))

    @property
    def has_conserved_energy(self) -> bool:
        return self.coupling == "isotropic"

    def box(self, state: ParticleState) -> Box:
        return state.thermostat.box

    def init(
        self,
        force_fn: BoxForceFn,
        position: Positions,
        velocity: Velocities,
        mass: Masses,
        aux: PyTree = None,
        key: PRNGKeyArray | None = None,
        *,
        box: Box | None = None,
    ) -> ParticleState:
        """The state at the start in the periodic box `box` [dim] (required), with the
        barostat's `key` (required)."""
        if box is None:
            raise ValueError("a barostat needs the periodic box it starts from: pass box=edges")
        if key is None:
            raise ValueError("StochasticCellRescaling needs a PRNG key: pass key=jax.random.key(seed)")
        box = jnp.asarray(box, position.dtype)
        force, virial, aux = force_fn(position, box, aux)
        if self.constraints is not None:
            virial = virial + self._constraint_virial(position, velocity, force, mass)
        chain = self.thermostat._init_thermostat(position, None) if isinstance(self.thermostat, NoseHooverChain) else None
        barostat = BarostatState(box, virial, jnp.zeros((), position.dtype), key, chain)
        return ParticleState(position, velocity, force, mass, aux, barostat)

    def thermostat_energy(self, state: ParticleState) -> Float[Array, ""]:
        """P V plus the energy taken out by the thermostat and the barostat (and what a
        Nose-Hoover chain stores): added to K + U, the effective energy."""
        b = state.thermostat
        dtype = state.position.dtype
        energy = jnp.asarray(self.pressure, dtype) * jnp.prod(b.box) + b.heat
        if b.chain is not None:
            n, dim = state.position.shape
            energy = energy + self.thermostat.chain_energy(b.chain, self.degrees_of_freedom(n, dim), dtype)
        return energy

    def _thermostat_half(self, position, velocity, mass, chain, heat, key, dt):
        """The thermostat over dt / 2: a Langevin O step (its energy change joins `heat`;
        the noise projected on the constraints) or a half step of the Nose-Hoover chain
        (which keeps its own energy)."""
        if isinstance(self.thermostat, NoseHooverChain):
            n, dim = velocity.shape
            chain, scale = self.thermostat._half_chain(chain, 2.0 * kinetic_energy(velocity, mass), self.degrees_of_freedom(n, dim), dt)
            return scale * velocity, chain, heat
        dtype = velocity.dtype
        kt = jnp.asarray(self.thermostat.temperature, dtype)
        c1 = jnp.exp(-jnp.asarray(self.thermostat.friction, dtype) * 0.5 * dt)
        before = kinetic_energy(velocity, mass)
        noise = jax.random.normal(key, velocity.shape, dtype)
        velocity = c1 * velocity + jnp.sqrt((1.0 - c1 * c1) * kt / mass)[:, None] * noise
        velocity = _project(self.constraints, position, velocity, mass)
        return velocity, chain, heat + before - kinetic_energy(velocity, mass)

    def _lambda_force(self, velocity, mass, box, virial):
        """lambda = sqrt(V) and the force on it, -2 lambda (P - P_int - kT / (2V))."""
        dtype = velocity.dtype
        volume = jnp.prod(box)
        dim = box.shape[0]
        internal = (2.0 * kinetic_energy(velocity, mass) + jnp.sum(virial)) / (dim * volume)
        kt = jnp.asarray(self.thermostat.temperature, dtype)
        lam = jnp.sqrt(volume)
        return lam, -2.0 * lam * (jnp.asarray(self.pressure, dtype) - internal - 0.5 * kt / volume), volume

    def step(self, state: ParticleState, force_fn: BoxForceFn) -> ParticleState:
        b = state.thermostat
        dtype = state.position.dtype
        dt = jnp.asarray(self.dt, dtype)
        kt = jnp.asarray(self.thermostat.temperature, dtype)
        beta = jnp.asarray(self.compressibility, dtype)
        tau = jnp.asarray(self.tau, dtype)
        mass = state.mass
        key, first_key, cell_key, last_key = jax.random.split(b.key, 4)
        velocity, chain, heat = self._thermostat_half(state.position, state.velocity, mass, b.chain, b.heat, first_key, dt)
        # (projected on the constraints: the kinetic pressure of the half-kicked velocity
        # must not count the bond components that the constraint forces cancel)
        velocity = _project(self.constraints, state.position, _half_kick(velocity, state.force, mass, dt), mass)
        dim = b.box.shape[0]
        if self.coupling == "isotropic":
            diffusion = 0.25 * kt * beta / tau
            lam, force_on_lam, volume = self._lambda_force(velocity, mass, b.box, b.virial)
            noise = jax.random.normal(cell_key, (), dtype)
            dlam = diffusion / kt * force_on_lam * dt + jnp.sqrt(2.0 * diffusion * dt) * noise
            scale = jnp.exp(2.0 * jnp.log1p(dlam / lam) / dim)
            heat = heat + 0.5 * dlam * force_on_lam - 0.25 * diffusion / kt * dt * force_on_lam**2 + 0.5 * kt * jnp.log(volume)
        else:
            volume = jnp.prod(b.box)
            rate = beta / (dim * tau)
            per_axis = (jnp.sum(mass[:, None] * velocity * velocity, axis=0) + b.virial) / volume
            noise = jax.random.normal(cell_key, (dim,), dtype)
            eps = rate * (per_axis - jnp.asarray(self.pressure, dtype)) * dt + jnp.sqrt(2.0 * kt * rate * dt / volume) * noise
            scale = jnp.exp(eps)
        position = scale * state.position + (0.5 * (scale + 1.0 / scale) * dt) * velocity
        box = scale * b.box
        velocity = velocity / scale
        if self.constraints is not None:  # back on the constraints (SETTLE, SHAKE from the old positions)
            moved = self.constraints.positions(state.position, position, mass)
            velocity = velocity + (moved - position) / dt
            position = moved
        force, virial, aux = force_fn(position, box, state.aux)
        kicked = _project(self.constraints, position, _half_kick(velocity, force, mass, dt), mass)
        if self.constraints is not None:
            virial = virial + self._constraint_virial(position, kicked, force, mass)
        if self.coupling == "isotropic":
            _, force_after, volume = self._lambda_force(velocity, mass, box, virial)
            heat = heat + 0.5 * dlam * force_after + 0.25 * diffusion / kt * dt * force_after**2 - 0.5 * kt * jnp.log(volume)
        velocity, chain, heat = self._thermostat_half(position, kicked, mass, chain, heat, last_key, dt)
        return ParticleState(position, velocity, force, mass, aux, BarostatState(box, virial, heat, key, chain))
