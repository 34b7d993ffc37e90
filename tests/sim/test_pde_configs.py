"""PDE configs from the command line: every example runs, the run layout, bad input."""

import os
from pathlib import Path

import numpy as np
import pytest

import sim
from tests.helpers import cli

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"
SMALL = {
    "gray_scott.toml": ["grid.points=[32, 32]", "time.t1=20.0", "time.save=3"],
    "kuramoto_sivashinsky.toml": ["grid.points=[64]", "time.t1=5.0", "time.save=6"],
    "kolmogorov_flow.toml": ["grid.points=[16, 16]", "time.t1=0.2", "time.save=3"],
    "kdv_soliton.toml": ["grid.points=[128]", "time.t1=0.1", "time.save=3"],
    "burgers_shock.toml": ["grid.points=[64]", "time.t1=0.1", "time.save=3"],
    "heat_dirichlet.toml": ["grid.points=[33]", "time.t1=0.2", "time.save=3"],
}


@pytest.mark.parametrize("name", sorted(SMALL))
def test_example_pde_configs_run_and_write_the_pde_layout(name, tmp_cwd, capsys):
    args = ["run", str(EXPERIMENTS / name), "-o", "out.h5", "--quiet"]
    for item in SMALL[name]:
        args += ["--set", item]
    code, err = cli(args, capsys)
    assert code == 0, err
    record = sim.read("out.h5")
    model = sim.get_model(record.attrs["model"])
    points = tuple(sim.load_config(EXPERIMENTS / name, SMALL[name]).spec.grid["points"])
    assert record.grid["x"].shape == (points[0],)
    if len(points) > 1:
        assert record.grid["y"].shape == (points[1],)
    for field in model.field_names:
        assert record.observables[field].shape == (len(record.time), *points)
        assert record.initial[field].shape == points
        assert np.all(np.isfinite(record.observables[field]))
    if name == "heat_dirichlet.toml":
        # u(x, t) = exp(-4 pi^2 D t) sin(2 pi x) solves u_t = D u_xx with u(0) = u(1) = 0;
        # 4th-order differences on 33 nodes change the decay rate by ~(2 pi h)^4 / 90.
        x, t = record.grid["x"], record.time
        exact = np.exp(-4 * np.pi**2 * 0.1 * t)[:, None] * np.sin(2 * np.pi * x)[None, :]
        np.testing.assert_allclose(record.observables["u"], exact, atol=2e-5)
    # `sim plot` draws the run (space-time images and snapshot lines, or 2D field images).
    from .test_plot import plot

    plot("out.h5", capsys)


def test_initial_field_from_hdf5(tmp_cwd, capsys):
    import h5py

    x = np.linspace(0.0, 2 * np.pi, 32, endpoint=False)
    with h5py.File("u0.h5", "w") as f:
        f["u"] = np.cos(2 * x)
    Path("c.toml").write_text(
        '[model]\nname = "heat"\n[grid]\npoints = [32]\ndomain = [[0.0, 6.283185307179586]]\n'
        '[params]\ndiffusivity = 0.5\n[initial]\nfile = "u0.h5"\ndataset = "/u"\n[time]\nt1 = '
        "0.5\nsave = 2\ndt = 0.05\n"
    )
    code, err = cli(["run", "c.toml", "-o", "h.h5", "--quiet"], capsys)
    assert code == 0, err
    record = sim.read("h.h5")
    # cos(2x) decays as exp(-4 D t) (Fourier mode of the heat equation).
    np.testing.assert_allclose(
        record.observables["u"][-1], np.exp(-4 * 0.5 * 0.5) * np.cos(2 * x), atol=1e-12
    )


