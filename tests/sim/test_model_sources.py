"""Models from a Python file a config names (`[model] source`) and from installed plugins
(entry-point group `simjax.models`): they run as the built-in model they copy does, show
in `sim models`, and every way they can be broken is one line, exit 2, nothing written."""

import sys
from pathlib import Path

import numpy as np
import pytest

import sim
from sim import _sources
from tests.helpers import cli, cli_out

# The built-in Lotka-Volterra model under other names: what a user's file looks like.
PREDATION = '''
"""Hares and lynxes."""
from typing import ClassVar

import jax.numpy as jnp

from physics import Parameter
from physics.ode import OdeModel


class Predation(OdeModel):
    """Lotka-Volterra with the names of the Hudson's Bay data."""

    name: ClassVar[str] = "predation"
    description: ClassVar[str] = "hares and lynxes"
    parameters: ClassVar[tuple] = (
        Parameter("a", 0.55, "1/year", "hare birth rate", "positive"),
        Parameter("b", 0.028, "1/(year*thousand)", "predation rate", "positive"),
        Parameter("c", 0.80, "1/year", "lynx death rate", "positive"),
        Parameter("d", 0.024, "1/(year*thousand)", "lynx growth per hare eaten", "positive"),
    )
    state_names: ClassVar[tuple] = ("hare", "lynx")
    initial_defaults: ClassVar[dict] = {"hare": 30.0, "lynx": 4.0}

    def vector_field(self, t, y, params):
        x, z = y[0], y[1]
        return jnp.stack([params["a"] * x - params["b"] * x * z, params["d"] * x * z - params["c"] * z])
'''

CONFIG = """
[model]
{model}
[params]
{a} = 0.6
[time]
t1 = 15.0
save = 16
[sweep.params]
{a} = {{ values = [0.5, 0.6, 0.7] }}
"""

BUILT_IN = CONFIG.format(model='name = "lotka_volterra"', a="alpha")


def test_a_model_file_runs_and_sweeps_as_the_built_in_model(tmp_cwd, capsys):
    Path("predation.py").write_text(PREDATION)
    Path("file.toml").write_text(CONFIG.format(model='source = "predation.py:Predation"', a="a"))
    Path("built_in.toml").write_text(BUILT_IN)
    for name in ("file", "built_in"):
        for command in ("run", "sweep"):
            code, err = cli(
                [command, f"{name}.toml", "-o", f"{name}_{command}.h5", "--quiet"], capsys
            )
            assert code == 0, err
    for command in ("run", "sweep"):
        mine, theirs = sim.read(f"file_{command}.h5"), sim.read(f"built_in_{command}.h5")
        np.testing.assert_allclose(mine.observables["hare"], theirs.observables["prey"], rtol=1e-12)
        np.testing.assert_allclose(
            mine.observables["lynx"], theirs.observables["predator"], rtol=1e-12
        )
    assert sim.read("file_run.h5").attrs["model"] == "predation"
    # The file is run once per process and version: a second config reuses its classes.
    assert _sources.file_models(Path("predation.py"))["Predation"] is _sources.source_class(
        "predation.py", Path.cwd()
    )


def test_sim_models_lists_and_describes_a_model_file(tmp_cwd, capsys):
    Path("predation.py").write_text(PREDATION)
    code, out, err = cli_out(["models", "predation.py"], capsys)
    assert code == 0, err
    assert "predation.py:Predation" in out and "OdeModel" in out and "hares and lynxes" in out
    code, out, err = cli_out(["models", "predation.py:Predation"], capsys)
    assert code == 0, err
    assert (
        "lynx growth per hare eaten" in out and " hare   30 " in out and "1/(year*thousand)" in out
    )  # (the state table: name, initial value)


