"""Hostile input that used to end in an internal error, a hang or a wrong result: datasets
declaring a trillion values, observations of the wrong shape or complex, step counts and
time spans beyond the float range, a device or FIFO as the config, priors with no valid
value, subnormal parameters, negative ESS of short runs, multi-line HDF5 errors and seeds
beyond 64 bits. Each is one line on stderr naming the file and the key (or dataset),
exit code 2, no traceback, no new file and nothing overwritten (the `check` of
test_hostile.py)."""

import os
import subprocess
import sys
import warnings
from pathlib import Path

import h5py
import jax
import numpy as np
import pytest

from inference._diagnostics import ess_bulk, summarise
from inference._priors import outside_allowed, support_conflict
from sim._config import SEED_MAX, seed_problem
from sim._errors import DataError
from sim._store import error_reason, numeric_dataset

# (folder: a fixture)
from tests.sim.test_hostile import HEAT, LJ_LATTICE, YEARS, check, cli, folder, h5  # noqa: F401

TRILLION = 10**12


def declare_huge(path, name, others=None):
    """An HDF5 file whose dataset `name` declares a trillion float64 values (7.3 TiB)
    without storing any: a few kB on disk."""
    with h5py.File(path, "w") as f:
        for key, value in (others or {}).items():
            f[key] = value
        f.create_dataset(name, shape=(TRILLION,), dtype="f8", chunks=(4096,))


# ----------------------------------------------------------------------------- 1. sizes


HUGE_DATASETS = {
    "fit: observed values": (
        ["fit", "lv_fit.toml", "-o", "out.h5"],
        "obs.h5",
        "prey",
        {"t": YEARS, "predator": 5.0 + YEARS},
    ),
    "fit: observation times": (
        ["fit", "lv_fit.toml", "-o", "out.h5"],
        "obs.h5",
        "t",
        {"prey": 30.0 + YEARS, "predator": 5.0 + YEARS},
    ),
    "infer --data": (
        ["infer", "lv_fit.toml", "--data", "huge.h5", "-o", "out.h5"],
        "huge.h5",
        "predator",
        {"t": YEARS, "prey": 30.0 + YEARS},
    ),
    "PDE [initial] file": (["run", "heat.toml", "-o", "out.h5"], "u0.h5", "u", {}),
}


@pytest.mark.parametrize("case", list(HUGE_DATASETS))
def test_a_dataset_declaring_a_trillion_values_is_refused_before_reading(case, folder, capsys):
    argv, file, name, others = HUGE_DATASETS[case]
    declare_huge(file, name, others)
    assert os.path.getsize(file) < 1 << 20
    line = check(folder, argv, capsys, file)
    assert f"/{name}" in line and "memory" in line and "1,000,000,000,000" in line, line


def declare_unwritten(path, name, shape, others=None, *, chunks=None, first=None):
    """An HDF5 file whose dataset `name` declares `shape` and stores nothing (with
    `chunks`: only its first chunk, holding `first`), so that reading it gives zeros."""
    with h5py.File(path, "a") as f:
        for key, value in (others or {}).items():
            f[key] = value
        if name in f:
            del f[name]
        d = f.create_dataset(name, shape=shape, dtype="f8", chunks=chunks)
        if first is not None:
            d[tuple(slice(0, c) for c in chunks)] = first


UNWRITTEN = {
    "fit: observed values, nothing stored": (
        ["fit", "lv_fit.toml", "-o", "out.h5"],
        "obs.h5",
        "prey",
        (21,),
        {"t": YEARS, "predator": 5.0 + YEARS},
        None,
    ),
    "fit: observed values, one chunk of six stored": (
        ["fit", "lv_fit.toml", "-o", "out.h5"],
        "obs.h5",
        "prey",
        (21,),
        {"t": YEARS, "predator": 5.0 + YEARS},
        (4,),
    ),
    "PDE [initial] file": (["run", "heat.toml", "-o", "out.h5"], "u0.h5", "u", (16,), {}, None),
    "MD start velocities": (
        ["run", "lj.toml", "-o", "out.h5"],
        "start.h5",
        "particles/all/velocity/value",
        (1, 108, 3),
        None,
        None,
    ),
    "MD start positions, one chunk stored": (
        ["run", "lj.toml", "-o", "out.h5"],
        "start.h5",
        "particles/all/position/value",
        (1, 108, 3),
        None,
        (1, 36, 3),
    ),
}


