"""Models by name: what `sim models` lists and configs name. The built-in models (and
those registered from Python) come first; installed plugins (entry-point group
`simjax.models`) add theirs under names no built-in model takes."""

from __future__ import annotations

import dataclasses
import importlib

from physics import Model
from solvers import did_you_mean

from ._sources import plugin_class, plugin_entry_points

# Filled by the family modules (each registers its built-in models) and by users.
_MODELS: dict[str, type[Model]] = {}
# Built-in models registered by name before their module is imported: name -> (module,
# class name).
_DEFERRED: dict[str, tuple[str, str]] = {}


def register_model(cls: type[Model]) -> type[Model]:
    """Make a model class available by its `name` to `get_model` and configs."""
    if cls.name in _DEFERRED:
        _load(cls.name)
    if cls.name in _MODELS and _MODELS[cls.name] is not cls:
        raise ValueError(f"a model named {cls.name!r} is already registered")
    _MODELS[cls.name] = cls
    return cls


def register_models_of(module: str, classes: dict[str, str]) -> None:
    """Register built-in models by name without importing them: `classes` maps each
    registry name to the name of its class in `module`, imported when one of them is
    first asked for (`model_class`), so that a run of one model does not import every
    model of every family."""
    for name, attribute in classes.items():
        if name in _MODELS or name in _DEFERRED:
            raise ValueError(f"a model named {name!r} is already registered")
        _DEFERRED[name] = (module, attribute)


def _load(name: str) -> type[Model]:
    module, attribute = _DEFERRED[name]
    cls = getattr(importlib.import_module(module), attribute)
    if cls.name != name:
        raise ValueError(
            f"{module}.{attribute} is registered as {name!r} but calls itself {cls.name!r}"
        )
    del _DEFERRED[name]
    _MODELS[name] = cls
    return cls


def model_names() -> list[str]:
    """Registered and installed (plugin) model names, sorted."""
    return sorted(set(_MODELS) | set(_DEFERRED) | set(plugin_entry_points()))


def is_plugin(name: str) -> bool:
    """Whether `name` is an installed plugin's model (and not a registered one)."""
    return name not in _MODELS and name not in _DEFERRED and name in plugin_entry_points()


def model_class(name: str) -> type[Model]:
    """The class registered under `name`, else the installed plugin of that name.

    Raises:
        ValueError: an unknown name (with a suggestion), or a plugin that cannot be
            loaded (`SourceError`, one line naming its package).
    """
    if name in _MODELS:
        return _MODELS[name]
    if name in _DEFERRED:
        return _load(name)
    if name in plugin_entry_points():
        return plugin_class(name)
    raise ValueError(
        f"unknown model {name!r}; `sim models` lists them.{did_you_mean(name, model_names())}"
    )


def model_options(cls: type[Model]) -> tuple[str, ...]:
    """Names of the options (constructor fields) a model class takes."""
    return tuple(f.name for f in dataclasses.fields(cls) if f.init)


def get_model(name: str, **options) -> Model:
    """Build the model registered under `name` with its options.

    Arguments:
        name: a registry name (`sim.model_names()`).
        **options: the model's constructor fields (for example a PDE's grid); an unknown
            option is an error, never ignored.

    Raises:
        ValueError: unknown name or option (with a suggestion when one is close).

    Example:
        >>> model = get_model("lotka_volterra")
    """
    cls = model_class(name)
    allowed = model_options(cls)
    for key in options:
        if key not in allowed:
            expected = ", ".join(allowed) if allowed else "none"
            raise ValueError(
                f"model {name!r} has no option {key!r} (options: "
                f"{expected}).{did_you_mean(key, allowed)}"
            )
    return cls(**options)
