"""PEtab problems: objectives against the reference log-likelihoods of the benchmark
collection, gradients against finite differences, bad tables as one-line errors."""

from pathlib import Path

import jax
import numpy as np
import pytest

from inference._observation import negative_log_likelihood
from inference._petab import PetabError, load_petab

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
    # AMICI keeps -888198.436541014 here, and the collection's simulated data give
    # -888198.43555581; libRoadRunner 2.10 (CVODE at rtol 1e-12, atol 1e-14, every
    # condition with its events, experiments/benchmarks/petab_bench.py --roadrunner-llh)
    # gives -888198.438955776, and simjax at rtol 1e-8 -888198.439028 (7e-5 from it): the
    # other two are 2.4e-3 and 3.4e-3 off, nearly all of it in Glucose_uptake__240__3B, the
    # measurements at t = 240 where the event ending the insulin stimulation fires.
    "Smith_BMCSystBiol2013": -888198.438955776,
    # AMICI keeps -115700.1192629893 here, 14,891 away. libRoadRunner 2.10 (CVODE,
    # petab_bench.py --roadrunner-llh) gives -130591.760138 at rtol 1e-6, -130591.750183 at 1e-7,
    # -130591.752673 at 1e-8 and -130591.752971 at 1e-9 (atol 100 times smaller), and
    # simjax at rtol 1e-8 -130591.752935 (4e-5 from it). The collection's simulated data
    # (-130669.49) were made with its parameter table before the nominal values were
    # rounded to three significant digits (by up to 0.3%); libRoadRunner with that table
    # gives -130669.487.
    "Chen_MSB2009": -130591.752971,
}


def problem_file(name: str) -> Path:
    return DATA / name / f"{name}.yaml"


@pytest.fixture(scope="module")
def boehm():
    """Boehm et al. 2014, loaded once (one expression per reaction, as a model of fewer
    than 50 reactions gets), its objective compiled once and its value at the nominal
    parameters. Tracing that objective is most of a test's time (measured: 4 to 7 s of
    CPU); the tests that need it share it, and follow one another in this file (the
    test workers take tests in runs of consecutive ones: one worker usually traces it)."""
    problem = load_petab(problem_file("Boehm_JProteomeRes2014"))
    objective = jax.jit(problem.objective)
    return problem, objective, float(objective(problem.nominal()))


@pytest.mark.slow  # (Boehm's by default: through `sim fit --evaluate`, below)
@pytest.mark.parametrize("name", list(REFERENCE_LLH))
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
            density = lambda y: float(
                np.exp(-negative_log_likelihood(y, h, sigma, transformation, distribution))
            )  # noqa: E731
            # (pieces a decade wide for the transformed ones, whose tails reach far)
            edges = (
                [-10.0, h, 30.0]
                if transformation == "lin"
                else [1e-12, *np.geomspace(1e-9, 1e9, 19)]
            )
            total = sum(
                quad(density, a, b, limit=400)[0]
                for a, b in zip(edges[:-1], edges[1:], strict=False)
            )
            assert abs(total - 1.0) < 1e-6, (transformation, distribution, total)
            # (a sigma that is not positive has no density: NaN, not that of |sigma|)
            for bad in (-sigma, 0.0):
                assert np.isnan(negative_log_likelihood(h, h, bad, transformation, distribution)), (
                    transformation,
                    distribution,
                    bad,
                )


# Crauste is left out: its objective is too ill-conditioned for finite differences at the
# nominal point (a change of 1e-4 in log10 delta_EL moves it by 0.23; +1e-4 already makes
# the solve fail). Smith too: 35 conditions of 133 species at rtol 1e-12, 17 solves of
# the objective, take hours; and Chen, whose one evaluation at rtol 1e-8 takes 30 minutes
# of CPU here (1,810 s: the tests compile without LLVM's optimisations; 840 s in `sim`).
FD_STEP = {"Fujita_SciSignal2010": 2e-3}  # (the step h of the differences, where not 2e-5)
GRADIENT_CHECKED = [
    n
    for n in REFERENCE_LLH
    if n not in ("Crauste_CellSystems2017", "Smith_BMCSystBiol2013", "Chen_MSB2009")
]


