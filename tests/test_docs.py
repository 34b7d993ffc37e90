"""The guide (docs/, built with MkDocs) builds without a warning, its Python runs, and
its config reference is the one the schemas give.

The guide's shell commands run in tests/test_readme.py with README.md's (one machinery for
every document). Here: `mkdocs build --strict`; every page's ```python blocks, joined in
order and run in a folder holding a copy of experiments/ (a block marked `<!-- not run
-->` is skipped), with what a page claims of its results checked against independent
values; the config reference against its generator and the schemas; the Gray-Scott model
written as text keeps a pattern.
"""

import os
import re
import runpy
import shutil
import subprocess
import sys
import time

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

import numpy as np
import pytest

import sim

from .test_readme import DOCUMENTS, REPO, code_blocks

GENERATOR = REPO / "docs" / "gen_config_reference.py"
MKDOCS = ["-m", "mkdocs"]


def test_the_guide_builds_without_warnings(tmp_path):
    # Measured: 13-15 s on 2 cores (the API reference reads the packages' source: 254 objects).
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, *MKDOCS, "build", "--strict", "-d", str(tmp_path / "site")],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert time.perf_counter() - start < 120
    site = tmp_path / "site"
    for page in DOCUMENTS:
        if page.startswith("docs/"):
            name = page.removeprefix("docs/").removesuffix(".md")
            assert (site / ("" if name == "index" else name) / "index.html").exists(), page
    assert (site / "reference" / "config" / "index.html").exists()
    api = (site / "reference" / "api" / "index.html").read_text()
    # (each object of the page rendered under its own heading, by its public path)
    for path in documented():
        assert f'id="{path}"' in api, path
    # The gallery's figures are in the site, where the pages show them.
    assert (site / "gallery" / "gray_scott.png").exists()


# ----------------------------------------------------------------------------- config keys


def _generator():
    return runpy.run_path(str(GENERATOR))


def public_packages() -> list[str]:
    """The packages whose `__all__` the API page covers: the four, and the public modules
    of `physics` (its families' packages and the expression language)."""
    import pkgutil

    import physics

    found = [m.name for m in pkgutil.iter_modules(physics.__path__) if not m.name.startswith("_")]
    return ["sim", "solvers", "physics", *(f"physics.{m}" for m in sorted(found)), "inference"]


def documented() -> list[str]:
    """The objects the API page renders (its `::: path` lines), in order."""
    page = (REPO / "docs" / "reference" / "api.md").read_text()
    return re.findall(r"^::: *(\S+) *$", page, re.M)


def resolved(path: str):
    """The object a dotted path names: the longest prefix that imports, then attributes."""
    import importlib

    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            value = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for part in parts[cut:]:
            value = getattr(value, part)
        return value
    raise ImportError(path)


def test_every_public_name_is_on_the_api_page():
    # Each name of each package's `__all__` under its public path, once, and naming the
    # package's object; nothing else on the page (a private path, a name gone).
    import importlib
    import types

    paths = documented()
    assert len(paths) == len(set(paths)), sorted(p for p in paths if paths.count(p) > 1)
    expected = []
    for package in public_packages():
        module = importlib.import_module(package)
        names = getattr(module, "__all__", None)
        assert names, f"{package} has no __all__"
        # (`__all__` lists every public name the package's own modules define: not its
        # modules, nor what it imports for its own use from another package)
        public = {
            name
            for name in dir(module)
            if not name.startswith("_")
            and name not in ("TYPE_CHECKING", "annotations")
            and not isinstance(getattr(module, name), types.ModuleType)
            and (getattr(getattr(module, name), "__module__", package) + ".").startswith(
                package + "."
            )
        }
        assert public <= set(names), (package, sorted(public - set(names)))
        for name in names:
            path = f"{package}.{name}"
            expected.append(path)
            assert path in paths, f"{path} is not on docs/reference/api.md"
            assert resolved(path) is getattr(module, name), path
    assert sorted(paths) == sorted(expected), sorted(set(paths) - set(expected))


def test_the_config_reference_is_what_the_generator_writes():
    page = _generator()["page"]()
    committed = (REPO / "docs" / "reference" / "config.md").read_text()
    assert committed == page, "run python docs/gen_config_reference.py"


def test_every_key_of_every_section_is_in_the_reference():
    from sim._config import spec_class

    text = (REPO / "docs" / "reference" / "config.md").read_text()
    documented = _generator()["key_paths"]()
    spec = spec_class()
    # Every section of the schema has its heading, and every key of a section that is a
    # pydantic model (with the families' keys) its row.
    for section, field in spec.model_fields.items():
        assert f"## `[{section}]`" in text, section
        kind = field.annotation
        if isinstance(kind, type) and hasattr(kind, "model_fields"):
            for key in kind.model_fields:
                assert f"{section}.{key}" in documented, f"{section}.{key}"
    for row in documented:
        assert f"| `{row}` |" in text, row


