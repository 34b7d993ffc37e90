"""Several experiments in one config ([[experiments]]): shared free parameters fitted to
every experiment's data, the same estimates as the same problem written in PEtab."""

from pathlib import Path

import h5py
import numpy as np
import pytest

import sim
from inference import fit

TRUTH = {"alpha": 0.55, "beta": 0.028, "gamma": 0.8, "delta": 0.024}
STARTS = {"a": (30.0, 4.0), "b": (12.0, 9.0)}
TIMES = np.linspace(0.0, 15.0, 16)
SIGMA = 1.0


def _lv(y0, t):
    from scipy.integrate import solve_ivp

    a, b, g, d = (TRUTH[k] for k in ("alpha", "beta", "gamma", "delta"))
    sol = solve_ivp(lambda _, y: [a * y[0] - b * y[0] * y[1], d * y[0] * y[1] - g * y[1]], (t[0], t[-1]), y0, t_eval=t, rtol=1e-11, atol=1e-11)
    return sol.y


def _data(folder: Path) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(11)
    out = {}
    for name, y0 in STARTS.items():
        prey, predator = _lv(y0, TIMES) + SIGMA * rng.standard_normal((2, TIMES.size))
        with h5py.File(folder / f"{name}.h5", "w") as f:
            f["t"], f["prey"], f["predator"], f["sigma"] = TIMES, prey, predator, np.full(TIMES.size, SIGMA)
        out[name] = np.stack([prey, predator])
    return out


CONFIG = """
[model]
name = "lotka_volterra"
[params]
alpha = 0.5
beta = 0.025
gamma = 0.7
delta = 0.025
[solver]
method = "tsit5"
rtol = 1e-10
atol = 1e-10
max_steps = 100000
{experiments}
[fit]
free = ["alpha", "beta", "gamma", "delta"]
"""

EXPERIMENT = """
[[experiments]]
name = "{name}"
file = "{name}.h5"
time = "/t"
observables = {{ prey = "/prey", predator = "/predator" }}
sigma = {{ prey = "/sigma", predator = "/sigma" }}
initial = {{ prey = {prey}, predator = {predator} }}
"""


def _config(folder: Path, names=("a", "b")) -> Path:
    text = CONFIG.format(experiments="".join(EXPERIMENT.format(name=n, prey=STARTS[n][0], predator=STARTS[n][1]) for n in names))
    path = folder / f"lv_{''.join(names)}.toml"
    path.write_text(text)
    return path


def test_experiments_share_the_free_parameters_and_add_their_likelihoods(tmp_path):
    data = _data(tmp_path)
    both = fit(sim.load_config(_config(tmp_path)))
    assert both.converged
    # the objective is the sum of the experiments' negative log-likelihoods (with their
    # constants) at the estimate, each computed here from an independent solve
    from scipy.stats import norm

    total = 0.0
    for name, y0 in STARTS.items():
        a, b, g, d = (both.estimate[k] for k in ("alpha", "beta", "gamma", "delta"))
        from scipy.integrate import solve_ivp

        model = solve_ivp(lambda _, y: [a * y[0] - b * y[0] * y[1], d * y[0] * y[1] - g * y[1]], (0, 15), y0, t_eval=TIMES, rtol=1e-11, atol=1e-11).y
        total -= norm.logpdf(data[name], model, SIGMA).sum()
    assert abs(both.objective - total) < 1e-5, (both.objective, total)
    # each experiment's fitted curve and data are in the file
    record = sim.read(both.save(tmp_path / "fit.h5"))
    for name in STARTS:
        np.testing.assert_array_equal(record[f"experiments/{name}/data/observables/prey"], data[name][0])
        assert record[f"experiments/{name}/prediction/prey"].shape == (201,)
    # two experiments determine the rates better than one
    one = fit(sim.load_config(_config(tmp_path, ("a",))))
    for k in TRUTH:
        assert both.stderr[k] < one.stderr[k], k
        assert abs(both.estimate[k] - TRUTH[k]) < 3 * both.stderr[k], (k, both.estimate[k], both.stderr[k])