@pytest.mark.parametrize("case", list(UNWRITTEN))
def test_a_dataset_declared_but_not_written_is_refused(case, folder, capsys):
    # HDF5 reads values never written as zeros, without an error: a start at rest or
    # observations of zero, from a file that holds none of them.
    argv, file, name, shape, others, chunks = UNWRITTEN[case]
    if others is not None:
        Path(file).unlink()
    first = None if chunks is None else np.full(chunks, 1.5)
    declare_unwritten(file, name, shape, others, chunks=chunks, first=first)
    line = check(folder, argv, capsys, file)
    assert f"/{name}" in line and "zeros" in line and "stores" in line, line


def test_numeric_dataset_refuses_a_dataset_declared_but_not_written(tmp_path):
    declare_unwritten(tmp_path / "g.h5", "rdf", (30, 60))
    with h5py.File(tmp_path / "g.h5", "r") as f, pytest.raises(DataError, match="stores none"):
        numeric_dataset(f, tmp_path / "g.h5", "rdf", "data.rdf")


# ----------------------------------------------------------------------------- 2. shapes, complex


HEAT_FIT = (
    HEAT
    + """
[data]
file = "field.h5"
time = "/t"
[data.observables]
u = "/u"
[fit]
free = ["diffusivity"]
"""
)


@pytest.mark.parametrize(
    "argv, datasets, named, words",
    [
        (
            ["fit", "lv_fit.toml"],
            {"t": YEARS, "prey": np.ones((21, 2)), "predator": 5.0 + YEARS},
            "/prey",
            ["(21,)", "(21, 2)"],
        ),
        (
            ["fit", "lv_fit.toml"],
            {"t": YEARS, "prey": 30.0 + YEARS, "predator": np.ones((21, 1))},
            "/predator",
            ["(21, 1)"],
        ),
        (
            ["infer", "lv_fit.toml"],
            {"t": YEARS, "prey": np.ones((21, 3, 2)), "predator": 5.0 + YEARS},
            "/prey",
            ["(21, 3, 2)"],
        ),
        (
            ["fit", "lv_fit.toml"],
            {"t": YEARS, "prey": (30.0 + YEARS) * (1 + 1j), "predator": 5.0 + YEARS},
            "/prey",
            ["complex"],
        ),
        (
            ["fit", "lv_fit.toml"],
            {"t": YEARS + 0j, "prey": 30.0 + YEARS, "predator": 5.0 + YEARS},
            "/t",
            ["complex"],
        ),
        (
            ["infer", "lv_fit.toml"],
            {"t": YEARS, "prey": 30.0 + YEARS, "predator": (5.0 + YEARS).astype(np.complex64)},
            "/predator",
            ["complex"],
        ),
        # A PDE field observed as one value per time (a field of 16 points is expected).
        (
            ["fit", "heat_fit.toml"],
            {"t": np.array([0.0, 0.05, 0.1]), "u": np.ones(3)},
            "/u",
            ["(3, 16)", "field"],
        ),
    ],
    ids=[
        "2-D for 1-D",
        "column for 1-D",
        "3-D for 1-D (infer)",
        "complex values",
        "complex times",
        "complex64 (infer)",
        "scalar for a field",
    ],
)
def test_observations_of_the_wrong_shape_or_complex(argv, datasets, named, words, folder, capsys):
    Path("heat_fit.toml").write_text(HEAT_FIT)
    file = "field.h5" if "heat_fit.toml" in argv else "obs.h5"
    h5(file, **datasets)
    line = check(folder, [*argv, "-o", "out.h5"], capsys, file)
    assert named in line and all(w in line for w in words), line


