"""Sweeps whose runs advance a few saved frames per call (PDE, SDE, MD, and ODE models
without the batched fast path): a chunk gives the same bytes however its frames are cut,
is checkpointed within (every five minutes by default, or as `[output]` says), and a
sweep stopped mid-chunk by SIGTERM or SIGKILL resumes from that checkpoint to the bytes
of an uninterrupted sweep."""

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import h5py
import numpy as np
import pytest

import sim
import sim._sweep as sweep_module
import sim._sweep_frames as frames_module
from sim.cli import main
from tests.helpers import host_devices

from . import test_sweep_pde

SPECTRAL = """
[model]
name = "heat"
[grid]
points = [16]
domain = [[0.0, 6.283185307179586]]
[initial]
kind = "sine"
[time]
t1 = 0.5
save = 6
dt = 0.01
[sweep]
mode = "grid"
save = "summary"
chunk = 3
[sweep.params]
diffusivity = { values = [0.1, 0.3, 0.5, 1.0] }
"""

FD = test_sweep_pde.FD  # (the same programs as that file's finite-difference sweep: compiled once)

SDE = """
[model]
name = "ornstein_uhlenbeck"
[initial]
x = 2.0
[time]
t1 = 1.0
save = 11
[solver]
method = "euler"
dt = 0.02
[ensemble]
paths = 3
seed = 7
[sweep]
save = "final"
[sweep.params]
theta = { values = [0.5, 1.5] }
"""

# Long enough (about a second of stepping) to be stopped mid-chunk; a checkpoint after every
# call, the first of which advances one frame.
MD = """
[model]
name = "lennard_jones"
[params]
cutoff = 1.6
shift = true
[system]
lattice = "fcc"
cells = 2
density = 0.8
temperature = 1.0
seed = 3
[time]
dt = 0.004
steps = 2000
save_every = 20
[solver]
method = "langevin"
temperature = 1.0
friction = 1.0
[sweep]
mode = "grid"
save = "summary"
[sweep.params]
epsilon = { values = [0.8, 1.2] }
sigma = { values = [0.95, 1.05] }
[output]
checkpoint_every = 1
"""


class Fixed:
    """A chunk sizer that advances `n` frames per call."""

    def __init__(self, n):
        self.n = n

    def next(self, remaining):
        return min(self.n, remaining)

    def took(self, frames, seconds):
        pass


def datasets(path) -> tuple[dict[str, np.ndarray], dict]:
    out = {}
    with h5py.File(path, "r", locking=False) as f:
        f.visititems(
            lambda name, item: (
                out.__setitem__(name, item[()]) if isinstance(item, h5py.Dataset) else None
            )
        )
        attrs = {k: v for k, v in f.attrs.items() if k != "created"}
    return out, attrs


def assert_same_bytes(got_path, want_path):
    got, got_attrs = datasets(got_path)
    want, want_attrs = datasets(want_path)
    assert sorted(got) == sorted(want)
    for name in want:
        assert got[name].dtype == want[name].dtype and got[name].shape == want[name].shape, name
        assert got[name].tobytes() == want[name].tobytes(), name
    assert got_attrs == want_attrs


@pytest.mark.parametrize(
    "text", [SPECTRAL, FD, SDE], ids=["spectral-summary", "finite_differences-full", "sde-final"]
)
def test_a_chunk_gives_the_same_bytes_however_its_frames_are_cut(text, tmp_cwd, monkeypatch):
    Path("s.toml").write_text(text)
    config = sim.load_config("s.toml")
    assert sweep_module.framed(
        sweep_module.prepare(config).setup, sweep_module.prepare(config).plan.section.save
    )
    sim.sweep(config, "whole.h5")  # the default sizer: one frame, then the rest
    for n in (1, 2):
        monkeypatch.setattr(frames_module, "ChunkSizer", lambda limit, n=n: Fixed(n))
        sim.sweep(config, f"by{n}.h5")
        assert_same_bytes(f"by{n}.h5", "whole.h5")
    record = sim.read("whole.h5")
    assert np.all(record.status == 1)


