"""Errors a user can act on, and how the command line reports them."""

from __future__ import annotations


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


class ConfigError(InputError):
    """A problem in a TOML config (or an override of it)."""


class DataError(InputError):
    """A problem in an HDF5 file handed in (observations, initial fields, results)."""


class SimulationError(SimError):
    """A simulation that could not complete (solver failure): exit code 1."""
