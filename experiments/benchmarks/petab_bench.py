"""PEtab benchmark problems: objectives against reference log-likelihoods, a forward
simulation against libRoadRunner, and a multistart fit.

1. `--evaluate`: the negative log-likelihood at the nominal parameters of every problem
   folder given (default: the copies in tests/data/petab) against the reference
   log-likelihoods that AMICI's tests keep (AMICI-dev/AMICI,
   tests/benchmark_models/benchmark_models.yaml); time of the first evaluation (trace
   and compile included) and of a compiled one.
2. `--roadrunner`: one forward simulation of Boehm_JProteomeRes2014 at the nominal
   parameters on both sides, same tolerances (rtol 1e-8, atol 1e-10), same output times,
   BDF (CVODE) for libRoadRunner and Kvaerno5 for simjax; the median of repeated solves
   and the largest relative difference of the species.
3. `--starts N`: multistart fit of Boehm_JProteomeRes2014 (Latin hypercube starts
   within the bounds, L-BFGS-B, all starts batched); the best objective against the
   nominal one, the fraction of starts within 0.1 of the best, and the wall time.
4. `--roadrunner-llh FOLDER [RTOL ATOL]`: the log-likelihood at the nominal parameters
   from libRoadRunner's simulations (CVODE at the given tolerances, default 1e-12 and
   1e-14), one fresh model per simulation condition with the condition's parameters and
   initial amounts, events included, the observables evaluated by PEtab's parser (with
   each measurement's observable parameters) and the likelihood by `petab.calculate_llh`:
   a value independent of simjax and AMICI, for problems whose reference is in question
   (Smith_BMCSystBiol2013, Chen_MSB2009). Conditions that set
   species must be on models whose species have only substance units (Smith's).
5. `--spread`: `sim fit PROBLEM.yaml --starts 8` of the small decay problem
   (experiments/data/make_decay_petab.py) three ways, each a fresh `sim` process: one
   host device, the batch split over two host devices, and two blocks of four on
   `--scheduler local:2`; wall time of the process and of the fit as `sim fit` reports
   it, and the largest relative difference of the per-start objectives from the first.

Run: python experiments/benchmarks/petab_bench.py --evaluate --roadrunner --starts 100 --spread
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

jax.config.update("jax_enable_x64", True)

import sim  # noqa: E402

sim.configure_jax()  # float64, the compilation cache, XLA's options (as the `sim` command)
from inference._petab import load_petab  # noqa: E402
from inference._petab_fit import SAME_OPTIMUM, fit_petab  # noqa: E402
from solvers import OdeSolver  # noqa: E402

DATA = Path(__file__).resolve().parents[2] / "tests" / "data" / "petab"
BOEHM = DATA / "Boehm_JProteomeRes2014" / "Boehm_JProteomeRes2014.yaml"

# AMICI-dev/AMICI, tests/benchmark_models/benchmark_models.yaml ("llh"); for Crauste the
# value computed from the collection's own simulated data (see tests/inference/test_petab.py).
REFERENCE_LLH = {
    "Bachmann_MSB2011": 418.40573341425295,
    "Beer_MolBioSystems2014": 58622.9145631413,
    "Boehm_JProteomeRes2014": -138.22199693517703,
    "Borghans_BiophysChem1997": 83.3237191357272,
    "Brannmark_JBC2010": -141.889113770537,
    "Bruno_JExpBot2016": 46.688176988431806,
    "Chen_MSB2009": -115700.1192629893,
    "Crauste_CellSystems2017": -190.9639775693566,
    "Elowitz_Nature2000": 63.20279991419332,
    "Fiedler_BMCSystBiol2016": 58.58390161681,
    "Fujita_SciSignal2010": 53.08377736998929,
    "Isensee_JCB2018": -3949.375966548649,
    "Lucarelli_CellSystems2018": -1681.6059879426584,
    "Schwen_PONE2014": -943.9992988598723,
    "Smith_BMCSystBiol2013": -888198.436541014,
    "Sneyd_PNAS2002": 319.79177818768756,
    "Weber_BMC2015": -296.2017922646865,
    "Zheng_PNAS2012": 278.33353271001477,
}
RTOL, ATOL = 1e-8, 1e-10


def evaluate(folders: list[Path]) -> None:
    print(
        f"{'problem':<28} {'-objective':>16} {'reference llh':>16} {'difference':>11} "
        f"{'first call':>11} {'compiled':>10}"
    )
    for folder in folders:
        name = folder.name
        start = time.perf_counter()
        problem = load_petab(folder / f"{name}.yaml")
        objective = jax.jit(problem.objective)
        x = problem.nominal()
        value = float(objective(x))
        first = time.perf_counter() - start
        runs = []
        for _ in range(3):
            t = time.perf_counter()
            jax.block_until_ready(objective(x))
            runs.append(time.perf_counter() - t)
        reference = REFERENCE_LLH.get(name, float("nan"))
        print(
            f"{name:<28} {-value:16.8f} {reference:16.8f} {-value - reference:11.2e} "
            f"{first:10.1f}s {min(runs) * 1e3:8.1f}ms",
            flush=True,
        )


def roadrunner_comparison(repeats: int) -> None:
    import roadrunner

    problem = load_petab(BOEHM)
    model = problem.model
    nominal = {p.id: p.nominal for p in problem.parameters}
    params = {
        **{k: float(v) for k, v in model.default_params().items()},
        **{k: v for k, v in nominal.items() if k in model.parameter_names},
    }
    times = np.array([0.0, 2.5, 5, 10, 15, 20, 30, 40, 50, 60, 80, 100, 120, 160, 200, 240])
    solver = OdeSolver(method="kvaerno5", rtol=RTOL, atol=ATOL, max_steps=100_000)
    solve = jax.jit(lambda p: sim.simulate(model, p, jnp.asarray(times), solver=solver).observables)
    p = {k: jnp.asarray(v) for k, v in params.items()}
    start = time.perf_counter()
    ours = jax.block_until_ready(solve(p))
    compile_time = time.perf_counter() - start
    simjax_times = []
    for _ in range(repeats):
        t = time.perf_counter()
        jax.block_until_ready(solve(p))
        simjax_times.append(time.perf_counter() - t)

    rr = roadrunner.RoadRunner(str(BOEHM.parent / "model_Boehm_JProteomeRes2014.xml"))
    rr.integrator.relative_tolerance = RTOL
    rr.integrator.absolute_tolerance = ATOL
    rr.integrator.maximum_num_steps = 100_000
    species = list(rr.model.getFloatingSpeciesIds())

    def run_rr():
        rr.resetAll()
        for k, v in nominal.items():
            if k in rr.model.getGlobalParameterIds():
                rr.setValue(k, float(v))
        rr.reset()  # (initial assignments evaluated with the parameters just set)
        rr.selections = [
            "time",
            *(f"[{s}]" for s in species),
        ]  # (concentrations, as the observables)
        return rr.simulate(times=list(times))

    theirs = run_rr()
    rr_times = []
    for _ in range(repeats):
        t = time.perf_counter()
        run_rr()
        rr_times.append(time.perf_counter() - t)
    difference = max(
        float(
            np.max(
                np.abs(np.asarray(ours[s]) - theirs[:, 1 + k])
                / np.maximum(np.abs(theirs[:, 1 + k]), 1e-6)
            )
        )
        for k, s in enumerate(species)
    )
    a, b = statistics.median(simjax_times), statistics.median(rr_times)
    print(
        f"forward simulation of Boehm_JProteomeRes2014 ({len(times)} times, rtol {RTOL}, atol "
        f"{ATOL}), median of {repeats}:"
    )
    print(f"  simjax (kvaerno5, compiled; compile {compile_time:.1f} s): {a * 1e3:.2f} ms")
    print(f"  libRoadRunner {roadrunner.__version__} (CVODE BDF):        {b * 1e3:.2f} ms")
    print(
        f"  ratio simjax / libRoadRunner: {a / b:.2f}; largest relative species difference "
        f"{difference:.1e}"
    )


def roadrunner_llh(folder: Path, rtol: float, atol: float) -> None:
    import pandas as pd
    import roadrunner
    from petab.v1 import Problem, calculate_llh
    from petab.v1.math import sympify_petab
    from petab.v1.measurements import split_parameter_replacement_list

    name = folder.name
    problem = Problem.from_yaml(str(folder / f"{name}.yaml"))
    sbml = str(folder / f"model_{name}.xml")
    nominal = problem.parameter_df["nominalValue"].to_dict()
    measurements = problem.measurement_df
    start = time.perf_counter()
    rows = []
    for condition, group in measurements.groupby("simulationConditionId"):
        rr = roadrunner.RoadRunner(sbml)
        rr.integrator.relative_tolerance = rtol
        rr.integrator.absolute_tolerance = atol
        rr.integrator.maximum_num_steps = 10_000_000
        model = rr.model
        parameters, compartments = (
            set(model.getGlobalParameterIds()),
            set(model.getCompartmentIds()),
        )
        species = set(model.getFloatingSpeciesIds()) | set(model.getBoundarySpeciesIds())
        values = {k: float(v) for k, v in nominal.items() if k in parameters}
        for key, value in problem.condition_df.loc[condition].items():
            if key != "conditionName" and not (isinstance(value, float) and np.isnan(value)):
                values[key] = float(nominal[value]) if isinstance(value, str) else float(value)
        for key, value in values.items():
            if key in species:
                rr.setValue(f"init({key})", value)
        rr.reset()  # (the species to the initial amounts just set; it also resets parameters)
        for key, value in values.items():
            if key in parameters or key in compartments:
                rr.setValue(key, value)
            elif key not in species:
                raise SystemExit(
                    f"{name}: condition {condition!r} sets {key!r}, no parameter, compartment or "
                    "species"
                )
        assert all(rr.getValue(k) == v for k, v in values.items())
        times = sorted({0.0, *group["time"].astype(float)})
        ids = sorted(species | parameters | compartments)
        rr.selections = ["time", *ids]
        result = np.asarray(rr.simulate(times=times))
        at = {t: dict(zip(ids, result[i, 1:], strict=False)) for i, t in enumerate(times)}
        for _, row in group.iterrows():
            formula = sympify_petab(
                problem.observable_df.loc[row["observableId"], "observableFormula"]
            )
            known = {**{k: float(v) for k, v in nominal.items()}, **at[float(row["time"])]}
            for i, value in enumerate(
                split_parameter_replacement_list(row.get("observableParameters", "")), start=1
            ):
                known[f"observableParameter{i}_{row['observableId']}"] = (
                    float(nominal[value]) if isinstance(value, str) else float(value)
                )
            rows.append(
                {
                    **row.to_dict(),
                    "simulation": float(
                        formula.subs({s: known[s.name] for s in formula.free_symbols})
                    ),
                }
            )
    simulations = pd.DataFrame(rows).drop(columns=["measurement"])
    llh = calculate_llh(measurements, simulations, problem.observable_df, problem.parameter_df)
    reference = REFERENCE_LLH.get(name, float("nan"))
    print(
        f"{name}: libRoadRunner {roadrunner.__version__} (CVODE, rtol {rtol:g}, atol {atol:g}), "
        f"{len(rows)} measurements, "
        f"{time.perf_counter() - start:.0f} s: llh {llh:.6f}, AMICI's reference {reference:.6f} "
        f"({llh - reference:+.2e})"
    )


def multistart(starts: int, seed: int) -> None:
    problem = load_petab(BOEHM)
    nominal_objective = float(jax.jit(problem.objective)(problem.nominal()))
    start = time.perf_counter()
    result = fit_petab(problem, starts=starts, seed=seed)
    wall = time.perf_counter() - start
    objective = np.sort(result.starts_objective)
    near = int(np.sum(objective <= objective[0] + SAME_OPTIMUM))
    print(
        f"multistart Boehm_JProteomeRes2014: {starts} starts (seed {seed}), wall time {wall:.0f} s "
        f"({wall / starts:.1f} s per start)"
    )
    print(
        f"  best objective {objective[0]:.6f} (nominal {nominal_objective:.6f}); {near}/{starts} "
        f"starts within {SAME_OPTIMUM} of the best"
    )
    print(
        f"  converged {int(result.converged.sum())}/{starts}; sorted objectives: "
        f"{np.array2string(objective[:12], precision=3)} ..."
    )


def spread(repeats: int) -> None:
    import re
    import subprocess
    import sys
    import tempfile

    import h5py

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "data"))
    from make_decay_petab import write

    repo = Path(__file__).resolve().parents[2]
    ways = {
        "1 host device": (["--devices", "1"], {}),
        "2 host devices": (
            ["--devices", "2"],
            {"XLA_FLAGS": "--xla_force_host_platform_device_count=2"},
        ),
        "--scheduler local:2": (["--scheduler", "local:2"], {}),
    }
    with tempfile.TemporaryDirectory() as folder:
        yaml = write(Path(folder) / "decay")
        reference = None
        for name, (options, env) in ways.items():
            walls, fits = [], []
            for _ in range(repeats):
                out = Path(folder) / f"fit_{len(walls)}_{options[-1].replace(':', '')}.h5"
                start = time.perf_counter()
                done = subprocess.run(
                    [
                        sys.executable,
                        "-m",
                        "sim.cli",
                        "fit",
                        str(yaml),
                        "--starts",
                        "8",
                        "-o",
                        str(out),
                        *options,
                    ],
                    env={**os.environ, "PYTHONPATH": str(repo), **env},
                    capture_output=True,
                    text=True,
                    check=True,
                )
                walls.append(time.perf_counter() - start)
                fits.append(float(re.search(r"\(([0-9.]+) s\)", done.stderr).group(1)))
                with h5py.File(out) as f:
                    objective = f["starts/objective"][()]
                reference = objective if reference is None else reference
            difference = float(np.max(np.abs(objective / reference - 1)))
            print(
                f"8 starts, {name:<20}: process {statistics.median(walls):6.1f} s, fit "
                f"{statistics.median(fits):6.1f} s "
                f"(median of {repeats}; load now {os.getloadavg()[0]:.2f}); objectives differ from "
                f"the first by {difference:.1e}",
                flush=True,
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--evaluate", nargs="*", type=Path, help="problem folders (default: tests/data/petab/*)"
    )
    parser.add_argument("--roadrunner", action="store_true")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument(
        "--roadrunner-llh",
        nargs="+",
        metavar=("FOLDER", "RTOL ATOL"),
        help="a problem folder, then rtol and atol (default 1e-12 1e-14)",
    )
    parser.add_argument("--starts", type=int, default=0)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--spread", type=int, nargs="?", const=3, default=0, help="repeats of each way (default 3)"
    )
    args = parser.parse_args()
    print(
        f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores, load "
        f"{os.getloadavg()[0]:.2f}; jax {jax.__version__}"
    )
    if args.evaluate is not None:
        evaluate(args.evaluate or sorted(p for p in DATA.iterdir() if p.is_dir()))
    if args.roadrunner:
        roadrunner_comparison(args.repeats)
    if args.roadrunner_llh:
        folder, *tolerances = args.roadrunner_llh
        rtol, atol = (float(x) for x in tolerances) if tolerances else (1e-12, 1e-14)
        roadrunner_llh(Path(folder), rtol, atol)
    if args.starts:
        multistart(args.starts, args.seed)
    if args.spread:
        spread(args.spread)


if __name__ == "__main__":
    main()
