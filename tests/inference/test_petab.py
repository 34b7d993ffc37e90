"""PEtab problems: objectives against the reference log-likelihoods of the benchmark
collection, gradients against finite differences, bad tables as one-line errors."""

from pathlib import Path

import jax
import numpy as np
import pytest

from inference._petab import PetabError, _negative_log_likelihood, load_petab

DATA = Path(__file__).resolve().parents[1] / "data" / "petab"

# Log-likelihoods at the nominal parameters, as AMICI's tests keep them
# (AMICI-dev/AMICI, tests/benchmark_models/benchmark_models.yaml: "llh").
REFERENCE_LLH = {
    "Boehm_JProteomeRes2014": -138.22199693517703,
    "Brannmark_JBC2010": -141.889113770537,
    "Borghans_BiophysChem1997": 83.3237191357272,
    "Fujita_SciSignal2010": 53.08377736998929,
    "Zheng_PNAS2012": 278.33353271001477,
    "Weber_BMC2015": -296.2017922646865,
    "Sneyd_PNAS2002": 319.79177818768756,
    "Elowitz_Nature2000": 63.20279991419332,
    "Bruno_JExpBot2016": 46.688176988431806,
    "Fiedler_BMCSystBiol2016": 58.58390161681,
    "Schwen_PONE2014": -943.9992988598723,
    "Bachmann_MSB2011": 418.40573341425295,
    # AMICI keeps -190.96521897435176 here; the collection's own simulated data
    # (simulatedData_Crauste_CellSystems2017.tsv, through petab.calculate_llh) give
    # -190.9639775693566, which simjax reproduces at rtol 1e-8 and 1e-10 alike: the
    # reference is the collection's.
    "Crauste_CellSystems2017": -190.9639775693566,
}
DEFAULT = ("Boehm_JProteomeRes2014",)


def problem_file(name: str) -> Path:
    return DATA / name / f"{name}.yaml"


@pytest.mark.parametrize("name", [pytest.param(n, marks=() if n in DEFAULT else pytest.mark.slow) for n in REFERENCE_LLH])
def test_the_objective_at_the_nominal_parameters_is_the_reference(name):
    problem = load_petab(problem_file(name))
    value = float(jax.jit(problem.objective)(problem.nominal()))
    assert abs(-value - REFERENCE_LLH[name]) < 1e-3, (value, REFERENCE_LLH[name])


def test_the_noise_models_are_the_densities_of_the_data():
    """Each PEtab noise model is a normalised density of the untransformed measurement:
    its integral over y is 1 (a check independent of the formulas' derivation)."""
    from scipy.integrate import quad

    for transformation in ("lin", "log", "log10"):
        for distribution in ("normal", "laplace"):
            h, sigma = 2.0, 0.3 if transformation != "lin" else 0.7
            density = lambda y: float(np.exp(-_negative_log_likelihood(y, h, sigma, transformation, distribution)))  # noqa: E731
            # (pieces a decade wide for the transformed ones, whose tails reach far)
            edges = [-10.0, h, 30.0] if transformation == "lin" else [1e-12, *np.geomspace(1e-9, 1e9, 19)]
            total = sum(quad(density, a, b, limit=400)[0] for a, b in zip(edges[:-1], edges[1:]))
            assert abs(total - 1.0) < 1e-6, (transformation, distribution, total)


@pytest.mark.parametrize("name", [pytest.param(n, marks=() if n in DEFAULT else pytest.mark.slow) for n in REFERENCE_LLH])
def test_the_gradient_of_the_objective_matches_finite_differences(name):
    """Central differences along every parameter of a small problem, along a few
    parameters and two random directions of a large one."""
    problem = load_petab(problem_file(name))
    objective = jax.jit(problem.objective)
    x = problem.nominal()
    gradient = np.asarray(jax.jit(jax.grad(problem.objective))(x))
    rng = np.random.default_rng(0)
    n = len(x)
    axes = np.eye(n) if n <= 12 else np.eye(n)[rng.choice(n, 6, replace=False)]
    directions = [*axes, *(d / np.linalg.norm(d) for d in rng.normal(size=(0 if n <= 12 else 2, n)))]
    for d in directions:
        h = 1e-5
        central = (float(objective(x + h * d)) - float(objective(x - h * d))) / (2 * h)
        assert abs(gradient @ d - central) <= 1e-4 * max(1.0, abs(central)), (name, d, gradient @ d, central)


def _cli(args, cwd):
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    return subprocess.run([sys.executable, "-m", "sim.cli", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def test_sim_fit_evaluate_writes_the_objective(tmp_path):
    import h5py

    done = _cli(["fit", str(problem_file("Boehm_JProteomeRes2014")), "--evaluate", "-o", "eval.h5"], tmp_path)
    assert done.returncode == 0, done.stderr
    with h5py.File(tmp_path / "eval.h5") as f:
        assert f.attrs["format"] == "simjax.fit"
        assert abs(-f["objective"][()] - REFERENCE_LLH["Boehm_JProteomeRes2014"]) < 1e-3
        assert abs(f["estimate/k_phos"][()] - 15766.5070195731) < 1e-6  # (the nominal value, linear scale)


def _broken(tmp_path, table: str, old: str, new: str) -> Path:
    """A copy of the Boehm problem with one table cell changed."""
    import shutil

    folder = tmp_path / "boehm"
    shutil.copytree(DATA / "Boehm_JProteomeRes2014", folder)
    file = next(folder.glob(f"{table}_*.tsv"))
    text = file.read_text()
    assert old in text
    file.write_text(text.replace(old, new, 1))
    return folder / "Boehm_JProteomeRes2014.yaml"


@pytest.mark.parametrize(
    "table, old, new, says",
    [
        ("measurementData", "pSTAT5A_rel\t\tmodel1_data1\t7.90107299873911", "pSTAT5X\t\tmodel1_data1\t7.90107299873911", "row 1, column observableId: no observable 'pSTAT5X'"),
        ("measurementData", "7.90107299873911", "seven", "row 1, column measurement: expected a number"),
        ("measurementData", "7.90107299873911\t0.0\t\tsd_pSTAT5A_rel", "7.90107299873911\t0.0\t\t-2", "row 1, column noiseParameters: a noise parameter must be positive"),
        ("measurementData", "7.90107299873911\t0.0\t\tsd_pSTAT5A_rel", "7.90107299873911\t0.0\t\tsd_nothing", "row 1, column noiseParameters: 'sd_nothing' is neither a number nor a parameter"),
        ("measurementData", "\tmodel1_data1\t7.90107299873911", "\tmodel9\t7.90107299873911", "column simulationConditionId: no condition 'model9'"),
        ("observables", "noiseParameter1_pSTAT5A_rel\tlin", "noiseParameter1_pSTAT5A_rel + kk\tlin", "column noiseFormula: 'kk' is no id of the model"),
    ],
)
def test_bad_petab_tables_are_one_line_naming_table_row_and_column(tmp_path, table, old, new, says):
    from inference._petab import PetabError, load_petab

    problem = _broken(tmp_path, table, old, new)
    with pytest.raises(PetabError) as raised:
        load_petab(problem).objective(load_petab(problem).nominal())
    message = str(raised.value)
    assert "\n" not in message and says in message, message


def test_a_bad_petab_problem_exits_2_with_one_line_and_no_output(tmp_path):
    problem = _broken(tmp_path, "measurementData", "7.90107299873911", "seven")
    done = _cli(["fit", str(problem), "--evaluate", "-o", "out.h5"], tmp_path)
    assert done.returncode == 2, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "column measurement: expected a number" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "out.h5").exists()
