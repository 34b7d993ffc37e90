"""`sim run` for MD configs: H5MD 1.1 output that MDAnalysis reads, one-line errors."""

from pathlib import Path

import h5py
import numpy as np
import pytest

import sim
from sim.cli import main

ROOT = Path(__file__).resolve().parents[2]

SMALL = """
[model]
name = "lennard_jones"
[params]
cutoff = 2.5
shift = true
[system]
lattice = "fcc"
cells = 3
density = 0.8
temperature = 1.0
seed = 3
[time]
dt = 0.005
steps = 200
save_every = 20
[solver]
method = "{method}"
{extra}
"""


def write(tmp_path, method="verlet", extra="", text=None):
    path = tmp_path / "md.toml"
    path.write_text(text if text is not None else SMALL.format(method=method, extra=extra))
    return path


def test_run_writes_h5md_that_mdanalysis_reads(tmp_path):
    import MDAnalysis as mda
    from MDAnalysis.coordinates.H5MD import H5MDReader

    result = sim.run(sim.load_config(write(tmp_path)))
    out = result.save(tmp_path / "md.h5")
    from tests.sim.test_plot import assert_record_is_the_file

    assert_record_is_the_file(result, out)
    with h5py.File(out) as f:
        assert list(f["h5md"].attrs["version"]) == [1, 1]
        assert f.attrs["format"] == "simjax.run"
        assert f["particles/all/position/value"].shape == (11, 108, 3)
        assert list(f["particles/all/box"].attrs["boundary"]) == [b"periodic"] * 3
        steps = f["observables/total_energy/step"][()]
        energy = f["observables/total_energy/value"][()]
    np.testing.assert_array_equal(steps, np.arange(0, 201, 20))
    assert np.max(np.abs(energy - energy[0])) / abs(energy[0]) < 1e-3
    reader = H5MDReader(str(out), convert_units=False)
    assert reader.n_frames == 11 and reader.n_atoms == 108
    u = mda.Universe.empty(108, trajectory=True)
    u.load_new(str(out), format="H5MD", convert_units=False)
    u.trajectory[5]
    wrapped = result.observables["position"][5] % result.system.space.box
    np.testing.assert_allclose(u.atoms.positions, wrapped, atol=1e-4)
    edge = float(result.system.space.box[0])
    np.testing.assert_allclose(u.dimensions, [edge, edge, edge, 90, 90, 90], rtol=1e-6)
    np.testing.assert_allclose(u.trajectory.ts.data["total_energy"], energy[5])
    assert u.trajectory.ts.time == pytest.approx(0.5)
    # the same run as an xarray Dataset
    ds = result.to_xarray()
    assert ds["position"].dims == ("time", "particle", "spatial") and ds["total_energy"].dims == (
        "time",
    )
    np.testing.assert_array_equal(
        ds["position"].sel(particle=7, spatial="y"), result.observables["position"][:, 7, 1]
    )
    np.testing.assert_array_equal(ds["total_energy"].sel(time=0.5), energy[5])
    np.testing.assert_array_equal(ds["step"], steps)
    np.testing.assert_array_equal(ds["species"], np.asarray(result.system.species))
    assert ds.attrs["model"] == "lennard_jones"


def test_run_starts_from_an_h5md_file(tmp_path):
    first = sim.run(sim.load_config(write(tmp_path))).save(tmp_path / "first.h5")
    text = SMALL.format(method="verlet", extra="").replace(
        'lattice = "fcc"\ncells = 3\ndensity = 0.8\ntemperature = 1.0\n', 'file = "first.h5"\n'
    )
    second = sim.run(sim.load_config(write(tmp_path, text=text)))
    with h5py.File(first) as f:
        last = f["particles/all/position/value"][-1]
    np.testing.assert_allclose(
        second.observables["position"][0] % second.system.space.box, last, atol=1e-9
    )


def test_a_temperature_for_one_particle_is_refused_for_what_it_is(tmp_path, capsys):
    # Maxwell-Boltzmann velocities without total momentum leave one particle at rest:
    # the line said the temperature gave velocities beyond the float range.
    with h5py.File(tmp_path / "one.h5", "w") as f:
        f["particles/all/position/value"] = np.full((1, 1, 3), 1.0)
        f["particles/all/box/edges"] = np.full(3, 6.0)
        f["particles/all/box"].attrs["boundary"] = np.array([b"periodic"] * 3)
    text = SMALL.format(method="verlet", extra="").replace(
        'lattice = "fcc"\ncells = 3\ndensity = 0.8\n', 'file = "one.h5"\n'
    )
    config = write(tmp_path, text=text)
    with pytest.raises(SystemExit) as exit_info:
        main(["run", str(config), "-o", str(tmp_path / "out.h5"), "--quiet"])
    stderr = capsys.readouterr().err
    assert exit_info.value.code == 2 and len(stderr.strip().splitlines()) == 1, stderr
    assert (
        "system.temperature" in stderr and "one particle" in stderr and "float range" not in stderr
    ), stderr
    assert not (tmp_path / "out.h5").exists()