@pytest.mark.parametrize(
    "source, text, says",
    [
        ("missing.py:Predation", None, "model.source: missing.py: no such file"),
        (
            "predation.py:Predaton",
            PREDATION,
            "defines no class 'Predaton' (model classes: Predation). Perhaps you meant "
            "'Predation'?",
        ),
        (
            "predation.py:Predation",
            PREDATION.replace("def vector_field", "def vector_fieldd"),
            "Predation is abstract; it does not define vector_field",
        ),
        (
            "predation.py:Predation",
            PREDATION + "\nx = (1,\n",
            f"predation.py: line {PREDATION.count(chr(10)) + 2}: SyntaxError",
        ),
        (
            "predation.py:Predation",
            PREDATION + "\nraise RuntimeError('no licence server')\n",
            f"line {PREDATION.count(chr(10)) + 2}: RuntimeError: no licence server",
        ),
        (
            "predation.py:Predation",
            PREDATION + "\nimport sys\nsys.exit(3)\n",
            "the file called exit(3)",
        ),
        ("predation.py:Parameter", PREDATION, "Parameter is not a model class"),
        (
            "predation.py",
            PREDATION + "\nclass Other(Predation):\n    name = 'other'\n",
            "expected predation.py:CLASS naming one model class (it defines Predation, Other)",
        ),
        ("config.toml:Predation", PREDATION, "expected a Python file (.py)"),
    ],
    ids=[
        "missing",
        "typo",
        "abstract",
        "syntax",
        "raises",
        "exits",
        "not-a-model",
        "two-models",
        "not-python",
    ],
)
def test_a_broken_model_file_is_one_line_naming_it(source, text, says, tmp_cwd, capsys):
    if text is not None:
        Path("predation.py").write_text(text)
    Path("config.toml").write_text(CONFIG.format(model=f'source = "{source}"', a="a"))
    code, err = cli(["run", "config.toml", "-o", "out.h5"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert says in err and "config.toml" in err, err
    assert not Path("out.h5").exists()


def test_output_onto_the_model_file_is_refused(tmp_cwd, capsys):
    Path("predation.py").write_text(PREDATION)
    Path("config.toml").write_text(CONFIG.format(model='source = "predation.py:Predation"', a="a"))
    code, err = cli(["run", "config.toml", "-o", "predation.py"], capsys)
    assert code == 2 and "predation.py" in err, err
    assert Path("predation.py").read_text() == PREDATION


def _install_plugin(site: Path, module: str, entry: str) -> None:
    """A distribution `predation-models 1.0` installed into `site` as pip would leave it:
    its module and a dist-info folder whose entry_points.txt names the model."""
    (site / "predation_models.py").write_text(module)
    info = site / "predation_models-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: predation-models\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[simjax.models]\n{entry}\n")


@pytest.fixture
def site(tmp_path, monkeypatch):
    """A folder on sys.path, as a site-packages; the plugin lookup forgets it after."""
    folder = tmp_path / "site"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    _sources.plugin_entry_points.cache_clear()
    _sources.plugin_class.cache_clear()
    yield folder
    sys.modules.pop("predation_models", None)
    _sources.plugin_entry_points.cache_clear()
    _sources.plugin_class.cache_clear()


def test_an_installed_plugin_is_listed_and_runs_by_name(site, tmp_cwd, capsys):
    _install_plugin(site, PREDATION, "predation = predation_models:Predation")
    code, out, err = cli_out(["models"], capsys)
    assert code == 0, err
    row = next(line for line in out.splitlines() if line.strip().startswith("predation "))
    assert "hares and lynxes" in row and "plugin predation-models 1.0" in row, row
    code, out, _ = cli_out(["models", "predation"], capsys)
    assert code == 0 and "lynx growth per hare eaten" in out
    Path("plugin.toml").write_text(CONFIG.format(model='name = "predation"', a="a"))
    Path("built_in.toml").write_text(BUILT_IN)
    for name in ("plugin", "built_in"):
        code, err = cli(["run", f"{name}.toml", "-o", f"{name}.h5", "--quiet"], capsys)
        assert code == 0, err
    np.testing.assert_allclose(
        sim.read("plugin.h5").observables["lynx"],
        sim.read("built_in.h5").observables["predator"],
        rtol=1e-12,
    )


@pytest.mark.parametrize(
    "entry, says",
    [
        ("predation = predation_models:Missing", "cannot be loaded (AttributeError"),
        ("prey_eaters = predation_models:Predation", "the class is named 'predation'"),
        ("predation = predation_models:Parameter", "is not a model class"),
    ],
)
def test_a_broken_plugin_is_listed_with_why_and_refused_by_name(entry, says, site, tmp_cwd, capsys):
    _install_plugin(site, PREDATION, entry)
    name = entry.split(" = ")[0]
    code, out, err = cli_out(["models"], capsys)
    assert code == 0, err  # one broken plugin does not hide the other models
    assert "lotka_volterra" in out and name in out
    Path("plugin.toml").write_text(CONFIG.format(model=f'name = "{name}"', a="a"))
    code, err = cli(["run", "plugin.toml", "-o", "out.h5"], capsys)
    assert (
        code == 2
        and len(err.strip().splitlines()) == 1
        and says in err
        and "predation-models 1.0" in err
    ), err
    assert not Path("out.h5").exists()


def test_the_example_model_file_matches_solve_ivp(tmp_cwd, capsys):
    """experiments/predation.toml (the Rosenzweig-MacArthur model of
    experiments/predation.py): `sim run` and `sim plot` from the command line, and the
    trajectory that SciPy's DOP853 gives at rtol 1e-12."""
    from scipy.integrate import solve_ivp

    from .test_examples import EXPERIMENTS, plot

    code, err = cli(
        [
            "run",
            str(EXPERIMENTS / "predation.toml"),
            "-o",
            "predation.h5",
            "--quiet",
            "--set",
            "time.t1=50.0",
            "--set",
            "time.save=101",
        ],
        capsys,
    )
    assert code == 0, err
    plot("predation.h5", capsys)
    record = sim.read("predation.h5")
    r, K, a, h, c, m = 1.0, 3.0, 1.0, 1.0, 0.5, 0.2

    def rates(t, y):
        intake = a * y[0] / (1 + a * h * y[0])
        return [r * y[0] * (1 - y[0] / K) - intake * y[1], c * intake * y[1] - m * y[1]]

    reference = solve_ivp(
        rates, (0.0, 50.0), [1.0, 0.5], t_eval=record.time, method="DOP853", rtol=1e-12, atol=1e-12
    )
    # Measured: largest difference 9.4e-10 (the run's rtol is 1e-10 over 50 years of cycles).
    np.testing.assert_allclose(record.observables["prey"], reference.y[0], rtol=0, atol=5e-9)
    np.testing.assert_allclose(record.observables["predator"], reference.y[1], rtol=0, atol=5e-9)
