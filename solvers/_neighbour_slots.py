"""The rows of a neighbour list from the candidate test: the test run a block of rows
at a time (`by_row_blocks`, `_apart`), its mask packed into 32-bit words (`_packed`),
and each row's kept candidates moved into the row's slots (`_compact`).

These are the array kernels of a build, shaped for XLA on CPU (what it fuses, how it
runs a gather, what stays in cache): they work on [rows, m] masks of candidates and
[rows, capacity] slots and take the test and the candidates' ids as functions, so they
know nothing of positions, boxes or cells (`_neighbours`).
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Bool, Int, UInt32


def by_row_blocks(
    fn: Callable,
    n: int,
    width: int,
    elements: int = 1 << 18,
    ids: Int[Array, " rows"] | None = None,
):
    """`fn(ids)` for a function of particle ids whose work is [len(ids), width] (ids:
    `arange(n)` unless given), computed a block of rows at a time (`lax.map`) so that
    the [block, width] intermediates stay in cache; the outputs (arrays with a leading
    axis of rows) are concatenated. Blocks hold at most about `elements` entries; one
    block when everything fits, else blocks of equal size (padding at most one row a
    block, where blocks of the largest size would pad the last one by up to a block).
    """
    count = n if ids is None else ids.shape[0]
    most = max(8, elements // max(width, 1))
    if most >= count:
        return fn(jnp.arange(n, dtype=jnp.int32) if ids is None else ids)
    blocks = -(-count // most)
    block = -(-count // blocks)
    at = jnp.minimum(jnp.arange(blocks * block, dtype=jnp.int32), count - 1).reshape(blocks, block)
    out = jax.lax.map(fn, at if ids is None else ids[at])
    return jax.tree.map(lambda a: a.reshape((blocks * block,) + a.shape[2:])[:count], out)


def _apart(fn: Callable, count: int, width: int):
    """`by_row_blocks` of `fn` in two blocks of rows: the loop's boundary keeps what `fn`
    computes out of the fusions around it. XLA on CPU runs a gather as a scalar loop and
    fuses it into the elementwise work that produces its indices or consumes its values,
    which is then not vectorised either; apart, that work is."""
    return by_row_blocks(fn, count, width, elements=width * -(-count // 2))


def _packed(keep: Bool[Array, "rows m"]) -> UInt32[Array, "rows words"]:
    """The mask `keep` padded to a multiple of 32 columns and packed into 32-bit words, in
    one pass over it: bit b of word w is column b * (m / 32) + w, so that the packing ORs
    32 whole slices of words, which vectorises and fuses with the candidate test (packing
    32 neighbouring columns into a word was 10x slower)."""
    rows, m = keep.shape
    n_words = -(-m // 32)
    keep = jnp.pad(keep, ((0, 0), (0, 32 * n_words - m)))
    words = jnp.zeros((rows, n_words), jnp.uint32)
    for bit in range(
        32
    ):  # an OR of 32 slices: one loop over [rows, words] (a sum over an axis was 3x slower)
        words = words | jnp.where(
            keep[:, bit * n_words : (bit + 1) * n_words], jnp.uint32(1 << bit), jnp.uint32(0)
        )
    return words


def _compact(
    words: UInt32[Array, "rows words"],
    m: int,
    ids_of: Callable[
        [Int[Array, " rows"], Int[Array, "rows capacity"]], Int[Array, "rows capacity"]
    ],
    capacity: int,
    n: int,
) -> tuple[Int[Array, "rows capacity"], Int[Array, " rows"]]:
    """The kept candidates of every row, in candidate order, as a [rows, capacity] array
    padded with n, from the mask of m candidates packed by `_packed`
    (`ids_of(rows, columns)`: the ids of the candidates in those columns of those rows);
    also the full count per row (which may exceed capacity).

    Slot s of a row is in the last word whose kept candidates before it number at most
    s: one pass over the words, each a select on [rows, capacity] arrays, all fused into
    one loop (a binary search over the words with gathers took 4x longer), and its bit is
    found by a binary search within the word using `population_count`. Everything works
    on [rows, m / 32] and [rows, capacity] arrays, so no prefix sum, sort or scatter runs
    over all candidates. The slots follow the words, not the columns: the order of a row
    is fixed by the candidates, whatever the capacity.

    The ids are looked up apart from the search, in a loop of two halves (whose boundary
    XLA does not fuse across): fused into the elementwise search, the gathers kept XLA on
    CPU from vectorising it (on one core at 32,000 particles, a build took 157-164 ms with
    the lookup fused into a search done a block of rows at a time, 67-72 ms so). The running
    count of kept candidates is a product with a triangular matrix of ones, exact in
    float32 up to 2^24 candidates a row (XLA's cumulative sum, a reduce-window on CPU,
    made the build 4-5 ms longer of 55).
    """
    rows, n_words = words.shape
    per_word = jax.lax.population_count(words).astype(jnp.int32)
    triangle = jnp.asarray(np.triu(np.ones((n_words, n_words), np.float32)))
    running = jnp.dot(per_word.astype(jnp.float32), triangle).astype(
        jnp.int32
    )  # kept up to and including each word
    before = running - per_word
    count = running[:, -1]
    slot = jnp.arange(capacity, dtype=jnp.int32)[None, :]

    # each word's first slot and its own number in one integer (two selects a step, not three)
    shift = max(n_words - 1, 1).bit_length()
    key = jnp.left_shift(before, shift) | jnp.arange(n_words, dtype=jnp.int32)
    last = jnp.left_shift(slot, shift) | (
        (1 << shift) - 1
    )  # the largest key a word starting at `slot` has

    def scan_word(v, found):
        key_here, word = found
        k = jax.lax.dynamic_index_in_dim(key, v, axis=1)
        here = k <= last
        return jnp.where(here, k, key_here), jnp.where(
            here, jax.lax.dynamic_index_in_dim(words, v, axis=1), word
        )

    found = (jnp.zeros((rows, capacity), jnp.int32), jnp.zeros((rows, capacity), jnp.uint32))
    if n_words <= 64:  # unrolled: one fused loop over the slots
        for v in range(n_words):
            found = scan_word(v, found)
    else:
        found = jax.lax.fori_loop(0, n_words, scan_word, found)
    key_here, word = found
    w = key_here & ((1 << shift) - 1)
    base = jnp.right_shift(key_here, shift)
    rank = slot - base
    # b = the largest bit position with at most `rank` kept bits below it: the slot's bit
    b = jnp.zeros((rows, capacity), jnp.uint32)
    for step in (16, 8, 4, 2, 1):
        trial = b + jnp.uint32(step)
        lower = jax.lax.population_count(
            word & (jnp.left_shift(jnp.uint32(1), trial) - jnp.uint32(1))
        )
        b = jnp.where(lower.astype(jnp.int32) <= rank, trial, b)
    column = jnp.minimum(b.astype(jnp.int32) * n_words + w, m - 1)
    column = jnp.where(slot < count[:, None], column, -1)

    def lookup(r):
        c = column[r]
        return jnp.where(c >= 0, ids_of(r, jnp.maximum(c, 0)), n).astype(jnp.int32)

    index = _apart(lookup, rows, capacity)
    return index, count
