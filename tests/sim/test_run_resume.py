"""Streamed runs: chunked output, checkpoints, `--resume` (exact), and what is refused."""

import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import h5py
import numpy as np
import pytest

import sim
from sim import _stream
from tests.helpers import Stop, cli, interrupt_after

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"
REPO = EXPERIMENTS.parent

# Small runs of several chunks each (at most `output.chunk` frames per chunk), with a
# checkpoint after every chunk.
CASES = {
    "ode": (
        "lorenz.toml",
        ["time.t1=4.0", "time.save=41", "output.chunk=8", "output.checkpoint_every=1"],
    ),
    "spectral": (
        "kuramoto_sivashinsky.toml",
        [
            "grid.points=[32]",
            "time.t1=6.0",
            "time.save=13",
            "output.chunk=3",
            "output.checkpoint_every=1",
        ],
    ),
    "fd": (
        "heat_dirichlet.toml",
        [
            "grid.points=[17]",
            "time.t1=0.1",
            "time.save=11",
            "output.chunk=3",
            "output.checkpoint_every=1",
        ],
    ),
    "md": (
        "lj_fluid.toml",
        [
            "system.cells=4",
            "params.cutoff=2.5",
            "time.steps=120",
            "time.save_every=10",
            "output.chunk=3",
            "output.checkpoint_every=1",
        ],
    ),
}


def config(case, *extra):
    name, sets = CASES[case]
    return sim.load_config(EXPERIMENTS / name, [*sets, *extra])


def contents(path):
    """Every dataset and attribute of an HDF5 file except the creation time."""
    out = {}
    with h5py.File(path, "r") as f:
        out["/"] = {k: v for k, v in f.attrs.items() if k != "created"}

        def visit(name, node):
            attrs = {k: np.asarray(v).tobytes() for k, v in node.attrs.items()}
            if isinstance(node, h5py.Dataset):
                value = node[()]
                out[name] = (
                    np.asarray(value).dtype.str,
                    np.asarray(value).shape,
                    np.asarray(value).tobytes(),
                    attrs,
                )
            else:
                out[name] = attrs

        f.visititems(visit)
    return out


def assert_identical(a, b):
    ca, cb = contents(a), contents(b)
    assert sorted(ca) == sorted(cb)
    for key in ca:
        assert ca[key] == cb[key], key


def digest(*paths):
    return [
        hashlib.sha256(Path(p).read_bytes()).hexdigest() if Path(p).exists() else None
        for p in paths
    ]


def record_chunks(monkeypatch):
    """Record the frames of every chunk that streamed runs advance, in order."""
    chunks = []
    original = _stream.ChunkSizer.took

    def took(self, frames, seconds):
        chunks.append(frames)
        return original(self, frames, seconds)

    monkeypatch.setattr(_stream.ChunkSizer, "took", took)
    return chunks


@pytest.mark.parametrize("case", sorted(CASES))
def test_interrupted_run_resumes_to_the_uninterrupted_file(case, tmp_cwd):
    cfg = config(case)
    whole = sim.run(cfg, output="whole.h5")
    assert whole.resumed_from is None
    assert not list(tmp_cwd.glob(".*"))  # no partial, checkpoint or temporary file left
    # The streamed file holds what the in-memory run returns.
    in_memory = sim.run(cfg)
    record = sim.read("whole.h5")
    if case == "md":
        np.testing.assert_array_equal(
            record["observables/total_energy/value"], in_memory.observables["total_energy"]
        )
    else:
        for name, values in in_memory.observables.items():
            np.testing.assert_array_equal(record.observables[name], values)

    with pytest.MonkeyPatch.context() as patch:
        written = interrupt_after(patch, 2)
        with pytest.raises(Stop):
            sim.run(cfg, output="out.h5")
    assert not Path("out.h5").exists()
    assert _stream.partial_path("out.h5").exists() and _stream.checkpoint_path("out.h5").exists()
    done = sim.run(cfg, output="out.h5", resume=True)
    assert done.resumed_from == written[-1] > 0
    assert_identical("whole.h5", "out.h5")
    assert sorted(p.name for p in tmp_cwd.iterdir()) == ["out.h5", "whole.h5"]


