"""Chunk invariance of streamed runs: a run stopped anywhere and resumed with another
chunk size or checkpoint interval ends with the file of an uninterrupted run, bit for
bit, for every engine (adaptive and fixed-step ODE, spectral and finite-difference PDE,
MD); what changes the computation is refused; checkpoints come by time too; interrupts,
blow-ups and the lock keep what they should."""

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import equinox as eqx
import h5py
import jax.numpy as jnp
import numpy as np
import pytest

import sim
from sim import _interrupt, _lock, _stream, _unfinished
from sim._run import plan_run
from solvers import OdeLoop, OdeSolver
from tests.helpers import signal_after_chunks

from .test_run_resume import (
    EXPERIMENTS,
    REPO,
    assert_identical,
    cli,
    contents,
    digest,
    kill_after_first_checkpoint,
)

# Small runs (a few seconds each, compilation included).
FAMILIES = {
    "ode": ("lorenz.toml", ["time.t1=4.0", "time.save=41"]),  # dopri8, adaptive
    "ode_fixed": (
        "lorenz.toml",
        ["time.t1=2.0", "time.save=41", "time.dt=0.01", "solver.method=tsit5"],
    ),
    "spectral": ("kuramoto_sivashinsky.toml", ["grid.points=[32]", "time.t1=6.0", "time.save=25"]),
    # kvaerno5, adaptive; several save times per step (filled from its interpolation)
    "fd": ("heat_dirichlet.toml", ["grid.points=[17]", "time.t1=0.5", "time.save=41"]),
    "md": (
        "lj_fluid.toml",
        ["system.cells=4", "params.cutoff=2.5", "time.steps=200", "time.save_every=10"],
    ),
}
CHUNKS = (3, 8)  # `[output] chunk` values the cases draw from (each one compiles once)


def family_config(family, *extra):
    name, sets = FAMILIES[family]
    return sim.load_config(EXPERIMENTS / name, [*sets, *extra])


class Stop(BaseException):
    """Stands for a kill (SIGKILL) right after a chunk was written."""


def random_chunks(monkeypatch, rng):
    """Chunks of random lengths (1 to the engine's limit) instead of the timed ones."""
    monkeypatch.setattr(
        _stream.ChunkSizer,
        "next",
        lambda self, remaining: rng.randint(1, min(self.limit, remaining)),
    )


def stop_after_chunk(monkeypatch, m):
    """Stop the run once its m-th chunk is written (before its checkpoint, if any)."""
    count = []
    original = _stream.ChunkSizer.took

    def took(self, frames, seconds):
        original(self, frames, seconds)
        count.append(frames)
        if len(count) == m:
            raise Stop()

    monkeypatch.setattr(_stream.ChunkSizer, "took", took)
    return count


def stop_at_frame(monkeypatch, frame):
    """Stop the run after the first chunk that ends at or beyond `frame` once a
    checkpoint exists (as a kill at a random moment after the first checkpoint)."""
    done = []
    written = []
    original_took, original_write = _stream.ChunkSizer.took, _stream.write_checkpoint

    def took(self, frames, seconds):
        original_took(self, frames, seconds)
        done.append(frames)
        if sum(done) >= frame and written:
            raise Stop()

    def write(path, **kwargs):
        original_write(path, **kwargs)
        written.append(kwargs["frame"])

    monkeypatch.setattr(_stream.ChunkSizer, "took", took)
    monkeypatch.setattr(_stream, "write_checkpoint", write)


def identical(a, b, what=""):
    """Every dataset and attribute of two run files equal, bit for bit, but the creation
    time and the `[output]` section of the recorded config (the file records the chunk
    and checkpoint settings the run was started with)."""
    ca, cb = contents(a), contents(b)
    config_a, config_b = ca["/"].pop("config"), cb["/"].pop("config")
    assert _unfinished._comparable(config_a, _unfinished.RUN_BOUNDS) == _unfinished._comparable(
        config_b, _unfinished.RUN_BOUNDS
    ), what
    assert sorted(ca) == sorted(cb), what
    for key in ca:
        assert ca[key] == cb[key], (what, key)


