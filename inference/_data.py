"""Observations from any HDF5 file, as a config's `[data]` section names them."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pydantic
from pydantic import BaseModel, ConfigDict

from sim import Config, DataError
from sim.core import numeric_dataset, open_hdf5


class DataSection(BaseModel):
    """`[data]`: the file, its time dataset and the dataset of each observed observable."""

    model_config = ConfigDict(extra="forbid", strict=True, use_attribute_docstrings=True)
    file: str | None = None
    """the HDF5 file, relative to the config's folder (`--data` replaces it)"""
    time: str
    """the dataset of the observation times"""
    time_offset: float = 0.0
    """model time = data time - time_offset"""
    observables: dict[str, str]
    """model observable = dataset path, or a table of path, formula, noise and sigma"""
    sigma: dict[str, str] = {}
    """observable = the dataset of its standard deviations"""


@dataclasses.dataclass(frozen=True)
class Observations:
    """Observed values at observation times, in model time.

    Attributes:
        path: the file they came from.
        time: observation times in model time (data time - time_offset), strictly
            increasing [T].
        values: observable name -> observed values [T, ...]; NaN marks a missing value.
        sigma: observable name -> per-point standard deviations [T, ...] (only for the
            observables the config gives a sigma dataset for).
        time_offset: what was subtracted from the data times.
    """

    path: Path
    time: np.ndarray
    values: dict[str, np.ndarray]
    sigma: dict[str, np.ndarray]
    time_offset: float = 0.0

    @property
    def count(self) -> int:
        """Number of observed (non-missing) values."""
        return int(sum(np.sum(np.isfinite(v)) for v in self.values.values()))


def data_section(config: Config) -> DataSection:
    """The validated `[data]` section of a config."""
    raw = config.spec.data
    if raw is None:
        raise config.error(
            "data", "required section is missing (the observations to fit: file, time, observables)"
        )
    try:
        return DataSection.model_validate(raw)
    except pydantic.ValidationError as e:
        err = e.errors()[0]
        key = "data." + ".".join(str(p) for p in err["loc"])
        kind = err["type"]
        if kind == "missing":
            return_msg = "required key is missing"
        elif kind == "extra_forbidden":
            return_msg = f"unknown key (expected one of: {', '.join(DataSection.model_fields)})"
        else:
            return_msg = f"{err['msg'].lower()}, got {err.get('input')!r}"
        raise config.error(key, return_msg) from None


def load_observations(
    config: Config, data: str | Path | None = None, observable_names=None
) -> Observations:
    """Read the observations a config's `[data]` section names.

    Arguments:
        config: the config (its `[data]` section; relative paths are relative to the
            config's folder).
        data: a file that replaces `data.file` (`--data` on the command line).
        observable_names: the model's observables; a data key outside them is an error.

    Raises:
        ConfigError: a bad `[data]` section or an observable the model does not have.
        DataError: a missing file or dataset, a shape mismatch (with `observable_names`,
            each observable's values must be [T, *its shape at one time]: [T] for a
            scalar), values that are not real numbers (complex values are refused), a
            dataset larger than memory (checked before reading), unsorted, duplicate or
            non-finite times (duplicate after the time offset too), infinite values or
            values beyond 1e150, non-positive sigma; names file and dataset.
    """
    section = data_section(config)
    path = _data_file(config, section, data)
    _check_names(config, section, observable_names)
    with open_hdf5(path, "an HDF5 file of observations") as f:
        shapes = observable_shapes(config) if observable_names is not None else {}
        time = _read_time(f, path, section)
        values = _read_values(f, path, section, len(time), shapes)
        sigma = _read_sigma(f, path, section, len(time), shapes, values)
    if not any(np.any(np.isfinite(v)) for v in values.values()):
        raise DataError(path, "", "every observation is missing (NaN)")
    return Observations(
        path=path, time=time, values=values, sigma=sigma, time_offset=section.time_offset
    )


def _data_file(config: Config, section: DataSection, data: str | Path | None) -> Path:
    """The file of the observations: `data` (`--data`), else `data.file`."""
    if data is not None:
        path = Path(data)
    elif section.file is not None:
        path = config.resolve_path(section.file)
    else:
        raise config.error("data.file", "required key is missing (or give --data FILE.h5)")
    return path


def _check_names(config: Config, section: DataSection, observable_names) -> None:
    """Refuse a `[data]` without observables, one the model does not have (with
    `observable_names`), or a sigma of an observable it does not list."""
    if not section.observables:
        raise config.error("data.observables", "expected at least one observable = dataset entry")
    if observable_names is not None:
        for name in list(section.observables) + list(section.sigma):
            if name not in observable_names:
                from solvers import did_you_mean

                key = (
                    f"data.observables.{name}"
                    if name in section.observables
                    else f"data.sigma.{name}"
                )
                raise config.error(
                    key,
                    f"the model has no observable {name!r} (observables: "
                    f"{', '.join(observable_names)}).{did_you_mean(name, observable_names)}",
                )
    for name in section.sigma:
        if name not in section.observables:
            raise config.error(
                f"data.sigma.{name}", f"{name!r} has a sigma but is not listed in data.observables"
            )


def _read_time(f: h5py.File, path: Path, section: DataSection) -> np.ndarray:
    """The observation times in model time (data time - time_offset), checked."""
    raw_time = _dataset(f, path, section.time, "data.time")
    time = _check_times(path, section.time, raw_time) - section.time_offset
    same = np.flatnonzero(np.diff(time) <= 0)
    if same.size:  # (times closer than the rounding of the offset's magnitude)
        i = int(same[0]) + 1
        raise DataError(
            path,
            section.time,
            f"times {float(raw_time[i - 1])!r} and {float(raw_time[i])!r} (index {i}) are the "
            f"same time {float(time[i])!r} after subtracting "
            f"data.time_offset = {section.time_offset:g}; expected times that stay apart (a "
            "smaller offset)",
        )
    return time


