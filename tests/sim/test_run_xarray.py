"""`sim.read(path).to_xarray()`: run files of every family and sweeps as xarray Datasets
whose values are the HDF5 datasets, with named dimensions, coordinates and the units the
model declares."""

import json
from pathlib import Path

import h5py
import numpy as np
import pytest

import sim

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"
RNG = np.random.default_rng(3)


def test_ode_run_file(tmp_cwd):
    sim.run(
        sim.load_config(EXPERIMENTS / "lotka_volterra.toml", ["time.save=11", "time.t1=5.0"]),
        output="lv.h5",
    )
    ds = sim.read("lv.h5").to_xarray()
    with h5py.File("lv.h5", "r") as f:
        np.testing.assert_array_equal(ds["time"], f["time"][()])
        assert sorted(ds.data_vars) == sorted(f["observables"])
        for name, dataset in f["observables"].items():
            assert ds[name].dims == ("time",)
            np.testing.assert_array_equal(ds[name], dataset[()])
        assert ds.attrs["config"] == f.attrs["config"] and ds.attrs["model"] == "lotka_volterra"
    # its rates are per year (alpha in 1/year): the time axis says so
    assert ds["time"].attrs == {"long_name": "time", "units": "year"}
    # the same as the in-memory result's view
    assert ds.identical(sim.RunResult.from_record(sim.read("lv.h5")).to_xarray())


def test_pde_run_file(tmp_cwd):
    sets = ["grid.points=[16]", "time.t1=2.0", "time.save=5"]
    sim.run(sim.load_config(EXPERIMENTS / "kuramoto_sivashinsky.toml", sets), output="ks.h5")
    ds = sim.read("ks.h5").to_xarray()
    with h5py.File("ks.h5", "r") as f:
        np.testing.assert_array_equal(ds["x"], f["grid/x"][()])
        np.testing.assert_array_equal(ds["time"], f["time"][()])
        assert ds["u"].dims == ("time", "x")
        np.testing.assert_array_equal(ds["u"], f["observables/u"][()])
        np.testing.assert_array_equal(ds["u"].sel(x=f["grid/x"][3]), f["observables/u"][:, 3])
        for name in ("energy", "mass"):
            assert ds[name].dims == ("time",)
            np.testing.assert_array_equal(ds[name], f[f"observables/{name}"][()])
    # the built-in PDEs are in abstract units (length^2/time): no units attribute invented
    assert ds["time"].attrs == {"long_name": "time"} and ds["x"].attrs == {
        "long_name": "x coordinate"
    }


TEXT_PDE = """
[model]
name = "diffusion"
[model.fields]
u = "D * laplace(u)"
[model.parameters]
D = { value = 1e-9, unit = "m^2/s" }
"""


def test_2d_field_with_declared_units_and_sde_ensemble(tmp_cwd):
    x, y = np.linspace(0, 1e-3, 6), np.linspace(0, 2e-3, 4)
    u = RNG.random((3, 6, 4))
    with h5py.File("heat.h5", "w") as f:
        f.attrs.update(format="simjax.run", model="diffusion", config=TEXT_PDE)
        f["time"] = [0.0, 1.0, 2.0]
        f["grid/x"], f["grid/y"] = x, y
        f["observables/u"] = u
    ds = sim.read("heat.h5").to_xarray()
    assert ds["u"].dims == ("time", "x", "y")
    np.testing.assert_array_equal(ds["u"], u)
    assert (
        ds["time"].attrs["units"] == "s" and ds["x"].attrs["units"] == ds["y"].attrs["units"] == "m"
    )
    # an SDE ensemble: [T, paths]; its model's rates are per second
    paths = RNG.normal(size=(3, 5))
    with h5py.File("ou.h5", "w") as f:
        f.attrs.update(format="simjax.run", model="ornstein_uhlenbeck", config="", seed=7)
        f["time"] = [0.0, 0.5, 1.0]
        f["observables/x"] = paths
    ds = sim.read("ou.h5").to_xarray()
    assert ds["x"].dims == ("time", "x_axis_0") and ds.attrs["seed"] == 7
    np.testing.assert_array_equal(ds["x"], paths)
    assert ds["time"].attrs["units"] == "s"