def _flat(table: dict, prefix: str = ""):
    for key, value in table.items():
        path = f"{prefix}{key}"
        if isinstance(value, dict):
            yield path
            yield from _flat(value, path + ".")
        elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            for item in value:
                yield from _flat(item, path + "[].")
        else:
            yield path


# Tables whose keys are names of the config writer's (parameters, states, observables) or
# of a model's own options; their entries are `<name>` in the reference.
_NAMED = re.compile(
    r"^(params|initial|model\.(states|parameters|observables|noise|fields)|sweep\.params"
    r"|data\.observables|data\.sigma|fit\.weights|fit\.bounds|infer\.priors|infer\.noise\.sigma"
    r"|experiments\[\]\.(observables|sigma|initial|params)"
    r"|experiments\[\]\.preequilibrate\.(params|initial)|events\[\]\.set)\.(.+)$"
)


def test_every_key_the_example_configs_use_is_in_the_reference():
    # An independent list: the keys the shipped configs (and the guide's) actually hold.
    from inference._observation import OBSERVABLE_KEYS
    from sim._config import spec_class
    from sim._sweep_spec import KINDS

    documented = _generator()["key_paths"]()
    sections = set(spec_class().model_fields)
    configs = [tomllib.loads(p.read_text()) for p in sorted((REPO / "experiments").glob("*.toml"))]
    configs += [
        tomllib.loads(block)
        for block in code_blocks("toml")
        if re.search(r"^\[model\]", block, re.M)
    ]
    missing = set()
    for config in configs:
        model_options = set(config.get("model", {})) - {
            "name",
            "source",
            "sbml",
            "states",
            "noise",
            "fields",
            "parameters",
            "observables",
            "stiff",
        }
        for path in _flat(config):
            named = _NAMED.match(path)
            if named:
                # (a swept quantity's range, or an observable's table: its key by name)
                table, key = named.group(1), named.group(named.lastindex).rsplit(".", 1)[-1]
                if table == "sweep.params" and key in KINDS:
                    path = f"sweep.params.<name>.{key}"
                elif table == "data.observables" and key in OBSERVABLE_KEYS:
                    path = f"data.observables.<name>.{key}"
                else:
                    continue
            head = path.split(".")[0]
            if path.removesuffix("[]") in sections:
                continue  # (a section itself)
            if head == "model" and path.removeprefix("model.").split(".")[0] in model_options:
                continue  # (a model's own options: `sim models NAME`)
            if head == "grid" and "model" in config and "fields" not in config["model"]:
                continue  # (a built-in PDE model's options, given in [grid])
            if path.startswith("infer.priors") or path.startswith("infer.noise.sigma"):
                continue
            assert head.removesuffix("[]") in sections, path
            if path not in documented:
                missing.add(path)
    assert not missing, sorted(missing)


# ----------------------------------------------------------------------------- Python blocks

GUIDE = [page for page in DOCUMENTS if page.startswith("docs/")]
WITH_PYTHON = [page for page in GUIDE if code_blocks("python", DOCUMENTS[page])]


@pytest.fixture
def checkout(tmp_path, monkeypatch):
    shutil.copytree(
        REPO / "experiments",
        tmp_path / "experiments",
        ignore=shutil.ignore_patterns("benchmarks", "gallery", "petab"),
    )
    monkeypatch.chdir(tmp_path)
    return tmp_path


def run_page(page: str) -> dict:
    """A page's Python blocks, joined in order and run as one program."""
    program = "\n".join(code_blocks("python", DOCUMENTS[page]))
    namespace: dict = {"__name__": "__main__"}
    exec(compile(program, page, "exec"), namespace)
    return namespace


def test_the_guide_pages_with_python_are_these():
    # (A page that gains Python gets its checks below.)
    assert set(WITH_PYTHON) == set(CHECKS), sorted(set(WITH_PYTHON) ^ set(CHECKS))


def check_getting_started(ns):
    assert ns["traj"].observables["prey"].shape == (201,)
    assert int(ns["traj"].stats["result"]) == 0
    # (`sim.run` solves in its own compiled loop: the same steps, to rounding)
    np.testing.assert_allclose(
        ns["record"].observables["prey"], ns["traj"].observables["prey"], rtol=1e-12
    )
    assert ns["fig"].axes


def check_ode(ns):
    assert ns["batch"].observables["prey"].shape == (64, 201)
    # Robertson's kinetics: Hairer and Wanner, Solving ODEs II (section IV.10's reference
    # solution), y1 at t = 0.4, 4 and 40.
    np.testing.assert_allclose(
        ns["stiff"].observables["y1"][1:], [0.9851721, 0.9055186, 0.7158271], atol=2e-7
    )
    # The printed values of the page are those.
    assert "1.0, 0.9852, 0.9055, 0.7158" in DOCUMENTS["docs/ode.md"]


def check_sde(ns):
    assert ns["x"].shape == (1000, 21)  # the block asserts the mean against exp(-theta t)


