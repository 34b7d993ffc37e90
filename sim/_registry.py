"""Models by name: what `sim models` lists and configs name."""

from __future__ import annotations

import dataclasses

from physics import Model
from solvers import did_you_mean

# Filled by the family modules (each registers its built-in models) and by users.
_MODELS: dict[str, type[Model]] = {}


def register_model(cls: type[Model]) -> type[Model]:
    """Make a model class available by its `name` to `get_model` and configs."""
    if cls.name in _MODELS and _MODELS[cls.name] is not cls:
        raise ValueError(f"a model named {cls.name!r} is already registered")
    _MODELS[cls.name] = cls
    return cls


def model_names() -> list[str]:
    """Registered model names, sorted."""
    return sorted(_MODELS)


def model_class(name: str) -> type[Model]:
    """The class registered under `name`; ValueError with a suggestion otherwise."""
    try:
        return _MODELS[name]
    except KeyError:
        raise ValueError(
            f"unknown model {name!r}; `sim models` lists them.{did_you_mean(name, _MODELS)}"
        ) from None


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
                f"model {name!r} has no option {key!r} (options: {expected}).{did_you_mean(key, allowed)}"
            )
    return cls(**options)
