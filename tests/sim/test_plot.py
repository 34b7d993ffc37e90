"""`sim plot` and `sim.plot`: figures of every kind of file and result, bad input.

The example configs' outputs are drawn where they run: tests/sim/test_examples.py (and the
files it names); `check_png` and `plot` here are what they check the figures with. This
file draws hand-made files of every layout (edge cases included: one save time, NaN from a
failed run, a single grid point, failed sweep runs, divergent draws), checks what
`sim.plot` accepts in Python, and the command's bad input: one line on stderr naming the
file, exit code 2, no figure written and an existing one untouched.
"""

import json
from pathlib import Path

import h5py
import numpy as np
import pytest

import sim
from tests.helpers import cli

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"


def check_png(path, min_colours=20):
    """A non-empty PNG whose pixels are not all one colour (a drawn figure)."""
    from matplotlib.image import pil_to_array
    from PIL import Image

    path = Path(path)
    assert path.exists() and path.stat().st_size > 1000, path
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with Image.open(path) as image:
        pixels = pil_to_array(image)
    assert (
        pixels.dtype == np.uint8
        and pixels.ndim == 3
        and pixels.shape[0] > 200
        and pixels.shape[1] > 200
    )
    # The statistics of the pixels are taken over their distinct colours, each weighted
    # by its number of pixels: the same numbers, from a few thousand colours rather than
    # a million pixels.
    packed = (
        (pixels[..., 0].astype(np.uint32) << 16)
        | (pixels[..., 1].astype(np.uint32) << 8)
        | pixels[..., 2]
    )
    colours, counts = np.unique(packed, return_counts=True)
    assert len(colours) > min_colours, len(colours)  # lines, labels, colour maps
    rgb = np.stack([colours >> 16, (colours >> 8) & 255, colours & 255], axis=1) / 255.0
    share = counts / counts.sum()
    mean = share @ rgb.mean(axis=1)
    assert (
        np.sqrt(share @ ((rgb - mean) ** 2).mean(axis=1)) > 0.05
    )  # the standard deviation of every channel of every pixel
    # Not a blank canvas with a title: a good share of the pixels are not background.
    assert share @ np.any(rgb < 0.95, axis=1) > 0.01


def plot(path, capsys, figure=None):
    """`sim plot PATH -o FIGURE` succeeds, silently with --quiet, and draws a figure."""
    figure = figure or Path(path).with_suffix(".png").name
    code, err = cli(["plot", str(path), "-o", figure, "--quiet"], capsys)
    assert code == 0, err
    assert err == "", err  # no warnings from numpy or matplotlib
    check_png(figure)
    return figure


# ----------------------------------------------------------------------------- layouts


def write(path, attrs, tree):
    def put(group, node):
        for key, value in node.items():
            if isinstance(value, dict):
                put(group.create_group(key), value)
            else:
                group[key] = value

    with h5py.File(path, "w") as f:
        f.attrs.update(attrs)
        put(f, tree)


T = np.linspace(0.0, 1.0, 11)
X = np.linspace(0.0, 1.0, 16)
RUN = {"format": "simjax.run", "model": "m"}
SWEEP = {"format": "simjax.sweep", "model": "m", "swept": '["alpha"]', "save": "full"}
SWEEP2 = {**SWEEP, "swept": '["alpha", "beta"]', "grid_shape": "[5, 3]"}
FIT = {"format": "simjax.fit", "model": "m"}
POSTERIOR = {"format": "simjax.posterior", "model": "m"}
MD = {"format": "simjax.run", "model": "lennard_jones"}
ALPHA = np.linspace(1.0, 2.0, 5)
A, B = (v.ravel() for v in np.meshgrid(ALPHA, [1.0, 2.0, 3.0], indexing="ij"))
RNG = np.random.default_rng(0)
DRAWS = RNG.normal(size=(2, 50))
POSITIONS = RNG.uniform(0.0, 5.0, size=(3, 64, 3))
BOX = {"edges": np.full(3, 5.0)}


def fit_tree(**changes):
    tree = {
        "data": {"time": T, "observables": {"a": np.sin(T)}},
        "time": T,
        "prediction": {"a": np.sin(T)},
        "loss_history": np.array([3.0, 2.0, 1.0]),
        "estimate": {"k": 1.0},
        "stderr": {"k": 0.1},
    }
    return {**tree, **changes}


