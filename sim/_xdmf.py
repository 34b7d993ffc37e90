"""XDMF sidecars of PDE run files: a small XML file beside `run.h5` (`run.xdmf`) through
which ParaView and VisIt read the fields of the HDF5 file itself, frame by frame.

The sidecar is XDMF 3: a temporal collection with one uniform grid per save time, each a
`3DRectMesh` whose node coordinates are the file's `/grid/x` (`/grid/y`, `/grid/z`) and
whose attributes are hyperslabs of `/observables/<field>` [T, *points] (one frame each),
named by the HDF5 file's name relative to the sidecar, so the two may be moved together.
Scalar observables [T] are attributes of the whole grid (ParaView's field data).

Axes. XDMF, like VTK, lists a structured mesh's dimensions slowest first, and its X is
the fastest-varying index. simjax stores a field as [T, x, y, z] in C order, z fastest, so
the sidecar's X, Y, Z are the file's last, middle and first grid axes: ParaView shows a 2D
field's `y` along its X axis and `x` along its Y axis (each node at its true coordinates,
the axes exchanged). A 1D field lies along X, a 2D one in the XY plane.

`sim run` writes the sidecar when `[output] xdmf = true` (or `--xdmf`), after the run
file is complete and renamed; a run that fails or is interrupted leaves the files as they
were, and a completed run without it removes the sidecar simjax had written for the file it
replaced (the sidecar would describe another run). `write_xdmf` writes one for any
finished PDE run file.
"""

from __future__ import annotations

import contextlib
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from ._errors import DataError, InputError
from ._lock import exclusive
from ._store import DAMAGED_FILE_ERRORS, atomic_file, check_output_path, error_reason
from ._unfinished import as_text

AXES = ("x", "y", "z")
WRITER = "simjax"


def sidecar_path(path: str | Path) -> Path:
    """The sidecar of a run file: `run.h5` -> `run.xdmf`, in the same folder."""
    return Path(path).with_suffix(".xdmf")


def write_xdmf(path: str | Path) -> Path:
    """Write the XDMF sidecar of a finished PDE run file, for ParaView and VisIt.

    The sidecar (`run.h5` -> `run.xdmf`, beside it) references the run file's datasets by
    its name and dataset paths; nothing is copied. It is written under a temporary name
    and renamed, so an existing sidecar is only replaced by a complete one.

    Arguments:
        path: a PDE run file (`sim run` of a model on a `[grid]`).

    Returns:
        The sidecar's path.

    Raises:
        DataError: the file is missing, unreadable, not a run file, or holds no field on
            a grid (naming the dataset).
        InputError: the sidecar cannot be written there (a folder, a device, read-only),
            or the run file's name has a ':' (which XDMF reads as the end of the name).

    Example:
        >>> sim.run(sim.load_config("experiments/gray_scott.toml"), output="gs.h5")
        >>> sim.write_xdmf("gs.h5")   # open gs.xdmf in ParaView
    """
    path = Path(path)
    target = check_sidecar(path)
    with exclusive(path):
        text = sidecar_text(path)
        _write_atomically(target, text)
    return target


def check_sidecar(
    path: Path, source: str = "", key: str = "", inputs: tuple[Path, ...] = ()
) -> Path:
    """Check, before any work, that the sidecar of `path` can be written: the path it
    names, and the run file's name as XDMF can reference it. Problems name `source` and
    `key` (the config and `output.xdmf`), or the sidecar. Returns the sidecar path."""
    target = sidecar_path(path)
    source = source or str(target)
    if ":" in path.name:
        raise InputError(
            source,
            key,
            f"the run file's name {path.name!r} has a ':', which XDMF reads as the end of a file "
            "name; choose another name",
        )
    if target.name == path.name:
        raise InputError(
            source,
            key,
            f"the run file {path.name!r} ends in .xdmf, the name of its own sidecar; name it .h5",
        )
    check_output_path(target, source, key, inputs=(path, *inputs))
    return target


