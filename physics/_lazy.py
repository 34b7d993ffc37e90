"""Names of a package loaded on first use: what its modules hold is imported only when a
name is asked for (`import physics.md` stays light)."""

from __future__ import annotations

import importlib
from collections.abc import Callable


def lazy_names(
    package: str, names: dict[str, tuple[str, str]], namespace: dict
) -> tuple[Callable, Callable]:
    """The module-level `__getattr__` and `__dir__` of `package`, whose `names` map each
    public name to (module relative to the package, name in that module); a name loaded
    once is kept in the package's `namespace` (its globals)."""

    def __getattr__(name: str):
        try:
            module, attribute = names[name]
        except KeyError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        value = getattr(importlib.import_module(module, package), attribute)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*namespace, *names})

    return __getattr__, __dir__
