"""Hostile PEtab problems: misspelt columns, YAML keys missing, bounds out of order, more
starts than memory holds, and files named outside the problem's folder (by `..`, an
absolute path or a symbolic link). Each is one line on stderr naming the file and the
column or key, exit code 2, no traceback and no output; a file outside the folder is
never opened. None of them compiles anything."""

import sys
from pathlib import Path

import numpy as np
import pytest

import sim._limits
from inference._petab import PetabError, load_petab
from inference._petab_files import files_digest
from inference._petab_fit import fit_block
from tests.helpers import cli
from tests.sim.test_hostile import LV_FIT, write_observations

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "experiments" / "data"))
# (A' = -k A: two parameters, eleven measurements)
from make_decay_petab import write as decay_problem  # noqa: E402

SECRET = "TOPSECRET_CELL"


def refused(argv, capsys, folder: Path, *named: str) -> str:
    """Run `sim ARGV`: exit 2, one line naming every one of `named`, no traceback, no
    file added to `folder`; returns the line."""
    before = sorted(p.name for p in folder.iterdir())
    status, err = cli(argv, capsys)
    lines = err.strip().splitlines()
    assert status == 2, (argv, err)
    assert len(lines) == 1 and "Traceback" not in err and "internal error" not in err, err
    for name in named:
        assert name in lines[0], (name, lines[0])
    assert sorted(p.name for p in folder.iterdir()) == before
    return lines[0]


@pytest.fixture
def decay(tmp_cwd):
    return decay_problem(tmp_cwd / "decay")


# ----------------------------------------------------------------------------- tables

# The columns PEtab format version 1 requires of each table (the format's documentation,
# petab.readthedocs.io, "PEtab data format specification"), written out here rather than
# taken from the library, and the decay problem's file of each table.
REQUIRED = {
    "parameters.tsv": ["parameterId", "parameterScale", "lowerBound", "upperBound", "estimate"],
    "conditions.tsv": ["conditionId"],
    "measurements.tsv": ["observableId", "simulationConditionId", "time", "measurement"],
    "observables.tsv": ["observableId", "observableFormula", "noiseFormula"],
}


def _misspelt(column: str) -> str:
    """The column with two letters swapped near its end (measurement -> measuremnet)."""
    return column[:-3] + column[-2] + column[-3] + column[-1]


@pytest.mark.parametrize(
    "table, column", [(t, c) for t, columns in REQUIRED.items() for c in columns]
)
def test_a_misspelt_required_column_names_the_table_the_column_and_the_one_meant(
    decay, capsys, table, column
):
    # (measurement, observableFormula and time were internal errors: KeyError)
    file = decay.parent / table
    lines = file.read_text().splitlines()
    header = lines[0].split("\t")
    assert column in header
    header[header.index(column)] = _misspelt(column)
    file.write_text("\n".join(["\t".join(header), *lines[1:]]) + "\n")
    line = refused(
        ["fit", str(decay), "--evaluate", "-o", "out.h5"],
        capsys,
        decay.parent.parent,
        table,
        f"column {column!r} missing",
        f"perhaps you meant {column!r}",
    )
    assert repr(_misspelt(column)) in line, line


@pytest.mark.parametrize(
    "key", ["observable_files", "measurement_files", "condition_files", "sbml_files"]
)
def test_a_yaml_file_without_a_table_names_the_key(decay, capsys, key):
    # (without observable_files: an internal error, 'NoneType' object has no attribute 'index')
    import yaml

    spec = yaml.safe_load(decay.read_text())
    del spec["problems"][0][key]
    decay.write_text(yaml.safe_dump(spec))
    refused(
        ["fit", str(decay), "--evaluate", "-o", "out.h5"],
        capsys,
        decay.parent.parent,
        "decay.yaml",
        f"problems[0].{key}",
        "missing",
    )


def test_a_lower_bound_above_the_upper_bound_is_refused(decay, capsys):
    # (--evaluate wrote an objective, a fit ended in an internal error of the Latin hypercube)
    table = decay.parent / "parameters.tsv"
    table.write_text(table.read_text().replace("k\tlog10\t0.01\t10", "k\tlog10\t10\t0.01"))
    for args in (["--evaluate"], ["--starts", "2"]):
        refused(
            ["fit", str(decay), *args, "-o", "out.h5"],
            capsys,
            decay.parent.parent,
            "parameters.tsv",
            "lowerBound greater than upperBound",
            "parameterId k",
        )


# ----------------------------------------------------------------------------- sizes


