"""The HTML summary Jupyter shows for results: well-formed, one row per field, the numbers
those of the result."""

import xml.etree.ElementTree as ET
from pathlib import Path

import jax.numpy as jnp
import numpy as np

import sim
from inference._bayes import PosteriorResult
from inference._data import Observations
from inference._diagnostics import summarise
from inference._fit import FitResult


def rows(result) -> dict[str, ET.Element]:
    table = ET.fromstring(result._repr_html_())  # raises unless well-formed
    assert table.tag == "table"
    return {tr.find("th").text: tr.find("td") for tr in table.findall("tr")}


def text(cell: ET.Element) -> str:
    return "".join(cell.itertext())


def test_trajectory_and_run_result():
    model = sim.get_model("lotka_volterra")
    traj = sim.simulate(model, model.default_params(), jnp.linspace(0.0, 5.0, 6))
    cells = rows(traj)
    assert set(cells) == {"time", "observables", "final_state", "stats", "observable_names"}
    assert text(cells["observable_names"]) == "prey, predator"  # (the model's order)
    prey = np.asarray(traj.observables["prey"])
    assert f"prey: float64[6] {prey.min():.4g} .. {prey.max():.4g}" in text(cells["observables"])
    assert text(cells["stats"]) == f"num_steps: {int(traj.stats['num_steps'])}result: 0"

    result = sim.run(
        sim.load_config(Path(__file__).resolve().parents[2] / "experiments" / "lotka_volterra.toml")
    )
    table = ET.fromstring(result._repr_html_())
    assert table.find("caption").text == "RunResult: lotka_volterra"
    cells = rows(result)
    assert "alpha: 0.55" in text(cells["params"]) and text(cells["time"]) == "float64[201] 0 .. 20"
    assert cells["config"].find("details/summary").text.endswith("lines")  # folded


def test_fit_and_posterior():
    obs = Observations(
        path=Path("obs.h5"),
        time=np.arange(3.0),
        values={"y": np.array([1.0, np.nan, 2.0])},
        sigma={},
    )
    fit = FitResult(
        model="decay",
        config="[model]\nname = 'decay'\n",
        names=["k"],
        estimate={"k": 0.5},
        stderr={"k": 0.01},
        covariance=np.array([[1e-4]]),
        loss_history=np.array([3.0, 1.0]),
        converged=True,
        message="",
        time=np.arange(3.0),
        prediction={"y": np.ones(3)},
        observations=obs,
        warnings=["warning: at a bound: k"],
    )
    cells = rows(fit)
    assert text(cells["estimate"]) == "k: 0.5" and text(cells["stderr"]) == "k: 0.01"
    assert text(cells["covariance"]) == "float64[1, 1] [0.0001]" and "warning: at a bound" in text(
        cells["warnings"]
    )
    assert "observations" in cells

    rng = np.random.default_rng(0)
    posterior = {"k": rng.normal(0.5, 0.1, (2, 50))}
    post = PosteriorResult(
        model="decay",
        config="",
        seed=0,
        posterior=posterior,
        diverging=np.zeros((2, 50), bool),
        summary=summarise(posterior),
        time=np.arange(3.0),
        predictive={},
        observations=obs,
    )
    table = rows(post)["summary"].find("table")
    header, row = table.findall("tr")
    assert [th.text for th in header.findall("th")][1:] == [
        "mean",
        "sd",
        "5%",
        "50%",
        "95%",
        "ess_bulk",
        "r_hat",
    ]
    assert row.find("th").text == "k" and float(row.findall("td")[0].text) == float(
        f"{posterior['k'].mean():.6g}"
    )
