"""Runs that blow up stop (exit 1, one line naming the step, time and quantity) instead of
being saved as data; sweeps flag them; the bounds live in `[checks]`.

The two repros of the issue: the Lennard-Jones example with a ten times longer step
(`--set time.dt=0.05`: the temperature reaches 1e33 within 40 steps and the image
counters overflow), and the Burgers example far past its stable step (`--set
time.dt=0.75 --set time.save=5`, 750 times its step: finite, but 1e36 by t = 3).
"""

import re
from pathlib import Path

import h5py
import numpy as np
import pytest

import sim
from sim import _stream
from sim._errors import SimulationError
from tests.helpers import cli

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"
LJ = EXPERIMENTS / "lj_fluid.toml"
BURGERS = EXPERIMENTS / "burgers_shock.toml"
LORENZ = EXPERIMENTS / "lorenz.toml"
BURGERS_BLOWS_UP = ["time.dt=0.75", "time.save=5"]  # frames at t = 0, 0.75, ..., 3
# The MD example at the size the other tests run it (108 particles, 200 steps).
LJ_SMALL = [
    "system.cells=3",
    "params.cutoff=2.5",
    "params.tail_correction=false",
    "time.steps=200",
    "time.save_every=20",
]


def sets(items):
    return [arg for item in items for arg in ("--set", item)]


# ----------------------------------------------------------------------------- the repros
# (the `sim` command in this process, `sim.cli.main`, which the executable calls; the
# executable itself is run by tests/sim/test_cli.py)


def test_lj_with_a_ten_times_longer_step_stops_with_one_line(tmp_cwd, capsys):
    # (forces from every pair: the example's neighbour list grew twice as the run diverged,
    # and its chunk was compiled again for each size, 3 s more)
    code, err = cli(
        ["run", str(LJ), "--set", "time.dt=0.05", "--set", "solver.neighbour_list=false"]
        + ["-o", "m6.h5"],
        capsys,
    )
    lines = err.strip().splitlines()
    assert code == 1, err
    assert len(lines) == 1, err
    line = lines[0]
    # Which check trips first at that frame depends on the last bits of a diverging run
    # (how the compiler contracts multiply-adds): the temperature bound, or non-finite
    # energies when they overflowed before it was read.
    assert re.search(
        r"lj_fluid\.toml: the run blew up at step 40 \(t = 2\): (temperature reached "
        r".*checks\.max_temperature_factor = 100|total_energy became non-finite)",
        line,
    ), line
    assert "lower time.dt" in line
    # It blew up in the first chunk: nothing was kept (no file, no partial, no checkpoint).
    assert sorted(p.name for p in tmp_cwd.iterdir()) == []


def test_burgers_far_past_its_stable_step_stops_with_one_line(tmp_cwd, capsys):
    # One frame per chunk, a checkpoint after every good frame (1 to 3); the field passes
    # 1000 times its start at frame 4 (t = 3).
    every_frame = ["--set", "output.chunk=1", "--set", "output.checkpoint_every=1"]
    code, err = cli(
        ["run", str(BURGERS), *sets(BURGERS_BLOWS_UP), *every_frame, "-o", "b.h5", "--quiet"],
        capsys,
    )  # (--quiet: no progress lines before it)
    lines = err.strip().splitlines()
    assert code == 1, err
    assert len(lines) == 1, err
    line = lines[0]
    assert (
        "burgers_shock.toml: the run blew up at step 4 (t = 3): the root mean square of u grew to"
        in line
    ), line
    assert "checks.max_growth = 1000" in line and "lower time.dt" in line
    out = tmp_cwd / "b.h5"
    assert not out.exists()
    checkpoint = _stream.checkpoint_path(out)
    if checkpoint.exists():  # the last good checkpoint is kept (where the streaming code keeps it)
        assert "the last good checkpoint (frame 3 of 4) is kept" in line
        assert _stream.partial_path(out).exists()
        with h5py.File(checkpoint) as f:
            assert int(f.attrs["frame"]) == 3
            assert "checks" in f.attrs["config"]
        # A loosened bound resumes it from there to the end.
        code, err = cli(
            [
                "run",
                str(BURGERS),
                *sets(BURGERS_BLOWS_UP),
                *every_frame,
                "-o",
                "b.h5",
                "--resume",
                "--quiet",
                "--set",
                "checks.max_growth=1e300",
            ],
            capsys,
        )
        assert code == 0, err
        assert np.max(np.abs(sim.read(out).observables["u"][-1])) > 1e30


