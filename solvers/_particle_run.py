"""A particle run in compiled chunks, with neighbour lists that grow when they overflow,
and the one capacity policy every particle run uses (a single run, a vmapped sweep, a
compiled fit).

The model and the system are reached by duck typing, so that this floor imports no
model code: a model has `forces(system, params, index)` and
`measure(system, params, index, degrees_of_freedom)` and a `cutoff` (and, for a
barostat, `forces_and_virial(system, params, index)` and `tail_pressure(system,
params)`); a system has `position`, `velocity`, `mass`, `n`, `dim`, `space.box`,
`space.volume()`, `at(position, velocity)` and `with_box(edges)`.

Capacity policy (neighbours per particle a list holds):
- A run that can read its overflow flag between chunks (`ParticleRun`: `simulate`, a
  `sim run`) starts from `NeighbourList.allocate` (the neighbours counted at the start
  with `CAPACITY_FACTOR` to spare; for a barostat, whose box may shrink by `BOX_MARGIN`
  per edge, for the density of that box) and, when the list overflows, grows it with
  `NeighbourList.grown` and redoes the chunk, or the frame for a streamed run. A
  `simulate` inside the caller's `jax.jit` or `jax.vmap` cannot grow its list: it starts with
  `TRACED_CAPACITY_FACTOR` to spare, and an overflow ends it with
  `Result.neighbour_overflow`.
- A run that cannot (a vmapped sweep chunk, a compiled fit) starts with `FIXED_FACTOR`
  times that (`fixed_capacity`). An overflow is flagged (`Result.neighbour_overflow`) and
  its observables become NaN, never wrong; a sweep redoes the runs that overflowed with
  `larger_capacity` (`redo_overflowed`): doubled up to n - 1, then all pairs.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, PyTree

from ._frame_loops import integrate_frames
from ._neighbours import BOX_MARGIN, CAPACITY_FACTOR, SHARD_AXIS, NeighbourList, Neighbours
from ._particles import ParticleIntegrator, ParticleSolver, ParticleState, integrate
from ._results import Result

FIXED_FACTOR = 2.0
"""A list that cannot grow during its run starts with this many times the capacity a
growable one starts with."""
ALL_PAIRS = -1
"""The capacity `larger_capacity` gives after n - 1: no neighbour list, all pairs."""


def concrete(x) -> np.ndarray | None:
    """x as a numpy array if its value is known now (also under jax.grad, and constants
    under jax.jit), else None."""
    if not isinstance(x, jax.core.Tracer):
        return np.asarray(x)
    try:
        return np.asarray(jax.lax.stop_gradient(x))
    except (jax.errors.ConcretizationTypeError, jax.errors.TracerArrayConversionError):
        return None


# ----------------------------------------------------------------------------- capacity policy


def fixed_capacity(position: np.ndarray, box: np.ndarray | None, cutoff: float, skin: float) -> int:
    """The capacity of a list that cannot grow during its run: `FIXED_FACTOR` times what
    `NeighbourList.allocate` counts for `position`, at most n - 1 (and at least 1).

    Arguments:
        position: a representative configuration [n, dim] (concrete values).
        box: periodic box edges [dim], or None for free space.
        cutoff: interaction range (length unit of the positions).
        skin: extra shell of the list (length unit of the positions).

    Returns:
        Neighbours per particle, an int in 1..max(1, n - 1).

    Raises:
        ValueError: as `NeighbourList.allocate` (a periodic box shorter than
            2 (cutoff + skin) in some direction, or non-positive sizes).
    """
    n = int(np.shape(position)[0])
    counted = NeighbourList.allocate(
        np.asarray(position), None if box is None else np.asarray(box), cutoff, skin
    )
    return max(1, min(math.ceil(FIXED_FACTOR * counted.capacity), n - 1))


def larger_capacity(current: int, n: int) -> int | None:
    """The capacity to try after `current` overflowed in a run that cannot grow its list:
    doubled up to n - 1, then `ALL_PAIRS`; None when there is nothing larger.

    Arguments:
        current: the capacity that overflowed (neighbours per particle, or `ALL_PAIRS`).
        n: the number of particles.

    Returns:
        min(2 current, n - 1) while current < n - 1, `ALL_PAIRS` (-1) from n - 1 on, and
        None after `ALL_PAIRS`.
    """
    if current == ALL_PAIRS:
        return None
    return ALL_PAIRS if current >= n - 1 else min(2 * current, n - 1)


def redo_overflowed(values: dict, capacity: int, n: int, rerun: Callable[[int], dict]) -> dict:
    """A batch's results with every run whose list overflowed (`values["stats/result"]`
    is `Result.neighbour_overflow`) replaced by `rerun(capacity)` at larger capacities
    until none overflows or nothing larger is left. Deterministic: every batch starts
    from the same `capacity`, so a batch gives the same numbers whoever computes it.

    Arguments:
        values: the batch's results, name -> array with the runs along the leading axis
            [runs, ...]; must hold "stats/result" [runs].
        capacity: the capacity the batch ran with (neighbours per particle).
        n: the number of particles of each run.
        rerun: capacity -> the whole batch's results at that capacity, with the same
            names and shapes as `values`.

    Returns:
        `values` with the rows of the runs that overflowed taken from the rerun at the
        first larger capacity at which they did not (from the last rerun, still flagged,
        when nothing larger was left).
    """
    while True:
        over = np.asarray(values["stats/result"]) == Result.neighbour_overflow
        if not over.any():
            return values
        larger = larger_capacity(capacity, n)
        if larger is None:
            return values
        capacity = larger
        redo = jax.device_get(rerun(capacity))
        values = {
            name: np.where(
                over.reshape(over.shape + (1,) * (np.ndim(v) - 1)),
                np.asarray(redo[name]),
                np.asarray(v),
            )
            for name, v in values.items()
        }


# ----------------------------------------------------------------------------- compiled pieces


class ParticleProblem(eqx.Module):
    """Everything a compiled chunk closes over: model, parameters, system, integrator
    and neighbour list (None: all pairs).

    A list with `shards` > 1 splits the run by particle over that many devices (see
    `shards_for`): the compiled pieces below then run in `jax.shard_map`, every device
    holding the whole state but only its block's rows of the neighbour list. Each
    device computes the forces on its block; one all-gather per step gives every device
    all of them, and each advances the whole state the same way (the integrator's work
    is a small part of a step)."""

    model: Any
    params: PyTree
    system: Any
    integrator: ParticleIntegrator
    neighbour_list: NeighbourList | None

    @property
    def shards(self) -> int:
        return 1 if self.neighbour_list is None else self.neighbour_list.shards

    def _row_forces(self, system, nbrs: Neighbours | None, with_virial: bool):
        """Forces (and the virial diagonal) of the whole system from this device's rows
        of the list; a list in cell order (`NeighbourList.ordered`) is used with the
        particles in its order, and the forces put back in theirs."""
        index = None if nbrs is None else nbrs.index
        ordered = nbrs is not None and nbrs.order is not None
        if ordered:
            system = system.permuted(nbrs.order)
        if self.shards == 1:
            if with_virial:
                force, virial = self.model.forces_and_virial(system, self.params, index)
            else:
                force, virial = self.model.forces(system, self.params, index), None
        else:
            rows = self.neighbour_list.rows(system.n)
            if with_virial:
                force, virial = self.model.forces_and_virial(system, self.params, index, rows=rows)
                virial = jax.lax.psum(virial, SHARD_AXIS)
            else:
                force, virial = self.model.forces(system, self.params, index, rows=rows), None
            force = jax.lax.all_gather(force, SHARD_AXIS, tiled=True)
        return (force[nbrs.place] if ordered else force), virial

    def force_fn(self, position, nbrs: Neighbours | None):
        nl = self.neighbour_list
        if nl is not None:
            nbrs = nl.update(nbrs, position, self.system.space.box)
        return self._row_forces(self.system.at(position), nbrs, with_virial=False)[0], nbrs

    def box_force_fn(self, position, box, nbrs: Neighbours | None):
        """A barostat's force function (`solvers.BoxForceFn`): forces and the diagonal
        of the virial tensor in the box `box`, the tail correction's share V P_tail on
        each axis included; NaN forces once the box is shorter than twice the cutoff
        (minimum images would be wrong), which ends the run as non-finite."""
        nl = self.neighbour_list
        if nl is not None:
            nbrs = nl.update(nbrs, position, box)
        system = self.system.at(position).with_box(box)
        force, virial = self._row_forces(system, nbrs, with_virial=True)
        virial = virial + system.space.volume() * self.model.tail_pressure(system, self.params)
        too_small = jnp.any(box < 2.0 * self.model.cutoff)
        return jnp.where(too_small, jnp.nan, force), virial, nbrs

    @property
    def forces(self):
        """The force function the integrator takes."""
        return self.box_force_fn if self.integrator.changes_box else self.force_fn

    def box_of(self, state: ParticleState):
        """The periodic box of `state` (None in free space)."""
        box = self.integrator.box(state)
        return self.system.space.box if box is None else box

    def init(self, key) -> ParticleState:
        """The integrator's state at the start, with a neighbour list built for it."""
        s = self.system
        nl = self.neighbour_list
        nbrs = None if nl is None else nl.build(s.position, s.space.box)
        box = {"box": s.space.box} if self.integrator.changes_box else {}
        return self.integrator.init(self.forces, s.position, s.velocity, s.mass, nbrs, key, **box)

    def observe(self, state: ParticleState) -> dict[str, Array]:
        system = self.system.at(state.position, state.velocity)
        box = self.integrator.box(state)
        if box is not None:
            system = system.with_box(box)
        index = None if state.aux is None else state.aux.index
        if self.shards > 1:  # observables are measured whole, on every device
            index = jax.lax.all_gather(index, SHARD_AXIS, tiled=True)
        if (
            state.aux is not None and state.aux.order is not None
        ):  # (sums over particles: any order)
            system = system.permuted(state.aux.order)
        dof = self.integrator.degrees_of_freedom(system.n, system.dim)
        constraints = self.integrator.constraints
        extra = {}
        if constraints is not None:  # the constraint forces' virial joins the pressure
            forces = constraints.forces(state.position, state.velocity, state.force, state.mass)
            extra["constraint_virial"] = jnp.sum(constraints.virial(state.position, forces))
        out = self.model.measure(system, self.params, index, dof, **extra)
        if self.integrator.has_conserved_energy:
            out["conserved_energy"] = out["total_energy"] + self.integrator.thermostat_energy(state)
        out["position"] = state.position
        out["velocity"] = state.velocity
        if box is not None:
            out["box"] = box
        return out


