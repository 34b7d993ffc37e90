"""The result of `sim.run` for ODE and PDE models, and its HDF5 run layout."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np

from ._store import atomic_h5, write_group, write_root_attrs


@dataclasses.dataclass
class RunResult:
    """A finished run: times, observables, the parameters and initial state it used.

    Attributes:
        model: the registry name of the model.
        config: the resolved config as TOML text (every default filled in).
        time: save times [T].
        observables: name -> array [T, ...].
        params: name -> value.
        initial: state component (or field) name -> value.
        groups: further groups of the file, e.g. {"grid": {"x": ...}} for PDEs.
        stats: solver statistics (num_steps, result).
        seed: the seed used, if any.
    """

    model: str
    config: str
    time: np.ndarray
    observables: dict[str, np.ndarray]
    params: dict[str, Any]
    initial: dict[str, Any]
    groups: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    stats: dict[str, Any] = dataclasses.field(default_factory=dict)
    seed: int | None = None

    def save(self, path: str | Path) -> Path:
        """Write the run layout of DESIGN.md to `path` atomically; returns the path."""
        path = Path(path)
        with atomic_h5(path) as f:
            write_root_attrs(f, format="simjax.run", model=self.model, config=self.config, seed=self.seed)
            f.create_dataset("time", data=np.asarray(self.time))
            write_group(f, "observables", self.observables)
            write_group(f, "params", self.params)
            write_group(f, "initial", self.initial)
            for name, values in self.groups.items():
                write_group(f, name, values)
            stats = f.create_group("stats")
            for key, value in self.stats.items():
                stats.attrs[key] = value
        return path

    def __repr__(self) -> str:
        names = ", ".join(self.observables)
        return f"RunResult(model={self.model!r}, T={len(self.time)}, observables=[{names}])"
