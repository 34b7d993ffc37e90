"""A run is what its inputs say: the resolved config and the bytes of every file it reads
(a Python or SBML model, a PDE's initial field, an MD start file, a fit's data) are
stored in its unfinished files and its result, and a resume of a run, a sweep or a fit
refuses, in one line naming the file and its key, when any of them changed since the
work was started, or when it would continue on other package versions. The same bytes
resume to the file of an uninterrupted run, bit for bit."""

import hashlib
import json
from pathlib import Path

import h5py
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

import sim
from inference import fit
from sim import _stream, _sweep_store
from sim._identity import InputIdentity
from sim._unfinished import checkpoint_path, partial_path
from tests.helpers import cli
from tests.inference.test_fit import lv_config, noisy, write_data
from tests.inference.test_fit_resume import Stop as FitStop, stop_after
from tests.physics.test_sbml import DECAY, _decay_sbml
from tests.sim.test_hostile import HEAT, LJ, write_h5md
from tests.sim.test_model_sources import PREDATION

from .test_run_resume import assert_identical


class Stop(BaseException):
    """Stands for a kill right after a chunk was written and checkpointed."""


def stop_after_chunks(patch, m):
    """Chunks of one frame; stop once the m-th is written (the checkpoint of the one
    before is kept)."""
    original = _stream.ChunkSizer.took
    count = []

    def took(self, frames, seconds):
        original(self, frames, seconds)
        count.append(frames)
        if len(count) == m:
            raise Stop()

    patch.setattr(_stream.ChunkSizer, "took", took)
    patch.setattr(_stream.ChunkSizer, "next", lambda self, remaining: 1)


def digests(*paths):
    return [
        hashlib.sha256(Path(p).read_bytes()).hexdigest() if Path(p).exists() else None
        for p in paths
    ]


def scale_dataset(path, name, factor):
    with h5py.File(path, "r+") as f:
        f[name][...] = f[name][()] * factor


def write_u0(path):
    with h5py.File(path, "w") as f:
        f["u"] = np.sin(np.linspace(0.0, 2 * np.pi, 16, endpoint=False))


PREDATION_RUN = '[model]\nsource = "predation.py:Predation"\n[time]\nt1 = 3.0\nsave = 4\n'

# key -> (config, write the inputs, the file that is edited, the edit)
RUNS = {
    "model.source": (
        PREDATION_RUN,
        lambda: Path("predation.py").write_text(PREDATION),
        "predation.py",
        # a rate in the vector field, not a default: the resolved config stays the same
        lambda: Path("predation.py").write_text(
            PREDATION.replace('params["a"] * x', '1.02 * params["a"] * x')
        ),
    ),
    "model.sbml": (
        DECAY,
        lambda: _decay_sbml(Path("decay.xml")),
        "decay.xml",
        # the kinetic law k1 * S1 * cell -> k1 * S1 * S1 * cell
        lambda: Path("decay.xml").write_text(
            Path("decay.xml").read_text().replace("<ci> S1 </ci>", "<ci> S1 </ci><ci> S1 </ci>", 1)
        ),
    ),
    "initial.file": (
        HEAT,
        lambda: write_u0("u0.h5"),
        "u0.h5",
        lambda: scale_dataset("u0.h5", "u", 1.02),
    ),
    "system.file": (
        LJ,
        lambda: write_h5md("start.h5"),
        "start.h5",
        lambda: scale_dataset("start.h5", "particles/all/velocity/value", 1.02),
    ),
}