def test_a_complex_initial_field_is_refused(folder, capsys):
    h5("u0.h5", u=np.ones(16) * (1 + 1j))
    line = check(folder, ["run", "heat.toml", "-o", "out.h5"], capsys, "u0.h5")
    assert "/u" in line and "complex" in line, line


# ----------------------------------------------------------------------------- 3. steps, spans


SPANS = {
    "PDE dt = 1e-320": (
        ["run", "heat.toml", "--set", "time.dt=1e-320"],
        "time.dt",
        "smallest normal",
    ),
    "PDE t1 = 1e308": (["run", "heat.toml", "--set", "time.t1=1e308"], "time.dt", "t1 = 1e+308"),
    "PDE 1e20 steps": (
        ["run", "heat.toml", "--set", "time.t1=1e10", "--set", "time.dt=1e-10"],
        "time.dt",
        "more than a run can count",
    ),
    "PDE t0 = -1e308, t1 = 1e308": (
        ["run", "heat.toml", "--set", "time.t0=-1e308", "--set", "time.t1=1e308"],
        "time.t1",
        "overflows",
    ),
    "ODE t0 = -1e308, t1 = 1e308": (
        ["run", "lv.toml", "--set", "time.t0=-1e308", "--set", "time.t1=1e308"],
        "time.t1",
        "overflows",
    ),
    "ODE save_at spanning 2e308": (
        ["run", "lv_at.toml", "--set", "time.save_at=[-1e308, 1e308]", "--set", "time.t0=-1e308"],
        "time.save_at",
        "overflows",
    ),
    "ODE dt = 1e-320": (
        ["run", "lv.toml", "--set", "time.dt=1e-320"],
        "time.dt",
        "smallest normal",
    ),
    "ODE rtol = 1e-320": (
        ["run", "lv.toml", "--set", "solver.rtol=1e-320"],
        "solver.rtol",
        "smallest normal",
    ),
    "ODE atol = 1e-320": (
        ["run", "lv.toml", "--set", "solver.atol=1e-320"],
        "solver.atol",
        "smallest normal",
    ),
    "ODE save times not distinct": (
        [
            "run",
            "lv.toml",
            "--set",
            "time.t0=1.0",
            "--set",
            "time.t1=1.0000000000000002",
            "--set",
            "time.save=50",
        ],
        "time.save",
        "not distinct",
    ),
    "MD t0 = -1e308, t1 = 1e308": (
        ["run", "lj_lattice.toml", "--set", "time.t0=-1e308", "--set", "time.t1=1e308"],
        "time.t1",
        "overflows",
    ),
    "sweep t0 = -1e308, t1 = 1e308": (
        ["sweep", "sweep.toml", "--set", "time.t0=-1e308", "--set", "time.t1=1e308"],
        "time.t1",
        "overflows",
    ),
    "fit t0 = -1e308, t1 = 1e308": (
        ["fit", "lv_fit.toml", "--set", "time.t0=-1e308", "--set", "time.t1=1e308"],
        "time.t1",
        "overflows",
    ),
    "infer t0 = -1e308, t1 = 1e308": (
        ["infer", "lv_fit.toml", "--set", "time.t0=-1e308", "--set", "time.t1=1e308"],
        "time.t1",
        "overflows",
    ),
    # constant steps that cannot reach t1 within max_steps: known before the run starts
    # (finite-difference PDE runs used to end in an internal error)
    "FD PDE dt beyond max_steps": (
        ["run", "heat_fd.toml", "--set", "time.dt=1e-6"],
        "time.dt",
        "takes 100,000 steps from t0 to t1, beyond solver.max_steps = 65,536",
    ),
    "ODE dt beyond max_steps": (
        ["run", "lv.toml", "--set", "time.dt=1e-5", "--set", "solver.max_steps=1000"],
        "time.dt",
        "beyond solver.max_steps = 1,000",
    ),
    "sweep dt beyond max_steps": (
        ["sweep", "sweep.toml", "--set", "time.dt=1e-5", "--set", "solver.max_steps=1000"],
        "time.dt",
        "beyond solver.max_steps",
    ),
    "fit dt beyond max_steps": (
        ["fit", "lv_fit.toml", "--set", "time.dt=1e-5", "--set", "solver.max_steps=1000"],
        "time.dt",
        "beyond solver.max_steps",
    ),
}

