"""The `sim` command: runs, listings, and one clear line with exit code 2 for bad input."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

import sim
from tests.helpers import cli_out as cli

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"
GOOD = '[model]\nname = "lotka_volterra"\n[time]\nt1 = 5.0\nsave = 6\n'


def test_run_writes_run_layout(tmp_cwd, capsys):
    shutil.copy(EXPERIMENTS / "lotka_volterra.toml", tmp_cwd)
    code, _, err = cli(["run", "lotka_volterra.toml", "-o", "lv.h5"], capsys)
    assert code == 0, err
    with h5py.File("lv.h5") as f:
        assert f["time"].shape == (201,)
        assert f["observables/prey"].shape == (201,)
        assert f["observables/predator"].shape == (201,)
        for attr in ("format", "format_version", "model", "config", "created", "versions"):
            assert attr in f.attrs
        assert f.attrs["format"] == "simjax.run"
    record = sim.read("lv.h5")
    assert record.observables["prey"][0] == 30.0
    assert [p.name for p in tmp_cwd.iterdir() if p.name.startswith(".")] == []


def test_run_uses_output_file_from_config_relative_to_its_folder(tmp_cwd, capsys):
    (tmp_cwd / "cfg").mkdir()
    (tmp_cwd / "cfg" / "c.toml").write_text(GOOD + '[output]\nfile = "out.h5"\n')
    code, _, err = cli(["run", "cfg/c.toml", "--quiet", "--set", "params.alpha=0.5"], capsys)
    assert code == 0, err
    assert sim.read(tmp_cwd / "cfg" / "out.h5")["params/alpha"] == 0.5


def test_models_and_info(capsys):
    code, out, _ = cli(["models"], capsys)
    assert code == 0
    for name in (
        "lotka_volterra",
        "lorenz",
        "van_der_pol",
        "sir",
        "damped_pendulum",
        "fitzhugh_nagumo",
        "robertson",
    ):
        assert name in out
    code, out, _ = cli(["models", "lotka_volterra"], capsys)
    assert code == 0 and "alpha" in out and "1/year" in out and "predator" in out
    code, out, _ = cli(["info"], capsys)
    assert code == 0 and "jax" in out and "float64" in out


BAD_CASES = {
    "malformed_toml": ("[model\nname = 'x'\n", [], "malformed TOML"),
    "unknown_model": ('[model]\nname = "lotka_voltera"\n[time]\nt1 = 1.0\n', [], "model.name"),
    "unknown_param": (
        '[model]\nname = "lorenz"\n[params]\nrh = 1.0\n[time]\nt1 = 1.0\n',
        [],
        "params.rh",
    ),
    "wrong_type": (
        '[model]\nname = "lorenz"\n[params]\nrho = "high"\n[time]\nt1 = 1.0\n',
        [],
        "params.rho",
    ),
    "t1_before_t0": ('[model]\nname = "lorenz"\n[time]\nt0 = 2.0\nt1 = 1.0\n', [], "time.t1"),
    "negative_tolerance": (
        '[model]\nname = "lorenz"\n[time]\nt1 = 1.0\n[solver]\nrtol = -1e-6\n',
        [],
        "solver.rtol",
    ),
    "unknown_method": (
        '[model]\nname = "lorenz"\n[time]\nt1 = 1.0\n[solver]\nmethod = "rk4"\n',
        [],
        "solver.method",
    ),
    "euler_without_dt": (
        '[model]\nname = "lorenz"\n[time]\nt1 = 1.0\n[solver]\nmethod = "euler"\n',
        [],
        "solver.method: euler estimates no error",
    ),
    "unknown_section": (GOOD + "[tiem]\nt1 = 1.0\n", [], "tiem"),
    "violated_constraint": (
        '[model]\nname = "lorenz"\n[params]\nsigma = -10.0\n[time]\nt1 = 1.0\n',
        [],
        "params.sigma",
    ),
    "nan_param": (
        '[model]\nname = "lorenz"\n[params]\nsigma = nan\n[time]\nt1 = 1.0\n',
        [],
        "params.sigma",
    ),
    "too_few_saves": ('[model]\nname = "lorenz"\n[time]\nt1 = 1.0\nsave = 1\n', [], "time.save"),
    "unsorted_save_at": (
        '[model]\nname = "lorenz"\n[time]\nt1 = 1.0\nsave_at = [0.0, 0.5, 0.2]\n',
        [],
        "time.save_at",
    ),
    "float32_ode": (
        '[model]\nname = "lorenz"\n[time]\nt1 = 1.0\n[solver]\ndtype = "float32"\n',
        [],
        "solver.dtype",
    ),
    "unknown_initial": (
        '[model]\nname = "lorenz"\n[initial]\nq = 1.0\n[time]\nt1 = 1.0\n',
        [],
        "initial.q",
    ),
    "set_without_equals": (GOOD, ["--set", "params.alpha"], "KEY=VALUE"),
    "set_unknown_section": (GOOD, ["--set", "parms.alpha=1"], "parms"),
    "set_through_value": (GOOD, ["--set", "model.name.x=1"], "model.name"),
    "unwritable_output": (GOOD, ["-o", "no/such/folder/out.h5"], "does not exist"),
    "output_is_folder": (GOOD, ["-o", "afolder"], "is a folder"),
    "missing_t1": ('[model]\nname = "lorenz"\n', [], "time.t1"),
    "bad_adjoint": (
        '[model]\nname = "lorenz"\n[time]\nt1 = 1.0\n[solver]\nadjoint = "backsolv"\n',
        [],
        "Perhaps you meant 'backsolve'",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD_CASES))
def test_bad_input_one_line_exit_2_no_output(case, tmp_cwd, capsys):
    text, extra, fragment = BAD_CASES[case]
    (tmp_cwd / "afolder").mkdir()
    (tmp_cwd / "c.toml").write_text(text)
    (tmp_cwd / "keep.h5").write_bytes(b"precious")
    before = sorted(os.listdir(tmp_cwd))
    args = ["run", "c.toml"] + (extra if "-o" in extra else ["-o", "keep.h5"] + extra)
    code, out, err = cli(args, capsys)
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert "Traceback" not in err
    assert fragment in lines[0]
    assert ("c.toml" in lines[0]) or ("--set" in lines[0]) or ("-o" in lines[0])
    assert sorted(os.listdir(tmp_cwd)) == before
    assert (tmp_cwd / "keep.h5").read_bytes() == b"precious"


def test_missing_config_and_folder_config(tmp_cwd, capsys):
    code, _, err = cli(["run", "nope.toml"], capsys)
    assert code == 2 and "nope.toml" in err and "no such file" in err
    (tmp_cwd / "d.toml").mkdir()
    code, _, err = cli(["run", "d.toml"], capsys)
    assert code == 2 and "is a folder" in err


def test_non_utf8_config(tmp_cwd, capsys):
    (tmp_cwd / "c.toml").write_bytes(b"\xff\xfe[model]\n")
    code, _, err = cli(["run", "c.toml"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1


def test_unknown_model_name_for_models_command(capsys):
    code, _, err = cli(["models", "lorentz"], capsys)
    assert code == 2 and "Perhaps you meant 'lorenz'" in err


def test_unknown_option_is_usage_error(capsys):
    code, _, err = cli(["run", "x.toml", "--frobnicate"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "frobnicate" in err


def test_solver_failure_exits_1_without_output(tmp_cwd, capsys):
    (tmp_cwd / "c.toml").write_text(
        '[model]\nname = "robertson"\n[time]\nt1 = 40.0\n[solver]\nmethod = "tsit5"\nmax_steps = '
        "100\n"
    )
    code, _, err = cli(["run", "c.toml", "-o", "r.h5"], capsys)
    assert code == 1
    assert "maximum number of solver steps" in err and "kvaerno5" in err
    assert len(err.strip().splitlines()) == 1
    assert not (tmp_cwd / "r.h5").exists()
    assert list(tmp_cwd.iterdir()) == [tmp_cwd / "c.toml"]


def test_installed_console_script_bad_input_has_no_traceback(tmp_cwd):
    (tmp_cwd / "c.toml").write_text(
        '[model]\nname = "lotka_volterra"\n[params]\nalpha = "x"\n[time]\nt1 = 1.0\n'
    )
    exe = Path(sys.executable).with_name("sim")
    proc = subprocess.run([str(exe), "run", "c.toml"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2
    assert proc.stderr.strip() == "error: c.toml: params.alpha: expected a number, got 'x'"
    assert not list(tmp_cwd.glob("*.h5"))


def test_methods_lists_each_ode_method_with_the_order_diffrax_gives_it(capsys):
    # Every method a config may name, once, with the order of its diffrax solver and
    # adaptive steps exactly where diffrax's solver estimates its error.
    import diffrax

    from solvers import ODE_METHODS, OdeSolver

    code, out, err = cli(["methods"], capsys)
    assert code == 0, err
    rows = {line.split()[0]: line.split() for line in out.strip().splitlines()[1:]}
    assert set(rows) == set(ODE_METHODS)
    for name, row in rows.items():
        solver = ODE_METHODS[name].make()
        kind = ODE_METHODS[name].kind
        terms = OdeSolver(method=name, adaptive=False, dt0=0.1).terms(
            (lambda t, y, a: y, lambda t, y, a: y) if kind == "imex" else (lambda t, y, a: y)
        )
        assert row[1] == kind and int(row[2]) == solver.order(terms), row
        adaptive = isinstance(solver, diffrax.AbstractAdaptiveSolver)
        assert row[4] == ("yes" if adaptive else "no"), row


STIFF_NOTE = "using stiff solver kvaerno5 (set [solver] method to choose)"


def test_a_model_declared_stiff_is_solved_by_an_implicit_method_unless_one_is_named(
    tmp_cwd, capsys
):
    # Robertson's kinetics to t = 40: tsit5 runs out of its default 16,384 steps (the
    # explicit-method run above), the stiff default takes tens of steps.
    base = '[model]\nname = "robertson"\n[time]\nt1 = 40.0\nsave = 3\n'
    (tmp_cwd / "c.toml").write_text(base + "[solver]\nrtol = 1e-8\natol = 1e-10\n")
    code, _, err = cli(["run", "c.toml", "-o", "r.h5"], capsys)
    assert code == 0, err
    assert err.count(STIFF_NOTE) == 1 and "model 'robertson' is declared stiff" in err
    record = sim.read("r.h5")
    assert tomllib.loads(record.attrs["config"])["solver"]["method"] == "kvaerno5"
    # Hairer & Wanner, Solving ODEs II (2nd ed., 1996), section IV.10: y(40)
    y = [float(record.observables[n][-1]) for n in ("y1", "y2", "y3")]
    np.testing.assert_allclose(y, [0.7158270687, 0.9185534764e-5, 0.2841637457], rtol=1e-6)
    # --quiet silences the line; a sweep says it once
    code, _, err = cli(["run", "c.toml", "-o", "q.h5", "--quiet"], capsys)
    assert code == 0 and STIFF_NOTE not in err, err
    (tmp_cwd / "s.toml").write_text(base + "[sweep.params]\nk1 = [0.04, 0.05]\n")
    code, _, err = cli(["sweep", "s.toml", "-o", "s.h5"], capsys)
    assert code == 0 and err.count(STIFF_NOTE) == 1, err
    # A named method is kept (and then no line), as are constant steps (explicit ones).
    # (the config of test_solver_failure_exits_1_without_output: its compiled solve)
    (tmp_cwd / "t.toml").write_text(
        '[model]\nname = "robertson"\n[time]\nt1 = 40.0\n[solver]\nmethod = "tsit5"\n'
        "max_steps = 100\n"
    )
    code, _, err = cli(["run", "t.toml", "-o", "t.h5"], capsys)
    assert code == 1 and "the tsit5 solve failed" in err and STIFF_NOTE not in err, err
    (tmp_cwd / "d.toml").write_text(base.replace("save = 3", "save = 3\ndt = 0.01"))
    config = sim.load_config(tmp_cwd / "d.toml")
    assert sim.setup(config).solver.method == "tsit5"