# Files that draw: name -> (attrs, tree).
DRAWABLE = {
    "ode_three_phase": (RUN, {"time": T, "observables": {"a": np.sin(T), "b": np.cos(T), "c": T}}),
    "ode_vector_observable": (
        RUN,
        {"time": T, "observables": {"a": np.stack([np.sin(T), np.cos(T), T], 1)}},
    ),
    "ode_one_save": (RUN, {"time": T[:1], "observables": {"a": np.sin(T[:1])}}),
    "ode_failed_run_nan": (
        RUN,
        {"time": T, "observables": {"a": np.where(T < 0.5, T, np.nan), "b": np.full(11, np.nan)}},
    ),
    "ode_log_time": (
        RUN,
        {
            "time": np.concatenate([[0.0], np.logspace(-4, 4, 10)]),
            "observables": {"a": np.arange(11.0)},
        },
    ),
    "pde_1d": (
        RUN,
        {
            "time": T,
            "grid": {"x": X},
            "observables": {"u": np.sin(np.add.outer(T, X) * 6), "energy": T},
        },
    ),
    "pde_1d_all_nan": (
        RUN,
        {"time": T, "grid": {"x": X}, "observables": {"u": np.full((11, 16), np.nan), "energy": T}},
    ),
    "pde_1d_one_point": (
        RUN,
        {"time": T, "grid": {"x": X[:1]}, "observables": {"u": T[:, None], "energy": T}},
    ),
    "pde_1d_one_save": (
        RUN,
        {"time": T[:1], "grid": {"x": X}, "observables": {"u": np.sin(6 * X)[None]}},
    ),
    "pde_2d": (
        RUN,
        {"time": T, "grid": {"x": X, "y": X}, "observables": {"u": RNG.random((11, 16, 16))}},
    ),
    "pde_3d": (
        RUN,
        {
            "time": T,
            "grid": {"x": X, "y": X, "z": X[:4]},
            "observables": {"u": RNG.random((11, 16, 16, 4))},
        },
    ),
    "md": (
        MD,
        {
            "h5md": {"version": np.array([1, 1])},
            "particles": {"all": {"position": {"value": POSITIONS}, "box": BOX}},
            "observables": {
                "potential_energy": {"time": T[:3], "value": T[:3]},
                "temperature": {"time": T[:3], "value": T[:3]},
                "pressure": {"value": T[:3]},
            },
        },
    ),
    # an H5MD file of another program (no format, no model): drawn by the family that recognises its
    # layout
    "md_of_another_program": (
        {},
        {
            "h5md": {"version": np.array([1, 1])},
            "particles": {"all": {"position": {"value": POSITIONS}, "box": BOX}},
        },
    ),
    "md_positions_only": (
        MD,
        {
            "h5md": {"version": np.array([1, 1])},
            "particles": {"all": {"position": {"value": POSITIONS}, "box": BOX}},
            "observables": {},
        },
    ),
    "md_no_periodic_box": (
        MD,
        {
            "h5md": {"version": np.array([1, 1])},
            "particles": {"all": {"position": {"value": POSITIONS}, "box": {"dimension": 3}}},
            "observables": {"potential_energy": {"time": T[:3], "value": T[:3]}},
        },
    ),
    "sweep_lines": (
        SWEEP,
        {
            "status": np.ones(5),
            "time": T,
            "params": {"alpha": ALPHA},
            "observables": {"p": np.outer(ALPHA, T)},
        },
    ),
    "sweep_some_failed": (
        SWEEP,
        {
            "status": np.array([1.0, 2, 1, 2, 1]),
            "time": T,
            "params": {"alpha": ALPHA},
            "observables": {"p": np.outer(ALPHA, T)},
        },
    ),
    "sweep_all_failed": (
        SWEEP,
        {
            "status": np.full(5, 2.0),
            "time": T,
            "params": {"alpha": ALPHA},
            "observables": {"p": np.full((5, 11), np.nan)},
        },
    ),
    "sweep_field": (
        SWEEP,
        {
            "status": np.ones(5),
            "time": T,
            "params": {"alpha": ALPHA},
            "observables": {"u": RNG.random((5, 11, 16))},
        },
    ),
    "sweep_initial": (
        {**SWEEP, "swept": '["initial.prey"]'},
        {
            "status": np.ones(5),
            "time": T,
            "initial": {"prey": ALPHA},
            "observables": {"p": np.outer(ALPHA, T)},
        },
    ),
    "sweep_log_spaced": (
        SWEEP,
        {
            "status": np.ones(5),
            "time": T,
            "params": {"alpha": np.logspace(-3, 3, 5)},
            "observables": {"p": RNG.random((5, 11))},
        },
    ),
    "sweep_grid_all_failed": (
        SWEEP2,
        {
            "status": np.full(15, 2.0),
            "time": T,
            "params": {"alpha": A, "beta": B},
            "observables": {"p": np.full((15, 11), np.nan)},
        },
    ),
    "sweep_grid_bad_shape": (
        {**SWEEP2, "grid_shape": "[-5, -3]"},
        {
            "status": np.ones(15),
            "time": T,
            "params": {"alpha": A, "beta": B},
            "observables": {"p": np.outer(A * B, T)},
        },
    ),
    "sweep_scattered": (
        {**SWEEP2, "grid_shape": "null"},
        {
            "status": np.ones(15),
            "time": T,
            "params": {"alpha": A, "beta": B},
            "observables": {"p": np.outer(A * B, T)},
        },
    ),
    "sweep_summary": (
        {**SWEEP, "save": "summary"},
        {
            "status": np.ones(5),
            "params": {"alpha": ALPHA},
            "observables": {"p": {"min": ALPHA, "max": ALPHA, "mean": ALPHA, "final": ALPHA}},
        },
    ),
    "fit": (FIT, fit_tree()),
    "fit_no_stderr": (FIT, {k: v for k, v in fit_tree().items() if k != "stderr"}),
    "fit_nan_loss": (FIT, fit_tree(loss_history=np.array([np.nan, np.nan]))),
    "fit_field": (
        FIT,
        fit_tree(
            data={"time": T, "observables": {"u": RNG.random((11, 16))}},
            prediction={"u": RNG.random((11, 16))},
        ),
    ),
    "posterior": (
        POSTERIOR,
        {
            "posterior": {"a": DRAWS, "b": DRAWS**2},
            "sample_stats": {"diverging": np.zeros((2, 50), bool)},
            "predictive": {"time": T, "a": {"5%": T - 1, "50%": T, "95%": T + 1}},
            "data": {"time": T, "observables": {"a": T}},
        },
    ),
    "posterior_divergent_one_draw": (
        POSTERIOR,
        {
            "posterior": {"a": DRAWS[:, :1], "b": DRAWS[:, :1]},
            "sample_stats": {"diverging": np.ones((2, 1), bool)},
        },
    ),
    "posterior_all_nan": (POSTERIOR, {"posterior": {"a": DRAWS * np.nan, "b": DRAWS}}),
}


@pytest.mark.parametrize("name", sorted(DRAWABLE))
def test_every_layout_draws(name, tmp_cwd, capsys):
    write(f"{name}.h5", *DRAWABLE[name])
    plot(f"{name}.h5", capsys)


