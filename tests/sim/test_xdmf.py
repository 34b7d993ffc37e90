"""XDMF sidecars of PDE run files: the XML read with xml.etree and every reference it
makes checked against the HDF5 file (file names relative to the sidecar, dataset paths,
shapes, number types, times, the frame each hyperslab selects and where each value sits),
and the sidecar's life beside its run: written only for a complete run, replaced or
removed with the file it describes, never for a failed or interrupted run; bad requests
are one line and exit code 2 before any work."""

import os
import xml.etree.ElementTree as ET
from pathlib import Path

import h5py
import numpy as np
import pytest

import sim
from sim import _stream
from tests.helpers import cli

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"

KS = ["grid.points=[16]", "time.t1=2.0", "time.save=5"]  # a 1D spectral run, 5 frames
GS = [
    "grid.points=[12, 8]",
    "grid.domain=[[0.0, 2.5], [0.0, 1.0]]",
    "time.t1=4.0",
    "time.save=3",
]  # 2D, two fields


def ks(*extra):
    return sim.load_config(EXPERIMENTS / "kuramoto_sivashinsky.toml", [*KS, *extra])


def gray_scott(*extra):
    return sim.load_config(EXPERIMENTS / "gray_scott.toml", [*GS, *extra])


def parse(sidecar):
    root = ET.parse(sidecar).getroot()
    assert root.tag == "Xdmf" and root.get("Version") == "3.0"
    series = root.find("Domain/Grid")
    assert series.get("GridType") == "Collection" and series.get("CollectionType") == "Temporal"
    return root, series.findall("Grid")


def dims(item):
    return tuple(int(n) for n in item.get("Dimensions").split())


def resolve(sidecar, item, f):
    """The HDF5 dataset an XDMF `DataItem` names, checked: the file part is relative to
    the sidecar and is the run file, the shape and number type are the dataset's."""
    assert item.get("Format") == "HDF"
    file, _, name = item.text.strip().partition(":")
    assert not os.path.isabs(file) and os.path.samefile(Path(sidecar).parent / file, f.filename)
    dataset = f[name]
    assert isinstance(dataset, h5py.Dataset)
    assert dims(item) == dataset.shape
    kind = {"f": "Float", "i": "Int", "u": "UInt"}[dataset.dtype.kind]
    assert (item.get("NumberType"), int(item.get("Precision"))) == (kind, dataset.dtype.itemsize)
    return dataset


def evaluate(sidecar, item, f):
    """The values of a DataItem: an HDF5 reference, inline XML numbers, or a hyperslab
    (rows start, stride, count) of an HDF5 reference, as an XDMF reader reads them."""
    if item.get("ItemType") == "HyperSlab":
        selection, source = item.findall("DataItem")
        start, stride, count = np.array(selection.text.split(), dtype=int).reshape(dims(selection))
        dataset = resolve(sidecar, source, f)
        index = tuple(slice(b, b + s * c, s) for b, s, c in zip(start, stride, count, strict=False))
        values = dataset[index]
        assert values.size == np.prod(dims(item))
        return values.reshape(dims(item))
    if item.get("Format") == "XML":
        return np.array(item.text.split(), dtype=float).reshape(dims(item))
    return resolve(sidecar, item, f)[()]


