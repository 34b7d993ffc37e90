"""Every example config in experiments/ runs from the command line at a small size with the
command that fits it (`run`; `sweep` for a [sweep]; `fit` and `infer` for [fit] and
[infer]), and `sim plot` draws each output: a non-empty PNG whose pixels are not uniform.

Each run is made once in the default test suite. The PDE examples run in
tests/sim/test_pde_configs.py; those that README.md and the guide show run (and are drawn) in
tests/test_readme.py; the rest here. `ELSEWHERE` names where, and a test checks that
they are still there. A new config in experiments/ without an entry fails.
"""

import re
import sys

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib
from pathlib import Path

import numpy as np
import pytest

import sim
from sim.cli import main  # noqa: F401

from .test_pde_configs import SMALL as PDE_SMALL
from .test_plot import check_png, cli, plot  # noqa: F401  (imported from here by other tests)

REPO = Path(__file__).resolve().parents[2]
EXPERIMENTS = REPO / "experiments"
TINY_CHAINS = ["--set", "infer.chains=1", "--set", "infer.warmup=20", "--set", "infer.samples=20"]
LJ_SMALL = [
    "--set",
    "system.cells=3",
    "--set",
    "params.cutoff=2.5",
    "--set",
    "params.tail_correction=false",
    "--set",
    "time.steps=200",
    "--set",
    "time.save_every=20",
]
LV_GRID_SMALL = [
    "--set",
    "sweep.params.alpha={ linspace = [0.3, 0.8, 4] }",
    "--set",
    "sweep.params.beta={ logspace = [-2.0, -1.3, 3] }",
]

# config -> [(command, extra arguments)] run here in the default suite, at sizes that run
# in seconds.
COMMANDS = {
    "lotka_volterra.toml": [("run", [])],
    "robertson.toml": [("run", [])],
    "bouncing_ball.toml": [("run", [])],
    "lotka_volterra_sobol.toml": [
        ("sweep", ["--set", "sweep.samples=16", "--set", "sweep.chunk=16"])
    ],
    "heat_diffusivity_fit.toml": [("fit", [])],
    "lj_sweep.toml": [
        (
            "sweep",
            [
                "--set",
                "system.cells=2",
                "--set",
                "params.cutoff=1.6",
                "--set",
                "time.steps=100",
                "--set",
                "time.save_every=20",
                "--set",
                "sweep.params.epsilon={ values = [0.8, 1.2] }",
                "--set",
                "sweep.params.sigma={ values = [0.95, 1.0] }",
            ],
        )
    ],
}
# config -> [(command, where its run and figure are in the default suite)].
ELSEWHERE = {
    "lorenz.toml": [("run", "README")],
    "lj_fluid.toml": [("run", "README")],
    "lotka_volterra_sweep.toml": [("sweep", "README")],
    "lynx_hare.toml": [("fit", "README")],
    "lj_calibration.toml": [("fit", "tests/inference/test_fit_md.py")],
    "lj_rdf_fit.toml": [("fit", "tests/inference/test_fit_rdf.py")],
    "sir_boarding_school.toml": [("sweep", "README")],
    "predation.toml": [("run", "tests/sim/test_model_sources.py")],
    "gray_scott_text.toml": [("run", "tests/sim/test_pde_configs.py")],
}
# config -> [(command, extra arguments)] run here with `-m slow`: NUTS (seconds of compiling
# per model), and the runs made elsewhere by default, so that this file alone covers every
# example.
SLOW = {
    "lorenz.toml": [("run", ["--set", "time.t1=5.0", "--set", "time.save=501"])],
    "lj_fluid.toml": [("run", LJ_SMALL)],
    "lotka_volterra_sweep.toml": [("sweep", LV_GRID_SMALL)],
    "lynx_hare.toml": [("fit", []), ("infer", TINY_CHAINS)],
    "heat_diffusivity_fit.toml": [("infer", TINY_CHAINS)],
    "lj_calibration.toml": [("fit", [])],
    "lj_rdf_fit.toml": [
        (
            "fit",
            [
                "--set",
                "system.cells=3",
                "--set",
                "time.steps=600",
                "--set",
                "rdf.start=1.0",
                "--set",
                "fit.max_steps=2",
            ],
        )
    ],
    "sir_boarding_school.toml": [("sweep", []), ("fit", [])],
    "predation.toml": [("run", [])],
    "gray_scott_text.toml": [("run", ["--set", "time.t1=200.0", "--set", "time.save=3"])],
}
FORMATS = {
    "run": "simjax.run",
    "sweep": "simjax.sweep",
    "fit": "simjax.fit",
    "infer": "simjax.posterior",
}