def test_chunks_are_checkpointed_within_every_five_minutes_by_default(tmp_cwd, monkeypatch):
    written = []
    original = sweep_module._write_chunk_checkpoint
    monkeypatch.setattr(
        sweep_module,
        "_write_chunk_checkpoint",
        lambda *a: written.append((a[5], a[6])) or original(*a),
    )
    monkeypatch.setattr(frames_module, "ChunkSizer", lambda limit: Fixed(1))
    Path("s.toml").write_text(SPECTRAL)
    sim.sweep(sim.load_config("s.toml"), "quick.h5")
    assert written == []  # none due: each chunk took far less than five minutes
    monkeypatch.setattr(sweep_module, "CHECKPOINT_SECONDS", 0.0)
    sim.sweep(sim.load_config("s.toml"), "due.h5")
    # 2 chunks (3 runs, then 1) of 5 frames: a checkpoint after every call but the last of a chunk
    assert written == [(0, 1), (0, 2), (0, 3), (0, 4), (1, 1), (1, 2), (1, 3), (1, 4)]
    written.clear()
    sim.sweep(sim.load_config("s.toml", ["output.checkpoint_every=2"]), "every.h5")
    assert written == [(0, 2), (0, 4), (1, 2), (1, 4)]
    assert_same_bytes("due.h5", "quick.h5")
    assert sorted(p.name for p in tmp_cwd.iterdir()) == ["due.h5", "every.h5", "quick.h5", "s.toml"]


def sweep_process(*extra) -> subprocess.Popen:
    return subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from sim.cli import main; main()",
            "sweep",
            "md.toml",
            "-o",
            "out.h5",
            "--quiet",
            *extra,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def stop_after_checkpoint(
    process: subprocess.Popen, checkpoint: Path, sig: int, newer_than: float = 0.0
) -> None:
    deadline = time.monotonic() + 240
    try:
        while not (checkpoint.exists() and checkpoint.stat().st_mtime_ns > newer_than):
            assert process.poll() is None, process.stderr.read()
            assert time.monotonic() < deadline, "no checkpoint in time"
            time.sleep(0.01)
        process.send_signal(sig)
    finally:
        process.wait(timeout=120)


# (slow: three `sim` processes; by default a sweep stopped mid-chunk in this process is
# resumed below, and tests/sim/test_sweep_resume.py SIGKILLs a sweep process)
@pytest.mark.slow
def test_a_sweep_stopped_mid_chunk_resumes_to_the_bytes_of_an_uninterrupted_one(tmp_cwd, capsys):
    Path("md.toml").write_text(MD)
    checkpoint, partial = tmp_cwd / ".out.h5.checkpoint", tmp_cwd / ".out.h5.partial"

    # SIGTERM (what a scheduler sends): checkpointed at the next call, one line, 143.
    first = sweep_process()
    stop_after_checkpoint(first, checkpoint, signal.SIGTERM)
    err = first.stderr.read()
    assert first.returncode == 128 + signal.SIGTERM, err
    lines = err.strip().splitlines()
    assert (
        len(lines) == 1
        and "SIGTERM" in lines[0]
        and "resume with: sim sweep md.toml -o out.h5 --quiet --resume" in lines[0]
    ), err
    assert checkpoint.exists() and partial.exists() and not (tmp_cwd / "out.h5").exists()
    with h5py.File(checkpoint, "r") as f:
        stopped_at = int(f.attrs["frame"])
    with h5py.File(partial, "r") as f:
        assert np.all(
            f["status"][()] == 0
        )  # nothing of the chunk in the file yet: it is all in the checkpoint

    # Resumed, then SIGKILLed after a later checkpoint.
    second = sweep_process("--resume")
    stop_after_checkpoint(
        second, checkpoint, signal.SIGKILL, newer_than=checkpoint.stat().st_mtime_ns
    )
    assert second.returncode == -signal.SIGKILL
    with h5py.File(checkpoint, "r") as f:
        assert int(f.attrs["frame"]) > stopped_at

    # A damaged checkpoint is refused in one line, and nothing is touched.
    shutil.copy(checkpoint, "saved")
    checkpoint.write_bytes(b"not a checkpoint")

    # (the lock and a checkpoint's temporary file the kill left behind are cleared away)
    def files():
        return {
            p.name: p.read_bytes()
            for p in tmp_cwd.iterdir()
            if p.is_file() and not p.name.endswith((".tmp", ".lock"))
        }

    before = files()
    with pytest.raises(SystemExit) as info:
        main(["sweep", "md.toml", "-o", "out.h5", "--resume", "--quiet"])
    err = capsys.readouterr().err
    assert (
        info.value.code == 2 and len(err.strip().splitlines()) == 1 and ".out.h5.checkpoint" in err
    ), err
    assert files() == before
    shutil.move("saved", checkpoint)

    with pytest.raises(SystemExit) as info:
        main(["sweep", "md.toml", "-o", "out.h5", "--resume", "--quiet"])
        raise SystemExit(0)
    assert info.value.code == 0, capsys.readouterr().err
    sim.sweep(sim.load_config("md.toml"), "reference.h5")
    assert sorted(p.name for p in tmp_cwd.iterdir()) == ["md.toml", "out.h5", "reference.h5"]
    assert_same_bytes("out.h5", "reference.h5")
    assert np.all(sim.read("out.h5").status == 1)


