"""The core install and the extras (`pip install simjax` and `simjax[sbml]`, `[petab]`,
`[dask]`, `[plot]`, `[xarray]`, `[arviz]`): without the extras, `import sim` and the runs of
an ODE, a PDE and an MD config and a sweep work, every command that needs an extra ends with
one line naming it (exit code 2, nothing written), and every library call that needs one
raises `MissingExtra` naming it.

A core install is stood in for by `sim` processes whose imports of every module that the
core dependencies do not bring (the closure of pyproject.toml's `[project] dependencies`
over the installed packages' metadata, the extras' own modules always) fail as they do
where the module is not installed: a finder first on `sys.meta_path` raises
ModuleNotFoundError for them, so the code's own import statements are judged. The slow
test builds the wheel and runs it in a new environment holding the core dependencies
alone."""

import json
import os
import shutil
import subprocess
import sys
import zipfile
from importlib import metadata
from pathlib import Path

import h5py
import numpy as np
import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from scipy.integrate import solve_ivp

import sim

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]

# The top-level modules of the extras' packages: blocked whatever the metadata says, and
# never to be even tried by `import sim` or a run that needs no extra.
EXTRAS = {
    "sbml": {"libsbml"},
    "petab": {"petab", "libsbml"},
    "dask": {"dask", "distributed"},
    "plot": {"matplotlib", "PIL"},
    "xarray": {"xarray"},
    "arviz": {"arviz", "xarray", "h5netcdf"},
}
EXTRA_MODULES = set().union(*EXTRAS.values())
OURS = {"sim", "solvers", "physics", "inference", "_sim_entry"}


def closure(requirements: list[str]) -> set[str]:
    """The canonical names of the installed distributions that `requirements` bring, with
    theirs (markers evaluated for this Python, extras followed as asked)."""
    todo = [(Requirement(r), "") for r in requirements]
    seen: set[str] = set()
    while todo:
        req, extra = todo.pop()
        if req.marker is not None and not req.marker.evaluate({"extra": extra}):
            continue
        name = canonicalize_name(req.name)
        key = f"{name}[{','.join(sorted(req.extras))}]"
        if key in seen:
            continue
        seen.add(key)
        seen.add(name)
        try:
            requires = metadata.requires(req.name) or []
        except metadata.PackageNotFoundError:  # (not installed: brings nothing here)
            continue
        todo += [(Requirement(r), e) for r in requires for e in ("", *req.extras)]
    return {k for k in seen if "[" not in k}


def blocked_modules() -> list[str]:
    """The top-level modules of the installed packages a core install would not have."""
    core = closure(PROJECT["dependencies"]) | {"simjax"}
    blocked = {
        top
        for top, dists in metadata.packages_distributions().items()
        if not any(canonicalize_name(d) in core for d in dists)
    }
    return sorted((blocked | EXTRA_MODULES) - OURS - set(sys.stdlib_module_names))


# Run before anything else in the `sim` process: the blocked modules (any already loaded
# by the interpreter's start-up files forgotten), and at exit those tried (top-level names).
PRELUDE = """
import atexit, json, os, sys
BLOCKED = frozenset(json.loads(os.environ["SIMJAX_TEST_BLOCKED"]))
for loaded in [m for m in sys.modules if m.partition(".")[0] in BLOCKED]:
    del sys.modules[loaded]
tried = []
class NotInstalled:
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in BLOCKED:
            tried.append(name.partition(".")[0])
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, NotInstalled())
def report():
    with open(os.environ["SIMJAX_TEST_REPORT"], "w") as f:
        json.dump(sorted(set(tried)), f)
atexit.register(report)
"""

# `sim` commands run one after another in one process (the runs, then the commands that
# need an extra), each one's exit code and stderr kept.
COMMANDS = """
import io, json, os, sys
import _sim_entry
done = []
for argv in json.loads(sys.argv[1]):
    sys.argv = ["sim", *argv]
    start = len(tried)
    err, sys.stderr = sys.stderr, io.StringIO()
    try:
        _sim_entry.main()
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 1
    finally:
        err, sys.stderr = sys.stderr.getvalue(), err
    done.append(
        {"argv": argv, "code": code, "stderr": err, "files": sorted(os.listdir(".")),
         "tried": sorted(set(tried[start:]))}
    )
print(json.dumps(done))
"""