WHOLE = jax.sharding.PartitionSpec()
"""The spec of an array every device holds whole."""


def _specs(tree: PyTree) -> PyTree:
    """The `jax.shard_map` specs of a tree of arrays on split particles: the rows of
    every neighbour list split over `SHARD_AXIS`, everything else whole on each device."""

    def one(node):
        if isinstance(node, Neighbours):
            return eqx.tree_at(
                lambda nb: nb.index,
                jax.tree.map(lambda _: WHOLE, node),
                jax.sharding.PartitionSpec(SHARD_AXIS),
            )
        return WHOLE

    return jax.tree.map(one, tree, is_leaf=lambda x: isinstance(x, Neighbours))


def _on_shards(fn: Callable, problem: ParticleProblem, *args, out_specs: Callable[[], PyTree]):
    """`fn(problem, *args)`, split by particle over `problem.shards` devices when there
    is more than one (in `jax.shard_map`; `out_specs()`: the specs of the results)."""
    if problem.shards == 1:
        return fn(problem, *args)
    dynamic, static = eqx.partition((problem, args), eqx.is_array)

    def body(dynamic):
        p, a = eqx.combine(dynamic, static)
        return fn(p, *a)

    mesh = jax.sharding.Mesh(np.asarray(jax.devices()[: problem.shards]), (SHARD_AXIS,))
    return jax.shard_map(
        body, mesh=mesh, in_specs=(_specs(dynamic),), out_specs=out_specs(), check_vma=False
    )(dynamic)