def needed_commands(path: Path) -> set[str]:
    """The commands an example is meant for, by the sections of its config."""
    config = tomllib.loads(path.read_text())
    if "sweep" in config:
        return {"sweep"}
    return ({"fit"} if "fit" in config else set()) | (
        {"infer"} if "infer" in config else set()
    ) or {"run"}


def test_every_example_config_has_a_test():
    examples = {p.name for p in EXPERIMENTS.glob("*.toml")}
    covered = set(COMMANDS) | set(ELSEWHERE) | set(PDE_SMALL)
    assert examples == covered, (
        f"add small-size entries for {sorted(examples - covered)}; drop "
        f"{sorted(covered - examples)}"
    )
    for name in sorted(examples):
        default = (
            {c for c, _ in COMMANDS.get(name, [])}
            | {c for c, _ in ELSEWHERE.get(name, [])}
            | ({"run"} if name in PDE_SMALL else set())
        )
        slow = {c for c, _ in SLOW.get(name, [])}
        needed = needed_commands(EXPERIMENTS / name)
        assert needed - {"infer"} <= default, name  # NUTS may be slow-only
        assert needed <= default | slow, name
        assert {c for c, _ in SLOW.get(name, [])} >= {c for c, _ in ELSEWHERE.get(name, [])}, name


def test_examples_run_elsewhere_are_still_there():
    from ..test_readme import SLOW as README_SLOW, plotted_outputs, runnable, shell_commands

    readme = [runnable(c) for c in shell_commands()]
    default = [c for c in readme if c not in README_SLOW]
    for name, places in ELSEWHERE.items():
        for command, where in places:
            if where == "README":
                # `sim COMMAND experiments/NAME -o OUT` and a `sim plot OUT` run by default
                # (tests/test_readme.py checks the PNG of every `sim plot`).
                runs = [
                    c.split() for c in default if c.startswith(f"sim {command} experiments/{name} ")
                ]
                assert runs, (name, command)
                outputs = {words[words.index("-o") + 1] for words in runs if "-o" in words}
                assert outputs & set(plotted_outputs(default)), (name, command)
            else:
                text = (REPO / where).read_text()
                assert f'"{command}"' in text and name in text and "plot(" in text, (
                    name,
                    command,
                    where,
                )


def run_and_plot(name, runs, capsys, monkeypatch):
    from matplotlib.figure import Figure

    import inference

    # The result objects behind `sim fit` and `sim infer`, for `sim.plot(result)`.
    results = {}
    for command, function in (("fit", inference.fit), ("infer", inference.infer)):

        def spy(*args, _command=command, _function=function, **kwargs):
            results[_command] = _function(*args, **kwargs)
            return results[_command]

        monkeypatch.setattr(inference, command, spy)
    for command, extra in runs:
        out = f"{Path(name).stem}_{command}.h5"
        code, err = cli([command, str(EXPERIMENTS / name), "-o", out, "--quiet", *extra], capsys)
        assert code == 0, (command, err)
        assert sim.read(out).format == FORMATS[command]
        plot(out, capsys)
        if command in results:
            from tests.sim.test_plot import assert_record_is_the_file

            assert_record_is_the_file(results[command], out)
            fig = sim.plot(results[command])
            assert isinstance(fig, Figure) and len(fig.axes) > 2
            assert fig._suptitle.get_text().endswith(type(results[command]).__name__)