def checkpoint_frame(path):
    with h5py.File(_stream.checkpoint_path(path), "r") as f:
        return int(f.attrs["frame"])


def kill_and_resume(family, tmp_path, rng, case, chunks=CHUNKS):
    """One random case: a run with a drawn chunk limit, checkpoint interval and random
    chunk lengths, stopped at a drawn frame after its first checkpoint, resumed with
    another chunk limit, interval and chunk lengths. Returns the file and the case
    (None when the run had no checkpoint before it ended)."""
    out = tmp_path / f"case{case}.h5"
    first = [
        f"output.chunk={rng.choice(chunks)}",
        rng.choice(
            [
                "output.checkpoint_every=1",
                "output.checkpoint_every=3",
                "output.checkpoint_seconds=1e-9",
            ]
        ),
    ]
    then = [
        f"output.chunk={rng.choice(chunks)}",
        rng.choice(
            [
                "output.checkpoint_every=1",
                "output.checkpoint_seconds=1000.0",
                "output.checkpoint_every=2",
            ]
        ),
    ]
    cfg = family_config(family, *first)
    frames = len(plan_run(cfg).engine.times) - 1
    stop = rng.randint(1, frames - 1)
    with pytest.MonkeyPatch.context() as patch:
        random_chunks(patch, random.Random(rng.random()))
        stop_at_frame(patch, stop)
        try:
            sim.run(cfg, output=out)
        except Stop:
            pass
        else:  # one chunk held the whole run: there was never a checkpoint to stop after
            return None
    frame = checkpoint_frame(out)
    with pytest.MonkeyPatch.context() as patch:
        random_chunks(patch, random.Random(rng.random()))
        done = sim.run(family_config(family, *then), output=out, resume=True)
    assert done.resumed_from == frame
    return out, (first, stop, then, frame)


@pytest.fixture(scope="module")
def references(tmp_path_factory):
    """Uninterrupted runs of every family (chunks of at most 8 frames, timed lengths),
    computed once."""
    folder = tmp_path_factory.mktemp("references")
    cache = {}

    def get(family):
        if family not in cache:
            path = folder / f"{family}.h5"
            sim.run(family_config(family, "output.chunk=8"), output=path)
            cache[family] = path
        return cache[family]

    return get


@pytest.mark.parametrize(
    "family, cases", [("ode", 2), ("ode_fixed", 1), ("spectral", 2), ("md", 1)]
)
def test_stopped_anywhere_resumed_with_other_chunks_is_bit_identical(
    family, cases, references, tmp_path
):
    whole = references(family)
    rng = random.Random(f"{family}-1")
    for case in range(cases):
        outcome = kill_and_resume(family, tmp_path, rng, case)
        assert outcome is not None
        out, what = outcome
        identical(whole, out, what)
        assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == [], what


@pytest.mark.slow
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_stopped_anywhere_resumed_many_cases(family, references, tmp_path):
    whole = references(family)
    rng = random.Random(f"{family}-slow")
    for case in range(6):
        outcome = kill_and_resume(family, tmp_path, rng, case, chunks=(1, 2, 3, 8, 100))
        if outcome is not None:
            identical(whole, *outcome)


