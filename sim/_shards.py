"""Arrays split over devices, moved to the host one device's block at a time: a run whose
grid is split over devices (`[grid] devices`) writes, checks and checkpoints its fields
block by block, so no whole field is ever gathered onto one device."""

from __future__ import annotations

import functools
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
    value is one block, the whole of it.

    An array split over the devices of several processes (`--distributed`) yields every
    block on every process, in the same order, each gathered from the process that holds
    it (a collective per block: every process iterates the blocks together), so that the
    lead can write them while no process holds more than a block of another's."""
    if not is_split(value):
        whole = np.asarray(value)
        yield (slice(None),) * whole.ndim, whole
        return
    if not value.is_fully_addressable:
        yield from _gathered_blocks(value)
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
    """Write `value` into `dataset` from row `offset` on, block by block. The processes
    of a distributed run other than the lead take part in gathering the blocks and
    write nothing."""
    from ._processes import lead

    if not lead():
        for _ in blocks(value):
            pass
        return
    for index, block in blocks(value):
        rows = index[0] if index else slice(None)
        start = offset + (rows.start or 0)
        target = (slice(start, start + block.shape[0]), *index[1:]) if index else ()
        dataset[target] = block


def _gathered_blocks(value: jax.Array) -> Iterator[tuple[tuple[slice, ...], np.ndarray]]:
    """The distinct blocks of an array split over several processes, each copied onto
    every device (the lead's among them) and read from this process's first one."""
    indices = value.sharding.devices_indices_map(value.shape)
    seen = {}
    for device in sorted(indices, key=lambda d: d.id):
        index = indices[device]
        key = tuple((s.start, s.stop, s.step) for s in index)
        seen.setdefault(key, index)
    whole = jax.sharding.NamedSharding(
        jax.sharding.Mesh(
            np.asarray(sorted(value.sharding.device_set, key=lambda d: d.id)), ("all",)
        ),
        jax.sharding.PartitionSpec(),
    )
    for key, index in seen.items():
        block = _block_copier(key, whole)(value)
        yield index, np.asarray(block.addressable_data(0))


@functools.lru_cache(maxsize=256)
def _block_copier(key: tuple, whole) -> Any:
    """A compiled copy of the block `key` (start, stop, step per axis) of an array onto
    every device of `whole`."""
    index = tuple(slice(*k) for k in key)
    return jax.jit(lambda v: v[index], out_shardings=whole)
