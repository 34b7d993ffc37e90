"""The run of particles split over devices by slabs (`SlabRun`): what each device
computes of the model on its own particles and ghosts, the compiled chunk of steps in
`jax.shard_map`, and the engine interface of a streamed MD run (the decomposition
itself: `solvers._domains`; the steps of each integrator: `solvers._slab_motion`; a
model's mesh part: `solvers._slab_mesh`)."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int, PyTree

from ._domains import (
    ROOMS,
    SLAB_AXIS,
    Slabs,
    SlabState,
    _padded,
    _sized,
    cannot_split,
    mesh_slabs,
)
from ._particles import ParticleIntegrator, VelocityVerlet
from ._slab_mesh import SlabMesh
from ._slab_motion import cannot_step, kinetic, step

# ----------------------------------------------------------------------------- the physics


class _Particles(eqx.Module):
    """What every device holds of the whole system: each particle's mass and species
    (indexed by id; the id n reads the last row, a unit mass), the box, the class of the
    model's systems, and the constant terms of the model's energy and pressure (its tail
    corrections, a Coulomb self energy: constants of a box that does not change)."""

    mass: Float[Array, " n1"]
    species: Int[Array, " n1"]
    space: Any
    constant_energy: Float[Array, ""]
    tail_pressure: Float[Array, ""]
    system_type: type = eqx.field(static=True)

    @property
    def n(self) -> int:
        return self.mass.shape[0] - 1


@dataclasses.dataclass(frozen=True)
class _Physics:
    """The model's pairs (forces of given rows), the integrator and, for a model with
    one, its mesh part (`physics.md.MeshEwald`) on the mesh's slabs."""

    model: Any
    integrator: Any
    part: Any = None
    mesh: SlabMesh | None = None

    def _charges(self, params, s: SlabState, p: _Particles) -> Array:
        """The charges of the own particles (0 in empty slots)."""
        own = s.ids < p.n
        return jnp.where(own, self.part.charges(params, p.species[s.ids], s.position.dtype), 0)

    def mesh_forces(self, params, s: SlabState, p: _Particles) -> Array:
        """The mesh part's forces on the own particles (`SlabMesh.forces`)."""
        charges = self._charges(params, s, p)
        return self.mesh.forces(self.part, s.position, charges, p.space.edges)

    def mesh_energy(self, params, s: SlabState, p: _Particles):
        """The mesh part's energy and dU / d lambda (`SlabMesh.energy`)."""
        charges = self._charges(params, s, p)
        return self.mesh.energy(self.part, s.position, charges, p.space.edges)


def _local_system(s: SlabState, p: _Particles):
    """The own particles and the ghosts as one system of the model's (own slots first)."""
    ids = jnp.concatenate([s.ids, s.ghost_ids])
    position = jnp.concatenate([s.position, s.ghost_position])
    return p.system_type(position, jnp.zeros_like(position), p.mass[ids], p.species[ids], p.space)


def row_block(n: int) -> int:
    """Own particles whose pair forces `_forces` computes at a time, for a system of n
    particles (the same on any number of devices): an eighth of them, as a power of two
    from 32 to 1,024 (at 32,000 Lennard-Jones particles a step took as long as in one
    block of all slots; blocks of 256 took 1.35 times as long on one device)."""
    return min(1024, max(32, 1 << max(0, math.ceil(math.log2(max(n, 1) / 8)))))


def _forces(physics: _Physics, params, s: SlabState, p: _Particles) -> Array:
    """The forces on the own particles (zero in empty slots).

    The pairs' forces are computed `row_block(n)` rows at a time (the last block padded
    with rows of no neighbours), so that every device runs the same program on blocks of
    the same shape whatever its number of slots: XLA orders the additions of a row's sum
    by the shape of the rows it sums (one program over all of a device's slots gave
    forces whose last bits changed with the slabs' sizes: 256 particles on 1 and on 4
    devices)."""
    system = _local_system(s, p)
    c, width = s.index.shape
    block = row_block(p.n)
    pad = -c % block
    size = system.position.shape[0]
    index = jnp.pad(s.index, ((0, pad), (0, 0)), constant_values=size)
    rows = jnp.arange(c + pad, dtype=jnp.int32).reshape(-1, block)
    index = index.reshape(-1, block, width)
    pairs = physics.model.pair_forces_and_virial
    blocks = jax.lax.map(lambda b: pairs(system, params, b[1], rows=b[0])[0], (rows, index))
    force = blocks.reshape((c + pad, -1))[:c]
    if physics.part is not None:
        force = force + physics.mesh_forces(params, s, p)
    return jnp.where((s.ids < p.n)[:, None], force, 0.0)


