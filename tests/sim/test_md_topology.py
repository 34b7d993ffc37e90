"""Molecules in and out of H5MD files: a water run writes its bonds (H5MD 1.1
connectivity) and molecule ids; a file with bonds starts a run of rigid molecules (found
from the bonds, three-site waters held by SETTLE), so that a run continued from the
output of another equals the uninterrupted run; resume and sweeps of water runs; and the
hostile files, each refused in one line."""

import os
import shutil
import signal
from pathlib import Path

import h5py
import jax
import numpy as np
import pytest

import sim
from physics import md
from sim import _interrupt, _stream
from tests.helpers import cli, signal_after_chunks

from .test_run_resume import contents

SPCE = md.WATER_MODELS["spce"]
HH = 2 * SPCE.oh * np.sin(np.radians(SPCE.angle) / 2)

# Eight SPC/E waters (a 0.62 nm box, so a short cutoff), NVE: a few dozen steps.
CONFIG = """
[model]
name = "lj_coulomb"
[params]
cutoff = 0.3
shift = true
[system]
units = "real"
{system}
[time]
dt = 0.002
steps = {steps}
save_every = 5
[solver]
method = "verlet"
"""
# the constraints of the box's waters (O, H, H in order) and their lengths
TRIANGLES = np.array(
    [[3 * m + a, 3 * m + b] for m in range(8) for a, b in ((0, 1), (0, 2), (1, 2))]
)
LENGTHS = np.tile([SPCE.oh, SPCE.oh, HH], 8)
BOX = 'molecule = "spce"\nmolecules = 8\ndensity = 0.997\ntemperature = 300.0\nseed = 2'


def write_config(
    folder: Path,
    system: str = BOX,
    steps: int = 40,
    name: str = "water.toml",
    extra: str = "",
    params: str = "",
) -> Path:
    path = folder / name
    path.write_text(
        CONFIG.format(system=system, steps=steps).replace(
            "shift = true\n", f"shift = true\n{params}"
        )
        + extra
    )
    return path


def absolute(f, frame=-1) -> np.ndarray:
    """Unwrapped positions of a frame of an H5MD run (position + image * edges)."""
    p = f["particles/all"]
    return (
        p["position/value"][frame]
        + p["image/value"][frame] * p["box/edges/value"][frame][..., None, :]
    )


def deviation(position, constraints, lengths) -> float:
    """The largest | |r_i - r_j| - L | over the constraints of positions [..., n, 3]."""
    d = np.linalg.norm(
        position[..., constraints[:, 0], :] - position[..., constraints[:, 1], :], axis=-1
    )
    return float(np.max(np.abs(d - lengths)))


# Chunks of two frames in the module's runs of the generated box: a chunk's frame count is
# part of the compiled program, so the 70-step run, the run continued from a frame of
# this one and the interrupted run below reuse the program of this one (measured: 0.1 s
# each instead of 6 to 8 s).
CHUNKS = "[output]\nchunk = 2\n"


@pytest.fixture(scope="module")
def water_run(tmp_path_factory):
    """A 40-step run of eight SPC/E waters, written with `sim run`. (Traced with the
    checks as NaN, as the tests' runs are: a module fixture is set up before the
    test-wide fixture that turns the mode on, and the tests' runs would trace a program
    traced outside it again.)"""
    folder = tmp_path_factory.mktemp("water")
    sim.run(sim.load_config(write_config(folder, extra=CHUNKS)), output=folder / "run.h5")
    return folder / "run.h5"


# ----------------------------------------------------------------------------- out


def test_a_water_run_writes_its_bonds_and_molecules(water_run):
    import MDAnalysis as mda

    with h5py.File(water_run) as f:
        bonds = f["connectivity/all/bonds"]
        assert (
            f[bonds.attrs["particles_group"]] == f["particles/all"]
        )  # H5MD 1.1: the group it indexes
        bonds = bonds[()]
        molecule = f["particles/all/molecule"][()]
        species = f["particles/all/species"][()]
        position = f["particles/all/position/value"][()]
        edges = f["particles/all/box/edges/value"][0]
        whole = absolute(f, slice(None))
    # each water's two O-H bonds (the H-H side of SETTLE's triangle is not a bond)
    np.testing.assert_array_equal(bonds, [[3 * m, 3 * m + h] for m in range(8) for h in (1, 2)])
    np.testing.assert_array_equal(molecule, np.repeat(np.arange(8), 3))
    assert np.all(species[bonds[:, 0]] == 0) and np.all(species[bonds[:, 1]] == 1)
    assert deviation(whole, bonds, SPCE.oh) < 1e-12
    # MDAnalysis 2.x reads H5MD coordinates only (it has no H5MD topology parser and
    # leaves /connectivity alone): given the file's bonds, it measures them at 0.1 nm
    # across the periodic boundaries of the wrapped positions.
    u = mda.Universe.empty(24, trajectory=True)
    u.load_new(str(water_run), format="H5MD", convert_units=False)
    u.add_TopologyAttr("bonds", [tuple(b) for b in bonds.tolist()])
    for frame in (0, len(u.trajectory) - 1):
        u.trajectory[frame]
        np.testing.assert_allclose(u.atoms.positions, position[frame], atol=1e-5)
        np.testing.assert_allclose(u.bonds.values(), SPCE.oh, rtol=1e-5)
    np.testing.assert_allclose(u.dimensions[:3], edges, rtol=1e-6)