HEAT_FD = """
[model]
name = "heat_fd"
[grid]
points = [17]
domain = [[0.0, 1.0]]
[time]
t1 = 0.1
save = 3
[solver]
method = "tsit5"
"""


@pytest.mark.parametrize("case", list(SPANS))
def test_step_counts_and_spans_beyond_the_float_range(case, folder, capsys):
    argv, key, words = SPANS[case]
    Path("lj_lattice.toml").write_text(LJ_LATTICE)
    Path("heat_fd.toml").write_text(HEAT_FD)
    Path("lv_at.toml").write_text(
        Path("lv.toml").read_text().replace("save = 6\n", "")
    )  # for save_at
    line = check(folder, [*argv, "-o", "out.h5"], capsys, key)
    assert words in line, line


# ----------------------------------------------------------------------------- 4. devices, FIFOs


@pytest.mark.parametrize("command", ["run", "fit", "infer", "sweep"])
def test_a_device_as_the_config(command, folder, capsys):
    line = check(folder, [command, "/dev/zero", "-o", "out.h5"], capsys, "/dev/zero")
    assert "character device" in line, line


def test_a_fifo_as_the_config_does_not_hang(folder):
    # Opening a FIFO with no writer blocks forever: a subprocess proves it returns.
    os.mkfifo("pipe.toml")
    before = sorted(os.listdir("."))
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from sim.cli import main; main()",
            "run",
            "pipe.toml",
            "-o",
            "out.h5",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1 and "pipe.toml" in lines[0] and "FIFO" in lines[0], done.stderr
    assert sorted(os.listdir(".")) == before
    assert Path("out.h5").read_bytes() == b"an earlier result"


@pytest.mark.parametrize("where", ["file", "--set"])
def test_an_integer_of_5000_digits(where, folder, capsys):
    digits = "9" * 5000
    if where == "file":
        Path("big.toml").write_text(Path("lv.toml").read_text() + f"[params]\nalpha = {digits}\n")
        line = check(folder, ["run", "big.toml", "-o", "out.h5"], capsys, "big.toml")
    else:
        line = check(
            folder,
            ["run", "lv.toml", "-o", "out.h5", "--set", f"params.alpha={digits}"],
            capsys,
            "params.alpha",
        )
    assert "digits" in line and digits not in line, line


# ----------------------------------------------------------------------------- 5. priors


NO_VALID_VALUE = {
    "uniform [-2, -1] on a positive parameter": (
        "alpha",
        '{ dist = "uniform", low = -2.0, high = -1.0 }',
        "[-2, -1]",
    ),
    "truncated_normal ending at 0": (
        "alpha",
        '{ dist = "truncated_normal", loc = 0.0, scale = 1.0, low = -5.0, high = 0.0 }',
        "[-5, 0]",
    ),
    "uniform [-3, -1] on a positive initial value": (
        "initial.prey",
        '{ dist = "uniform", low = -3.0, high = -1.0 }',
        "[-3, -1]",
    ),
}


@pytest.mark.parametrize("case", list(NO_VALID_VALUE))
def test_priors_leaving_no_valid_value(case, folder, capsys):
    name, prior, support = NO_VALID_VALUE[case]
    argv = ["infer", "lv_fit.toml", "-o", "out.h5", "--set", f"infer.priors.{name}={prior}"]
    line = check(folder, argv, capsys, f"infer.priors.{name}")
    assert "no valid start" in line and support in line and "positive" in line, line