@pytest.mark.parametrize(
    "change, key",
    [
        ('[[experiments]]\nname = "c"\nfile = "a.h5"\ntime = "/t"\nobservables = { prey = "/prey" }\nwhen = 3\n', "experiments.2.when"),
        ('[[experiments]]\nname = "c"\nfile = "a.h5"\ntime = "/t"\nobservables = { hare = "/prey" }\n', "experiments.2.observables.hare"),
        ('[[experiments]]\nname = "c"\nfile = "missing.h5"\ntime = "/t"\nobservables = { prey = "/prey" }\n', "missing.h5"),
        ('[[experiments]]\nname = "a"\nfile = "a.h5"\ntime = "/t"\nobservables = { prey = "/prey" }\n', "experiments.2.name"),
        ('[data]\nfile = "a.h5"\ntime = "/t"\nobservables = { prey = "/prey" }\n', "data"),
        ('[[experiments]]\nname = "c"\nfile = "a.h5"\ntime = "/t"\nobservables = { prey = "/prey" }\nparams = { alpha = 0.3 }\n', "experiments.2.params.alpha"),
    ],
)
def test_bad_experiments_are_one_line_errors(tmp_path, capsys, change, key):
    from sim.cli import main

    _data(tmp_path)
    path = _config(tmp_path)
    path.write_text(path.read_text().replace("[fit]", change + "[fit]"))
    with pytest.raises(SystemExit) as done:
        main(["fit", str(path), "-o", str(tmp_path / "out.h5")])
    err = capsys.readouterr().err
    assert done.value.code == 2 and len(err.strip().splitlines()) == 1 and key in err, err
    assert not (tmp_path / "out.h5").exists()


LV_SBML = """<?xml version="1.0" encoding="UTF-8"?>
<sbml xmlns="http://www.sbml.org/sbml/level3/version2/core" level="3" version="2">
  <model id="lv">
    <listOfCompartments><compartment id="c" size="1" constant="true"/></listOfCompartments>
    <listOfSpecies>
      <species id="prey" compartment="c" initialAmount="30" hasOnlySubstanceUnits="true" boundaryCondition="false" constant="false"/>
      <species id="predator" compartment="c" initialAmount="4" hasOnlySubstanceUnits="true" boundaryCondition="false" constant="false"/>
    </listOfSpecies>
    <listOfParameters>
      <parameter id="alpha" value="0.5" constant="true"/><parameter id="beta" value="0.025" constant="true"/>
      <parameter id="gamma" value="0.7" constant="true"/><parameter id="delta" value="0.025" constant="true"/>
    </listOfParameters>
    <listOfRules>
      <rateRule variable="prey"><math xmlns="http://www.w3.org/1998/Math/MathML">
        <apply><minus/><apply><times/><ci>alpha</ci><ci>prey</ci></apply><apply><times/><ci>beta</ci><ci>prey</ci><ci>predator</ci></apply></apply>
      </math></rateRule>
      <rateRule variable="predator"><math xmlns="http://www.w3.org/1998/Math/MathML">
        <apply><minus/><apply><times/><ci>delta</ci><ci>prey</ci><ci>predator</ci></apply><apply><times/><ci>gamma</ci><ci>predator</ci></apply></apply>
      </math></rateRule>
    </listOfRules>
  </model>
</sbml>
"""


def _petab(folder: Path, data: dict[str, np.ndarray]) -> Path:
    (folder / "lv.xml").write_text(LV_SBML)
    (folder / "conditions.tsv").write_text("conditionId\tprey\tpredator\n" + "".join(f"{n}\t{p}\t{q}\n" for n, (p, q) in STARTS.items()))
    (folder / "observables.tsv").write_text(f"observableId\tobservableFormula\tnoiseFormula\nobs_prey\tprey\t{SIGMA}\nobs_predator\tpredator\t{SIGMA}\n")
    rows = "".join(
        f"obs_{what}\t{n}\t{float(t)!r}\t{float(data[n][k][i])!r}\n" for n in STARTS for k, what in enumerate(("prey", "predator")) for i, t in enumerate(TIMES)
    )
    (folder / "measurements.tsv").write_text("observableId\tsimulationConditionId\ttime\tmeasurement\n" + rows)
    start = {"alpha": 0.5, "beta": 0.025, "gamma": 0.7, "delta": 0.025}
    (folder / "parameters.tsv").write_text(
        "parameterId\tparameterScale\tlowerBound\tupperBound\tnominalValue\testimate\n" + "".join(f"{k}\tlog10\t0.001\t10\t{v}\t1\n" for k, v in start.items())
    )
    (folder / "lv.yaml").write_text(
        "format_version: 1\nparameter_file: parameters.tsv\nproblems:\n- sbml_files: [lv.xml]\n  condition_files: [conditions.tsv]\n"
        "  measurement_files: [measurements.tsv]\n  observable_files: [observables.tsv]\n"
    )
    return folder / "lv.yaml"


@pytest.mark.slow
def test_the_same_problem_as_experiments_and_as_petab_gives_the_same_estimates(tmp_path):
    from inference._petab import fit_petab, load_petab

    data = _data(tmp_path)
    ours = fit(sim.load_config(_config(tmp_path)))
    petab_fit = fit_petab(load_petab(_petab(tmp_path, data)), starts=1)
    for k in TRUTH:
        assert abs(petab_fit.estimate[k] / ours.estimate[k] - 1) < 1e-4, (k, petab_fit.estimate[k], ours.estimate[k])
    # one likelihood, written twice: the same value with all its constants
    assert abs(petab_fit.objective - ours.objective) < 1e-4, (petab_fit.objective, ours.objective)