# (4 devices by default: chunks of 3 runs, then 1, each padded to a run a device; framed
# chunks split over 2 devices: the finite-difference sweep of tests/sim/test_sweep_devices.py)
@pytest.mark.parametrize("devices", [pytest.param(2, marks=pytest.mark.slow), 4])
def test_a_framed_chunk_split_over_several_devices_gives_the_values_of_one(tmp_cwd, devices):
    Path("s.toml").write_text(SPECTRAL)
    env = {**os.environ, "XLA_FLAGS": host_devices(devices)}
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "from sim.cli import main; main()",
            "sweep",
            "s.toml",
            "-o",
            "two.h5",
            "--quiet",
            "--devices",
            str(devices),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    sim.sweep(sim.load_config("s.toml"), "one.h5")
    two, one = datasets("two.h5")[0], datasets("one.h5")[0]
    assert sorted(two) == sorted(one) and np.all(one["status"] == 1)
    for (
        name
    ) in one:  # (each device's batch has another size: XLA may round the last bits differently)
        np.testing.assert_allclose(two[name], one[name], rtol=1e-13, atol=0, err_msg=name)


def test_a_full_sweep_stopped_mid_chunk_keeps_its_frames_and_resumes(tmp_cwd, monkeypatch, capsys):
    # save = "full": the frames of the unfinished chunk so far travel in the checkpoint.
    from sim._interrupt import Interrupted

    Path("s.toml").write_text(FD)
    monkeypatch.setattr(frames_module, "ChunkSizer", lambda limit: Fixed(1))
    points = []

    def stop_at_the_third(save=None):
        points.append(save)
        if len(points) == 3:
            raise Interrupted(signal.SIGINT, save())

    original = sweep_module.safe_point
    monkeypatch.setattr(sweep_module, "safe_point", stop_at_the_third)
    with pytest.raises(SystemExit) as info:
        main(["sweep", "s.toml", "-o", "out.h5", "--quiet"])
    err = capsys.readouterr().err
    assert (
        info.value.code == 130
        and len(err.strip().splitlines()) == 1
        and "interrupted (SIGINT)" in err
    ), err
    with h5py.File(".out.h5.checkpoint", "r") as f:
        assert (int(f.attrs["chunk"]), int(f.attrs["frame"])) == (0, 3)
        assert f["frames/u"].shape == (3, 4, 17)  # 3 runs, frames 0 to 3, 17 points
    monkeypatch.setattr(sweep_module, "safe_point", original)

    def resume() -> tuple[int, str]:
        with pytest.raises(SystemExit) as info:
            main(["sweep", "s.toml", "-o", "out.h5", "--quiet", "--resume"])
            raise SystemExit(0)
        return info.value.code, capsys.readouterr().err

    # A checkpoint that claims another chunk or another frame than its runs hold is refused.
    shutil.copy(".out.h5.checkpoint", "saved")
    for key, value in (("chunk", 1), ("frame", 2)):
        with h5py.File(".out.h5.checkpoint", "r+") as f:
            f.attrs[key] = value
        code, err = resume()
        assert code == 2 and len(err.strip().splitlines()) == 1 and ".out.h5.checkpoint" in err, (
            key,
            err,
        )
        shutil.copy("saved", ".out.h5.checkpoint")
    Path("saved").unlink()
    code, err = resume()
    assert code == 0, err
    sim.sweep(sim.load_config("s.toml"), "reference.h5")
    assert_same_bytes("out.h5", "reference.h5")
    assert sorted(p.name for p in tmp_cwd.iterdir()) == ["out.h5", "reference.h5", "s.toml"]
    # --resume of a finished sweep: nothing to resume, the file untouched (not computed again).
    before = Path("out.h5").read_bytes()
    code, err = resume()
    assert code == 2 and "finished sweep" in err and len(err.strip().splitlines()) == 1, err
    assert Path("out.h5").read_bytes() == before