def test_support_conflicts_with_bounded_quantities():
    # A truncated_normal whose low is above the upper bound of a quantity in [0, 1].
    low_above = {
        "dist": "truncated_normal",
        "loc": 2.0,
        "scale": 1.0,
        "low": 1.5,
        "high": float("inf"),
    }
    assert "in [0, 1]" in support_conflict(low_above, "p", "logistic", 0.0, 1.0)
    assert support_conflict(
        {"dist": "uniform", "low": 1.0, "high": 2.0}, "p", "logistic", 0.0, 1.0
    )  # touches at a point
    assert support_conflict(
        {"dist": "uniform", "low": -1.0, "high": 0.0}, "d", "softplus"
    )  # only 0 allowed
    assert (
        support_conflict(
            {"dist": "beta", "concentration1": 2.0, "concentration0": 2.0},
            "p",
            "logistic",
            0.0,
            1.0,
        )
        is None
    )
    overlapping = {"dist": "uniform", "low": -1.0, "high": 2.0}
    assert support_conflict(overlapping, "alpha", "log") is None and outside_allowed(
        overlapping, "log"
    )
    assert not outside_allowed({"dist": "lognormal", "loc": 0.0, "scale": 1.0}, "log")
    assert not outside_allowed({"dist": "halfnormal", "scale": 1.0}, "softplus")


@pytest.mark.slow
def test_a_prior_reaching_below_zero_samples_only_allowed_values(folder, capsys):
    # uniform [-1, 2] on a positive parameter is fine: the posterior is truncated to
    # alpha > 0 (the model is never run for a result at a negative alpha).
    prior = 'infer.priors.alpha={ dist = "uniform", low = -1.0, high = 2.0 }'
    status, err = cli(["infer", "lv_fit.toml", "-o", "post.h5", "--quiet", "--set", prior], capsys)
    assert status == 0, err
    assert np.all(h5py.File("post.h5", "r")["posterior/alpha"][()] > 0)


@pytest.mark.slow
def test_chains_that_find_no_valid_start(folder, capsys):
    # The median of a few draws of uniform [-1000, 1] is negative: NumPyro finds no start.
    prior = 'infer.priors.alpha={ dist = "uniform", low = -1000.0, high = 1.0 }'
    line = check(
        folder,
        ["infer", "lv_fit.toml", "-o", "out.h5", "--set", prior],
        capsys,
        "infer.priors.alpha",
    )
    assert "no valid start" in line, line


# ----------------------------------------------------------------------------- 6. subnormal values


@pytest.mark.parametrize(
    "argv, key, words",
    [
        (["run", "lv.toml", "--set", "params.alpha=1e-320"], "params.alpha", "smallest normal"),
        (["run", "lv.toml", "--set", "params.alpha=-4e-310"], "params.alpha", "smallest normal"),
        (["run", "lv.toml", "--set", "initial.prey=1e-320"], "initial.prey", "smallest normal"),
        (
            ["run", "heat.toml", "--set", "params.diffusivity=5e-324"],
            "params.diffusivity",
            "smallest normal",
        ),
        (["fit", "lv_fit.toml", "--set", "params.beta=1e-310"], "params.beta", "smallest normal"),
        (
            ["run", "lv.toml", "--set", "params.alpha=" + "9" * 400],
            "params.alpha",
            "beyond the float range",
        ),
    ],
    ids=[
        "param",
        "negative param",
        "initial value",
        "PDE param",
        "fixed param of a fit",
        "400-digit integer",
    ],
)
def test_subnormal_parameters(argv, key, words, folder, capsys):
    line = check(folder, [*argv, "-o", "out.h5"], capsys, key)
    assert words in line, line
    if words == "smallest normal":
        assert repr(float(np.finfo(float).tiny)) in line, line