BASE = (
    '[model]\nname = "heat"\n[grid]\npoints = [32]\ndomain = [[0.0, '
    '6.283185307179586]]\n[initial]\nkind = "sine"\n[time]\nt1 = 0.5\nsave = 3\ndt = 0.05\n'
)
FROM_FILE = BASE.replace('kind = "sine"\n', 'file = "u0.h5"\ndataset = "/u"\n')
BOUNDED = (
    '[model]\nname = "heat_fd"\n[grid]\npoints = [33]\ndomain = [[0.0, '
    '1.0]]\n[initial]\nkind = "sine"\n[time]\nt1 = 0.2\nsave = 3\n[solver]\nmethod = "tsit5"\n'
)
# case: (config text, --set overrides, what the one stderr line must contain)
BAD = {
    "odd_points": (BASE, ["grid.points=[31]"], "c.toml: grid.points"),
    "zero_points": (BASE, ["grid.points=[0]"], "c.toml: grid.points"),
    "domain_reversed": (BASE, ["grid.domain=[[1.0, 0.0]]"], "c.toml: grid.domain"),
    "domain_not_pairs": (BASE, ["grid.domain=[0.0, 1.0]"], "c.toml: grid.domain"),
    "domain_wrong_length": (BASE, ["grid.domain=[[0.0, 1.0], [0.0, 1.0]]"], "c.toml: grid.domain"),
    "unknown_grid_key": (BASE, ["grid.pints=[32]"], "c.toml: grid.pints"),
    "dt_not_dividing": (BASE, ["time.dt=0.07"], "c.toml: time.dt"),
    "negative_dt": (BASE, ["time.dt=-0.05"], "c.toml: time.dt"),
    "zero_dt": (BOUNDED, ["time.dt=0.0"], "c.toml: time.dt"),
    "unstable_explicit_dt": (
        BOUNDED,
        ["time.dt=0.05"],
        "c.toml: time.dt: 0.05 is beyond the stability limit",
    ),
    "unknown_boundary_kind": (BOUNDED, ["grid.boundary=neuman"], "Perhaps you meant 'neumann'"),
    "unknown_kind": (BASE, ["initial.kind=gausian"], "Perhaps you meant 'gaussian'"),
    "unknown_method": (BASE, ["solver.method=etdrk5"], "c.toml: solver.method"),
    "unknown_fd_method": (BOUNDED, ["solver.method=tsit"], "Perhaps you meant 'tsit5'"),
    "float16": (BASE, ["solver.dtype=float16"], "c.toml: solver.dtype"),
    "unknown_solver_key": (BASE, ["solver.rtol=1e-6"], "c.toml: solver.rtol"),
    "missing_initial_file": (FROM_FILE.replace("u0.h5", "none.h5"), [], "none.h5"),
    "missing_initial_dataset": (FROM_FILE, ["initial.dataset=/v"], "u0.h5: /v: no such dataset"),
    "initial_shape_mismatch": (
        FROM_FILE,
        ["grid.points=[64]"],
        "u0.h5: /u: shape (32,) does not match the grid (64,)",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_pde_input_one_line_exit_2(case, tmp_cwd, capsys):
    import h5py

    text, overrides, fragment = BAD[case]
    Path("c.toml").write_text(text)
    with h5py.File("u0.h5", "w") as f:
        f["u"] = np.sin(np.linspace(0.0, 2 * np.pi, 32, endpoint=False))
    Path("keep.h5").write_bytes(b"precious")
    before = sorted(os.listdir("."))
    extra = [a for item in overrides for a in ("--set", item)]
    code, err = cli(["run", "c.toml", "-o", "keep.h5", "--quiet", *extra], capsys)
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert fragment in err, err
    assert sorted(os.listdir(".")) == before and Path("keep.h5").read_bytes() == b"precious"


# u_t = D u_xx written four ways on 21 nodes of [0, 1] with Dirichlet sides, by explicit
# Euler at dt = 0.0025 (h = 0.05). The semi-discrete operator's eigenvalues are
# -(4 D / h^2) sin^2(k pi / 40), k = 1..19 (the second-difference matrix), so Euler is
# stable for dt <= h^2 / (2 D cos^2(pi / 40)): D <= 0.50310 at this dt. The classical
# bound dt <= h^2 / (2 D) gives D <= 0.5.
HEAT_FORMS = ("D * laplace(u)", "laplace(D * u)", "laplace(u) * D", "0.5 * laplace(2 * D * u)")
HEAT_TEXT = """
[model]
name = "heat_text"
[model.fields]
u = "{form}"
[model.parameters]
D = {D}
[grid]
points = [21]
domain = [[0.0, 1.0]]
boundary = "dirichlet"
boundary_value = 0.0
[initial]
u = "sin(3.141592653589793 * x) + 0.01 * sin(19 * 3.141592653589793 * x)"
[time]
t1 = 0.05
save = 3
dt = 0.0025
[solver]
method = "euler"
"""


@pytest.mark.parametrize("form", HEAT_FORMS)
def test_the_explicit_step_limit_is_the_operators_however_it_is_written(form, tmp_cwd, capsys):
    """Past the exact limit (D = 0.515, 2.4% beyond it) every form is refused in one line
    naming time.dt, with nothing written; within it (D = 0.5, the classical bound, and
    0.49) every form runs and the highest mode decays. Writing laplace(D * u) once let an
    unstable step through (the limit was read from the coefficient of laplace(u))."""
    Path("c.toml").write_text(HEAT_TEXT.format(form=form, D=0.515))
    code, err = cli(["run", "c.toml", "-o", "out.h5", "--quiet"], capsys)
    assert (
        code == 2
        and len(err.strip().splitlines()) == 1
        and "c.toml: time.dt: 0.0025 is beyond the stability limit" in err
    ), err
    assert not Path("out.h5").exists()
    # The limit it names: 0.0025 * 0.503097 / 0.515 (measured to 4 digits).
    assert "0.002442" in err, err
    for d in (0.5, 0.49):
        Path("c.toml").write_text(HEAT_TEXT.format(form=form, D=d))
        code, err = cli(["run", "c.toml", "-o", "out.h5", "--quiet"], capsys)
        assert code == 0, err
        u = np.asarray(sim.read("out.h5").observables["u"])
        assert np.max(np.abs(u[-1])) < np.max(np.abs(u[0])), u
        Path("out.h5").unlink()


def test_the_gray_scott_text_example_keeps_its_pattern(tmp_cwd, capsys):
    """experiments/gray_scott_text.toml starts from Pearson's square, nothing negative
    (u = 1 and v = 0 outside it, to 1%), and its spots spread and divide: v's spatial
    standard deviation stays above 0.015 and grows. (Started from one random field in
    [-1, 1] for u and v, as the README once wrote it, v's deviation fell from 0.33 to
    1e-6 by t = 200.)"""
    from scipy import ndimage

    name = EXPERIMENTS / "gray_scott_text.toml"
    overrides = ["--set", "time.t1=800.0", "--set", "time.save=5"]
    code, err = cli(["run", str(name), "-o", "out.h5", "--quiet", *overrides], capsys)
    assert code == 0, err
    record = sim.read("out.h5")
    u, v = (np.asarray(record.observables[f]) for f in ("u", "v"))
    x, y = np.meshgrid(record.grid["x"], record.grid["y"], indexing="ij")
    square = (np.abs(x - 1.25) < 0.1) & (np.abs(y - 1.25) < 0.1)
    np.testing.assert_allclose(u[0][~square], 1.0, atol=0.0101)
    np.testing.assert_allclose(u[0][square], 0.5, atol=0.0051)
    np.testing.assert_allclose(v[0][~square], 0.0, atol=1e-15)  # (through the FFT)
    np.testing.assert_allclose(v[0][square], 0.25, atol=0.0026)
    assert np.ptp(u[0][~square]) > 0.01  # (perturbed, not uniform)
    spread = v.std(axis=(1, 2))
    # (measured: 0.0214, 0.0216, 0.0204, 0.0234, 0.0257 at t = 0, 200, ..., 800)
    assert np.all(spread > 0.015) and spread[-1] > 1.1 * spread[0], spread
    spots = [ndimage.label(f > 0.2, structure=np.ones((3, 3)))[1] for f in v]
    assert spots[0] == 1 and spots[-1] >= 4, spots
    # (no concentration goes negative beyond the Fourier solution's undershoot at the
    # spots' steep edges: -0.0053, as the built-in gray_scott's -0.0052 from its start)
    assert np.min(u) > 0.2 and np.min(v) > -0.01, (np.min(u), np.min(v))
    np.testing.assert_allclose(record.observables["mean_v"], v.mean(axis=(1, 2)), rtol=1e-12)
    from .test_plot import plot

    plot("out.h5", capsys)