# ----------------------------------------------------------------------------- in


def test_a_run_continued_from_the_output_is_the_uninterrupted_run(water_run, tmp_path):
    # 30 steps, then 40 more from frame 6 of the file (positions, velocities, box,
    # bonds), equal 70 steps in one run: the bonds make the same rigid waters. (From
    # frame 6 the neighbour list is sized as from the generated start, so that both runs
    # reuse the program of `water_run`; from the last frame it holds one more neighbour,
    # which made a program of its own.)
    start = tmp_path / "start.h5"
    shutil.copy(water_run, start)
    later = sim.run(
        sim.load_config(
            write_config(
                tmp_path,
                'file = "start.h5"\nframe = 6\nmolecule = "spce"',
                name="next.toml",
                extra=CHUNKS,
            )
        )
    )
    whole = sim.run(
        sim.load_config(write_config(tmp_path, steps=70, name="whole.toml", extra=CHUNKS))
    )
    assert (
        np.shape(later.observables["position"])[0] == 9
        and np.shape(whole.observables["position"])[0] == 15
    )
    rows = lambda c: sorted(map(tuple, np.asarray(c).tolist()))  # noqa: E731
    assert rows(later.system.topology.constraints) == rows(whole.system.topology.constraints)
    np.testing.assert_array_equal(later.params["charges"], whole.params["charges"])
    edges = np.asarray(whole.system.space.box)
    for name, tolerance in (("position", 1e-11), ("velocity", 1e-9)):
        a, b = later.observables[name], whole.observables[name][6:]
        diff = a - b
        if name == "position":  # the file's molecules start whole, perhaps one box away
            diff -= edges * np.round(diff / edges)
        assert np.max(np.abs(diff)) < tolerance, name
    np.testing.assert_allclose(
        later.observables["total_energy"], whole.observables["total_energy"][6:], rtol=1e-11
    )


def another_programs_file(path: Path, run: Path, *, dtype=np.float32):
    """The last frame of `run` as another program might write it: particle group
    `water`, oxygens first and hydrogens after (molecules not contiguous), positions
    shifted by a quarter box and wrapped into it without image counters (so that
    molecules straddle its faces), in float32, the bonds listed once
    each way round in `/connectivity/bonds` with a `particles_group` reference, no
    masses and no molecule ids. Returns the order: file row -> particle of `run`."""
    with h5py.File(run) as f:
        x = f["particles/all/position/value"][-1]
        v = f["particles/all/velocity/value"][-1]
        edges = f["particles/all/box/edges/value"][-1]
        species = f["particles/all/species"][()]
    order = np.concatenate([np.arange(0, 24, 3), np.arange(1, 24, 3), np.arange(2, 24, 3)])
    row = np.argsort(order)  # particle of run -> file row
    bonds = np.array([[row[3 * m], row[3 * m + h]] for m in range(8) for h in (1, 2)])
    bonds[::2] = bonds[::2, ::-1]
    with h5py.File(path, "w") as f:
        f.create_group("h5md").attrs["version"] = [1, 1]
        g = f.create_group("particles/water")
        box = g.create_group("box")
        box.attrs["dimension"] = 3
        box.attrs["boundary"] = np.array([b"periodic"] * 3)
        box["edges"] = edges.astype(dtype)
        g["position/value"] = ((x[order] + edges / 4) % edges).astype(dtype)[None]
        g["velocity/value"] = v[order].astype(dtype)[None]
        g["species"] = species[order]
        f["connectivity/bonds"] = bonds.astype(np.int64)
        f["connectivity/bonds"].attrs["particles_group"] = g.ref
    return order