def without_extras(code: str, cwd: Path, *args: str, timeout: float = 300) -> tuple[list, str]:
    """Run `code` in a new Python process without the packages a core install lacks:
    (the blocked modules it tried to import, its stdout)."""
    report = cwd / ".report.json"
    env = {
        **os.environ,
        "SIMJAX_TEST_BLOCKED": json.dumps(blocked_modules()),
        "SIMJAX_TEST_REPORT": str(report),
        "PYTHONPATH": os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]),
    }
    proc = subprocess.run(
        [sys.executable, "-c", PRELUDE + code, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(report.read_text())
    report.unlink()
    return out, proc.stdout


def test_the_blocked_modules_are_those_of_the_extras_and_the_tools():
    # The stand-in for a core install lacks what the extras and the test tools bring, and
    # keeps what the core dependencies bring.
    blocked = set(blocked_modules())
    assert EXTRA_MODULES <= blocked
    for tool in ("pytest", "hypothesis", "sympy", "pandas", "yaml", "xarray"):
        assert tool in blocked or not _installed(tool), tool
    for core in ("jax", "jaxlib", "numpy", "scipy", "h5py", "equinox", "diffrax", "optimistix"):
        assert core not in blocked, core
    for core in ("optax", "numpyro", "jaxtyping", "pydantic", "typer", "rich", "tomli_w"):
        assert core not in blocked, core


def _installed(module: str) -> bool:
    return module in metadata.packages_distributions()


SBML = ROOT / "tests/data/sbml/cases/00928/00928-sbml-l3v2.xml"
PETAB = ROOT / "tests/data/petab/Boehm_JProteomeRes2014"
RUNS = [
    ["run", "lotka_volterra.toml", "-q", "-o", "ode.h5", "--set", "time.t1=1.0"]
    + ["--set", "time.save=3"],
    ["run", "heat_dirichlet.toml", "-q", "-o", "pde.h5", "--set", "grid.points=[17]"]
    + ["--set", "time.t1=0.02", "--set", "time.save=3"],
    ["run", "lj_fluid.toml", "-q", "-o", "md.h5", "--set", "system.cells=2"]
    + ["--set", "params.cutoff=1.6", "--set", "time.steps=20", "--set", "time.save_every=10"],
    ["sweep", "sweep.toml", "-q", "-o", "sweep.h5"],
]
PROBLEM = "Boehm/Boehm_JProteomeRes2014.yaml"
# (command, the extra its one line names, what it names before the message)
NEEDS = [
    (["plot", "ode.h5"], "plot", "figures"),
    (["plot", "ode.h5", "-o", "ode.svg"], "plot", "figures"),
    (["plot", "pde.h5", "--movie", "pde.gif"], "plot", "movies"),
    (["plot", "md.h5", "-o", "md.gif"], "plot", "movies"),
    (["run", "sbml.toml", "-o", "sbml.h5"], "sbml", "sbml.toml: model.sbml: SBML models"),
    (["sweep", "sbml_sweep.toml", "-o", "s.h5"], "sbml", "sbml_sweep.toml: model.sbml: SBML"),
    (["models", "model.xml"], "sbml", "argument NAME: model.xml: SBML models"),
    (["fit", PROBLEM, "-o", "fit.h5"], "petab", f"{PROBLEM}: PEtab problems"),
    (["infer", PROBLEM, "-o", "post.h5"], "petab", f"{PROBLEM}: PEtab problems"),
    (["profile", PROBLEM, "-o", "prof.h5"], "petab", f"{PROBLEM}: PEtab problems"),
    (["sweep", "sweep.toml", "-o", "sw.h5", "--scheduler", "local:1"], "dask", "--scheduler"),
    (["fit", PROBLEM, "--starts", "2", "--scheduler", "local:1"], "dask", "--scheduler"),
    # (refused before the sampling starts)
    (["infer", "lynx_hare.toml", "-o", "post.h5", "--arviz", "post.nc"], "arviz", "--arviz"),
]


@pytest.fixture(scope="module")
def commands(tmp_path_factory):
    """The runs and the commands of NEEDS in one process without the extras: (each
    command's outcome, the folder)."""
    here = tmp_path_factory.mktemp("core")
    for name in (
        "lotka_volterra",
        "heat_dirichlet",
        "lj_fluid",
        "lotka_volterra_sweep",
        "lynx_hare",
    ):
        shutil.copy(ROOT / "experiments" / f"{name}.toml", here)
    (here / "data").mkdir()
    shutil.copy(ROOT / "experiments" / "data" / "lynx_hare.h5", here / "data")
    (here / "sweep.toml").write_text(
        (here / "lotka_volterra_sweep.toml")
        .read_text()
        .replace("linspace = [0.3, 0.8, 32]", "linspace = [0.3, 0.8, 2]")
        .replace("logspace = [-2.0, -1.3, 32]", "logspace = [-2.0, -1.3, 2]")
    )
    shutil.copy(SBML, here / "model.xml")
    (here / "sbml.toml").write_text('[model]\nsbml = "model.xml"\n[time]\nt1 = 1.0\nsave = 3\n')
    (here / "sbml_sweep.toml").write_text(
        (here / "sbml.toml").read_text() + "[sweep.params]\nk1 = { linspace = [0.5, 1.0, 2] }\n"
    )
    shutil.copytree(PETAB, here / "Boehm")
    argvs = [*RUNS, *(argv for argv, _, _ in NEEDS)]
    _, out = without_extras(COMMANDS, here, json.dumps(argvs), timeout=600)
    return json.loads(out), here


def test_runs_of_ode_pde_and_md_configs_need_no_extra(commands):
    done, here = commands
    for argv, outcome in zip(RUNS, done, strict=False):
        assert outcome["argv"] == argv
        assert outcome["code"] == 0, outcome
        assert outcome["stderr"] == "", outcome
    with h5py.File(here / "ode.h5") as f:
        p = {k: f[f"params/{k}"][()] for k in ("alpha", "beta", "gamma", "delta")}
        t = f["time"][:]
        y = np.stack([f["observables/prey"][:], f["observables/predator"][:]])
        y0 = [f["initial/prey"][()], f["initial/predator"][()]]
    # Lotka-Volterra solved by scipy
    exact = solve_ivp(
        lambda _, u: [
            p["alpha"] * u[0] - p["beta"] * u[0] * u[1],
            p["delta"] * u[0] * u[1] - p["gamma"] * u[1],
        ],
        (0.0, t[-1]),
        y0,
        t_eval=t,
        rtol=1e-11,
        atol=1e-12,
    )
    assert t[-1] == 1.0 and np.abs(y - exact.y).max() < 1e-5 * np.abs(y).max()
    with h5py.File(here / "pde.h5") as f:
        x, t, u = f["grid/x"][:], f["time"][:], f["observables/u"][:]
        diffusivity = f["params/diffusivity"][()]
    # sin(2 pi x) with u = 0 at both ends decays as exp(-4 pi^2 D t)
    decayed = np.exp(-4 * np.pi**2 * diffusivity * t)[:, None] * np.sin(2 * np.pi * x)[None]
    assert u.shape == (3, 17) and np.abs(u - decayed).max() < 1e-4
    with h5py.File(here / "md.h5") as f:
        positions = f["particles/all/position/value"][:]
        density = f["observables/density/value"][:]
        energy = f["observables/total_energy/value"][:]
    # fcc, 2 x 2 x 2 cells of 4 particles, at the config's density
    assert positions.shape == (3, 32, 3) and np.all(np.isfinite(positions))
    np.testing.assert_allclose(density, 0.776, rtol=1e-12)
    assert np.all(np.isfinite(energy))
    # (matplotlib, libsbml, petab, dask: tried by the commands that need them alone)
    for outcome in done[: len(RUNS)]:
        assert not set(outcome["tried"]) & EXTRA_MODULES, outcome


@pytest.mark.parametrize("index", range(len(NEEDS)), ids=[" ".join(n[0][:2]) for n in NEEDS])
def test_a_command_that_needs_an_extra_names_it_in_one_line_and_writes_nothing(commands, index):
    done, _ = commands
    argv, extra, where = NEEDS[index]
    outcome = done[len(RUNS) + index]
    before = done[len(RUNS) + index - 1]["files"]
    assert outcome["argv"] == argv
    assert outcome["code"] == 2, outcome
    line = f"need the '{extra}' extra: pip install 'simjax[{extra}]'"
    assert outcome["stderr"].startswith(f"error: {where}"), outcome
    assert outcome["stderr"].rstrip("\n").endswith(line), outcome
    assert outcome["stderr"].count("\n") == 1, outcome
    assert outcome["files"] == before, outcome
    # (the import of the extra's own module was tried, and failed as where not installed)
    assert EXTRAS[extra] & set(outcome["tried"]), outcome


# The packages imported, then the library calls that need an extra run on the fixture's
# files, without the extras: the blocked modules the imports tried, and each call's outcome
# (the exception's class names, message and the blocked modules tried).
LIBRARY = """
import json
import sim, inference, physics, solvers
imported = {"name": sim.__name__, "tried": sorted(set(tried))}
import numpy as np

def outcome(call):
    start = len(tried)
    try:
        call()
        return {"raised": None}
    except Exception as e:
        names = [c.__name__ for c in type(e).__mro__]
        return {"raised": names, "message": str(e), "tried": sorted(set(tried[start:]))}

fit = inference.FitResult(
    model="lotka_volterra", config="", names=["alpha"], estimate={"alpha": 1.0},
    stderr={"alpha": 0.1}, covariance=np.eye(1), loss_history=np.ones(3), converged=True,
    message="", time=np.linspace(0.0, 1.0, 3), prediction={}, observations=None,
)
posterior = inference.PosteriorResult(
    model="lotka_volterra", config="", seed=0, posterior={"alpha": np.ones((2, 5))},
    diverging=np.zeros((2, 5), bool), summary={}, time=np.zeros(0), predictive={},
    observations=None,
)
calls = {
    "run": lambda: sim.read("ode.h5").to_xarray(),
    "pde run": lambda: sim.RunResult.from_record(sim.read("pde.h5")).to_xarray(),
    "md run": lambda: sim.read("md.h5").to_xarray(),
    "sweep": lambda: sim.read("sweep.h5").to_xarray(),
    "sweep result": lambda: sim.SweepResult.read("sweep.h5").to_xarray(),
    "fit": fit.to_xarray,
    "posterior": posterior.to_arviz,
}
done = {name: outcome(call) for name, call in calls.items()}
print(json.dumps({"import": imported, "calls": done}))
"""
# (call, the extra it names, the module it tries)
LIBRARY_NEEDS = {
    "run": ("xarray", "xarray"),
    "pde run": ("xarray", "xarray"),
    "md run": ("xarray", "xarray"),
    "sweep": ("xarray", "xarray"),
    "sweep result": ("xarray", "xarray"),
    "fit": ("xarray", "xarray"),
    "posterior": ("arviz", "arviz"),
}


@pytest.fixture(scope="module")
def library(commands):
    """LIBRARY run in one process without the extras, on the files of `commands`."""
    _, here = commands
    _, out = without_extras(LIBRARY, here)
    return json.loads(out)


def test_import_sim_needs_no_extra(library):
    # (imported before anything else in the process of the library calls)
    imported = library["import"]
    assert imported["name"] == "sim"
    assert not set(imported["tried"]) & EXTRA_MODULES, imported


def test_a_library_call_that_needs_an_extra_raises_missing_extra_naming_it(library):
    done = library["calls"]
    assert set(done) == set(LIBRARY_NEEDS)
    for name, (extra, module) in LIBRARY_NEEDS.items():
        outcome = done[name]
        assert outcome["raised"] is not None, name
        # (a MissingExtra, which a program may catch as an ImportError)
        assert {"MissingExtra", "ImportError"} <= set(outcome["raised"]), (name, outcome)
        needed_by = "ArviZ exports" if extra == "arviz" else "xarray Datasets"
        line = f"{needed_by} need the {extra!r} extra: pip install 'simjax[{extra}]'"
        assert outcome["message"] == line, (name, outcome)
        assert module in outcome["tried"], (name, outcome)


def test_with_the_extras_the_same_calls_give_datasets(commands):
    # Installed, the same files give xarray Datasets with their values (the refusal above
    # is the extra's absence, not the call's)
    xr = pytest.importorskip("xarray")
    _, here = commands
    ds = sim.read(here / "ode.h5").to_xarray()
    assert isinstance(ds, xr.Dataset) and ds["prey"].dims == ("time",)
    with h5py.File(here / "ode.h5") as f:
        np.testing.assert_array_equal(ds["prey"].values, f["observables/prey"][:])
    sweep = sim.read(here / "sweep.h5").to_xarray()
    assert sweep.sizes["run"] == 4, sweep


def test_the_extras_in_pyproject():
    # Each extra brings its package, `all` every extra and `dev` all of them: the extras
    # are named, not repeated, so that they cannot drift apart.
    extras = {
        name: {canonicalize_name(Requirement(r).name): Requirement(r) for r in reqs}
        for name, reqs in PROJECT["optional-dependencies"].items()
    }
    assert set(extras["sbml"]) == {"python-libsbml"}
    assert set(extras["petab"]) == {"petab", "python-libsbml"}
    assert set(extras["dask"]) == {"dask"} and extras["dask"]["dask"].extras == {"distributed"}
    assert set(extras["plot"]) == {"matplotlib"}
    assert set(extras["xarray"]) == {"xarray"}
    assert set(extras["arviz"]) == {"arviz", "xarray", "h5netcdf"}
    assert extras["all"]["simjax"].extras == {"sbml", "petab", "dask", "plot", "xarray", "arviz"}
    assert extras["dev"]["simjax"].extras == {"all"}
    core = {canonicalize_name(Requirement(r).name) for r in PROJECT["dependencies"]}
    for extra in ("sbml", "petab", "dask", "plot", "xarray", "arviz"):
        assert not core & set(extras[extra]), extra
        # (each with a lower bound: the oldest release the code is known to work with)
        for requirement in extras[extra].values():
            assert any(s.operator == ">=" for s in requirement.specifier), requirement
    # What the extras bring is not repeated in `dev`, which brings them through `all`
    brought = set().union(*(extras[e] for e in EXTRAS))
    assert not brought & set(extras["dev"]), brought & set(extras["dev"])


def _uv() -> str:
    """The uv the README's set-up installs beside the environment's Python."""
    uv = Path(sys.executable).with_name("uv")
    found = str(uv) if uv.is_file() else shutil.which("uv")
    assert found, "uv (the README's installer) is not installed"
    return found


@pytest.mark.slow
def test_the_wheel_runs_the_demo_in_a_new_environment_with_the_core_dependencies(tmp_path):
    # The wheel, built from the packages' files alone, installed with its core
    # dependencies into a new environment that sees nothing else (the packages from uv's
    # cache, filled by the set-up's install), runs the README's demo outside the checkout;
    # `sim plot` there names the plot extra, and once it is installed draws the figure.
    uv = _uv()
    source = tmp_path / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "_sim_entry.py"):
        shutil.copy(ROOT / name, source)
    for package in ("sim", "solvers", "physics", "inference"):
        shutil.copytree(
            ROOT / package, source / package, ignore=shutil.ignore_patterns("__pycache__")
        )
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}

    def run(*command, cwd=tmp_path, check=True):
        done = subprocess.run(
            [str(c) for c in command], cwd=cwd, env=env, capture_output=True, text=True
        )
        assert not check or done.returncode == 0, done.stderr
        return done

    run(uv, "build", "--offline", "--wheel", "-o", tmp_path / "dist", source)
    (wheel,) = (tmp_path / "dist").glob("simjax-*.whl")
    # Every file of the packages is in the wheel (model tables read by path included)
    with zipfile.ZipFile(wheel) as archive:
        packed = set(archive.namelist())
    files = {
        path.relative_to(source).as_posix()
        for package in ("sim", "solvers", "physics", "inference")
        for path in (source / package).rglob("*")
        if path.is_file()
    }
    assert files and files | {"_sim_entry.py"} <= packed, sorted(files - packed)
    run(uv, "venv", "--offline", "-q", "-p", sys.executable, tmp_path / "venv")
    python = tmp_path / "venv" / "bin" / "python"
    run(uv, "pip", "install", "--offline", "-q", "-p", python, wheel)
    frozen = run(uv, "pip", "freeze", "-p", python).stdout.splitlines()
    installed = {canonicalize_name(line.split("==")[0].split(" @ ")[0]) for line in frozen}
    assert "jax" in installed and "simjax" in installed, installed
    assert not installed & {"matplotlib", "pillow", "petab", "python-libsbml", "dask"}, installed
    assert not installed & {"distributed", "pandas", "sympy", "pytest"}, installed
    demo = tmp_path / "demo"
    demo.mkdir()
    shutil.copy(ROOT / "experiments" / "lotka_volterra.toml", demo)
    shutil.copy(ROOT / "experiments" / "quickstart.py", demo)
    sim_command = tmp_path / "venv" / "bin" / "sim"
    listed = run(sim_command, "models", cwd=demo).stdout
    assert "lotka_volterra" in listed and "lennard_jones" in listed, listed
    ran = run(sim_command, "run", "lotka_volterra.toml", "-o", "lv.h5", cwd=demo)
    assert "wrote lv.h5" in ran.stderr
    # (the installed packages, not the checkout's)
    where = run(python, "-c", "import sim; print(sim.__file__)", cwd=demo).stdout
    assert Path(where.strip()).is_relative_to(tmp_path / "venv"), where
    shown = run(python, "quickstart.py", cwd=demo).stdout
    assert "lotka_volterra: prey from 30.0" in shown, shown
    with h5py.File(demo / "lv.h5") as f:
        assert f["observables/prey"].shape == (201,)
    refused = run(sim_command, "plot", "lv.h5", cwd=demo, check=False)
    assert refused.returncode == 2
    assert refused.stderr == "error: figures need the 'plot' extra: pip install 'simjax[plot]'\n"
    assert not (demo / "lv.png").exists()
    run(uv, "pip", "install", "--offline", "-q", "-p", python, f"simjax[plot] @ {wheel.as_uri()}")
    run(sim_command, "plot", "lv.h5", cwd=demo)
    assert (demo / "lv.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
