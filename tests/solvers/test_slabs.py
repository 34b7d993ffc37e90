"""Particles split over devices by slabs of the box (`solvers.SlabRun`): each device owns
the particles of its slab and holds ghosts of its neighbours' near its faces. Judged
against the replicated run of one device (`solvers.ParticleRun`, a separate neighbour
list and force path), between device counts (the same bits), against what each device
is meant to hold, and against the compiled program's collectives.
"""

import dataclasses
import json

import jax
import numpy as np
import pytest

from physics import md
from solvers import ParticleRun, ParticleSolver, SlabRun, VelocityVerlet, slab_devices
from tests.helpers import on_host_devices


def _melting(cells: int):
    """An fcc lattice at the triple-point density with hot random velocities (it melts)."""
    system = md.lattice("fcc", cells, 0.8442)
    v = 1.2 * jax.random.normal(jax.random.key(0), system.position.shape)
    return system.at(system.position, v - v.mean(0))


MODEL = md.LennardJones(cutoff=2.5)


def test_slabs_narrower_than_the_list_are_refused_in_one_line():
    assert slab_devices(13.44, 2.8, 4) is None  # 3.36 wide: one radius suffices
    assert slab_devices(13.44, 2.8, 2) is None  # 6.72: two radii (both faces meet one device)
    said = slab_devices(10.0, 2.8, 4)
    assert said == (
        "a box 10 long split into 4 slabs gives slabs 2.5 wide, narrower than the list's "
        "radius (2.8: cutoff and skin); at most 3 fit"
    )
    assert "twice the list's radius" in slab_devices(10.0, 2.8, 2)
    system = _melting(5)  # a box 8.4 long
    with pytest.raises(ValueError, match="at most 1 fit"):
        _slab_run(system, devices=2)
    with pytest.raises(ValueError, match="periodic box"):
        free = md.System(system.position, system.velocity, system.mass, system.species, md.Free(3))
        _slab_run(free)


def _slab_run(system, saves: int = 6, every: int = 10, **options) -> SlabRun:
    times = np.linspace(0.0, saves * every * 0.005, saves + 1)
    return SlabRun(
        MODEL, MODEL.default_params(), system, 0.005, times=times, every=every, **options
    )


def test_one_slab_is_the_replicated_run_and_resumes_bit_for_bit():
    system = _melting(5)  # 500 particles
    run = _slab_run(system, chunk=2)
    obs, _, stats = run.run()
    assert run.slabs.capacity == 500 and stats["neighbour_builds"] > 3
    reference = ParticleRun(
        MODEL,
        MODEL.default_params(),
        system,
        ParticleSolver(VelocityVerlet(dt=0.005)),
        times=np.linspace(0.0, 0.3, 7),
        every=10,
    )
    expected, _, _ = reference.run()
    # (unwrapped positions, as the replicated run keeps them)
    apart = np.asarray(obs["position"]) - np.asarray(expected["position"])
    assert np.max(np.abs(apart)) < 1e-12, np.max(np.abs(apart))
    for name in ("potential_energy", "kinetic_energy", "pressure", "temperature", "density"):
        np.testing.assert_allclose(obs[name], np.asarray(expected[name]), rtol=1e-12)
    # where chunks fall changes nothing (each starts from the list of the last build)
    other, _, _ = _slab_run(system, chunk=3).run()
    for name, values in obs.items():
        assert np.array_equal(other[name], values), name
    # stopped after four frames, its state through JSON (as a checkpoint keeps numbers)
    # and resumed in a run made anew: the same bits of the last two
    first = _slab_run(system, chunk=2)
    state = first.start()
    state, _ = first.advance(state, 0, 2)
    state, _ = first.advance(state, 2, 2)
    kept = json.loads(json.dumps({k: np.asarray(v).tolist() for k, v in vars(state).items()}))
    again = _slab_run(system, chunk=2)
    template = again.restore(json.loads(json.dumps(first.meta())))
    restored = type(template)(
        **{
            k: None if v is None else np.asarray(v, np.asarray(getattr(template, k)).dtype)
            for k, v in kept.items()
        }
    )
    _, rows = again.advance(restored, 4, 2)
    for name, values in rows.items():
        assert np.array_equal(values, np.asarray(obs[name])[5:]), name


def test_a_run_without_room_grows_it_and_gives_the_bits_of_one_with_room():
    system = _melting(5)
    roomy = _slab_run(system, saves=3)
    obs, _, _ = roomy.run()
    tight = _slab_run(system, saves=3)
    tight.slabs = dataclasses.replace(tight.slabs, ghosts=40, migrants=2, cell_capacity=12)
    obs_tight, _, _ = tight.run()
    assert tight.grown >= 3, tight.slabs
    assert tight.slabs.ghosts > 40 and tight.slabs.cell_capacity > 12
    assert tight.slabs.neighbours == roomy.slabs.neighbours  # (only what overflowed grows)
    for name, values in obs.items():
        assert np.array_equal(obs_tight[name], values), name