def test_another_programs_water_file_makes_settle_waters(water_run, tmp_path):
    order = another_programs_file(tmp_path / "other.h5", water_run)
    with h5py.File(tmp_path / "other.h5") as f:
        x, bonds = f["particles/water/position/value"][0], f["connectivity/bonds"][()]
        assert (
            np.max(np.abs(x[bonds[:, 0]] - x[bonds[:, 1]])) > 0.3
        )  # molecules split by the box's faces
    # neutral; no water model named, so no water parameters
    water = "charges = [-0.8476, 0.4238]\nsigma = 0.2\n"
    config = sim.load_config(
        write_config(
            tmp_path, 'file = "other.h5"\ngroup = "water"', name="other.toml", params=water
        )
    )
    s = sim.setup(config)
    system, constraints = s.initial, s.solver.integrator.constraints
    # eight rigid triangles (the H-H sides closed from the geometry) for SETTLE, no SHAKE
    assert constraints.triangles.shape == (8, 3) and constraints.pairs.shape == (0, 2)
    np.testing.assert_allclose(constraints.sides, SPCE.oh, rtol=1e-6)  # from float32 geometry
    np.testing.assert_allclose(constraints.bases, HH, rtol=1e-6)
    assert (
        np.ptp(np.asarray(constraints.sides)) == 0 and np.ptp(np.asarray(constraints.bases)) == 0
    )  # one kind, one shape
    # every molecule whole and exactly on its constraints; velocities along no bond
    topology = system.topology
    position, velocity = np.asarray(system.position), np.asarray(system.velocity)
    assert (
        deviation(position, np.asarray(topology.constraints), np.asarray(topology.lengths)) < 1e-15
    )
    c = np.asarray(topology.constraints)
    assert (
        np.max(
            np.abs(
                np.sum(
                    (position[c[:, 0]] - position[c[:, 1]])
                    * (velocity[c[:, 0]] - velocity[c[:, 1]]),
                    axis=1,
                )
            )
        )
        < 1e-13
    )
    molecule = np.asarray(topology.molecule)
    np.testing.assert_array_equal(molecule[np.argsort(order)], np.repeat(np.arange(8), 3))
    # without masses in the file every site weighs 1; with the water model named, its
    # masses, and the model's own lengths
    assert np.all(np.asarray(system.mass) == 1.0)
    s = sim.setup(
        sim.load_config(
            write_config(
                tmp_path, 'file = "other.h5"\ngroup = "water"\nmolecule = "spce"', name="spce.toml"
            )
        )
    )
    np.testing.assert_array_equal(np.unique(np.asarray(s.initial.mass)), [1.008, 15.9994])
    assert float(s.solver.integrator.constraints.sides[0]) == SPCE.oh
    assert float(s.solver.integrator.constraints.bases[0]) == pytest.approx(HH, rel=1e-15)


def test_a_start_file_in_other_units_is_converted_or_refused(water_run, tmp_path, capsys):
    # The H5MD unit attributes of a start file are read: the same frame in Angstrom and
    # Angstrom/fs starts the run that the file in nm and nm/ps starts.
    shutil.copy(water_run, tmp_path / "nm.h5")
    shutil.copy(water_run, tmp_path / "angstrom.h5")
    with h5py.File(tmp_path / "angstrom.h5", "r+") as f:
        p = f["particles/all"]
        for name, factor, unit in (
            ("position/value", 10.0, "Angstrom"),
            ("box/edges/value", 10.0, "Angstrom"),
            ("velocity/value", 0.01, "Angstrom fs-1"),
        ):
            p[name][...] = p[name][()] * factor
            p[name].attrs["unit"] = unit
    starts = [
        sim.setup(
            sim.load_config(
                write_config(tmp_path, f'file = "{name}"\nmolecule = "spce"', name=f"{name}.toml")
            )
        ).initial
        for name in ("nm.h5", "angstrom.h5")
    ]
    for get in (lambda s: s.position, lambda s: s.velocity, lambda s: s.space.box):
        np.testing.assert_allclose(
            np.asarray(get(starts[1])), np.asarray(get(starts[0])), rtol=1e-12
        )
    # a unit that is not a length, and a file in nm started in reduced units: one line
    with h5py.File(tmp_path / "angstrom.h5", "r+") as f:
        f["particles/all/position/value"].attrs["unit"] = "ps"
    cases = [
        ("angstrom.h5", "", "/particles/all/position/value is in 'ps', which is not a length unit"),
        ("nm.h5", "reduced", "is in 'nm', but the run is in reduced units"),
    ]
    for file, extra, expected in cases:
        config = write_config(tmp_path, f'file = "{file}"\nmolecule = "spce"', name="bad.toml")
        if extra:
            config.write_text(config.read_text().replace('units = "real"', 'units = "reduced"'))
        code, err = cli(["run", str(config), "-o", str(tmp_path / "out.h5"), "--quiet"], capsys)
        lines = err.strip().splitlines()
        assert (
            code == 2 and len(lines) == 1 and "system.file" in lines[0] and expected in lines[0]
        ), err
        assert not (tmp_path / "out.h5").exists()


