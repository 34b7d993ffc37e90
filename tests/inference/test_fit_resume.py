"""`sim fit` checkpoints its optimiser and `--resume` ends where an uninterrupted fit ends."""

import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from inference import _checkpoint, fit
from tests.helpers import cli

from .test_fit import at_truth, lv_config, noisy, write_data

REPO = Path(__file__).resolve().parents[2]


class Stop(Exception):
    """Stands for a crash after some checkpoints."""


def stop_after(patch, checkpoints):
    written = []
    original = _checkpoint.Checkpointer.write

    def write(self, start, iteration, *args, **kwargs):
        original(self, start, iteration, *args, **kwargs)
        written.append((start, iteration))
        if len(written) == checkpoints:
            raise Stop()

    patch.setattr(_checkpoint.Checkpointer, "write", write)
    return written


@pytest.fixture
def lv(tmp_path):
    prey, predator = noisy(np.random.default_rng(3))
    return tmp_path, write_data(tmp_path / "d.h5", prey, predator)


@pytest.mark.parametrize(
    "fit_options, overrides, stop",
    [
        # Levenberg-Marquardt by default: the six free quantities and the optimiser of the
        # fits of tests/inference/test_fit.py (and of the README's lynx-hare fit), whose
        # compiled steps it reuses; the other optimisers with `-m slow` (Adam is resumed
        # from a real SIGKILL by default, below).
        ({}, ["fit.checkpoint_every=1"], 3),
        pytest.param(
            {"optimizer": "bfgs"},
            ['fit.free=["alpha", "gamma"]', "fit.checkpoint_every=2", *at_truth("alpha", "gamma")],
            2,
            marks=pytest.mark.slow,
        ),
        pytest.param(
            {"optimizer": "adam", "max_steps": 60, "learning_rate": 0.02},
            ['fit.free=["alpha", "gamma"]', "fit.checkpoint_every=7", *at_truth("alpha", "gamma")],
            3,
            marks=pytest.mark.slow,
        ),
        # Several starts run as one batch, checkpointed round by round: stopped within
        # the batch, resumed from its round.
        pytest.param(
            {"starts": 2, "max_steps": 40},
            ['fit.free=["alpha", "gamma"]', "fit.checkpoint_every=3", *at_truth("alpha", "gamma")],
            2,
            marks=pytest.mark.slow,
        ),
        pytest.param(
            {"starts": 3, "optimizer": "bfgs"},
            ['fit.free=["alpha", "gamma"]', "fit.checkpoint_every=2", *at_truth("alpha", "gamma")],
            2,
            marks=pytest.mark.slow,
        ),
        pytest.param(
            {"starts": 3, "optimizer": "adam", "max_steps": 60, "learning_rate": 0.02},
            ['fit.free=["alpha", "gamma"]', "fit.checkpoint_every=7", *at_truth("alpha", "gamma")],
            3,
            marks=pytest.mark.slow,
        ),
    ],
    ids=[
        "levenberg_marquardt",
        "bfgs",
        "adam",
        "two_starts",
        "three_starts_bfgs",
        "three_starts_adam",
    ],
)
def test_interrupted_fit_resumes_to_the_same_estimate(lv, fit_options, overrides, stop):
    folder, data = lv
    config = lv_config(folder, data, **fit_options).with_overrides(overrides)
    whole = fit(config, output=folder / "whole.h5")
    assert not _checkpoint.checkpoint_path(folder / "whole.h5").exists()
    with pytest.MonkeyPatch.context() as patch:
        written = stop_after(patch, stop)
        with pytest.raises(Stop):
            fit(config, output=folder / "out.h5")
    assert len(written) == stop and not (folder / "out.h5").exists()
    if fit_options.get("starts", 1) > 1:  # (stopped within the batch of starts)
        assert written[-1][0] == 0 and written[-1][1] > 0, written
    assert _checkpoint.checkpoint_path(folder / "out.h5").exists()
    resumed = fit(config, output=folder / "out.h5", resume=True)
    assert resumed.estimate == whole.estimate  # exactly
    np.testing.assert_array_equal(resumed.loss_history, whole.loss_history)
    assert resumed.stderr == whole.stderr
    if whole.starts_objective is not None:  # every start's end survives the interruption
        np.testing.assert_array_equal(resumed.starts_objective, whole.starts_objective)
        for name, values in whole.starts_estimate.items():
            np.testing.assert_array_equal(resumed.starts_estimate[name], values)
    assert (folder / "out.h5").exists() and not _checkpoint.checkpoint_path(
        folder / "out.h5"
    ).exists()


def test_sigkilled_fit_resumes_to_the_same_estimate(lv, capsys):
    # A real SIGKILL of `sim fit` (Adam, a checkpoint every 5 steps) once a checkpoint
    # exists, then `sim fit --resume`: the estimates equal an uninterrupted fit's.
    folder, data = lv
    config = lv_config(folder, data, optimizer="adam", max_steps=600, learning_rate=0.01)
    sets = ['fit.free=["alpha", "gamma"]', "fit.checkpoint_every=5", *at_truth("alpha", "gamma")]
    args = ["fit", str(config.path), "-o", str(folder / "out.h5"), "--quiet"] + [
        x for s in sets for x in ("--set", s)
    ]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "sim.cli", *args],
        cwd=folder,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    checkpoint = _checkpoint.checkpoint_path(folder / "out.h5")
    deadline = time.monotonic() + 300
    while not checkpoint.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read().decode()
    assert checkpoint.exists() and not (folder / "out.h5").exists()
    code, err = cli(args + ["--resume"], capsys)
    assert code == 0, err
    whole = fit(config.with_overrides(sets), output=folder / "whole.h5")
    import sim

    resumed = sim.read(folder / "out.h5")
    for name, value in whole.estimate.items():
        assert float(resumed.estimate[name]) == value


