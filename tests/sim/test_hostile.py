"""Hostile input to every command: damaged HDF5 files wherever a file is read, wrong
dtypes, NaN and Inf, empty files, sizes beyond the machine, folders where files belong,
malformed configs. Each gets one line on stderr naming the file (and key), exit code 2,
no traceback, no new file, and an existing output file left byte for byte as it was."""

import os
import shutil
from pathlib import Path

import h5py
import numpy as np
import pytest

import inference._bayes
import sim._limits
from sim.cli import main

YEARS = np.arange(0.0, 21.0)

LV_FIT = """
[model]
name = "lotka_volterra"
[time]
t1 = 20.0
save = 21
[data]
file = "obs.h5"
time = "/t"
[data.observables]
prey = "/prey"
predator = "/predator"
[fit]
free = ["alpha"]
loss = "lognormal"
[infer]
chains = 1
warmup = 5
samples = 5
[infer.priors]
alpha = { dist = "lognormal", loc = -0.6, scale = 0.5 }
[infer.noise]
model = "lognormal"
sigma = { dist = "lognormal", loc = -1.0, scale = 1.0 }
"""

HEAT = """
[model]
name = "heat"
[grid]
points = [16]
domain = [[0.0, 6.283185307179586]]
[initial]
file = "u0.h5"
dataset = "/u"
[time]
t1 = 0.1
save = 3
dt = 0.05
"""

LJ = """
[model]
name = "lennard_jones"
[params]
cutoff = 2.5
[system]
file = "start.h5"
[time]
steps = 10
save_every = 5
"""

LJ_LATTICE = LJ.replace('file = "start.h5"', 'lattice = "fcc"\ncells = 3\ndensity = 0.8')

LV_SWEEP = """
[model]
name = "lotka_volterra"
[time]
t1 = 5.0
save = 6
[sweep]
mode = "grid"
[sweep.params]
alpha = { linspace = [0.4, 0.6, 2] }
"""

LV_RUN = """
[model]
name = "lotka_volterra"
[time]
t1 = 5.0
save = 6
"""

# The memory every size check compares with, the same on any machine.
MEMORY = 16 * 2**30


def cli(argv, capsys):
    try:
        main(argv)
        code = 0
    except SystemExit as e:
        code = e.code or 0
    return code, capsys.readouterr().err


# ----------------------------------------------------------------------------- valid files


def write_observations(path):
    with h5py.File(path, "w") as f:
        f["t"] = YEARS
        f["prey"] = 30.0 + YEARS
        f["predator"] = 5.0 + YEARS


def write_initial_field(path, value=None):
    with h5py.File(path, "w") as f:
        f["u"] = np.sin(np.linspace(0.0, 2 * np.pi, 16, endpoint=False)) if value is None else value


def fcc(cells=3, density=0.8):
    a = (4 / density) ** (1 / 3)
    basis = np.array([[0, 0, 0], [0.5, 0.5, 0], [0.5, 0, 0.5], [0, 0.5, 0.5]])
    cell = np.stack(np.meshgrid(*[np.arange(cells)] * 3, indexing="ij"), -1).reshape(-1, 1, 3)
    return (a * (cell + basis)).reshape(-1, 3), np.full(3, a * cells)


def write_h5md(path, **replace):
    """A small H5MD start file (108 particles on an fcc lattice); `replace` swaps in
    other content for position, velocity, mass or edges."""
    position, edges = fcc()
    content = {
        "position": position[None],
        "velocity": 0.1 * np.cos(position)[None],
        "mass": np.ones(len(position)),
        "edges": edges,
    }
    content.update(replace)
    with h5py.File(path, "w") as f:
        f.create_group("h5md").attrs["version"] = [1, 1]
        g = f.create_group("particles/all")
        for name in ("position", "velocity"):
            value = content[name]
            if isinstance(value, str) and value == "group":
                g.create_group(f"{name}/value")
            else:
                g[f"{name}/value"] = value
                g[f"{name}/step"] = np.zeros(np.shape(value)[:1], dtype=int)
                g[f"{name}/time"] = np.zeros(np.shape(value)[:1])
        g["mass"] = content["mass"]
        box = g.create_group("box")
        box.attrs["dimension"] = 3
        box.attrs["boundary"] = np.array([b"periodic"] * 3)
        box["edges"] = content["edges"]


def write_fit(path, estimate=0.55):
    with h5py.File(path, "w") as f:
        f.attrs["format"] = "simjax.fit"
        f.attrs["model"] = "lotka_volterra"
        if isinstance(estimate, str) and estimate == "dataset":
            f["estimate"] = np.ones(3)
        else:
            f["estimate/alpha"] = estimate
            f["stderr/alpha"] = 0.01


def write_run(path):
    with h5py.File(path, "w") as f:
        f.attrs["format"] = "simjax.run"
        f.attrs["model"] = "lotka_volterra"
        f.attrs["config"] = LV_RUN
        f["time"] = np.linspace(0.0, 5.0, 6)
        f["observables/prey"] = np.linspace(30.0, 20.0, 6)
        f["observables/predator"] = np.linspace(4.0, 9.0, 6)
        f["params/alpha"] = 0.55