def check_request(config: Any, plan: Any, output: Path) -> None:
    """Before a run starts: when its config asks for a sidecar, the run has a grid and
    the sidecar can be written (`ConfigError` / `InputError` otherwise)."""
    if not config.spec.output.xdmf:
        return
    if "grid" not in getattr(plan.sink, "groups", {}):
        raise config.error(
            "output.xdmf",
            "an XDMF sidecar holds fields on a grid: it applies to PDE runs, not to this model's; "
            "set it false",
        )
    check_sidecar(output, str(config.source), "output.xdmf", tuple(config.input_files()))


def settle(path: Path, wanted: bool) -> None:
    """After a run wrote `path` completely: write its sidecar when `wanted`, else remove
    a sidecar simjax wrote for the file `path` replaced (it would describe another run)."""
    if wanted:
        write_xdmf(path)
        return
    target = sidecar_path(path)
    if target.is_file() and _written_for(target, path.name):
        with contextlib.suppress(FileNotFoundError):
            target.unlink()


def _written_for(sidecar: Path, name: str) -> bool:
    """Whether `sidecar` is one simjax wrote for the run file called `name`."""
    try:
        root = ET.parse(sidecar).getroot()
    except (ET.ParseError, OSError):
        return False
    info = {i.get("Name"): i.get("Value") for i in root.iter("Information")}
    return info.get("writer") == WRITER and info.get("data") == name


# ----------------------------------------------------------------------------- the XML


def sidecar_text(path: Path) -> str:
    """The XDMF text of the run file `path` (read for its layout: shapes, types, times)."""
    try:
        with h5py.File(path, "r") as f:
            layout = _layout(f, path)
    except DataError:
        raise
    except DAMAGED_FILE_ERRORS as e:
        if not path.exists():
            raise DataError(path, "", "no such file; expected a PDE run file") from None
        raise DataError(path, "", f"not a readable HDF5 file ({error_reason(e)})") from None
    return _xml(path.name, **layout)


def _layout(f: h5py.File, path: Path) -> dict[str, Any]:
    fmt = as_text(f.attrs.get("format", ""))
    if fmt != "simjax.run" or "h5md" in f:
        raise DataError(
            path,
            "format",
            f"is {fmt or 'not a simjax file'!r}{' (an MD run)' if 'h5md' in f else ''}; an XDMF "
            "sidecar describes a PDE run file (simjax.run with /grid)",
        )
    time = _dataset(f, path, "time", ndim=1)
    grid = f.get("grid")
    if not isinstance(grid, h5py.Group):
        raise DataError(
            path,
            "/grid",
            "missing; an XDMF sidecar describes the fields of a PDE run on its grid (an ODE or SDE "
            "run has none)",
        )
    axes = [a for a in AXES if a in grid]
    if not axes or axes != list(AXES[: len(axes)]):
        raise DataError(
            path,
            "/grid",
            f"expected datasets x (and y, z) with the node coordinates, found {sorted(grid)}",
        )
    coords = {a: _dataset(f, path, f"grid/{a}", ndim=1) for a in axes}
    points = tuple(coords[a].shape[0] for a in axes)
    frames = time.shape[0]
    fields, scalars = {}, {}
    observables = f.get("observables")
    for name, item in observables.items() if isinstance(observables, h5py.Group) else ():
        if not isinstance(item, h5py.Dataset) or item.dtype.kind not in "biuf":
            continue
        if item.shape == (frames, *points):
            fields[name] = item
        elif item.shape == (frames,):
            scalars[name] = item
    if not fields:
        raise DataError(
            path,
            "/observables",
            f"no field of shape [{frames}, {', '.join(map(str, points))}] (time by grid) to "
            "describe",
        )
    return {
        "times": [float(t) for t in time[()]],
        "coords": {a: (c.name, c.dtype, c.shape) for a, c in coords.items()},
        "points": points,
        "fields": {n: (d.name, d.dtype, d.shape) for n, d in fields.items()},
        "scalars": {n: (d.name, d.dtype, d.shape) for n, d in scalars.items()},
        "model": as_text(f.attrs.get("model", "")),
    }


def _dataset(f: h5py.File, path: Path, name: str, ndim: int) -> h5py.Dataset:
    item = f.get(name)
    if not isinstance(item, h5py.Dataset):
        raise DataError(path, f"/{name}", "missing; a PDE run file has this dataset")
    if item.ndim != ndim or item.dtype.kind not in "biuf" or item.size == 0:
        raise DataError(
            path,
            f"/{name}",
            f"expected {ndim} dimension(s) of numbers, found shape {item.shape} of {item.dtype}",
        )
    return item