def _observe(physics: _Physics, params, s: SlabState, p: _Particles, dof: int, thermostat=None):
    """The standard observables of the whole system, from sums over the devices (the
    pressure the virial one, (2 K + W) / (dim V)); with a Nose-Hoover chain, the
    conserved energy too."""
    model, integrator = physics.model, physics.integrator
    rows = jnp.arange(s.ids.shape[0], dtype=jnp.int32)
    energy, virial = model.rows_energy_and_virial(_local_system(s, p), params, s.index, rows)
    sums = jax.lax.psum({"potential": energy, "virial": jnp.sum(virial)}, SLAB_AXIS)
    if physics.part is not None:  # (its energy and stretch: summed over the devices)
        mesh_energy, stretch = physics.mesh_energy(params, s, p)
        sums["potential"] = sums["potential"] + mesh_energy
        sums["virial"] = sums["virial"] - jnp.sum(stretch)
    out = model.observables_of(
        sums["potential"] + p.constant_energy,
        kinetic(s, p.n, p.mass),
        sums["virial"],
        p.space,
        p.n,
        dof,
        jnp.sum(p.mass[:-1]),
        p.tail_pressure,
    )
    if integrator.has_conserved_energy:  # (a Nose-Hoover chain's energy)
        chain = integrator.chain_energy(thermostat, dof, s.position.dtype)
        out["conserved_energy"] = out["total_energy"] + chain
    return out


def _fresh(slabs: Slabs, ids, position, velocity, force, image) -> SlabState:
    """A device's state of its particles before a build."""
    g, c = slabs.ghosts, slabs.capacity
    return SlabState(
        ids=ids,
        position=position,
        velocity=velocity,
        force=force,
        image=image,
        reference=position,
        send=jnp.full((2, g), c, jnp.int32),
        ghost_ids=jnp.zeros((2 * g,), jnp.int32),
        ghost_position=jnp.zeros((2 * g, position.shape[1]), position.dtype),
        index=jnp.zeros((c, slabs.neighbours), jnp.int32),
        overflow=jnp.zeros((len(ROOMS),), bool),
        builds=jnp.zeros((), jnp.int32),
    )


def _chunk_program(slabs: Slabs, physics: _Physics, room: int, every: int, dof: int, mesh):
    """The compiled chunk: from each device's particles (leading axis: devices), the
    integrator's state (`thermostat`), `first` (compute the forces at the start) and
    `saves` (traced, at most `room`), that many saves `every` steps apart. Gives the
    particles and the integrator's state after, the observables at the start and at each
    save, each save's own particles, and the rooms that overflowed on any device and the
    builds."""
    spec, whole = jax.sharding.PartitionSpec(SLAB_AXIS), jax.sharding.PartitionSpec()

    def body(arrays, thermostat, params, p: _Particles, first, saves):
        ids, position, velocity, force, image, reference = (a[0] for a in arrays)
        # the ghosts and the list of the last build, from its positions; then the ghosts
        # at the current ones
        s = _fresh(slabs, ids, reference, velocity, force, image)
        s = slabs._choose_ghosts(s, p.n, p.space.edges)
        s = slabs._build_list(s, p.n, p.space.edges)
        s = slabs.refresh(eqx.tree_at(lambda t: t.position, s, position), p.n)
        force = jax.lax.cond(first, lambda: _forces(physics, params, s, p), lambda: s.force)
        s = eqx.tree_at(lambda t: t.force, s, force)
        start = _observe(physics, params, s, p, dof, thermostat)
        rows = lambda s: (s.ids, s.position, s.velocity, s.image)  # noqa: E731
        table = jax.tree.map(lambda a: jnp.zeros((room,) + a.shape, a.dtype), (start, rows(s)))
        forces = lambda s: _forces(physics, params, s, p)  # noqa: E731

        def one(_, carry):
            s, thermostat = carry
            return step(
                slabs, physics.integrator, forces, p.n, p.mass, p.space.edges, dof, s, thermostat
            )

        def save(i, carry):
            s, thermostat, table = carry
            s, thermostat = jax.lax.fori_loop(0, every, one, (s, thermostat))
            row = (_observe(physics, params, s, p, dof, thermostat), rows(s))
            return s, thermostat, jax.tree.map(lambda t, r: t.at[i].set(r), table, row)

        s, thermostat, (observed, saved) = jax.lax.fori_loop(0, saves, save, (s, thermostat, table))
        out = tuple(a[None] for a in (s.ids, s.position, s.velocity, s.force, s.image, s.reference))
        stats = {
            "overflow": jax.lax.psum(s.overflow.astype(jnp.int32), SLAB_AXIS) > 0,
            "builds": jax.lax.pmax(s.builds, SLAB_AXIS),
        }
        return out, thermostat, start, observed, tuple(a[None] for a in saved), stats

    mapped = jax.shard_map(
        body,
        mesh=mesh,
        in_specs=((spec,) * 6, whole, whole, whole, whole, whole),
        out_specs=((spec,) * 6, whole, whole, whole, (spec,) * 4, whole),
        check_vma=False,
    )
    return jax.jit(mapped)