def write_sweep(path):
    with h5py.File(path, "w") as f:
        f.attrs["format"] = "simjax.sweep"
        f.attrs["model"] = "lotka_volterra"
        f.attrs["config"] = LV_SWEEP
        f["time"] = np.linspace(0.0, 5.0, 6)
        f["params/alpha"] = np.array([0.4, 0.6])
        f["observables/prey"] = np.ones((2, 6))
        f["observables/predator"] = np.ones((2, 6))
        f["status"] = np.array([1, 0], dtype=np.int8)


def write_run_checkpoint(path):
    # Of another config: intact, it is refused for that.
    with h5py.File(path, "w") as f:
        f.attrs.update(
            format="simjax.checkpoint",
            config=LV_RUN.replace("5.0", "6.0"),
            frame=1,
            frames=5,
            meta="{}",
            leaves=0,
        )
        f.create_group("state")


def write_unfinished_run(path):
    # The partial file of an unfinished `sim run lv.toml -o out.h5`, so that --resume
    # goes on to read the checkpoint.
    import sim
    from sim._run import plan_run

    plan = plan_run(sim.load_config("lv.toml"))
    with h5py.File(path, "w") as f:
        f.attrs.update(format="simjax.run", config=plan.config)
        plan.identity().write(f.attrs)


def write_fit_checkpoint(path):
    # Of another optimisation: intact, it is refused for that.
    with h5py.File(path, "w") as f:
        f.attrs.update(
            format="simjax.optimizer_checkpoint", identity="another", start=0, iteration=1
        )
        f["history"] = np.ones(2)
        f["state"] = np.ones(3)


@pytest.fixture
def folder(tmp_cwd, monkeypatch):
    monkeypatch.setattr(sim._limits, "physical_memory", lambda: MEMORY)
    for name, text in [
        ("lv_fit.toml", LV_FIT),
        ("heat.toml", HEAT),
        ("lj.toml", LJ),
        ("sweep.toml", LV_SWEEP),
        ("lv.toml", LV_RUN),
    ]:
        Path(name).write_text(text)
    write_observations("obs.h5")
    write_initial_field("u0.h5")
    write_h5md("start.h5")
    Path("out.h5").write_bytes(b"an earlier result")
    Path("out.png").write_bytes(b"an earlier figure")
    return tmp_cwd


def check(folder, argv, capsys, named, *, code=2):
    """Run `argv`: exit `code`, one stderr line naming `named`, no traceback, no file
    added, removed or changed (an existing -o target included); returns the line."""
    before = {p.name: (p.read_bytes() if p.is_file() else None) for p in folder.iterdir()}
    status, err = cli(argv, capsys)
    lines = err.strip().splitlines()
    assert status == code, (argv, err)
    assert len(lines) == 1, err
    assert "Traceback" not in err and "internal error" not in err, err
    assert named in lines[0], (named, err)
    after = {p.name: (p.read_bytes() if p.is_file() else None) for p in folder.iterdir()}
    assert after == before, sorted(set(after) ^ set(before)) or [
        k for k in after if after[k] != before[k]
    ]
    return lines[0]


# ----------------------------------------------------------------------------- damaged HDF5


