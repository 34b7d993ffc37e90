"""The floors and arrows of docs/architecture.md, checked on the source: which package
may import which, and where diffrax's private details may be used."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("physics", "solvers", "sim", "inference")
# What each package may import of the others (imports inside functions count too).
ALLOWED = {
    "physics": set(),
    "solvers": set(),
    "sim": {"physics", "solvers"},
    "inference": {"physics", "solvers", "sim"},
}


def imports(path: Path) -> list[tuple[int, str]]:
    """(line, top-level package) of every import in a module, relative ones resolved."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = path.relative_to(ROOT).parts[0]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, alias.name.split(".")[0]) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: stays inside its own package unless it climbs out
                depth = len(path.relative_to(ROOT).parts) - 1
                out.append(
                    (
                        node.lineno,
                        package if node.level <= depth else (node.module or "").split(".")[0],
                    )
                )
            else:
                out.append((node.lineno, node.module.split(".")[0]))
    return out


def modules(package: str) -> list[Path]:
    return sorted((ROOT / package).rglob("*.py"))


@pytest.mark.parametrize("package", PACKAGES)
def test_imports_point_one_way(package):
    wrong = [
        f"{path.relative_to(ROOT)}:{line} imports {target}"
        for path in modules(package)
        for line, target in imports(path)
        if target in PACKAGES
        and target != package
        and target not in ALLOWED[package]
        and not (path.relative_to(ROOT).as_posix().startswith("sim/cli/") and target == "inference")
    ]
    assert modules(package) and not wrong, wrong


def test_only_the_command_line_of_sim_imports_inference():
    wrong = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in modules("sim")
        for line, target in imports(path)
        if target == "inference" and not path.relative_to(ROOT).as_posix().startswith("sim/cli/")
    ]
    assert not wrong, wrong


def private_imports(path: Path) -> list[tuple[int, str, str]]:
    """(line, module, name) of every import in a module of another package's private
    module (`from sim._store import Result`, `import sim._store`) or private name
    (`from physics.md import _BASIS`); name is "" for `import`. Relative imports stay
    inside their own package."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = path.relative_to(ROOT).parts[0]

    def other_private(module: str) -> bool:
        parts = module.split(".")
        other = parts[0] in PACKAGES and parts[0] != package
        return other and any(p.startswith("_") for p in parts[1:])

    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name, "") for a in node.names if other_private(a.name)]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            if node.module.split(".")[0] not in PACKAGES or node.module.split(".")[0] == package:
                continue
            private_module = other_private(node.module)
            out += [
                (node.lineno, node.module, alias.name)
                for alias in node.names
                if private_module or (alias.name.startswith("_") and not alias.name.endswith("__"))
            ]
    return out


def test_no_package_imports_another_packages_private_names():
    # A package builds on the others' public names only (`sim.core` for what `inference`
    # and the command line share with `sim`); a private module or name stays free to change
    # inside its own package. Tests may reach into private modules.
    wrong = [
        f"{path.relative_to(ROOT)}:{line} {module} {name}".rstrip()
        for package in PACKAGES
        for path in modules(package)
        for line, module, name in private_imports(path)
    ]
    assert not wrong, "\n".join(wrong)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _internal_imports(package: str) -> dict[str, set[str]]:
    """Module -> the modules of the same package it imports (inside functions too, not
    under TYPE_CHECKING), `from . import _x` counted as an import of `_x`."""
    paths = {_module_name(p): p for p in modules(package) if "__pycache__" not in p.parts}
    graph: dict[str, set[str]] = {name: set() for name in paths}
    for name, path in paths.items():
        tree = ast.parse(path.read_text())
        typing_only = {
            id(inner)
            for node in ast.walk(tree)
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
            for inner in ast.walk(node)
        }
        here = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        for node in ast.walk(tree):
            if id(node) in typing_only:
                continue
            if isinstance(node, ast.ImportFrom):
                base = here[: len(here) - node.level + 1] if node.level else []
                target = ".".join(base + ([node.module] if node.module else []))
                for alias in node.names:
                    module = f"{target}.{alias.name}"
                    graph[name].add(module if module in paths else target)
            elif isinstance(node, ast.Import):
                graph[name].update(alias.name for alias in node.names)
        graph[name] = {t for t in graph[name] if t in paths and t != name}
    return graph


def _circles(graph: dict[str, set[str]]) -> list[set[str]]:
    """The strongly connected parts of more than one module (Tarjan's algorithm, with an
    explicit stack)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, rest = work[-1]
            child = next(rest, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                part = set()
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    part.add(member)
                    if member == node:
                        break
                if len(part) > 1:
                    found.append(part)
    return found


@pytest.mark.parametrize("package", PACKAGES)
def test_no_import_circle_of_more_than_three_modules(package):
    # Imports inside functions count: a circle broken by importing late is still one. A
    # family's declaration and its numerics may import each other (the declaration's
    # methods import the numerics, which read the declared instance), three modules at most.
    circles = [sorted(c) for c in _circles(_internal_imports(package)) if len(c) > 3]
    assert not circles, circles


def test_the_circle_check_finds_a_circle():
    assert _circles({"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set()}) == [{"a", "b", "c"}]


def test_diffrax_internals_are_used_in_one_adapter():
    # `diffrax._...` modules and the private result tables; tests may pin them.
    markers = ("diffrax._", "_index_to_message", "_name_to_item", "equinox.internal")
    wrong = [
        f"{path.relative_to(ROOT)}: {marker}"
        for package in PACKAGES
        for path in modules(package)
        if path.name != "_diffrax_private.py"
        for marker in markers
        if marker in path.read_text()
    ]
    assert not wrong, wrong


# The front door's generic modules: they reach a family only through `sim._family`.
GENERIC = (
    "sim/_simulate.py",
    "sim/_run.py",
    "sim/_stream.py",
    "sim/_unfinished.py",
    "sim/_sweep.py",
    "sim/_sweep_checkpoint.py",
    "sim/_sweep_spec.py",
    "sim/_sweep_store.py",
    "sim/_config.py",
    "sim/_family.py",
    "sim/_registry.py",
    "sim/cli/__init__.py",
    "sim/cli/_app.py",
    "sim/cli/_console.py",
    "sim/cli/_engine.py",
    "sim/cli/_inference_commands.py",
    "sim/cli/_main.py",
    "sim/cli/_model_commands.py",
    "sim/cli/_outputs.py",
    "sim/cli/_plot_info.py",
    "sim/cli/_run_commands.py",
)


def family_names() -> tuple[set[str], set[str]]:
    """The model classes of every registered family, and every key a family owns."""
    import sim  # (registers the families)
    from sim._family import families
    from sim._registry import is_plugin

    for name in sim.model_names():  # (built-in models are imported when first asked for)
        if not is_plugin(name):
            sim.model_class(name)

    classes, keys = set(), set()
    for family in families():
        pending = [family.model_base]
        while pending:
            cls = pending.pop()
            classes.add(cls.__name__)
            pending += cls.__subclasses__()
        keys |= set(family.sections) | set(family.time_keys) | set(family.checks)
    return classes, keys


def test_generic_modules_name_no_family():
    classes, keys = family_names()
    assert {
        "OdeModel",
        "LennardJones",
        "grid",
        "system",
        "steps",
        "save_every",
        "energy_drift",
    } <= classes | keys
    wrong = []
    for name in GENERIC:
        tree = ast.parse((ROOT / name).read_text())
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Name) and node.id in classes
            ):  # (a local variable may be called steps)
                wrong.append(f"{name}:{node.lineno} {node.id}")
            elif isinstance(node, ast.Attribute) and node.attr in classes | keys:
                wrong.append(f"{name}:{node.lineno} .{node.attr}")
            elif (
                isinstance(node, ast.Subscript)
                and isinstance(node.slice, ast.Constant)
                and node.slice.value in keys
            ):
                wrong.append(f"{name}:{node.lineno} [{node.slice.value!r}]")
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr == "get"
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and node.args[0].value in keys
            ):
                wrong.append(f"{name}:{node.lineno} .get({node.args[0].value!r})")
    assert not wrong, wrong


