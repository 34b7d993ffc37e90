"""SIGINT (Ctrl-C) and SIGTERM (a scheduler's stop) at three moments of `sim run`,
`sim sweep` and `sim fit`: while the command imports, while it compiles, and mid-run.
Each ends with the signal's exit code (130 / 143), one line that gives the exact command
that resumes it, no output file; and that command completes the work, with the result
of an uninterrupted command.

These start the real `sim` command (its entry point takes the signals before the heavy
imports), so each case costs a few seconds: one case per command runs by default, the
whole matrix under the slow marker.
"""

import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import h5py
import numpy as np
import pytest

from inference import _checkpoint
from sim import _stream, _sweep_store
from sim.cli import main

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"
SIM = Path(sys.executable).parent / "sim"

# Work long enough to be interrupted mid-run, small enough to finish in seconds.
COMMANDS = {
    "run": (
        ["run", str(EXPERIMENTS / "lorenz.toml")],
        ["time.t1=60.0", "time.save=3001", "output.chunk=5", "output.checkpoint_every=1000000"],
    ),
    "sweep": (
        ["sweep", str(EXPERIMENTS / "lotka_volterra_sweep.toml")],
        [
            "sweep.chunk=4",
            "sweep.params.alpha={ linspace = [0.3, 0.8, 8] }",
            "sweep.params.beta={ values = [0.02, 0.03] }",
        ],
    ),
}
# A run interrupted before it computes (while it imports or compiles) needs no length:
# a tenth of the work for the command that resumes it and the uninterrupted one (the
# long run's 600 chunks took 2 s each time).
BEFORE_THE_WORK = {
    "run": ["time.t1=6.0", "time.save=301", "output.chunk=5", "output.checkpoint_every=1000000"]
}


def fit_command(folder: Path) -> tuple[list[str], list[str]]:
    from tests.inference.test_fit import lv_config, noisy, write_data

    # (at most 100 Adam steps, each checkpointed: 99 are left to interrupt after the
    # first checkpoint; with at most 400 the fit took 263, and the resumed and the
    # uninterrupted fit spent about 8 s each on them)
    prey, predator = noisy(np.random.default_rng(3))
    data = write_data(folder / "d.h5", prey, predator)
    config = lv_config(folder, data, optimizer="adam", max_steps=100, learning_rate=0.01)
    return ["fit", str(config.path)], ['fit.free=["alpha", "gamma"]', "fit.checkpoint_every=1"]


def argv(command: str, folder: Path, out: str, moment: str = "mid-run") -> list[str]:
    head, sets = fit_command(folder) if command == "fit" else COMMANDS[command]
    if moment != "mid-run":
        sets = BEFORE_THE_WORK.get(command, sets)
    return [*head, "-o", out, "--quiet", *(x for s in sets for x in ("--set", s))]


def unfinished(command: str, out: Path) -> Path:
    """The file that appears once the command has saved some work."""
    if command == "run":
        return _stream.partial_path(out)
    if command == "sweep":
        return _sweep_store.partial_path(out)
    return _checkpoint.checkpoint_path(out)