# Files that cannot be drawn: name -> (attrs, tree, what the one stderr line says).
UNDRAWABLE = {
    "no_format": ({}, {"x": T}, "not a simjax result"),
    "unknown_format": (
        {"format": "simjax.banana"},
        {"x": T},
        "unknown file format 'simjax.banana'",
    ),
    "ode_text_values": (
        RUN,
        {"time": T, "observables": {"a": np.array([b"x"] * 11)}},
        "/observables/a: expected numbers",
    ),
    "ode_no_observables": (RUN, {"time": T}, "/observables: missing"),
    "ode_empty_observables": (
        RUN,
        {"time": T, "observables": {}},
        "/observables: expected a group of datasets",
    ),
    "ode_time_is_a_group": (RUN, {"time": {"t": T}, "observables": {"a": T}}, "/time: is a group"),
    "ode_short_observable": (
        RUN,
        {"time": T, "observables": {"a": T[:5]}},
        "/observables/a: has 5 entries",
    ),
    "pde_field_off_grid": (
        RUN,
        {"time": T, "grid": {"x": X}, "observables": {"u": np.ones((11, 7))}},
        "/observables/u: expected shape",
    ),
    "pde_no_coordinates": (
        RUN,
        {"time": T, "grid": {"q": X}, "observables": {"u": np.ones((11, 16))}},
        "/grid: expected datasets x",
    ),
    "sweep_swept_malformed": (
        {**SWEEP, "swept": "[alpha"},
        {"status": np.ones(5), "params": {"alpha": ALPHA}, "observables": {"p": ALPHA}},
        "swept: missing or malformed",
    ),
    "sweep_summary_empty": (
        {**SWEEP, "save": "summary"},
        {"status": np.ones(5), "params": {"alpha": ALPHA}, "observables": {"p": {}}},
        "/observables/p: is an empty group",
    ),
    "sweep_missing_values": (
        SWEEP,
        {"status": np.ones(5), "observables": {"p": ALPHA}},
        "/params/alpha: missing",
    ),
    "fit_no_estimate": (
        FIT,
        {k: v for k, v in fit_tree().items() if k != "estimate"},
        "/estimate: missing",
    ),
    "fit_other_observable": (
        FIT,
        fit_tree(prediction={"b": T}),
        "/prediction: no prediction for the observed a",
    ),
    "posterior_shapes_differ": (
        POSTERIOR,
        {"posterior": {"a": DRAWS, "b": DRAWS[:, :5]}},
        "/posterior/b: expected shape (2, 50)",
    ),
    "posterior_band_not_a_group": (
        POSTERIOR,
        {
            "posterior": {"a": DRAWS},
            "predictive": {"time": T, "a": T},
            "data": {"time": T, "observables": {"a": T}},
        },
        "/predictive/a/5%: missing",
    ),
    "md_zero_box_edge": (
        MD,
        {
            "h5md": {"version": np.array([1, 1])},
            "particles": {
                "all": {
                    "position": {"value": POSITIONS},
                    "box": {"edges": np.array([0.0, 5.0, 5.0])},
                }
            },
        },
        "/particles/all/box/edges: expected 3 positive box lengths",
    ),
    "md_nothing_to_draw": (
        MD,
        {"h5md": {"version": np.array([1, 1])}},
        "no scalar observables and no particle positions",
    ),
}


@pytest.mark.parametrize("name", sorted(UNDRAWABLE))
def test_undrawable_file_one_line_exit_2(name, tmp_cwd, capsys):
    attrs, tree, message = UNDRAWABLE[name]
    write("bad.h5", attrs, tree)
    Path("bad.png").write_bytes(b"keep")
    code, err = cli(["plot", "bad.h5"], capsys)
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: bad.h5: ") and message in lines[0], err
    assert Path("bad.png").read_bytes() == b"keep"
    assert sorted(p.name for p in tmp_cwd.iterdir()) == ["bad.h5", "bad.png"]


# ----------------------------------------------------------------------------- Python


@pytest.fixture(scope="module")
def lv_result():
    return sim.run(sim.load_config(EXPERIMENTS / "lotka_volterra.toml"))


def same_tree(a, b) -> bool:
    if isinstance(a, dict) or isinstance(b, dict):
        return (
            isinstance(a, dict)
            and isinstance(b, dict)
            and a.keys() == b.keys()
            and all(same_tree(a[k], b[k]) for k in a)
        )
    a, b = np.asarray(a), np.asarray(b)
    return (
        a.dtype == b.dtype
        and a.shape == b.shape
        and (np.array_equal(a, b, equal_nan=a.dtype.kind in "fc"))
    )


def assert_record_is_the_file(result, path):
    """`result.to_record()`, built in memory, is what `sim.read` gives for its saved file
    (the attribute `created` aside: the time of writing)."""
    memory, disk = result.to_record(), sim.read(path)
    drop = lambda attrs: {k: v for k, v in attrs.items() if k != "created"}  # noqa: E731
    assert drop(memory.attrs) == drop(disk.attrs)
    assert same_tree(dict(memory.items()), dict(disk.items()))


def test_sim_plot_of_a_run_result_record_path_and_trajectory(lv_result, tmp_cwd):
    from matplotlib.figure import Figure

    opened = []
    original = h5py.File
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(
            h5py, "File", lambda name, *a, **k: opened.append(name) or original(name, *a, **k)
        )
        fig = sim.plot(lv_result)
    assert opened and not any(
        isinstance(name, (str, Path)) for name in opened
    )  # drawn from memory: no file written
    assert isinstance(fig, Figure) and len(fig.axes) == 3  # prey, predator, phase portrait
    assert fig._suptitle.get_text() == (
        "lotka_volterra run: alpha = 0.55, beta = 0.028, gamma = 0.8, delta = 0.024 · RunResult"
    )
    lv_result.save("lv.h5")
    assert_record_is_the_file(lv_result, "lv.h5")
    record = sim.read("lv.h5")
    assert len(sim.plot(record).axes) == 3
    fig = sim.plot("lv.h5", "lv.svg", title="predator and prey")
    assert fig._suptitle.get_text() == "predator and prey"
    assert Path("lv.svg").read_text().lstrip().startswith("<?xml")
    sim.plot(Path("lv.h5"), Path("lv.pdf"))
    assert Path("lv.pdf").read_bytes()[:5] == b"%PDF-"
    sim.plot(record, "lv.jpg")
    assert Path("lv.jpg").read_bytes()[:2] == b"\xff\xd8"
    fig.savefig("lv.png")
    check_png("lv.png")
    # A trajectory from sim.simulate draws too (three observables: a 3D phase portrait).
    import jax.numpy as jnp

    fig = sim.plot(sim.simulate(sim.get_model("lorenz"), None, jnp.linspace(0.0, 2.0, 201)))
    assert isinstance(fig, Figure) and len(fig.axes) == 4