@pytest.mark.slow
def test_md_neighbour_list_growth_does_not_depend_on_chunks():
    # A list sized exactly for the start overflows as the hot fluid moves (after the
    # first frame): it grows at the same frame, and the run has the same bits, however
    # the run is chunked.
    import dataclasses

    from solvers._neighbours import _max_count

    cfg = family_config(
        "md",
        "time.steps=600",
        "time.save_every=30",
        "system.temperature=2.0",
        "solver.temperature=2.0",
        "output.chunk=20",
    )

    def run(chunks):
        engine = plan_run(cfg).engine
        nl = engine.problem.neighbour_list
        tight = dataclasses.replace(
            nl, capacity=_max_count(nl, engine.system.position, engine.system.space.box)
        )
        engine.problem = dataclasses.replace(engine.problem, neighbour_list=tight)
        state, k, pieces, capacities = engine.start(), 0, [], []
        for n in chunks:
            state, rows = engine.advance(state, k, n)
            pieces.append(rows)
            capacities.append(engine.problem.neighbour_list.capacity)
            k += n
        rows = {name: np.concatenate([p[name] for p in pieces]) for name in pieces[0]}
        return rows, engine.stats(state), tight.capacity, capacities

    whole, stats, tight, _ = run([20])
    assert stats["capacity"] > tight
    for chunks in ([1] * 20, [3, 7, 1, 9]):
        rows, other, _, capacities = run(chunks)
        assert other == stats
        if chunks[0] == 1:
            assert capacities[0] == tight < capacities[-1]  # grown mid-run
        for name in whole:
            assert np.array_equal(rows[name], whole[name]), (chunks, name)


def test_issue_repro_resume_with_another_chunk(tmp_cwd):
    # The reported case: stopped after its first checkpoint (chunks of 8), resumed with
    # chunks of 5: the frames were shifted and NaN; now the file equals the whole run's.
    sets = ["time.t1=4", "time.save=41", "output.chunk=8", "output.checkpoint_every=8"]
    cfg = sim.load_config(EXPERIMENTS / "lorenz.toml", sets)
    sim.run(cfg, output="whole.h5")
    written = []
    original = _stream.write_checkpoint

    def write(path, **kwargs):
        original(path, **kwargs)
        written.append(kwargs["frame"])
        raise Stop()

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_stream, "write_checkpoint", write)
        with pytest.raises(Stop):
            sim.run(cfg, output="out.h5")
    assert written and written[0] % 5  # a frame that is no boundary of chunks of 5
    resumed = sim.load_config(EXPERIMENTS / "lorenz.toml", [*sets[:2], "output.chunk=5"])
    done = sim.run(resumed, output="out.h5", resume=True)
    assert done.resumed_from == written[0]
    assert_identical("whole.h5", "out.h5")
    assert np.all(np.isfinite(sim.read("out.h5").observables["x"]))


def test_changes_of_the_computation_are_refused(tmp_cwd, capsys):
    name, sets = FAMILIES["ode"]
    base = ["run", str(EXPERIMENTS / name), "-o", "out.h5", "--quiet"] + [
        x for s in sets for x in ("--set", s)
    ]
    with pytest.MonkeyPatch.context() as patch:
        stop_after_chunk(patch, 3)
        with pytest.raises(Stop):
            sim.run(
                family_config("ode", "output.checkpoint_every=1", "output.chunk=3"), output="out.h5"
            )
    files = [Path("out.h5"), _stream.partial_path("out.h5"), _stream.checkpoint_path("out.h5")]
    before = digest(*files)
    for change in (
        "time.save=21",
        "solver.rtol=1e-9",
        "params.rho=27.0",
        "initial.x=1.5",
        "solver.method=tsit5",
    ):
        code, err = cli([*base, "--resume", "--set", change], capsys)
        assert code == 2 and "different config" in err and len(err.strip().splitlines()) == 1, (
            change,
            err,
        )
        assert digest(*files) == before, change
        with pytest.raises(sim.InputError, match="different config"):
            sim.run(family_config("ode", change), output="out.h5", resume=True)
        assert digest(*files) == before, change
    # What does not change the numbers is accepted.
    code, err = cli(
        [*base, "--resume", "--set", "output.chunk=7", "--set", "output.checkpoint_seconds=0.5"],
        capsys,
    )
    assert code == 0, err