def check_sidecar(h5, sidecar):
    """Every frame of the sidecar shows the run file's fields at the stored time, each
    value at the node whose coordinates it has in the file."""
    root, frames = parse(sidecar)
    info = {i.get("Name"): i.get("Value") for i in root.iter("Information")}
    assert info["data"] == Path(h5).name
    with h5py.File(h5, "r") as f:
        time = f["time"][()]
        assert len(frames) == len(time)
        axes = [a for a in "xyz" if a in f["grid"]]
        points = tuple(len(f["grid"][a]) for a in axes)
        fields = [n for n, d in f["observables"].items() if d.shape == (len(time), *points)]
        scalars = [n for n, d in f["observables"].items() if d.shape == (len(time),)]
        for k, grid in enumerate(frames):
            assert float(grid.find("Time").get("Value")) == time[k]  # the stored time, exactly
            topology = grid.find("Topology")
            assert topology.get("TopologyType") == "3DRectMesh"
            mesh = dims(topology)
            assert mesh == (1,) * (3 - len(points)) + points
            geometry = grid.find("Geometry")
            assert geometry.get("GeometryType") == "VXVYVZ"
            vx, vy, vz = (
                evaluate(sidecar, item, f).ravel() for item in geometry.findall("DataItem")
            )
            assert (len(vz), len(vy), len(vx)) == mesh  # VX runs along the fastest axis
            # XDMF's X, Y, Z are the file's axes from the last: the sidecar says which is which.
            letter = dict(zip(reversed(axes), "XYZ", strict=False))
            assert info["axes"] == ", ".join(f"{letter[a]} = file {a}" for a in reversed(axes))
            coordinate = {"X": vx, "Y": vy, "Z": vz}
            attributes = {a.get("Name"): a for a in grid.findall("Attribute")}
            assert sorted(attributes) == sorted(fields + scalars)
            for name in fields:
                attribute = attributes[name]
                assert (attribute.get("Center"), attribute.get("AttributeType")) == (
                    "Node",
                    "Scalar",
                )
                values = evaluate(sidecar, attribute.find("DataItem"), f)
                field = f["observables"][name][k]
                # Node (K, J, I) of the mesh sits at (VZ[K], VY[J], VX[I]): it holds the field's
                # value at the grid point with those coordinates.
                for node in {
                    (0, 0, 0),
                    tuple(n - 1 for n in mesh),
                    tuple(n // 2 for n in mesh),
                    tuple(min(1, n - 1) for n in mesh),
                }:
                    at = dict(zip("ZYX", node, strict=False))
                    point = tuple(
                        int(
                            np.flatnonzero(
                                f["grid"][a][()] == coordinate[letter[a]][at[letter[a]]]
                            )[0]
                        )
                        for a in axes
                    )
                    assert values[node] == field[point]
                np.testing.assert_array_equal(values.reshape(points), field)
            for name in scalars:
                assert attributes[name].get("Center") == "Grid"
                assert (
                    evaluate(sidecar, attributes[name].find("DataItem"), f).item()
                    == f["observables"][name][k]
                )


def test_sidecar_of_a_1d_run(tmp_cwd, capsys):
    code, err = cli(
        [
            "run",
            str(EXPERIMENTS / "kuramoto_sivashinsky.toml"),
            "-o",
            "ks.h5",
            "--xdmf",
            *sum((["--set", s] for s in KS), []),
        ],
        capsys,
    )
    assert code == 0, err
    assert err.strip().splitlines()[-1] == "wrote ks.xdmf (XDMF, for ParaView and VisIt)", err
    check_sidecar("ks.h5", "ks.xdmf")
    # the pair can be moved together: the reference is relative
    os.mkdir("moved")
    os.replace("ks.h5", "moved/ks.h5")
    os.replace("ks.xdmf", "moved/ks.xdmf")
    check_sidecar("moved/ks.h5", "moved/ks.xdmf")


def test_sidecar_of_a_2d_run_from_the_config_and_from_python(tmp_cwd):
    done = sim.run(gray_scott("output.xdmf=true"), output="gs.h5")
    assert done.path == Path("gs.h5")
    check_sidecar("gs.h5", "gs.xdmf")
    with h5py.File("gs.h5", "r") as f:
        assert f["observables/u"].shape == (3, 12, 8) and "v" in f["observables"]
    first = Path("gs.xdmf").read_bytes()
    Path("gs.xdmf").unlink()
    assert sim.write_xdmf("gs.h5") == Path("gs.xdmf")
    assert Path("gs.xdmf").read_bytes() == first
    assert sorted(p.name for p in tmp_cwd.iterdir()) == [
        "gs.h5",
        "gs.xdmf",
    ]  # no temporary file left


def test_a_3d_file_and_float32_fields(tmp_cwd):
    # A hand-made 3D run file with float32 fields: sidecar by `write_xdmf`.
    rng = np.random.default_rng(0)
    x, y, z = np.linspace(0, 1, 5), np.linspace(0, 2, 4), np.linspace(-1, 1, 3)
    with h5py.File("cube.h5", "w") as f:
        f.attrs["format"] = "simjax.run"
        f.attrs["model"] = "hand_made"
        f["time"] = np.array([0.0, 0.1, 0.30000000000000004])
        f["grid/x"], f["grid/y"], f["grid/z"] = x, y, z
        f["observables/u"] = rng.random((3, 5, 4, 3)).astype(np.float32)
        f["observables/energy"] = rng.random(3)
        f["observables/profile"] = rng.random((3, 5))  # on no grid: not described
    sim.write_xdmf("cube.h5")
    check_sidecar("cube.h5", "cube.xdmf")


def test_no_sidecar_for_an_interrupted_run_and_one_when_it_is_resumed(tmp_cwd):
    cfg = ks("output.chunk=1", "output.checkpoint_every=1", "output.xdmf=true")
    written = []
    original = _stream.write_checkpoint

    def stop_after_two(path, **kwargs):
        original(path, **kwargs)
        written.append(kwargs["frame"])
        if len(written) == 2:
            raise KeyboardInterrupt

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_stream, "write_checkpoint", stop_after_two)
        with pytest.raises(KeyboardInterrupt):
            sim.run(cfg, output="ks.h5")
    assert not Path("ks.h5").exists() and not Path("ks.xdmf").exists()
    sim.run(cfg, output="ks.h5", resume=True)
    check_sidecar("ks.h5", "ks.xdmf")