def kill_after_first_checkpoint(tmp_path, name, sets, delay=0.0):
    """Start `sim run` of experiments/NAME with `sets` in a process of its own and SIGKILL
    it `delay` seconds after its first checkpoint exists; returns the output path."""
    out = tmp_path / "out.h5"
    args = [
        sys.executable,
        "-m",
        "sim.cli",
        "run",
        str(EXPERIMENTS / name),
        "-o",
        str(out),
        "--quiet",
    ]
    for item in sets:
        args += ["--set", item]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        args, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    checkpoint = _stream.checkpoint_path(out)
    deadline = time.monotonic() + 300
    while not checkpoint.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    time.sleep(delay)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read().decode()
    assert not out.exists() and _stream.partial_path(out).exists() and checkpoint.exists()
    return out


def _kill_mid_run(case, tmp_path, sets):
    name, base = CASES[case]
    return kill_after_first_checkpoint(tmp_path, name, [*base, *sets])


@pytest.mark.parametrize(
    "case, sets",
    [
        # (MD resumes are checked by default in-process: test_resume_property.py, and below)
        pytest.param(
            "md",
            ["time.steps=1500", "time.save_every=10", "output.chunk=5"],
            marks=pytest.mark.slow,
        ),
        ("spectral", ["grid.points=[128]", "time.t1=300.0", "time.save=1201", "output.chunk=10"]),
    ],
)
def test_sigkilled_run_resumes_bitwise(case, sets, tmp_path):
    # A real SIGKILL of `sim run` as soon as its first checkpoint exists; resumed in this
    # process, the file equals an uninterrupted run's, dataset by dataset.
    out = _kill_mid_run(case, tmp_path, sets)
    cfg = config(case, *sets)
    done = sim.run(cfg, output=out, resume=True)
    assert done.resumed_from is not None and 0 < done.resumed_from < done.frames
    sim.run(cfg, output=tmp_path / "whole.h5")
    assert_identical(tmp_path / "whole.h5", out)


@pytest.fixture
def unfinished(tmp_cwd):
    """A PDE run stopped after its first checkpoint: (CLI arguments, output path)."""
    name, sets = CASES["spectral"]
    args = ["run", str(EXPERIMENTS / name), "-o", "out.h5", "--quiet"] + [
        x for s in sets for x in ("--set", s)
    ]
    with pytest.MonkeyPatch.context() as patch:
        interrupt_after(patch, 1)
        with pytest.raises(Stop):
            sim.run(config("spectral"), output="out.h5")
    return args, Path("out.h5")


def _files(path):
    return digest(path, _stream.partial_path(path), _stream.checkpoint_path(path))


def test_resume_refusals_leave_the_files_untouched(unfinished, capsys):
    args, out = unfinished
    before = _files(out)
    cases = {
        "another config": (
            args + ["--resume", "--set", "params.hyper_diffusivity=2.0"],
            "different config",
        ),
        "no --resume": (args, "pass --resume"),
    }
    for what, (argv, expected) in cases.items():
        code, err = cli(argv, capsys)
        assert code == 2, (what, err)
        assert len(err.strip().splitlines()) == 1 and expected in err and "Traceback" not in err, (
            what,
            err,
        )
        assert _files(out) == before, what

    checkpoint = _stream.checkpoint_path(out)
    checkpoint.write_bytes(checkpoint.read_bytes()[:200])  # corrupt
    damaged = _files(out)
    code, err = cli(args + ["--resume"], capsys)
    assert (
        code == 2
        and "checkpoint" in err
        and "damaged" in err
        and len(err.strip().splitlines()) == 1
    ), err
    assert _files(out) == damaged

    # An unfinished run without a checkpoint (killed before its first one) holds nothing
    # to continue from: with or without --resume the run starts afresh and completes (a
    # job script that always passes --resume is never stuck on it).
    checkpoint.unlink()
    for extra in (["--resume"], []):
        code, err = cli(args + extra, capsys)
        assert code == 0, err
        assert out.exists() and not _stream.partial_path(out).exists() and not checkpoint.exists()
        with h5py.File(out) as f:
            assert f.attrs["format"] == "simjax.run"
            assert all(
                np.all(np.isfinite(f[f"observables/{name}"][()])) for name in f["observables"]
            )
        out.rename(_stream.partial_path(out))  # as if killed before its first checkpoint