def test_output_and_checks_are_not_part_of_the_comparison():
    # the one rule of sim._unfinished: where and how often results are written never
    # count; the bounds that can only stop a run count for sweeps (they decide each run's
    # recorded status) but not for runs
    a = (
        '[model]\nname = "heat"\n[output]\nchunk = 3\n[checks]\nmax_growth = '
        "10.0\n[fit]\ncheckpoint_every = 2\n"
    )
    b = (
        '[model]\nname = "heat"\n[output]\nchunk = 5\ncheckpoint_seconds = '
        "2.0\n[checks]\nmax_growth = 1e6\n[fit]\ncheckpoint_every = 9\n"
    )
    assert _unfinished.config_difference(a, b, _unfinished.RUN_BOUNDS) == ""
    assert _unfinished.config_difference(a, b) == "checks.max_growth: stored 10.0, now 1000000.0"
    assert (
        _unfinished.config_difference(a, b.replace("max_growth = 1e6", "max_growth = 10.0")) == ""
    )
    assert (
        _unfinished.config_difference(a, b.replace('"heat"', '"burgers"'), _unfinished.RUN_BOUNDS)
        == "model.name: stored 'heat', now 'burgers'"
    )
    assert (
        _unfinished.config_difference(a, a + "[params]\nrate = 2.0\n")
        == "params: stored no value, now {'rate': 2.0}"
    )


# ----------------------------------------------------------------------------- the ODE loop


@eqx.filter_jit
def _loop_init(model, params, ts, solver):
    return OdeLoop.from_ode_solver(solver, model.vector_field, ts, params).init(
        model.initial_state(None)
    )


@eqx.filter_jit
def _loop_advance(model, params, ts, solver, state, n, capacity):
    return OdeLoop.from_ode_solver(solver, model.vector_field, ts, params).advance(
        state, n, capacity
    )


def _loop_run(model, params, ts, solver, chunks, capacity):
    state = _loop_init(model, params, ts, solver)
    pieces = []
    for n in chunks:
        state, saved = _loop_advance(
            model, params, ts, solver, state, jnp.asarray(n, jnp.int32), capacity
        )
        pieces.append(np.asarray(saved)[:n])
    return state, np.concatenate(pieces)


