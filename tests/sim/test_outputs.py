"""Outputs a user owns are never damaged: one writer per output (a second is refused
before it touches anything), and an output that is one of the command's inputs, a
device or a FIFO is refused (compared as files, not as spellings)."""

import hashlib
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import h5py
import numpy as np
import pytest

import sim
from sim import _lock, _stream, _sweep_store
from tests.helpers import cli

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"
SIM = Path(sys.executable).parent / "sim"
# 200 chunks of 5 frames: most of a second of the run is left when its first chunk is
# written (the first writer is stopped then, and let go again after).
LONG_RUN = ["--set", "time.t1=20.0", "--set", "time.save=1001", "--set", "output.chunk=5"]


def digest(path):
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def one_line_error(code, err, *words):
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and "Traceback" not in err, err
    for word in words:
        assert word in lines[0], err


@pytest.fixture
def lynx_hare(tmp_path):
    """The lynx-hare fit config and its data, copied (the test tries to overwrite them)."""
    shutil.copy(EXPERIMENTS / "lynx_hare.toml", tmp_path)
    (tmp_path / "data").mkdir()
    shutil.copy(EXPERIMENTS / "data" / "lynx_hare.h5", tmp_path / "data")
    return tmp_path / "lynx_hare.toml", tmp_path / "data" / "lynx_hare.h5"


def start_writer(args, folder, marker):
    """A `sim` process that holds its output's lock once `marker` exists."""
    proc = subprocess.Popen(
        [str(SIM), *args], cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + 300
    while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    assert proc.poll() is None, proc.stderr.read()
    return proc


def hold_still(proc):
    """Stop `proc` (SIGSTOP) and wait until it has stopped: the signal is delivered
    after `kill` returns, and a writer it reaches a moment late may still write."""
    proc.send_signal(signal.SIGSTOP)
    stat_file = Path(f"/proc/{proc.pid}/stat")
    if not stat_file.exists():  # (no /proc: a pause long enough for the delivery)
        time.sleep(0.5)
        return
    deadline = time.monotonic() + 30
    # (the state is the field after the parenthesised command name)
    while stat_file.read_text().rsplit(")", 1)[1].split()[0] not in ("T", "t"):
        assert time.monotonic() < deadline, "the writer did not stop"
        time.sleep(0.001)


def test_a_second_writer_is_refused_before_it_touches_anything(tmp_path, capsys):
    args = ["run", str(EXPERIMENTS / "lorenz.toml"), "-o", "out.h5", "--quiet", *LONG_RUN]
    out = tmp_path / "out.h5"
    first = start_writer(args, tmp_path, _stream.partial_path(out))
    # (held still while the second writer tries, so that it is still writing then,
    # however fast its run)
    hold_still(first)
    os.chdir(tmp_path)
    size = _stream.partial_path(out).stat().st_size
    for extra in ([], ["--resume"]):
        code, err = cli(args + extra, capsys)
        one_line_error(code, err, "out.h5", "another writer", f"process {first.pid}", "sim run")
        assert "delete" not in err
    assert _stream.partial_path(out).stat().st_size == size  # untouched
    first.send_signal(signal.SIGCONT)
    assert first.wait(timeout=300) == 0, first.stderr.read()
    with h5py.File(out, "r") as f:  # the first writer's file is whole
        assert np.all(np.isfinite(f["observables/x"][()]))
        assert f["observables/x"].shape == (1001,)
    assert not _lock.lock_path(out).exists()


def test_an_output_that_is_a_symbolic_link_is_refused(tmp_path, capsys):
    # Written under a temporary name and renamed, a result would replace the link; locked
    # by its own name, a writer through a link would not stop one naming its target.
    (tmp_path / "link.h5").symlink_to("out.h5")
    args = ["run", str(EXPERIMENTS / "lorenz.toml"), "--quiet"]
    first = start_writer(
        [*args, *LONG_RUN, "-o", "out.h5"], tmp_path, _stream.partial_path(tmp_path / "out.h5")
    )
    hold_still(first)
    os.chdir(tmp_path)
    code, err = cli([*args, "-o", "link.h5"], capsys)
    one_line_error(code, err, "link.h5", "symbolic link", "out.h5")
    first.send_signal(signal.SIGCONT)
    assert first.wait(timeout=300) == 0, first.stderr.read()
    before = digest("out.h5")
    code, err = cli([*args, "-o", "link.h5"], capsys)
    one_line_error(code, err, "link.h5", "symbolic link")
    assert os.path.islink("link.h5") and digest("out.h5") == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["link.h5", "out.h5"]


def test_a_running_sweep_is_not_resumed_by_another_process(tmp_path, capsys):
    args = [
        "sweep",
        str(EXPERIMENTS / "lotka_volterra_sweep.toml"),
        "-o",
        "s.h5",
        "--quiet",
        "--set",
        "sweep.chunk=4",
        "--set",
        "sweep.params.alpha={ linspace = [0.3, 0.8, 64] }",
    ]
    first = start_writer(args, tmp_path, _sweep_store.partial_path(tmp_path / "s.h5"))
    os.chdir(tmp_path)
    code, err = cli(args + ["--resume"], capsys)
    one_line_error(code, err, "another writer", f"process {first.pid}", "sim sweep")
    assert "delete" not in err
    first.send_signal(signal.SIGKILL)
    first.wait()
    # The kernel released the dead writer's lock: the next writer takes it over.
    code, err = cli(args + ["--resume"], capsys)
    assert code == 0, err
    assert sim.read(tmp_path / "s.h5")["status"].min() == 1


def test_lock_is_reentrant_in_a_process_and_removed_after(tmp_path):
    out = tmp_path / "x.h5"
    with _lock.exclusive(out):
        assert _lock.lock_path(out).exists()
        with _lock.exclusive(out):  # the library call inside a command
            pass
        assert _lock.lock_path(out).exists()
        # Another process cannot take it. (`sim._lock` alone, as the `sim` command loads its
        # light modules: without the package's `__init__`, which imports JAX and the models)
        probe = subprocess.run(
            [
                sys.executable,
                "-c",
                "import _sim_entry\n_sim_entry._unstarted_package('sim')\n"
                f"from sim._lock import exclusive\nwith exclusive({str(out)!r}): pass",
            ],
            capture_output=True,
            text=True,
        )
        assert probe.returncode != 0 and "another writer" in probe.stderr
    assert not _lock.lock_path(out).exists()


def test_outputs_that_are_inputs_are_refused(lynx_hare, tmp_path, capsys, monkeypatch):
    config, data = lynx_hare
    monkeypatch.chdir(tmp_path)
    before = {p: digest(p) for p in (config, data)}
    os.link(data, tmp_path / "hardlink.h5")
    os.symlink(config, tmp_path / "symlink.toml")
    shutil.copy(data, tmp_path / "figure.png")
    before[tmp_path / "figure.png"] = digest(tmp_path / "figure.png")
    cases = [
        (["fit", str(config), "-o", str(data)], "input file"),
        (["fit", str(config), "-o", "data/../data/lynx_hare.h5"], "input file"),  # another spelling
        (["fit", str(config), "-o", "hardlink.h5"], "input file"),  # another name of the same file
        (["fit", str(config), "--data", "hardlink.h5", "-o", str(data)], "input file"),
        (["run", str(config), "-o", str(config)], "input file"),
        (["run", str(config), "-o", "symlink.toml"], "input file"),
        (["infer", str(config), "-o", str(data)], "input file"),
        (["infer", str(config), "-o", "p.h5", "--arviz", "p.h5"], "-o posterior file"),
        (["infer", str(config), "-o", "p.h5", "--arviz", str(data)], "input file"),
        (["plot", "figure.png", "-o", "figure.png"], "input file"),  # an HDF5 file named .png
    ]
    os.symlink("p.h5", tmp_path / "p.nc")  # --arviz a link to the -o file, not yet written
    cases.append((["infer", str(config), "-o", "p.h5", "--arviz", "p.nc"], "symbolic link"))
    for args, words in cases:
        code, err = cli([*args, "--quiet"], capsys)
        one_line_error(code, err, words)
    assert {p: digest(p) for p in before} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "data",
        "figure.png",
        "hardlink.h5",
        "lynx_hare.toml",
        "p.nc",
        "symlink.toml",
    ]


