"""Trained models in HDF5 files (what `save_trained` writes, what `load_trained`
reads): root attributes `format = "simjax.trained"`, `model` (registry name),
`model_options` (JSON of the model's static options) and the common ones; `/params`
holds the parameters serialised by `equinox.tree_serialise_leaves` (uint8 bytes),
`/param_names` their top-level names, `/loss_history` the training loss per step.
"""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import equinox as eqx
import h5py
import jax
import numpy as np
from jaxtyping import PyTree

import sim
from physics.ode import OdeModel
from sim import DataError
from sim.core import atomic_h5, model_options, open_hdf5, write_root_attrs

TRAINED_FORMAT = "simjax.trained"


def _options(model: OdeModel) -> dict[str, Any]:
    """The model's static options by name (tuples as lists, as JSON keeps them)."""
    out = {}
    for name in model_options(type(model)):
        value = getattr(model, name)
        out[name] = list(value) if isinstance(value, tuple) else value
    return out


def save_trained(
    path: str | Path,
    model: OdeModel,
    params: PyTree,
    *,
    loss_history: np.ndarray | None = None,
) -> Path:
    """Write a trained model: its registry name and static options, and its parameters
    (`equinox.tree_serialise_leaves`), atomically (layout in this module's docstring).

    Arguments:
        path: the HDF5 file to write (replaced if it exists).
        model: the model, of a registered class.
        params: its parameters; missing ones are filled by their defaults
            (`sim.complete_params`).
        loss_history: the training loss per step [steps], written as `/loss_history`;
            None writes none.

    Returns:
        `path` as a `Path`.

    Raises:
        ValueError: a model that is not registered (`sim.register_model`), or params
            whose structure is not the model's.

    Example:
        >>> save_trained("spiral_trained.h5", model, params)
        >>> model, params = load_trained("spiral_trained.h5")
    """
    path = Path(path)
    if sim.model_class(model.name) is not type(model):
        raise ValueError(
            f"model {model.name!r} is not the registered class; register it with sim.register_model"
        )
    params = sim.complete_params(model, params)
    like = model.default_params()
    if jax.tree.structure(like) != jax.tree.structure(params):
        raise ValueError(
            f"params do not have the structure of {model.name!r}'s parameters "
            f"({jax.tree.structure(like)})"
        )
    buffer = io.BytesIO()
    eqx.tree_serialise_leaves(buffer, params)
    options = _options(model)
    with atomic_h5(path) as f:
        write_root_attrs(f, format=TRAINED_FORMAT, model=model.name, config="")
        f.attrs["model_options"] = json.dumps(options)
        f.create_dataset("params", data=np.frombuffer(buffer.getvalue(), dtype=np.uint8))
        f.create_dataset("param_names", data=np.array(list(params), dtype=h5py.string_dtype()))
        if loss_history is not None:
            f.create_dataset("loss_history", data=np.asarray(loss_history, dtype=float))
    return path


def load_trained(path: str | Path) -> tuple[OdeModel, PyTree]:
    """Read a model written by `save_trained`: the model rebuilt from its name and
    options, and its parameters, bit for bit.

    Raises:
        DataError: a missing or unreadable file, a file of another format, an unknown
            model or option, or parameters that do not fit the model.
    """
    path = Path(path)
    with open_hdf5(path, "a trained-model HDF5 file") as f:
        fmt = f.attrs.get("format", "")
        fmt = fmt.decode() if isinstance(fmt, bytes) else str(fmt)
        if fmt != TRAINED_FORMAT:
            raise DataError(
                path,
                "format",
                f"expected a {TRAINED_FORMAT!r} file (written by save_trained), got format {fmt!r}",
            )
        name = str(f.attrs.get("model", ""))
        try:
            options = json.loads(f.attrs.get("model_options", "{}"))
            model = sim.get_model(name, **options)
        except (ValueError, TypeError) as e:
            raise DataError(path, "model_options", str(e)) from None
        if "params" not in f:
            raise DataError(path, "params", "no such dataset (the serialised parameters)")
        raw = np.asarray(f["params"][()], dtype=np.uint8).tobytes()
    like = model.default_params()
    try:
        params = eqx.tree_deserialise_leaves(io.BytesIO(raw), like)
    except Exception as e:  # a truncated or foreign byte stream
        raise DataError(
            path, "params", f"parameters do not fit model {name!r} with these options ({e})"
        ) from None
    return model, params
