"""The checkpoint of a chunk of a framed sweep stopped between calls: written into one
HDF5 file beside the output, and read back only for the same config, inputs and batch
size."""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path
from typing import TYPE_CHECKING

import h5py
import jax
import numpy as np

from ._errors import DataError, InputError
from ._identity import InputIdentity
from ._store import DAMAGED_FILE_ERRORS, atomic_h5, error_reason
from ._sweep_frames import FramedRunner
from ._unfinished import as_text, checkpoint_path, config_difference, read_leaves, write_tree

if TYPE_CHECKING:
    from ._sweep import Prepared


CHUNK_CHECKPOINT_FORMAT = "simjax.sweep-checkpoint"


@dataclasses.dataclass(frozen=True)
class ChunkCheckpoint:
    """A chunk of a framed sweep stopped between calls: its index, the frames done, the
    runs' carry (stored leaves) and, for save = "full", the frames kept so far."""

    chunk: int
    frame: int
    leaves: list
    frames: dict[str, np.ndarray]


def _digest(inputs: dict) -> str:
    """A digest of a chunk's inputs (run indices and swept values)."""
    h = hashlib.sha256()
    for leaf in jax.tree.leaves(inputs):
        h.update(np.ascontiguousarray(leaf).tobytes())
    return h.hexdigest()


def _write_chunk_checkpoint(
    output,
    text: str,
    identity: InputIdentity,
    padded: int,
    inputs: dict,
    k: int,
    done: int,
    carry,
    frames: dict[str, np.ndarray],
) -> Path:
    """Checkpoint chunk k of the sweep into `output` (written under a temporary name,
    then renamed); returns its path."""
    with atomic_h5(checkpoint_path(output)) as f:
        f.attrs["format"] = CHUNK_CHECKPOINT_FORMAT
        f.attrs["config"] = text
        identity.write(f.attrs)
        f.attrs["padded"] = int(padded)
        f.attrs["chunk"] = int(k)
        f.attrs["runs"] = _digest(inputs)  # (the chunk's runs; `inputs` holds the files' digests)
        f.attrs["frame"] = int(done)
        write_tree(f.create_group("carry"), carry)
        group = f.create_group("frames")
        for name, value in frames.items():
            group.create_dataset(name, data=value)
    return checkpoint_path(output)


def _read_chunk_checkpoint(
    output, prep: Prepared, padded: int, runner: FramedRunner
) -> ChunkCheckpoint:
    """The checkpoint of the sweep into `output`, checked against the sweep.

    Raises:
        DataError: unreadable, or not a checkpoint of this sweep's chunks.
        InputError: written by a sweep of another config or batch size.
    """
    source = checkpoint_path(output)
    try:
        with h5py.File(source, "r") as f:
            if f.attrs.get("format") != CHUNK_CHECKPOINT_FORMAT:
                raise DataError(
                    source,
                    "format",
                    "is not a simjax sweep checkpoint; delete it to compute its chunk again",
                )
            stored, stored_padded = as_text(f.attrs.get("config", "")), int(f.attrs["padded"])
            k, done, digest = int(f.attrs["chunk"]), int(f.attrs["frame"]), as_text(f.attrs["runs"])
            leaves = read_leaves(f["carry"])
            attrs = dict(f.attrs)
            kept = {name: np.asarray(d[()]) for name, d in f["frames"].items()}
    except (*DAMAGED_FILE_ERRORS, KeyError, ValueError, TypeError) as e:
        if isinstance(e, DataError):
            raise
        raise DataError(
            source, "", f"cannot be read ({error_reason(e)}); delete it to compute its chunk again"
        ) from None
    difference = config_difference(stored, prep.text)
    if difference:
        raise InputError(
            source,
            "config",
            f"the checkpoint belongs to a sweep of a different config ({difference})",
        )
    prep.identity.check(attrs, source, "sweep")
    if stored_padded != padded:
        raise InputError(
            source,
            "padded",
            f"was written for chunks of {stored_padded} runs, this sweep computes {padded}: resume "
            "with the --devices it was started with",
        )
    frames = runner.frames
    if not (0 <= k < prep.chunks and 0 < done < frames) or digest != _digest(
        prep.inputs(k, padded)
    ):
        raise DataError(
            source,
            "chunk",
            f"does not hold frame {done} of chunk {k} of this sweep ({prep.chunks} chunks of "
            f"{frames} frames); delete it to compute the chunk again",
        )
    wanted = (
        {name: ((padded, done + 1, *r.shape), np.dtype(r.dtype)) for name, r in runner.rows.items()}
        if runner.save == "full"
        else {}
    )
    if set(kept) != set(wanted):
        raise DataError(
            source, "frames", f"holds frames of {sorted(kept)}; this sweep keeps {sorted(wanted)}"
        )
    for name, (shape, dtype) in wanted.items():
        if kept[name].shape != shape or kept[name].dtype != dtype:
            raise DataError(
                source,
                f"frames/{name}",
                f"has shape {kept[name].shape} and dtype {kept[name].dtype}; this sweep needs "
                f"{shape} {dtype}",
            )
    return ChunkCheckpoint(chunk=k, frame=done, leaves=leaves, frames=kept)
