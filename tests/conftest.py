"""Test-wide settings: float64, strict dtype promotion, a persistent compilation cache
shared by the test workers and the `sim` processes the tests start, and run-time checks
traced as NaN so that the cache keeps every program."""

import os
import sys
from pathlib import Path

# The test command installs without byte-compiling (most modules of the dependencies are
# never imported; compiling them all took half the install): the modules the tests import
# are compiled once, here, on first import, even where PYTHONDONTWRITEBYTECODE is set (the
# `sim` processes the tests start inherit this).
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

# One BLAS thread, as the `sim` command runs (see `_sim_entry._one_blas_thread`): for the
# `sim` processes the tests start and the xdist workers (through the environment), and
# for this process, whose NumPy may already be loaded (through threadpoolctl).
if not any(
    v in os.environ for v in ("OPENBLAS_NUM_THREADS", "GOTO_NUM_THREADS", "OMP_NUM_THREADS")
):
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    from threadpoolctl import threadpool_limits

    threadpool_limits(1, user_api="blas")


# Python's garbage collector, at its default thresholds, walked the whole heap 13 to 16
# times in each worker's default run (1-1.7 s a pass once the heap holds the programs of
# a few hundred tests: 20-28 s a worker), because tracing allocates objects by the
# million. With the youngest generation collected every 50,000 allocations instead of
# 700: 3 or 4 passes, 7-11 s a worker.
import gc  # noqa: E402

gc.set_threshold(50_000, 10, 10)

# XLA compiles the tests' programs with its default code generators, as `sim` does: its
# older CPU fusion emitters compile 13-27% faster, but with the small-loop setting they
# computed a wrong gradient (`sim._xla_flags` gives the case).

import hypothesis  # noqa: E402
import jax  # noqa: E402
import pytest  # noqa: E402

# Property tests draw the examples of a fixed seed by default, so that every run judges the
# same code the same way (CI included); `--hypothesis-profile=explore` draws new ones.
hypothesis.settings.register_profile("fixed", derandomize=True)
hypothesis.settings.register_profile("explore", derandomize=False)
hypothesis.settings.load_profile("fixed")

jax.config.update("jax_enable_x64", True)
jax.config.update("jax_numpy_dtype_promotion", "strict")

# The tests compile far more than they compute: compiled with LLVM's optimisations off
# (XLA's own graph optimisations stay on), the default run takes about 15% less time.
# Floating-point semantics do not change (no fast math either way); bit-for-bit tests
# compare programs compiled the same way. The `sim` processes the tests start inherit it;
# JAX_DISABLE_MOST_OPTIMIZATIONS=0 tests the fully optimised programs.
os.environ.setdefault("JAX_DISABLE_MOST_OPTIMIZATIONS", "1")
jax.config.update(
    "jax_disable_most_optimizations",
    os.environ["JAX_DISABLE_MOST_OPTIMIZATIONS"].lower() in ("1", "true"),
)

# Run-time shape checks: every function and dataclass of a module that declares array types
# (imports jaxtyping or a package's `_types` aliases) is wrapped by jaxtyping in beartype
# as it is imported, so a shape or dtype that does not match a signature raises. Modules
# without array types (the command line, configs, files, the expression parser) are left
# unwrapped: beartype's wrappers made the default run 10% longer, half of it there (the
# recursive expression parser most), and they hold no shape to check.
import re  # noqa: E402

import jaxtyping  # noqa: E402

_PACKAGES = ("sim", "solvers", "physics", "inference")


def shaped_modules(root: Path = Path(__file__).resolve().parents[1]) -> list[str]:  # noqa: B008
    """The modules of the packages that import jaxtyping or a `_types` module of aliases."""
    out = []
    imports = re.compile(
        r"^\s*(from\s+(jaxtyping|[\w.]*_types)\s+import|import\s+jaxtyping\b)", re.M
    )
    for package in _PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            if imports.search(path.read_text()):
                out.append(
                    ".".join(path.relative_to(root).with_suffix("").parts).removesuffix(".__init__")
                )
    return out


def _inner_functions_without_types_left_alone() -> None:
    """jaxtyping's import hook wraps every function, functions defined inside others too:
    those are wrapped anew at every call of the function around them (beartype writes a
    wrapper each time). Inner functions that declare no types have nothing to check:
    they are left alone (in a fit's tests, 740 wrappings of 1,400 and 5% of the CPU
    time). Another jaxtyping, without the transformer's pieces used here: every function
    is wrapped, as before."""
    import ast

    try:
        from jaxtyping import _import_hook
    except ImportError:
        return
    base = getattr(_import_hook, "JaxtypingTransformer", None)
    if base is None or "_parents" not in base.__init__.__code__.co_names:
        return

    def typed(node) -> bool:
        a = node.args
        names = [
            *a.posonlyargs,
            *a.args,
            *a.kwonlyargs,
            *(x for x in (a.vararg, a.kwarg) if x is not None),
        ]
        return node.returns is not None or any(x.annotation is not None for x in names)

    class Transformer(base):
        def visit_FunctionDef(self, node):
            if typed(node) or not any(
                isinstance(p, (ast.FunctionDef, ast.AsyncFunctionDef)) for p in self._parents
            ):
                return super().visit_FunctionDef(node)
            self._parents.append(node)
            self.generic_visit(node)
            self._parents.pop()
            return node

    _import_hook.JaxtypingTransformer = Transformer


_inner_functions_without_types_left_alone()
jaxtyping.install_import_hook(shaped_modules(), "beartype.beartype")