@pytest.mark.parametrize(
    "name", ["decay", *(pytest.param(n, marks=pytest.mark.slow) for n in GRADIENT_CHECKED)]
)
def test_the_gradient_of_the_objective_matches_finite_differences(name, tmp_path):
    """The gradient a fit uses (`value_and_grad`: forward sensitivities for a few
    parameters, reverse mode for many) and the reverse-mode one, against central
    differences along every parameter of a small problem and along a few parameters
    and two random directions of a large one. Solved at rtol 1e-12: at the default
    1e-8 the solver's own error, divided by the step, would swamp the differences."""
    from solvers import OdeSolver

    if (
        name == "decay"
    ):  # (a small problem: k and A0 on log10 scales, experiments/data/make_decay_petab.py)
        import runpy

        path = runpy.run_path(
            str(
                Path(__file__).resolve().parents[2] / "experiments" / "data" / "make_decay_petab.py"
            )
        )["write"](tmp_path / "decay")
    else:
        path = problem_file(name)
    problem = load_petab(
        path, OdeSolver(method="kvaerno5", rtol=1e-12, atol=1e-14, max_steps=200_000, throw=False)
    )
    # (the reverse-mode program gives the objective too: the differences take its values,
    # one compilation fewer than a program of the objective alone)
    value_and_reverse = jax.jit(jax.value_and_grad(problem.objective))
    objective = lambda x: value_and_reverse(x)[0]  # noqa: E731
    x = problem.nominal()
    value, gradient = jax.jit(problem.value_and_grad())(x)
    assert np.isfinite(float(value)), (
        f"{name}: the objective is not finite at the nominal parameters (a solve at rtol 1e-12 "
        "failed)"
    )
    gradient = np.asarray(gradient)
    reverse = np.asarray(value_and_reverse(x)[1])
    rng = np.random.default_rng(0)
    n = len(x)
    # (the default run checks three parameters of its problem; `-m slow` all of them)
    axes = np.eye(n) if n <= 12 else np.eye(n)[rng.choice(n, 6, replace=False)]
    directions = [
        *axes,
        *(d / np.linalg.norm(d) for d in rng.normal(size=(0 if n <= 12 else 2, n))),
    ]

    def difference(d, h):
        return (float(objective(x + h * d)) - float(objective(x - h * d))) / (2 * h)

    for d in directions:
        # Central differences at h and h/2 combined by Richardson's extrapolation, which
        # cancels their error of order h^2: on the oscillator of Borghans that error is
        # 5.3 at h = 1e-4 and 0.053 at 1e-5 along one parameter (d/dp = -18.9376), more
        # than the tolerance; at rtol 1e-12 the solver's own error over 1e-5 is about 1e-5.
        # Fujita's objective, even at rtol 1e-12, jumps by about 5e-7 within 1e-6 of the
        # nominal reaction_3_k1 (slopes -0.52 and -1.09 on either side, -1.0783 over
        # 1e-4 and by both gradients): over 1e-5 such jumps are 3% of the derivative,
        # over 1e-4 still 0.3% (reaction_5_k2: -1.11372 against -1.11037), so its
        # differences take h = 2e-3 (Richardson: -1.078304 and -1.110745).
        h = FD_STEP.get(name, 2e-5)
        central = (4.0 * difference(d, h / 2) - difference(d, h)) / 3.0
        tolerance = 1e-3 * max(1.0, abs(central))
        assert abs(gradient @ d - central) <= tolerance, (name, d, gradient @ d, central)
        assert abs(reverse @ d - central) <= tolerance, (name, d, reverse @ d, central)


