"""An MD run from `simulate`'s arguments: the system and solver it starts from when none
is given, the checks of a system before it runs, and the `solvers.ParticleRun` (or, for a
sweep, `solvers.ParticleFrames`) that runs it."""

from __future__ import annotations

import math
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, PyTree

from physics.md import (
    BeadSpring,
    LennardJonesCoulomb,
    Morse,
    ParticleModel,
    SoftSphere,
    System,
    chains,
    lattice,
    thermalize,
)
from solvers import (
    ParticleFrames,
    ParticleIntegrator,
    ParticleProblem,
    ParticleRun,
    ParticleSolver,
    SlabRun,
    VelocityVerlet,
    concrete,
    largest_divisor_at_most,
    neighbour_list,
)

from ..._run import Setup
from ..._trajectory import Trajectory
from ._molecules import with_constraints

DEFAULT_DT = 0.005


def default_system(model: ParticleModel, key: Array | None = None) -> System:
    """The system a particle model starts from when none is given: 256 particles on an
    fcc lattice at density 0.8442 with Maxwell-Boltzmann velocities at T = 1.0 (bead
    springs: 16 chains of 16 beads grown at density 0.3, as dense as random growth with
    beads 0.9 apart reliably reaches; charged particles: 216 ions of two species on a
    rock-salt lattice at the same density)."""
    key = jax.random.key(0) if key is None else key
    if isinstance(model, BeadSpring):
        return thermalize(chains(key, 16, 16, density=0.3), jax.random.fold_in(key, 1), 1.0)
    if isinstance(model, LennardJonesCoulomb):
        return thermalize(lattice("rocksalt", 3, 0.8442), key, 1.0)
    return thermalize(lattice("fcc", 4, 0.8442), key, 1.0)


def as_solver(solver) -> ParticleSolver:
    """A `ParticleSolver` from what `simulate` was given (None: velocity Verlet, dt 0.005)."""
    if solver is None:
        return ParticleSolver(VelocityVerlet(dt=DEFAULT_DT))
    if isinstance(solver, ParticleIntegrator):
        return ParticleSolver(solver)
    if isinstance(solver, ParticleSolver):
        return solver
    raise TypeError(
        "a particle model needs a particle integrator (VelocityVerlet, LangevinBaoab, "
        "NoseHooverChain) "
        f"or a ParticleSolver, got {type(solver).__name__}"
    )


def steps_per_save(t, dt) -> int:
    """The fixed number of dt steps between consecutive save times `t`.

    Raises:
        ValueError: times not concrete, not equally spaced, or not a multiple of dt.
    """
    times = concrete(t)
    step = concrete(dt)
    if times is None or step is None:
        raise ValueError(
            "MD save times and the time step must be concrete numbers (the number of steps is "
            "fixed "
            "before compiling); pass them from outside jax.jit"
        )
    step = float(step)
    if not step > 0:
        raise ValueError(f"the time step dt must be > 0, got {step}")
    gaps = np.diff(times)
    if np.any(gaps <= 0) or not np.allclose(gaps, gaps[0], rtol=1e-9, atol=1e-12):
        raise ValueError(
            "MD save times must be equally spaced and increasing (e.g. jnp.linspace(0, 10, 101))"
        )
    count = int(round(gaps[0] / step))
    if count < 1 or abs(count * step - gaps[0]) > 1e-6 * gaps[0]:
        raise ValueError(
            f"the save interval {gaps[0]:g} must be a whole number of time steps dt = {step:g}"
        )
    return count


def check_system(model: ParticleModel, system: System, params: PyTree) -> None:
    """Raise ValueError for a system the model cannot start from: parameters that do not
    fit it, a box shorter than twice the cutoff, overlapping particles. Checks only
    what is concrete (under jax.jit, values are unknown and skipped)."""
    if not isinstance(system, System):
        raise TypeError(f"initial must be a physics.md.System, got {type(system).__name__}")
    concrete_params = {k: concrete(v) for k, v in params.items()}
    if all(v is not None for v in concrete_params.values()):
        model.check_params(system, {k: jnp.asarray(v) for k, v in concrete_params.items()})
    position = concrete(system.position)
    if system.space.periodic:
        edges = concrete(system.space.box)
        if edges is not None and np.any(edges < 2 * model.cutoff):
            raise ValueError(
                f"the box {np.round(edges, 6).tolist()} is shorter than twice the cutoff "
                f"{model.cutoff:g} "
                f"in some direction: use more particles (a larger box) or a shorter cutoff"
            )
    else:
        edges = None
    if position is None:
        return
    if not np.all(np.isfinite(position)):
        raise ValueError("initial positions contain NaN or infinity")
    n = position.shape[0]
    if n < 2:
        return
    molecule = None if system.topology is None else concrete(system.topology.molecule)
    # Sites without a Lennard-Jones core of their own (a water's hydrogens: epsilon 0
    # with every species) come close to other molecules' sites in a liquid; only the
    # cores are checked.
    cores = np.arange(n)
    epsilon, species = concrete_params.get("epsilon"), concrete(system.species)
    if epsilon is not None and np.ndim(epsilon) == 2 and species is not None:
        cores = np.flatnonzero(np.diag(np.asarray(epsilon))[np.asarray(species)] > 0)
        if cores.shape[0] < 2:
            return
    i, j, r = _closest_pair(position[cores], edges, None if molecule is None else molecule[cores])
    i, j = int(cores[i]), int(cores[j])
    sigma = concrete_params.get("sigma")
    limit = (
        0.5 * float(np.min(sigma))
        if sigma is not None and not isinstance(model, (SoftSphere, Morse))
        else 1e-6
    )
    if r < limit:
        what = "" if molecule is None else f" (molecules {int(molecule[i])} and {int(molecule[j])})"
        raise ValueError(
            f"particles {i} and {j}{what} overlap: distance {r:.3g} < {limit:.3g}; spread them out "
            "(lower the density, or start from a lattice or random_packing with min_distance)"
        )