# JAX as the `sim` command runs it (`sim.configure_jax`: float64, XLA's options, the
# persistent compilation cache). The cache: a program compiled once (by either pytest
# worker or by a `sim` subprocess, which inherits SIMJAX_CACHE_DIR) is loaded from disk
# by the others instead of compiled again. It lives beside the user's own cache, in the
# user's cache folder (`simjax/tests`), not in the checkout, so that a later run starts
# warm from any checkout, a fresh clone too (JAX keys an entry by the program, its
# compile options and the versions of jax and jaxlib: a program of changed code is
# compiled anew, never confused with an old one; the folder is kept under 2 GiB).
# SIMJAX_TEST_CACHE moves it, an empty value turns it off.
import sim  # noqa: E402
from sim._cache import user_folder as _user_folder  # noqa: E402

os.environ["SIMJAX_CACHE_DIR"] = os.environ.get("SIMJAX_TEST_CACHE", str(_user_folder() / "tests"))
sim.configure_jax()


# Every program is traced with equinox's run-time checks as NaN (`solvers.checks_as_nan`,
# as the `sim` command and the fits run them): it holds no host callback, so the
# persistent cache keeps it and a later run or the other worker loads it instead of
# compiling it again. A check that passes changes no value; one that fails gives values
# that are not finite, which the tests' numbers catch. The mode is the default of the
# whole session, not a fixture of each test: module fixtures are set up before a test's
# own fixtures, and a program they traced outside the mode was compiled by every run.
from solvers import _checks  # noqa: E402

if _checks.ACTIVE:
    jax.config.update(_checks._NAME, True)


@pytest.fixture(autouse=True)
def _raising_checks(request):
    """A test of checks that raise (`throw=True`, the errors of `sim.simulate`) carries
    the `raising_checks` marker and runs outside the mode."""
    if not (_checks.ACTIVE and request.node.get_closest_marker("raising_checks")):
        yield
        return
    with _checks._CHECKS_AS_NAN(False):
        yield


@pytest.fixture
def tmp_cwd(tmp_path, monkeypatch):
    """Run a test inside a fresh temporary folder."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


# The test files that take longest (measured: CPU seconds on one worker), run first:
# pytest-xdist splits the collected tests between its workers in order and an idle worker
# takes tests from the end of the other's queue (--dist worksteal); a long file left for
# last would keep one worker running it alone while the other has nothing left to do.
# Files that compile the same programs follow each other, so that one worker usually runs
# both and compiles once: the README's `sim fit experiments/lynx_hare.toml` and the
# Lotka-Volterra fits of test_fit.py and test_fit_resume.py; the short-window training of
# test_train.py and test_train_resume.py; the heat fits of test_fit_pde.py and the
# `sim fit experiments/heat_diffusivity_fit.toml` of test_examples.py.
_LONGEST_FIRST = (
    "tests/test_readme.py",
    "tests/inference/test_fit.py",
    "tests/inference/test_fit_resume.py",
    "tests/inference/test_train.py",
    "tests/inference/test_train_resume.py",
    "tests/sim/test_md_simulate.py",
    "tests/sim/test_sde_family.py",
    "tests/solvers/test_sde.py",
    "tests/sim/test_signals.py",
    "tests/solvers/test_particle_shards.py",
    "tests/sim/test_sweep_md.py",
    "tests/sim/test_sweep_frames.py",
    "tests/physics/test_events.py",
    "tests/physics/test_sbml.py",
    "tests/sim/test_blowup.py",
    "tests/sim/test_run_resume.py",
    "tests/solvers/test_ode.py",
    "tests/inference/test_bayes.py",
    "tests/inference/test_fit_pde.py",
    "tests/sim/test_examples.py",
    "tests/sim/test_resume_property.py",
    "tests/inference/test_fit_md.py",
    "tests/physics/test_md_models.py",
    "tests/sim/test_pde_exact.py",
    "tests/solvers/test_neighbours.py",
    "tests/sim/test_simulate.py",
    "tests/sim/test_plot.py",
)


def pytest_collection_modifyitems(config, items):
    def rank(item) -> int:
        path = item.nodeid.split("::")[0]
        return _LONGEST_FIRST.index(path) if path in _LONGEST_FIRST else len(_LONGEST_FIRST)

    items.sort(key=rank)  # stable: tests keep their order within a file


def pytest_unconfigure(config):
    """The session is over: what the tests made is moved out of the garbage collector's
    reach, so that the closing collections (pytest's, then the interpreter's) do not walk
    a heap of thousands of traced programs that the process is about to drop (2-3.5 s
    each in a worker of the default run, which xdist then interrupts)."""
    gc.freeze()


# A worker keeps every program it compiles in memory, and over the whole run that grows
# to about 8 GB a worker. Few programs are used again by a later test file, so when a file
# ends with the worker above this many bytes, JAX's in-memory programs and traces are
# released (a later use loads its program from the persistent cache). Releasing after every
# file would cost tracing and loading time again and again; this bound costs a few releases
# per run and keeps two workers within 8 GB in all.
_RELEASE_ABOVE = 3 * 1024**3


def _resident_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def pytest_runtest_teardown(item, nextitem):
    if nextitem is not None and nextitem.module is item.module:
        return
    try:
        resident = _resident_bytes()
    except OSError:  # no /proc (not Linux): leave memory to the process
        return
    if resident > _RELEASE_ABOVE:
        jax.clear_caches()
        gc.collect()
