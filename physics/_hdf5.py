"""What an HDF5 dataset declares against what it stores.

HDF5 lets a file declare a dataset of any shape and write none of it, or only some of its
chunks: reading it then gives the fill value (zero unless the file sets one) where
nothing was written, with no error. Every reader of user files asks `unstored` before
it reads.
"""

from __future__ import annotations

import math


def unstored(dataset) -> str | None:
    """Why the values of `dataset` (an `h5py.Dataset`) are not all in the file, or None
    when they are (or the dataset is empty, compact, virtual or stored in external files,
    which this does not judge)."""
    import h5py

    size = dataset.size or 0
    if size == 0:
        return None
    plist = dataset.id.get_create_plist()
    layout = plist.get_layout()
    if layout == h5py.h5d.CHUNKED:
        expected = math.prod(
            -(-s // c) for s, c in zip(dataset.shape, dataset.chunks, strict=False)
        )
        stored = dataset.id.get_num_chunks()
        if stored < expected:
            return (
                f"declares {size:,} values (shape {dataset.shape}) in {expected:,} chunks but "
                f"stores only {stored:,} "
                "of them; the values never written would read as its fill value (zeros by default)"
            )
        return None
    if (
        layout == h5py.h5d.CONTIGUOUS
        and plist.get_external_count() == 0
        and dataset.id.get_storage_size() == 0
    ):
        return (
            f"declares {size:,} values (shape {dataset.shape}) but stores none; they would "
            "read as its fill value (zeros by default)"
        )
    return None