@pytest.mark.parametrize("command", ["fit", "profile"])
def test_a_billion_starts_of_a_petab_problem_are_refused_before_they_are_drawn(
    decay, capsys, monkeypatch, command
):
    # (a MemoryError: 14.9 GiB for the Latin hypercube's points, after loading the problem)
    monkeypatch.setattr(sim._limits, "physical_memory", lambda: 16 * 2**30)
    refused(
        [command, str(decay), "--starts", "1000000000", "-o", "out.h5"],
        capsys,
        decay.parent.parent,
        "--starts",
        "1,000,000,000 starts",
        "memory",
    )


def test_a_billion_starts_of_a_config_fit_are_refused_before_they_are_drawn(
    tmp_cwd, capsys, monkeypatch
):
    monkeypatch.setattr(sim._limits, "physical_memory", lambda: 16 * 2**30)
    Path("lv_fit.toml").write_text(LV_FIT)
    write_observations("obs.h5")
    refused(
        ["fit", "lv_fit.toml", "--starts", "1000000000", "-o", "out.h5"],
        capsys,
        tmp_cwd,
        "lv_fit.toml",
        "fit.starts",
        "memory",
    )


# ----------------------------------------------------------------------------- the problem's folder


@pytest.fixture
def opened(monkeypatch):
    """The paths this process opens while the test runs (an audit hook: every `open`
    of Python code, pandas' and h5py's included), resolved."""
    seen: list[Path] = []
    active = [True]

    def hook(event, args):
        if active[0] and event == "open" and isinstance(args[0], (str, bytes, Path)):
            try:
                seen.append(
                    Path(args[0] if not isinstance(args[0], bytes) else args[0].decode()).resolve()
                )
            except (OSError, ValueError):
                pass

    sys.addaudithook(hook)  # (hooks cannot be removed: this one stops recording after the test)
    yield seen
    active[0] = False


# key in the YAML file -> the decay problem's file it names
NAMES = {
    "measurement_files": "measurements.tsv",
    "condition_files": "conditions.tsv",
    "observable_files": "observables.tsv",
    "parameter_file": "parameters.tsv",
    "sbml_files": "decay.xml",
}


def _outside(tmp_cwd: Path, decay: Path, key: str, how: str) -> Path:
    """The file of `key` moved out of the problem's folder (beside it, with a cell
    SECRET added) and named from the YAML file by `..`, its absolute path, or a
    symbolic link inside the folder; the outside file's path."""
    name = NAMES[key]
    outside = tmp_cwd / f"secret_{name}"
    text = (decay.parent / name).read_text()
    outside.write_text(
        text.replace("c0", SECRET, 1)
        if name.endswith(".tsv")
        else text.replace('id="decay"', f'id="{SECRET}"')
    )
    (decay.parent / name).unlink()
    if how == "link":
        (decay.parent / name).symlink_to(outside)
    else:
        decay.write_text(
            decay.read_text().replace(
                name, f"../{outside.name}" if how == "dotdot" else str(outside)
            )
        )
    return outside


@pytest.mark.parametrize("how", ["dotdot", "absolute", "link"])
@pytest.mark.parametrize("key", list(NAMES))
def test_a_file_outside_the_problems_folder_is_refused_without_being_opened(
    tmp_cwd, decay, capsys, opened, key, how
):
    outside = _outside(tmp_cwd, decay, key, how)
    opened.clear()  # (written just now)
    for command in (["fit", "--evaluate"], ["infer", "--chains", "1"], ["profile"]):
        line = refused(
            [command[0], str(decay), *command[1:], "-o", "out.h5"],
            capsys,
            tmp_cwd,
            "decay.yaml",
            key,
            "outside the problem's folder",
            "--allow-outside-folder",
        )
        assert SECRET not in line
    assert outside.resolve() not in opened, "the file outside was opened"
    with pytest.raises(PetabError, match=key):
        files_digest(decay)
    with pytest.raises(PetabError, match=key):  # (a Dask worker's block)
        fit_block(str(decay), "any digest", None, np.zeros((1, 2)), 1)
    assert outside.resolve() not in opened, "the file outside was opened"


