"""The target of a g(r) fit: the g(r) that a config's `[data]` names in an HDF5 file
(`rdf`, its bin centres `r`), read and checked against `[rdf]`: the same bins, the same
kernel width, the shape of the species pairs, finite values that are not negative."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pydantic

from sim import Config, DataError
from sim.core import DAMAGED_FILE_ERRORS, RdfSpec, error_reason, numeric_dataset

DEFAULT_DATASET = "/observables/rdf/value"


class RdfDataTable(pydantic.BaseModel):
    """`[data]` of a g(r) fit (an MD config with `[rdf]` and no data time)."""

    file: str = pydantic.Field(
        description="the HDF5 file of the target g(r), relative to the config's folder",
        json_schema_extra={"required": True},
    )
    rdf: str = pydantic.Field(DEFAULT_DATASET, description="the dataset of g(r), [pairs, bins]")
    r: str | None = pydantic.Field(
        None,
        description="the dataset of the bins' centres",
        json_schema_extra={"default": "beside rdf: .../r"},
    )


DATA_KEYS = tuple(RdfDataTable.model_fields)


def _read_target(config: Config, data: str | Path | None, spec: RdfSpec) -> tuple[Path, np.ndarray]:
    """The target g [pairs, bins] named by `[data]`, its r grid checked against `spec`."""
    path, named, name, r_name = _named(config, data)
    g, r, width = _read(path, named, name, r_name)
    _check_grid(path, r_name, r, spec)
    _check_width(path, name, width, spec)
    return path, _checked_values(path, name, g, spec)


def _named(config: Config, data: str | Path | None) -> tuple[Path, str, str, str]:
    """(file, the key that named it, dataset of g, dataset of r) of a g(r) fit's `[data]`
    (`data`: a file that replaces `data.file`), its keys checked."""
    section = config.raw["data"]
    for key in section:
        if key not in DATA_KEYS:
            raise config.error(
                f"data.{key}",
                f"is not a key of a g(r) fit's [data] (keys: {', '.join(DATA_KEYS)}; a fit to time "
                "series names data.time)",
            )
    for key in DATA_KEYS:
        if key in section and not isinstance(section[key], str):
            raise config.error(
                f"data.{key}", f"expected a text (a file or dataset path), got {section[key]!r}"
            )
    if data is None and "file" not in section:
        raise config.error(
            "data.file", "required key is missing (the HDF5 file of the target g(r))"
        )
    path = Path(data) if data is not None else config.resolve_path(section["file"])
    named = "--data" if data is not None else "data.file"
    name = section.get("rdf", DEFAULT_DATASET)
    if "r" in section:
        r_name = section["r"]
    elif name.endswith("/value"):
        r_name = name[: -len("value")] + "r"
    else:
        raise config.error(
            "data.r", f"required key is missing (the dataset of the bin centres of {name})"
        )
    return path, named, name, r_name


def _read(path: Path, named: str, name: str, r_name: str) -> tuple[np.ndarray, np.ndarray, Any]:
    """(g, r, the kernel width g was smoothed with or None) as the file holds them."""
    if not path.is_file():
        raise DataError(
            path, "", f"no such file (named by {named}); expected the HDF5 file of the target g(r)"
        )
    try:
        with h5py.File(path, "r") as f:
            g = numeric_dataset(f, path, name, "data.rdf")
            r = numeric_dataset(f, path, r_name, "data.r")
            width = f[name].attrs.get("width")  # (a g(r) that `sim run` wrote: its kernel width)
    except DataError:
        raise
    except DAMAGED_FILE_ERRORS as e:
        raise DataError(
            path,
            "",
            f"cannot be read ({error_reason(e)}); expected an HDF5 file (named by {named})",
        ) from None
    return g, r, width


def _check_grid(path: Path, r_name: str, r: np.ndarray, spec: RdfSpec) -> None:
    """Refuse bin centres `r` other than those of `[rdf]`."""
    centres = spec.centres()
    if r.shape != centres.shape or not np.allclose(r, centres, rtol=1e-9, atol=1e-12 * spec.r_max):
        raise DataError(
            path,
            r_name,
            f"the target's r grid ({r.size} values, {np.min(r) if r.size else float('nan'):.6g} .. "
            f"{np.max(r) if r.size else float('nan'):.6g}) "
            f"differs from the bin centres of [rdf] ({spec.bins} bins up to r_max = "
            f"{spec.r_max:g}); give the same r_max and bins",
        )


def _check_width(path: Path, name: str, width: Any, spec: RdfSpec) -> None:
    """Refuse a kernel width that is not a number or not the width of `[rdf]`."""
    if width is not None:
        try:
            width = float(np.asarray(width))
        except (TypeError, ValueError):
            raise DataError(
                path,
                name,
                f"its width attribute is {width!r}; expected a number (the kernel width `sim run` "
                "writes)",
            ) from None
    if width is not None and not np.isclose(width, spec.width, rtol=1e-9, atol=1e-12 * spec.r_max):
        raise DataError(
            path,
            name,
            f"the target g(r) was smoothed with a kernel width of {width:.6g}, [rdf] width is "
            f"{spec.width:.6g}; "
            "give the same width (a g(r) smoothed otherwise is not comparable bin by bin)",
        )


def _checked_values(path: Path, name: str, g: np.ndarray, spec: RdfSpec) -> np.ndarray:
    """The target g as [pairs, bins] (the last row of a run's element [T, ...]), refused
    unless it has the shape of `[rdf]`'s pairs and bins and finite values >= 0."""
    pairs = len(spec.pairs)
    shape = (pairs, spec.bins) if pairs > 1 else (spec.bins,)
    if (
        g.shape[1:] == shape and g.ndim == len(shape) + 1
    ):  # a run's element: its last row is the whole average
        if not g.shape[0]:
            raise DataError(
                path,
                name,
                f"holds no rows (shape {g.shape}); expected g(r) of shape {shape} or rows of it",
            )
        g = g[-1]
    if g.shape != shape:
        raise DataError(
            path,
            name,
            f"expected g(r) of shape {shape} (or one row per frame of it, {('T', *shape)}), got "
            f"{g.shape}",
        )
    if not np.all(np.isfinite(g)):
        raise DataError(path, name, "the target g(r) has NaN or infinite values")
    if np.any(g < 0):
        raise DataError(
            path,
            name,
            f"the target g(r) has negative values (down to {np.min(g):.6g}); a g(r) is a ratio of "
            "densities, >= 0",
        )
    with np.errstate(over="ignore"):
        if not np.isfinite(np.sum(np.square(g))):
            raise DataError(
                path,
                name,
                f"the target g(r) has values up to {np.max(g):.6g}, too large for the fit's sum of "
                "squared differences",
            )
    return g.reshape(pairs, spec.bins)