def panel_labels(fig) -> list[str]:
    """The y labels of a figure's panels over time, without their units."""
    return [ax.get_ylabel().split(" (")[0] for ax in fig.axes if ax.get_title() == ""]


def test_a_trajectory_is_drawn_in_the_model_order_as_its_run_file(tmp_cwd):
    # A Trajectory's dict of observables comes out of the compiled program ordered by name;
    # its figure follows the model's order of states all the same, as the run file's does
    # (HDF5 creation order).
    import jax
    import jax.numpy as jnp

    from physics.ode import ode_model

    t = jnp.linspace(0.0, 60.0, 121)
    sir = sim.get_model("sir")
    traj = sim.simulate(sir, None, t)
    assert list(traj.observables) == sorted(traj.observables)  # (the dict: by name)
    assert traj.observable_names == sir.observable_names
    order = ["susceptible", "infected", "recovered", "reproduction number"]
    assert panel_labels(sim.plot(traj)) == order
    Path("sir.toml").write_text('[model]\nname = "sir"\n[time]\nt1 = 60.0\nsave = 121\n')
    sim.run(sim.load_config("sir.toml")).save("sir.h5")
    assert panel_labels(sim.plot("sir.h5")) == order

    # Written as text (S, I, R: alphabetically I, R, S), also under jax.jit
    text = ode_model(
        "sir_text",
        {"S": "-beta * S * I / N", "I": "beta * S * I / N - gamma * I", "R": "gamma * I"},
        {"beta": 0.3, "gamma": 0.1, "N": 1000.0},
    )
    initial = {"S": 990.0, "I": 10.0, "R": 0.0}
    traj = sim.simulate(text, None, t, initial=initial)
    assert panel_labels(sim.plot(traj)) == ["S", "I", "R"]
    jitted = jax.jit(lambda p: sim.simulate(text, p, t, initial=initial))(text.default_params())
    assert jitted.observable_names == ("S", "I", "R")
    assert panel_labels(sim.plot(jitted)) == ["S", "I", "R"]

    # Predator-prey: prey before predator, in the panels and on the phase portrait's axes
    lv = sim.get_model("lotka_volterra")
    fig = sim.plot(sim.simulate(lv, None, jnp.linspace(0.0, 20.0, 201)))
    assert panel_labels(fig) == ["prey", "predator"]
    (phase,) = [ax for ax in fig.axes if ax.get_title() == "phase portrait"]
    assert (phase.get_xlabel(), phase.get_ylabel()) == ("prey", "predator")

    # A Trajectory made by hand keeps its dict's order
    hand = sim.Trajectory(
        time=t[:3],
        observables={"b": jnp.zeros(3), "a": jnp.ones(3)},
        final_state=None,
        stats={"num_steps": jnp.asarray(2), "result": jnp.asarray(0)},
    )
    assert panel_labels(sim.plot(hand)) == ["b", "a"]


def test_sim_plot_refuses_what_it_cannot_draw(lv_result, tmp_cwd):
    from sim import DataError, InputError

    with pytest.raises(
        TypeError, match="sim.plot draws a file path, a sim.Record or a simjax result; got dict"
    ):
        sim.plot({"time": [0.0, 1.0]})
    with pytest.raises(DataError, match="missing.h5"):
        sim.plot("missing.h5")
    Path("folder").mkdir()
    for output, message in [
        ("folder", "is a folder"),
        ("lv.bmp", "unknown figure type '.bmp'"),
        ("no/lv.png", "folder 'no' does not exist"),
    ]:
        with pytest.raises(InputError, match=message):
            sim.plot(lv_result, output)
    assert sorted(p.name for p in tmp_cwd.iterdir()) == ["folder"]