def test_zero_and_the_smallest_normal_float_are_fine(folder, capsys):
    tiny = repr(float(np.finfo(float).tiny))
    status, err = cli(
        [
            "run",
            "lv.toml",
            "-o",
            "ok.h5",
            "--quiet",
            "--set",
            f"initial.prey={tiny}",
            "--set",
            "initial.predator=0.0",
        ],
        capsys,
    )
    assert status == 0, err


# ----------------------------------------------------------------------------- 7. ESS


# Short runs whose autocorrelation estimate made NumPyro's ESS negative (found by search).
SHORT_RUNS = [
    [[0.126, -0.132, 0.64, 0.105]],
    [[0.2, -0.269, 1.615, -0.783], [0.616, -1.104, 0.372, 0.536]],
    [[-0.158, 0.005, 0.147, -1.263, -0.464, 0.502, -1.231, 1.276]],
    [[1.0, 1.0, 1.0, 1.0, 1.0]],  # no variation at all
]


@pytest.mark.parametrize("draws", SHORT_RUNS)
def test_ess_of_a_short_run_is_nan_never_negative(draws, recwarn):
    ess = ess_bulk(np.asarray(draws))
    assert np.isnan(ess)
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]


def test_summaries_never_report_a_negative_ess():
    rng = np.random.default_rng(0)
    for _ in range(300):
        shape = (int(rng.integers(1, 3)), int(rng.integers(1, 9)))
        row = summarise({"x": rng.standard_normal(shape)})["x"]
        assert not row["ess_bulk"] <= 0, row  # NaN or positive
        assert not row["r_hat"] < 0, row
    long = summarise({"x": rng.standard_normal((2, 500))})["x"]
    assert 300 < long["ess_bulk"] < 2000


@pytest.mark.slow
def test_a_tiny_sampler_run_prints_no_negative_ess(folder, capsys):
    status, err = cli(
        ["infer", "lv_fit.toml", "-o", "post.h5", "--quiet", "--warmup", "2", "--samples", "5"],
        capsys,
    )
    assert status == 0, err
    ess = h5py.File("post.h5", "r")["summary/ess_bulk"][()]
    assert not np.any(ess <= 0), ess


# -------------------------------------------------------------------------- 8. one-line HDF5 errors


def test_hdf5_error_texts_are_quoted_as_one_line(tmp_cwd, monkeypatch):
    def damaged(self, name, default=None):  # a lookup failing with a multi-line HDF5 error text
        raise OSError(
            "Unable to synchronously open object (bad object header)\n  HDF5-DIAG: Error detected "
            "in HDF5 (1.14.2)\n    #000: H5O.c line 1 in H5Oopen()"
        )

    h5("obs.h5", prey=np.ones(3))
    monkeypatch.setattr(h5py.File, "get", damaged)
    with h5py.File("obs.h5", "r") as f, pytest.raises(DataError) as info:
        numeric_dataset(f, "obs.h5", "/prey", "data.observables.prey")
    message = str(info.value)
    assert "\n" not in message and "\\n" not in message and "HDF5-DIAG" not in message, message
    assert message.startswith(
        "obs.h5: /prey: cannot be read (Unable to synchronously open object (bad object header))"
    ), message
    assert (
        error_reason(KeyError("Unable to open object (component not found)"))
        == "Unable to open object (component not found)"
    )
    assert error_reason(ValueError("unknown kind 'x'")) == "unknown kind 'x'"
    assert error_reason(OSError("\n\n  first\nsecond")) == "first"
    assert error_reason(RuntimeError()) == "RuntimeError"


# ----------------------------------------------------------------------------- 9. seeds