def _closest_pair(
    position: np.ndarray, edges: np.ndarray | None, molecule: np.ndarray | None = None
) -> tuple[int, int, float]:
    """The closest pair of particles (of different molecules when `molecule` [n] gives
    each particle's), chunked so memory stays O(n * 1024)."""
    best = (0, 1, math.inf)
    n = position.shape[0]
    for start in range(0, n, 1024):
        block = position[start : start + 1024]
        dr = block[:, None, :] - position[None, :, :]
        if edges is not None:
            dr = dr - edges * np.round(dr / edges)
        r2 = np.sum(dr * dr, axis=-1)
        r2[np.arange(len(block)), np.arange(start, start + len(block))] = np.inf
        if molecule is not None:
            r2[molecule[start : start + 1024][:, None] == molecule[None, :]] = np.inf
        k = int(np.argmin(r2))
        a, b = divmod(k, n)
        if r2[a, b] < best[2] ** 2:
            best = (start + a, b, float(np.sqrt(r2[a, b])))
    return best


def particle_run(
    model: ParticleModel,
    params: PyTree,
    t,
    *,
    initial: System | None = None,
    solver=None,
    key: Array | None = None,
) -> ParticleRun | SlabRun:
    """The run of `simulate` and of `sim run` (`solvers.ParticleRun`, or `solvers.SlabRun`
    for a solver that asks for slabs), once the system,
    the parameters and the save times have been checked."""
    system = default_system(model, key) if initial is None else initial
    solver = with_constraints(as_solver(solver), system)
    check_system(model, system, params)
    every = steps_per_save(t, solver.integrator.dt)
    dtype = system.position.dtype
    params = {k: jnp.asarray(v).astype(dtype) for k, v in params.items()}
    run_key = None if key is None else jax.random.fold_in(key, 7)
    if solver.slabs is not None:  # (it sizes a mesh itself, for its slabs)
        return _slab_run(model, params, system, solver, concrete(t), every, run_key)
    model = model.for_system(system)
    return ParticleRun(model, params, system, solver, times=concrete(t), every=every, key=run_key)


def _slab_run(model, params, system: System, solver, times, every: int, key) -> SlabRun:
    """The run of a solver that asks for slabs (`solvers.SlabRun`): velocity Verlet, or
    a Langevin or Nose-Hoover thermostat (no barostat or constraints), with a neighbour
    list."""
    if not solver.neighbour_list:
        raise ValueError("a run split by slabs needs the neighbour list (neighbour_list = true)")
    n_saves = len(times) - 1
    chunk = largest_divisor_at_most(n_saves, max(1, solver.chunk_steps // every))
    return SlabRun(
        model,
        params,
        system,
        solver.integrator,
        times=times,
        every=every,
        devices=solver.slabs,
        skin=solver.skin,
        chunk=chunk,
        key=key,
    )


def run_md(
    model: ParticleModel,
    params: PyTree,
    t: Array | np.ndarray,
    *,
    initial: System | None = None,
    solver=None,
    key: Array | None = None,
    progress: Callable[[int], None] | None = None,
) -> Trajectory:
    """Simulate a particle model, saving at the equally spaced times `t` (what
    `sim.simulate` does for particle models).

    The run is split into compiled chunks of about `solver.chunk_steps` steps. After each
    chunk the neighbour-list overflow flag is read; if set, the list is reallocated with
    room for what was seen and the chunk is rerun from its start. Under `jax.jit` or
    `jax.vmap` the flag cannot be read mid-run: an overflow then makes
    `stats["result"]` `Result.neighbour_overflow` and the affected observables NaN.

    Returns:
        A `Trajectory` with observables potential_energy, kinetic_energy, total_energy,
        temperature, pressure (and conserved_energy with a Nose-Hoover chain) [T],
        position and velocity [T, n, dim] (unwrapped), the final `ParticleState`, and
        stats num_steps, result, neighbour_builds, capacity, devices (over how many
        devices the particles were split).
    """
    observables, state, stats = particle_run(
        model, params, t, initial=initial, solver=solver, key=key
    ).run(progress)
    return Trajectory(time=jnp.asarray(t), observables=observables, final_state=state, stats=stats)


def sweep_problem(s: Setup, params: PyTree, key: Array | None) -> ParticleFrames:
    """One run of an MD sweep in the engine protocol (`solvers.ParticleFrames`): the
    run `particle_run` makes of `simulate`'s arguments, on the set-up's list, which
    cannot grow inside a vmapped batch."""
    solver = as_solver(s.solver)
    system = s.initial
    dtype = system.position.dtype
    params = {k: jnp.asarray(v).astype(dtype) for k, v in params.items()}
    problem = ParticleProblem(
        s.model, params, system, solver.integrator, neighbour_list(s.model, system, solver)
    )
    run_key = None if key is None else jax.random.fold_in(key, 7)
    return ParticleFrames(
        problem=problem, key=run_key, every=steps_per_save(s.t, solver.integrator.dt)
    )
