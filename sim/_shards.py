"""Arrays split over devices, moved to the host one device's block at a time: a run whose
grid is split over devices (`[grid] devices`) writes, checks and checkpoints its fields
block by block, so no whole field is ever gathered onto one device."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import jax
import numpy as np


def is_split(value: Any) -> bool:
    """Whether `value` is a JAX array split over more than one device."""
    return (
        isinstance(value, jax.Array)
        and len(value.sharding.device_set) > 1
        and not value.is_fully_replicated
    )


def blocks(value: Any) -> Iterator[tuple[tuple[slice, ...], np.ndarray]]:
    """(where in `value`, the values there on the host) for each distinct block of an
    array split over devices (a block held by several devices comes once); any other
    value is one block, the whole of it."""
    if not is_split(value):
        whole = np.asarray(value)
        yield (slice(None),) * whole.ndim, whole
        return
    seen = set()
    for shard in value.addressable_shards:
        key = tuple((s.start, s.stop) for s in shard.index)
        if key in seen:
            continue
        seen.add(key)
        yield shard.index, np.asarray(shard.data)


def first_rows(value: Any, count: int) -> Any:
    """The first `count` entries along the first axis: a split array stays split (its
    blocks on their devices), anything else comes to the host."""
    if is_split(value):
        return value[:count]
    return np.asarray(value)[:count]


def write_blocks(dataset, value: Any, offset: int = 0) -> None:
    """Write `value` into `dataset` from row `offset` on, block by block."""
    for index, block in blocks(value):
        rows = index[0] if index else slice(None)
        start = offset + (rows.start or 0)
        target = (slice(start, start + block.shape[0]), *index[1:]) if index else ()
        dataset[target] = block