@pytest.mark.parametrize(
    "args, named",
    [
        (["--seed", str(2**64)], "--seed"),
        (["--seed", str(2**63)], "--seed"),
        (["--seed", "-1"], "--seed"),
        (["--set", f"infer.seed={2**64}"], "infer.seed"),
        (["--set", "infer.seed=-5"], "infer.seed"),
    ],
    ids=["2**64", "2**63", "negative", "[infer] seed 2**64", "[infer] seed negative"],
)
def test_seeds_beyond_64_bits(args, named, folder, capsys):
    line = check(folder, ["infer", "lv_fit.toml", "-o", "out.h5", *args], capsys, named)
    assert "0 to 2**63 - 1" in line, line


EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"


@pytest.mark.parametrize(
    "argv, named",
    [
        (
            ["run", str(EXPERIMENTS / "lj_fluid.toml"), "--set", f"system.seed={2**64}"],
            "system.seed",
        ),
        (
            [
                "sweep",
                str(EXPERIMENTS / "lotka_volterra_sobol.toml"),
                "--set",
                f"sweep.seed={2**64}",
            ],
            "sweep.seed",
        ),
        (["fit", str(EXPERIMENTS / "lynx_hare.toml"), "--set", f"fit.seed={2**64}"], "fit.seed"),
    ],
    ids=["[system] seed", "[sweep] seed", "[fit] seed"],
)
def test_config_seeds_beyond_64_bits(argv, named, folder, capsys):
    check(folder, [*argv, "-o", "out.h5"], capsys, named)


def test_the_largest_seed_is_one_the_prng_takes():
    assert seed_problem(SEED_MAX) is None and seed_problem(0) is None
    assert (
        seed_problem(SEED_MAX + 1) and seed_problem(-1) and seed_problem(True) and seed_problem(1.0)
    )
    jax.random.key_data(jax.random.key(SEED_MAX))
    with pytest.raises(OverflowError):
        jax.random.key(SEED_MAX + 1)


# ---------------------------------------------------------------- found by attacking the safety net


def test_a_temperature_whose_velocities_overflow_is_refused(folder, capsys):
    # (it used to start the run at temperature 0 and exit 0)
    Path("lj_lattice.toml").write_text(LJ_LATTICE)
    for value in ("1e306", "1e308"):
        line = check(
            folder,
            ["run", "lj_lattice.toml", "--set", f"system.temperature={value}", "-o", "out.h5"],
            capsys,
            "system.temperature",
        )
        assert "beyond the float range" in line, line


def test_a_local_cluster_larger_than_the_machine_is_refused(folder, capsys):
    # (local:99999999999 started workers until the memory ran out)
    line = check(
        folder,
        ["sweep", "sweep.toml", "--scheduler", "local:99999999999", "-o", "out.h5"],
        capsys,
        "--scheduler",
    )
    assert f"at most the {os.cpu_count()} cores" in line, line


@pytest.mark.parametrize("platforms", ["cuda", " cpu"])
def test_jax_platforms_naming_a_missing_device(platforms, tmp_path):
    # In a process of its own: JAX reads JAX_PLATFORMS once. (JAX raises AssertionError
    # for cuda without a GPU, RuntimeError for an unknown name.)
    env = {**os.environ, "JAX_PLATFORMS": platforms}
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "sim.cli",
            "run",
            str(Path(__file__).resolve().parents[2] / "experiments" / "lotka_volterra.toml"),
            "-o",
            "out.h5",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    lines = proc.stderr.strip().splitlines()
    assert (
        proc.returncode == 2
        and len(lines) == 1
        and "JAX_PLATFORMS" in lines[0]
        and "no such device" in lines[0]
    ), proc.stderr
    assert list(tmp_path.iterdir()) == []


def test_a_logspace_beyond_the_float_range_is_one_line(folder, capsys):
    # (numpy's overflow warning used to be printed before the error: here it would be an
    # exception, and the command an internal error)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        line = check(
            folder,
            [
                "sweep",
                "sweep.toml",
                "--set",
                "sweep.params.alpha={ logspace = [0.3, 400, 4] }",
                "-o",
                "out.h5",
            ],
            capsys,
            "sweep.params.alpha",
        )
    assert "finite number" in line, line