def digest(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest() if Path(path).exists() else None


def test_fit_resume_refusals_leave_the_files_untouched(lv, capsys):
    folder, data = lv
    config = lv_config(folder, data).with_overrides(["fit.checkpoint_every=1"])
    args = [
        "fit",
        str(config.path),
        "-o",
        str(folder / "out.h5"),
        "--quiet",
        "--set",
        "fit.checkpoint_every=1",
    ]
    with pytest.MonkeyPatch.context() as patch:
        stop_after(patch, 2)
        with pytest.raises(Stop):
            fit(config, output=folder / "out.h5")
    checkpoint = _checkpoint.checkpoint_path(folder / "out.h5")
    before = digest(checkpoint)
    for argv, expected in [
        (
            args + ["--resume", "--set", "params.alpha=0.6"],
            "another optimisation: a different config (params.alpha: stored ",
        ),
        (args, "pass --resume"),
    ]:
        code, err = cli(argv, capsys)
        assert (
            code == 2
            and expected in err
            and len(err.strip().splitlines()) == 1
            and "Traceback" not in err
        ), err
        assert digest(checkpoint) == before and not (folder / "out.h5").exists()
    checkpoint.write_bytes(checkpoint.read_bytes()[:100])
    damaged = digest(checkpoint)
    code, err = cli(args + ["--resume"], capsys)
    assert code == 2 and "damaged" in err and len(err.strip().splitlines()) == 1, err
    assert digest(checkpoint) == damaged and not (folder / "out.h5").exists()


def test_a_fit_resumes_with_another_checkpoint_interval(lv, capsys):
    # How often a fit checkpoints is not part of its work (sim._unfinished): resumed with
    # another interval, it ends where an uninterrupted fit ends.
    folder, data = lv
    config = lv_config(folder, data)
    with pytest.MonkeyPatch.context() as patch:
        stop_after(patch, 2)
        with pytest.raises(Stop):
            fit(config.with_overrides(["fit.checkpoint_every=1"]), output=folder / "out.h5")
    assert _checkpoint.checkpoint_path(folder / "out.h5").exists()
    code, err = cli(
        [
            "fit",
            str(config.path),
            "-o",
            str(folder / "out.h5"),
            "--quiet",
            "--resume",
            "--set",
            "fit.checkpoint_every=4",
        ],
        capsys,
    )
    assert code == 0, err
    whole = fit(config, output=folder / "whole.h5")
    import sim

    resumed = sim.read(folder / "out.h5")
    for name, value in whole.estimate.items():
        assert float(resumed.estimate[name]) == value


def test_a_stop_after_the_optimiser_is_honoured_at_once_and_resumes_from_its_end(
    lv, capsys, monkeypatch
):
    # What follows Levenberg-Marquardt (the Gauss-Newton polish, the likelihood, the
    # standard errors, the fitted curves) compiles programs of its own, which for a model
    # with events took a minute, and had no safe point: a SIGTERM there was ignored until
    # the fit had written its file. Here SIGTERM comes as the optimiser ends (the
    # programs compiled by a first fit, so that what is timed is the wait for a safe
    # point): the fit stops within a second with exit 143 and a checkpoint of the
    # optimiser's end, and --resume goes on from that end without optimising again.
    from inference import _fit

    folder, data = lv
    config = lv_config(folder, data)
    args = ["fit", str(config.path), "-o", str(folder / "out.h5"), "--quiet"]
    whole = fit(config, output=folder / "whole.h5")
    polish, sent = _fit.gauss_newton_polish, []

    def signalled(problem, x):
        os.kill(os.getpid(), signal.SIGTERM)
        sent.append(time.monotonic())
        return polish(problem, x)

    with monkeypatch.context() as patch:
        patch.setattr(_fit, "gauss_newton_polish", signalled)
        code, err = cli(args, capsys)
    waited = time.monotonic() - sent[0]
    assert code == 143 and waited < 2.0, (code, waited, err)
    lines = err.strip().splitlines()
    assert (
        len(lines) == 1
        and lines[0].startswith("interrupted (SIGTERM): the fit so far is checkpointed in ")
        and lines[0].endswith("--resume")
    ), err
    assert (
        not (folder / "out.h5").exists() and _checkpoint.checkpoint_path(folder / "out.h5").exists()
    )

    def optimised(*args, **kwargs):
        raise AssertionError("the resumed fit ran the optimiser again")

    with monkeypatch.context() as patch:
        patch.setattr(_fit, "_optimistix", optimised)
        code, err = cli(args + ["--resume"], capsys)
    assert code == 0, err
    import sim

    resumed = sim.read(folder / "out.h5")
    for name, value in whole.estimate.items():
        assert float(resumed.estimate[name]) == value
        assert float(resumed.stderr[name]) == whole.stderr[name]
    np.testing.assert_array_equal(np.asarray(resumed.loss_history), whole.loss_history)
