"""Models from outside the package: a Python file that a config names (`[model] source =
"my_models.py:Predation"`) and installed plugins (the entry-point group `simjax.models`).

Either way the model is a class of one of the families (`physics.ode.OdeModel`, ...), as a
built-in model is: the same commands run it. Loading a file or a plugin runs its code;
that is what a user asks for by naming it.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.machinery
import importlib.metadata
import importlib.util
import inspect
import re
import sys
import traceback
from pathlib import Path
from types import ModuleType
from typing import Any

from physics import Model

from ._config import Config, split_source
from ._errors import one_line
from ._family import family_of
from ._interrupt import active as interrupts_deferred

PLUGIN_GROUP = "simjax.models"

# Files already run, by (resolved path, digest of the content): a config built several
# times in one process (a sweep's chunks, a fit) runs its model file once.
_FILES: dict[tuple[str, str], ModuleType] = {}
# The path of each file run, as its config named it, by resolved path (the name its
# code objects carry): what messages about a line of the file print.
_SHOWN: dict[str, str] = {}


class SourceError(ValueError):
    """A model file or plugin that cannot give a model class; the message is one line."""


def _is_model_class(obj: object) -> bool:
    if not (isinstance(obj, type) and issubclass(obj, Model)) or inspect.isabstract(obj):
        return False
    try:
        family_of(obj)
    except TypeError:
        return False
    return isinstance(getattr(obj, "name", None), str)


def _where(error: BaseException, path: Path) -> str:
    """`line N: ` of the deepest frame of `error` inside `path`, or ''."""
    if isinstance(error, SyntaxError) and error.lineno is not None:
        return f"line {error.lineno}: "
    lines = [
        f.lineno for f in traceback.extract_tb(error.__traceback__) if Path(f.filename) == path
    ]
    return f"line {lines[-1]}: " if lines else ""


def _first_line(error: BaseException) -> str:
    text = error.msg if isinstance(error, SyntaxError) else str(error)
    text = (text or "").strip().splitlines()
    return f"{type(error).__name__}: {text[0]}" if text else type(error).__name__


def code_line(error: BaseException) -> tuple[str, int] | None:
    """The model file (as its config named it) and line of the deepest frame of `error`,
    or of an error it was raised from, inside the code of a file `run_file` ran; None when
    the error did not pass through such a file."""
    seen: set[int] = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename in _SHOWN]
        if frames:
            return _SHOWN[frames[-1].filename], frames[-1].lineno
        error = error.__cause__ or error.__context__
    return None


# JAX's complaint when Python asks a traced value for a number or a truth value
_CONCRETE = re.compile(r"The problem arose with the `(\w+)` function")


def _what_failed(error: BaseException) -> str:
    """What the model's code did, in one line: the error's type and first line, and for
    a traced value used as a Python number or truth value, what to write instead."""
    import jax

    if isinstance(error, jax.errors.ConcretizationTypeError):
        called = _CONCRETE.search(str(error))
        how = (
            f"{called.group(1)}() of a traced value"
            if called
            else "a traced value used as a Python number or truth value"
        )
        return (
            f"{type(error).__name__}: {how}; a model's functions are traced by JAX: compute with "
            "jax.numpy "
            "(jnp.where to choose) instead of float(), int(), bool() or if on a value"
        )
    if isinstance(error, KeyboardInterrupt):
        return "KeyboardInterrupt raised by the file's code"
    return _first_line(error)


def code_error(error: BaseException) -> str | None:
    """`FILE: line N: WHAT` for an error raised inside the code of a model file (the
    deepest line of the file it passed through), None for any other error. The command
    line reports such an error as bad input, as it reports an error while the file is
    first run."""
    where = code_line(error)
    if where is None:
        return None
    return one_line(f"{where[0]}: line {where[1]}: {_what_failed(error)}")


def _return_line(function: Any, args: tuple) -> int | None:
    """The line of the return statement through which `function(*args)` returned when
    traced (None if it could not be told): what a wrong value returned is blamed on."""
    import jax

    code = getattr(getattr(function, "__func__", function), "__code__", None)
    lines: list[int] = []

    def watch(frame, event, arg):
        if event == "return" and frame.f_code is code:
            lines.append(frame.f_lineno)

    previous = sys.getprofile()
    sys.setprofile(watch)
    try:
        jax.eval_shape(
            lambda *a: function(*a), *args
        )  # (a new function: traced again, not taken from jit's cache)
    except Exception:  # noqa: BLE001 - (it returned once already: only the line is asked)
        pass
    finally:
        sys.setprofile(previous)
    return lines[-1] if lines else None


def _returned(out: Any, shape: tuple[int, ...], of: str) -> str | None:
    """What is wrong with `out` (the abstract value a model's function returned) for one
    real array of `shape` (`of` says what that shape is); None when nothing is."""
    import jax
    import numpy as np

    if out is None:
        return f"returned None; expected an array of shape {shape} (is a return statement missing?)"
    if isinstance(out, (list, tuple)):
        return (
            f"returned a {type(out).__name__} of {len(out)} values; expected one array of "
            f"shape {shape} (jnp.stack the values)"
        )
    if not isinstance(out, jax.ShapeDtypeStruct):
        return f"returned a {type(out).__name__}; expected an array of shape {shape}"
    if out.shape != shape:
        return f"returned shape {out.shape} for {of}"
    if np.issubdtype(out.dtype, np.complexfloating):
        return (
            f"returned complex values ({out.dtype}); expected real values (take jnp.real or "
            "jnp.abs)"
        )
    return None


# The packages whose models `check_returns` trusts (built in, written as text, SBML)
_OURS = frozenset({"physics", "sim", "solvers", "inference"})


def check_returns(
    config: Config, model: Model, method: str, args: tuple, shape: tuple[int, ...], of: str
) -> None:
    """Refuse a config's model whose `method` fails or returns other than one real array
    of `shape` for `args` (`returns_problem`: one trace, nothing computed), in one line
    under the config's key of the model (`model.source` for a Python file's), before a
    solver meets it inside its own code."""
    try:
        returns_problem(model, method, args, shape, of)
    except SourceError as e:
        raise config.error(model_key(config), str(e)) from None


def model_key(config: Config) -> str:
    """The config key that names the model: `model.source` (a Python file), `model.sbml`
    or `model.name`, what a message about the model itself names."""
    options = config.spec.model.options
    return next((f"model.{k}" for k in ("source", "sbml") if k in options), "model.name")


def returns_problem(
    model: Model, method: str, args: tuple, shape: tuple[int, ...], of: str
) -> None:
    """Trace `model.<method>(*args)` once (`jax.eval_shape`: nothing is computed) and
    check that it returns one real array of `shape`, what the solver will take from it;
    done for a method written outside the packages (a model file's, a plugin's).

    Arguments:
        of: what `shape` is, for the message ("a state of shape (2,)").

    Raises:
        SourceError: one line: for a model of a file `run_file` ran, `FILE: line N: ...`
            naming the line that raised (the deepest in the file) or the return
            statement of a wrong value; for any other model, its class and method.
    """
    import jax

    function = getattr(model, method)
    if (
        getattr(getattr(function, "__func__", function), "__module__", "").partition(".")[0]
        in _OURS
    ):
        return  # (the packages' own models, checked by their tests: no trace spent on them)
    try:
        out = jax.eval_shape(function, *args)
    except Exception as e:
        found = code_error(e)
        if found is None:
            raise
        raise SourceError(found) from None
    problem = _returned(out, shape, of)
    if problem is None:
        return
    code = getattr(getattr(function, "__func__", function), "__code__", None)
    shown = _SHOWN.get(code.co_filename) if code is not None else None
    if shown is None:
        raise SourceError(f"{type(model).__name__}.{method} {problem}")
    line = _return_line(function, args) or code.co_firstlineno
    raise SourceError(f"{shown}: line {line}: {method} {problem}")


class _FreshLoader(importlib.machinery.SourceFileLoader):
    """Loads a model file from the bytes read for its key, compiled afresh: Python's
    bytecode cache (__pycache__, checked by the time of change in whole seconds and the
    size) ran the old version of a file rewritten within a second at the same size."""

    def __init__(self, name: str, path: str, source: bytes):
        super().__init__(name, path)
        self._source = source

    def get_code(self, fullname):
        return self.source_to_code(self._source, self.path)


def run_file(path: Path) -> ModuleType:
    """The module a Python model file defines, run once per version of the file.

    Raises:
        SourceError: no such file, not a `.py` file, or an error while running it (with
            its line).
    """
    if path.suffix != ".py":
        raise SourceError(f"{path}: expected a Python file (.py)")
    try:
        resolved = path.resolve(strict=True)
    except FileNotFoundError:
        raise SourceError(f"{path}: no such file") from None
    except OSError as e:
        raise SourceError(f"{path}: cannot be read ({e.strerror})") from None
    if not resolved.is_file():
        raise SourceError(f"{path}: is not a regular file; expected a Python file")
    # (by content: a file rewritten within one tick of the file system's clock, at the
    # same size, keeps its time of change)
    source = resolved.read_bytes()
    key = (str(resolved), hashlib.sha256(source).hexdigest())
    if key in _FILES:
        return _FILES[key]
    # A module name of its own per file (and version), so that two files of one name do
    # not replace each other, and the classes' module can be found while it runs.
    digest = hashlib.sha256(repr(key).encode()).hexdigest()[:16]
    name = f"simjax_model_file_{resolved.stem if resolved.stem.isidentifier() else 'file'}_{digest}"
    spec = importlib.util.spec_from_file_location(
        name, resolved, loader=_FreshLoader(name, str(resolved), source)
    )
    if spec is None or spec.loader is None:
        raise SourceError(f"{path}: cannot be loaded as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    _SHOWN[str(resolved)] = str(path)
    try:
        spec.loader.exec_module(module)
    except Exception as e:  # the file's own error, reported as a line of the file
        del sys.modules[name]
        raise SourceError(f"{path}: {_where(e, resolved)}{_first_line(e)}") from None
    except KeyboardInterrupt as e:
        del sys.modules[name]
        if not interrupts_deferred():  # Ctrl-C in a Python session: the user's to stop
            raise
        raise SourceError(
            f"{path}: {_where(e, resolved)}the file raised KeyboardInterrupt when run"
        ) from None
    except SystemExit as e:
        del sys.modules[name]
        raise SourceError(
            f"{path}: {_where(e, resolved)}the file called exit({e.code!r}) when run"
        ) from None
    _FILES[key] = module
    return module


def file_models(path: Path) -> dict[str, type[Model]]:
    """The model classes a Python file defines (not those it imports), by class name."""
    module = run_file(path)
    return {
        n: c
        for n, c in vars(module).items()
        if _is_model_class(c) and c.__module__ == module.__name__
    }


def source_class(source: str, base: Path) -> type[Model]:
    """The model class `source` names: `"file.py:Class"` (the file relative to `base`), or
    `"file.py"` when that file defines exactly one model class.

    Raises:
        SourceError: as `run_file`; no such class, or one that is not a model class of a
            family.
    """
    file, name = split_source(source)
    path = Path(file) if Path(file).is_absolute() else base / file
    models = file_models(path)
    if name is None:
        if len(models) == 1:
            return next(iter(models.values()))
        found = f"it defines {', '.join(models)}" if models else "it defines none"
        raise SourceError(f"{file}: expected {file}:CLASS naming one model class ({found})")
    if name in models:
        return models[name]
    module = run_file(path)
    obj = getattr(module, name, None)
    listed = ", ".join(models) if models else "none"
    if obj is None:
        from solvers import did_you_mean

        raise SourceError(
            f"{file}: defines no class {name!r} (model classes: "
            f"{listed}).{did_you_mean(name, models)}"
        )
    if isinstance(obj, type) and issubclass(obj, Model) and inspect.isabstract(obj):
        missing = ", ".join(sorted(obj.__abstractmethods__))
        raise SourceError(f"{file}: {name} is abstract; it does not define {missing}")
    if isinstance(obj, type) and issubclass(obj, Model) and _is_model_class(obj):
        return obj  # imported into the file from elsewhere: still the class it names
    if (
        isinstance(obj, type)
        and issubclass(obj, Model)
        and not isinstance(getattr(obj, "name", None), str)
    ):
        raise SourceError(
            f"{file}: {name} sets no name (a class attribute name: ClassVar[str] = ...)"
        )
    raise SourceError(
        f"{file}: {name} is not a model class (expected a subclass of OdeModel, SdeModel, "
        "SpectralPdeModel, GridPdeModel or ParticleModel)"
    )


@functools.cache
def plugin_entry_points() -> dict[str, Any]:
    """The installed entry points (`importlib.metadata.EntryPoint`) of the group
    `simjax.models`, by name (the model's name); the first of a name wins, as
    `importlib.metadata` orders them. (Annotated loosely: a test that re-imports
    `importlib.metadata` makes new EntryPoint classes.)"""
    found: dict[str, Any] = {}
    for ep in importlib.metadata.entry_points(group=PLUGIN_GROUP):
        found.setdefault(ep.name, ep)
    return found


def plugin_origin(name: str) -> str:
    """Where the plugin `name` comes from: `DIST VERSION (module:attr)`."""
    ep = plugin_entry_points()[name]
    dist = ep.dist
    label = f"{dist.name} {dist.version}" if dist is not None else "an installed package"
    return f"{label} ({ep.value})"


@functools.cache
def plugin_class(name: str) -> type[Model]:
    """The model class of the installed plugin `name`.

    Raises:
        SourceError: the entry point cannot be loaded, names no model class of a family,
            or a class whose `name` is not the entry point's name.
    """
    ep = plugin_entry_points()[name]
    where = f"plugin model {name!r} of {plugin_origin(name)}"
    try:
        cls = ep.load()
    except Exception as e:
        raise SourceError(f"{where}: cannot be loaded ({_first_line(e)})") from None
    if not _is_model_class(cls):
        raise SourceError(
            f"{where}: is not a model class of a family (OdeModel, SdeModel, SpectralPdeModel, "
            "GridPdeModel or ParticleModel)"
        )
    if cls.name != name:
        raise SourceError(
            f"{where}: the class is named {cls.name!r}; the entry point's name must be the model's "
            "name"
        )
    return cls