@eqx.filter_jit
def _start(problem: ParticleProblem, key) -> tuple[ParticleState, dict]:
    def start(problem, key):
        state = problem.init(key)
        return state, problem.observe(state)

    def specs():  # (a state's structure, from the same problem on one device)
        whole = dataclasses.replace(
            problem, neighbour_list=dataclasses.replace(problem.neighbour_list, shards=1)
        )
        return _specs(jax.eval_shape(whole.init, key)), WHOLE

    return _on_shards(start, problem, key, out_specs=specs)


@eqx.filter_jit
def _rebuilt(problem: ParticleProblem, state: ParticleState) -> ParticleState:
    """`state` with a neighbour list built afresh by `problem`'s (larger) list."""

    def rebuilt(problem, state):
        old = state.aux
        fresh = problem.neighbour_list.build(state.position, problem.box_of(state))
        fresh = eqx.tree_at(lambda nb: nb.builds, fresh, old.builds + 1)
        return eqx.tree_at(lambda s: s.aux, state, fresh)

    return _on_shards(rebuilt, problem, state, out_specs=lambda: _specs(state))


@eqx.filter_jit
def _chunk(problem: ParticleProblem, state: ParticleState, saves: int, every: int, levels: int):
    def chunk(problem, state):
        return integrate(
            problem.integrator,
            state,
            problem.forces,
            saves=saves,
            steps_per_save=every,
            observe=problem.observe,
            levels=levels,
        )

    return _on_shards(chunk, problem, state, out_specs=lambda: (_specs(state), WHOLE))