@pytest.mark.parametrize("key", list(RUNS))
def test_a_run_resumed_after_an_input_changed_is_refused_naming_the_file(key, tmp_cwd, capsys):
    text, write, name, edit = RUNS[key]
    Path("c.toml").write_text(text)
    write()
    config = sim.load_config("c.toml", ["output.checkpoint_every=1"])
    with pytest.MonkeyPatch.context() as patch:
        stop_after_chunks(patch, 10**6)  # (the same chunks as the stopped run)
        sim.run(config, output="whole.h5")
        stop_after_chunks(patch, 2)
        with pytest.raises(Stop):
            sim.run(config, output="out.h5")
    kept = [partial_path("out.h5"), checkpoint_path("out.h5")]
    before = digests(*kept)
    original = Path(name).read_bytes()
    edit()
    assert Path(name).read_bytes() != original
    code, err = cli(
        [
            "run",
            "c.toml",
            "-o",
            "out.h5",
            "--resume",
            "--quiet",
            "--set",
            "output.checkpoint_every=1",
        ],
        capsys,
    )
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert f"{name}: {key}: has changed since the unfinished run" in err, err
    assert digests(*kept) == before and not Path("out.h5").exists()
    # The same bytes again (a new time of change): the run resumes to the uninterrupted file.
    Path(name).write_bytes(original)
    with pytest.MonkeyPatch.context() as patch:
        stop_after_chunks(patch, 10**6)
        done = sim.run(config, output="out.h5", resume=True)
    assert done.resumed_from == 1
    assert_identical("whole.h5", "out.h5")
    with h5py.File("out.h5") as f:
        assert json.loads(f.attrs["inputs"]) == {key: hashlib.sha256(original).hexdigest()}