def damage(path: Path, how: str, good: bytes, offset: int | None = None) -> None:
    """Put a damaged copy of `good` (or an empty file, or a folder) at `path`."""
    if path.is_file():
        path.unlink()
    if how == "truncated":
        path.write_bytes(good[: len(good) // 2])
    elif how == "garbage":  # an HDF5 signature, then random bytes
        rng = np.random.default_rng(0)
        path.write_bytes(good[:8] + rng.integers(0, 256, 4000, dtype=np.uint8).tobytes())
    elif how == "flipped":  # 64 bytes inverted at every eighth of the file (or at `offset`)
        data = bytearray(good)
        for at in [k * len(good) // 8 for k in range(1, 8)] if offset is None else [offset]:
            data[at : at + 64] = bytes(b ^ 0xFF for b in data[at : at + 64])
        path.write_bytes(bytes(data))
    elif how == "empty":
        path.write_bytes(b"")
    elif how == "text":  # not HDF5 at all
        path.write_text("time,prey\n1900,30.0\n")
    elif how == "folder":
        path.mkdir()
    else:
        raise ValueError(how)


# reader -> (command, the file it reads, writer of a valid file of that kind).
# The configs make an intact file fail later for a reason naming the same file (the
# observations fall outside a shortened span; a resumed file has another config; the
# fit estimate lies outside its prior's support), so
# that any damage, wherever it lands, must end in a one-line error about that file.
READERS = {
    "fit [data] file": (
        ["fit", "lv_fit.toml", "-o", "out.h5", "--set", "time.t1=5.0", "--set", "time.save=6"],
        "obs.h5",
        write_observations,
    ),
    "fit --data": (
        ["fit", "lv_fit.toml", "--data", "bad.h5", "-o", "out.h5", "--set", "time.t1=5.0"],
        "bad.h5",
        write_observations,
    ),
    "infer --data": (
        ["infer", "lv_fit.toml", "--data", "bad.h5", "-o", "out.h5", "--set", "time.t1=5.0"],
        "bad.h5",
        write_observations,
    ),
    "infer --init-from": (
        ["infer", "lv_fit.toml", "--init-from", "bad.h5", "-o", "out.h5"],
        "bad.h5",
        lambda path: write_fit(path, -1.0),
    ),
    "PDE [initial] file": (["run", "heat.toml", "-o", "out.h5"], "u0.h5", write_initial_field),
    "MD [system] file": (["run", "lj.toml", "-o", "out.h5"], "start.h5", write_h5md),
    "plot": (["plot", "bad.h5", "-o", "out.png"], "bad.h5", write_run),
    "run --resume": (
        ["run", "lv.toml", "-o", "out.h5", "--resume", "--set", "params.alpha=0.6"],
        ".out.h5.partial",
        write_run,
    ),
    "sweep --resume": (
        ["sweep", "sweep.toml", "-o", "out.h5", "--resume", "--set", "time.t1=4.0"],
        ".out.h5.partial",
        write_sweep,
    ),
    "run --resume checkpoint": (
        ["run", "lv.toml", "-o", "out.h5", "--resume"],
        ".out.h5.checkpoint",
        write_run_checkpoint,
    ),
    "fit --resume checkpoint": (
        ["fit", "lv_fit.toml", "-o", "out.h5", "--resume"],
        ".out.h5.checkpoint",
        write_fit_checkpoint,
    ),
}
# Where a reader may still succeed after damage that only hit raw values (no reason to
# fail): the plot of garbled numbers, a garbled but finite initial field or MD start.
MAY_SUCCEED = {"plot", "PDE [initial] file", "MD [system] file"}


def good_bytes(tmp_path, writer) -> bytes:
    path = tmp_path / "good.h5"
    writer(path)
    return path.read_bytes()


@pytest.mark.parametrize("how", ["truncated", "garbage", "flipped", "empty", "text", "folder"])
@pytest.mark.parametrize("reader", list(READERS))
def test_damaged_hdf5_files(reader, how, folder, capsys, tmp_path_factory):
    argv, file, writer = READERS[reader]
    if reader == "run --resume checkpoint":
        write_unfinished_run(".out.h5.partial")
    if reader == "run --resume":  # (an unfinished run without a checkpoint is started afresh)
        write_run_checkpoint(".out.h5.checkpoint")
    damage(folder / file, how, good_bytes(tmp_path_factory.mktemp("good"), writer))
    check(folder, argv, capsys, file.lstrip("."))


@pytest.mark.slow
@pytest.mark.parametrize("reader", list(READERS))
def test_bytes_flipped_anywhere(reader, folder, capsys, tmp_path_factory):
    # Flip 64 bytes at offsets across the whole file: every outcome is a one-line error
    # about the file, or (only where the damage can hit raw values alone) a success.
    argv, file, writer = READERS[reader]
    if reader == "run --resume checkpoint":
        write_unfinished_run(".out.h5.partial")
    if reader == "run --resume":  # (an unfinished run without a checkpoint is started afresh)
        write_run_checkpoint(".out.h5.checkpoint")
    good = good_bytes(tmp_path_factory.mktemp("good"), writer)
    for offset in range(0, len(good), max(64, len(good) // 40)):
        damage(folder / file, "flipped", good, offset)
        before = {p.name: (p.read_bytes() if p.is_file() else None) for p in folder.iterdir()}
        status, err = cli(argv, capsys)
        lines = err.strip().splitlines()
        assert "Traceback" not in err and "internal error" not in err, (offset, err)
        if status == 0 and reader in MAY_SUCCEED:
            continue
        if (
            status == 1
            and reader == "MD [system] file"
            and ("diverged" in err or "blew up" in err)
            and len(lines) == 1
        ):
            continue  # garbled but finite velocities: the run itself fails, nothing written
        assert status == 2 and len(lines) == 1 and file.lstrip(".") in lines[0], (offset, err)
        after = {p.name: (p.read_bytes() if p.is_file() else None) for p in folder.iterdir()}
        assert after == before, offset


# ----------------------------------------------------------------------------- wrong dtypes


def h5(path, **datasets):
    with h5py.File(path, "w") as f:
        for name, value in datasets.items():
            if isinstance(value, str) and value == "group":
                f.create_group(name).create_dataset("x", data=np.arange(3.0))
            else:
                f.create_dataset(name, data=value)


COMPOUND = np.zeros(21, dtype=[("a", "f8"), ("b", "i4")])
STRINGS = np.array([b"1900"] * 21)
BAD_DATA = {
    "string times": ({"t": STRINGS, "prey": np.ones(21), "predator": np.ones(21)}, "/t"),
    "variable-length strings": (
        {
            "t": YEARS,
            "prey": np.array(["x"] * 21, dtype=h5py.string_dtype()),
            "predator": np.ones(21),
        },
        "/prey",
    ),
    "compound values": ({"t": YEARS, "prey": COMPOUND, "predator": np.ones(21)}, "/prey"),
    "group for a dataset": ({"t": YEARS, "prey": "group", "predator": np.ones(21)}, "/prey"),
    "2-D times": ({"t": np.ones((21, 2)), "prey": np.ones(21), "predator": np.ones(21)}, "/t"),
    "scalar times": ({"t": 3.0, "prey": np.ones(21), "predator": np.ones(21)}, "/t"),
    "NaN time": (
        {"t": np.where(YEARS == 3, np.nan, YEARS), "prey": np.ones(21), "predator": np.ones(21)},
        "/t",
    ),
    "infinite time": (
        {"t": np.where(YEARS == 20, np.inf, YEARS), "prey": np.ones(21), "predator": np.ones(21)},
        "/t",
    ),
    "infinite value": (
        {"t": YEARS, "prey": np.where(YEARS == 2, np.inf, 1.0), "predator": np.ones(21)},
        "/prey",
    ),
    "empty datasets": ({"t": np.zeros(0), "prey": np.zeros(0), "predator": np.zeros(0)}, "/t"),
}


@pytest.mark.parametrize("case", list(BAD_DATA))
def test_bad_observation_datasets(case, folder, capsys):
    datasets, key = BAD_DATA[case]
    h5("obs.h5", **datasets)
    line = check(folder, ["fit", "lv_fit.toml", "-o", "out.h5"], capsys, "obs.h5")
    assert key in line, line


def test_integer_observations_are_numbers(folder, capsys, monkeypatch):
    # Integers where floats are expected are fine: the data reader takes them as numbers
    # (the fit itself is not run here: the span ends before the last observation).
    h5("obs.h5", t=np.arange(21), prey=np.arange(21) + 30, predator=np.arange(21) + 5)
    line = check(
        folder, ["fit", "lv_fit.toml", "-o", "out.h5", "--set", "time.t1=5.0"], capsys, "obs.h5"
    )
    assert "after the simulated end" in line


BAD_FIELDS = {
    "strings": (np.array([b"x"] * 16), "/u"),
    "compound": (np.zeros(16, dtype=[("a", "f8"), ("b", "f8")]), "/u"),
    "group": ("group", "/u"),
    "2-D for a 1-D grid": (np.ones((16, 16)), "/u"),
    "scalar": (1.0, "/u"),
    "NaN": (np.where(np.arange(16) == 4, np.nan, 1.0), "/u"),
    "infinity": (np.where(np.arange(16) == 4, -np.inf, 1.0), "/u"),
    "empty": (np.zeros(0), "/u"),
}


@pytest.mark.parametrize("case", list(BAD_FIELDS))
def test_bad_initial_fields(case, folder, capsys):
    value, key = BAD_FIELDS[case]
    h5("u0.h5", u=value)
    line = check(folder, ["run", "heat.toml", "-o", "out.h5"], capsys, "u0.h5")
    assert key in line, line


def test_an_integer_initial_field_is_fine(folder, capsys):
    h5("u0.h5", u=np.arange(16) % 3)
    status, err = cli(["run", "heat.toml", "-o", "field.h5", "--quiet"], capsys)
    assert status == 0, err
    np.testing.assert_allclose(
        h5py.File("field.h5", "r")["observables/u"][0], np.arange(16) % 3, atol=1e-12
    )


POSITION, EDGES = fcc()
BAD_STARTS = {
    "string positions": {"position": np.array([[[b"a", b"b", b"c"]] * 108])},
    "compound positions": {
        "position": np.zeros((1, 108), dtype=[("x", "f8"), ("y", "f8"), ("z", "f8")])
    },
    "positions a group": {"position": "group"},
    "1-D positions": {"position": POSITION[None, :, 0]},
    "4-D space": {"position": np.ones((1, 108, 4))},
    "NaN position": {"position": np.where(np.arange(3) == 1, np.nan, POSITION)[None]},
    "infinite velocity": {"velocity": np.where(np.arange(3) == 1, np.inf, 0.0 * POSITION)[None]},
    "huge velocity": {"velocity": np.full((1, 108, 3), 1e200)},
    "velocity of another shape": {"velocity": np.zeros((1, 100, 3))},
    "zero mass": {"mass": np.zeros(108)},
    "string edges": {"edges": np.array([b"a", b"b", b"c"])},
    "negative edges": {"edges": -EDGES},
    "NaN edges": {"edges": np.array([np.nan, 1.0, 1.0])},
    "positions a million boxes away": {"position": (POSITION + 1e9)[None]},
    "overlapping particles": {"position": np.zeros((1, 108, 3))},
}


@pytest.mark.parametrize("case", list(BAD_STARTS))
def test_bad_md_start_files(case, folder, capsys):
    write_h5md("start.h5", **BAD_STARTS[case])
    line = check(folder, ["run", "lj.toml", "-o", "out.h5"], capsys, "start.h5")
    assert "system.file" in line, line


@pytest.mark.parametrize(
    "estimate, key",
    [
        ("dataset", "/estimate"),
        (np.array([0.5, 0.6]), "/estimate/alpha"),
        (b"fast", "/estimate/alpha"),
        (np.nan, "/estimate/alpha"),
        (np.inf, "/estimate/alpha"),
        (-0.5, "/estimate/alpha"),
    ],
    ids=["estimate-a-dataset", "array", "string", "nan", "inf", "outside-the-prior"],
)
def test_bad_fit_files_for_init_from(estimate, key, folder, capsys):
    write_fit("fit.h5", estimate)
    line = check(
        folder, ["infer", "lv_fit.toml", "--init-from", "fit.h5", "-o", "out.h5"], capsys, "fit.h5"
    )
    assert key in line, line


# ----------------------------------------------------------------------------- NaN and Inf

# --set override -> (config, key the error names)
NON_FINITE = {
    "params.alpha=nan": ("lv.toml", "params.alpha"),
    "params.alpha=inf": ("lv.toml", "params.alpha"),
    "initial.prey=-inf": ("lv.toml", "initial.prey"),
    "initial.prey=nan": ("lv.toml", "initial.prey"),
    "time.t1=inf": ("lv.toml", "time.t1"),
    "time.t1=nan": ("lv.toml", "time.t1"),
    "time.t0=nan": ("lv.toml", "time.t0"),
    "time.t0=-inf": ("lv.toml", "time.t0"),
    "time.save=nan": ("lv.toml", "time.save"),
    "time.save=inf": ("lv.toml", "time.save"),
    "time.dt=nan": ("lv.toml", "time.dt"),
    "time.save_at=[0.0, nan, 2.0]": ("lv.toml", "time.save_at"),
    "time.save_at=[0.0, 1.0, inf]": ("lv.toml", "time.save_at"),
    "solver.rtol=nan": ("lv.toml", "solver.rtol"),
    "solver.atol=inf": ("lv.toml", "solver.atol"),
    "solver.max_steps=inf": ("lv.toml", "solver.max_steps"),
    "solver.dt0=nan": ("lv.toml", "solver.dt0"),
    "params.diffusivity=nan": ("heat.toml", "params.diffusivity"),
    "time.dt=inf": ("heat.toml", "time.dt"),
    "grid.domain=[[0.0, inf]]": ("heat.toml", "grid.domain"),
    "grid.domain=[[nan, 1.0]]": ("heat.toml", "grid.domain"),
    "params.epsilon=inf": ("lj.toml", "params.epsilon"),
    "time.dt=1e308": ("lj.toml", "time.dt"),  # finite, but the steps end beyond the float range
    "params.sigma=nan": ("lj.toml", "params.sigma"),
    "system.density=nan": ("lj_lattice.toml", "system.density"),
    "system.temperature=inf": ("lj_lattice.toml", "system.temperature"),
    "solver.temperature=nan": ("lj_lattice.toml", "solver.temperature"),
}


@pytest.mark.parametrize("override", list(NON_FINITE))
def test_nan_and_inf_in_a_config(override, folder, capsys):
    config, key = NON_FINITE[override]
    Path("lj_lattice.toml").write_text(LJ_LATTICE)
    if override.startswith("solver.temperature"):
        override = f"solver.method=langevin --set {override}"
    argv = ["run", config, "-o", "out.h5"]
    for item in override.split(" --set "):
        argv += ["--set", item]
    line = check(folder, argv, capsys, key)
    assert config in line, line


@pytest.mark.parametrize(
    "override, key",
    [
        ("sweep.params.alpha={ linspace = [nan, 0.6, 3] }", "sweep.params.alpha"),
        ("sweep.params.alpha={ linspace = [0.4, inf, 3] }", "sweep.params.alpha"),
        ("sweep.params.alpha={ values = [0.5, inf] }", "sweep.params.alpha"),
        ("sweep.params.alpha={ logspace = [-1, nan, 3] }", "sweep.params.alpha"),
        ("sweep.params.alpha={ linspace = [0.4, 0.6, inf] }", "sweep.params.alpha"),
    ],
)
def test_nan_and_inf_in_a_sweep(override, key, folder, capsys):
    check(folder, ["sweep", "sweep.toml", "-o", "out.h5", "--set", override], capsys, key)


@pytest.mark.parametrize(
    "override",
    [
        "sweep.params.alpha={ uniform = [0.1, inf] }",
        "sweep.params.alpha={ uniform = [nan, 0.5] }",
        "sweep.samples=inf",
    ],
)
def test_nan_and_inf_in_a_sampled_sweep(override, folder, capsys):
    argv = [
        "sweep",
        "sweep.toml",
        "-o",
        "out.h5",
        "--set",
        'sweep.mode="random"',
        "--set",
        "sweep.samples=4",
    ]
    if not override.startswith("sweep.samples"):
        argv += ["--set", override]
    else:
        argv += ["--set", "sweep.params.alpha={ uniform = [0.1, 0.5] }", "--set", override]
    check(folder, argv, capsys, override.split("=")[0])


@pytest.mark.parametrize(
    "override, key",
    [
        ('infer.priors.alpha={ dist = "lognormal", loc = nan, scale = 0.5 }', "infer.priors.alpha"),
        ('infer.priors.alpha={ dist = "lognormal", loc = 0.0, scale = inf }', "infer.priors.alpha"),
        (
            'infer.priors.alpha={ dist = "truncated_normal", loc = 0.5, scale = 0.1, low = nan }',
            "infer.priors.alpha",
        ),
        ('infer.priors.alpha={ dist = "uniform", low = 0.0, high = inf }', "infer.priors.alpha"),
        ('infer.noise.sigma={ dist = "lognormal", loc = nan, scale = 1.0 }', "infer.noise.sigma"),
        ("infer.target_accept=nan", "infer.target_accept"),
        ("data.time_offset=nan", "data.time_offset"),
        ("data.time_offset=-inf", "data.time_offset"),
    ],
)
def test_nan_and_inf_in_priors_and_data(override, key, folder, capsys):
    check(folder, ["infer", "lv_fit.toml", "-o", "out.h5", "--set", override], capsys, key)


@pytest.mark.parametrize(
    "override, key",
    [
        ("fit.bounds={ alpha = [0.0, nan] }", "fit.bounds.alpha"),
        ("data.time_offset=inf", "data.time_offset"),
    ],
)
def test_nan_and_inf_in_a_fit(override, key, folder, capsys):
    check(folder, ["fit", "lv_fit.toml", "-o", "out.h5", "--set", override], capsys, key)


# ----------------------------------------------------------------------------- huge sizes

HUGE = {
    "grid.points=[1000000000]": (
        ["run", "heat.toml", "--set", 'initial={ kind = "sine" }'],
        "grid.points",
    ),
    "grid.points=[100000, 100000]": (
        [
            "run",
            "heat.toml",
            "--set",
            'initial={ kind = "sine" }',
            "--set",
            "grid.domain=[[0.0, 1.0], [0.0, 1.0]]",
        ],
        "grid.points",
    ),
    "time.save=1000000000000": (["run", "lv.toml"], "time.save"),
    "solver.max_steps=1000000000000": (
        ["fit", "lv_fit.toml", "--set", 'solver.adjoint="direct"'],
        "solver.max_steps",
    ),
    "time.save=1000000000000 (PDE)": (["run", "heat.toml"], "time.save"),
    "output.chunk=1000000000": (
        [
            "run",
            "heat.toml",
            "--set",
            'initial={ kind = "sine" }',
            "--set",
            "grid.points=[2048, 2048]",
            "--set",
            "grid.domain=[[0.0, 1.0], [0.0, 1.0]]",
            "--set",
            "time.save=1001",
            "--set",
            "time.t1=100.0",
            "--set",
            "time.dt=0.1",
        ],
        "output.chunk",
    ),
    "system.cells=100000": (["run", "lj_lattice.toml"], "system.cells"),
    "system.cells=[100000, 100000, 1]": (["run", "lj_lattice.toml"], "system.cells"),
    'system={ lattice = "random", particles = 1000000000000, density = 0.5 }': (
        ["run", "lj.toml"],
        "system.particles",
    ),
    "time.steps=1000000000000": (
        ["run", "lj_lattice.toml", "--set", "time.save_every=1"],
        "time.steps",
    ),
    "sweep.samples=1000000000000": (
        [
            "sweep",
            "sweep.toml",
            "--set",
            'sweep.mode="random"',
            "--set",
            "sweep.params.alpha={ uniform = [0.1, 0.5] }",
        ],
        "sweep.samples",
    ),
    "sweep.params.alpha={ linspace = [0.3, 0.8, 1000000000] }": (
        ["sweep", "sweep.toml"],
        "sweep.params.alpha",
    ),
    "sweep.params.alpha={ linspace = [0.3, 0.8, 1000000000000] }": (
        ["sweep", "sweep.toml"],
        "sweep.params.alpha",
    ),
    "infer.chains=1000000000": (["infer", "lv_fit.toml"], "infer.chains"),
    "infer.samples=1000000000": (["infer", "lv_fit.toml"], "infer.samples"),
    # (4e8 draws of 3 sampled quantities, 2 priors and 1 noise scale, 16 bytes each:
    # 17.9 GiB, just above the 16 GiB; a bound that leaves out the quantities, 6 GiB)
    "infer.samples=400000000": (["infer", "lv_fit.toml"], "infer.samples"),
    "infer.samples=1000000000000": (["infer", "lv_fit.toml"], "infer.samples"),
}


@pytest.mark.parametrize("override", list(HUGE))
def test_sizes_beyond_the_machine_fail_before_allocating(override, folder, capsys, monkeypatch):
    command, key = HUGE[override]
    # (a size the bound lets through must fail here, not run for hours)
    monkeypatch.setattr(
        inference._bayes, "run_chains", lambda *a, **k: pytest.fail("the sampler was started")
    )
    Path("lj_lattice.toml").write_text(LJ_LATTICE)
    line = check(folder, [*command, "-o", "out.h5", "--set", override.split(" (")[0]], capsys, key)
    assert "memory" in line or "disk" in line, line


@pytest.mark.parametrize("option", ["--chains", "--samples"])
def test_huge_sampler_options(option, folder, capsys):
    line = check(
        folder,
        ["infer", "lv_fit.toml", "-o", "out.h5", option, "1000000000"],
        capsys,
        "infer." + option[2:],
    )
    assert "memory" in line, line


def test_a_sweep_beyond_the_free_disk_fails_before_writing(folder, capsys, monkeypatch):
    # 2 million runs of 12 saved values fit in memory, but not on a nearly full disk.
    usage = shutil.disk_usage(".")
    monkeypatch.setattr(sim._limits.shutil, "disk_usage", lambda p: usage._replace(free=10 * 2**20))
    line = check(
        folder,
        [
            "sweep",
            "sweep.toml",
            "-o",
            "out.h5",
            "--set",
            "sweep.params.alpha={ linspace = [0.3, 0.8, 2000000] }",
            "--set",
            "sweep.chunk=4",
        ],
        capsys,
        "sweep.params",
    )
    assert "disk" in line, line


def test_a_huge_max_steps_is_a_bound_not_an_allocation(folder, capsys):
    # max_steps only bounds the adaptive solver (diffrax keeps log(max_steps)
    # checkpoints; only adjoint = "direct" keeps them all, refused above): the run takes
    # the steps it needs and succeeds.
    status, err = cli(
        ["run", "lv.toml", "-o", "big.h5", "--quiet", "--set", "solver.max_steps=1000000000000"],
        capsys,
    )
    assert status == 0, err
    assert h5py.File("big.h5", "r")["time"].shape == (6,)


# ----------------------------------------------------------------------------- folders, configs


@pytest.mark.parametrize(
    "argv, named",
    [
        (["run", "folder.toml", "-o", "out.h5"], "folder.toml"),
        (["run", "lv.toml", "-o", "outdir"], "outdir"),
        (["run", "lv.toml", "--set", 'output.file="outdir"'], "output.file"),
        (["fit", "lv_fit.toml", "--data", "outdir", "-o", "out.h5"], "outdir"),
        (["fit", "lv_fit.toml", "-o", "outdir"], "outdir"),
        (["fit", "lv_fit.toml", "-o", "out.h5", "--set", 'data.file="outdir"'], "outdir"),
        (["infer", "lv_fit.toml", "--data", "outdir", "-o", "out.h5"], "outdir"),
        (["infer", "lv_fit.toml", "--init-from", "outdir", "-o", "out.h5"], "outdir"),
        (["infer", "lv_fit.toml", "--arviz", "outdir", "-o", "out.h5"], "outdir"),
        (["run", "heat.toml", "-o", "out.h5", "--set", 'initial.file="outdir"'], "outdir"),
        (["run", "lj.toml", "-o", "out.h5", "--set", 'system.file="outdir"'], "outdir"),
        (["plot", "outdir", "-o", "out.png"], "outdir"),
        (["plot", "obs.h5", "-o", "outdir"], "outdir"),
        (["sweep", "sweep.toml", "-o", "outdir"], "outdir"),
    ],
)
def test_folders_where_files_belong(argv, named, folder, capsys):
    Path("folder.toml").mkdir()
    Path("outdir").mkdir()
    check(folder, argv, capsys, named)


LV = b'[model]\nname = "lotka_volterra"\n'
MALFORMED = {
    "empty": (b"", "model"),  # the [model] section is missing
    "only whitespace": (b"\n\n   \n", "model"),
    "syntax error": (LV + b"[time\nt1 = 1.0\n", "line 3"),
    "duplicate key": (LV + b'name = "lorenz"\n', "line 3"),
    "not UTF-8": (b"\xff\xfe[model]\n", "UTF-8"),
    "NUL bytes": (LV + b"\x00\x00\n", "malformed TOML"),
    "top-level array": (b"[1, 2, 3]\n", "malformed TOML"),
    "array of [[model]] tables": (b'[[model]]\nname = "lotka_volterra"\n', "model"),
    "array of [[params]] tables": (LV + b"[[params]]\nalpha = 1.0\n", "params"),
    "model a string": (b'model = "lotka_volterra"\n', "model"),
    "name not a string": (b"[model]\nname = 3\n", "model.name"),
    "string for a number": (LV + b'[params]\nalpha = "fast"\n', "params.alpha"),
    "table for a number": (LV + b"[params]\nalpha = { value = 1.0 }\n", "params.alpha"),
    "list for a number": (LV + b"[time]\nsave = [1, 2]\n", "time.save"),
    "string for t1": (LV + b'[time]\nt1 = "20"\n', "time.t1"),
    "bool for a number": (LV + b"[time]\nt1 = true\n", "time.t1"),
    "date for a number": (LV + b"[time]\nt1 = 1979-05-27\n", "time.t1"),
    "float for a count": (LV + b"[time]\nt1 = 1.0\nsave = 10.5\n", "time.save"),
    "number for a section": (LV + b"time = 3\n", "time"),
    "list for a section": (LV + b"params = [1, 2]\n", "params"),
    "huge integer": (LV + b"[time]\nt1 = 1.0\nsave = 99999999999999999999999999\n", "time.save"),
    "deeply nested": (
        LV + b"[params]\nalpha = " + b"[" * 20000 + b"]" * 20000 + b"\n",
        "nested too deeply",
    ),
    "unicode key": (LV + '[params]\n"\u03b1\u0301\u202e" = 1.0\n'.encode(), "params"),
    "unicode bare key": (LV + "[params]\n\u03b1 = 1.0\n".encode(), "line 4"),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_malformed_configs(case, folder, capsys):
    content, named = MALFORMED[case]
    Path("bad.toml").write_bytes(content)
    line = check(folder, ["run", "bad.toml", "-o", "out.h5"], capsys, named)
    assert "bad.toml" in line


@pytest.mark.parametrize(
    "command, override, key",
    [
        ("run heat.toml", 'grid.points="16"', "grid.points"),
        ("run heat.toml", "grid.points=[16.0]", "grid.points"),
        ("run heat.toml", 'grid.points=["a"]', "grid.points"),
        ("run heat.toml", "initial.file=3", "initial.file"),
        ("run heat.toml", "initial.dataset=5", "initial.dataset"),
        ("run heat.toml", "initial.dataset=[1, 2]", "initial.dataset"),
        ("run lj.toml", "system.file=3", "system.file"),
        ("run lj_lattice.toml", "system.cells=2.5", "system.cells"),
        ("run lj_lattice.toml", 'system.density="high"', "system.density"),
        ("sweep sweep.toml", "sweep.params=[1]", "sweep.params"),
        ("sweep sweep.toml", "sweep.params.alpha=3", "sweep.params.alpha"),
        ("sweep sweep.toml", 'sweep.chunk="4"', "sweep.chunk"),
        ("fit lv_fit.toml", 'data.observables=["prey"]', "data.observables"),
        ("fit lv_fit.toml", 'fit.free="alpha"', "fit.free"),
        ("fit lv_fit.toml", "data.file=3", "data.file"),
        ("fit lv_fit.toml", "data.time=[1]", "data.time"),
        ("infer lv_fit.toml", "infer.priors.alpha=1.0", "infer.priors.alpha"),
        ("infer lv_fit.toml", 'infer.chains="4"', "infer.chains"),
        ("infer lv_fit.toml", "infer.noise=3", "infer.noise"),
        ("infer lv_fit.toml", "infer.priors=[1]", "infer.priors"),
    ],
)
def test_keys_of_the_wrong_type(command, override, key, folder, capsys):
    Path("lj_lattice.toml").write_text(LJ_LATTICE)
    config = command.split()[1]
    line = check(folder, [*command.split(), "-o", "out.h5", "--set", override], capsys, key)
    assert config in line, line


# A file that exists and that no one may read, root included: root reads a file of mode
# 000, but not /proc/sys/vm/drop_caches (mode 200: sysctl checks the mode even for root).
WRITE_ONLY = Path("/proc/sys/vm/drop_caches")


@pytest.mark.skipif(
    os.geteuid() == 0 and not WRITE_ONLY.exists(), reason="no file that root cannot read"
)
def test_unreadable_config(folder, capsys):
    # In a folder of its own: `check` reads every file of `folder` before and after.
    Path("configs").mkdir()
    secret = Path("configs/secret.toml")
    if os.geteuid() == 0:
        secret.symlink_to(WRITE_ONLY)
    else:
        secret.write_text(LV_RUN)
        secret.chmod(0)
    with pytest.raises(PermissionError):
        secret.read_bytes()
    line = check(folder, ["run", str(secret), "-o", "out.h5"], capsys, "secret.toml")
    assert "not readable" in line, line
    # and from Python: the config error names the file and why
    with pytest.raises(sim.ConfigError, match=r"secret\.toml.*cannot be read.*PermissionError"):
        sim.load_config(secret)


def test_config_is_a_broken_link(folder, capsys):
    os.symlink("nowhere.toml", "link.toml")
    check(folder, ["run", "link.toml", "-o", "out.h5"], capsys, "link.toml")


@pytest.mark.parametrize(
    "item, named",
    [
        ("params.alpha", "--set"),
        ("=1", "--set"),
        ("params..alpha=1", "--set"),
        ("nosection.alpha=1", "--set"),
        ("model.name.x=1", "--set"),
        ("params.alpha=" + "[" * 5000 + "]" * 5000, "--set"),
        ("params.alpha=" + "[" * 5000, "--set"),
        ("params.alpha=1\n[time]\nt1=2", "params.alpha"),
    ],
    ids=[
        "no-value",
        "no-key",
        "empty-part",
        "unknown-section",
        "through-a-value",
        "deep",
        "deep-unclosed",
        "line-breaks",
    ],
)
def test_hostile_set_overrides(item, named, folder, capsys):
    check(folder, ["run", "lv.toml", "-o", "out.h5", "--set", item], capsys, named)


def test_models_and_info_take_hostile_arguments(folder, capsys):
    check(folder, ["models", "no_such_model"], capsys, "no_such_model")
    check(folder, ["models", "../../etc/passwd"], capsys, "passwd")
    check(folder, ["models", "x" * 10000 + "\n"], capsys, "xxx")
    check(folder, ["info", "--bogus"], capsys, "--bogus")
    check(folder, ["info", "extra"], capsys, "extra")


def test_no_eval_exec_or_pickle_of_user_input():
    # Nothing a user hands in is evaluated or unpickled: no eval/exec, no pickle, no numpy
    # object loading, no unsafe YAML anywhere in the packages.
    root = Path(__file__).resolve().parents[2]
    banned = (
        "eval(",
        "exec(",
        "pickle",
        "allow_pickle=True",
        "yaml.load(",
        "np.load(",
        "numpy.load(",
        "marshal",
        "shelve",
        "dill",
        "__import__(",
    )
    sources = [
        path
        for package in ("sim", "solvers", "physics", "inference")
        for path in (root / package).rglob("*.py")
    ]
    assert len(sources) > 20
    for path in sources:
        text = (
            path.read_text()
            .replace("jax.eval_shape(", "")
            .replace("eqx.filter_eval_shape(", "")
            .replace("jax.ensure_compile_time_eval(", "")
        )
        for word in banned:
            assert word not in text, (path, word)