def check_robertson(path):
    """experiments/robertson.toml saves at its `time.save_at` times the solution of the
    stiff Robertson problem: against Hairer & Wanner's reference at t = 40 and an
    independent solver (SciPy's Radau) at every saved time."""
    from scipy.integrate import solve_ivp

    save_at = tomllib.loads((EXPERIMENTS / "robertson.toml").read_text())["time"]["save_at"]
    record = sim.read(path)
    np.testing.assert_array_equal(record.time, save_at)
    y = np.array([record.observables[n] for n in ("y1", "y2", "y3")])
    # Hairer & Wanner, "Solving Ordinary Differential Equations II" (2nd ed., 1996),
    # section IV.10: y(40) = (0.7158270687, 0.9185534764e-5, 0.2841637457). Measured
    # (kvaerno5, rtol 1e-8, atol 1e-10, 62 steps): relative errors 7.9e-11, 2.4e-9,
    # 4.3e-10 (the reference's ten digits themselves round at up to 1.8e-10); bound 3x
    # the largest.
    np.testing.assert_allclose(
        y[:, -1], [0.7158270687, 0.9185534764e-5, 0.2841637457], rtol=7.5e-9, atol=0.0
    )

    def rates(t, y):
        return [
            -0.04 * y[0] + 1e4 * y[1] * y[2],
            0.04 * y[0] - 1e4 * y[1] * y[2] - 3e7 * y[1] ** 2,
            3e7 * y[1] ** 2,
        ]

    def jacobian(t, y):
        return [
            [-0.04, 1e4 * y[2], 1e4 * y[1]],
            [0.04, -1e4 * y[2] - 6e7 * y[1], -1e4 * y[1]],
            [0.0, 6e7 * y[1], 0.0],
        ]

    # Radau at rtol 1e-12 agrees with the reference at t = 40 to 1.6e-10. Measured: largest
    # error 1.2e-8 in y1 and 1.1e-8 in y3 (about 1 in size: rtol sets their steps), 4.8e-11
    # in y2 (2.2e-5 in size: atol = 1e-10 sets its steps); bounds 3x those.
    ref = solve_ivp(
        rates,
        (save_at[0], save_at[-1]),
        [1.0, 0.0, 0.0],
        method="Radau",
        t_eval=save_at,
        rtol=1e-12,
        atol=1e-16,
        jac=jacobian,
    )
    np.testing.assert_allclose(y[[0, 2]], ref.y[[0, 2]], rtol=0, atol=3.6e-8)
    np.testing.assert_allclose(y[1], ref.y[1], rtol=0, atol=1.5e-10)
    np.testing.assert_allclose(y.sum(axis=0), 1.0, rtol=0, atol=1e-14)  # y1 + y2 + y3 = 1


def check_sir_fit(path):
    """The SIR fit of experiments/sir_boarding_school.toml is the least-squares fit that
    SciPy finds (`least_squares` on `solve_ivp` at rtol 1e-11), and the guide shows it
    (docs/own-model.md)."""
    from scipy.integrate import solve_ivp
    from scipy.optimize import least_squares

    from ..test_readme import DOCUMENTS

    record = sim.read(path)
    day, in_bed = record.data["time"], record.data["observables"]["I"]

    def residuals(theta):
        beta, gamma = theta

        def rates(t, y):
            s, i, _ = y
            return [-beta * s * i / 763.0, beta * s * i / 763.0 - gamma * i, gamma * i]

        solution = solve_ivp(
            rates,
            (0.0, day[-1]),
            [762.0, 1.0, 0.0],
            t_eval=day,
            method="DOP853",
            rtol=1e-11,
            atol=1e-11,
        )
        return solution.y[1] - in_bed

    reference = least_squares(residuals, [2.0, 0.5], xtol=1e-12, ftol=1e-12, gtol=1e-12).x
    # Measured: agreement to 8e-9 relative (the fit stops at rtol 1e-8 of its loss).
    np.testing.assert_allclose(
        [record.estimate["beta"], record.estimate["gamma"]], reference, rtol=1e-6
    )
    for name in ("beta", "gamma"):
        assert re.search(
            rf"^ {name}\s+{record.estimate[name]:.6g}\s+{record.stderr[name]:.3g}$",
            DOCUMENTS["docs/own-model.md"],
            re.M,
        ), name


# Numbers checked beyond the file and its figure, by example.
CHECKS = {
    "robertson.toml": lambda: check_robertson("robertson_run.h5"),
    "sir_boarding_school.toml": lambda: (
        check_sir_fit("sir_boarding_school_fit.h5")
        if Path("sir_boarding_school_fit.h5").exists()
        else None
    ),
}


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_example_runs_from_the_cli_and_plots(name, tmp_cwd, capsys, monkeypatch):
    run_and_plot(name, COMMANDS[name], capsys, monkeypatch)
    CHECKS.get(name, lambda: None)()


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(SLOW))
def test_example_runs_from_the_cli_and_plots_slow(name, tmp_cwd, capsys, monkeypatch):
    run_and_plot(name, SLOW[name], capsys, monkeypatch)
    CHECKS.get(name, lambda: None)()
