"""Multistart fits spread over devices and Dask workers: every start's end is the same
however the starts were split (one batch, two host devices, blocks on a Dask cluster),
and the hostile uses of `--devices` and `--scheduler` end in one line and exit 2 (a
worker that fails: exit 1), nothing written."""

import os
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
from distributed import LocalCluster

import sim
import sim._distributed
from inference import _fit, _fit_multistart, _petab, _petab_files, _petab_fit
from inference._multistart import blocks
from inference._petab import load_petab
from inference._petab_fit import fit_petab
from solvers import OdeSolver
from tests.helpers import cli, host_devices

REPO = Path(__file__).resolve().parents[2]
EXPERIMENTS = REPO / "experiments"
sys.path.insert(0, str(EXPERIMENTS / "data"))
# (A' = -k A: two parameters)
from make_decay_petab import TRUTH, write as decay_problem  # noqa: E402

# (explicit steps: the decay is not stiff)
TSIT5 = OdeSolver(method="tsit5", rtol=1e-10, atol=1e-12, max_steps=100_000, throw=False)


@pytest.fixture(scope="module")
def threads():
    """A Dask cluster of two single-threaded workers in this process (no worker
    processes to start: the tasks run on the cluster, the programs compile here)."""
    with LocalCluster(
        n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
    ) as cluster:
        yield cluster


# Slow: compile-bound, 25-50 s on the two loaded cores it was measured on (the worker's
# batch and the objectives compile; programs of diffrax solves at given save times hold a
# host callback, which JAX's persistent cache does not store). By default the Dask path
# runs on the same cluster in the hostile tests below (a failing worker).
@pytest.mark.slow
def test_petab_starts_run_in_blocks_on_a_dask_cluster(tmp_path, threads):
    # Four starts of the decay problem in two blocks of two, one block per worker: the
    # ends come back in start order, each block's as the worker's batched L-BFGS-B gives
    # them (here: the same function called in this process, which finds the problem
    # and its compiled batch the workers left), and every start reaches the optimum.
    # (That the ends do not depend on the split, one batch against blocks or devices,
    # is the next test: each split compiles its own batch.)
    from scipy.stats import qmc

    yaml = decay_problem(tmp_path / "decay")
    problem = load_petab(yaml, TSIT5)
    reported = []
    fitted = fit_petab(
        problem,
        starts=4,
        scheduler=threads.scheduler_address,
        on_start=lambda k, f: reported.append(k),
    )
    assert reported == [1, 2, 3, 4]
    lower, upper = problem.bounds()
    points = qmc.scale(qmc.LatinHypercube(d=2, seed=0).random(4), lower, upper)
    points[0] = problem.nominal()
    digest = _petab_files.files_digest(yaml.resolve())
    ends = np.concatenate(
        [
            _petab_fit.fit_block(str(yaml.resolve()), digest, TSIT5, points[b], 1000)[0]
            for b in (slice(0, 2), slice(2, 4))
        ]
    )
    for j, name in enumerate(("k", "A0")):
        np.testing.assert_array_equal(fitted.starts_estimate[name], 10.0 ** ends[:, j])
    assert np.ptp(fitted.starts_objective) < 1e-6, fitted.starts_objective
    # (the data: 2 exp(-0.7 t) with 2.5% noise)
    assert (
        abs(fitted.estimate["k"] - TRUTH["k"]) < 0.02
        and abs(fitted.estimate["A0"] - TRUTH["A0"]) < 0.05
    ), fitted.estimate


@pytest.mark.slow
def test_petab_starts_agree_on_one_device_two_devices_and_local_2(tmp_cwd, capsys):
    # `sim fit --starts 8` of the decay problem three ways: one batch on one device, the
    # batch split over two host devices (a process of its own: XLA_FLAGS is read when
    # JAX starts), and two blocks of four on a local Dask cluster of two processes.
    yaml = decay_problem(tmp_cwd / "decay")
    code, err = cli(
        ["fit", str(yaml), "--starts", "8", "--devices", "1", "-o", "one.h5", "--quiet"], capsys
    )
    assert code == 0, err
    env = {**os.environ, "PYTHONPATH": str(REPO), "XLA_FLAGS": host_devices(2)}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "sim.cli",
            "fit",
            str(yaml),
            "--starts",
            "8",
            "--devices",
            "2",
            "-o",
            "two.h5",
            "--quiet",
        ],
        cwd=tmp_cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr
    code, err = cli(
        ["fit", str(yaml), "--starts", "8", "--scheduler", "local:2", "-o", "dask.h5", "--quiet"],
        capsys,
    )
    assert code == 0, err
    with h5py.File("one.h5") as one:
        objective = one["starts/objective"][()]
        estimate = {n: one[f"starts/estimate/{n}"][()] for n in ("k", "A0")}
    assert objective.shape == (8,) and np.all(np.isfinite(objective))
    for name in ("two.h5", "dask.h5"):
        with h5py.File(name) as f:
            np.testing.assert_allclose(
                f["starts/objective"][()], objective, rtol=1e-8, atol=0, err_msg=name
            )
            for n, values in estimate.items():
                np.testing.assert_allclose(
                    f[f"starts/estimate/{n}"][()], values, rtol=1e-6, err_msg=name
                )