def test_resume_of_a_finished_or_missing_run_is_refused(tmp_cwd, capsys):
    name, sets = CASES["ode"]
    args = ["run", str(EXPERIMENTS / name), "-o", "out.h5", "--quiet"] + [
        x for s in sets for x in ("--set", s)
    ]
    # The library refuses to resume what is not there; the command line starts the run
    # afresh instead (a job script may always pass --resume).
    with pytest.raises(sim.InputError, match="no unfinished run"):
        sim.run(config("ode"), output="out.h5", resume=True)
    assert list(tmp_cwd.iterdir()) == []
    code, err = cli(args + ["--resume"], capsys)
    assert code == 0, err
    assert sorted(p.name for p in tmp_cwd.iterdir()) == ["out.h5"]
    before = digest("out.h5")
    code, err = cli(args + ["--resume"], capsys)
    assert code == 2 and "finished run" in err and len(err.strip().splitlines()) == 1, err
    assert digest("out.h5") == before


def test_full_disk_mid_run_keeps_the_last_checkpoint(tmp_cwd, capsys):
    # Writing the third chunk fails as on a full disk: a one-line error (exit 1), the
    # checkpoint written after the second chunk intact, and --resume completes the run.
    cfg = config("spectral")
    sim.run(cfg, output="whole.h5")
    calls = []
    original = sim._result.RunSink.write

    def write(self, f, k, rows):
        calls.append(k)
        if len(calls) == 3:
            # as HDF5 words it: its text spans lines
            raise OSError(
                28,
                "Unable to synchronously write (file write failed: time = now\n, errno = 28, error "
                "message = 'No space left on device')",
            )
        return original(self, f, k, rows)

    name, sets = CASES["spectral"]
    args = ["run", str(EXPERIMENTS / name), "-o", "out.h5", "--quiet"] + [
        x for s in sets for x in ("--set", s)
    ]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sim._result.RunSink, "write", write)
        chunks = record_chunks(patch)
        code, err = cli(args, capsys)
    assert code == 1 and "No space left on device" in err and "--resume" in err, err
    assert len(err.strip().splitlines()) == 1
    checkpoint = _stream.checkpoint_path("out.h5")
    with h5py.File(checkpoint, "r") as f:
        assert int(f.attrs["frame"]) == sum(chunks[:2])  # after the first two chunks
    code, err = cli(args + ["--resume"], capsys)
    assert code == 0, err
    assert_identical("whole.h5", "out.h5")


def test_checkpoint_every_sets_the_checkpoint_frames(tmp_cwd):
    # 30 frames in chunks of at most 3, a checkpoint every 7: at the first chunk end at
    # or after 7 frames past the previous checkpoint.
    cfg = config("fd", "time.save=31", "time.t1=0.3", "output.checkpoint_every=7")
    with pytest.MonkeyPatch.context() as patch:
        chunks = record_chunks(patch)
        written = interrupt_after(patch, 3)
        with pytest.raises(Stop):
            sim.run(cfg, output="out.h5")
    assert max(chunks) <= 3
    ends = np.cumsum(chunks).tolist()
    expected, last = [], 0
    for end in ends:
        if end - last >= 7:
            expected.append(end)
            last = end
    assert written == expected[:3] and len(written) == 3
