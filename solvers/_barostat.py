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
the Ito form whose stationary law is the same distribution over the edges (in eps, with
the scaled coordinates and velocities held, V exp(-(K + U + P V) / kT)). Its effective
energy is built for this step the way the isotropic one is (Del Tatto, Raiteri, Bernetti
and Bussi, Appl. Sci. 12, 1139 (2022), give one for their own anisotropic scheme): the
barostat's heat is what detailed balance would ask of the move,
kT ln q(eps' | eps) - kT ln q(eps | eps') - kT ln(V' / V), q the Gaussian of the
Euler-Maruyama step taken forward from here and backward from there (the drift there
from the velocities after the move and the virial of the new forces); written out,
-kT |xi|^2 / 2 + |eps + drift' dt|^2 V' / (4 rate dt) - (dim / 2 + 1) kT ln(V' / V).
The isotropic heat above is this construction for lambda, whose Gaussian has a
constant width.

Rigid molecules (a thermostat with constraints) are scaled as wholes: the box moves
each molecule's centre of mass R and scales its centre-of-mass velocity, a rigid
translation that keeps every constraint, and the pressure that drives it is the
molecular one, P_aa = (sum over molecules of M V_a^2 + W_aa - sum_i (r_i - R)_a F_i,a) / V:
the centres' kinetic energy and the virial of each molecule's total force at its centre
(-dU/d ln L_a with the centres scaled), in which the constraint forces cancel. Its trace
equals, state by state, the atomic pressure with the constraint forces' virial (the
pressure observable), so the barostat needs no constraint forces, and their virial does
not lag a step behind (`instantaneous_pressure` computes it from a state).

The force function of a barostat sees the box: `(position, box, aux) -> (force,
virial, aux)`, with the diagonal of the atomic virial tensor [dim] (tail corrections
included) from which the pressure is taken.
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
    _drift,
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
        virial: diagonal of the virial tensor at the state's positions [dim] (the
            molecular virial with rigid molecules).
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

    def __init__(
        self, thermostat, pressure, tau=1.0, compressibility=0.1, coupling: str = "isotropic"
    ):
        if not isinstance(thermostat, (LangevinBaoab, NoseHooverChain)):
            raise TypeError(
                "a barostat needs a thermostat: LangevinBaoab or NoseHooverChain, got "
                f"{type(thermostat).__name__} (stochastic cell rescaling samples the volume at a "
                "temperature)"
            )
        if coupling not in COUPLINGS:
            raise ValueError(
                f"barostat coupling must be one of {', '.join(COUPLINGS)}, got {coupling!r}"
            )
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
        """The thermostat's constraints: the box scales their molecules as wholes."""
        return self.thermostat.constraints

    def _centres(self, x, mass):
        """Each particle's molecular centre of `x` (x itself without constraints)."""
        return x if self.constraints is None else self.constraints.centres(x, mass)

    def _virial(self, position, force, mass, virial):
        """The molecular virial diagonal from the atomic one, W_aa - sum_i (r_i - R)_a F_i,a
        (the atomic one without constraints)."""
        if self.constraints is None:
            return virial
        return virial - jnp.sum((position - self._centres(position, mass)) * force, axis=0)

    def _kinetic(self, velocity, mass):
        """Twice the kinetic energy of the centres per axis, sum over molecules M V_a^2
        (= sum_i m_i v_i,a V_i,a, V_i the centre velocity of i's molecule) [dim]."""
        return jnp.sum(mass[:, None] * velocity * self._centres(velocity, mass), axis=0)

    def pressure_tensor(self, position, velocity, force, mass, box, virial) -> Virial:
        """The diagonal of the pressure tensor the barostat drives [dim] (energy / volume),
        from a state and the atomic virial diagonal `virial` of `force` (a force
        function's output): molecular with rigid molecules."""
        return (
            self._kinetic(velocity, mass) + self._virial(position, force, mass, virial)
        ) / jnp.prod(box)

    def instantaneous_pressure(
        self, position, velocity, force, mass, box, virial
    ) -> Float[Array, ""]:
        """The scalar pressure the barostat drives (energy / volume): the mean of
        `pressure_tensor`, at a state equal to the pressure observable."""
        return jnp.mean(self.pressure_tensor(position, velocity, force, mass, box, virial))

    @property
    def has_conserved_energy(self) -> bool:
        return True

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
            raise ValueError(
                "StochasticCellRescaling needs a PRNG key: pass key=jax.random.key(seed)"
            )
        box = jnp.asarray(box, position.dtype)
        force, virial, aux = force_fn(position, box, aux)
        virial = self._virial(position, force, mass, virial)
        chain = (
            self.thermostat._init_thermostat(position, None)
            if isinstance(self.thermostat, NoseHooverChain)
            else None
        )
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
            energy = energy + self.thermostat.chain_energy(
                b.chain, self.degrees_of_freedom(n, dim), dtype
            )
        return energy

    def _thermostat_half(self, position, velocity, mass, chain, heat, key, dt):
        """The thermostat over dt / 2: a Langevin O step (its energy change joins `heat`;
        the noise projected on the constraints) or a half step of the Nose-Hoover chain
        (which keeps its own energy)."""
        if isinstance(self.thermostat, NoseHooverChain):
            n, dim = velocity.shape
            chain, scale = self.thermostat._half_chain(
                chain, 2.0 * kinetic_energy(velocity, mass), self.degrees_of_freedom(n, dim), dt
            )
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
        internal = jnp.sum(self._kinetic(velocity, mass) + virial) / (dim * volume)
        kt = jnp.asarray(self.thermostat.temperature, dtype)
        lam = jnp.sqrt(volume)
        return (
            lam,
            -2.0 * lam * (jnp.asarray(self.pressure, dtype) - internal - 0.5 * kt / volume),
            volume,
        )

    def step(self, state: ParticleState, force_fn: BoxForceFn) -> ParticleState:
        b = state.thermostat
        dtype = state.position.dtype
        dt = jnp.asarray(self.dt, dtype)
        kt = jnp.asarray(self.thermostat.temperature, dtype)
        beta = jnp.asarray(self.compressibility, dtype)
        tau = jnp.asarray(self.tau, dtype)
        mass = state.mass
        key, first_key, cell_key, last_key = jax.random.split(b.key, 4)
        velocity, chain, heat = self._thermostat_half(
            state.position, state.velocity, mass, b.chain, b.heat, first_key, dt
        )
        velocity = _project(
            self.constraints, state.position, _half_kick(velocity, state.force, mass, dt), mass
        )
        dim = b.box.shape[0]
        if self.coupling == "isotropic":
            diffusion = 0.25 * kt * beta / tau
            lam, force_on_lam, volume = self._lambda_force(velocity, mass, b.box, b.virial)
            noise = jax.random.normal(cell_key, (), dtype)
            dlam = diffusion / kt * force_on_lam * dt + jnp.sqrt(2.0 * diffusion * dt) * noise
            scale = jnp.exp(2.0 * jnp.log1p(dlam / lam) / dim)
            heat = (
                heat
                + 0.5 * dlam * force_on_lam
                - 0.25 * diffusion / kt * dt * force_on_lam**2
                + 0.5 * kt * jnp.log(volume)
            )
        else:
            volume = jnp.prod(b.box)
            rate = beta / (dim * tau)
            drift = rate * (
                (self._kinetic(velocity, mass) + b.virial) / volume
                - jnp.asarray(self.pressure, dtype)
            )
            noise = jax.random.normal(cell_key, (dim,), dtype)
            eps = drift * dt + jnp.sqrt(2.0 * kt * rate * dt / volume) * noise
            scale = jnp.exp(eps)
            # kT ln q(eps | here), up to a constant: the forward half of the heat
            heat = heat + kt * (-0.5 * jnp.sum(noise * noise) + (0.5 * dim + 1.0) * jnp.log(volume))
        # (a run gone non-finite keeps its last box, which tells whether the box shrank
        # below what the forces allow)
        box = jnp.where(jnp.all(jnp.isfinite(scale)), scale * b.box, b.box)
        if self.constraints is None:
            position = scale * state.position + (0.5 * (scale + 1.0 / scale) * dt) * velocity
            velocity = velocity / scale
        else:  # the constrained drift, then each molecule's centre moved as a particle's above
            centre = self._centres(state.position, mass)
            centre_velocity = self._centres(velocity, mass)  # (the drift keeps it)
            position, velocity = _drift(self.constraints, state.position, velocity, mass, dt)
            position = (
                position
                + (scale - 1.0) * centre
                + ((0.5 * (scale + 1.0 / scale) - 1.0) * dt) * centre_velocity
            )
            velocity = velocity + (1.0 / scale - 1.0) * centre_velocity
        force, virial, aux = force_fn(position, box, state.aux)
        virial = self._virial(position, force, mass, virial)
        if self.coupling == "isotropic":
            _, force_after, volume = self._lambda_force(velocity, mass, box, virial)
            heat = (
                heat
                + 0.5 * dlam * force_after
                + 0.25 * diffusion / kt * dt * force_after**2
                - 0.5 * kt * jnp.log(volume)
            )
        else:  # minus kT ln q(-eps | there): the backward half
            volume = jnp.prod(box)
            back = rate * (
                (self._kinetic(velocity, mass) + virial) / volume
                - jnp.asarray(self.pressure, dtype)
            )
            heat = (
                heat
                + jnp.sum((eps + back * dt) ** 2) * volume / (4.0 * rate * dt)
                - (0.5 * dim + 1.0) * kt * jnp.log(volume)
            )
        kicked = _project(self.constraints, position, _half_kick(velocity, force, mass, dt), mass)
        velocity, chain, heat = self._thermostat_half(
            position, kicked, mass, chain, heat, last_key, dt
        )
        return ParticleState(
            position, velocity, force, mass, aux, BarostatState(box, virial, heat, key, chain)
        )
