"""Every example config in experiments/ runs from the command line at a small size, and
`sim plot` draws each output: a non-empty PNG whose pixels are not uniform.

The PDE examples run in tests/sim/test_pde_configs.py (which plots them with `check_png`
from here); every other example runs here.
"""

from pathlib import Path

import numpy as np
import pytest

import sim
from sim.cli import main

from .test_pde_configs import SMALL as PDE_SMALL

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"

# config -> [(command, extra arguments)], at sizes that run in seconds.
COMMANDS = {
    "lotka_volterra.toml": [("run", [])],
    "lorenz.toml": [("run", ["--set", "time.t1=5.0", "--set", "time.save=501"])],
    "robertson.toml": [("run", [])],
    "lj_fluid.toml": [
        ("run", ["--set", "system.cells=3", "--set", "params.cutoff=2.5", "--set", "params.tail_correction=false", "--set", "time.steps=200", "--set", "time.save_every=20"])
    ],
    "lotka_volterra_sweep.toml": [
        ("sweep", ["--set", "sweep.params.alpha={ linspace = [0.3, 0.8, 4] }", "--set", "sweep.params.beta={ logspace = [-2.0, -1.3, 3] }"])
    ],
    "lotka_volterra_sobol.toml": [("sweep", ["--set", "sweep.samples=16", "--set", "sweep.chunk=16"])],
    # Its `sim fit` and plot run in tests/test_readme.py (README commands), its `sim infer`
    # and plot in tests/inference/test_bayes.py.
    "lynx_hare.toml": [],
    "heat_diffusivity_fit.toml": [("fit", [])],
    "lj_calibration.toml": [],  # fitted (and its fit file plotted) in tests/inference/test_fit_md.py  # its `sim infer`: the slow test below
}


def cli(argv, capsys):
    with pytest.raises(SystemExit) as info:
        main(argv)
        raise SystemExit(0)
    return info.value.code, capsys.readouterr().err


def check_png(path):
    """A non-empty PNG whose pixels are not all one colour (a drawn figure)."""
    import matplotlib.image

    path = Path(path)
    assert path.exists() and path.stat().st_size > 1000, path
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    pixels = matplotlib.image.imread(path)
    assert pixels.ndim == 3 and pixels.shape[0] > 200 and pixels.shape[1] > 200
    rgb = pixels[..., :3].reshape(-1, 3)
    colours = np.unique(np.round(rgb * 255).astype(np.uint8), axis=0)
    assert len(colours) > 20, len(colours)  # lines, labels, colour maps
    assert rgb.std() > 0.05
    # Not a blank canvas with a title: a good share of the pixels are not background.
    assert np.mean(np.any(rgb < 0.95, axis=1)) > 0.01


def plot(path, capsys, figure=None):
    figure = figure or Path(path).with_suffix(".png").name
    code, err = cli(["plot", str(path), "-o", figure, "--quiet"], capsys)
    assert code == 0, err
    check_png(figure)
    return figure


def test_every_example_config_has_a_test():
    examples = {p.name for p in EXPERIMENTS.glob("*.toml")}
    covered = set(COMMANDS) | set(PDE_SMALL)
    assert examples == covered, f"add small-size entries for {sorted(examples - covered)}; drop {sorted(covered - examples)}"


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_example_runs_from_the_cli_and_plots(name, tmp_cwd, capsys):
    for command, extra in COMMANDS[name]:
        out = f"{Path(name).stem}_{command}.h5"
        code, err = cli([command, str(EXPERIMENTS / name), "-o", out, "--quiet", *extra], capsys)
        assert code == 0, (command, err)
        record = sim.read(out)
        expected = {"run": "simjax.run", "sweep": "simjax.sweep", "fit": "simjax.fit", "infer": "simjax.posterior"}[command]
        assert record.format == expected
        plot(out, capsys)


@pytest.mark.slow
def test_pde_posterior_from_the_cli_plots(tmp_cwd, capsys):
    # NUTS over the heat diffusivity of experiments/heat_diffusivity_fit.toml, and the
    # posterior figure with predictive bands over field snapshots.
    args = ["infer", str(EXPERIMENTS / "heat_diffusivity_fit.toml"), "-o", "post.h5", "--quiet"]
    code, err = cli(args + ["--chains", "1", "--warmup", "40", "--samples", "40"], capsys)
    assert code == 0, err
    assert sim.read("post.h5").format == "simjax.posterior"
    plot("post.h5", capsys)


def test_sim_plot_in_python_returns_a_figure_for_results_and_records(tmp_cwd):
    from matplotlib.figure import Figure

    config = sim.load_config(EXPERIMENTS / "lotka_volterra.toml")
    result = sim.run(config)
    fig = sim.plot(result)
    assert isinstance(fig, Figure) and fig.axes
    result.save("lv.h5")
    assert isinstance(sim.plot(sim.read("lv.h5")), Figure)
    fig = sim.plot("lv.h5", "lv.svg", title="predator and prey")
    assert fig._suptitle.get_text() == "predator and prey"
    assert Path("lv.svg").read_text().lstrip().startswith("<?xml")
    # A trajectory from sim.simulate draws too.
    import jax.numpy as jnp

    model = sim.get_model("lorenz")
    assert isinstance(sim.plot(sim.simulate(model, None, jnp.linspace(0.0, 2.0, 201))), Figure)


BAD = {
    "missing file": (["plot", "nothing.h5"], "nothing.h5"),
    "folder as file": (["plot", "folder"], "folder"),
    "not HDF5": (["plot", "notes.h5"], "notes.h5"),
    "not a simjax file": (["plot", "plain.h5"], "plain.h5"),
    "output is a folder": (["plot", "lv.h5", "-o", "folder"], "folder"),
    "unknown figure type": (["plot", "lv.h5", "-o", "lv.bmp"], "lv.bmp"),
    "missing output folder": (["plot", "lv.h5", "-o", "missing/lv.png"], "missing"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_plot_input_one_line_exit_2_nothing_written(case, tmp_cwd, capsys):
    import h5py

    sim.run(sim.load_config(EXPERIMENTS / "lotka_volterra.toml")).save("lv.h5")
    Path("folder").mkdir()
    Path("notes.h5").write_text("not hdf5\n")
    with h5py.File("plain.h5", "w") as f:
        f["x"] = np.arange(3.0)
    Path("existing.png").write_bytes(b"keep")
    before = sorted(p.name for p in tmp_cwd.iterdir())
    argv, named = BAD[case]
    code, err = cli(argv + ["-o", "existing.png"] if "-o" not in argv else argv, capsys)
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and named in lines[0] and "Traceback" not in err, err
    assert sorted(p.name for p in tmp_cwd.iterdir()) == before
    assert Path("existing.png").read_bytes() == b"keep"