def _number_type(dtype: np.dtype) -> dict[str, str]:
    kind = {"f": "Float", "i": "Int", "u": "UInt", "b": "UChar"}[dtype.kind]
    return {"NumberType": kind, "Precision": str(dtype.itemsize)}


def _dims(shape) -> str:
    return " ".join(str(int(n)) for n in shape)


def _hdf(
    parent: ET.Element, file: str, dataset: tuple[str, np.dtype, tuple[int, ...]]
) -> ET.Element:
    name, dtype, shape = dataset
    item = ET.SubElement(
        parent, "DataItem", Format="HDF", Dimensions=_dims(shape), **_number_type(dtype)
    )
    item.text = f"{file}:{name}"
    return item


def _xml(file: str, *, times, coords, points, fields, scalars, model: str) -> str:
    dim = len(points)
    mesh = (1,) * (3 - dim) + points  # slowest first: the file's x is XDMF's slowest axis
    root = ET.Element("Xdmf", Version="3.0")
    domain = ET.SubElement(root, "Domain")
    ET.SubElement(domain, "Information", Name="writer", Value=WRITER)
    ET.SubElement(domain, "Information", Name="data", Value=file)
    reversed_axes = list(reversed(AXES[:dim]))
    ET.SubElement(
        domain,
        "Information",
        Name="axes",
        Value=", ".join(
            f"{xdmf} = file {ours}" for xdmf, ours in zip("XYZ", reversed_axes, strict=False)
        ),
    )
    series = ET.SubElement(
        domain, "Grid", Name=model or "run", GridType="Collection", CollectionType="Temporal"
    )
    for k, t in enumerate(times):
        grid = ET.SubElement(series, "Grid", Name=f"frame {k}", GridType="Uniform")
        ET.SubElement(grid, "Time", Value=repr(t))
        ET.SubElement(grid, "Topology", TopologyType="3DRectMesh", Dimensions=_dims(mesh))
        geometry = ET.SubElement(grid, "Geometry", GeometryType="VXVYVZ")
        for axis in reversed_axes:  # VX first: the fastest axis
            _hdf(geometry, file, coords[axis])
        for _ in range(3 - dim):  # the flat axes: one node at 0
            item = ET.SubElement(
                geometry,
                "DataItem",
                Format="XML",
                Dimensions="1",
                NumberType="Float",
                Precision="8",
            )
            item.text = "0"
        for name, dataset in fields.items():
            _frame(grid, file, name, "Node", dataset, k, mesh)
        for name, dataset in scalars.items():
            _frame(grid, file, name, "Grid", dataset, k, (1,))
    ET.indent(root, space=" ")
    return (
        '<?xml version="1.0" encoding="utf-8"?>\n<!DOCTYPE Xdmf SYSTEM "Xdmf.dtd" []>\n'
        + ET.tostring(root, encoding="unicode")
        + "\n"
    )


def _frame(grid: ET.Element, file: str, name: str, center: str, dataset, k: int, dims) -> None:
    """An attribute holding frame k of `dataset` [T, ...]: a hyperslab (start, stride,
    count per axis of the dataset)."""
    shape = dataset[2]
    attribute = ET.SubElement(grid, "Attribute", Name=name, AttributeType="Scalar", Center=center)
    slab = ET.SubElement(
        attribute, "DataItem", ItemType="HyperSlab", Dimensions=_dims(dims), Type="HyperSlab"
    )
    rank = len(shape)
    selection = ET.SubElement(
        slab, "DataItem", Format="XML", NumberType="Int", Dimensions=f"3 {rank}"
    )
    start = [k] + [0] * (rank - 1)
    stride = [1] * rank
    count = [1, *shape[1:]]
    selection.text = "\n".join(" ".join(map(str, row)) for row in (start, stride, count))
    _hdf(slab, file, dataset)


def _write_atomically(target: Path, text: str) -> None:
    with atomic_file(target) as tmp:
        tmp.write_text(text, encoding="utf-8")