def test_cli_reports_bad_input_in_the_example_config(tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(
            [
                "run",
                str(ROOT / "experiments/lj_fluid.toml"),
                "-o",
                str(tmp_path / "bad.h5"),
                "--set",
                "solver.temperature=-1",
            ]
        )
    assert exit_info.value.code == 2
    stderr = capsys.readouterr().err
    assert len(stderr.strip().splitlines()) == 1
    assert "solver.temperature" in stderr and "positive" in stderr
    assert not (tmp_path / "bad.h5").exists()


@pytest.mark.slow
def test_cli_runs_the_example_config(tmp_path, capsys):
    # In this process, through the command's own entry point. By default tests/test_readme.py
    # runs this example at a size like this one (`sim run experiments/lj_fluid.toml`,
    # interrupted, resumed and drawn).
    out = tmp_path / "lj.h5"
    with pytest.raises(SystemExit) as exit_info:
        main(
            [
                "run",
                str(ROOT / "experiments/lj_fluid.toml"),
                "-o",
                str(out),
                "--quiet",
                "--set",
                "time.steps=100",
                "--set",
                "time.save_every=20",
                "--set",
                "system.cells=3",
                "--set",
                "params.cutoff=2.5",
                "--set",
                "params.tail_correction=false",
            ]
        )
        raise SystemExit(0)
    assert exit_info.value.code == 0, capsys.readouterr().err
    with h5py.File(out) as f:
        assert f["particles/all/position/value"].shape == (6, 108, 3)


@pytest.mark.parametrize(
    "edit, key, words",
    [
        (('lattice = "fcc"', 'lattice = "fcx"'), "system.lattice", "Perhaps you meant 'fcc'"),
        (("cells = 3", "cells = 1"), "system", "twice the cutoff"),
        (("temperature = 1.0", "temperature = -2.0"), "system.temperature", "non-negative"),
        (
            ('name = "lennard_jones"', 'name = "lenard_jones"'),
            "model.name",
            "Perhaps you meant 'lennard_jones'",
        ),
        (("save_every = 20", "save_every = 30"), "time.save_every", "must divide"),
        (
            ('method = "verlet"', 'method = "verlett"'),
            "solver.method",
            "Perhaps you meant 'verlet'",
        ),
        (("seed = 3", "seed = 3\nspecies = 2"), "system.species", "unknown key"),
        (("shift = true", "shift = 1"), "params.shift", "true or false"),
        (("density = 0.8", 'density = 0.8\nfile = "x.h5"'), "system.lattice", "either file"),
    ],
)
def test_bad_md_configs_name_the_key(tmp_path, edit, key, words):
    text = SMALL.format(method="verlet", extra="").replace(*edit)
    with pytest.raises(sim.ConfigError) as info:
        sim.run(sim.load_config(write(tmp_path, text=text)))
    assert info.value.key == key, str(info.value)
    assert words in str(info.value)


def test_overlapping_atoms_in_a_start_file_are_refused(tmp_path):
    first = sim.run(sim.load_config(write(tmp_path))).save(tmp_path / "first.h5")
    with h5py.File(first, "a") as f:
        value = f["particles/all/position/value"]
        frame = value[-1]
        frame[7] = frame[3] + 0.01
        value[-1] = frame
    text = SMALL.format(method="verlet", extra="").replace(
        'lattice = "fcc"\ncells = 3\ndensity = 0.8\ntemperature = 1.0\n', 'file = "first.h5"\n'
    )
    with pytest.raises(sim.ConfigError, match="particles 3 and 7 overlap"):
        sim.run(sim.load_config(write(tmp_path, text=text)))


def test_thermostat_settings_are_checked(tmp_path):
    with pytest.raises(sim.ConfigError, match="solver.temperature: required key is missing"):
        sim.run(sim.load_config(write(tmp_path, "langevin")))
    with pytest.raises(sim.ConfigError, match="solver.tau: is a Nose-Hoover setting"):
        sim.run(sim.load_config(write(tmp_path, "langevin", "temperature = 1.0\ntau = 0.5")))
    result = sim.run(
        sim.load_config(write(tmp_path, "nose_hoover", "temperature = 1.0\ntau = 0.5"))
    )
    assert "conserved_energy" in result.observables


@pytest.mark.slow  # two `sim run` processes of 2,048 particles
def test_sim_run_splits_a_large_run_over_the_cores_it_may_use(tmp_path):
    # The command starts JAX with one CPU device per core it may run on and splits the
    # particles between them in blocks of at least 1,000 (`solvers.PARTICLES_PER_SHARD`):
    # it says so, records it, and the run is the one-device run's up to the last bits
    # (the blocks' programs differ in shape).
    import os
    import subprocess
    import sys

    config = write(
        tmp_path,
        text=SMALL.format(method="verlet", extra="")
        .replace("cells = 3", "cells = 8")
        .replace("steps = 200", "steps = 100"),
    )
    sim_command = Path(sys.executable).parent / "sim"
    from tests.helpers import host_devices

    cores = len(os.sched_getaffinity(0))
    assert "xla_force_host_platform_device_count" not in os.environ.get(
        "XLA_FLAGS", ""
    )  # (the command picks the count)
    split = subprocess.run(
        [str(sim_command), "run", str(config), "-o", "split.h5"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    one = subprocess.run(
        [str(sim_command), "run", str(config), "-o", "one.h5"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "XLA_FLAGS": host_devices(1)},
    )
    assert split.returncode == 0 and one.returncode == 0, split.stderr + one.stderr
    expected = 2 if cores >= 2 else 1
    with h5py.File(tmp_path / "split.h5") as a, h5py.File(tmp_path / "one.h5") as b:
        assert (
            int(a["stats"].attrs["devices"]) == expected and int(b["stats"].attrs["devices"]) == 1
        )
        x, y = a["particles/all/position/value"][()], b["particles/all/position/value"][()]
        np.testing.assert_allclose(x, y, rtol=0, atol=1e-9)
    assert ("on 2 CPU devices, the particles split between them" in split.stderr) == (
        expected == 2
    ), split.stderr
