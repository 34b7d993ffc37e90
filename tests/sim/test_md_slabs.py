"""`[solver] slabs = N` of an MD config: the run split over devices by slabs of the box
(`solvers.SlabRun`), written, checkpointed and resumed as every MD run is; on 4 devices
the same file as on 1 (a process of 4 CPU devices), and from 1 slab the values of the
replicated run. Configs it cannot run are refused in one line naming the key."""

import json

import h5py
import numpy as np
import pytest

import sim
from tests.helpers import SIM_COMMANDS, Stop, cli, commands_said, interrupt_after, on_host_devices

CONFIG = """
[model]
name = "lennard_jones"
[params]
cutoff = 2.5
[system]
lattice = "fcc"
cells = 8
density = 0.8442
temperature = 1.44
seed = 0
[time]
dt = 0.005
steps = 120
save_every = 10
[solver]
method = "verlet"
{solver}
[output]
chunk = 3
checkpoint_every = 1
"""


def particles(path) -> dict[str, np.ndarray]:
    with h5py.File(path) as f:
        out = {k: f[f"particles/all/{k}/value"][()] for k in ("position", "image", "velocity")}
        for name, group in f["observables"].items():
            if isinstance(group, h5py.Group) and "value" in group:
                out[name] = group["value"][()]
    return out


def resumes_to(cfg, whole: dict) -> None:
    """`cfg` stopped after its second checkpoint and resumed: the file `whole` holds."""
    with pytest.MonkeyPatch.context() as patch:
        written = interrupt_after(patch, 2)
        with pytest.raises(Stop):
            sim.run(cfg, output="out.h5")
    done = sim.run(cfg, output="out.h5", resume=True)
    assert done.resumed_from == written[-1] > 0
    resumed = particles("out.h5")
    for name, values in whole.items():
        assert np.array_equal(resumed[name], values), name


def test_a_run_of_one_slab_is_the_replicated_run_and_resumes_to_its_file(tmp_cwd):
    (tmp_cwd / "slabs.toml").write_text(CONFIG.format(solver="slabs = 1"))
    (tmp_cwd / "replicated.toml").write_text(CONFIG.format(solver=""))
    sim.run(sim.load_config("replicated.toml"), output="replicated.h5")
    cfg = sim.load_config("slabs.toml")
    sim.run(cfg, output="whole.h5")
    whole, replicated = particles("whole.h5"), particles("replicated.h5")
    assert np.array_equal(whole["image"], replicated["image"])
    for name in ("position", "velocity", "total_energy", "pressure", "temperature"):
        np.testing.assert_allclose(whole[name], replicated[name], rtol=1e-11, atol=1e-11)
    resumes_to(cfg, whole)


@pytest.mark.parametrize(
    "solver, said",
    [
        ("slabs = 0", "solver.slabs: expected a whole number of devices >= 1, got 0"),
        ("slabs = 1.5", "solver.slabs: expected a whole number of devices >= 1, got 1.5"),
        ("slabs = 64", "solver.slabs: 64 devices asked for, 1 there"),
        (
            'slabs = 1\nmethod = "langevin"\ntemperature = 1.0\nbarostat = { pressure = 1.0 }',
            "solver.slabs: a run split by slabs keeps its box (no barostat); leave one out",
        ),
        ("slabs = 1\nneighbour_list = false", "solver.slabs: a run split by slabs needs"),
    ],
)
def test_slabs_it_cannot_run_are_refused_in_one_line(tmp_cwd, capsys, solver, said):
    text = CONFIG.format(solver=solver)
    if "method" in solver:
        text = text.replace('method = "verlet"\n', "", 1)
    (tmp_cwd / "c.toml").write_text(text)
    code, err = cli(["run", "c.toml", "-o", "out.h5"], capsys)
    assert code == 2 and said in err and len(err.strip().splitlines()) == 1, err
    assert not list(tmp_cwd.glob("*.h5")) and not list(tmp_cwd.glob(".*"))