# With `-m slow` only: by default tests/physics/test_sbml.py checks Boehm's model imported
# both ways (the right-hand side and its Jacobians by the state and the parameters, which
# are all the solver and its sensitivities read), here the solves that follow from them.
@pytest.mark.slow
@pytest.mark.parametrize(
    "name",
    [
        "Boehm_JProteomeRes2014",
        "Fujita_SciSignal2010",
        "Weber_BMC2015",
        "Crauste_CellSystems2017",
        "Bachmann_MSB2011",
    ],
)
def test_the_objective_and_gradient_are_the_same_with_kinetic_laws_grouped_by_form(
    name, monkeypatch, request
):
    """The SBML model imported one expression per reaction and with its kinetic laws
    evaluated as arrays by form (what models of 50 reactions or more get) give the same
    objective to 1e-11, relative (Boehm: 1.0e-12; right-hand sides equal to rounding,
    their difference carried through 135 steps and the Newton iterations), and (but on
    Boehm) the same gradient through the solver's sensitivities: preequilibration (Weber),
    several conditions (Fujita, Bachmann). The gradients are compared at rtol 1e-12: at 1e-8
    right-hand sides equal to rounding (1e-16) take different steps, and the gradients, small near
    the optimum, differ by the solver's error (1e-9 of 0.02 on Boehm)."""
    import functools

    import inference._petab as petab_module
    from physics.ode import sbml_model
    from solvers import OdeSolver

    with_gradient = name != "Boehm_JProteomeRes2014"  # (Boehm: the objective alone)
    results = []
    for vectorise in (False, True):
        if not (vectorise or with_gradient):  # (Boehm's per-reaction objective: the module's)
            problem, _, value = request.getfixturevalue("boehm")
            assert problem.model.program.vector is None
            results.append(value)
            continue
        monkeypatch.setattr(
            petab_module, "sbml_model", functools.partial(sbml_model, vectorise=vectorise)
        )
        problem = load_petab(problem_file(name))
        assert (problem.model.program.vector is not None) == vectorise
        results.append(float(jax.jit(problem.objective)(problem.nominal())))
        if with_gradient:
            tight = load_petab(
                problem_file(name),
                OdeSolver(
                    method="kvaerno5", rtol=1e-12, atol=1e-14, max_steps=200_000, throw=False
                ),
            )
            results.append(np.asarray(jax.jit(tight.value_and_grad())(tight.nominal())[1]))
    assert abs(results[len(results) // 2] - results[0]) <= 1e-11 * abs(results[0]), results
    if with_gradient:
        np.testing.assert_allclose(
            results[3], results[1], rtol=1e-7, atol=1e-9 * np.max(np.abs(results[1]))
        )


def test_sim_fit_evaluate_writes_the_objective(tmp_cwd, capsys, monkeypatch, boehm):
    """`sim fit --evaluate` of Boehm et al. 2014 writes the reference objective."""
    import h5py

    import inference._petab as petab_module
    from tests.helpers import cli

    # `sim fit` is handed the module's problem for Boehm's file, and so its compiled
    # objective (loading from the file is what the bad-table tests check, through the CLI)
    problem, load = boehm[0], petab_module.load_petab
    monkeypatch.setattr(
        petab_module,
        "load_petab",
        lambda path, solver=None, allow_outside=False: (
            problem
            if Path(path) == problem.path and solver is None
            else load(path, solver, allow_outside=allow_outside)
        ),
    )
    code, err = cli(
        [
            "fit",
            str(problem_file("Boehm_JProteomeRes2014")),
            "--evaluate",
            "-o",
            "eval.h5",
            "--quiet",
        ],
        capsys,
    )
    assert code == 0, err
    with h5py.File(tmp_cwd / "eval.h5") as f:
        assert f.attrs["format"] == "simjax.fit"
        assert abs(-f["objective"][()] - REFERENCE_LLH["Boehm_JProteomeRes2014"]) < 1e-3
        assert (
            abs(f["estimate/k_phos"][()] - 15766.5070195731) < 1e-6
        )  # (the nominal value, linear scale)


def test_the_posterior_density_is_likelihood_times_priors_within_the_bounds(boehm):
    """NumPyro's log density of the PEtab model at a point equals minus the objective,
    minus the objective priors (with the Jacobian for a prior on the linear value), plus
    the uniform density of the parameters without a prior; nothing outside the bounds."""
    import copy
    import dataclasses

    from numpyro.infer.util import log_density

    from inference._petab_bayes import numpyro_model
    from inference._petab_problem import PetabProblem

    problem = copy.copy(boehm[0])

    def objective(x):
        # (the same objective, compiled once for the module: called under the strict
        # promotion it was traced with, not the standard one NumPyro's model runs under,
        # which is part of jit's cache key and would trace and compile it again)
        with jax.numpy_dtype_promotion("strict"):
            return boehm[1](x)

    problem.objective = objective
    # give one parameter a normal prior on its linear value, another on its log10 scale
    k_phos = problem.estimated.index("k_phos")
    sd = problem.estimated.index("sd_pSTAT5A_rel")
    problem.parameters = [
        dataclasses.replace(p, prior="normal", prior_parameters=(15000.0, 3000.0))
        if p.id == "k_phos"
        else dataclasses.replace(p, prior="parameterScaleNormal", prior_parameters=(0.5, 0.2))
        if p.id == "sd_pSTAT5A_rel"
        else p
        for p in problem.parameters
    ]
    assert isinstance(problem, PetabProblem)
    lower, upper = problem.bounds()
    x = problem.nominal()
    with jax.numpy_dtype_promotion("standard"):
        density, _ = log_density(numpyro_model(problem), (), {}, {"x": jax.numpy.asarray(x)})
    from scipy.stats import norm

    v = 10.0 ** x[k_phos]
    expected = (
        -float(problem.objective(x))
        + norm.logpdf(v, 15000.0, 3000.0)
        + np.log(v * np.log(10.0))  # density of the value, as one of x = log10(value)
        + norm.logpdf(x[sd], 0.5, 0.2)
        - sum(np.log(upper[k] - lower[k]) for k in range(len(x)))
    )
    # (numpyro's uniform keeps every parameter's box density; the priors add to it)
    assert abs(float(density) - expected) < 1e-8, (float(density), expected)
    outside = x.copy()
    outside[0] = upper[0] + 1.0
    with jax.numpy_dtype_promotion("standard"), pytest.warns(UserWarning, match="Out-of-support"):
        density, _ = log_density(numpyro_model(problem), (), {}, {"x": jax.numpy.asarray(outside)})
    assert not np.isfinite(float(density))


@pytest.mark.parametrize("with_gradient", [False, pytest.param(True, marks=pytest.mark.slow)])
def test_conditions_simulated_in_a_loop_give_the_batched_objective_and_gradient(
    with_gradient, tmp_path, monkeypatch
):
    """Models of `LOOPED_FROM` states or more simulate their conditions one after the
    other (lax.map) instead of as a batch (vmap); forced on a small problem of two
    conditions, one preequilibrated, the objective (and with `-m slow` its gradient) is
    the batch's."""
    import runpy

    import inference._petab_objective as petab_module
    from solvers import OdeSolver

    folder = tmp_path / "decay"
    runpy.run_path(
        str(Path(__file__).resolve().parents[2] / "experiments" / "data" / "make_decay_petab.py")
    )["write"](folder)
    (folder / "conditions.tsv").write_text("conditionId\tA\nc0\t1.5\nc1\t0.7\n")
    rows = (folder / "measurements.tsv").read_text().splitlines()
    extra = [r.replace("\tc0\t", "\tc1\t") for r in rows[1:]]
    (folder / "measurements.tsv").write_text(
        "observableId\tpreequilibrationConditionId\tsimulationConditionId\ttime\tmeasurement\n"
        + "".join(r.replace("obs_A\t", "obs_A\t\t") + "\n" for r in rows[1:])
        + "".join(r.replace("obs_A\t", "obs_A\tc0\t") + "\n" for r in extra)
    )
    results = []
    for looped_from in (10**9, 0):
        monkeypatch.setattr(petab_module, "LOOPED_FROM", looped_from)
        # (explicit steps: the decay is not stiff, and they compile in a fraction of the time)
        problem = load_petab(
            folder / "decay.yaml", OdeSolver(method="tsit5", rtol=1e-10, atol=1e-12, throw=False)
        )
        if with_gradient:
            results.append(jax.jit(problem.value_and_grad())(problem.nominal()))
        else:
            results.append((jax.jit(problem.objective)(problem.nominal()), np.zeros(0)))
    (batched, batched_grad), (looped, looped_grad) = results
    assert np.isfinite(float(batched)) and abs(float(looped) - float(batched)) <= 1e-12 * abs(
        float(batched)
    )
    np.testing.assert_allclose(np.asarray(looped_grad), np.asarray(batched_grad), rtol=1e-10)


def _cli(args, cwd):
    import os
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    return subprocess.run(
        [sys.executable, "-m", "sim.cli", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )


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
        (
            "measurementData",
            "pSTAT5A_rel\t\tmodel1_data1\t7.90107299873911",
            "pSTAT5X\t\tmodel1_data1\t7.90107299873911",
            "row 1, column observableId: no observable 'pSTAT5X'",
        ),
        (
            "measurementData",
            "7.90107299873911",
            "seven",
            "row 1, column measurement: expected a number",
        ),
        (
            "measurementData",
            "7.90107299873911\t0.0\t\tsd_pSTAT5A_rel",
            "7.90107299873911\t0.0\t\t-2",
            "row 1, column noiseParameters: a noise parameter that is sigma itself must be "
            "positive",
        ),
        (
            "measurementData",
            "7.90107299873911\t0.0\t\tsd_pSTAT5A_rel",
            "7.90107299873911\t0.0\t\tsd_nothing",
            "row 1, column noiseParameters: 'sd_nothing' is neither a number nor a parameter",
        ),
        (
            "measurementData",
            "\tmodel1_data1\t7.90107299873911",
            "\tmodel9\t7.90107299873911",
            "column simulationConditionId: no condition 'model9'",
        ),
        (
            "observables",
            "noiseParameter1_pSTAT5A_rel\tlin",
            "noiseParameter1_pSTAT5A_rel + kk\tlin",
            "column noiseFormula: 'kk' is no id of the model",
        ),
    ],
)
def test_bad_petab_tables_are_one_line_naming_table_row_and_column(tmp_path, table, old, new, says):
    from inference._petab import PetabError, load_petab

    problem = _broken(tmp_path, table, old, new)
    with pytest.raises(PetabError) as raised:
        load_petab(problem).objective(load_petab(problem).nominal())
    message = str(raised.value)
    assert "\n" not in message and says in message, message


def test_a_parameter_nothing_uses_is_refused(tmp_path):
    from inference._petab import PetabError, load_petab

    problem = _broken(
        tmp_path,
        "parameters",
        "specC17\tspecC17\tlin\t-5\t5\t0.107\t0",
        "specC17\tspecC17\tlin\t-5\t5\t0.107\t0\nzzz\tzzz\tlog10\t1E-05\t100000\t1.0\t1",
    )
    with pytest.raises(PetabError, match="parameter table, row 'zzz': no parameter of the model"):
        load_petab(problem)


def test_a_bad_petab_problem_exits_2_with_one_line_and_no_output(tmp_cwd, capsys):
    from tests.helpers import cli

    problem = _broken(tmp_cwd, "measurementData", "7.90107299873911", "seven")
    code, err = cli(["fit", str(problem), "--evaluate", "-o", "out.h5"], capsys)
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and "column measurement: expected a number" in err, (
        err
    )
    assert "Traceback" not in err
    assert not (tmp_cwd / "out.h5").exists()


@pytest.mark.parametrize(
    "args",
    [["--evaluate"], pytest.param(["--starts", "2"], marks=pytest.mark.slow)],
    ids=["evaluate", "starts"],
)
def test_an_objective_that_is_not_finite_exits_1_and_writes_nothing(
    args, tmp_cwd, capsys, monkeypatch
):
    # A noise formula that is negative at the early measurements (1 - 2 A, A from 1.6 to
    # 0.3) gives the data there no density: --evaluate and a fit stop with one line, no file
    # (formerly: the density of |sigma|, written with exit 0). (`sim fit` loads the problem
    # with explicit steps: the decay is not stiff, and PEtab's default implicit solver took
    # most of the test in tracing and compiling.)
    import inference
    from solvers import OdeSolver
    from tests.helpers import cli

    explicit = OdeSolver(method="tsit5", rtol=1e-10, atol=1e-12, throw=False)
    monkeypatch.setattr(
        inference,
        "load_petab",
        lambda path, solver=None, allow_outside=False: load_petab(
            path, solver or explicit, allow_outside=allow_outside
        ),
    )
    problem = _decay_problem(tmp_cwd / "decay")
    (problem.parent / "observables.tsv").write_text(
        "observableId\tobservableFormula\tnoiseFormula\nobs_A\tA\t1 - 2 * A\n"
    )
    code, err = cli(["fit", str(problem), *args, "-o", "out.h5", "--quiet"], capsys)
    assert code == 1 and len(err.strip().splitlines()) == 1, err
    assert "objective is not finite" in err and "Traceback" not in err, err
    assert not (tmp_cwd / "out.h5").exists()


DECAY_SBML = """<?xml version="1.0" encoding="UTF-8"?>
<sbml xmlns="http://www.sbml.org/sbml/level3/version2/core" level="3" version="2">
  <model id="decay">
    <listOfCompartments><compartment id="c" size="1" constant="true"/></listOfCompartments>
    <listOfSpecies>
      <species id="A" compartment="c" initialConcentration="2" hasOnlySubstanceUnits="false" boundaryCondition="false" constant="false"/>
    </listOfSpecies>
    <listOfParameters><parameter id="k" value="0.5" constant="true"/></listOfParameters>
    <listOfReactions>
      <reaction id="r" reversible="false">
        <listOfReactants><speciesReference species="A" stoichiometry="1" constant="true"/></listOfReactants>
        <kineticLaw><math xmlns="http://www.w3.org/1998/Math/MathML"><apply><times/><ci>k</ci><ci>A</ci><ci>c</ci></apply></math></kineticLaw>
      </reaction>
    </listOfReactions>
  </model>
</sbml>
"""


def _decay_problem(folder: Path) -> Path:
    """A one-parameter PEtab problem: A(t) = 2 exp(-k t) measured with sigma 0.1."""
    folder.mkdir(exist_ok=True)
    (folder / "model.xml").write_text(DECAY_SBML)
    t = np.linspace(0.5, 4.0, 8)
    y = 2.0 * np.exp(-0.5 * t) + 0.1 * np.random.default_rng(7).standard_normal(t.size)
    (folder / "conditions.tsv").write_text("conditionId\nc0\n")
    (folder / "observables.tsv").write_text(
        "observableId\tobservableFormula\tnoiseFormula\nobs_A\tA\t0.1\n"
    )
    (folder / "measurements.tsv").write_text(
        "observableId\tsimulationConditionId\ttime\tmeasurement\n"
        + "".join(f"obs_A\tc0\t{ti}\t{yi}\n" for ti, yi in zip(t, y, strict=False))
    )
    (folder / "parameters.tsv").write_text(
        "parameterId\tparameterScale\tlowerBound\tupperBound\tnominalValue\testimate\nk\tlog10\t"
        "0.01\t10\t0.5\t1\n"
    )
    (folder / "decay.yaml").write_text(
        "format_version: 1\nparameter_file: parameters.tsv\nproblems:\n- sbml_files: [model.xml]\n "
        " condition_files: [conditions.tsv]\n"
        "  measurement_files: [measurements.tsv]\n  observable_files: [observables.tsv]\n"
    )
    return folder / "decay.yaml"


@pytest.mark.slow
def test_sim_infer_of_a_petab_problem_samples_its_posterior(tmp_path):
    """One parameter: the posterior of k (uniform prior on log10 k within the bounds)
    by quadrature on a fine grid against the NUTS draws of `sim infer`."""
    import h5py
    from scipy.integrate import trapezoid

    problem_path = _decay_problem(tmp_path / "decay")
    problem = load_petab(problem_path)
    objective = jax.jit(jax.vmap(lambda x: problem.objective(x[None])))
    grid = np.linspace(np.log10(0.3), np.log10(0.8), 801)  # (the likelihood is negligible outside)
    nll = np.asarray(objective(jax.numpy.asarray(grid)))
    weight = np.exp(-(nll - nll.min()))
    k = 10.0**grid
    mean = trapezoid(weight * k, grid) / trapezoid(weight, grid)
    sd = np.sqrt(trapezoid(weight * (k - mean) ** 2, grid) / trapezoid(weight, grid))
    done = _cli(
        [
            "infer",
            str(problem_path),
            "--chains",
            "1",
            "--warmup",
            "300",
            "--samples",
            "1000",
            "--seed",
            "3",
            "-o",
            "post.h5",
            "--quiet",
        ],
        tmp_path,
    )
    assert done.returncode == 0, done.stderr
    with h5py.File(tmp_path / "post.h5") as f:
        assert f.attrs["format"] == "simjax.posterior"
        draws = f["posterior/k"][()]
    assert draws.shape == (1, 1000)
    # (Monte Carlo error of the mean: sd / sqrt(ESS), ESS of a few hundred at least)
    assert abs(draws.mean() - mean) < 4 * sd / np.sqrt(200), (draws.mean(), mean, sd)
    assert abs(draws.std() / sd - 1) < 0.2, (draws.std(), sd)


_SIGMA_SD = "observableId\tobservableFormula\tnoiseFormula\nobs_A\tA\tnoiseParameter1_obs_A\n"


@pytest.mark.parametrize(
    "tables, says",
    [
        # (no measurement at all: a one-line error, not an internal error)
        (
            {"measurements.tsv": "observableId\tsimulationConditionId\ttime\tmeasurement\n"},
            "measurement table: no measurements",
        ),
        # (a sigma that is zero or negative: no objective of NaN written as if evaluated)
        (
            {"observables.tsv": "observableId\tobservableFormula\tnoiseFormula\nobs_A\tA\t0\n"},
            "column noiseFormula: a sigma that is a number must be a positive",
        ),
        (
            {"observables.tsv": "observableId\tobservableFormula\tnoiseFormula\nobs_A\tA\t-0.1\n"},
            "column noiseFormula: a sigma that is a number must be a positive",
        ),
        (
            {
                "observables.tsv": _SIGMA_SD,
                "parameters.tsv": "parameterId\tparameterScale\tlowerBound\tupperBound\t"
                "nominalValue\testimate\nk\tlog10\t0.01\t10\t0.5\t1\nsd\tlin\t0\t1\t0\t0\n",
            },
            "the fixed parameter 'sd' has the nominal value 0.0",
        ),
        (
            {"decay.yaml": "name: hello\n"},
            "not a readable PEtab problem: the keys 'parameter_file', 'problems' are missing",
        ),
    ],
)
def test_a_problem_without_measurements_or_with_a_sigma_not_positive_is_refused(
    tmp_path, tables, says
):
    problem = _decay_problem(tmp_path / "decay")
    for table, text in tables.items():
        (problem.parent / table).write_text(text)
    if "parameters.tsv" in tables:  # (sd is every measurement's sigma)
        lines = (problem.parent / "measurements.tsv").read_text().splitlines()
        (problem.parent / "measurements.tsv").write_text(
            "\n".join([lines[0] + "\tnoiseParameters", *(line + "\tsd" for line in lines[1:])])
            + "\n"
        )
    with pytest.raises(PetabError) as raised:
        load_petab(problem)
    message = str(raised.value)
    assert "\n" not in message and says in message, message


def test_a_bad_option_value_names_the_option(tmp_path, capsys, monkeypatch):
    # (was "sim fit: error: Input should be greater than or equal to 1", naming no option)
    from tests.helpers import cli

    problem = _decay_problem(tmp_path / "decay")
    monkeypatch.chdir(tmp_path)
    code, err = cli(["fit", str(problem), "--starts", "0", "-o", "out.h5"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "'--starts'" in err, err
    assert not (tmp_path / "out.h5").exists()


@pytest.mark.slow
@pytest.mark.parametrize("signum, code", [(2, 130), (15, 143)])
def test_an_interrupted_multistart_exits_with_its_code_and_writes_nothing(tmp_path, signum, code):
    # (SIGINT after the first start ended was deferred to the end of all 50 starts: the
    # fit went on, wrote its file and exited 0)
    import os
    import subprocess
    import sys

    problem = _decay_problem(tmp_path / "decay")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    child = subprocess.Popen(
        [sys.executable, "-m", "sim.cli", "fit", str(problem), "--starts", "50", "-o", "out.h5"],
        cwd=tmp_path,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    first = child.stderr.readline()
    assert "start" in first, first
    child.send_signal(signum)
    err = child.stderr.read()
    assert child.wait(timeout=600) == code, err
    assert "interrupted" in err and not (tmp_path / "out.h5").exists(), err


# A feed that nothing changes: S' = k * F (F a boundary species held constant, in
# amounts), S(0) = 0, so S(t) = k * F * t. Conditions set F (as the ROS conditions of
# Smith_BMCSystBiol2013 set its extracellular_ROS).
_FEED_SBML = """<?xml version="1.0" encoding="UTF-8"?>
<sbml xmlns="http://www.sbml.org/sbml/level3/version2/core" level="3" version="2">
  <model id="feed">
    <listOfCompartments><compartment id="c" size="2" DIMS constant="true"/></listOfCompartments>
    <listOfSpecies>
      <species id="F" compartment="c" initialAmount="0" hasOnlySubstanceUnits="true" boundaryCondition="true" constant="false"/>
      <species id="G" compartment="c" initialConcentration="1.5" hasOnlySubstanceUnits="false" boundaryCondition="true" constant="true"/>
      <species id="S" compartment="c" initialAmount="0" hasOnlySubstanceUnits="true" boundaryCondition="false" constant="false"/>
      <species id="H" compartment="c" initialAmount="0" hasOnlySubstanceUnits="true" boundaryCondition="true" constant="false"/>
    </listOfSpecies>
    <listOfParameters><parameter id="k" value="0.5" constant="true"/></listOfParameters>
    <listOfRules>
      <assignmentRule variable="H"><math xmlns="http://www.w3.org/1998/Math/MathML"><apply><times/><cn>2</cn><ci>k</ci></apply></math></assignmentRule>
    </listOfRules>
    <listOfReactions>
      <reaction id="feed" reversible="false">
        <listOfReactants><speciesReference species="F" stoichiometry="1" constant="true"/></listOfReactants>
        <listOfProducts><speciesReference species="S" stoichiometry="1" constant="true"/></listOfProducts>
        <kineticLaw><math xmlns="http://www.w3.org/1998/Math/MathML"><apply><times/><ci>k</ci><ci>F</ci><ci>G</ci></apply></math></kineticLaw>
      </reaction>
    </listOfReactions>
  </model>
</sbml>
"""


def _feed_problem(folder: Path, conditions: str, dims: str = 'spatialDimensions="3"') -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "feed.xml").write_text(_FEED_SBML.replace("DIMS", dims))
    (folder / "conditions.tsv").write_text(conditions)
    (folder / "observables.tsv").write_text(
        "observableId\tobservableFormula\tnoiseFormula\nobs_S\tS\t1\n"
    )
    rows = "".join(f"obs_S\t{c}\t2.0\t0.0\n" for c in ("low", "high"))
    (folder / "measurements.tsv").write_text(
        "observableId\tsimulationConditionId\ttime\tmeasurement\n" + rows
    )
    (folder / "parameters.tsv").write_text(
        "parameterId\tparameterScale\tlowerBound\tupperBound\tnominalValue\testimate\nk\tlin\t0\t"
        "10\t0.5\t1\n"
    )
    (folder / "feed.yaml").write_text(
        "format_version: 1\nparameter_file: parameters.tsv\nproblems:\n- sbml_files: [feed.xml]\n  "
        "condition_files: [conditions.tsv]\n"
        "  measurement_files: [measurements.tsv]\n  observable_files: [observables.tsv]\n"
    )
    return folder / "feed.yaml"


# (by default a compartment without spatialDimensions; with -m slow one of three dimensions too)
@pytest.mark.parametrize(
    "dims", [pytest.param('spatialDimensions="3"', marks=pytest.mark.slow), ""]
)
def test_a_condition_sets_a_species_that_nothing_changes(tmp_path, dims):
    # S(2) = k F G 2 with k = 0.5: F = 3 and G = 1.5 give 4.5, F = 10 and G = 0.25 give 2.5;
    # each term is log(sqrt(2 pi)) + S(2)^2 / 2 (data 0, sigma 1). Before constant species
    # were settable, both conditions silently simulated F = 0. G is a concentration also
    # where the compartment leaves its dimensions unset (Level 3 allows it). (Explicit
    # steps: nothing here is stiff, and PEtab's default implicit solver took most of the
    # test in tracing and compiling.)
    from solvers import OdeSolver

    problem = load_petab(
        _feed_problem(tmp_path / "feed", "conditionId\tF\tG\nlow\t3\t1.5\nhigh\t10\t0.25\n", dims),
        OdeSolver(method="tsit5", rtol=1e-10, atol=1e-12, throw=False),
    )
    terms = np.asarray(
        jax.jit(problem.residual_terms)(problem.nominal())
    )  # (compiled whole: op by op took longer)
    np.testing.assert_allclose(
        terms, 0.5 * np.log(2 * np.pi) + 0.5 * np.array([4.5, 2.5]) ** 2, rtol=1e-7
    )
    # A species an assignment rule computes cannot be set by a condition: refused in one
    # line naming the table and the column.
    with pytest.raises(
        PetabError, match=r"feed.yaml: condition table, column 'H': .* computes this species"
    ):
        load_petab(_feed_problem(tmp_path / "ruled", "conditionId\tH\nlow\t3\nhigh\t4\n"))