@eqx.filter_jit
def _frames(problem: ParticleProblem, state: ParticleState, frames, every, capacity: int):
    """Up to `frames` frames from `state`, stopping at the first frame in which the
    neighbour list overflowed (`integrate_frames`)."""

    def run(problem, state, frames, every):
        refuse = None if problem.neighbour_list is None else (lambda s: s.aux.overflow)
        return integrate_frames(
            problem.integrator,
            state,
            problem.forces,
            frames=frames,
            steps_per_save=every,
            observe=problem.observe,
            capacity=capacity,
            refuse=refuse,
        )

    return _on_shards(
        run,
        problem,
        state,
        frames,
        every,
        out_specs=lambda: (_specs(state), WHOLE, WHOLE, WHOLE, _specs(state)),
    )


def _widened(problem: ParticleProblem, state: ParticleState) -> ParticleState:
    """`state` with its neighbour list padded to `problem`'s (larger) capacity: the
    list a build of that capacity makes from the same reference positions, since the
    smaller one held every neighbour (padding is the id n)."""
    nbrs = state.aux
    n, width = nbrs.index.shape
    extra = problem.neighbour_list.capacity - width
    if extra <= 0:
        return state
    index = jnp.pad(nbrs.index, ((0, 0), (0, extra)), constant_values=n)
    return eqx.tree_at(lambda s: s.aux.index, state, index)


def _overflowed(state: ParticleState) -> bool | None:
    """Whether the neighbour list overflowed (None when the flag is traced)."""
    if state.aux is None:
        return False
    flag = concrete(state.aux.overflow)
    return None if flag is None else bool(flag)


def largest_divisor_at_most(n: int, limit: int) -> int:
    """The largest divisor of n that is at most `limit` (at least 1).

    Arguments:
        n: a positive integer.
        limit: the largest divisor allowed (a limit below 1 counts as 1).

    Returns:
        The largest d in 1..min(n, limit) that divides n.
    """
    return max(d for d in range(1, min(n, max(limit, 1)) + 1) if n % d == 0)