def test_a_partial_run_whose_versions_were_edited_is_refused(tmp_cwd, capsys):
    Path("c.toml").write_text(PREDATION_RUN)
    Path("predation.py").write_text(PREDATION)
    with pytest.MonkeyPatch.context() as patch:
        stop_after_chunks(patch, 2)
        with pytest.raises(Stop):
            sim.run(sim.load_config("c.toml", ["output.checkpoint_every=1"]), output="out.h5")
    with h5py.File(partial_path("out.h5"), "r+") as f:
        versions = json.loads(f.attrs["versions"])
        f.attrs["versions"] = json.dumps({**versions, "jax": "0.0.1"})
    code, err = cli(["run", "c.toml", "-o", "out.h5", "--resume", "--quiet"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "versions: the unfinished run was computed with jax 0.0.1, this is jax " in err, err


def test_a_sweep_of_a_model_file_edited_between_a_stop_and_a_resume_is_refused(tmp_cwd, capsys):
    Path("predation.py").write_text(PREDATION)
    Path("s.toml").write_text(
        PREDATION_RUN + "[sweep]\nchunk = 1\n[sweep.params]\na = { values = [0.5, 0.6, 0.7] }\n"
    )
    original = _sweep_store.FileSink.write
    with pytest.MonkeyPatch.context() as patch:

        def write(self, lo, hi, values):
            if lo > 0:  # (a kill once the first chunk is in the file)
                raise Stop()
            original(self, lo, hi, values)

        patch.setattr(_sweep_store.FileSink, "write", write)
        with pytest.raises(Stop):
            sim.sweep(sim.load_config("s.toml"), output="out.h5")
    before = digests(partial_path("out.h5"))
    Path("predation.py").write_text(PREDATION.replace('params["c"] * z', '1.02 * params["c"] * z'))
    code, err = cli(["sweep", "s.toml", "-o", "out.h5", "--resume", "--quiet"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "predation.py: model.source: has changed since the unfinished sweep" in err, err
    assert digests(partial_path("out.h5")) == before
    Path("predation.py").write_text(PREDATION)
    code, err = cli(["sweep", "s.toml", "-o", "out.h5", "--resume", "--quiet"], capsys)
    assert code == 0, err
    whole = sim.sweep(sim.load_config("s.toml"))
    np.testing.assert_array_equal(
        sim.read("out.h5")["observables/hare"], np.asarray(whole.observables["hare"])
    )


def test_a_fit_whose_data_file_changed_is_refused_and_resumes_with_the_same_bytes(tmp_cwd, capsys):
    tmp_path = tmp_cwd
    data = write_data(tmp_path / "d.h5", *noisy(np.random.default_rng(3)))
    config = lv_config(tmp_path, data).path
    with pytest.MonkeyPatch.context() as patch:
        stop_after(patch, 2)
        with pytest.raises(FitStop):
            fit(sim.load_config(config, ["fit.checkpoint_every=1"]), output=tmp_path / "fit.h5")
    original = Path(data).read_bytes()
    with h5py.File(data, "r+") as f:  # one observation moved by 1%: the data arrays differ
        f["prey"][3] = f["prey"][3] * 1.01
    code, err = cli(
        [
            "fit",
            str(config),
            "-o",
            "fit.h5",
            "--resume",
            "--quiet",
            "--set",
            "fit.checkpoint_every=1",
        ],
        capsys,
    )
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "d.h5: data.file: has changed since the unfinished fit" in err, err
    Path(data).write_bytes(original)
    code, err = cli(
        [
            "fit",
            str(config),
            "-o",
            "fit.h5",
            "--resume",
            "--quiet",
            "--set",
            "fit.checkpoint_every=1",
        ],
        capsys,
    )
    assert code == 0, err
    with h5py.File("fit.h5") as f:
        assert json.loads(f.attrs["inputs"]) == {"data.file": hashlib.sha256(original).hexdigest()}


# ----------------------------------------------------------------------------- the property


EDITS = st.one_of(
    st.tuples(st.just("flip"), st.integers(0, 10**6), st.integers(1, 255)),
    st.tuples(st.just("append"), st.binary(min_size=1, max_size=8)),
    st.tuples(st.just("truncate"), st.integers(0, 10**6)),
    st.tuples(st.just("rewrite"), st.none()),  # the same bytes, written again
)


def _edit(path: Path, edit) -> bool:
    """Apply `edit` to `path`; whether its bytes changed."""
    data = path.read_bytes()
    kind = edit[0]
    if kind == "flip" and data:
        i = edit[1] % len(data)
        new = data[:i] + bytes([data[i] ^ edit[2]]) + data[i + 1 :]
    elif kind == "append":
        new = data + edit[1]
    elif kind == "truncate" and data:
        new = data[: edit[1] % len(data)]
    else:
        new = data
    path.write_bytes(new)
    return new != data


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    contents=st.lists(st.binary(min_size=0, max_size=64), min_size=1, max_size=4),
    which=st.integers(0, 3),
    edit=EDITS,
)
def test_any_change_of_any_input_file_is_refused_and_the_same_bytes_pass(
    contents, which, edit, tmp_path
):
    keys = ["model.source", "data.file", "initial.file", "--data"][: len(contents)]
    files = {key: tmp_path / f"input{i}.bin" for i, key in enumerate(keys)}
    for key, content in zip(keys, contents, strict=False):
        files[key].write_bytes(content)
    stored: dict = {}
    InputIdentity.of(files).write(stored)
    key = keys[which % len(keys)]
    changed = _edit(files[key], edit)
    now = InputIdentity.of(files)
    if not changed:
        now.check(stored, "out.partial", "run")
        return
    with pytest.raises(sim.InputError) as info:
        now.check(stored, "out.partial", "run")
    line = str(info.value)
    assert "\n" not in line and line.startswith(
        f"{files[key]}: {key}: has changed since the unfinished run in out.partial"
    ), line


def test_a_file_named_now_that_was_not_read_then_and_the_other_way_round(tmp_path):
    a, b = tmp_path / "a.h5", tmp_path / "b.h5"
    a.write_bytes(b"one")
    b.write_bytes(b"two")
    stored: dict = {}
    InputIdentity.of({"data.file": a}).write(stored)
    with pytest.raises(sim.InputError, match=r"b.h5: --data: was not read by the unfinished fit"):
        InputIdentity.of({"data.file": a, "--data": b}).check(stored, "x", "fit")
    with pytest.raises(
        sim.InputError,
        match=r"x: data.file: the unfinished fit read a file named by data.file, which is not "
        r"named now",
    ):
        InputIdentity.of({}).check(stored, "x", "fit")
    a.unlink()
    with pytest.raises(sim.InputError, match=r"a.h5: data.file: cannot be read"):
        InputIdentity.of({"data.file": a}).check(stored, "x", "fit")
    with pytest.raises(sim.InputError, match=r"x: records no digests"):
        InputIdentity.of({}).check({"config": ""}, "x", "fit")