def test_in_memory_runs_stop_the_same(tmp_path):
    with pytest.raises(
        SimulationError, match=r"blew up at step 4 \(t = 3\): the root mean square of u"
    ):
        sim.run(sim.load_config(BURGERS, BURGERS_BLOWS_UP))


def test_loosened_bound_lets_the_same_run_complete(tmp_cwd, capsys):
    code, err = cli(
        [
            "run",
            str(BURGERS),
            *sets(BURGERS_BLOWS_UP),
            "--set",
            "checks.max_growth=1e300",
            "-o",
            "b.h5",
            "--quiet",
        ],
        capsys,
    )
    assert code == 0, err
    u = sim.read("b.h5").observables["u"]
    peak = np.max(np.abs(u), axis=1)
    assert np.all(np.isfinite(u)) and peak[-1] > 1e30  # what used to be written as data
    with h5py.File("b.h5") as f:
        assert "max_growth = 1e+300" in f.attrs["config"]


NOSE_HOOVER = """
[model]
name = "lennard_jones"
[params]
cutoff = 2.5
[system]
lattice = "fcc"
cells = 3
density = 0.776
temperature = 0.85
[time]
dt = 0.025
steps = 400
save_every = 20
[solver]
method = "nose_hoover"
temperature = 0.85
neighbour_list = false
"""


def test_md_energy_drift_bound_stops_a_run_and_loosened_lets_it_complete(tmp_cwd, capsys):
    # Nose-Hoover at five times the usual step: its conserved energy drifts by up to
    # 2.8% over 400 steps without diverging, passing 1% at step 300 (1.11%; measured with
    # and without the compiler's optimisations, and with forces from a neighbour list or,
    # as here, from every pair: the drift of a chaotic run differs in its last digits, and
    # at six times the step this run diverges near step 340). (Every pair: the list grew
    # twice as the particles sped up, and each size compiled the run's chunk again.)
    Path("nh.toml").write_text(NOSE_HOOVER)
    with pytest.raises(SimulationError) as info:
        sim.run(sim.load_config("nh.toml", ["checks.energy_drift=0.01"]))
    message = str(info.value)
    assert (
        "the run blew up at step 300 (t = 7.5): conserved energy drifted by 1.11% of its initial "
        "scale" in message
    )
    assert "(limit checks.energy_drift = 1%)" in message
    result = sim.run(sim.load_config("nh.toml", ["checks.energy_drift=0.05"]))
    energy = result.observables["conserved_energy"]
    drift = np.max(np.abs(energy - energy[0])) / abs(energy[0])
    assert 0.02 < drift < 0.05


# ----------------------------------------------------------------------------- sweeps


def test_lj_sweep_flags_the_run_that_blows_up(tmp_cwd):
    # epsilon 25 at dt 0.02 is the LJ fluid at a step of 0.1 in its own time unit.
    config = sim.load_config(
        LJ,
        [
            *LJ_SMALL,
            "time.dt=0.02",
            'sweep.mode="zip"',
            'sweep.save="final"',
            "sweep.params.epsilon={ values = [1.0, 25.0] }",
        ],
    )
    result = sim.sweep(config, "lj_sweep.h5")
    np.testing.assert_array_equal(result.status, [1, 2])
    for name in ("temperature", "total_energy", "position"):
        values = result.observables[name]
        assert np.all(np.isfinite(values[0])) and np.all(np.isnan(values[1])), name
    assert 0.3 < result.observables["temperature"][0] < 2.0


def test_burgers_sweep_flags_the_run_that_blows_up(tmp_cwd):
    # At viscosity 2 the same step is stable (the field decays).
    config = sim.load_config(
        BURGERS,
        [
            *BURGERS_BLOWS_UP,
            'sweep.mode="zip"',
            'sweep.save="summary"',
            "sweep.params.viscosity={ values = [0.02, 2.0] }",
        ],
    )
    result = sim.sweep(config, "b_sweep.h5")
    np.testing.assert_array_equal(result.status, [2, 1])
    for name, stats in result.observables.items():
        for stat, values in stats.items():
            assert np.all(np.isnan(values[0])) and np.all(np.isfinite(values[1])), (name, stat)


# ----------------------------------------------------------------------------- no false alarms