@pytest.mark.slow
def test_config_multistart_agrees_on_one_device_two_devices_and_a_dask_cluster(tmp_path, capsys):
    # A config's three starts (Levenberg-Marquardt, the Lotka-Volterra fit of
    # test_fit.py) as one batch, split over two host devices (`sim fit --starts 3`), and
    # in blocks on a local Dask cluster of two processes: the same ends.
    from .test_fit import lv_config, noisy, write_data

    data = write_data(tmp_path / "d.h5", *noisy(np.random.default_rng(3)))
    config = lv_config(tmp_path, data, starts=3, seed=0)
    one = _fit.fit(config, devices=1)
    dask = _fit.fit(config, scheduler="local:2")
    env = {**os.environ, "PYTHONPATH": str(REPO), "XLA_FLAGS": host_devices(2)}
    done = subprocess.run(
        # (--starts sets [fit] starts, over what --set says)
        [
            sys.executable,
            "-m",
            "sim.cli",
            "fit",
            str(config.path),
            "--set",
            "fit.starts=1",
            "--starts",
            "3",
            "--devices",
            "2",
            "-o",
            "two.h5",
            "--quiet",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr
    two = sim.read(tmp_path / "two.h5")
    for name, objective, estimate in [
        ("dask", dask.starts_objective, dask.starts_estimate),
        (
            "two devices",
            np.asarray(two["starts/objective"]),
            {n: np.asarray(two[f"starts/estimate/{n}"]) for n in one.names},
        ),
    ]:
        np.testing.assert_allclose(objective, one.starts_objective, rtol=1e-8, atol=0, err_msg=name)
        for n in one.names:
            np.testing.assert_allclose(
                estimate[n], one.starts_estimate[n], rtol=1e-6, err_msg=f"{name}: {n}"
            )
    assert dask.estimate == pytest.approx(one.estimate, rel=1e-8)


@pytest.mark.slow
def test_a_config_fit_on_a_cluster_resumes_after_its_finished_blocks(tmp_path, threads):
    # Three starts in blocks of two and one on two workers, stopped once the first block
    # is checkpointed, resumed on the cluster: the second block is computed again, as it
    # was cut, and the fit ends as the uninterrupted one (bit for bit).
    from inference import _checkpoint

    from .test_fit import at_truth, lv_config, noisy, write_data
    from .test_fit_resume import Stop, stop_after

    data = write_data(tmp_path / "d.h5", *noisy(np.random.default_rng(3)))
    config = lv_config(tmp_path, data, starts=3, optimizer="bfgs").with_overrides(
        ['fit.free=["alpha", "gamma"]', *at_truth("alpha", "gamma")]
    )
    whole = _fit.fit(config, output=tmp_path / "whole.h5", scheduler=threads.scheduler_address)
    with pytest.MonkeyPatch.context() as patch:
        written = stop_after(patch, 1)
        with pytest.raises(Stop):
            _fit.fit(config, output=tmp_path / "out.h5", scheduler=threads.scheduler_address)
    assert written == [(2, 0)] and not (tmp_path / "out.h5").exists()
    resumed = _fit.fit(
        config, output=tmp_path / "out.h5", resume=True, scheduler=threads.scheduler_address
    )
    assert resumed.estimate == whole.estimate
    np.testing.assert_array_equal(resumed.starts_objective, whole.starts_objective)
    np.testing.assert_array_equal(resumed.loss_history, whole.loss_history)
    assert not _checkpoint.checkpoint_path(tmp_path / "out.h5").exists()


def test_blocks_are_those_of_the_whole_fit():
    # A fit resumed after its first block recomputes the blocks it would have run.
    assert blocks(0, 8, 4) == [range(0, 4), range(4, 8)]
    assert blocks(4, 8, 4) == [range(4, 8)]
    assert blocks(3, 7, 3) == [range(3, 6), range(6, 7)]
    assert blocks(2, 7, 3) == [range(2, 3), range(3, 6), range(6, 7)]
    assert blocks(7, 7, 3) == []


# ----------------------------------------------------------------------------- hostile


def decay_config(folder: Path, starts: int) -> Path:
    """A config fitting the same decay (written as text) with `starts` starts."""
    t = np.linspace(0.0, 5.0, 11)
    with h5py.File(folder / "d.h5", "w") as f:
        f["t"], f["A"] = t, 2.0 * np.exp(-0.7 * t)
    (folder / "decay.toml").write_text(f"""
[model]
name = "decay"
[model.states]
A = "-k * A"
[model.parameters]
k = 0.5
[initial]
A = 1.0
[data]
file = "d.h5"
time = "/t"
[data.observables]
A = "/A"
[fit]
free = ["k", "initial.A"]
starts = {starts}
""")
    return folder / "decay.toml"


def refused(argv, capsys, names: str, code: int = 2) -> str:
    done, err = cli(argv, capsys)
    lines = err.strip().splitlines()
    assert done == code and len(lines) == 1 and names in lines[0] and "Traceback" not in err, (
        done,
        err,
    )
    return lines[0]


def only(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


@pytest.fixture
def inputs(tmp_cwd):
    decay_problem(tmp_cwd / "decay")
    decay_config(tmp_cwd, 3)
    decay_config(tmp_cwd / "decay", 1)
    return tmp_cwd


PETAB = ["fit", "decay/decay.yaml", "--starts", "3", "-o", "out.h5"]
CONFIG = ["fit", "decay.toml", "-o", "out.h5"]


@pytest.mark.parametrize("command", [PETAB, CONFIG], ids=["petab", "config"])
def test_bad_device_counts_and_schedulers_are_one_line(inputs, capsys, monkeypatch, command):
    before = only(inputs)
    line = refused(command + ["--devices", "0"], capsys, "--devices")
    assert "expected 1 to" in line
    refused(command + ["--devices", "99"], capsys, "--devices")
    refused(command + ["--scheduler", "local:x"], capsys, "--scheduler")
    monkeypatch.setattr(sim._distributed, "CONNECT_SECONDS", 0.5)  # (10 s by default)
    line = refused(command + ["--scheduler", "tcp://127.0.0.1:1"], capsys, "--scheduler")
    assert "cannot reach the Dask scheduler" in line, line
    with LocalCluster(
        n_workers=0, processes=False, dashboard_address=None
    ) as empty:  # (its tasks would wait for ever)
        line = refused(command + ["--scheduler", empty.scheduler_address], capsys, "--scheduler")
    assert "the Dask cluster has no workers" in line, line
    assert only(inputs) == before  # nothing written, no lock or checkpoint left


@pytest.mark.parametrize(
    "command",
    [["fit", "decay/decay.yaml", "-o", "out.h5"], ["fit", "decay/decay.toml", "-o", "out.h5"]],
    ids=["petab", "config"],
)
def test_a_fit_of_one_start_refuses_a_scheduler(inputs, capsys, command):
    # One start has nothing to spread: refused rather than run in this process while
    # the user believes it runs on the cluster.
    before = only(inputs)
    line = refused(command + ["--scheduler", "local:2"], capsys, "--scheduler")
    assert "this fit has one start" in line, line
    refused(
        ["fit", "decay/decay.yaml", "--evaluate", "-o", "out.h5", "--scheduler", "local:2"],
        capsys,
        "one start",
    )
    assert only(inputs) == before


def test_a_worker_that_fails_fails_the_fit_with_nothing_written(
    inputs, capsys, monkeypatch, threads
):
    def broken(*args):
        raise RuntimeError("the worker ran out of memory")

    monkeypatch.setattr(_petab_fit, "fit_block", broken)
    monkeypatch.setattr(_fit_multistart, "worker_starts", broken)
    before = only(inputs)
    for command in (PETAB, CONFIG):
        line = refused(
            command + ["--scheduler", threads.scheduler_address],
            capsys,
            "RuntimeError: the worker ran out of memory",
            code=1,
        )
        assert line.startswith("error: "), line
        assert only(inputs) == before


def test_a_worker_that_reads_other_files_refuses_its_block(inputs):
    # A worker checks that it reads the files the fit was started with (a cluster whose
    # workers see another copy): one line naming the file.
    yaml = inputs / "decay" / "decay.yaml"
    with pytest.raises(_petab.PetabError, match="differ from those the fit was started with"):
        _petab_fit.fit_block(str(yaml), "0" * 64, TSIT5, np.zeros((1, 2)), 10)
    config = sim.load_config(inputs / "decay.toml")
    with pytest.raises(sim.DataError, match="differ from those the fit was started with"):
        _fit_multistart.worker_starts(
            config.to_toml(),
            str(config.path),
            None,
            "0" * 64,
            {"k": np.zeros(1), "initial.A": np.zeros(1)},
        )


def test_the_fit_is_the_first_start_of_the_lowest_final_loss(tmp_path):
    # Five starts of the decay config stopped after two Levenberg-Marquardt steps end at
    # different losses, none of them the first start's first loss: the fit's estimate and
    # objective are those of the first start of the lowest final loss, to the bit.
    config = sim.load_config(decay_config(tmp_path, 5)).with_overrides(
        ["fit.max_steps=2", "fit.seed=1"]
    )
    fitted = _fit.fit(config)
    ends = fitted.starts_objective
    k = int(np.argmin(ends))
    assert np.unique(ends).size == ends.size, ends  # (otherwise the choice would not show)
    assert fitted.objective == ends[k], (k, ends, fitted.objective)
    assert all(fitted.estimate[n] == fitted.starts_estimate[n][k] for n in fitted.estimate), (
        k,
        fitted.estimate,
        fitted.starts_estimate,
    )


@pytest.mark.parametrize("optimizer", ["levenberg_marquardt", "adam"])
def test_the_progress_of_a_multistart_names_each_round_from_one(optimizer, tmp_path, monkeypatch):
    # Five starts stepped together for at most two rounds (the programs of the test
    # above): the description names rounds 1 and 2 in turn, the round just taken, and
    # the starts done of five.
    seen = []
    monkeypatch.setattr(_fit.Progress, "describe", lambda self, text: seen.append(text))
    config = sim.load_config(decay_config(tmp_path, 5)).with_overrides(
        ["fit.max_steps=2", "fit.seed=1", f'fit.optimizer="{optimizer}"']
    )
    _fit.fit(config, progress=True)
    rounds = [text for text in seen if "starts done" in text]
    steps = [int(text.split("step ")[1].split(",")[0]) for text in rounds]
    assert steps == [1, 2], rounds
    assert all(text.endswith(" of 5 starts done") for text in rounds), rounds


# ------------------------------------------------- how many starts reached the best


def _petab_fit_of(objectives: list[float]) -> "_petab_fit.PetabFit":
    objective = np.asarray(objectives, dtype=float)
    best = float(np.min(objective))
    return _petab_fit.PetabFit(
        "p.yaml",
        "m",
        ["k"],
        {"k": 1.0},
        best,
        objective,
        {"k": np.ones(len(objective))},
        np.ones(len(objective), bool),
        "",
        int(np.sum(objective <= best + 0.1)),
    )


@pytest.mark.parametrize(
    "reached, starts, warned",
    [(1, 1, False), (2, 2, True), (2, 20, True), (3, 20, False), (9, 100, True), (10, 100, False)],
)
def test_a_multistart_whose_best_few_starts_reached_is_warned_of(reached, starts, warned):
    # (fewer than 3 starts, or fewer than 10% of them, at the best: a fit of one start
    # asked for no search)
    fit = _petab_fit_of([-5.0] * reached + [3.0] * (starts - reached))
    assert fit.reached_best == reached
    lines = fit.warnings
    assert bool(lines) == warned and len(lines) <= 1
    if warned:
        assert f"only {reached} of {starts} starts reached the best objective" in lines[0]


def test_sim_fit_reports_how_many_starts_reached_the_best(tmp_cwd, capsys, monkeypatch):
    # Starts cut to 2 L-BFGS-B iterations end apart: the count is the file's objectives
    # within 0.1 of their minimum, in the result, the file and the printed lines. (Solved
    # by explicit steps, as the tests above: the decay is not stiff, and PEtab's default
    # implicit solver took most of the time in tracing and compiling.)
    import functools

    import inference

    yaml = decay_problem(tmp_cwd / "decay")
    monkeypatch.setattr(inference, "fit_petab", functools.partial(fit_petab, max_steps=2))
    monkeypatch.setattr(
        inference,
        "load_petab",
        lambda path, solver=None, allow_outside=False: load_petab(
            path, TSIT5 if solver is None else solver, allow_outside=allow_outside
        ),
    )
    code, err = cli(["fit", str(yaml), "--starts", "8", "-o", "fit.h5"], capsys)
    assert code == 0, err
    with h5py.File("fit.h5") as f:
        objective = f["starts/objective"][()]
        reached = int(np.sum(objective <= np.min(objective) + 0.1))
        assert f.attrs["reached_best"] == reached and f.attrs["reached_best_within"] == 0.1
    assert 1 <= reached < 8, objective
    assert f"{reached} of 8 reached the best objective (within 0.1)" in err, err
    warned = reached < 3 or reached < 0.1 * 8
    assert (f"warning: only {reached} of 8 starts reached the best objective" in err) == warned
    assert sim.read("fit.h5").attrs["reached_best"] == reached