def test_a_float32_water_run_keeps_its_precision_and_says_nothing(tmp_path, capsys):
    # SETTLE's lengths were float64 constants scattered into float32 positions: JAX
    # warned on every run (a FutureWarning, an error in later releases).
    config = write_config(tmp_path, extra='dtype = "float32"\n')
    code, err = cli(["run", str(config), "-o", str(tmp_path / "out.h5"), "--quiet"], capsys)
    assert code == 0 and err == "", err
    with h5py.File(tmp_path / "out.h5") as f:
        assert f["particles/all/position/value"].dtype == np.float32
        assert deviation(absolute(f), TRIANGLES, LENGTHS) < 1e-5  # float32 rounding of 0.1 nm bonds


# ----------------------------------------------------------------------------- resume and sweeps


def identical(a, b):
    """`assert_identical` with the bonds' `particles_group` compared by the group it
    refers to (an object reference's bytes are an address in memory)."""
    for path in (a, b):
        with h5py.File(path) as f:
            assert f[f["connectivity/all/bonds"].attrs["particles_group"]] == f["particles/all"]
    ca, cb = contents(a), contents(b)
    for c in (ca, cb):
        dtype, shape, value, attrs = c["connectivity/all/bonds"]
        c["connectivity/all/bonds"] = (
            dtype,
            shape,
            value,
            {k: v for k, v in attrs.items() if k != "particles_group"},
        )
    assert sorted(ca) == sorted(cb)
    for key in ca:
        assert ca[key] == cb[key], key


def test_sigint_mid_run_resumes_to_the_uninterrupted_water_run(tmp_cwd):
    config = write_config(tmp_cwd, extra=CHUNKS + "checkpoint_every = 1\n")
    sim.run(sim.load_config(config), output="whole.h5")
    with pytest.MonkeyPatch.context() as patch:
        signal_after_chunks(patch, 2, signal.SIGINT)  # Ctrl-C, honoured at the next safe point
        with _interrupt.deferred(), pytest.raises(_interrupt.Interrupted) as info:
            sim.run(sim.load_config(config), output="out.h5")
    assert info.value.exit_code == 128 + signal.SIGINT
    assert not Path("out.h5").exists() and _stream.checkpoint_path("out.h5").exists()
    done = sim.run(sim.load_config(config), output="out.h5", resume=True)
    assert 0 < done.resumed_from < done.frames
    identical("whole.h5", "out.h5")  # bit for bit, bonds and molecule ids included
    with h5py.File("out.h5") as f:
        assert deviation(absolute(f, slice(None)), TRIANGLES, LENGTHS) < 1e-12


# (with -m slow; by default tests/sim/test_sweep_md.py sweeps an atomic system and
# checks its summary and bad keys)
@pytest.mark.slow
def test_a_water_sweep_varies_sigma_and_refuses_what_it_cannot_vary(tmp_cwd, capsys):
    sweep = '[sweep]\nmode = "grid"\nsave = "full"\n[sweep.params]\n'
    write_config(
        tmp_cwd, steps=20, name="s.toml", extra=sweep + "sigma = { values = [0.31, 0.3166] }\n"
    )
    code, err = cli(["sweep", "s.toml", "-o", "s.h5", "--quiet"], capsys)
    assert code == 0, err
    record = sim.read("s.h5")
    assert np.all(record.status == 1)
    position = np.asarray(record.observables["position"])  # [runs, frames, n, 3], unwrapped
    assert position.shape == (2, 5, 24, 3) and deviation(position, TRIANGLES, LENGTHS) < 1e-12
    energy = np.asarray(record.observables["total_energy"])
    assert not np.allclose(energy[0], energy[1])  # sigma changed the runs
    assert np.max(np.abs(energy - energy[:, :1])) < 0.05 * np.max(
        np.abs(np.asarray(record.observables["kinetic_energy"]))
    )
    # What a sweep cannot vary: one line naming it, exit 2, nothing written
    for name, value, expected in (
        ("temperature", "[280.0, 300.0]", "[system] or [solver] key"),
        ("charges", "[-0.8, -0.85]", "not a scalar"),
        ("epsilon", "[0.6, 0.65]", "not a scalar"),
    ):
        write_config(
            tmp_cwd, steps=20, name="bad.toml", extra=sweep + f"{name} = {{ values = {value} }}\n"
        )
        code, err = cli(["sweep", "bad.toml", "-o", "bad.h5", "--quiet"], capsys)
        lines = err.strip().splitlines()
        assert (
            code == 2
            and len(lines) == 1
            and f"sweep.params.{name}" in lines[0]
            and expected in lines[0]
        ), err
        assert not Path("bad.h5").exists()