SPLIT = r"""
import json, re, sys
import jax, jax.numpy as jnp, numpy as np
jax.config.update("jax_enable_x64", True)
from physics import md
from solvers import SlabRun

cells, saves, every = map(int, sys.argv[1:4])
model = md.LennardJones(cutoff=2.5)
system = md.lattice("fcc", cells, 0.8442)
v = 1.2 * jax.random.normal(jax.random.key(0), system.position.shape)
system = system.at(system.position, v - v.mean(0))
out = {}
times = np.linspace(0.0, saves * every * 0.005, saves + 1)
for devices in (1, 2, 4):
    run = SlabRun(
        model, model.default_params(), system, 0.005, times=times, every=every, devices=devices
    )
    obs, state, stats = run.run()
    positions = np.asarray(obs.pop("position"))
    obs.pop("velocity")
    np.save(sys.argv[4] + f"/positions_{devices}.npy", positions)
    text = run._program().lower(*run._last_arguments).compile().as_text()
    reduced = re.findall(r"= \w+\[([\d,]*)\]\{?[^}=]*\}? all-reduce", text)
    out[devices] = {
        "obs": {k: np.asarray(v).tolist() for k, v in obs.items()},
        "capacity": run.slabs.capacity,
        "ghosts": run.slabs.ghosts,
        "own": [int(c) for c in run.own_counts()],
        "bytes": run.memory_per_device(),
        "permutes": text.count("collective-permute"),
        "gathers": text.count("all-gather"),
        "reduced": reduced,
        "builds": int(stats["neighbour_builds"]),
    }
print("RESULT " + json.dumps(out))
"""


def split_runs(tmp_path, cells: int, saves: int, every: int) -> dict:
    args = [str(cells), str(saves), str(every), str(tmp_path)]
    done = on_host_devices(SPLIT, args, 4, timeout=1500)
    line = next(x for x in done.stdout.splitlines() if x.startswith("RESULT "))
    out = {int(k): v for k, v in json.loads(line[len("RESULT ") :]).items()}
    for d in out:
        out[d]["positions"] = np.load(tmp_path / f"positions_{d}.npy")
    return out


def check_split(out: dict, n: int) -> None:
    one = out[1]
    for devices in (2, 4):
        several = out[devices]
        # the same bits of every particle's position at every save
        assert np.array_equal(several["positions"], one["positions"]), devices
        for name, values in one["obs"].items():  # sums over devices: the last bits
            np.testing.assert_allclose(several["obs"][name], values, rtol=1e-12, atol=1e-12)
        assert several["builds"] == one["builds"]
        # each device owns about n / devices particles (room for a few more) and its ghosts
        assert sum(several["own"]) == n
        assert max(several["own"]) <= several["capacity"] <= 1.3 * n / devices + 8
        assert several["bytes"] < one["bytes"]
        # a step exchanges ghosts between neighbours and gathers nothing; what is summed
        # over devices are scalars and the flags of the rooms
        assert several["permutes"] > 0 and several["gathers"] == 0, several
        assert all(
            not s or int(np.prod([int(x) for x in s.split(",")])) <= 8 for s in several["reduced"]
        )
    drift = abs(one["obs"]["total_energy"][-1] / one["obs"]["total_energy"][0] - 1)
    assert drift < 1e-2  # (energy kept, up to the jumps of the unshifted cutoff)


def test_a_run_split_over_two_and_four_devices_is_the_run_on_one(tmp_path):
    check_split(split_runs(tmp_path, 8, 4, 25), 2048)  # 2,048 particles, 100 steps


@pytest.mark.slow  # (32,000 particles, 1,000 steps, three times)
def test_32000_particles_on_one_two_and_four_devices_take_the_same_1000_steps(tmp_path):
    out = split_runs(tmp_path, 20, 10, 100)
    check_split(out, 32000)
    for devices, run in out.items():
        print(
            f"{devices} devices: {run['bytes'] / 1e6:.1f} MB a device, room for {run['capacity']}"
        )


def test_a_float32_run_stays_float32_and_near_the_float64_one():
    system = _melting(5)
    single = system.astype(np.float32)
    model32 = md.LennardJones(cutoff=2.5)
    times = np.linspace(0.0, 0.1, 3)
    params = {k: np.float32(v) for k, v in model32.default_params().items()}
    obs32, state, _ = SlabRun(model32, params, single, 0.005, times=times, every=10).run()
    obs64, _, _ = _slab_run(system, saves=2).run()
    assert np.asarray(obs32["position"]).dtype == np.float32 and state.position.dtype == np.float32
    assert np.asarray(obs32["total_energy"]).dtype == np.float32
    np.testing.assert_allclose(obs32["position"], obs64["position"], atol=1e-4)


def test_a_run_that_blows_up_ends_with_numbers_that_say_so_and_grows_nothing_for_it():
    # (a step 100 times too long: the lattice explodes within a few steps)
    system = _melting(5)
    times = np.linspace(0.0, 2.0, 3)
    run = SlabRun(MODEL, MODEL.default_params(), system, 0.5, times=times, every=2)
    obs, _, _ = run.run()
    energy = np.asarray(obs["total_energy"])
    assert not np.all(np.isfinite(energy[1:])) or np.min(np.abs(energy[1:])) > 1e10 * abs(
        energy[0]
    ), energy
    assert run.grown <= 3 and run.slabs.cell_capacity < 500, run.slabs  # (not grown for ever)
