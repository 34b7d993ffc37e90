"""Errors a user can act on, and how the command line reports them."""

from __future__ import annotations

import importlib
import shlex
from types import ModuleType


class SimError(Exception):
    """Base of the errors simjax reports to users without a traceback."""


class InputError(SimError, ValueError):
    """Bad input (config, data, arguments): the command line exits with code 2.

    Arguments:
        source: the file (or `--set`, `argument`) the problem is in.
        key: the dotted key path or dataset path inside it ('' when the whole file).
        message: what was expected, and what was found.
    """

    def __init__(self, source: object, key: str, message: str):
        # One line whatever was handed in (a key or value may hold line breaks).
        self.source = _one_line(str(source))
        self.key = _one_line(key)
        self.message = _one_line(message)
        where = f"{self.source}: {self.key}" if self.key else self.source
        super().__init__(f"{where}: {self.message}")


def _one_line(text: str) -> str:
    return text.replace("\r", "\\r").replace("\n", "\\n")


def one_line(text: object) -> str:
    """`text` with its line breaks written as \\n and \\r: what a one-line message prints."""
    return _one_line(str(text))


# How $'...' writes what a shell would not read literally inside it
_ESCAPES = {"\n": "\\n", "\r": "\\r", "\t": "\\t", "\\": "\\\\", "'": "\\'"}


def shown(path: object) -> str:
    """A path (or a word of a command) as a one-line message prints it, so that pasted
    into a shell it names the same file: as it is when a shell reads it so, in single
    quotes when it holds spaces or quotes, and as $'...' with escapes (bash, zsh) when it
    holds a line break or another unprintable character, which no quotes keep on one line."""
    text = str(path)
    if text.isprintable():
        return shlex.quote(text)
    escaped = "".join(
        _ESCAPES.get(
            c,
            c
            if c.isprintable()
            else f"\\x{ord(c):02x}"
            if ord(c) < 0x100
            else f"\\u{ord(c):04x}"
            if ord(c) < 0x10000
            else f"\\U{ord(c):08x}",
        )
        for c in text
    )
    return f"$'{escaped}'"


class ConfigError(InputError):
    """A problem in a TOML config (or an override of it)."""


class DataError(InputError):
    """A problem in an HDF5 file handed in (observations, initial fields, results)."""


class MissingExtra(InputError, ImportError):
    """Work that needs an optional dependency of simjax that is not installed: exit code 2,
    one line naming the extra that installs it (`pip install 'simjax[EXTRA]'`). An
    `ImportError` too, for a program that catches that.

    Arguments:
        needed_by: what needs the extra, as the subject of "need" ("SBML models").
        extra: the extra of simjax that installs it ("sbml").
        source, key: where the work was asked for (a file and its key, an option and its
            value), named before the message; '' when nothing in particular.
        reason: the import's own error, added when it is not the module asked for that is
            missing (a broken install of the extra).
    """

    def __init__(
        self, needed_by: str, extra: str, source: object = "", key: str = "", reason: str = ""
    ):
        self.extra = extra
        message = f"{needed_by} need the {extra!r} extra: pip install 'simjax[{extra}]'"
        if reason:
            message += f" ({reason})"
        InputError.__init__(self, source, key, message)
        if not self.source:  # (the message alone, without a leading ": ")
            Exception.__init__(self, self.message)


def optional_module(
    name: str, extra: str, needed_by: str, source: object = "", key: str = ""
) -> ModuleType:
    """The module `name` of an optional dependency, imported, or `MissingExtra` naming the
    extra of simjax that installs it: what every use of sbml, petab, dask and plot calls
    before its first import of them.

    Arguments:
        name: the module ("libsbml", "petab.v1", "distributed", "matplotlib").
        extra: the extra that installs it ("sbml", "petab", "dask", "plot").
        needed_by: what needs it, as the subject of "need" ("SBML models").
        source, key: where the work was asked for, as `InputError` names them.

    Raises:
        MissingExtra: the module (or one it imports) is not installed.
    """
    try:
        return importlib.import_module(name)
    except ImportError as e:
        missing = (e.name or "").split(".")[0]
        reason = "" if missing == name.split(".")[0] else one_line(e)
        raise MissingExtra(needed_by, extra, source, key, reason) from None


class SimulationError(SimError):
    """A simulation that could not complete (solver failure): exit code 1."""