def _read_values(
    f: h5py.File, path: Path, section: DataSection, n: int, shapes: dict
) -> dict[str, np.ndarray]:
    """The observed values of each observable [n, ...] (NaN: missing), checked."""
    values = {}
    for name, dataset in section.observables.items():
        values[name] = _values(
            f,
            path,
            dataset,
            f"data.observables.{name}",
            n,
            allow_nan=True,
            shape=shapes.get(name),
        )
        with np.errstate(invalid="ignore"):
            huge = np.abs(values[name]) > 1e150
        if np.any(huge):  # (the losses and likelihoods square residuals of the values)
            raise DataError(
                path,
                dataset,
                f"expected values of magnitude at most 1e150, got {float(values[name][huge][0])!r}",
            )
    return values


def _read_sigma(
    f: h5py.File,
    path: Path,
    section: DataSection,
    n: int,
    shapes: dict,
    values: dict[str, np.ndarray],
) -> dict[str, np.ndarray]:
    """The standard deviations of the observables that have a sigma dataset, checked
    against their values."""
    sigma = {}
    for name, dataset in section.sigma.items():
        s = _values(
            f,
            path,
            dataset,
            f"data.sigma.{name}",
            n,
            allow_nan=False,
            shape=shapes.get(name),
        )
        if s.shape != values[name].shape:
            raise DataError(
                path,
                dataset,
                f"shape {s.shape} does not match {section.observables[name]} {values[name].shape}",
            )
        if np.any(s <= 0):
            raise DataError(path, dataset, "expected positive standard deviations")
        with np.errstate(over="ignore", under="ignore"):
            square = s.astype(float) ** 2
        if not np.all((square > 0) & np.isfinite(square)):  # (the density reads sigma squared)
            raise DataError(
                path,
                dataset,
                "expected standard deviations between 1e-150 and 1e150, got "
                f"{s.flat[int(np.argmax(~((square > 0) & np.isfinite(square))))]!r}",
            )
        sigma[name] = s
    return sigma


def _dataset(f: h5py.File, path: Path, name: str, key: str) -> np.ndarray:
    # Real numbers only (complex values are refused, not cast), its declared size
    # checked against memory before it is read.
    return numeric_dataset(f, path, name, key)


def observable_shapes(config: Config) -> dict[str, tuple[int, ...]]:
    """The shape of each observable of a config's model at one time: () for a scalar
    (ODE states and derived quantities, MD observables, PDE totals), the grid for a PDE
    field. Observed values are [T, *shape]."""
    from sim.core import build_model, family_of

    model = build_model(config)
    return family_of(model).observable_shapes(model)


def _check_times(path: Path, name: str, t: np.ndarray) -> np.ndarray:
    if t.ndim != 1 or t.size < 1:
        raise DataError(path, name, f"expected a 1-D array of times, got shape {t.shape}")
    if not np.all(np.isfinite(t)):
        i = int(np.argmin(np.isfinite(t)))
        raise DataError(path, name, f"expected finite times, got {t[i]} at index {i}")
    steps = np.diff(t)
    if np.any(steps == 0):
        i = int(np.argmax(steps == 0)) + 1
        raise DataError(
            path, name, f"duplicate time {t[i]} at index {i}; expected strictly increasing times"
        )
    if np.any(steps < 0):
        i = int(np.argmax(steps < 0)) + 1
        raise DataError(
            path,
            name,
            f"unsorted: {t[i]} at index {i} follows {t[i - 1]}; expected strictly increasing times",
        )
    return t


def _values(
    f: h5py.File,
    path: Path,
    name: str,
    key: str,
    n: int,
    *,
    allow_nan: bool,
    shape: tuple[int, ...] | None = None,
) -> np.ndarray:
    v = _dataset(f, path, name, key)
    if v.ndim == 0 or v.shape[0] != n:
        raise DataError(path, name, f"shape {v.shape} does not match the {n} observation times")
    if shape is not None and v.shape[1:] != shape:
        each = "one value" if shape == () else f"a field of shape {shape}"
        raise DataError(
            path,
            name,
            f"expected shape {(n, *shape)} ({each} per observation time, named by {key}), got "
            f"shape {v.shape}",
        )
    if np.any(np.isinf(v)):
        raise DataError(path, name, "expected finite values or NaN for missing ones, got infinity")
    if not allow_nan and np.any(np.isnan(v)):
        raise DataError(path, name, "expected finite values, got NaN")
    return v


def check_span(config: Config, obs: Observations, t0: float, t1: float | None) -> None:
    """Every observation time must lie in the simulated span [t0, t1]."""
    first, last = float(obs.time[0]), float(obs.time[-1])
    offset = (
        f" (data time {first + obs.time_offset:g} with time_offset {obs.time_offset:g})"
        if obs.time_offset
        else ""
    )
    if first < t0:
        raise DataError(
            obs.path,
            "",
            f"observation time {first:g}{offset} is before the simulated start time.t0 = {t0:g}",
        )
    if t1 is not None and last > t1:
        raise DataError(
            obs.path, "", f"observation time {last:g} is after the simulated end time.t1 = {t1:g}"
        )


def jsonable(value: Any) -> Any:
    """numpy values as plain Python for TOML/JSON."""
    arr = np.asarray(value)
    return arr.item() if arr.ndim == 0 else arr.tolist()