def interrupt(command: str, moment: str, signum: int, folder: Path):
    """Start `sim COMMAND`, send `signum` at `moment`; return (exit code, stderr)."""
    args = argv(command, folder, "out.h5", moment)
    env = {**os.environ, "JAX_LOG_COMPILES": "1"} if moment == "compile" else dict(os.environ)
    proc = subprocess.Popen(
        [str(SIM), *args],
        cwd=folder,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines = []
    deadline = time.monotonic() + 300
    if moment == "import":
        time.sleep(1.0)  # the interpreter has started; importing JAX and simjax takes longer
    elif moment == "compile":
        for line in proc.stderr:  # JAX logs each compilation as it begins
            lines.append(line)
            if "Compiling" in line or time.monotonic() > deadline:
                break
    else:
        marker = unfinished(command, folder / "out.h5")
        while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
    assert proc.poll() is None, (
        "the command ended before it was interrupted: " + "".join(lines) + proc.stderr.read()
    )
    proc.send_signal(signum)
    rest = proc.stderr.read()
    proc.wait(timeout=300)
    return proc.returncode, "".join(lines) + rest


def compare(command: str, a: Path, b: Path) -> None:
    with h5py.File(a, "r") as fa, h5py.File(b, "r") as fb:
        if command == "fit":
            for name in fa["estimate"]:
                assert fa["estimate"][name][()] == fb["estimate"][name][()], name
            return
        names = []
        fa.visititems(lambda n, node: names.append(n) if isinstance(node, h5py.Dataset) else None)
        for name in names:
            np.testing.assert_array_equal(fa[name][()], fb[name][()], err_msg=name)


CASES = [
    pytest.param(
        command,
        moment,
        signum,
        marks=() if default else pytest.mark.slow,
        id=f"{command}-{moment}-{signum.name}",
    )
    for command in ("run", "sweep", "fit")
    for moment in ("import", "compile", "mid-run")
    for signum in (signal.SIGINT, signal.SIGTERM)
    for default in [
        (command, moment, signum)
        # By default each command, each moment and each signal once; the run interrupted
        # mid-run by SIGINT is also the README's test (tests/test_readme.py) and the
        # in-process interrupt of tests/sim/test_resume_property.py.
        in {
            ("fit", "mid-run", signal.SIGTERM),
            ("run", "import", signal.SIGTERM),
            ("sweep", "compile", signal.SIGINT),
        }
    ]
]


@pytest.mark.parametrize("command, moment, signum", CASES)
def test_interrupt_exits_with_one_line_and_resumes(command, moment, signum, tmp_path, capsys):
    code, err = interrupt(command, moment, signum, tmp_path)
    assert code == 128 + signum, err
    assert "Traceback" not in err and "Segmentation" not in err, err
    lines = [line for line in err.splitlines() if line.startswith("interrupted")]
    assert len(lines) == 1 and f"({signum.name})" in lines[0], err
    # Besides JAX's compilation log (asked for by the test), nothing else is printed.
    log = ("Finished ", "Compiling ", "Persistent compilation")
    assert [
        line for line in err.splitlines() if line.strip() and not line.startswith(log)
    ] == lines, err
    assert not (tmp_path / "out.h5").exists()
    if moment == "mid-run":
        assert "checkpointed in" in lines[0], lines[0]
    resume = shlex.split(lines[0].split("resume with: ", 1)[1])
    assert resume[0] == "sim" and "--resume" in resume
    # The printed command, run from the same folder, completes the work.
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        with pytest.raises(SystemExit) as exit_info:
            main(resume[1:])
            raise SystemExit(0)
    finally:
        os.chdir(cwd)
    assert exit_info.value.code in (0, None), capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == [], (
        "leftover companion files"
    )
    os.chdir(tmp_path)
    try:
        with pytest.raises(SystemExit) as exit_info:
            main(argv(command, tmp_path, "whole.h5", moment))
            raise SystemExit(0)
    finally:
        os.chdir(cwd)
    assert exit_info.value.code in (0, None)
    compare(command, tmp_path / "out.h5", tmp_path / "whole.h5")


def test_first_signal_waits_for_a_safe_point_and_a_second_stops_at_once():
    from sim import _interrupt

    before = signal.getsignal(signal.SIGINT)  # (a test worker may ignore SIGINT by now)
    with _interrupt.deferred():
        _interrupt.safe_point()  # nothing asked: goes on
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.01)  # the handler runs: it only records the request
        assert _interrupt.requested() == signal.SIGTERM
        saved = []

        def save():  # a signal while the checkpoint is written changes nothing
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.01)
            saved.append(1)
            return Path("ck")

        with pytest.raises(_interrupt.Interrupted) as stop:
            _interrupt.safe_point(save)
        assert saved == [1] and stop.value.checkpoint == Path("ck") and stop.value.exit_code == 143
        os.kill(os.getpid(), signal.SIGTERM)  # nor one while the stop is reported
        time.sleep(0.01)
    with _interrupt.deferred():
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.01)
        with pytest.raises(_interrupt.Interrupted) as again:
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(1.0)  # a second signal before the safe point raises at once
        assert again.value.exit_code == 130 and again.value.checkpoint is None
    # Outside the block the previous handlers are back.
    assert signal.getsignal(signal.SIGINT) is before


def test_a_signal_after_the_command_ended_is_ignored():
    # The `sim` entry point's handler tells of a command still starting; once the command
    # has run, a late signal must not print that nor change the exit code.
    from sim import _interrupt

    def starting(signum, frame):
        raise AssertionError("the start handler ran after the command")

    starting.before_command = True
    previous = signal.signal(signal.SIGTERM, starting)
    try:
        with _interrupt.deferred():
            pass
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(0.01)
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_work_that_keeps_nothing_stops_at_once_even_inside_a_long_call(tmp_path):
    # `sim infer` samples in one compiled call that can last minutes and keeps nothing
    # when stopped: a signal ends it at once with one line. Here a 60 s sleep (a C call
    # that, as XLA, does not return to Python) stands for the sampling.
    script = (
        "import sys, time\n"
        "from sim import _interrupt\n"
        "with _interrupt.deferred(), _interrupt.immediate('sampling'):\n"
        "    print('ready', flush=True)\n"
        "    time.sleep(60)\n"
        "sys.exit(0)\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
    start = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    code = proc.wait(timeout=30)
    assert time.monotonic() - start < 5
    assert (
        code == 143
        and proc.stderr.read().strip()
        == "interrupted (SIGTERM) while sampling; nothing was written"
    )


@pytest.mark.slow
def test_ctrl_c_to_the_process_group_of_a_dask_sweep(tmp_path):
    # A terminal's Ctrl-C reaches every process of the group, the local cluster's workers
    # included: the sweep must still stop at its next chunk with one line and exit 130
    # (it used to hang with the workers gone), and resume to completion.
    args = [
        str(Path(sys.executable).with_name("sim")),
        "sweep",
        str(EXPERIMENTS / "lotka_volterra_sobol.toml"),
        "-o",
        "s.h5",
        "--scheduler",
        "local:2",
        "--set",
        "sweep.chunk=64",
        "--set",
        "sweep.samples=65536",
    ]
    proc = subprocess.Popen(
        args,
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    partial = tmp_path / ".s.h5.partial"
    deadline = time.monotonic() + 300
    while not partial.exists() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    time.sleep(2.0)  # some chunks written
    os.killpg(proc.pid, signal.SIGINT)
    code = proc.wait(timeout=120)
    lines = proc.stderr.read().strip().splitlines()
    assert code == 130 and len(lines) == 1 and "resume with: sim sweep" in lines[0], lines
    resumed = subprocess.run(
        [*args, "--resume", "--quiet"], cwd=tmp_path, capture_output=True, text=True, timeout=600
    )
    assert resumed.returncode == 0, resumed.stderr
    with h5py.File(tmp_path / "s.h5") as f:
        assert np.all(f["status"][()] == 1)
