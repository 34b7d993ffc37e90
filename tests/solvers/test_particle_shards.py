"""Particle runs split by particle over several CPU devices (`NeighbourList.shards`,
`ParticleProblem`): the pieces in this process, whole runs on two devices in a process
of their own (XLA's device count is fixed when JAX starts)."""

import json
import os
import subprocess
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import solvers
from physics import md
from solvers import NeighbourList, shards_for
from tests.helpers import host_devices, script_command

ROOT = Path(__file__).resolve().parents[2]


def _liquid(n_cells: int = 4, seed: int = 0):
    """An fcc lattice at rho* 0.8442 with its sites shaken by up to 0.15 sigma."""
    system = md.lattice("fcc", n_cells, 0.8442)
    rng = np.random.default_rng(seed)
    shaken = np.asarray(system.position) + rng.uniform(-0.15, 0.15, size=system.position.shape)
    return system.at(jnp.asarray(shaken))


# (the chains by default: their pair forces take the rows as Lennard-Jones's do, through
# PairModel's pass, and their bonds cross the blocks; Lennard-Jones alone with -m slow)
@pytest.mark.parametrize(
    "name", [pytest.param("lennard_jones", marks=pytest.mark.slow), "bead_spring"]
)
def test_the_rows_of_two_blocks_give_the_forces_and_virial_of_the_whole(name):
    # What each device computes: the forces on its block of particles, and its share of
    # the virial. Put together they must be the whole system's, bonds included (the
    # bead-spring chains' bonds cross the blocks' boundary).
    if name == "bead_spring":
        model = md.BeadSpring()
        system = md.chains(
            jax.random.key(0), 9, 20, density=0.5
        )  # bonds 89-90 and 99-100 cross the halves
    else:
        model = md.LennardJones(cutoff=2.5)
        system = _liquid()
    params = model.default_params()
    nl = NeighbourList.allocate(system.position, system.space.box, model.cutoff, 0.3)
    half = system.n // 2
    blocks = [jnp.arange(half, dtype=jnp.int32), jnp.arange(half, system.n, dtype=jnp.int32)]

    @jax.jit  # (one program, not op by op)
    def evaluate(system):
        index = nl.build(system.position, system.space.box).index
        parts = [model.forces_and_virial(system, params, index[rows], rows=rows) for rows in blocks]
        alone = model.forces(system, params, index[blocks[1]], rows=blocks[1])
        return model.forces_and_virial(system, params, index), parts, alone

    (force, virial), parts, alone = evaluate(system)
    np.testing.assert_allclose(
        np.concatenate([np.asarray(f) for f, _ in parts]),
        np.asarray(force),
        rtol=0,
        atol=1e-12 * float(jnp.max(jnp.abs(force))),
    )
    np.testing.assert_allclose(
        np.asarray(parts[0][1] + parts[1][1]), np.asarray(virial), rtol=1e-12
    )
    # `forces` alone agrees with the forces of `forces_and_virial`
    np.testing.assert_array_equal(np.asarray(alone), np.asarray(parts[1][0]))


def test_a_list_of_some_rows_is_those_rows_of_the_whole_list():
    system = _liquid()
    nl = NeighbourList.allocate(system.position, system.space.box, 2.5, 0.3)

    @jax.jit
    def lists(position, box):
        candidates = nl._candidates(position, box)
        width = candidates[2][0].shape[1]
        ids = jnp.arange(100, 180, dtype=jnp.int32)
        # blocks small enough that the ids are taken several at a time (lax.map), the
        # last block padded
        return nl.build(position, box).index, nl._lists(box, candidates, ids, elements=32 * width)[
            0
        ]

    whole, some = lists(system.position, system.space.box)
    np.testing.assert_array_equal(np.asarray(some), np.asarray(whole[100:180]))