def test_sidecar_replaced_or_removed_with_the_file_it_describes(tmp_cwd):
    sim.run(ks("output.xdmf=true"), output="ks.h5")
    # A longer run over it: the sidecar now describes 9 frames.
    sim.run(ks("output.xdmf=true", "time.save=9"), output="ks.h5")
    check_sidecar("ks.h5", "ks.xdmf")
    assert len(parse("ks.xdmf")[1]) == 9
    # Without the sidecar asked for: the old one, which describes the replaced file, goes.
    sim.run(ks(), output="ks.h5")
    assert not Path("ks.xdmf").exists()
    # A file of that name simjax did not write (or wrote for another file) is left alone.
    Path("ks.xdmf").write_text("<Xdmf><Domain/></Xdmf>")
    sim.run(ks(), output="ks.h5")
    assert Path("ks.xdmf").read_text() == "<Xdmf><Domain/></Xdmf>"


def test_a_failed_run_keeps_the_previous_pair(tmp_cwd):
    sim.run(ks("output.xdmf=true"), output="ks.h5")
    before = Path("ks.h5").read_bytes(), Path("ks.xdmf").read_bytes()
    # a strongly anti-diffusive run blows up and stops
    with pytest.raises(sim.SimulationError):
        sim.run(
            ks("output.xdmf=true", "params.anti_diffusivity=1e4", "time.t1=50.0"), output="ks.h5"
        )
    assert (Path("ks.h5").read_bytes(), Path("ks.xdmf").read_bytes()) == before


def one_line_exit_2(argv, capsys, expect):
    code, err = cli(argv, capsys)
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert expect in err, err
    return err


@pytest.mark.parametrize(
    "config, sets, output, expect",
    [
        (
            "lorenz.toml",
            ["time.save=5"],
            "lorenz.h5",
            "output.xdmf: an XDMF sidecar holds fields on a grid",
        ),
        ("kuramoto_sivashinsky.toml", KS, "run.xdmf", "the name of its own sidecar"),
        ("kuramoto_sivashinsky.toml", KS, "a:b.h5", "has a ':'"),
        (
            "kuramoto_sivashinsky.toml",
            KS,
            "folder.h5",
            "folder.xdmf",
        ),  # the sidecar's path is a folder
    ],
)
def test_bad_requests_are_refused_before_any_work(config, sets, output, expect, tmp_cwd, capsys):
    os.mkdir("folder.xdmf")
    one_line_exit_2(
        [
            "run",
            str(EXPERIMENTS / config),
            "-o",
            output,
            "--xdmf",
            *sum((["--set", s] for s in sets), []),
        ],
        capsys,
        expect,
    )
    assert sorted(p.name for p in tmp_cwd.iterdir()) == ["folder.xdmf"]  # nothing written


def test_xdmf_key_takes_a_boolean(tmp_cwd, capsys):
    one_line_exit_2(
        [
            "run",
            str(EXPERIMENTS / "kuramoto_sivashinsky.toml"),
            "--set",
            'output.xdmf="yes"',
            "-o",
            "ks.h5",
        ],
        capsys,
        "output.xdmf",
    )
    assert not list(tmp_cwd.iterdir())


def test_a_sweep_asking_for_a_sidecar_is_refused(tmp_cwd, capsys):
    # (a sweep file holds many runs; the key was once ignored without a word)
    one_line_exit_2(
        [
            "sweep",
            str(EXPERIMENTS / "lotka_volterra_sweep.toml"),
            "--set",
            "output.xdmf=true",
            "-o",
            "s.h5",
        ],
        capsys,
        "output.xdmf: an XDMF sidecar describes one PDE run file",
    )
    assert not list(tmp_cwd.iterdir())


def test_write_xdmf_refuses_files_without_fields(tmp_cwd):
    with pytest.raises(sim.DataError, match="no such file"):
        sim.write_xdmf("missing.h5")
    with h5py.File("ode.h5", "w") as f:
        f.attrs["format"] = "simjax.run"
        f["time"] = np.arange(3.0)
        f["observables/x"] = np.arange(3.0)
    with pytest.raises(sim.DataError, match="/grid: missing"):
        sim.write_xdmf("ode.h5")
    with h5py.File("sweep.h5", "w") as f:
        f.attrs["format"] = "simjax.sweep"
    with pytest.raises(sim.DataError, match="format"):
        sim.write_xdmf("sweep.h5")
    Path("text.h5").write_text("not HDF5")
    with pytest.raises(sim.DataError, match="not a readable HDF5 file"):
        sim.write_xdmf("text.h5")
    assert not list(tmp_cwd.glob("*.xdmf"))
