"""The result of `sim.run` for ODE and PDE models, and its HDF5 run layout."""

from __future__ import annotations

import dataclasses
from typing import Any

import h5py
import numpy as np

from ._store import Result, write_group, write_root_attrs


@dataclasses.dataclass
class RunSink:
    """The run layout (docs/architecture.md, File layouts) (ODE and PDE), written frame by frame: `/time`,
    `/observables/<name>` [T, ...], `/params`, `/initial`, further groups (`/grid`),
    `/stats` (attributes)."""

    model: str
    config: str
    time: np.ndarray
    params: dict[str, Any]
    initial: dict[str, Any]
    groups: dict[str, dict[str, Any]] = dataclasses.field(default_factory=dict)
    seed: int | None = None

    def create(self, f: h5py.File, rows: dict[str, np.ndarray]) -> None:
        write_root_attrs(f, format="simjax.run", model=self.model, config=self.config, seed=self.seed)
        f.create_dataset("time", data=np.asarray(self.time))
        group = f.create_group("observables")
        frames = len(self.time)
        for name, values in rows.items():
            values = np.asarray(values)
            group.create_dataset(name, shape=(frames, *values.shape[1:]), dtype=values.dtype, fillvalue=_fill(values.dtype))
        write_group(f, "params", self.params)
        write_group(f, "initial", self.initial)
        for name, values in self.groups.items():
            write_group(f, name, values)

    def write(self, f: h5py.File, k: int, rows: dict[str, np.ndarray]) -> None:
        for name, values in rows.items():
            values = np.asarray(values)
            f["observables"][name][k : k + values.shape[0]] = values

    def finish(self, f: h5py.File, stats: dict[str, Any]) -> None:
        group = f.require_group("stats")
        for key, value in stats.items():
            group.attrs[key] = value


def _fill(dtype: np.dtype):
    return np.nan if np.issubdtype(dtype, np.floating) else 0


@dataclasses.dataclass
class RunResult(Result):
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

    def to_xarray(self):
        """An `xarray.Dataset`: every observable over `time`; trailing axes that match the
        grid of a PDE run are its coordinates (`x`, `y`, ...), other axes `<name>_axis_<i>`
        (the paths of an SDE ensemble, the components of a vector observable).

        Raises:
            ImportError: xarray is not installed.
        """
        import xarray as xr

        grid = {name: np.asarray(value) for name, value in self.groups.get("grid", {}).items()}
        grid_shape = tuple(len(v) for v in grid.values())
        data = {}
        for name, value in self.observables.items():
            value = np.asarray(value)
            rest = value.shape[1:]
            on_grid = bool(grid) and len(rest) >= len(grid_shape) and rest[len(rest) - len(grid_shape):] == grid_shape
            other = len(rest) - (len(grid_shape) if on_grid else 0)
            dims = ["time", *(f"{name}_axis_{i}" for i in range(other)), *(grid if on_grid else ())]
            data[name] = (dims, value)
        attrs = {"model": self.model, "config": self.config, **({"seed": self.seed} if self.seed is not None else {})}
        return xr.Dataset(data, coords={"time": np.asarray(self.time), **grid}, attrs=attrs)

    def write(self, f: h5py.File) -> None:
        """The run layout (docs/architecture.md, File layouts) in `f`."""
        sink = RunSink(self.model, self.config, self.time, self.params, self.initial, self.groups, self.seed)
        sink.create(f, self.observables)
        sink.write(f, 0, self.observables)
        sink.finish(f, self.stats)

    def __repr__(self) -> str:
        names = ", ".join(self.observables)
        return f"RunResult(model={self.model!r}, T={len(self.time)}, observables=[{names}])"