def test_how_many_devices_a_run_is_split_over(monkeypatch):
    lj, charged = md.LennardJones(cutoff=2.5), md.LennardJonesCoulomb(cutoff=2.5)
    monkeypatch.setattr(jax, "device_count", lambda *a: 2)
    assert shards_for(lj, 4000, None) == 2
    assert shards_for(lj, 2 * solvers.PARTICLES_PER_SHARD - 2, None) == 1  # blocks too small to pay
    assert shards_for(lj, 4001, None) == 1  # no equal blocks
    assert shards_for(lj, 500, 2) == 2  # asked for: any block size
    assert shards_for(lj, 4000, 8) == 2  # never more than there are devices
    assert shards_for(lj, 4000, 1) == 1
    assert shards_for(charged, 4000, None) == 1  # the k-space sum is not a sum over rows
    monkeypatch.setattr(jax, "device_count", lambda *a: 3)
    assert shards_for(lj, 4000, None) == 2  # the largest divisor of n within the devices
    monkeypatch.setattr(jax, "default_backend", lambda: "gpu")
    assert shards_for(lj, 4000, None) == 1


_TWO_DEVICES = r"""
import json, sys
import jax, jax.numpy as jnp, numpy as np
jax.config.update("jax_enable_x64", True)
import sim
from pathlib import Path
from physics import md
from solvers import LangevinBaoab, ParticleRun, ParticleSolver, StochasticCellRescaling, VelocityVerlet
from sim._unfinished import write_tree, read_leaves, tree_from_leaves
import h5py

assert jax.device_count() == 2
out = {}
model = md.LennardJones(cutoff=2.5)
params = model.default_params()
system = md.lattice("fcc", 5, 0.8442)  # 500 particles
v = 1.2 * jax.random.normal(jax.random.key(0), system.position.shape)
system = system.at(system.position, v - v.mean(0))

def rel(a, b):
    a, b = np.asarray(a, float), np.asarray(b, float)
    return float(np.max(np.abs(a - b)) / np.max(np.abs(b)))

# NVE, streamed frame by frame as `sim run` does; a list that overflows as the lattice
# melts (80 wide), grows and redoes frames on both sides, or ("roomy") one with room for
# every neighbour of the run (96). The split run's state after four frames is written to
# a checkpoint file (below: read back, it gives the bits of the frames after).
capacity = 96 if "roomy" in sys.argv[2:] else 80
path = Path(sys.argv[1]) / "state.h5"
runs = {}
for shards in (1, 2):
    solver = ParticleSolver(VelocityVerlet(dt=0.005), capacity=capacity, shards=shards)
    run = ParticleRun(model, params, system, solver, times=np.linspace(0.0, 1.0, 11), every=20)
    state = run.start()
    state, a = run.advance(state, 0, 4)
    if shards == 2:
        meta = run.meta()
        with h5py.File(path, "w") as f:
            write_tree(f.create_group("state"), state)
    state, b = run.advance(state, 4, 6)
    rows = {k: np.concatenate([a[k], b[k]]) for k in a}
    runs[shards] = (run, state, rows, b)
(r1, s1, o1, _), (r2, s2, o2, rows_on) = runs[1], runs[2]
out["nve"] = {
    "devices": [int(r1.stats(s1)["devices"]), int(r2.stats(s2)["devices"])],
    "capacity": [r1.problem.neighbour_list.capacity, r2.problem.neighbour_list.capacity],
    "builds": [int(s1.aux.builds), int(s2.aux.builds)],
    "index_equal": bool(np.array_equal(np.asarray(s1.aux.index), np.asarray(s2.aux.index))),
    "index_sharded": str(s2.aux.index.sharding.spec),
    "position": rel(o2["position"], o1["position"]),
    "total_energy": rel(o2["total_energy"], o1["total_energy"]),
    "pressure": rel(o2["pressure"], o1["pressure"]),
    "drift": rel(o2["total_energy"][-1], o2["total_energy"][0]),
}

# the split run's state through the checkpoint file and back, in a run made anew: the
# frames after it are the same bits as those of the run that went on
again = ParticleRun(model, params, system, ParticleSolver(VelocityVerlet(dt=0.005), capacity=capacity, shards=2), times=np.linspace(0.0, 1.0, 11), every=20)
template = again.restore(meta)
with h5py.File(path) as f:
    restored = tree_from_leaves(read_leaves(f["state"]), template, path, "state")
again.first = r2.first
_, rows_back = again.advance(restored, 4, 6)
out["resume_same_bits"] = all(np.array_equal(rows_on[k], rows_back[k]) for k in rows_on)

# NPT (stochastic cell rescaling, Langevin), the whole run at once as `sim.simulate`
# does: the box follows the virial, which the devices sum
npt = {}
for shards in (1, 2) if "npt" in sys.argv[2:] else ():
    solver = ParticleSolver(StochasticCellRescaling(LangevinBaoab(0.004, 1.0, 5.0), pressure=2.0, tau=0.2, compressibility=0.05), chunk_steps=100, shards=shards)
    run = ParticleRun(model, params, system, solver, times=np.linspace(0.0, 0.8, 5), every=50, key=jax.random.key(3))
    obs, state, stats = run.run()
    npt[shards] = (obs, stats)
out["npt"] = npt and {
    "devices": [int(npt[1][1]["devices"]), int(npt[2][1]["devices"])],
    "volume": rel(npt[2][0]["volume"], npt[1][0]["volume"]),
    "volume_change": rel(npt[1][0]["volume"][-1], npt[1][0]["volume"][0]),
    "pressure": rel(npt[2][0]["pressure"], npt[1][0]["pressure"]),
    "position": rel(npt[2][0]["position"], npt[1][0]["position"]),
}
print("RESULT " + json.dumps(out))
"""