@pytest.mark.parametrize(
    "method, name, ts, capacities",
    [
        ("tsit5", "lorenz", np.linspace(0.0, 3.0, 401), (401, 37)),  # more save times than steps
        ("dopri5", "lorenz", np.linspace(0.0, 3.0, 31), (31,)),
        ("kvaerno5", "robertson", np.array([0.0, 0.04, 0.4, 4.0, 40.0, 400.0]), (6,)),
    ],
)
def test_ode_loop_matches_diffeqsolve_and_ignores_chunks(method, name, ts, capacities):
    model = sim.get_model(name)
    params = model.default_params()
    ts = jnp.asarray(ts)
    solver = OdeSolver(method=method, rtol=1e-8, atol=1e-10, throw=False)
    reference = solver.solve(model.vector_field, ts, model.initial_state(None), params)
    T = len(ts)
    state, ys = _loop_run(model, params, ts, solver, [T], T)
    assert int(state.result._value) == 0 and int(state.frame) == T
    # The steps of diffeqsolve, and its values (to rounding).
    assert int(state.num_steps) == int(reference.num_steps)
    assert int(state.num_accepted_steps) == int(reference.num_accepted_steps)
    np.testing.assert_allclose(ys, np.asarray(reference.ys), rtol=1e-12, atol=1e-300)
    # Any chunking, any buffer size (another compiled program): the same bits.
    rng = random.Random(method)
    for capacity in capacities:
        chunks, left = [], T
        while left:
            chunks.append(min(left, rng.randint(1, min(capacity, max(1, T // 3)))))
            left -= chunks[-1]
        other, ys2 = _loop_run(model, params, ts, solver, chunks, capacity)
        assert np.array_equal(ys, ys2), (chunks, capacity)
        assert int(other.num_steps) == int(state.num_steps)


# Heun fills the save times from its dense output; Dopri8's constant steps end on them
# (solvers._grid_steps), 3 save times off the grid adding 3 steps to its 100.
@pytest.mark.parametrize(
    "method, ts, steps",
    [
        ("heun", np.linspace(0.0, 1.0, 11), 100),
        ("dopri8", np.array([0.0, 0.037, 0.1, 0.3333, 0.5, 0.915, 0.99, 1.0]), 103),
    ],
)
def test_ode_loop_fixed_step(method, ts, steps):
    model = sim.get_model("lorenz")
    params = model.default_params()
    ts = jnp.asarray(ts)
    T = len(ts)
    fixed = OdeSolver(method=method, dt0=0.01, adaptive=False, throw=False)
    reference = fixed.solve(model.vector_field, ts, model.initial_state(None), params)
    state, ys = _loop_run(model, params, ts, fixed, [T], T)
    np.testing.assert_allclose(ys, np.asarray(reference.ys), rtol=1e-12)
    assert int(state.num_steps) == int(reference.num_steps) == steps
    _, chunked = _loop_run(model, params, ts, fixed, [1, 4, T - 5], T)
    assert np.array_equal(ys, chunked)


@pytest.mark.slow
def test_ode_loop_step_budget_fails_as_diffeqsolve():
    # The step budget runs over the whole solve, and its failure is diffeqsolve's.
    model = sim.get_model("lorenz")
    params = model.default_params()
    ts = jnp.linspace(0.0, 1.0, 11)
    short = OdeSolver(method="tsit5", max_steps=20, throw=False)
    failed = short.solve(model.vector_field, ts, model.initial_state(None), params)
    state, _ = _loop_run(model, params, ts, short, [3, 8], 11)
    assert int(state.result._value) == int(failed.result) != 0
    assert int(state.num_steps) == 20


def test_max_steps_failure_is_a_simulation_error(tmp_cwd):
    cfg = family_config("ode", "solver.max_steps=50", "output.chunk=8")
    with pytest.raises(sim.SimulationError, match="maximum number of solver steps"):
        sim.run(cfg, output="out.h5")
    assert list(tmp_cwd.iterdir()) == []  # no checkpoint yet: nothing kept


def test_a_run_stopped_by_max_steps_resumes_with_a_larger_bound(tmp_cwd):
    # The message says to raise solver.max_steps and that the checkpoint is kept: resuming
    # with a larger bound is allowed and ends as a run started with it.
    def config(max_steps):
        return family_config(
            "ode", f"solver.max_steps={max_steps}", "output.chunk=4", "output.checkpoint_every=4"
        )

    with pytest.raises(sim.SimulationError, match="last good checkpoint"):
        sim.run(config(60), output="a.h5")
    assert _stream.checkpoint_path(Path("a.h5")).exists()
    sim.run(config(100_000), output="a.h5", resume=True)
    sim.run(config(100_000), output="b.h5")
    with h5py.File("a.h5") as a, h5py.File("b.h5") as b:
        for name in b["observables"]:
            np.testing.assert_array_equal(
                a[f"observables/{name}"][()], b[f"observables/{name}"][()]
            )


# ----------------------------------------------------------------------------- chunks in time


def test_chunk_sizer_keeps_chunks_to_a_few_seconds():
    sizer = _stream.ChunkSizer(1000, seconds=5.0, growth=4)
    assert sizer.next(500) == 1  # the first chunk (it compiles): one frame
    sizer.took(1, 3.0)  # compiling: 3 s for one frame
    assert sizer.next(500) == 1
    sizer.took(1, 0.01)
    assert sizer.next(500) == 4  # at most 4 times the last
    sizer.took(4, 0.04)
    assert sizer.next(500) == 16
    sizer.took(16, 0.16)
    assert sizer.next(500) == 64
    sizer.took(64, 0.64)
    assert sizer.next(10_000) == 256
    sizer.took(256, 2.56)
    assert sizer.next(10_000) == 500  # 5 s at 10 ms a frame
    assert sizer.next(7) == 7
    sizer.took(500, 50.0)  # slower than expected: 0.1 s a frame
    assert sizer.next(10_000) == 50


def test_checkpoint_seconds_writes_checkpoints_mid_run(tmp_cwd):
    # A clock that advances 1 s per reading: with checkpoint_seconds = 2.5 a checkpoint
    # is due every few chunks; without the setting (and no checkpoint_every), one is due
    # every CHECKPOINT_SECONDS.
    clock = iter(range(10**6))

    def run(*sets, seconds=None):
        written = []
        original = _stream.write_checkpoint
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(_stream, "_now", lambda: float(next(clock)))
            patch.setattr(
                _stream,
                "write_checkpoint",
                lambda path, **kw: (written.append(kw["frame"]), original(path, **kw)),
            )
            if seconds is not None:
                patch.setattr(_stream, "CHECKPOINT_SECONDS", seconds)
            sim.run(family_config("spectral", "output.chunk=2", *sets), output="out.h5")
        return written

    assert run() == []  # a short run: no checkpoint in 5 minutes
    timed = run("output.checkpoint_seconds=2.5")
    assert len(timed) >= 3 and timed == sorted(set(timed)) and timed[-1] < 24
    assert len(run(seconds=2.5)) == len(timed)  # the default interval is CHECKPOINT_SECONDS


@pytest.mark.slow
def test_checkpoint_seconds_in_a_subprocess(tmp_path):
    # A real `sim run` with a tiny checkpoint_seconds: the checkpoint appears while it runs.
    name, sets = FAMILIES["spectral"]
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
    for item in [
        *sets,
        "grid.points=[128]",
        "time.t1=300.0",
        "time.save=1201",
        "output.chunk=4",
        "output.checkpoint_seconds=0.001",
    ]:
        args += ["--set", item]
    proc = subprocess.Popen(
        args, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)}, stderr=subprocess.PIPE
    )
    seen = False
    while proc.poll() is None:
        seen = seen or _stream.checkpoint_path(out).exists()
        time.sleep(0.005)
    assert proc.returncode == 0, proc.stderr.read().decode()
    assert seen and out.exists() and not _stream.checkpoint_path(out).exists()


# ----------------------------------------------------------------------------- stops


def test_interrupt_writes_a_checkpoint_and_resumes_exactly(references, tmp_cwd):
    whole = references("spectral")
    with pytest.MonkeyPatch.context() as patch:
        count = signal_after_chunks(patch, 3, signal.SIGTERM)  # as a scheduler would
        with _interrupt.deferred(), pytest.raises(_interrupt.Interrupted) as info:
            sim.run(family_config("spectral"), output="out.h5")
    assert info.value.exit_code == 128 + signal.SIGTERM
    assert (
        info.value.checkpoint == _stream.checkpoint_path("out.h5")
        and info.value.checkpoint.exists()
    )
    assert checkpoint_frame("out.h5") == sum(count)
    assert _stream.partial_path("out.h5").exists() and not Path("out.h5").exists()
    sim.run(family_config("spectral", "output.chunk=5"), output="out.h5", resume=True)
    identical(whole, "out.h5")


def test_the_output_is_locked_while_it_is_written(tmp_cwd):
    held = []
    original = _stream.ChunkSizer.took

    def took(self, frames, seconds):
        original(self, frames, seconds)
        held.append(_lock.lock_path("out.h5").exists())

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(_stream.ChunkSizer, "took", took)
        sim.run(family_config("spectral"), output="out.h5")
    assert held and all(held)
    assert not _lock.lock_path("out.h5").exists()


def _failing_plan(family, fail_at, *sets):
    """The plan of a family's config whose check fails on the chunk holding frame
    `fail_at` (as a blow-up check would), recording the frames it saw."""
    plan = plan_run(family_config(family, *sets))
    seen = []

    def check(rows, k):
        first = k if k == 0 else k + 1
        last = first + len(next(iter(rows.values()))) - 1
        seen.append((first, last))
        if first <= fail_at <= last:
            raise sim.SimulationError(f"blew up at frame {fail_at}")

    plan.check = check
    return plan, seen


def test_a_blow_up_keeps_the_last_good_checkpoint(tmp_cwd):
    plan, seen = _failing_plan("spectral", 15, "output.chunk=3")
    with pytest.raises(sim.SimulationError) as info:
        _stream.stream(plan, Path("out.h5"), checkpoint_every=1)
    message = str(info.value)
    frame = checkpoint_frame("out.h5")
    assert "blew up at frame 15" in message and "\n" not in message
    assert (
        f"last good checkpoint (frame {frame} of 24)" in message
        and str(_stream.checkpoint_path("out.h5")) in message
    )
    # The failing chunk was checked before anything of it was written or checkpointed.
    first, _ = seen[-1]
    assert frame == first - 1
    with h5py.File(_stream.partial_path("out.h5"), "r") as f:
        u = f["observables/u"][()]
    assert np.all(np.isfinite(u[:first])) and np.all(np.isnan(u[first:]))
    # Resuming from it recomputes exactly the frames after the checkpoint.
    sim.run(family_config("spectral", "output.chunk=4"), output="out.h5", resume=True)
    assert not _stream.checkpoint_path("out.h5").exists() and Path("out.h5").exists()


def test_a_blow_up_before_any_checkpoint_removes_the_partial_run(tmp_cwd):
    plan, _ = _failing_plan("spectral", 2)
    with pytest.raises(sim.SimulationError, match="blew up") as info:
        _stream.stream(plan, Path("out.h5"))
    assert "checkpoint" not in str(info.value)
    assert list(tmp_cwd.iterdir()) == []


# ----------------------------------------------------------------------------- real kills


def _kill(tmp_path, name, sets, delay):
    """Start `sim run`, SIGKILL it `delay` seconds after its first checkpoint exists."""
    return kill_after_first_checkpoint(tmp_path, name, sets, delay)


# (Real kills of MD and spectral runs are in test_run_resume.py; these two are slow.)
@pytest.mark.parametrize(
    "family, name, sets, resumed",
    [
        # the reported case, long enough to be killed: chunks of 8, resumed with chunks of 5
        pytest.param(
            "ode",
            "lorenz.toml",
            ["time.t1=40", "time.save=4001", "output.chunk=8", "output.checkpoint_every=8"],
            ["output.chunk=5", "output.checkpoint_every=3"],
            marks=pytest.mark.slow,
        ),
        pytest.param(
            "fd",
            "heat_dirichlet.toml",
            [
                "grid.points=[17]",
                "time.t1=2.0",
                "time.save=2001",
                "output.chunk=4",
                "output.checkpoint_every=4",
            ],
            ["output.chunk=7", "output.checkpoint_seconds=0.01"],
            marks=pytest.mark.slow,
        ),
    ],
)
def test_sigkilled_run_resumed_with_other_chunks(family, name, sets, resumed, tmp_path):
    out = _kill(tmp_path, name, sets, delay=random.Random(family).uniform(0.0, 0.3))
    base = [s for s in sets if not s.startswith("output.")]
    done = sim.run(sim.load_config(EXPERIMENTS / name, [*base, *resumed]), output=out, resume=True)
    assert done.resumed_from is not None and 0 < done.resumed_from < done.frames
    sim.run(sim.load_config(EXPERIMENTS / name, base), output=tmp_path / "whole.h5")
    identical(tmp_path / "whole.h5", out)
