"""PEtab multistart fits keep a checkpoint (`inference._lbfgsb.StartLog`): SIGINT or
SIGTERM stops `sim fit PROBLEM.yaml --starts N` with one line, the exit code of the
signal and no output, and `--resume` ends with the per-start objectives and estimates of
an uninterrupted fit, bit for bit; a checkpoint of other work, or a damaged one, is
refused with one line and left as it was, and a second writer of the output is refused.

On the decay problem of experiments/data/make_decay_petab.py, solved with Tsit5 (as in
test_multistart.py: the default Kvaerno5 takes three times as long to compile): the
interrupted `sim fit` is a process of its own, started by a script that sets that solver
and makes each checkpoint that holds a finished start slow to write (a slow disk), so
that the signal, sent once a start has finished, arrives while other starts still run.
The fits in this process share one compiled batch: the problem is loaded once, and
`sim fit` is handed it.
"""

import contextlib
import hashlib
import os
import shlex
import signal
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest

import inference
from inference import _checkpoint, _lbfgsb, _petab, _petab_fit
from inference._petab import load_petab
from inference._petab_fit import fit_petab
from tests.helpers import cli

from .test_multistart import TSIT5, decay_problem

REPO = Path(__file__).resolve().parents[2]
STARTS = 5

# `sim fit` with the test's solver, and 0.4 s to write each checkpoint that holds a
# finished start (state[4]: which starts are done).
RUNNER = """
import sys, time
from inference import _checkpoint, _petab
from solvers import OdeSolver

TSIT5 = OdeSolver(method="tsit5", rtol=1e-10, atol=1e-12, max_steps=100_000, throw=False)
load = _petab.load_petab
_petab.load_petab = lambda path, solver=None, allow_outside=False: load(path, solver or TSIT5, allow_outside=allow_outside)
write = _checkpoint.Checkpointer.write


def slow(self, start, iteration, state, *args, **kwargs):
    write(self, start, iteration, state, *args, **kwargs)
    if state[4].any():
        time.sleep(0.4)


_checkpoint.Checkpointer.write = slow
from sim.cli import main

main(sys.argv[1:])
"""


@contextlib.contextmanager
def counting(problem):
    """The rounds of batched evaluations of `problem`'s fits within the block (a list
    that grows by one per round)."""
    rounds = []
    original, target = _lbfgsb._batched, problem.value_and_grad(with_priors=True)

    def batched(fn):
        compiled = original(fn)
        if fn is not target:  # (the objectives at the ends)
            return compiled
        return lambda x: (rounds.append(1), compiled(x))[1]

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_lbfgsb, "_batched", batched)
        yield rounds


@pytest.fixture(scope="module")
def decay(tmp_path_factory):
    """The decay problem (loaded once, with Tsit5), its uninterrupted fit and the rounds
    of evaluations that took."""
    problem = load_petab(decay_problem(tmp_path_factory.mktemp("decay")), TSIT5)
    with counting(problem) as rounds:
        whole = fit_petab(problem, starts=STARTS)
    return problem, whole, len(rounds)


@pytest.fixture
def work(decay, tmp_cwd, monkeypatch):
    """An empty working folder, the problem and the arguments of `sim fit` into out.h5
    there; `sim fit` in this process is handed the module's problem (and so its
    compiled batch) for the problem's file."""
    problem, whole, rounds = decay
    handed = lambda path, solver=None, allow_outside=False: (
        problem
        if Path(path) == problem.path
        else load_petab(path, solver, allow_outside=allow_outside)
    )  # noqa: E731
    # (`sim fit` takes the package's name, which keeps what it first found in _petab:
    # both are replaced)
    monkeypatch.setattr(_petab, "load_petab", handed)
    monkeypatch.setattr(inference, "load_petab", handed)
    return (
        tmp_cwd,
        problem,
        ["fit", str(problem.path), "--starts", str(STARTS), "-o", "out.h5"],
        (whole, rounds),
    )


