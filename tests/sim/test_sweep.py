"""Sweeps: values against single `simulate` calls, flagged diverging runs, the file
layout, save modes, seeded sampling designs, and bad specs as one line with exit 2."""

import contextlib
import io
import math
import os
import tempfile
from pathlib import Path
from typing import ClassVar

import h5py
import jax.numpy as jnp
import numpy as np
import pytest
import tomli_w
from hypothesis import HealthCheck, given, settings, strategies as st

import sim
import sim._sweep
from physics import Model, Parameter
from sim._sweep import prepare
from sim._sweep_spec import FORMS, KINDS
from sim.cli import main
from solvers import OdeSolver, Result, result_message
from tests.helpers import cli_out as cli

MODEL = sim.get_model("lotka_volterra")

# A 3 x 3 grid with a planted diverging region: a negative predator population makes the
# prey grow without bound in finite time. 9 runs in chunks of 4 (the last one padded).
GRID = """
[model]
name = "lotka_volterra"
[time]
t1 = 10.0
save = 11
[sweep]
chunk = 4
[sweep.params]
alpha = { linspace = [0.4, 0.6, 3] }
[sweep.params.initial]
predator = { values = [-1.0, 2.0, 4.0] }
"""


def config(text: str, tmp_path, name: str = "sweep.toml") -> sim.Config:
    path = tmp_path / name
    path.write_text(text)
    return sim.load_config(path)


def single(alpha, predator, solver, t):
    params = {**MODEL.default_params(), "alpha": jnp.asarray(alpha)}
    return sim.simulate(
        MODEL, params, t, initial={"prey": 30.0, "predator": predator}, solver=solver
    )