def test_figure_written_atomically(lv_result, tmp_cwd, monkeypatch):
    # A figure that fails while being written leaves the existing file and no temporary.
    from matplotlib.figure import Figure

    Path("lv.png").write_bytes(b"keep")

    def fail(self, *args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(Figure, "savefig", fail)
    with pytest.raises(OSError, match="disk full"):
        sim.plot(lv_result, "lv.png")
    assert Path("lv.png").read_bytes() == b"keep"
    assert sorted(p.name for p in tmp_cwd.iterdir()) == ["lv.png"]


# ----------------------------------------------------------------------------- bad input


BAD = {
    "missing file": (["plot", "nothing.h5"], "nothing.h5"),
    "folder as file": (["plot", "folder"], "folder"),
    "not HDF5": (["plot", "notes.h5"], "notes.h5"),
    "empty file": (["plot", "empty.h5"], "empty.h5"),
    "not a simjax file": (["plot", "plain.h5"], "plain.h5"),
    "output is a folder": (["plot", "lv.h5", "-o", "folder"], "folder"),
    "unknown figure type": (["plot", "lv.h5", "-o", "lv.bmp"], "lv.bmp"),
    "no figure suffix": (["plot", "lv.h5", "-o", "figure"], "figure"),
    "missing output folder": (["plot", "lv.h5", "-o", "missing/lv.png"], "missing/lv.png"),
}


@pytest.fixture
def plot_inputs(lv_result, tmp_cwd):
    lv_result.save("lv.h5")
    Path("folder").mkdir()
    Path("notes.h5").write_text("not hdf5\n")
    Path("empty.h5").write_bytes(b"")
    with h5py.File("plain.h5", "w") as f:
        f["x"] = np.arange(3.0)
    Path("existing.png").write_bytes(b"keep")
    return tmp_cwd


# Bad FILEs once with `-o existing.png`, once with the default figure name (FILE's name
# with .png in the working folder) already taken.
CASES = [
    (case, default)
    for case, (argv, _) in sorted(BAD.items())
    for default in ([False, True] if "-o" not in argv else [False])
]


@pytest.mark.parametrize(
    ("case", "default_output"),
    CASES,
    ids=[f"{c}{' (default figure)' if d else ''}" for c, d in CASES],
)
def test_bad_plot_input_one_line_exit_2_nothing_written(case, default_output, plot_inputs, capsys):
    argv, named = BAD[case]
    if default_output:
        Path(Path(argv[1]).with_suffix(".png").name).write_bytes(b"keep")
    elif "-o" not in argv:
        argv = argv + ["-o", "existing.png"]
    before = {p.name: p.read_bytes() if p.is_file() else None for p in plot_inputs.iterdir()}
    code, err = cli(argv, capsys)
    assert code == 2, err
    lines = err.strip().splitlines()
    assert (
        len(lines) == 1
        and lines[0].startswith("error: ")
        and named in lines[0]
        and "Traceback" not in err
    ), err
    assert {
        p.name: p.read_bytes() if p.is_file() else None for p in plot_inputs.iterdir()
    } == before


def test_plot_writes_beside_the_working_folder_and_reports(lv_result, tmp_cwd, capsys):
    # Without -o the figure is FILE's name with .png in the working folder; without
    # --quiet one line says where it went.
    Path("runs").mkdir()
    lv_result.save("runs/lv.h5")
    code, err = cli(["plot", "runs/lv.h5"], capsys)
    assert code == 0 and err.strip() == "wrote lv.png", err
    check_png("lv.png")
    assert json.loads(sim.read("runs/lv.h5").attrs["versions"])


def test_md_sweep_heatmaps_leave_out_particle_arrays(tmp_cwd):
    positions = RNG.random((15, 11, 4, 3))
    write(
        "s.h5",
        SWEEP2,
        {
            "status": np.ones(15),
            "time": T,
            "params": {"alpha": A, "beta": B},
            "observables": {"position": positions, "temperature": np.outer(A, T)},
        },
    )
    labels = [ax.get_ylabel() for ax in sim.plot("s.h5").axes]
    assert "time mean of temperature" in labels and not any(
        "position" in label for label in labels
    ), labels


def test_run_results_as_xarray(lv_result):
    ds = lv_result.to_xarray()
    np.testing.assert_array_equal(ds["time"], lv_result.time)
    for name, value in lv_result.observables.items():
        assert ds[name].dims == ("time",)
        np.testing.assert_array_equal(ds[name], value)
    assert ds.attrs["model"] == "lotka_volterra" and ds.attrs["config"] == lv_result.config
    # a PDE field on its grid, a field with components, an ensemble of paths
    u, v, paths = RNG.random((11, 16)), RNG.random((11, 2, 16)), RNG.random((11, 5))
    run = sim.RunResult(
        model="m",
        config="",
        time=T,
        observables={"u": u, "v": v, "p": paths},
        params={},
        initial={},
        groups={"grid": {"x": X}},
    )
    ds = run.to_xarray()
    assert (
        ds["u"].dims == ("time", "x")
        and ds["v"].dims == ("time", "v_axis_0", "x")
        and ds["p"].dims == ("time", "p_axis_0")
    )
    np.testing.assert_array_equal(ds["x"], X)
    np.testing.assert_array_equal(ds["v"], v)
    np.testing.assert_array_equal(ds["u"].sel(x=X[3]), u[:, 3])


def test_an_sde_sweep_is_drawn_as_the_mean_of_its_paths(tmp_cwd):
    # x [runs, T, paths]: the figure's lines and their time means are the ensemble means
    # (what the SDE family asks for), not an rms over paths and time.
    x = RNG.normal(size=(5, 11, 4)) + ALPHA[:, None, None]
    attrs = {**SWEEP, "model": "ornstein_uhlenbeck"}
    write(
        "sde.h5",
        attrs,
        {"status": np.ones(5), "time": T, "params": {"alpha": ALPHA}, "observables": {"x": x}},
    )
    fig = sim.plot("sde.h5")
    lines, summary = fig.axes[0], fig.axes[-1]
    drawn = np.array([line.get_ydata() for line in lines.get_lines()])
    np.testing.assert_allclose(drawn, x.mean(axis=2))
    assert (
        summary.get_ylabel() == "time mean of x (mean of 4 paths)"
        and lines.get_ylabel() == "x (mean of 4 paths)"
    )
    np.testing.assert_allclose(summary.get_lines()[0].get_ydata(), x.mean(axis=(1, 2)))


# ----------------------------------------------------------------------------- what figures say

PLOTS = (
    Path(__file__).resolve().parents[1] / "data" / "plots"
)  # small stored runs (make_plot_data.py)


def tick_texts(ax, which="x"):
    axis = ax.xaxis if which == "x" else ax.yaxis
    ax.figure.canvas.draw()
    return [t.get_text() for t in axis.get_ticklabels() if t.get_text()]


def test_spacing_decides_log_axes_not_the_ratio():
    from sim._figure import log_spaced, log_time

    assert not log_time(np.linspace(0.0, 40.0, 4001))  # Lorenz: t[-1] / t[1] = 4000, evenly spaced
    assert log_time(np.array([0.0, 4e-4, 4e-3, 4e-2, 0.4, 4.0, 40.0, 400.0, 4e3, 4e4]))  # Robertson
    assert log_spaced(np.logspace(-2.0, -1.3, 32))  # a ratio of 5 only, but geometric steps
    assert not log_spaced(np.linspace(0.3, 0.8, 32)) and not log_spaced(np.linspace(1.0, 1e4, 50))
    assert log_spaced(
        np.array([1e-3, 1e-2, 0.1, 0.2, 1.0, 10.0])
    )  # neither even: steps more alike in log
    assert not log_spaced(np.array([-1.0, 1.0, 10.0, 100.0]))


def test_lorenz_time_is_linear_and_lotka_volterra_speaks_in_years_and_thousands(tmp_cwd):
    t = np.linspace(0.0, 40.0, 4001)
    write(
        "lorenz.h5",
        {"format": "simjax.run", "model": "lorenz"},
        {"time": t, "observables": {k: np.sin(t * (i + 1)) for i, k in enumerate("xyz")}},
    )
    fig = sim.plot("lorenz.h5")
    assert all(ax.get_xscale() == "linear" for ax in fig.axes[:3])
    fig = sim.plot(PLOTS / "ode_phase.h5")
    assert sorted(ax.get_ylabel() for ax in fig.axes[:2]) == [
        "predator (thousand)",
        "prey (thousand)",
    ]
    assert fig.axes[1].get_xlabel() == "time (year)" and fig.axes[2].get_title() == "phase portrait"
    assert {fig.axes[2].get_xlabel(), fig.axes[2].get_ylabel()} == {
        "predator (thousand)",
        "prey (thousand)",
    }
    # (the config sets all four, to the defaults: the title says what they were)
    assert (
        fig._suptitle.get_text()
        == "lotka_volterra run: alpha = 0.55, beta = 0.028, gamma = 0.8, delta = 0.024 · "
        "ode_phase.h5"
    )


SEIR = """
[model]
name = "seir"
[model.states]
S = "-beta * S * I"
E = "beta * S * I - sigma * E"
I = "sigma * E - gamma * I"
R = "gamma * I"
[model.parameters]
beta = 0.5
sigma = 0.3
gamma = 0.2
[initial]
S = 0.99
E = 0.0
I = 0.01
R = 0.0
[time]
t1 = 20.0
save = 21
"""


def test_states_keep_the_models_order_through_the_file_and_the_figure(tmp_cwd, capsys):
    Path("seir.toml").write_text(SEIR)
    code, err = cli(["run", "seir.toml", "-o", "seir.h5", "--quiet"], capsys)
    assert code == 0, err
    with h5py.File("seir.h5") as f:  # (any reader: HDF5 keeps the creation order)
        assert list(f["observables"]) == ["S", "E", "I", "R"]
    record = sim.read("seir.h5")
    assert list(record["observables"]) == ["S", "E", "I", "R"]
    assert [ax.get_ylabel() for ax in sim.plot(record).axes] == ["S", "E", "I", "R"]
    # A file that iterates alphabetically (written without the order) is drawn in the
    # order the registered model declares: prey above predator, prey on the x axis.
    write(
        "lv.h5",
        {**RUN, "model": "lotka_volterra"},
        {
            "time": np.linspace(0, 10, 60),
            "observables": {"predator": 2 + np.cos(np.arange(60.0)), "prey": np.arange(60.0)},
        },
    )
    fig = sim.plot("lv.h5")
    assert [ax.get_ylabel() for ax in fig.axes[:2]] == ["prey (thousand)", "predator (thousand)"]
    assert fig.axes[2].get_xlabel() == "prey (thousand)"
    # So is a sweep's (its file iterates I, R, S, prevalence).
    assert list(sim.read(PLOTS / "sweep_lines.h5")["observables"]) == ["I", "R", "S", "prevalence"]
    labels = [ax.get_ylabel() for ax in sim.plot(PLOTS / "sweep_lines.h5").axes]
    assert labels[::3] == ["S", "I", "R", "prevalence"], labels


BOEHM = Path(__file__).resolve().parents[1] / "data" / "petab" / "Boehm_JProteomeRes2014"


def test_an_imported_models_run_draws_what_varies_in_six_panels_at_most(tmp_cwd, capsys):
    # STAT5 dimerisation (SBML): 8 species, 9 reaction rates and 10 constant parameters
    # and compartment sizes, all reported as observables.
    Path("boehm.toml").write_text(
        f'[model]\nsbml = "{BOEHM / "model_Boehm_JProteomeRes2014.xml"}"\n'
        '[time]\nt1 = 240.0\nsave = 25\n[solver]\nmethod = "kvaerno5"\n'
    )
    code, err = cli(["run", "boehm.toml", "-o", "boehm.h5", "--quiet"], capsys)
    assert code == 0, err
    record = sim.read("boehm.h5")
    observables = {k: np.asarray(v) for k, v in record["observables"].items()}
    fixed = {k for k, v in observables.items() if np.ptp(v) == 0}
    assert len(observables) == 28 and {"cyt", "nuc", "k_phos", "ratio"} <= fixed
    fig = sim.plot(record)
    assert len(fig.axes) <= 6
    drawn = [line.get_label() for ax in fig.axes for line in ax.get_lines()]
    assert sorted(drawn) == sorted(set(observables) - fixed)  # each that varies, once
    curves = [line.get_ydata() for ax in fig.axes for line in ax.get_lines()]
    for name in fixed:
        assert not any(np.array_equal(c, observables[name]) for c in curves), name
    note = fig._supxlabel.get_text().replace("\n", " ")
    assert note.startswith("constant, not drawn:") and all(f"{n} = " in note for n in fixed)
    # The title stays inside the figure.
    fig.canvas.draw()
    box, page = fig._suptitle.get_window_extent(), fig.bbox
    assert page.x0 <= box.x0 and box.x1 <= page.x1, (box, page)


def test_log_time_axis_for_log_spaced_saves_and_no_phase_portrait_from_ten_points():
    fig = sim.plot(PLOTS / "ode_log_time.h5")  # Robertson at 10 decade-spaced times
    assert len(fig.axes) == 3 and fig.axes[0].get_xscale() == "symlog"
    labels = tick_texts(fig.axes[2])
    assert labels[0] == "0" and len(labels) <= 7 and "×" not in "".join(labels), labels
    assert fig.axes[2].get_xlabel() == "time (s)"
    # The ticks do not overlap: their boxes on the drawn canvas are disjoint.
    boxes = [t.get_window_extent() for t in fig.axes[2].xaxis.get_ticklabels() if t.get_text()]
    assert all(a.x1 < b.x0 for a, b in zip(boxes, boxes[1:], strict=False))


def test_a_title_names_the_parameters_the_config_sets(tmp_cwd):
    def title(params, model="lotka_volterra"):
        config = f'[model]\nname = "{model}"\n[params]\n' + "".join(
            f"{k} = {v}\n" for k, v in params.items()
        )
        write(
            "lv.h5",
            {**RUN, "model": model, "config": config},
            {"time": T, "observables": {"prey": T}},
        )
        return sim.plot("lv.h5")._suptitle.get_text()

    assert (
        title({"alpha": 0.6, "beta": 0.028})
        == "lotka_volterra run: alpha = 0.6, beta = 0.028 · lv.h5"
    )
    assert title({}) == "lotka_volterra run · lv.h5"  # (nothing set: nothing said)
    # More than six: those that differ from the defaults (all, for a model of unknown
    # defaults), six at most and how many more.
    many = {f"k{i}": float(i) for i in range(9)}
    assert title(many, "m") == (
        "m run: k0 = 0, k1 = 1, k2 = 2, k3 = 3, k4 = 4, k5 = 5, and 3 more · lv.h5"
    )
    assert "default parameters" not in title({"alpha": 0.55})


def test_fit_in_calendar_years_with_the_datas_names(tmp_cwd):
    fig = sim.plot(
        PLOTS / "fit.h5"
    )  # lynx-hare: time_offset = 1900, prey = "/hare", predator = "/lynx"
    panels = [ax for ax in fig.axes if ax.get_xlabel() == "year"]
    assert sorted(ax.get_ylabel() for ax in panels) == ["hare (thousand)", "lynx (thousand)"]
    for ax in panels:
        low, high = ax.get_xlim()
        assert 1898 < low < 1900.5 and 1919.5 < high < 1922
        assert all(t.lstrip("−-").isdigit() for t in tick_texts(ax)), tick_texts(ax)  # whole years
        data = next(line for line in ax.get_lines() if line.get_label() == "data")
        np.testing.assert_array_equal(data.get_xdata(), np.arange(1900.0, 1921.0))
    assert "fitted to lynx_hare.h5" in fig._suptitle.get_text()


def test_no_mantissa_times_ten_to_the_zero_on_log_axes():
    from matplotlib.figure import Figure

    from sim._figure import log_axis

    for low, high in [(1.0, 5.5), (0.02, 0.05), (1e-6, 1e3)]:
        ax = Figure().add_subplot()
        ax.plot([0, 1], [low, high])
        log_axis(ax, "y")
        labels = tick_texts(ax, "y")
        assert labels and not any(
            "10^{0}" in t or "times10" in t and "^{0}" in t for t in labels
        ), labels
        assert len(labels) <= 8


def test_posterior_pair_plot_holds_every_quantity_or_says_which_it_leaves_out(tmp_cwd):
    fig = sim.plot(PLOTS / "posterior.h5")
    names = list(sim.read(PLOTS / "posterior.h5")["posterior"])
    labels = {ax.get_xlabel() for ax in fig.axes}
    # (by the names of the file and of its summary table)
    assert set(names) == set(sim.read(PLOTS / "posterior.h5")["summary"]["quantity"].astype(str))
    assert (
        len(names) == 8 and {"alpha", "initial.prey", "sigma.prey", "sigma.predator"} <= labels
    ), labels
    ylabels = {ax.get_ylabel() for ax in fig.axes}
    assert {"alpha\n(1/year)", "initial.prey\n(thousand)", "sigma.predator"} <= ylabels, ylabels
    assert not any("not drawn" in t.get_text() for t in fig.texts)
    draws = {f"q{i}": DRAWS + i for i in range(12)}
    draws["field"] = RNG.normal(size=(2, 50, 3))
    write("many.h5", POSTERIOR, {"posterior": draws})
    note = " ".join(t.get_text() for t in sim.plot("many.h5").texts)
    assert (
        "not drawn: field (shape (3,) per draw); q8, q9 (only the first 10 fit a pair plot)" in note
    )  # (the file orders q0, q1, q10, ...)


def test_md_energies_per_particle_in_reduced_units():
    record = sim.read(PLOTS / "md.h5")
    n = record["particles/all/position/value"].shape[1]
    fig = sim.plot(record)
    energy = next(ax for ax in fig.axes if ax.get_ylabel().startswith("energy"))
    assert energy.get_ylabel() == "energy per particle (ε)" and energy.get_xlabel() == "time (τ)"
    potential = next(line for line in energy.get_lines() if line.get_label() == "potential")
    np.testing.assert_allclose(
        potential.get_ydata(), record["observables/potential_energy/value"] / n
    )
    assert (
        "reduced units" in fig._suptitle.get_text() and f"{n} particles" in fig._suptitle.get_text()
    )
    assert {"temperature (ε/$k_B$)", "pressure (ε/σ³)"} <= {ax.get_ylabel() for ax in fig.axes}


def test_md_panels_have_units_and_quantities_the_run_holds_fixed_are_not_drawn():
    record = sim.read(PLOTS / "md.h5")  # NVT: the box, so volume and density, never change
    time = record["observables/pressure/time"]
    n = record["particles/all/position/value"].shape[1]
    volume = float(np.prod(record["particles/all/box/edges/value"][-1]))
    record["observables"]["volume"] = {"time": time, "value": np.full(len(time), volume)}
    record["observables"]["density"] = {"time": time, "value": np.full(len(time), n / volume)}
    fig = sim.plot(record)
    labels = [ax.get_ylabel() for ax in fig.axes]
    assert not any(label.startswith(("volume", "density")) for label in labels), labels
    note = fig._supxlabel.get_text().replace("\n", " ")
    assert f"volume = {volume:.4g} σ³" in note and f"density = {n / volume:.4g} σ⁻³" in note
    assert all("(" in label for label in labels if label and label != "g(r)"), labels
    # Under a barostat they change: drawn, in units.
    record["observables"]["volume"]["value"] = volume * (1 + 0.01 * np.sin(time))
    record["observables"]["density"]["value"] = n / record["observables"]["volume"]["value"]
    labels = {ax.get_ylabel() for ax in sim.plot(record).axes}
    assert {"volume (σ³)", "density (σ⁻³)"} <= labels, labels


def test_2d_fields_share_one_labelled_colour_scale():
    fig = sim.plot(PLOTS / "pde_2d.h5")  # Gray-Scott u and v, 4 snapshots each
    images = [ax.get_images()[0] for ax in fig.axes if ax.get_images()]
    assert len(images) == 8
    for row in (images[:4], images[4:]):
        assert len({im.get_clim() for im in row}) == 1
    bars = [ax for ax in fig.axes if not ax.get_images() and ax.get_ylabel() in ("u", "v")]
    assert sorted(ax.get_ylabel() for ax in bars) == ["u", "v"]


def test_pde_scalars_in_their_own_labelled_panels_conserved_ones_flat():
    fig = sim.plot(PLOTS / "pde_1d.h5")  # Kuramoto-Sivashinsky: energy and mass (zero to round-off)
    mass = next(ax for ax in fig.axes if ax.get_ylabel() == "mass")
    energy = next(ax for ax in fig.axes if ax.get_ylabel() == "energy")
    assert mass is not energy and energy.get_xlabel() == "time"
    assert any(t.get_text().startswith("conserved: varies by") for t in mass.texts)
    assert not any(t.get_text().startswith("conserved") for t in energy.texts)


def test_a_1d_field_is_named_once_beside_its_colour_bar():
    fig = sim.plot(PLOTS / "pde_1d.h5")  # Kuramoto-Sivashinsky u(x, t)
    image = next(ax for ax in fig.axes if ax.get_images())
    bar = image.get_images()[0].colorbar.ax
    assert image.get_title() == "u(x, t)" and bar.get_ylabel() == ""
    assert [ax.get_ylabel() for ax in fig.axes].count("u") == 1  # the snapshots' axis


def test_profiles_in_units_with_their_points_and_a_waterfall_of_whole_starts(tmp_cwd):
    alpha = np.array([0.42, 0.46, 0.49, 0.54, 0.60, 0.63, 0.66, 0.68])
    write(
        "profile.h5",
        {
            "format": "simjax.profile",
            "model": "lotka_volterra",
            "config": '[model]\nname = "lotka_volterra"\n',
            "threshold": 1.92,
        },
        {
            "objective": 10.0,
            "optimum": {"alpha": 0.54},
            "profile": {
                "alpha": {
                    "value": alpha,
                    "objective": 10.0 + 120 * (alpha - 0.54) ** 2,
                    "lower": 0.44,
                    "upper": 0.66,
                    "identifiable": "identifiable",
                }
            },
        },
    )
    ax = sim.plot("profile.h5").axes[0]
    assert ax.get_xlabel() == "alpha (1/year)"
    assert ax.get_title() == "alpha: identifiable, 3 + 4 points"
    write(
        "fit.h5",
        FIT,
        {
            "objective": 5.0,
            "starts": {"objective": np.array([5.0, 5.05, 9.0])},
            "estimate": {"k": 1.0},
        },
    )
    ax = sim.plot("fit.h5").axes[0]
    assert ax.get_xlim() == (0.5, 3.5) and ax.get_ylim()[1] <= 12.0
    assert [t for t in ax.get_xticks() if 0.5 <= t <= 3.5] == [1.0, 2.0, 3.0]  # whole starts


def test_sweep_axes_log_where_drawn_log_spaced_with_units():
    fig = sim.plot(PLOTS / "sweep_grid.h5")  # alpha linspace, beta logspace over 0.7 decades
    ax = fig.axes[0]
    assert ax.get_xscale() == "linear" and ax.get_yscale() == "log"
    assert ax.get_xlabel() == "alpha (1/year)" and ax.get_ylabel() == "beta (1/(year·thousand))"
    assert "6 × 5 grid" in fig._suptitle.get_text()


@pytest.mark.parametrize("kind", ["simjax.run", "simjax.sweep"])
def test_a_file_declaring_more_values_than_memory_is_refused_before_reading(
    kind, tmp_cwd, capsys, monkeypatch
):
    # (a MemoryError: "Unable to allocate 745 GiB" for a /time of 1e11 values stored in 7 kB)
    import sim._limits

    monkeypatch.setattr(sim._limits, "physical_memory", lambda: 16 * 2**30)
    with h5py.File("huge.h5", "w") as f:
        f.attrs["format"], f.attrs["format_version"], f.attrs["model"] = kind, 1, "lotka_volterra"
        f.create_dataset("time", shape=(10**11,), dtype="f8", chunks=(4096,))
        f.create_dataset("observables/prey", shape=(10**11,), dtype="f8", chunks=(4096,))
    assert Path("huge.h5").stat().st_size < 1 << 20
    code, err = cli(["plot", "huge.h5", "-o", "fig.png"], capsys)
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    assert (
        "huge.h5" in lines[0] and "100,000,000,000 values" in lines[0] and "memory" in lines[0]
    ), lines[0]
    assert not Path("fig.png").exists()
    with pytest.raises(sim.DataError, match="memory"):
        sim.read("huge.h5")