def test_on_four_devices_the_file_of_one_and_a_box_too_narrow_refused(tmp_cwd):
    for n in (1, 4):
        (tmp_cwd / f"s{n}.toml").write_text(CONFIG.format(solver=f"slabs = {n}"))
    narrow = CONFIG.format(solver="slabs = 4").replace("cells = 8", "cells = 6")
    (tmp_cwd / "narrow.toml").write_text(narrow)
    runs = [["run", f"s{n}.toml", "-o", f"s{n}.h5", "--quiet"] for n in (1, 4)]
    bad = [["run", "narrow.toml", "-o", "narrow.h5", "--quiet"]]
    done = on_host_devices(SIM_COMMANDS, [json.dumps(runs + bad)], 4)
    said = commands_said(done.stderr)
    one, four = particles("s1.h5"), particles("s4.h5")
    for name, values in one.items():
        if name in ("position", "image", "velocity"):
            assert np.array_equal(four[name], values), name
        else:  # sums over the devices: the last bits
            np.testing.assert_allclose(four[name], values, rtol=1e-12, atol=1e-12)
    refusal = said[-1].strip().splitlines()[1:]  # (after the command's marker line)
    assert len(refusal) == 1 and "solver.slabs" in refusal[0], refusal
    assert "at most 3 fit" in refusal[0] and not (tmp_cwd / "narrow.h5").exists()


SALT = """
[model]
name = "lj_coulomb"
electrostatics = "{method}"
{mesh}
[params]
cutoff = 2.0
[system]
lattice = "rocksalt"
cells = 4
density = 0.6
temperature = 1.0
seed = 0
[time]
dt = 0.002
steps = 40
save_every = 10
[solver]
method = "verlet"
{solver}
"""


def test_charges_by_pme_split_by_slabs_are_the_replicated_run_and_ewald_is_refused(tmp_cwd, capsys):
    mesh = "pme_mesh = [24, 16, 16]"
    (tmp_cwd / "slabs.toml").write_text(SALT.format(method="pme", mesh=mesh, solver="slabs = 1"))
    (tmp_cwd / "whole.toml").write_text(SALT.format(method="pme", mesh=mesh, solver=""))
    for name in ("slabs", "whole"):
        code, err = cli(["run", f"{name}.toml", "-o", f"{name}.h5", "--quiet"], capsys)
        assert code == 0, err
    split, whole = particles("slabs.h5"), particles("whole.h5")
    for name in ("position", "velocity", "potential_energy", "pressure", "total_energy"):
        np.testing.assert_allclose(split[name], whole[name], rtol=1e-11, atol=1e-11)
    (tmp_cwd / "ewald.toml").write_text(SALT.format(method="ewald", mesh="", solver="slabs = 1"))
    code, err = cli(["run", "ewald.toml", "-o", "ewald.h5"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "solver.slabs: lj_coulomb with electrostatics = 'ewald' cannot be split" in err
    assert not (tmp_cwd / "ewald.h5").exists()


THERMOSTATS = """
[model]
name = "wca"
[params]
cutoff = 1.2
[system]
lattice = "fcc"
cells = 4
density = 0.8442
temperature = 0.5
seed = 0
[time]
dt = 0.005
steps = 60
save_every = 10
[solver]
slabs = 1
{solver}
[output]
chunk = 2
checkpoint_every = 1
"""


@pytest.mark.parametrize(
    "solver",
    [
        'method = "langevin"\ntemperature = 1.5\nfriction = 2.0',
        'method = "nose_hoover"\ntemperature = 1.5\ntau = 0.25',
    ],
)
def test_a_thermostat_split_by_slabs_resumes_to_the_bytes_of_its_whole_run(tmp_cwd, solver):
    (tmp_cwd / "t.toml").write_text(THERMOSTATS.format(solver=solver))
    cfg = sim.load_config("t.toml")
    sim.run(cfg, output="whole.h5")
    whole = particles("whole.h5")
    if "nose_hoover" in solver:
        conserved = whole["conserved_energy"]
        assert np.max(np.abs(conserved - conserved[0])) < 1e-3 * abs(conserved[0])
    resumes_to(cfg, whole)