# ----------------------------------------------------------------------------- hostile files


def edit(path: Path, change) -> None:
    with h5py.File(path, "r+") as f:
        change(f)


def far_pair(f) -> tuple[int, int]:
    """Two particles whose nearest images are at least half the box's edge apart."""
    x = f["particles/all/position/value"][-1]
    edges = f["particles/all/box/edges/value"][-1]
    d = x[:, None, :] - x[None, :, :]
    d -= edges * np.round(d / edges)
    r = np.linalg.norm(d, axis=-1)
    i, j = np.unravel_index(np.argmax(r), r.shape)
    assert r[i, j] >= 0.5 * np.min(edges)
    return int(i), int(j)


def _far_bond(f):
    i, j = far_pair(f)
    del f["particles/all/molecule"]
    bonds = f["connectivity/all/bonds"]
    bonds[0] = [i, j]


def _stretched(f):
    x = f["particles/all/position/value"]
    frame = x[-1]
    frame[1] = frame[0] + 1.1 * (frame[1] - frame[0])  # one O-H 10% long
    x[-1] = frame


def _on_top(f):
    x = f["particles/all/position/value"]
    frame = x[-1]
    frame[3:6] = frame[0:3] + np.array([0.05, 0.0, 0.0])  # molecule 1 moved onto molecule 0
    x[-1] = frame


def _one_box(f):
    # the box of the first frame only, the positions of five
    edges = f["particles/all/box/edges/value"][:1]
    del f["particles/all/box/edges/value"]
    f["particles/all/box/edges/value"] = edges


def _huge_bonds(f):
    # 2^34 pairs declared, none stored: the file stays small, reading it would need 128 GiB
    del f["connectivity/all/bonds"]
    f.create_dataset("connectivity/all/bonds", shape=(2**34, 2), dtype=np.int32, chunks=(1024, 2))


HOSTILE = {
    "molecules overlapping": (_on_top, 'molecule = "spce"', "system.file", "molecules 0 and 1"),
    "index out of range": (
        lambda f: f["connectivity/all/bonds"].__setitem__(0, [0, 24]),
        "",
        "system.file",
        "particle index 24",
    ),
    "bond longer than half the box": (_far_bond, "", "system.file", "half the box"),
    "molecule not connected": (
        lambda f: f["connectivity/all/bonds"].__setitem__(
            1, [0, 1]
        ),  # molecule 0 loses its bond to particle 2
        "",
        "system.file",
        "molecule 0 (particles 0, 1, 2) is not connected",
    ),
    "bond across two molecules": (
        lambda f: f["connectivity/all/bonds"].__setitem__(1, [0, 4]),
        "",
        "system.file",
        "joins molecules 0 and 1",
    ),
    "bond not its kind's": (_stretched, "", "system.file", "particles 0 and 1 is 0.11"),
    "box missing": (
        lambda f: f["particles/all"].__delitem__("box"),
        "",
        "system.file",
        "/particles/all/box is missing",
    ),
    "frame beyond the file": (lambda f: None, "frame = 9", "system.file", "frame 9"),
    "box of fewer frames than the positions": (
        _one_box,
        "frame = 3",
        "system.file",
        "/particles/all/box/edges has 1 frames; frame 3",
    ),
    "bonds declared beyond memory": (
        _huge_bonds,
        "",
        "system.file",
        "/connectivity/all/bonds declares 34,359,738,368 values",
    ),
    "wrong water": (
        lambda f: None,
        'molecule = "tip3p"',
        "system.molecule",
        "is not a tip3p water: its O-H distance",
    ),
    "not water": (
        lambda f: f["particles/all/species"].__setitem__(0, 1),
        'molecule = "spce"',
        "system.molecule",
        "is not a spce water",
    ),
    "bonds without water": (
        lambda f: f.__delitem__("connectivity"),
        'molecule = "spce"',
        "system.molecule",
        "no bonds",
    ),
    "molecules beside a file": (lambda f: None, "molecules = 8", "system.molecules", "either file"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE))
def test_hostile_start_files_are_refused_in_one_line(case, water_run, tmp_path, capsys):
    change, system, key, expected = HOSTILE[case]
    start = tmp_path / "start.h5"
    shutil.copy(water_run, start)
    edit(start, change)
    config = write_config(tmp_path, f'file = "start.h5"\n{system}')
    before = (start.read_bytes(), config.read_text())
    code, err = cli(["run", str(config), "-o", str(tmp_path / "out.h5"), "--quiet"], capsys)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err
    assert key in lines[0] and expected in lines[0] and "Traceback" not in err, err
    assert not (tmp_path / "out.h5").exists() and (start.read_bytes(), config.read_text()) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["start.h5", "water.toml"]


