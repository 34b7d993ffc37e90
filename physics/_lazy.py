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
    once is kept in the package's `namespace` (its globals).

    Arguments:
        package: the package's full name (`__name__`), to which the modules are relative.
        names: public name -> (module, attribute): the module relative to `package`
            (such as "._text") and the name the value has there.
        namespace: the package's globals (`globals()`), where loaded names are kept.

    Returns:
        (`__getattr__`, `__dir__`): the first loads a name of `names` on first use and
        raises AttributeError for any other; the second lists the names in `namespace`
        and `names`, sorted.
    """

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