def neighbour_list(
    model, system, solver: ParticleSolver, *, growable: bool = True
) -> NeighbourList | None:
    """The neighbour list a run of `system` starts with (None: all pairs), sized from
    the concrete starting positions (`solver.capacity` if set), with a cell grid for a
    box `BOX_MARGIN` smaller when the integrator changes the box. A list that cannot
    grow (`growable` False: a run inside the caller's `jax.jit` or `jax.vmap`) gets the room of
    `TRACED_CAPACITY_FACTOR`, one that can that of `CAPACITY_FACTOR`.

    Arguments:
        model: the particle model; its `cutoff` is the interaction range.
        system: the starting system (`position` [n, dim] and `space.box` [dim] or None,
            concrete); a system of at least `ORDERED_FROM` particles without `bonds` or
            `topology` gets a list in cell order.
        solver: the `ParticleSolver` (`neighbour_list`, `skin`, `capacity`, and its
            integrator's `changes_box`).
        growable: whether the run can grow the list when it overflows.

    Returns:
        A `NeighbourList` sized for the starting positions, or None when
        `solver.neighbour_list` is False.

    Raises:
        ValueError: the starting positions (or the box) are traced; or, from
            `NeighbourList.allocate`, a periodic box shorter than 2 (cutoff + skin) in some
            direction, or non-positive sizes.
    """
    if not solver.neighbour_list:
        return None
    box = system.space.box
    position = concrete(system.position)
    edges = None if box is None else concrete(box)
    if position is None or (box is not None and edges is None):
        raise ValueError(
            "the neighbour list is sized from the initial positions, which are traced here; "
            "pass the initial System from outside jax.jit (close over it), or use "
            "ParticleSolver(..., neighbour_list=False)"
        )
    margin = BOX_MARGIN if solver.integrator.changes_box else 0.0
    factor = CAPACITY_FACTOR if growable else TRACED_CAPACITY_FACTOR
    nl = NeighbourList.allocate(
        position,
        edges,
        model.cutoff,
        solver.skin,
        capacity=solver.capacity,
        box_margin=margin,
        factor=factor,
    )
    ordered = len(position) >= ORDERED_FROM and system.bonds is None and system.topology is None
    return dataclasses.replace(nl, ordered=ordered and bool(nl.cells))


ORDERED_FROM = 10_000
"""A run of this many particles or more, none bonded or in molecules, keeps its
neighbour list in cell order (`NeighbourList.ordered`): particles that diffuse away from
their first order make a force pass slower, since each row's neighbours then lie far
apart in memory. Measured on one core (LJ liquid at the `in.lj` density, a pass over the
particles numbered as a lattice after each wandered d per axis): 32,000 particles 18.9
ms at d = 0, 20.7 at 2, 22.0 at 4, 24.2 at 8 and 24.9 in a random order (near the
triple point d = 2 is about 13,000 steps of 0.005, d = 8 about 200,000). On the list in
cell order the pass stays at the lattice's time in any order (random: 23.6 -> 17.8 ms).
While the particles are still in their first order it costs the gathers into the cell
order and back and a sort at each build, offset since by its builds' cheaper lookup: from
the benchmark's melted lattice a step took 0.87-1.10 times as long as in the particles'
own order (7 alternating rounds, median 0.98), where it took 1.06-1.11 times before. At
4,000 particles a random order cost only 5-10% and the list in cell order about as much:
below this size the particles keep their own order."""


PARTICLES_PER_SHARD = 400
"""A run is split over devices only in blocks of at least this many particles: below,
the per-step exchange of forces (about 60 us on CPU) costs as much as the split saves
(measured on two cores, LJ liquid: 500 particles split took as long as on one device,
864 took 0.83 of the time, 1,372 0.80, 4,000 0.81)."""