def test_md_run_file_unwraps_positions(tmp_cwd):
    # H5MD: wrapped positions with image counters in a 3 x 3 box; xarray gives the
    # unwrapped positions, as MdRunResult.to_xarray does.
    frames, n = 4, 5
    edges = np.array([3.0, 3.0])
    wrapped = RNG.random((frames, n, 2)) * 3.0
    image = RNG.integers(-2, 3, size=(frames, n, 2)).astype(np.int32)
    energy = RNG.random(frames)
    with h5py.File("md.h5", "w") as f:
        f.attrs.update(format="simjax.run", model="lennard_jones", config="")
        f.create_group("h5md").attrs["version"] = np.array([1, 1], dtype=np.int32)
        for name, value in (
            ("position", wrapped),
            ("image", image),
            ("velocity", -wrapped),
            ("box/edges", np.broadcast_to(edges, (frames, 2))),
        ):
            f[f"particles/all/{name}/value"] = value
            f[f"particles/all/{name}/time"] = np.arange(frames) * 0.5
            f[f"particles/all/{name}/step"] = np.arange(frames) * 100
        f["particles/all/species"] = np.array([0, 0, 1, 1, 1], dtype=np.int32)
        f["particles/all/mass"] = np.ones(n)
        f["observables/potential_energy/value"] = energy
        f["observables/potential_energy/time"] = np.arange(frames) * 0.5
    ds = sim.read("md.h5").to_xarray()
    np.testing.assert_array_equal(ds["position"], wrapped + image * edges)
    np.testing.assert_array_equal(ds["velocity"], -wrapped)
    np.testing.assert_array_equal(ds["potential_energy"], energy)
    np.testing.assert_array_equal(ds["step"], np.arange(frames) * 100)
    np.testing.assert_array_equal(ds["species"], [0, 0, 1, 1, 1])
    assert ds["position"].dims == ("time", "particle", "spatial") and list(
        ds["spatial"].values
    ) == ["x", "y"]
    assert (
        ds["time"].attrs["units"] == "τ" and ds["position"].attrs["units"] == "σ"
    )  # reduced LJ units


def test_sweep_file(tmp_cwd):
    alpha = np.linspace(0.3, 0.8, 4)
    t = np.linspace(0, 1, 3)
    prey = RNG.random((4, 3))
    with h5py.File("sweep.h5", "w") as f:
        f.attrs.update(
            format="simjax.sweep",
            model="lotka_volterra",
            config="",
            mode="grid",
            save="full",
            swept=json.dumps(["alpha"]),
            runs=4,
        )
        f["time"] = t
        f["params/alpha"] = alpha
        f["observables/prey"] = prey
        f["status"] = np.ones(4, dtype=np.int8)
        f["stats/result"] = np.zeros(4, dtype=np.int8)
    ds = sim.read("sweep.h5").to_xarray()
    assert ds["prey"].dims == ("run", "time")
    np.testing.assert_array_equal(ds["prey"], prey)
    np.testing.assert_array_equal(ds["alpha"], alpha)


def test_files_without_an_xarray_view(tmp_cwd):
    with h5py.File("fit.h5", "w") as f:
        f.attrs["format"] = "simjax.fit"
        f["estimate/alpha"] = 0.5
    with pytest.raises(sim.DataError, match="format: 'simjax.fit'"):
        sim.read("fit.h5").to_xarray()
    with h5py.File("broken.h5", "w") as f:
        f.attrs["format"] = "simjax.run"
        f["observables/x"] = np.arange(3.0)
    with pytest.raises(sim.DataError, match="/time: missing"):
        sim.read("broken.h5").to_xarray()