def test_the_output_cannot_be_the_start_file(water_run, tmp_path, capsys):
    start = tmp_path / "start.h5"
    shutil.copy(water_run, start)
    config = write_config(tmp_path, 'file = "start.h5"')
    before = start.read_bytes()
    code, err = cli(["run", str(config), "-o", str(start), "--quiet"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "start.h5" in err, err
    assert start.read_bytes() == before


# ----------------------------------------------------------------------------- molecules from bonds


def test_bonded_molecules_find_kinds_close_triangles_and_make_molecules_whole():
    # In a 2.0 box: two waters (their sites interleaved with the others'), two copies of
    # a diatomic (bonds 0.100 and 0.102: one kind, one length), a four-site chain split
    # by the box's face, and an ion with no bonds.
    edges = np.array([2.0, 2.0, 2.0])
    water = np.array([[0.0, 0.0, 0.0], [0.08, 0.06, 0.0], [-0.08, 0.06, 0.0]])  # O-H 0.1, H-H 0.16
    position = np.concatenate(
        [
            water[:1] + 0.5,
            water[:1] + 1.2,  # 0, 1: oxygens
            water[1:] + 0.5,
            water[1:] + 1.2,  # 2, 3 and 4, 5: hydrogens
            [[0.3, 1.5, 0.2], [0.4, 1.5, 0.2]],  # 6, 7: diatomic, 0.100
            [[1.5, 0.3, 0.2], [1.5, 0.402, 0.2]],  # 8, 9: diatomic, 0.102
            [
                [1.95, 1.0, 1.0],
                [0.05, 1.0, 1.0],
                [0.15, 1.0, 1.0],
                [0.25, 1.0, 1.0],
            ],  # 10-13: a chain across x = 0
            [[1.0, 1.0, 1.8]],  # 14: an ion
        ]
    )
    species = np.array([0, 0, 1, 1, 1, 1, 2, 3, 2, 3, 4, 4, 4, 4, 5])
    mass = np.where(species == 0, 16.0, np.where(species == 1, 1.0, 12.0))
    bonds = [[0, 2], [3, 0], [1, 4], [1, 5], [7, 6], [8, 9], [10, 11], [11, 12], [12, 13]]
    whole, topology = md.bonded_molecules(position, species, mass, bonds, edges)
    molecule = np.asarray(topology.molecule)
    np.testing.assert_array_equal(molecule, [0, 1, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 4, 4, 5])
    pairs = {
        tuple(p): float(length)
        for p, length in zip(
            np.asarray(topology.constraints).tolist(), np.asarray(topology.lengths), strict=False
        )
    }
    # waters closed into triangles (H-H added), the chain's three bonds alone
    assert set(pairs) == {
        (0, 2),
        (0, 3),
        (2, 3),
        (1, 4),
        (1, 5),
        (4, 5),
        (6, 7),
        (8, 9),
        (10, 11),
        (11, 12),
        (12, 13),
    }
    assert pairs[(0, 2)] == pairs[(0, 3)] == pairs[(1, 4)] == pytest.approx(0.1, rel=1e-12)
    assert pairs[(2, 3)] == pytest.approx(0.16, rel=1e-12)
    assert pairs[(6, 7)] == pairs[(8, 9)] == pytest.approx(0.101, rel=1e-12)  # the kind's mean
    # the chain is whole: walked from particle 10, the others move to the images beside it
    np.testing.assert_array_equal(whole[:11], position[:11])
    np.testing.assert_allclose(whole[11:14], position[11:14] + [2.0, 0.0, 0.0], rtol=0, atol=1e-15)
    # intramolecular pairs: 3 + 3 + 1 + 1 + 6 (the chain's every pair), none for the ion
    assert np.asarray(topology.pairs).shape == (14, 2)
    # the same chain as a claimed molecule of two parts is refused
    claimed = molecule.copy()
    claimed[14] = 4
    with pytest.raises(
        ValueError,
        match=r"molecule 4 \(particles 10, 11, 12, 13, 14\) is not connected by its bonds: "
        r"particle 14",
    ):
        md.bonded_molecules(position, species, mass, bonds, edges, claimed=claimed)


def write_file(path: Path, position, edges, species, connectivity, ids=None, mass=None):
    """A one-frame H5MD file of group `all` (and an empty group `other`);
    `connectivity` maps dataset paths to (pairs, referenced group or None)."""
    with h5py.File(path, "w") as f:
        for name in ("all", "other"):
            g = f.create_group(f"particles/{name}")
            g.create_group("box").attrs["boundary"] = np.array([b"periodic"] * 3)
            g["box/edges"] = edges
            g["position/value"] = np.asarray(position)[None]
        g = f["particles/all"]
        g["species"] = species
        if ids is not None:
            g["id/value"] = np.asarray(ids)[None]
        if mass is not None:
            g["mass"] = mass
        for name, (pairs, group) in connectivity.items():
            f[name] = np.asarray(pairs)
            if group is not None:
                f[name].attrs["particles_group"] = f[f"particles/{group}"].ref
    return path


def test_read_h5md_takes_every_h5md_form_of_bonds(tmp_path):
    x = np.random.default_rng(0).uniform(0, 1, (6, 3))
    forms = {
        "connectivity/all/bonds": ([[0, 1]], None),
        "connectivity/all/constraints": ([[2, 3]], None),
        "connectivity/all/angles": ([[0, 1, 2]], None),  # not pairs: not bonds
        "connectivity/pairs": ([[4, 5]], "all"),  # H5MD 1.1: a reference names the group
        "connectivity/elsewhere": ([[1, 2]], "other"),  # another group's
    }
    system = md.read_h5md(
        write_file(tmp_path / "a.h5", x, [1.0, 1.0, 1.0], np.zeros(6, int), forms)
    )
    assert sorted(map(tuple, np.asarray(system.bonds).tolist())) == [(0, 1), (2, 3), (4, 5)]
    # with /particles/all/id, bonds name particles by id
    ids = [10, 11, 15, 13, 14, 12]
    system = md.read_h5md(
        write_file(
            tmp_path / "b.h5",
            x,
            [1.0] * 3,
            np.zeros(6, int),
            {"connectivity/all/bonds": ([[10, 15], [12, 13]], None)},
            ids=ids,
        )
    )
    np.testing.assert_array_equal(system.bonds, [[0, 2], [5, 3]])
    with pytest.raises(
        ValueError, match="names particle id 16, which /particles/all/id does not hold"
    ):
        md.read_h5md(
            write_file(
                tmp_path / "c.h5",
                x,
                [1.0] * 3,
                np.zeros(6, int),
                {"connectivity/all/bonds": ([[10, 16]], None)},
                ids=ids,
            )
        )
    with pytest.raises(ValueError, match=r"/connectivity/all/bonds must be \[b, 2\] integer"):
        md.read_h5md(
            write_file(
                tmp_path / "d.h5",
                x,
                [1.0] * 3,
                np.zeros(6, int),
                {"connectivity/all/bonds": ([[0.0, 1.5]], None)},
            )
        )


def test_a_file_of_diatomics_runs_shake_and_bead_spring_keeps_its_bonds(tmp_path):
    # 27 diatomics on a lattice (bond 0.6 in a box of 6.0, reduced units): SHAKE pairs,
    # no triangles; the same file under bead_spring keeps its bonds as springs.
    grid = (
        np.stack(np.meshgrid(*[np.arange(3)] * 3, indexing="ij"), -1).reshape(-1, 3) + 0.5
    ) * 2.0
    x = np.concatenate([grid, grid + [0.6, 0.0, 0.0]])
    write_file(
        tmp_path / "di.h5",
        x,
        [6.0] * 3,
        np.zeros(54, int),
        {"connectivity/all/bonds": ([[i, 27 + i] for i in range(27)], None)},
    )
    text = (
        '[model]\nname = "{model}"\n[params]\ncutoff = 1.5\n[system]\nfile = '
        '"di.h5"\ntemperature = 1.0\n[time]\ndt = 0.002\nsteps = 10\nsave_every = '
        '5\n[solver]\nmethod = "verlet"\n'
    )
    (tmp_path / "di.toml").write_text(text.format(model="lennard_jones"))
    s = sim.setup(sim.load_config(tmp_path / "di.toml"))
    constraints = s.solver.integrator.constraints
    assert constraints.pairs.shape == (27, 2) and constraints.triangles.shape == (0, 3)
    np.testing.assert_allclose(constraints.lengths, 0.6, rtol=1e-15)
    assert s.initial.bonds is None and s.initial.topology.pairs.shape == (27, 2)
    # velocities at the temperature of 3n - 3 - 27 degrees of freedom, along no bond
    v, m = np.asarray(s.initial.velocity), np.asarray(s.initial.mass)
    assert np.sum(m[:, None] * v * v) / (3 * 54 - 3 - 27) == pytest.approx(1.0, rel=1e-12)
    assert np.max(np.abs(np.sum((x[:27] - x[27:]) * (v[:27] - v[27:]), axis=1))) < 1e-14
    (tmp_path / "bs.toml").write_text(text.format(model="bead_spring"))
    s = sim.setup(sim.load_config(tmp_path / "bs.toml"))
    assert s.initial.topology is None and s.solver.integrator.constraints is None
    np.testing.assert_array_equal(s.initial.bonds, [[i, 27 + i] for i in range(27)])
    # A model of the user's own with bond terms says so (`bonded`): its bonds stay bonds.
    (tmp_path / "springs.py").write_text(SPRINGS)
    (tmp_path / "own.toml").write_text(
        text.format(model="lennard_jones")
        .replace('name = "lennard_jones"', 'source = "springs.py:Springs"')
        .replace("cutoff = 1.5", "cutoff = 1.5\nbond_k = 50.0")
    )
    s = sim.setup(sim.load_config(tmp_path / "own.toml"))
    assert s.initial.topology is None and s.solver.integrator.constraints is None
    np.testing.assert_array_equal(s.initial.bonds, [[i, 27 + i] for i in range(27)])
    stretched = s.initial.at(s.initial.position.at[27:, 0].add(0.1))  # (every bond 0.1 longer)
    spring = jax.jit(  # (one program: op by op, some fifty)
        lambda system: (
            s.model.energy(system, s.params) - md.LennardJones(cutoff=1.5).energy(system, s.params)
        )
    )(stretched)
    assert float(spring) == pytest.approx(27 * 0.5 * 50.0 * 0.1**2, rel=1e-9)


SPRINGS = """
from typing import ClassVar

from physics import Parameter
from physics.md import LennardJones, harmonic_bond_energy


class Springs(LennardJones):
    \"\"\"Lennard-Jones particles with harmonic bonds of rest length 0.6.\"\"\"

    bonded: ClassVar[bool] = True
    parameters: ClassVar = (*LennardJones.parameters, Parameter("bond_k", 100.0, "reduced", "spring constant", "positive"))

    def bond_energy(self, system, params):
        return harmonic_bond_energy(system, params["bond_k"], 0.6)
"""


@pytest.mark.parametrize(
    "system, key, expected",
    [
        ('lattice = "fcc"\ndensity = 0.8\nframe = 0', "system.frame", "give [system] file too"),
        ('file = "start.h5"\nframe = "last"', "system.frame", "whole number"),
        ('file = "start.h5"\ngroup = "/particles/all"', "system.group", "name of a group"),
        ('file = "start.h5"\ngroup = "solvent"', "system.file", "/particles/solvent is missing"),
        (
            'file = "start.h5"\nmolecule = { species = [0], mass = [1.0], sites = [[0, 0, 0]], '
            "constraints = [] }",
            "system.molecule",
            "names the water model",
        ),
    ],
)
def test_bad_start_file_settings_are_refused_in_one_line(
    system, key, expected, water_run, tmp_path, capsys
):
    shutil.copy(water_run, tmp_path / "start.h5")
    config = write_config(tmp_path, system)
    code, err = cli(["run", str(config), "-o", str(tmp_path / "out.h5"), "--quiet"], capsys)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and key in lines[0] and expected in lines[0], err
    assert not (tmp_path / "out.h5").exists()


# three compilations of the water run in two processes; the default run interrupts in-process
@pytest.mark.slow
def test_ctrl_c_to_sim_run_of_water_resumes_to_the_uninterrupted_file(tmp_path, capsys):
    import shlex
    import subprocess
    import sys
    import time

    write_config(tmp_path, steps=400, extra="[output]\nchunk = 2\ncheckpoint_every = 1\n")
    args = ["run", "water.toml", "-o", "out.h5", "--quiet"]
    proc = subprocess.Popen(
        [str(Path(sys.executable).parent / "sim"), *args],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    checkpoint = _stream.checkpoint_path(tmp_path / "out.h5")
    deadline = time.monotonic() + 300
    while not checkpoint.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert proc.poll() is None, proc.stderr.read()
    proc.send_signal(signal.SIGINT)
    err = proc.stderr.read()
    proc.wait(timeout=300)
    lines = err.strip().splitlines()
    assert proc.returncode == 130 and len(lines) == 1 and "checkpointed in" in lines[0], err
    assert not (tmp_path / "out.h5").exists()
    resume = shlex.split(lines[0].split("resume with: ", 1)[1])
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        code, err = cli(resume[1:], capsys)
        assert code == 0, err
        code, err = cli(["run", "water.toml", "-o", "whole.h5", "--quiet"], capsys)
        assert code == 0, err
    finally:
        os.chdir(cwd)
    identical(tmp_path / "whole.h5", tmp_path / "out.h5")
    with h5py.File(tmp_path / "out.h5") as f:
        assert deviation(absolute(f, slice(None)), TRIANGLES, LENGTHS) < 1e-12