def two_device_run(tmp_path, *legs: str) -> dict:
    env = {**os.environ, "XLA_FLAGS": host_devices(2)}
    proc = subprocess.run(
        script_command(_TWO_DEVICES, str(tmp_path), *legs),
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(
        next(line for line in proc.stdout.splitlines() if line.startswith("RESULT "))[
            len("RESULT ") :
        ]
    )


def _same_split_runs(out: dict, capacity: int) -> None:
    # Both sides in one process with two CPU devices: the same run on one device and
    # split over two. Each row's forces are summed in the same order on both; with 500
    # particles every side's rows fit in one block (`by_row_blocks`), so the programs
    # differ only in which rows they hold and the runs are the same bits. (With more
    # particles the blocks differ in shape and the last bits may too.) The checkpointed
    # state of the split run gives back the same bits.
    nve = out["nve"]
    assert nve["devices"] == [1, 2], nve
    assert nve["capacity"][0] == nve["capacity"][1] >= capacity, nve
    assert nve["builds"][0] == nve["builds"][1] > 1, nve
    assert nve["index_equal"] and nve["index_sharded"] == "P('particles',)", nve
    assert nve["position"] == nve["total_energy"] == nve["pressure"] == 0.0, nve
    assert nve["drift"] < 1e-2, (
        nve
    )  # (a real run: energy kept, up to the jumps of the unshifted cutoff)
    assert out["resume_same_bits"]


def test_a_run_split_over_two_devices_is_the_run_on_one(tmp_path):
    # A list with room for every neighbour of the run (96): it never grows, and each side
    # compiles its start and its frames once. (Grown mid-run: with -m slow below.)
    out = two_device_run(tmp_path, "roomy")
    _same_split_runs(out, 96)
    assert out["nve"]["capacity"] == [96, 96], out["nve"]


@pytest.mark.slow  # (each side compiles its frames a second time, for the grown list)
def test_a_run_split_over_two_devices_grows_its_list_as_the_run_on_one(tmp_path):
    # The list grows the same way on both (a capacity of 80 holds the lattice's 78
    # neighbours and overflows as it melts: frames are redone on a grown list).
    out = two_device_run(tmp_path)
    _same_split_runs(out, 80)
    assert out["nve"]["capacity"][0] > 80, out["nve"]  # grown alike, mid-run


@pytest.mark.slow  # (the barostat's programs, compiled for one device and for two)
def test_a_barostat_run_split_over_two_devices_is_the_run_on_one(tmp_path):
    # Under a barostat the box, which follows the virial the devices sum, moves alike.
    # Not to the bit: the positions part in their last bits (the rebuild check measures
    # per axis, which the two programs compile otherwise), the box follows them, and 200
    # steps of a melting liquid amplify the difference (measured: volume 5.8e-16 and
    # pressure 5.0e-15 apart, relative).
    npt = two_device_run(tmp_path, "npt")["npt"]
    assert npt["devices"] == [1, 2], npt
    assert npt["volume_change"] > 1e-2, npt  # the box moved
    assert npt["volume"] < 1e-13 and npt["pressure"] < 1e-12, npt
    assert npt["position"] < 1e-12, npt