def test_tomllib_is_imported_for_every_supported_python():
    # The package declares Python >= 3.10; tomllib is in the standard library from 3.11,
    # tomli (a declared dependency on 3.10) before: every import must choose.
    wrong = []
    for path in [
        *(p for package in PACKAGES for p in modules(package)),
        *sorted((ROOT / "tests").rglob("*.py")),
    ]:
        tree = ast.parse(path.read_text())
        guarded = {
            id(n) for node in ast.walk(tree) if isinstance(node, ast.If) for n in ast.walk(node)
        }
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Import)
                and any(a.name == "tomllib" for a in node.names)
                and id(node) not in guarded
            ):
                wrong.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not wrong, wrong


def test_a_family_is_declared_when_sim_is_imported_and_its_numerics_when_used():
    # `import sim` (and the `sim` command) imports the families' declarations; their
    # numerics, models and solvers come with their first work (the ODE family's brings
    # diffrax).
    import subprocess
    import sys

    code = (
        "import sys, sim; "
        "print(sorted(m for m in ('sim.families.ode._numerics', 'diffrax', 'solvers._ode', "
        "'sim.families.pde._numerics', 'sim.families.md._numerics', "
        "'sim.families.sde._numerics', 'sim._sweep', 'physics.pde._transport', "
        "'physics.md._potentials', 'physics.sde._models', 'solvers._spectral', "
        "'solvers._particles', 'solvers._sde') "
        "if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


def test_family_methods_and_deferred_models_are_defined():
    # A family's package imports its numerics inside its methods (`from ._numerics import
    # setup`): every such name exists, and every capability's abstract methods are
    # implemented (a family with one left could not have been registered).
    import importlib

    import sim
    from sim._family import Family, families
    from sim._registry import _DEFERRED, is_plugin

    for name, (module, attribute) in list(_DEFERRED.items()):
        assert getattr(importlib.import_module(module), attribute).name == name
    for name in sim.model_names():
        if not is_plugin(name):
            assert sim.model_class(name).name == name
    imported = 0
    for family in families():
        assert isinstance(family, Family) and not type(family).__abstractmethods__
        package = type(family).__module__
        tree = ast.parse(Path(importlib.import_module(package).__file__).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef):
                for inner in ast.walk(node):
                    if isinstance(inner, ast.ImportFrom) and inner.level == 1:
                        module = importlib.import_module(f"{package}.{inner.module}")
                        for alias in inner.names:
                            assert hasattr(module, alias.name), (package, inner.module, alias.name)
                            imported += 1
    assert imported >= 20


def test_the_tests_check_shapes_where_modules_declare_them():
    # tests/conftest.py wraps the modules that declare array types in jaxtyping's checks:
    # a call with an array of the wrong rank (or of a length that does not match) raises,
    # here in a module of physics and one of solvers.
    import jax.numpy as jnp
    import jaxtyping

    from physics.md import _observables
    from solvers import _neighbours

    from .conftest import shaped_modules

    wrapped = set(shaped_modules())
    assert {
        "physics.md._observables",
        "solvers._neighbours",
        "sim._trajectory",
        "inference._fit",
    } <= wrapped
    assert "sim.cli" not in wrapped and "physics._expressions" not in wrapped
    with pytest.raises(jaxtyping.TypeCheckError):
        _observables.mean_squared_displacement(jnp.zeros((3, 4)))
    with pytest.raises(jaxtyping.TypeCheckError):
        _neighbours.minimum_image(jnp.zeros((2, 3)), jnp.zeros((4,)))


def _clean_env() -> dict:
    """This process's environment less what the tests and JAX settings add."""
    import os

    drop = (
        "XLA_FLAGS",
        "NPROC",
        "JAX_ENABLE_X64",
        "JAX_COMPILATION_CACHE_DIR",
        "EQX_ON_ERROR",
        "JAX_DISABLE_MOST_OPTIMIZATIONS",
    )
    return {k: v for k, v in os.environ.items() if k not in drop}


def test_importing_the_packages_changes_nothing_in_jax_xla_or_equinox():
    # A user's float32 network in the same process stays float32: importing every package
    # (and the command line's module) leaves x64, XLA_FLAGS, NPROC, JAX's compilation cache
    # and equinox's checks as they were; `sim.configure_jax()` is the one call that sets them.
    import subprocess
    import sys

    code = (
        "import os, jax, equinox._errors as e\n"
        "from jax._src import compilation_cache as cc\n"
        "def state(): return (jax.config.jax_enable_x64, os.environ.get('XLA_FLAGS'), "
        "os.environ.get('NPROC'),\n"
        "    jax.config.jax_compilation_cache_dir, jax.config.jax_enable_compilation_cache, "
        "cc._cache, e.branched_error_if_impl)\n"
        "before = state()\n"
        "import sim, inference, solvers, physics, sim.cli\n"
        "from solvers import checks_as_nan\n"
        "assert state() == before, (before, state())\n"
        "sim.configure_jax(cache=False)\n"
        "assert jax.config.jax_enable_x64 and 'xla_cpu_small_while_loop_byte_threshold' in "
        "os.environ['XLA_FLAGS']\n"
        "print('ok')\n"
    )
    env = {**_clean_env(), "XLA_FLAGS": "--xla_force_host_platform_device_count=2"}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, env=env, timeout=300
    )
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stdout + out.stderr