# The sizes of tests/sim/test_pde_configs.py (where every PDE example runs, with these
# checks), run here to their end time; heat_dirichlet only runs there (its implicit
# solver compiles for seconds).
PDE_EXAMPLES = {
    "gray_scott.toml": ["grid.points=[32, 32]", "time.t1=400.0", "time.save=11"],
    "kuramoto_sivashinsky.toml": [],  # (64 points do not resolve it to t = 150)
    "kolmogorov_flow.toml": ["grid.points=[16, 16]"],
    "kdv_soliton.toml": ["grid.points=[128]", "time.t1=1.0", "time.save=11"],
    "burgers_shock.toml": ["grid.points=[64]"],
    "heat_diffusivity_fit.toml": [],
}


@pytest.mark.parametrize("name", sorted(PDE_EXAMPLES))
def test_pde_examples_stay_within_the_default_bounds(name):
    config = sim.load_config(EXPERIMENTS / name, PDE_EXAMPLES[name])
    result = sim.run(config)
    assert "[checks]" in result.config and "max_growth = 1000.0" in result.config


@pytest.mark.slow  # by default, README's `sim run experiments/lj_fluid.toml` runs it at this size
def test_md_example_stays_within_the_default_bounds():
    result = sim.run(sim.load_config(LJ, LJ_SMALL))
    assert "[checks]" in result.config and "max_temperature_factor = 100.0" in result.config
    assert "energy_drift" not in result.config  # Langevin: no conserved energy


# ----------------------------------------------------------------------------- config


@pytest.mark.parametrize(
    "config, item, message",
    [
        (
            BURGERS,
            "checks.energy_drift=0.2",
            "checks.energy_drift: is not a check of PDE runs (keys: max_growth, growth_floor)",
        ),
        (LJ, "checks.max_growth=10.0", "checks.max_growth: is not a check of"),
        (LJ, "checks.energy_drift=0.2", "checks.energy_drift: is not a check of Langevin MD runs"),
        (
            LORENZ,
            "checks.max_growth=10.0",
            "checks.max_growth: is not a check of ODE runs (they only check that values stay "
            "finite) (no keys)",
        ),
        (BURGERS, "checks.max_growth=0", "checks.max_growth: expected a number > 0"),
        (BURGERS, "checks.max_growth=inf", "checks.max_growth: expected a finite number"),
        (
            BURGERS,
            "checks.max_growht=10.0",
            "checks.max_growht: unknown key (expected one of: max_growth, growth_floor, "
            "energy_drift, max_temperature_factor)",
        ),
        (BURGERS, 'checks.max_growth="big"', "checks.max_growth: expected a number"),
    ],
)
def test_bad_checks_are_one_line_config_errors(config, item, message, tmp_cwd, capsys):
    code, err = cli(["run", str(config), "--set", item, "-o", "out.h5", "--quiet"], capsys)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and message in lines[0], err
    assert not Path("out.h5").exists()


# ----------------------------------------------------------------------------- image counters


def test_image_counters_never_wrap_around():
    from physics.md import lattice
    from sim.families.md._h5md import IMAGE_LIMIT, MdSink
    from sim.families.md._limits import MdLimits

    system = lattice("fcc", 2, 0.8)
    edges = np.asarray(system.space.box)
    limits = MdLimits(
        energy=None, energy_drift=np.inf, temperature_factor=100.0, target=1.0, dof=93, edges=edges
    )
    position = np.stack([np.asarray(system.position)] * 3)
    position[2, 5, 0] = 3e9 * edges[0]  # finite, but beyond int32 box counts
    rows = {
        "temperature": np.ones(3),
        "kinetic_energy": np.full(3, 45.0),
        "total_energy": np.full(3, -100.0),
        "position": position,
        "velocity": np.zeros_like(position),
    }
    ref = limits.reference({"kinetic_energy": 45.0, "total_energy": -100.0})
    frame, what = limits.first_failure(rows, ref)
    assert frame == 2 and "image counters" in what and str(IMAGE_LIMIT) in what
    sink = MdSink("lennard_jones", "", np.arange(3.0), np.arange(3) * 10, system, {})
    with h5py.File("unused.h5", "w", driver="core", backing_store=False) as f:
        sink.create(f, rows)
        with pytest.raises(SimulationError, match=r"blew up at step 20 \(t = 2\).*image counters"):
            sink.write(f, 0, rows)