@pytest.fixture(scope="module")
def grid(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("grid")
    cfg = config(GRID, tmp)
    return cfg, sim.sweep(cfg)


def test_grid_matches_single_runs_and_flags_the_diverging_region(grid):
    _, result = grid
    assert result.runs == 9 and result.grid_shape == (3, 3)
    assert result.swept == ("alpha", "initial.predator")
    # itertools.product order: the last key varies fastest
    np.testing.assert_array_equal(result.params["alpha"], np.repeat([0.4, 0.5, 0.6], 3))
    np.testing.assert_array_equal(result.initial["predator"], np.tile([-1.0, 2.0, 4.0], 3))
    np.testing.assert_array_equal(result.initial["prey"], np.full(9, 30.0))
    np.testing.assert_array_equal(result.params["beta"], np.full(9, 0.028))
    t = jnp.linspace(0.0, 10.0, 11)
    np.testing.assert_array_equal(result.time, t)
    solver = OdeSolver(throw=False)
    for i in range(9):
        traj = single(result.params["alpha"][i], result.initial["predator"][i], solver, t)
        assert result.stats["result"][i] == int(traj.stats["result"])
        assert result.stats["num_steps"][i] == int(traj.stats["num_steps"])
        if result.initial["predator"][i] < 0:
            assert result.status[i] == 2
            assert int(traj.stats["result"]) != 0
            assert np.all(np.isnan(result.observables["prey"][i]))
            assert np.all(np.isnan(result.observables["predator"][i]))
        else:
            assert result.status[i] == 1
            # Same steps (num_steps above); batched arithmetic may round differently in
            # the last bits, far below the solver's tolerance of 1e-6.
            for name in ("prey", "predator"):
                np.testing.assert_allclose(
                    result.observables[name][i], traj.observables[name], rtol=1e-11, atol=0
                )
    assert result.ok.sum() == 6


def test_cli_names_why_runs_failed(tmp_cwd, capsys):
    # The diverging runs of the grid fail in the solver (its step budget spent on the
    # blow-up), the others with a tight budget too: each kind of failure gets one line.
    Path("sweep.toml").write_text(GRID.replace("chunk = 4", "chunk = 4\n[solver]\nmax_steps = 60"))
    with pytest.raises(SystemExit) as info:
        main(["sweep", "sweep.toml", "-o", "out.h5"])
        raise SystemExit(0)
    err = capsys.readouterr().err
    assert info.value.code == 0, err
    result = sim.read("out.h5")
    failed = result.stats["result"][result.status == 2]
    assert len(failed) >= 3 and set(failed.tolist()) == {int(Result.max_steps_reached)}
    assert f"runs failed: {result_message(Result.max_steps_reached)}" in err
    assert f"({9 - len(failed)} ok, {len(failed)} failed)" in err


def test_file_equals_memory_and_has_the_sweep_layout(grid, tmp_path):
    cfg, memory = grid
    out = tmp_path / "grid.h5"
    result = sim.sweep(cfg, out)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["grid.h5"]  # no partial left
    assert result.config == memory.config
    for name in ("prey", "predator"):
        assert result.observables[name].tobytes() == memory.observables[name].tobytes()
    assert result.status.tobytes() == memory.status.tobytes()
    with h5py.File(out) as f:
        assert f.attrs["format"] == "simjax.sweep" and f.attrs["model"] == "lotka_volterra"
        for attr in ("format_version", "config", "created", "versions"):
            assert attr in f.attrs
        assert "seed" not in f.attrs  # a grid draws nothing
        assert f["observables/prey"].shape == (9, 11)
        assert f["params/alpha"].shape == (9,) and f["initial/predator"].shape == (9,)
        assert f["time"].shape == (11,) and f["status"].dtype == np.int8
        assert f["stats/num_steps"].shape == (9,)
        stored = sim.Config(__import__("tomllib").loads(f.attrs["config"]))
    # the stored config is resolved: sweep defaults and the solver's settings filled in
    section = stored.raw["sweep"]
    assert section["mode"] == "grid" and section["save"] == "full" and section["chunk"] == 4
    assert section["params"]["initial.predator"] == {"values": [-1.0, 2.0, 4.0]}
    assert stored.raw["solver"]["rtol"] == 1e-6
    assert sim.read(out).format == "simjax.sweep"
    # a result held in memory saves to the same layout
    memory.save_to(tmp_path / "saved.h5")
    from tests.sim.test_plot import assert_record_is_the_file

    assert_record_is_the_file(memory, tmp_path / "saved.h5")
    saved = sim.SweepResult.read(tmp_path / "saved.h5")
    assert saved.observables["prey"].tobytes() == memory.observables["prey"].tobytes()
    assert (
        saved.swept == memory.swept and saved.grid_shape == (3, 3) and saved.config == result.config
    )


def test_a_chunk_longer_than_a_runs_checkpoint_interval_is_pointed_out_once(
    tmp_path, monkeypatch, capsys
):
    # A sweep is saved chunk by chunk: when one chunk takes longer than a run waits
    # between checkpoints (five minutes; here every chunk does), one line says so, and
    # how to save more often. Not after the last chunk, which loses nothing.
    from sim import _sweep

    monkeypatch.setattr(_sweep, "CHECKPOINT_SECONDS", 0.0)
    sim.sweep(config(GRID, tmp_path), tmp_path / "out.h5")
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("note: a chunk of 4 runs took "), lines
    assert "a smaller [sweep] chunk saves more often" in lines[0]
    sim.sweep(
        config(GRID.replace("chunk = 4", "chunk = 9"), tmp_path, "one.toml"), tmp_path / "one.h5"
    )
    assert capsys.readouterr().err == ""


def test_xarray_view_unstacks_a_grid(grid):
    _, result = grid
    ds = result.to_xarray()
    assert ds["prey"].dims == ("run", "time") and ds.sizes == {"run": 9, "time": 11}
    cube = ds.set_index(run=list(result.swept)).unstack("run")
    assert cube["prey"].sizes["alpha"] == 3 and cube["prey"].sizes["initial.predator"] == 3
    value = cube["prey"].sel(alpha=0.5, **{"initial.predator": 4.0}).values
    np.testing.assert_array_equal(value, result.observables["prey"][5])


def test_fixed_step_summary_flags_non_finite_runs(tmp_path):
    # With constant steps nothing stops the blow-up: the solver reports success and the
    # values overflow, which the sweep flags from the observables themselves.
    text = GRID.replace("t1 = 10.0", "t1 = 10.0\ndt = 0.05").replace(
        "chunk = 4", 'chunk = 4\nsave = "summary"'
    )
    result = sim.sweep(config(text, tmp_path))
    t = jnp.linspace(0.0, 10.0, 11)
    solver = OdeSolver(dt0=0.05, adaptive=False, throw=False)
    assert set(result.observables["prey"]) == {"min", "max", "mean", "final"}
    for i in range(9):
        traj = single(result.params["alpha"][i], result.initial["predator"][i], solver, t)
        prey = np.asarray(traj.observables["prey"])
        if result.initial["predator"][i] < 0:
            assert int(traj.stats["result"]) == 0 and not np.all(np.isfinite(prey))
            assert result.status[i] == 2 and result.stats["result"][i] == 0
            assert np.isnan(result.observables["prey"]["max"][i])
        else:
            assert result.status[i] == 1
            summary = result.observables["prey"]
            np.testing.assert_allclose(
                [summary["min"][i], summary["max"][i], summary["mean"][i], summary["final"][i]],
                [prey.min(), prey.max(), prey.mean(), prey[-1]],
                rtol=1e-11,
            )


# ----------------------------------------------------------------------------- designs

SAMPLED = """
[model]
name = "lotka_volterra"
[time]
t1 = 10.0
[sweep]
mode = "{mode}"
samples = 64
seed = {seed}
[sweep.params]
alpha = {{ uniform = [0.3, 0.8] }}
beta = {{ loguniform = [0.01, 0.05] }}
"initial.prey" = {{ uniform = [10.0, 50.0] }}
"""


@pytest.mark.parametrize("mode", ["random", "sobol", "latin_hypercube"])
def test_sampled_designs_are_seeded_and_within_their_ranges(mode, tmp_path):
    plan = prepare(config(SAMPLED.format(mode=mode, seed=3), tmp_path)).plan
    again = prepare(config(SAMPLED.format(mode=mode, seed=3), tmp_path)).plan
    other = prepare(config(SAMPLED.format(mode=mode, seed=4), tmp_path)).plan
    alpha, beta, prey = plan.params["alpha"], plan.params["beta"], plan.initial["prey"]
    assert plan.runs == 64 and plan.seed == 3
    assert np.all((alpha >= 0.3) & (alpha < 0.8)) and np.all((prey >= 10.0) & (prey < 50.0))
    assert np.all((beta >= 0.01) & (beta < 0.05))
    np.testing.assert_array_equal(alpha, again.params["alpha"])
    assert not np.array_equal(alpha, other.params["alpha"])
    # the unit-cube coordinate of each column
    unit = np.stack(
        [(alpha - 0.3) / 0.5, np.log(beta / 0.01) / np.log(5.0), (prey - 10.0) / 40.0], axis=1
    )
    if mode != "random":
        # Latin hypercube, and Sobol at a power of 2: every one of the 64 strata of each
        # axis holds exactly one point.
        for column in unit.T:
            np.testing.assert_array_equal(np.sort(np.floor(column * 64)), np.arange(64))


def test_zip_pairs_lists(tmp_path):
    text = GRID.replace("[sweep]", '[sweep]\nmode = "zip"')
    plan = prepare(config(text, tmp_path)).plan
    np.testing.assert_array_equal(plan.params["alpha"], [0.4, 0.5, 0.6])
    np.testing.assert_array_equal(plan.initial["predator"], [-1.0, 2.0, 4.0])
    logspace = GRID.replace("linspace = [0.4, 0.6, 3]", "logspace = [-1, 0, 3]")
    np.testing.assert_allclose(
        np.unique(prepare(config(logspace, tmp_path)).plan.params["alpha"]), [0.1, 10**-0.5, 1.0]
    )


# ----------------------------------------------------------------------------- bad input

BASE = '[model]\nname = "lotka_volterra"\n[time]\nt1 = 1.0\n'
BAD = {
    "no_sweep_section": (BASE, [], "sweep"),
    "unknown_parameter": (
        BASE + "[sweep.params]\nalpa = { linspace = [0.1, 0.2, 2] }\n",
        [],
        "sweep.params.alpa: model 'lotka_volterra' has no parameter 'alpa'",
    ),
    "unknown_state": (
        BASE + '[sweep.params]\n"initial.prey2" = { values = [1.0] }\n',
        [],
        "sweep.params.initial.prey2",
    ),
    "empty_linspace": (
        BASE + "[sweep.params]\nalpha = { linspace = [0.1, 0.2, 0] }\n",
        [],
        "empty range",
    ),
    "empty_values": (
        BASE + "[sweep.params]\nalpha = { values = [] }\n",
        [],
        "sweep.params.alpha.values: empty range",
    ),
    "empty_uniform": (
        BASE
        + '[sweep]\nmode = "random"\nsamples = 4\n[sweep.params]\nalpha = { uniform = [0.5, 0.5] '
        "}\n",
        [],
        "expected low < high",
    ),
    "sobol_without_samples": (
        BASE + '[sweep]\nmode = "sobol"\n[sweep.params]\nalpha = { uniform = [0.1, 0.5] }\n',
        [],
        "sweep.samples: required for mode 'sobol'",
    ),
    "samples_in_grid": (
        BASE + "[sweep]\nsamples = 8\n[sweep.params]\nalpha = { values = [0.1] }\n",
        [],
        "sweep.samples",
    ),
    "uniform_in_grid": (
        BASE + "[sweep.params]\nalpha = { uniform = [0.1, 0.5] }\n",
        [],
        "sweep.params.alpha",
    ),
    "linspace_in_sobol": (
        BASE
        + '[sweep]\nmode = "sobol"\nsamples = 8\n[sweep.params]\nalpha = { linspace = [0.1, 0.5, '
        "3] }\n",
        [],
        "sweep.params.alpha",
    ),
    "unknown_mode": (
        BASE + '[sweep]\nmode = "sobel"\n[sweep.params]\nalpha = { values = [0.1] }\n',
        [],
        "Perhaps you meant 'sobol'",
    ),
    "unknown_save": (
        BASE + '[sweep]\nsave = "last"\n[sweep.params]\nalpha = { values = [0.1] }\n',
        [],
        "sweep.save",
    ),
    "unknown_key": (
        BASE + "[sweep]\nchunks = 4\n[sweep.params]\nalpha = { values = [0.1] }\n",
        [],
        "Perhaps you meant 'chunk'",
    ),
    "unknown_spec": (
        BASE + "[sweep.params]\nalpha = { linspase = [0.1, 0.2, 2] }\n",
        [],
        "sweep.params.alpha.linspase",
    ),
    "bare_number": (
        BASE + "[sweep.params]\nalpha = 0.5\n",
        [],
        f"sweep.params.alpha: expected {FORMS}; got 0.5",
    ),
    "empty_list": (
        BASE + "[sweep.params]\nalpha = []\n",
        [],
        "sweep.params.alpha: empty list",
    ),
    "nan_in_list": (
        BASE + "[sweep.params]\nalpha = [0.1, nan]\n",
        [],
        "sweep.params.alpha: expected finite numbers",
    ),
    "subnormal_in_list": (
        BASE + "[sweep.params]\nalpha = [0.1, 1e-320]\n",
        [],
        "sweep.params.alpha: 1e-320 is below the smallest normal float",
    ),
    "string_in_list": (
        BASE + '[sweep.params]\nalpha = [0.1, "0.2"]\n',
        [],
        "sweep.params.alpha: expected a list of numbers, got '0.2'",
    ),
    "list_in_sobol": (
        BASE + '[sweep]\nmode = "sobol"\nsamples = 8\n[sweep.params]\nalpha = [0.1, 0.2]\n',
        [],
        "sweep.params.alpha: mode 'sobol' expects uniform or loguniform, got values (a plain "
        "list is the values form; a range is { uniform = [low, high] })",
    ),
    "zip_lengths": (
        BASE
        + '[sweep]\nmode = "zip"\n[sweep.params]\nalpha = { values = [0.1, 0.2] }\nbeta = { values '
        "= [0.1] }\n",
        [],
        "zip mode needs equal lengths",
    ),
    "constraint": (
        BASE + "[sweep.params]\nalpha = { linspace = [-0.1, 0.5, 3] }\n",
        [],
        "expected a positive number",
    ),
    "zero_chunk": (
        BASE + "[sweep]\nchunk = 0\n[sweep.params]\nalpha = { values = [0.1] }\n",
        [],
        "sweep.chunk",
    ),
    "no_params": (BASE + "[sweep]\nchunk = 2\n", [], "sweep.params: required key is missing"),
    "dotted_not_initial": (
        BASE + '[sweep.params]\n"solver.rtol" = { values = [1e-6] }\n',
        [],
        "initial.<state>",
    ),
    "md_initial": (
        '[model]\nname = "lennard_jones"\n[system]\ncells = 4\ndensity = 0.8\n[time]\nsteps = '
        '10\n[sweep.params]\n"initial.x" = { values = [1.0] }\n',
        [],
        "MD sweeps vary [params] only",
    ),
    "too_many_devices": (
        BASE + "[sweep.params]\nalpha = { values = [0.1] }\n",
        ["--devices", "64"],
        "--devices",
    ),
    "bad_local_scheduler": (
        BASE + "[sweep.params]\nalpha = { values = [0.1] }\n",
        ["--scheduler", "local:x"],
        "--scheduler",
    ),
    "set_bad_mode": (
        BASE + "[sweep.params]\nalpha = { values = [0.1] }\n",
        ["--set", "sweep.mode=lhs"],
        "sweep.mode",
    ),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_sweep_one_line_exit_2_nothing_written(case, tmp_cwd, capsys):
    text, extra, fragment = BAD[case]
    (tmp_cwd / "c.toml").write_text(text)
    before = sorted(os.listdir(tmp_cwd))
    code, _, err = cli(["sweep", "c.toml", "-o", "out.h5", "--quiet", *extra], capsys)
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert fragment in lines[0]
    assert "c.toml" in lines[0] or extra[0] in lines[0]
    assert sorted(os.listdir(tmp_cwd)) == before


# ------------------------------------------------------------ a plain list as the values form

# A model whose parameter takes any real number, so that every finite list is a valid sweep.
FREE = """
[model]
name = "decay"
[model.states]
x = "-k * x"
[model.parameters]
k = 0.5
[time]
t1 = 1.0
save = 2
"""
PROPERTY = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
finite = st.floats(allow_nan=False, allow_infinity=False, allow_subnormal=False)


@PROPERTY
@given(values=st.lists(finite, min_size=1, max_size=12), nested=st.booleans())
def test_a_plain_list_sweeps_exactly_those_values_in_that_order(values, nested):
    sweep = {"initial": {"x": values}} if nested else {"k": values}
    text = FREE + tomli_w.dumps({"sweep": {"params": sweep}})
    with tempfile.TemporaryDirectory() as folder:
        plan = prepare(config(text, Path(folder))).plan
    swept = plan.initial["x"] if nested else plan.params["k"]
    # bit for bit, -0.0 included: the list written is the list run
    assert [v.hex() for v in swept.tolist()] == [float(v).hex() for v in values]
    assert plan.runs == len(values) and plan.grid_shape == (len(values),)


def refused(entry: str) -> tuple[int, str, list[str], list[str], str]:
    """`sim sweep` of a config whose alpha entry is ENTRY: (exit code, stderr, folder
    before, folder after, config path)."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "c.toml"
        path.write_text(BASE + f"[sweep.params]\nalpha = {entry}\n")
        before = sorted(os.listdir(folder))
        err = io.StringIO()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            with pytest.raises(SystemExit) as info:
                main(["sweep", str(path), "-o", str(Path(folder) / "out.h5"), "--quiet"])
        return info.value.code, err.getvalue(), before, sorted(os.listdir(folder)), str(path)


def test_the_forms_named_in_refusals_are_every_form_the_parser_takes():
    assert "[0.1, 0.2, 0.3]" in FORMS
    assert all(f"{kind} = [" in FORMS for kind in KINDS)


def toml_value(v) -> str:
    if isinstance(v, float) and not math.isfinite(v):
        return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
    return tomli_w.dumps({"v": v})[4:].strip()


bad_lists = st.one_of(
    st.just([]),
    # a list with at least one NaN or infinity among finite numbers
    st.tuples(
        st.lists(finite, max_size=4),
        st.sampled_from([math.nan, math.inf, -math.inf]),
        st.lists(finite, max_size=4),
    ).map(lambda t: [*t[0], t[1], *t[2]]),
    # a list with at least one string or boolean among numbers
    st.tuples(
        st.lists(finite, max_size=4),
        st.one_of(st.text(max_size=8), st.booleans()),
        st.lists(finite, max_size=4),
    ).map(lambda t: [*t[0], t[1], *t[2]]),
)


@PROPERTY
@given(values=bad_lists)
def test_a_bad_plain_list_is_refused_in_one_line_naming_the_file_and_key(values):
    entry = "[" + ", ".join(toml_value(v) for v in values) + "]"
    code, err, before, after, path = refused(entry)
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert path in lines[0] and "sweep.params.alpha:" in lines[0], err
    assert FORMS in lines[0], err
    assert after == before


class Bare(Model):
    """A model of a family that has no set-up from a config."""

    name: ClassVar[str] = "bare"
    description: ClassVar[str] = "no family set-up"
    parameters: ClassVar[tuple[Parameter, ...]] = (Parameter("k", 1.0, "1", "a rate", "positive"),)

    @property
    def observable_names(self) -> tuple[str, ...]:
        return ("x",)


def test_a_family_without_set_up_cannot_be_swept(tmp_path, monkeypatch):
    monkeypatch.setattr(sim._sweep, "build_model", lambda config: Bare())
    text = '[model]\nname = "bare"\n[sweep.params]\nk = { values = [1.0, 2.0] }\n'
    with pytest.raises(
        sim.ConfigError, match=r"model.name: model 'bare' \(Model\) cannot be swept"
    ):
        prepare(config(text, tmp_path))


def test_unfinished_sweep_needs_resume_and_the_same_config(tmp_cwd, capsys):
    text = BASE + "[sweep.params]\nalpha = { values = [0.1] }\n"
    (tmp_cwd / "c.toml").write_text(text)
    (tmp_cwd / ".out.h5.partial").write_bytes(b"unfinished")
    code, _, err = cli(["sweep", "c.toml", "-o", "out.h5", "-q"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1
    assert ".out.h5.partial" in err and "--resume" in err
    code, _, err = cli(["sweep", "c.toml", "-o", "out.h5", "-q", "--resume"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "cannot be read" in err
    assert (tmp_cwd / ".out.h5.partial").read_bytes() == b"unfinished"
    assert not (tmp_cwd / "out.h5").exists()


def test_a_spectral_pde_batches_in_a_chunk():
    # The framed chunk is family-agnostic: a sweep over the heat equation's diffusivity
    # from sin(x), whose exact solution is exp(-D t) sin(x).
    from physics import pde
    from sim._family import family_of
    from sim._sweep_frames import FramedRunner
    from solvers import Etdrk

    model = pde.Heat(points=(32,))
    x = np.linspace(0.0, 2 * np.pi, 32, endpoint=False)
    t = jnp.linspace(0.0, 1.0, 11)
    setup = sim.Setup(
        model=model,
        params=model.default_params(),
        initial=jnp.asarray(np.sin(x)),
        t=t,
        solver=Etdrk(),
    )
    diffusivity = np.array([0.05, 0.1, 0.2, 0.4])
    inputs = {"index": np.arange(4), "params": {"diffusivity": diffusivity}, "initial": {}}
    out = FramedRunner(setup, family_of(model), "final", None, 1, inputs)(inputs)
    assert list(np.asarray(out["status"])) == [1, 1, 1, 1]
    u = np.asarray(out["observables/u"])
    assert u.shape == (4, 32)
    np.testing.assert_allclose(u, np.exp(-diffusivity[:, None]) * np.sin(x)[None], atol=1e-13)