def check_pde(ns):
    assert ns["field"].observables["u"].shape == (11, 128)
    assert np.all(np.isfinite(ns["field"].observables["u"]))


def check_md(ns):
    # The page's claim: with the shifted potential the energy is constant up to Verlet's
    # error, 1.5e-4 over 100 steps and about a quarter of that at half the step (dt^2).
    from solvers import ParticleSolver, VelocityVerlet

    drift = ns["drift"]
    assert 1.0e-4 < drift < 2.0e-4, drift
    half = ns["sim"].simulate(
        ns["lj"],
        None,
        ns["jnp"].linspace(0.0, 0.5, 11),
        solver=ParticleSolver(VelocityVerlet(dt=0.0025)),
    )
    energy = np.asarray(half.observables["total_energy"])
    ratio = drift / (np.abs(energy - energy[0]).max() / abs(energy[0]))
    assert 3.0 < ratio < 5.0, ratio
    assert "1.5e-4" in DOCUMENTS["docs/md.md"] and "3.8e-5" in DOCUMENTS["docs/md.md"]


def check_sweeps(ns):
    result = ns["result"]
    assert result.observables["prey"].shape == (1024, 201) and result.grid_shape == (32, 32)
    # Grid order: itertools.product over the keys as written, the last fastest.
    np.testing.assert_allclose(result.values("alpha")[:32], 0.3)
    np.testing.assert_allclose(result.values("beta")[:32], np.logspace(-2.0, -1.3, 32))


def check_fitting(ns):
    # The estimates the page prints are those of the SIR table (checked against SciPy's
    # least squares in tests/sim/test_examples.py).
    estimate, stderr = ns["result"].estimate, ns["result"].stderr
    assert f"{estimate['beta']:.6g}" == "1.66923" and f"{estimate['gamma']:.6g}" == "0.44345"
    assert f"{stderr['beta']:.3g}" == "0.0257" and f"{stderr['gamma']:.3g}" == "0.0156"
    assert sim.read("sir_fit.h5").format == "simjax.fit"


def check_files(ns):
    assert ns["prey"].shape == (201,)


CHECKS = {
    "docs/getting-started.md": check_getting_started,
    "docs/ode.md": check_ode,
    "docs/sde.md": check_sde,
    "docs/pde.md": check_pde,
    "docs/md.md": check_md,
    "docs/sweeps.md": check_sweeps,
    "docs/fitting.md": check_fitting,
    "docs/files.md": check_files,
}
# Pages whose Python takes longest (compiling NUTS-free but large programs): `-m slow`.
SLOW_PAGES = {"docs/sde.md", "docs/fitting.md"}


@pytest.mark.parametrize(
    "page",
    [
        pytest.param(page, marks=pytest.mark.slow) if page in SLOW_PAGES else page
        for page in WITH_PYTHON
    ],
)
def test_the_python_of_a_page_runs(page, checkout):
    CHECKS[page](run_page(page))


# ----------------------------------------------------------------------------- Gray-Scott


def test_gray_scott_written_as_text_keeps_a_pattern(checkout):
    # The guide's Gray-Scott as text, from Pearson's seed, up to t = 400: the seed has split
    # into 4 spots (v > 0.2, counted as connected regions) and none has died.
    from scipy import ndimage

    (block,) = [
        b for b in code_blocks("toml", DOCUMENTS["docs/own-model.md"]) if "gray_scott_text" in b
    ]
    path = checkout / "gs.toml"
    path.write_text(block)
    record = sim.run(sim.load_config(path, ["time.t1=400.0", "time.save=3"]))
    v = np.asarray(record.observables["v"])
    assert v.shape == (3, 128, 128)
    spots = [ndimage.label(frame > 0.2)[1] for frame in v]
    assert spots == [1, 4, 4], spots
    assert v[-1].max() > 0.3


def test_the_sweep_sections_of_the_guide_are_valid():
    # The [sweep] tables the sweep page shows (whole or in part), checked as `sim sweep`
    # checks them, against the model of the config they are merged into.
    from sim._sweep_spec import plan_sweep, sweep_section

    base = (REPO / "experiments" / "lotka_volterra.toml").read_text()
    blocks = [b for b in code_blocks("toml", DOCUMENTS["docs/sweeps.md"]) if "[sweep" in b]
    assert len(blocks) >= 3
    for block in blocks:
        raw = tomllib.loads(base)
        table = tomllib.loads(block)
        raw["sweep"] = {**raw.get("sweep", {}), **table["sweep"]}
        raw["sweep"].setdefault("params", {})
        if not raw["sweep"]["params"]:
            continue
        config = sim.Config(raw, REPO / "experiments" / "lotka_volterra.toml")
        section = sweep_section(config)
        s = sim.setup(config)
        plan = plan_sweep(config, section, s.params, s.initial, s.model)
        assert plan.runs >= 1