# ----------------------------------------------------------------------------- the run


class SlabRunState(eqx.Module):
    """The whole state of a run split by slabs between chunks, in the order of the ids:
    positions wrapped into the box, the box edges each particle has crossed, velocities,
    forces and the positions at the last build (what a checkpoint keeps). A chunk starts
    by building the list of the last build again, from those, so that the steps do not
    depend on where chunks fall. `thermostat` is the integrator's state (None, the key
    of Langevin dynamics, the Nose-Hoover chain)."""

    position: Float[Array | np.ndarray, "n dim"]
    image: Int[Array | np.ndarray, "n dim"]
    velocity: Float[Array | np.ndarray, "n dim"]
    force: Float[Array | np.ndarray, "n dim"]
    reference: Float[Array | np.ndarray, "n dim"]
    thermostat: PyTree = None


class SlabRun:
    """A run of a pair model (and a mesh part, such as particle-mesh Ewald:
    `solvers._slab_mesh`) in a periodic box, at constant energy or with a thermostat,
    its particles split over `devices` devices by slabs of the box's first axis (see the
    module's docstring): what each device holds is its own particles, about n / devices,
    and its ghosts. It streams as `solvers.ParticleRun` does (`start`, `advance`, `meta`,
    `restore`, `stats`, `run`), a chunk of saves per call.

    Arguments:
        model: a pair model (`physics.md.PairModel`: forces of given rows), or one with
            a mesh part besides its pairs (`mesh_part`: charges by particle-mesh Ewald),
            without bonds or molecules.
        params: the model's parameters.
        system: the start (`physics.md.System` in a periodic box).
        integrator: `solvers.VelocityVerlet`, `solvers.LangevinBaoab` or
            `solvers.NoseHooverChain` (without constraints), or a time step: velocity
            Verlet at that step.
        times: the save times [T] (the first the start).
        every: steps per save.
        devices: how many devices (the first ones of `jax.devices()`).
        skin: the list's extra shell.
        factor: room for about this many times the particles counted at the start (near
            a face, in a cell, around one particle).
        chunk: saves per call at most (one compiled program; a call may take fewer).
        key: the PRNG key of Langevin dynamics.

    Raises:
        ValueError: a model, system or split that this cannot run, in one line.
    """

    def __init__(
        self,
        model,
        params: PyTree,
        system,
        integrator: ParticleIntegrator | float,
        *,
        times,
        every: int,
        devices: int = 1,
        skin: float = 0.3,
        factor: float = 1.3,
        chunk: int = 10,
        key: Array | None = None,
    ):
        if isinstance(integrator, (int, float, np.floating)) and not isinstance(integrator, bool):
            integrator = VelocityVerlet(dt=float(integrator))
        problem = cannot_split(model, system, devices, skin) or cannot_step(integrator)
        if problem is not None:
            raise ValueError(problem)
        if isinstance(system.position, jax.core.Tracer):
            raise ValueError("a run split by slabs runs from Python, not inside jax.jit")
        edges = np.asarray(system.space.edges, float)
        if devices > len(jax.devices()):
            raise ValueError(f"{devices} devices asked for, {len(jax.devices())} there")
        self.model, self.params, self.integrator = model, params, integrator
        self.dt = float(integrator.dt)
        parts = None if model.rows_apart else mesh_slabs(model, system, devices, skin)
        self.physics = _Physics(model, integrator, *(parts or ()))
        self.thermostat = integrator._init_thermostat(system.position, key)
        self.times, self.every = np.asarray(times), int(every)
        self.n_saves = len(self.times) - 1
        self.chunk = max(1, min(chunk, self.n_saves))
        self.n, self.dim = system.position.shape
        self.edges = edges
        self.mesh = jax.sharding.Mesh(np.asarray(jax.devices()[:devices]), (SLAB_AXIS,))
        self.system = system
        self.slabs = _sized(
            np.mod(np.asarray(system.position), edges), edges, model.cutoff, skin, devices, factor
        )
        self.particles = _Particles(
            mass=_padded(jnp.asarray(system.mass), 1.0),
            species=_padded(jnp.asarray(system.species), 0),
            space=system.space,
            constant_energy=jnp.asarray(self._constant_energy(system, params)),
            tail_pressure=jnp.asarray(model.tail_pressure(system, params)),
            system_type=type(system),
        )
        self.dof = integrator.degrees_of_freedom(self.n, self.dim)
        self.grown = 0
        self.builds = 0
        self.first: dict | None = None
        self._programs: dict = {}
        self._own = np.zeros(devices, int)

    def _constant_energy(self, system, params):
        """The tail correction and the mesh part's self energy."""
        energy = self.model.tail_energy(system, params)
        part = self.physics.part
        if part is not None:
            dtype = np.asarray(system.position).dtype
            energy = energy + part.self_energy(part.charges(params, system.species, dtype))
        return energy

    # ------------------------------------------------------------------ the chunks

    def _layout(self, state: SlabRunState) -> tuple[Array, ...] | None:
        """The whole state as each device's slots (None: a slab holds more particles
        than the capacity)."""
        s, n = self.slabs, self.n
        at = np.asarray(state.reference)  # (the slabs of the last build)
        width = self.edges[0] / s.devices
        owner = np.minimum((at[:, 0] // width).astype(int), s.devices - 1)
        ids = np.full((s.devices, s.capacity), n, np.int32)
        for d in range(s.devices):
            mine = np.flatnonzero(owner == d)
            if mine.size > s.capacity:
                return None
            ids[d, : mine.size] = mine
        sharding = jax.sharding.NamedSharding(self.mesh, jax.sharding.PartitionSpec(SLAB_AXIS))
        fields = (state.position, state.velocity, state.force, state.image, state.reference)
        rows = [_padded(jnp.asarray(a), 0)[ids] for a in fields]
        return tuple(jax.device_put(a, sharding) for a in (jnp.asarray(ids), *rows))

    def _program(self):
        key = (self.slabs, self.chunk)
        if key not in self._programs:
            self._programs[key] = _chunk_program(
                self.slabs, self.physics, self.chunk, self.every, self.dof, self.mesh
            )
        return self._programs[key]

    def _call(self, state: SlabRunState, first: bool, saves: int):
        """The chunk program on `state`, again with more room until none overflows. A
        chunk whose particles are no longer finite (a run that blew up) is given back as
        it is: its rooms overflow because its numbers are gone, not for want of room (its
        rows say so to whoever reads them: `sim run`'s checks end the run in one line)."""
        while True:
            arrays = self._layout(state)
            if arrays is not None:
                self._last_arguments = (
                    arrays,
                    state.thermostat,
                    self.params,
                    self.particles,
                    jnp.asarray(first),
                    jnp.asarray(saves, jnp.int32),
                )
                out = jax.tree.map(_host, self._program()(*self._last_arguments))
                flags = np.asarray(out[-1]["overflow"])
                if not flags.any() or not np.all(np.isfinite(np.asarray(out[0][1]))):
                    return out
                rooms = [r for r, f in zip(ROOMS, flags, strict=True) if f]
            else:
                rooms = ["capacity"]
            self.slabs = self.slabs.grown(rooms)
            self.grown += 1

    def _observed(self, start: dict) -> dict:
        return {k: np.asarray(v) for k, v in start.items()}

    def start(self) -> SlabRunState:
        """The state at the first save time, its forces computed (its observables in
        `self.first`)."""
        position = np.asarray(self.system.position)  # (in the system's dtype)
        edges = self.edges.astype(position.dtype)
        image = np.floor(position / edges)
        state = SlabRunState(
            position=position - image * edges,
            image=image.astype(np.int32),
            velocity=np.asarray(self.system.velocity),
            force=np.zeros_like(position),
            reference=position - image * edges,
            thermostat=self.thermostat,
        )
        out, thermostat, start, _, _, _ = self._call(state, True, 0)
        self.first = {
            **self._observed(start),
            "position": position,
            "velocity": state.velocity,
        }
        return self._state(out, thermostat)

    def _state(self, particles, thermostat) -> SlabRunState:
        ids, position, velocity, force, image, reference = (np.asarray(a) for a in particles)
        self._own = np.sum(ids < self.n, axis=1)
        fields = (position, image, velocity, force, reference)
        return SlabRunState(*(_by_id(ids, a, self.n) for a in fields), thermostat=thermostat)

    def first_observables(self) -> dict:
        """The observables at the first save time (computed again after a `restore`)."""
        if self.first is None:
            self.start()
        return self.first

    def advance(self, state: SlabRunState, k: int, n: int) -> tuple[SlabRunState, dict]:
        """Frames k+1..k+n (frame 0 first when k == 0) as numpy rows: the observables,
        positions (unwrapped) and velocities in the order of the ids."""
        if not 1 <= n <= self.chunk:
            raise ValueError(f"a chunk of {n} frames; this run takes 1 to {self.chunk}")
        out, thermostat, _, observed, saved, stats = self._call(state, False, n)
        self.builds += int(stats["builds"])
        ids, position, velocity, image = (np.asarray(a)[:, :n] for a in saved)
        rows = {name: np.asarray(v)[:n] for name, v in observed.items()}
        unwrapped = position + image.astype(position.dtype) * self.edges.astype(position.dtype)
        rows["position"] = np.stack([_by_id(ids[:, f], unwrapped[:, f], self.n) for f in range(n)])
        rows["velocity"] = np.stack([_by_id(ids[:, f], velocity[:, f], self.n) for f in range(n)])
        if k == 0:
            first = self.first_observables()
            rows = {
                name: np.concatenate([np.asarray(first[name])[None], v]) for name, v in rows.items()
            }
        return self._state(out, thermostat), rows

    def meta(self) -> dict[str, Any]:
        """What a checkpoint keeps besides the state: the rooms (a run resumed with other
        rooms could round otherwise)."""
        return {room: getattr(self.slabs, room) for room in ROOMS}

    def restore(self, meta: dict[str, Any]) -> SlabRunState:
        """A template state for a checkpoint saved with `meta`."""
        if meta:
            self.slabs = dataclasses.replace(self.slabs, **{r: int(meta[r]) for r in ROOMS})
        zeros = np.zeros((self.n, self.dim), np.asarray(self.system.position).dtype)
        return SlabRunState(
            zeros, zeros.astype(np.int32), zeros, zeros, zeros, thermostat=self.thermostat
        )

    def stats(self, state: SlabRunState) -> dict[str, int]:
        """The stats of a run that ended (as `solvers.ParticleRun.stats` gives them)."""
        from ._results import Result

        return {
            "num_steps": self.n_saves * self.every,
            "result": int(Result.successful),
            "neighbour_builds": self.builds,
            "capacity": self.slabs.neighbours,
            "devices": self.slabs.devices,
        }

    def run(self, progress=None) -> tuple[dict[str, Array], SlabRunState, dict[str, Array]]:
        """The whole run, a chunk at a time: the observables at every save time (the
        first included, positions and velocities too), the final state, the stats."""
        state = self.start()
        pieces, k = [], 0
        while k < self.n_saves:
            n = min(self.chunk, self.n_saves - k)
            state, rows = self.advance(state, k, n)
            pieces.append(rows)
            k += n
            if progress is not None:
                progress(n * self.every)
        observables = {
            name: jnp.asarray(np.concatenate([p[name] for p in pieces])) for name in pieces[0]
        }
        return observables, state, {k: jnp.asarray(v) for k, v in self.stats(state).items()}

    def own_counts(self) -> np.ndarray:
        """How many particles each device owned at the end of the last call [devices]."""
        return self._own

    def memory_per_device(self) -> int:
        """The bytes of one device's state at the current room (`Slabs.bytes_per_device`)."""
        return self.slabs.bytes_per_device(self.dim)


def _host(x: Array) -> np.ndarray | Array:
    """`x` as a NumPy array on this process, also where its devices belong to several
    processes (a distributed run): a replicated value from this process's copy, one
    split over the devices gathered from every process (a collective: every process
    calls it). A PRNG key stays a key (its data so brought over)."""
    if jnp.issubdtype(x.dtype, jax.dtypes.prng_key):
        data = _host(jax.random.key_data(x))
        return jax.random.wrap_key_data(jnp.asarray(data), impl=jax.random.key_impl(x))
    if x.is_fully_addressable:
        return np.asarray(x)
    if x.sharding.is_fully_replicated:
        return np.asarray(x.addressable_data(0))
    from jax.experimental import multihost_utils

    return np.asarray(multihost_utils.process_allgather(x, tiled=True))


def _by_id(ids: np.ndarray, rows: np.ndarray, n: int) -> np.ndarray:
    """Rows [devices, capacity, ...] of particles `ids` (n: an empty slot) put in the
    order of the ids [n, ...]."""
    ids, rows = ids.reshape(-1), rows.reshape((-1,) + rows.shape[2:])
    keep = ids < n
    out = np.empty((n,) + rows.shape[1:], rows.dtype)
    out[ids[keep]] = rows[keep]
    return out