def test_the_flag_lets_a_problem_name_files_outside_its_folder(tmp_cwd, decay, capsys):
    # The outside measurement table names a condition the problem lacks: with the flag
    # it is read, and its cell is what the error is about.
    outside = _outside(tmp_cwd, decay, "measurement_files", "dotdot")
    for command in (["fit", "--evaluate"], ["infer"], ["profile"]):
        refused(
            [command[0], str(decay), *command[1:], "--allow-outside-folder", "-o", "out.h5"],
            capsys,
            tmp_cwd,
            f"no condition {SECRET!r}",
        )
    outside.write_text(outside.read_text().replace(SECRET, "c0"))
    problem = load_petab(decay, allow_outside=True)
    assert problem.allow_outside and sum(o.rows.size for o in problem.observables) == 11
    before = files_digest(decay, allow_outside=True)
    outside.write_text(outside.read_text() + "obs_A\tc0\t6.0\t0.03\n")
    assert (
        files_digest(decay, allow_outside=True) != before
    )  # (the file outside is part of the problem's identity)


def test_a_link_to_a_file_inside_the_folder_is_read(decay):
    (decay.parent / "data").mkdir()
    (decay.parent / "measurements.tsv").rename(decay.parent / "data" / "m.tsv")
    (decay.parent / "measurements.tsv").symlink_to(Path("data") / "m.tsv")
    problem = load_petab(decay)
    assert sum(o.rows.size for o in problem.observables) == 11


def test_a_config_may_not_take_the_flag(tmp_cwd, capsys):
    # (a config is the user's own program and may name any path: the flag means nothing there)
    Path("lv_fit.toml").write_text(LV_FIT)
    refused(
        ["fit", "lv_fit.toml", "--allow-outside-folder", "-o", "out.h5"],
        capsys,
        tmp_cwd,
        "--allow-outside-folder",
        "applies to a PEtab problem",
    )


# ----------------------------------------------------------------------------- progress


def test_the_heartbeat_counts_each_chains_evaluations_and_says_how_long_each_took(monkeypatch):
    # (sim infer of Boehm 2014 printed nothing for 15 minutes: its first chunk of 60 NUTS
    # steps took hours, at up to 1023 evaluations a step)
    from inference import _petab_bayes

    clock = [100.0]
    monkeypatch.setattr(_petab_bayes.time, "monotonic", lambda: clock[0])
    lines: list[str] = []
    beat = _petab_bayes.Heartbeat(lines.append, chains=2, every=10.0)
    beat.restart()
    for _ in range(40):  # 20 evaluations of 2 chains, 1 s apart
        clock[0] += 0.5
        beat(0.0)
    assert lines == [
        "NUTS: 10 evaluations of the likelihood and its gradient per chain in 10 s (1 s each; a "
        "step takes 1 to 1023)",
        "NUTS: 20 evaluations of the likelihood and its gradient per chain in 20 s (1 s each; a "
        "step takes 1 to 1023)",
    ]
    # Given the run's steps (Boehm's README run: 300 + 300), the whole run's cost at that
    # rate: 600 steps of 7 and of 63 one-second evaluations.
    lines.clear()
    beat = _petab_bayes.Heartbeat(lines.append, chains=2, every=10.0, steps=600)
    beat.restart()
    for _ in range(20):
        clock[0] += 0.5
        beat(0.0)
    assert lines == [
        "NUTS: 10 evaluations of the likelihood and its gradient per chain in 10 s (1 s each; a "
        "step takes 1 to 1023); at this rate the 600 steps take 70 min to 10.5 h at 7 to 63 "
        "evaluations a step"
    ]
    assert [_petab_bayes._duration(s) for s in (40, 719, 12_600, 181_440)] == [
        "40 s",
        "12 min",
        "3.5 h",
        "2.1 days",
    ]


@pytest.mark.slow  # (compiles the sampler: 25 s)
def test_sim_infer_of_a_petab_problem_shows_its_evaluations_while_it_samples(decay, monkeypatch):
    from inference import _petab_bayes

    monkeypatch.setattr(
        _petab_bayes.Heartbeat,
        "__init__",
        lambda self, log, chains, every=0.0, steps=None: (
            (
                setattr(self, "log", log),
                setattr(self, "chains", chains),
                setattr(self, "every", 0.0),
                setattr(self, "steps", steps),
                self.restart(),
            )
            and None
        ),
    )
    lines: list[str] = []
    problem = load_petab(decay)
    _petab_bayes.infer_petab(
        problem, chains=2, warmup=10, samples=10, progress=True, log=lines.append
    )
    begun = next(
        i for i, line in enumerate(lines) if line.startswith("2 chains")
    )  # (the chains' layout; counted from there)
    counts = [
        int(line.split()[1].replace(",", ""))
        for line in lines[begun:]
        if "evaluations of the likelihood" in line
    ]
    assert counts and counts == sorted(counts) and counts[-1] >= 20, (
        lines
    )  # (at least one evaluation per step)