def starts_of(path) -> dict[str, bytes]:
    """Every start's objective and estimates, and the best estimate, as bytes."""
    with h5py.File(path, "r") as f:
        out = {
            "objective": f["starts/objective"][()].tobytes(),
            "estimate": b"".join(f["estimate"][n][()].tobytes() for n in sorted(f["estimate"])),
        }
        out.update(
            {
                f"starts/{n}": f["starts/estimate"][n][()].tobytes()
                for n in sorted(f["starts/estimate"])
            }
        )
    return out


def saved_starts(problem, folder: Path) -> _lbfgsb.StartLog:
    """The starts the checkpoint of out.h5 holds (read as a resume reads them)."""
    text = _petab_fit._fit_description(problem, STARTS, 0, 1000)
    ck = _checkpoint.Checkpointer(
        _checkpoint.checkpoint_path(folder / "out.h5"),
        _checkpoint.fingerprint(text),
        config=text,
        resume=True,
    )
    return _lbfgsb.StartLog(STARTS, len(problem.estimated), ck)


# With -m slow (a fit process signalled, then resumed: 12 s): by default a `sim fit`
# process is signalled and resumed in tests/sim/test_signals.py and SIGKILLed in
# tests/inference/test_fit_resume.py, and the PEtab checkpoint's refusals run below.
@pytest.mark.slow
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_an_interrupted_petab_fit_resumes_to_the_same_starts(work, signum, capsys):
    folder, problem, args, (whole, rounds) = work
    proc = subprocess.Popen(
        [sys.executable, "-c", RUNNER, *args, "--checkpoint-every", "1"],
        cwd=folder,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines = []
    for line in proc.stderr:  # "start k of 5 done: ..." as each start ends
        lines.append(line)
        if line.startswith("start "):
            break
    assert proc.poll() is None, "".join(lines) + proc.stderr.read()
    proc.send_signal(signum)
    lines += proc.stderr.readlines()
    code = proc.wait(timeout=120)
    err = "".join(lines)
    assert code == 128 + signum, err
    stops = [line for line in lines if line.startswith("interrupted")]
    assert (
        len(stops) == 1
        and f"({signum.name})" in stops[0]
        and "the fit so far is checkpointed in .out.h5.checkpoint" in stops[0]
    ), err
    assert all(line.startswith(("start ", "interrupted")) for line in lines), err
    assert sorted(p.name for p in folder.iterdir()) == [
        ".out.h5.checkpoint"
    ]  # no output, nothing partial, no lock
    saved = saved_starts(problem, folder)
    assert 1 <= saved.done.sum() < STARTS, (
        saved.done
    )  # stopped with starts finished and starts running
    assert all(len(saved.log[k]) > 0 for k in np.flatnonzero(~saved.done))
    resume = shlex.split(stops[0].split("resume with: ", 1)[1])
    assert resume == ["sim", *args, "--checkpoint-every", "1", "--resume"], resume
    with counting(problem) as resumed:
        code, err = cli(resume[1:], capsys)
    assert code == 0, err
    # The resumed fit evaluated only the rounds the checkpoint had not (its finished
    # starts kept, the others' evaluations replayed), and ended as the whole fit did.
    assert saved.rounds > 0 and len(resumed) + saved.rounds == rounds, (
        len(resumed),
        saved.rounds,
        rounds,
    )
    assert sorted(p.name for p in folder.iterdir()) == ["out.h5"]
    whole.save(folder / "whole.h5")
    assert starts_of(folder / "out.h5") == starts_of(folder / "whole.h5")


def digest(path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def refused(argv, capsys, *names) -> None:
    code, err = cli(argv, capsys)
    lines = err.strip().splitlines()
    assert (
        code == 2
        and len(lines) == 1
        and all(n in lines[0] for n in names)
        and "Traceback" not in err
    ), (code, err)


def test_a_checkpoint_of_other_work_is_refused_and_left_as_it_was(work, capsys, monkeypatch):
    folder, problem, args, _ = work

    class Stop(Exception):
        pass

    write = _checkpoint.Checkpointer.write
    written = []

    def stop(self, *args, **kwargs):  # a crash once some starts have finished
        write(self, *args, **kwargs)
        written.append(int(args[2][4].sum()))
        if written[-1] >= 2:
            raise Stop()

    with monkeypatch.context() as patch:
        patch.setattr(_checkpoint.Checkpointer, "write", stop)
        with pytest.raises(Stop):
            fit_petab(problem, starts=STARTS, output="out.h5", checkpoint_every=1)
    checkpoint = folder / ".out.h5.checkpoint"
    before = digest(checkpoint)

    def unchanged():
        assert digest(checkpoint) == before and sorted(p.name for p in folder.iterdir()) == [
            ".out.h5.checkpoint"
        ]

    refused(args, capsys, "an unfinished optimisation of this output is here; pass --resume")
    unchanged()
    # Another number of starts, another seed (in Python), other problem files.
    refused(
        [*args[:3], "4", *args[4:], "--resume"],
        capsys,
        "another optimisation",
        "(starts: stored 5, now 4)",
    )
    unchanged()
    with pytest.raises(_petab_fit.InputError, match=r"\(seed: stored 0, now 1\)"):
        fit_petab(problem, starts=STARTS, seed=1, output="out.h5", resume=True)
    unchanged()
    measurements = problem.path.parent / "measurements.tsv"
    original = measurements.read_text()
    measurements.write_text(original.replace("\t0.0\t", "\t0.1\t", 1))
    try:
        refused(args + ["--resume"], capsys, "another optimisation", "(problem_files: stored '")
    finally:
        measurements.write_text(original)
    unchanged()
    # Edited attributes, an edited state, a damaged file: each refused, the file as edited.
    edits = [
        (
            lambda f: f.attrs.__setitem__(
                "config", f.attrs["config"].replace("starts = 5", "starts = 6")
            ),
            "(starts: stored 6, now 5)",
        ),
        (
            lambda f: f.attrs.__setitem__("identity", "0" * 64),
            "another optimisation (its data or arguments differ)",
        ),
        (
            lambda f: f.attrs.__setitem__("format", "simjax.run"),
            "is not a simjax optimisation checkpoint",
        ),
        (lambda f: f["state/0003"].__setitem__(0, 1000), "do not add up"),
        (lambda f: f.__delitem__("state/0002"), "damaged"),
    ]
    pristine = checkpoint.read_bytes()
    for edit, message in edits:
        with h5py.File(checkpoint, "r+") as f:
            edit(f)
        before = digest(checkpoint)
        refused(args + ["--resume"], capsys, ".out.h5.checkpoint", message)
        unchanged()
        checkpoint.write_bytes(pristine)
    checkpoint.write_bytes(pristine[:200])
    before = digest(checkpoint)
    refused(args + ["--resume"], capsys, "damaged")
    unchanged()
    # --resume with nothing there starts afresh; of a finished fit it is refused.
    checkpoint.unlink()
    code, err = cli(args + ["--resume"], capsys)
    assert code == 0 and "no unfinished fit of out.h5; starting it" in err, err
    refused(args + ["--resume"], capsys, "no checkpoint to resume from")


def test_a_second_writer_of_a_petab_fit_is_refused(work, capsys):
    folder, _, args, _ = work
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys\nfrom sim._lock import exclusive\nwith exclusive('out.h5'):\n    "
            "print('holding', flush=True)\n    sys.stdin.read()\n",
        ],
        cwd=folder,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout.readline().strip() == "holding"
        for extra in ([], ["--resume"]):
            refused(
                args + extra,
                capsys,
                "out.h5",
                "another writer has this output open",
                f"process {holder.pid}",
            )
        assert sorted(p.name for p in folder.iterdir()) == [".out.h5.lock"]
    finally:
        holder.communicate("", timeout=60)
    code, err = cli(args + ["--quiet"], capsys)  # the lock released: the fit runs
    assert code == 0, err


# Slow: the workers load the problem and compile their blocks' batch (25-50 s, as the
# Dask tests of test_multistart.py).
@pytest.mark.slow
def test_a_petab_fit_on_a_cluster_resumes_after_its_finished_blocks(tmp_path):
    # Four starts in two blocks of two on two workers, stopped once the first block is
    # checkpointed, resumed on the cluster: the second block is computed as it was cut,
    # and the fit ends as the uninterrupted one, bit for bit.
    from distributed import LocalCluster

    class Stop(Exception):
        pass

    problem = load_petab(decay_problem(tmp_path / "decay"), TSIT5)
    with LocalCluster(
        n_workers=2, threads_per_worker=1, processes=False, dashboard_address=None
    ) as cluster:
        whole = fit_petab(
            problem, starts=4, scheduler=cluster.scheduler_address, output=tmp_path / "whole.h5"
        )
        write, written = _checkpoint.Checkpointer.write, []

        def stop(self, *args, **kwargs):
            write(self, *args, **kwargs)
            written.append(args[2][4].copy())
            raise Stop()

        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(_checkpoint.Checkpointer, "write", stop)
            with pytest.raises(Stop):
                fit_petab(
                    problem,
                    starts=4,
                    scheduler=cluster.scheduler_address,
                    output=tmp_path / "out.h5",
                )
        assert [list(done) for done in written] == [[True, True, False, False]]
        reported = []
        resumed = fit_petab(
            problem,
            starts=4,
            scheduler=cluster.scheduler_address,
            output=tmp_path / "out.h5",
            resume=True,
            on_start=lambda k, f: reported.append(k),
        )
    assert reported == [1, 2, 3, 4]
    assert resumed.starts_objective.tobytes() == whole.starts_objective.tobytes()
    for name, values in whole.starts_estimate.items():
        assert resumed.starts_estimate[name].tobytes() == values.tobytes()
    assert starts_of(tmp_path / "out.h5") == starts_of(tmp_path / "whole.h5")
    assert not _checkpoint.checkpoint_path(tmp_path / "out.h5").exists()


def test_a_resumed_start_is_handed_its_stored_evaluations_then_live_ones():
    # Replay: the stored (value, gradient) of each point the start asks for again, without
    # an evaluation; a point past the log, or one that differs from the stored one, is
    # evaluated live and logged (the rest of the log dropped).
    starts = _lbfgsb.StartLog(2, 2)
    x0, x1, x2 = np.array([0.1, 0.2]), np.array([0.3, 0.4]), np.array([0.5, 0.6])
    stored = [(x0, 1.5, np.array([0.25, -0.5])), (x1, 0.75, np.array([0.125, 0.0625]))]
    calls = []

    def ask(x):
        calls.append(np.array(x))
        return 9.0, np.array([7.0, 8.0])

    starts.log[1] = list(stored)
    ask_1 = starts.asker(1, ask)
    for x, f, g in stored:
        value, gradient = ask_1(x.copy())
        assert value == f and np.array_equal(gradient, g) and gradient is not g
    assert calls == []
    value, gradient = ask_1(x2)
    assert value == 9.0 and np.array_equal(gradient, [7.0, 8.0]) and len(calls) == 1
    assert len(starts.log[1]) == 3 and np.array_equal(starts.log[1][2][0], x2)

    starts.log[0] = list(stored)
    ask_0 = starts.asker(0, ask)
    assert ask_0(x0)[0] == 1.5
    assert ask_0(x2)[0] == 9.0 and len(calls) == 2  # (not x1: live from here)
    assert [float(f) for _, f, _ in starts.log[0]] == [1.5, 9.0]