def shards_for(model, n: int, wanted: int | None) -> int:
    """Over how many devices a run of n particles with a neighbour list is split by
    particle: `wanted` if given, else one per CPU device JAX has (the `sim` command
    makes one per core; a Python program sets XLA_FLAGS=--xla_force_host_platform_device_count
    before JAX starts) in blocks of at least `PARTICLES_PER_SHARD`, and only on CPU (a
    split over accelerators is what `wanted` asks for, untested); always a divisor of n,
    at most the device count, and 1 for a model whose forces cannot be computed a block
    of rows at a time (`rows_apart`).

    Arguments:
        model: the particle model (its `rows_apart` attribute, False when absent).
        n: the number of particles.
        wanted: the number of devices asked for, or None to choose as above.

    Returns:
        The number of shards, an int >= 1 that divides n.
    """
    if not getattr(model, "rows_apart", False):
        return 1
    if wanted is None:
        if jax.default_backend() != "cpu":
            return 1
        wanted = min(jax.device_count(), n // PARTICLES_PER_SHARD)
    return largest_divisor_at_most(n, min(wanted, jax.device_count()))


TRACED_CAPACITY_FACTOR = 1.25
"""The room of a list that cannot grow (a run inside the caller's `jax.jit`, whose
overflow ends it with `Result.neighbour_overflow`): the most neighbours counted times
this. Runs that can grow their list keep it tighter (`CAPACITY_FACTOR`): a denser moment
costs them a recompilation, not a failed run."""


def _can_grow(params: PyTree) -> bool:
    """Whether a run will be able to read its overflow flag and grow its list: not
    while a program is traced (inside `jax.jit`, where an operation on constants gives
    a tracer), nor with parameters whose values are not known now (`jax.vmap` over
    them)."""
    return not isinstance(jnp.zeros(()) + 0, jax.core.Tracer) and all(
        concrete(x) is not None for x in jax.tree.leaves(params)
    )


class ParticleFramesState(eqx.Module):
    """The loop state of `ParticleFrames`: the particles, the observables of the first
    save time, and the frames done (0 before the first is given out)."""

    particles: ParticleState
    first: PyTree
    frame: Array


class ParticleFrames(eqx.Module):
    """A particle run on a list that cannot grow, in the engine protocol of ODE and PDE
    runs (`init`, `advance(state, frames, capacity)`, `num_steps`), so that a batch of
    runs can be vmapped and advanced a few frames at a time (a sweep chunk). A run whose
    list overflows stops at that frame with `Result.neighbour_overflow`; frames are
    stepped by `integrate_frames`, so the numbers never depend on where calls fall."""

    problem: ParticleProblem
    key: Array | None
    every: int = eqx.field(static=True)

    def init(self) -> ParticleFramesState:
        state, first = _start(
            self.problem, self.key
        )  # (an initial build that overflowed is flagged by `advance`)
        return ParticleFramesState(particles=state, first=first, frame=jnp.zeros((), jnp.int32))

    def advance(self, state: ParticleFramesState, frames, capacity: int):
        """Fill the next `frames` save times (the first save time included when none
        was given out yet): (state, rows [capacity, ...], result code)."""
        at_start = state.frame == 0
        wanted = jnp.asarray(frames, jnp.int32) - at_start.astype(jnp.int32)
        refuse = None if self.problem.neighbour_list is None else (lambda s: s.aux.overflow)
        particles, saved, filled, refused, _ = integrate_frames(
            self.problem.integrator,
            state.particles,
            self.problem.forces,
            frames=wanted,
            steps_per_save=self.every,
            observe=self.problem.observe,
            capacity=capacity,
            refuse=refuse,
        )

        def rows(first, buf):
            shifted = jnp.concatenate([first[None], buf[: capacity - 1]], axis=0)
            return jnp.where(at_start, shifted, buf[:capacity])

        out = jax.tree.map(rows, state.first, saved)
        refused = refused | _overflow_flag(state.particles)
        code = jnp.where(refused, jnp.int32(Result.neighbour_overflow), jnp.int32(0))
        frame = state.frame + filled + at_start.astype(jnp.int32)
        return ParticleFramesState(particles=particles, first=state.first, frame=frame), out, code

    def num_steps(self, state: ParticleFramesState):
        return jnp.maximum(state.frame - 1, 0) * self.every


def _overflow_flag(state: ParticleState) -> Array:
    return jnp.asarray(False) if state.aux is None else state.aux.overflow


# ----------------------------------------------------------------------------- the run


class ParticleRun:
    """A particle run, one compiled chunk of saves at a time: what `run` loops over and
    what a streamed run advances.

    `step` (for `run`, differentiable): after each chunk the neighbour-list overflow flag
    is read; if set, the list is grown with room for what was seen and the chunk is rerun
    from its start. Under `jax.jit` or `jax.vmap` the flag cannot be read mid-run: `step`
    then returns the flag traced, and `run` marks the run.

    `advance` (a streamed run, forward only) is chunk-invariant: its compiled loop stops
    at the frame in which the list overflowed, the list is grown and that frame is redone,
    so the list grows at the same frame wherever chunks fall; the frame count is traced
    (one program per list size for every chunk length).

    Arguments:
        model, params, system: the model (see the module docstring), its parameters (in
            the system's dtype) and the starting system.
        solver: the integrator and the neighbour-list settings.
        times: the save times [T] (numpy); every: steps per save.
        key: the integrator's random key (Langevin), or None.

    Raises:
        ValueError: the neighbour list cannot be sized because the starting positions
            are traced.
    """

    def __init__(
        self,
        model,
        params: PyTree,
        system,
        solver: ParticleSolver,
        *,
        times: np.ndarray,
        every: int,
        key: Array | None = None,
    ):
        growable = _can_grow(params)
        nl = neighbour_list(model, system, solver, growable=growable)
        if nl is not None and growable:
            nl = dataclasses.replace(nl, shards=shards_for(model, system.n, solver.shards))
        self.solver = solver
        self.system = system
        self.times = np.asarray(times)
        self.every = every
        self.n_saves = n_saves = len(self.times) - 1
        self.problem = ParticleProblem(model, params, system, solver.integrator, nl)
        self.key = key
        self.chunk = largest_divisor_at_most(n_saves, max(1, solver.chunk_steps // every))
        self.first: dict | None = None

    def start(self) -> ParticleState:
        """The state at the first save time (its observables in `self.first`)."""
        state, first = _start(self.problem, self.key)
        while _overflowed(state):  # the initial build did not fit (only with an explicit capacity)
            self._grow(state)
            state, first = _start(self.problem, self.key)
        self.first = first
        return state

    def first_observables(self) -> dict:
        """The observables at the first save time (computed again after a `restore`)."""
        return self.first if self.first is not None else _start(self.problem, self.key)[1]

    def _grow(self, state: ParticleState) -> None:
        grown = self.problem.neighbour_list.grown(state.aux, self.system.n)
        self.problem = dataclasses.replace(self.problem, neighbour_list=grown)

    def step(self, state: ParticleState, saves: int) -> tuple[ParticleState, dict, Any]:
        """`saves` save intervals from `state`: the new state, the observables of the
        saves, and the overflow flag (False, or None when traced under jit)."""
        while True:
            new_state, obs = _chunk(
                self.problem, state, saves, self.every, self.solver.checkpoint_levels
            )
            over = _overflowed(new_state)
            if not over:
                return new_state, obs, over
            self._grow(new_state)
            state = _rebuilt(self.problem, state)

    def advance(
        self, state: ParticleState, k: int, n: int
    ) -> tuple[ParticleState, dict[str, np.ndarray]]:
        """The streamed-run interface: frames k+1..k+n (frame 0 first when k == 0) as
        numpy rows."""
        if not 1 <= n <= self.chunk:
            raise ValueError(f"a chunk of {n} frames; this run takes 1 to {self.chunk}")
        pieces: list[dict[str, np.ndarray]] = []
        remaining = n
        while True:
            state, saved, filled, refused, rejected = _frames(
                self.problem,
                state,
                jnp.asarray(remaining, jnp.int32),
                jnp.asarray(self.every, jnp.int32),
                self.chunk,
            )
            filled = int(filled)
            pieces.append({name: np.asarray(v)[:filled] for name, v in saved.items()})
            remaining -= filled
            if not bool(refused):
                break
            # The list overflowed within the frame after `state`: grow it, redo the frame.
            self._grow(rejected)
            state = _widened(self.problem, state)
        if remaining:  # pragma: no cover - the loop stops early only at a refused step
            raise RuntimeError(f"the particle chunk filled {n - remaining} of {n} frames")
        rows = {name: np.concatenate([p[name] for p in pieces]) for name in pieces[0]}
        if k == 0:
            rows = {
                name: np.concatenate([np.asarray(self.first[name])[None], v])
                for name, v in rows.items()
            }
        return state, rows

    def meta(self) -> dict[str, Any]:
        """What a checkpoint keeps besides the state: the list's sizes."""
        nl = self.problem.neighbour_list
        return (
            {}
            if nl is None
            else {
                "capacity": nl.capacity,
                "cell_capacity": nl.cell_capacity,
                "cells": list(nl.cells),
            }
        )

    def restore(self, meta: dict[str, Any]) -> ParticleState:
        """A template state for a checkpoint saved with `meta`."""
        nl = self.problem.neighbour_list
        if nl is not None and meta:
            cells = tuple(int(c) for c in meta.get("cells", nl.cells))
            sized = dataclasses.replace(
                nl,
                capacity=int(meta["capacity"]),
                cell_capacity=int(meta["cell_capacity"]),
                cells=cells,
            )
            self.problem = dataclasses.replace(self.problem, neighbour_list=sized)
        state, _ = _start(self.problem, self.key)
        return state

    def _stats(self, state: ParticleState, result: Array | int) -> dict[str, Array]:
        nl = self.problem.neighbour_list
        return {
            "num_steps": jnp.asarray(self.n_saves * self.every),
            "result": jnp.asarray(result),
            "neighbour_builds": jnp.asarray(0) if state.aux is None else state.aux.builds,
            "capacity": jnp.asarray(0 if nl is None else nl.capacity),
            "devices": jnp.asarray(self.problem.shards),
        }

    def stats(self, state: ParticleState) -> dict[str, int]:
        """The stats of a streamed run that ended (`run` gives the same as arrays)."""
        return {
            name: int(value) for name, value in self._stats(state, int(Result.successful)).items()
        }

    def run(
        self, progress: Callable[[int], None] | None = None
    ) -> tuple[dict[str, Array], ParticleState, dict[str, Array]]:
        """The whole run, chunk by chunk (differentiable; under `jax.jit` or `jax.vmap` an
        overflow makes `stats["result"]` `Result.neighbour_overflow` and the observables
        from the overflowed chunk on NaN).

        Returns:
            The observables at every save time (the first included), the final state and
            the stats num_steps, result, neighbour_builds, capacity.
        """
        state = self.start()
        first = self.first
        pieces = []
        unresolved = jnp.asarray(False)
        for _ in range(self.n_saves // self.chunk):
            new_state, obs, over = self.step(state, self.chunk)
            if over is None:  # traced: flag the run, poison what followed the overflow
                unresolved = unresolved | new_state.aux.overflow
                obs = jax.tree.map(
                    lambda a: (
                        jnp.where(unresolved, jnp.nan, a)  # noqa: B023 (called in the loop)
                        if jnp.issubdtype(a.dtype, jnp.floating)
                        else a
                    ),
                    obs,
                )
            pieces.append(obs)
            state = new_state
            if progress is not None:
                progress(self.chunk * self.every)
        observables = {
            name: jnp.concatenate([first[name][None]] + [p[name] for p in pieces], axis=0)
            for name in first
        }
        return (
            observables,
            state,
            self._stats(
                state, jnp.where(unresolved, int(Result.neighbour_overflow), int(Result.successful))
            ),
        )