def test_working_files_of_another_output_are_refused(tmp_path, capsys, monkeypatch):
    # A run whose -o is another run's unfinished file, checkpoint or lock would swap its
    # result in or break the lock: refused, whether or not such a file exists.
    monkeypatch.chdir(tmp_path)
    config = str(EXPERIMENTS / "lotka_volterra.toml")
    out = tmp_path / "out.h5"
    for working in (
        _stream.partial_path(out),
        _stream.checkpoint_path(out),
        _lock.lock_path(out),
        tmp_path / ".out.h5.x1y2.tmp",
    ):
        code, err = cli(["run", config, "-o", working.name, "--quiet"], capsys)
        one_line_error(code, err, "working file of another output")
    assert list(tmp_path.iterdir()) == []
    # Folders where no file can be made beside the output: one line, exit 2.
    for target in ("/proc/self/fd/1", "/sys/kernel/x.h5"):
        code, err = cli(["run", config, "-o", target, "--quiet"], capsys)
        one_line_error(code, err, target)


def test_output_from_an_initial_file_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    points = 32
    with h5py.File("u0.h5", "w") as f:
        f["u"] = np.sin(np.linspace(0, 2 * np.pi, points, endpoint=False))
    (tmp_path / "ks.toml").write_text((EXPERIMENTS / "kuramoto_sivashinsky.toml").read_text())
    before = digest("u0.h5")
    sets = [
        "--set",
        f"grid.points=[{points}]",
        "--set",
        'initial={ file = "u0.h5", dataset = "/u" }',
    ]
    code, err = cli(["run", "ks.toml", "-o", "u0.h5", *sets], capsys)
    one_line_error(code, err, "input file", "u0.h5")
    assert digest("u0.h5") == before


def test_devices_and_fifos_are_refused_and_left_alone(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    os.mkfifo("pipe")
    for target, kind in [("pipe", "FIFO"), ("/dev/null", "character device")]:
        code, err = cli(["run", str(EXPERIMENTS / "lotka_volterra.toml"), "-o", target], capsys)
        one_line_error(code, err, kind)
    assert stat.S_ISFIFO(os.stat("pipe").st_mode)
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)
    code, err = cli(["plot", str(EXPERIMENTS / "data" / "lynx_hare.h5"), "-o", "/dev/null"], capsys)
    assert code == 2, err