def test_configure_jax_after_the_import_gives_the_numbers_of_float64_from_the_start():
    # `import sim; sim.configure_jax()` runs the Lotka-Volterra config to the same bits as
    # a process that turned float64 on before importing anything of simjax; without the
    # call the run is float32 and says so, once.
    import subprocess
    import sys

    run = (
        "import hashlib, warnings, numpy as np\n"
        "warnings.simplefilter('error', sim.PrecisionWarning)\n"
        "result = sim.run(sim.load_config('experiments/lotka_volterra.toml'))\n"
        "print(hashlib.sha256(b''.join(np.asarray(v).tobytes() for _, v in "
        "sorted(result.observables.items()))).hexdigest())\n"
    )
    first = "import jax; jax.config.update('jax_enable_x64', True)\nimport sim\n" + run
    after = "import sim; sim.configure_jax(cache=False)\n" + run
    float32 = "import sim\n" + run
    outs = [
        subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            cwd=ROOT,
            env=_clean_env(),
            timeout=600,
        )
        for code in (first, after, float32)
    ]
    assert outs[0].returncode == 0 and outs[1].returncode == 0, (
        outs[0].stderr[-2000:] + outs[1].stderr[-2000:]
    )
    assert outs[0].stdout == outs[1].stdout and len(outs[0].stdout.strip()) == 64
    assert (
        outs[2].returncode != 0
        and "PrecisionWarning: sim.run runs in float32" in outs[2].stderr
        and "sim.configure_jax()" in outs[2].stderr
    ), outs[2].stderr[-2000:]
