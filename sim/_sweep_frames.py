"""Sweep chunks advanced a few saved frames at a time, so that a chunk of long runs is
checkpointed and can be stopped between calls.

A family that describes one run as an engine problem (`Family.sweep_problem`: `init`,
`advance(state, frames, capacity)`, `num_steps`, the protocol `sim._run.LoopEngine`
drives) has its sweep chunks computed by `FramedRunner`. The runs of a chunk are
vmapped; each call advances all of them by some saved frames and carries what the sweep
keeps of each run (`Carry`): whether it is still good (solver result, finite values, the
`[checks]` bounds of its family, whose reference is frame 0), its first failure code, its
frame-0 observables, and what its save mode keeps (the last frame; or the running
minimum, maximum and sum with the last frame). A problem's numbers never depend on where
calls fall, and the carry is updated frame by frame in order (sums too), so a chunk gives
the same bits however it is cut: in calls sized by wall time, in one process or across a
resume, on a Dask worker.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, PyTree

from solvers import on_batch_shards

from ._distributed import batch_sharding
from ._processes import fetch
from ._stream import CHUNK_BYTES, ChunkSizer, _now
from ._sweep_spec import SUMMARY_STATS
from ._sweep_store import FAILED, OK


class Carry(eqx.Module):
    """What a sweep keeps of one run between calls (batched over a chunk's runs)."""

    state: PyTree  # the problem's loop state
    ok: Array  # bool: every frame so far good
    result: Array  # int32: the first non-zero result code of the solver, else 0
    first: dict  # the observables of frame 0
    kept: dict  # per observable: {"final"} or {"final", "min", "max", "sum"}
    frames: Array  # int32: the frames given out so far (frame 0 included)


def _problem(s, family, x: dict):
    """The engine problem of run `x` (index, swept params and initial values)."""
    params = {**s.params, **x["params"]}
    initial = {**s.initial, **x["initial"]} if x["initial"] else s.initial
    key = None if s.key is None else jax.random.fold_in(s.key, x["index"])
    return family.sweep_problem(s, params, initial, key)


def _floating(dtype) -> bool:
    return jnp.issubdtype(dtype, jnp.floating)


def _extreme(dtype, high: bool) -> Array:
    if _floating(dtype):
        return jnp.asarray(jnp.inf if high else -jnp.inf, dtype)
    info = jnp.iinfo(dtype)
    return jnp.asarray(info.max if high else info.min, dtype)


def _sum_dtype(dtype):
    return dtype if _floating(dtype) else jnp.float64


def _start_one(s, family, save: str, rows: dict[str, jax.ShapeDtypeStruct], x: dict) -> Carry:
    state = _problem(s, family, x).init()
    zeros = {name: jnp.zeros(r.shape, r.dtype) for name, r in rows.items()}
    kept: dict[str, dict[str, Array]] = {}
    if save != "full":
        for name, z in zeros.items():
            kept[name] = {"final": z}
            if save == "summary":
                kept[name].update(
                    min=_extreme(z.dtype, True),
                    max=_extreme(z.dtype, False),
                    sum=jnp.zeros((), _sum_dtype(z.dtype)),
                )
    return Carry(
        state=state,
        ok=jnp.asarray(True),
        result=jnp.zeros((), jnp.int32),
        first=zeros,
        kept=kept,
        frames=jnp.zeros((), jnp.int32),
    )


def _advance_one(
    s,
    family,
    save: str,
    bounds,
    capacity: int,
    frames_total: int,
    x: dict,
    carry: Carry,
    count,
    is_first,
):
    """One run: `count` more frames (frame 0 among them when `is_first`); returns the
    new carry, the frames [capacity, ...] (for save = "full"; else None) and the run's
    outputs as they stand (complete after the last call)."""
    problem = _problem(s, family, x)
    state, saved, code = problem.advance(carry.state, count, capacity)
    saved = {name: v[:capacity] for name, v in saved.items()}  # (some loops keep a spare row)
    count = jnp.asarray(count, jnp.int32)
    valid = jnp.arange(capacity, dtype=jnp.int32) < count
    first = {name: jnp.where(is_first, v[0], carry.first[name]) for name, v in saved.items()}

    def masked(name: str, v: Array) -> Array:  # rows beyond `count` replaced by frame 0
        return jnp.where(valid.reshape((-1,) + (1,) * (v.ndim - 1)), v, first[name][None])

    rows = {name: masked(name, v) for name, v in saved.items()}
    ok = carry.ok & (code == 0)
    for v in rows.values():
        if _floating(v.dtype):
            ok = ok & jnp.all(jnp.isfinite(v))
    if bounds is not None:
        ok = ok & bounds(
            {name: jnp.concatenate([first[name][None], v]) for name, v in rows.items()}
        )
    result = jnp.where(carry.result == 0, jnp.asarray(code, jnp.int32), carry.result)
    kept = {}
    for name, k in carry.kept.items():
        v = rows[name]
        new = {"final": jax.lax.dynamic_index_in_dim(v, count - 1, keepdims=False)}
        if save == "summary":
            new["min"] = jnp.minimum(k["min"], jnp.min(v))
            new["max"] = jnp.maximum(k["max"], jnp.max(v))
            per_frame = jnp.sum(v.reshape(capacity, -1).astype(k["sum"].dtype), axis=1)

            def add(total, z):  # in frame order, whatever the calls: the same sum
                value, take = z
                return jnp.where(take, total + value, total), None

            new["sum"], _ = jax.lax.scan(add, k["sum"], (per_frame, valid))
        kept[name] = new
    carry = Carry(
        state=state, ok=ok, result=result, first=first, kept=kept, frames=carry.frames + count
    )
    return carry, (saved if save == "full" else None), _outputs(problem, carry, save, frames_total)


def nan_unless(ok: Array, x: Array) -> Array:
    """x where `ok`, else NaN (x itself if it is not floating point)."""
    return jnp.where(ok, x, jnp.asarray(jnp.nan, x.dtype)) if _floating(x.dtype) else x


def _outputs(problem, carry: Carry, save: str, frames_total: int) -> dict[str, Array]:
    """The sweep layout's values of one run (observables NaN unless it stayed good;
    full frames are added by the caller)."""
    ok = carry.ok
    out: dict[str, Array] = {}
    for name, k in carry.kept.items():
        if save == "final":
            out[f"observables/{name}"] = nan_unless(ok, k["final"])
            continue
        size = frames_total * math.prod(k["final"].shape)
        stats = {"min": k["min"], "max": k["max"], "mean": k["sum"] / size, "final": k["final"]}
        out.update(
            {f"observables/{name}/{stat}": nan_unless(ok, stats[stat]) for stat in SUMMARY_STATS}
        )
    out["stats/num_steps"] = jnp.asarray(problem.num_steps(carry.state), dtype=jnp.int64)
    out["stats/result"] = carry.result
    out["status"] = jnp.where(ok, jnp.int8(OK), jnp.int8(FAILED))
    return out


class FramedRunner:
    """A chunk of sweep runs advanced frame by frame (see the module docstring), for
    inputs `{"index": [P], "params": {name: [P]}, "initial": {name: [P]}}` shaped like
    `example`. `chunk` is the most frames a call advances (the frame buffer of P runs
    within the in-memory budget); the programs (start, advance) are compiled once, on
    first use; the batch is split over the first `devices` local devices.

    Raises:
        ValueError, TypeError: the model's family cannot be traced in a vmapped batch.
    """

    def __init__(self, s, family, save: str, bounds, devices: int, example: dict):
        self.setup = s
        self.save = save
        self.frames = len(s.t) - 1
        runs = len(example["index"])
        one = jax.tree.map(lambda a: a[0], example)

        def probe(x):
            problem = _problem(s, family, x)
            return problem.advance(problem.init(), 1, 2)[1]

        rows = {
            name: jax.ShapeDtypeStruct(r.shape[1:], r.dtype)
            for name, r in jax.eval_shape(probe, one).items()
        }
        self.rows = rows
        frame_bytes = sum(math.prod(r.shape) * np.dtype(r.dtype).itemsize for r in rows.values())
        self.chunk = max(1, min(self.frames, CHUNK_BYTES // max(runs * frame_bytes, 1)))
        capacity = self.chunk + 1  # the first call also gives frame 0
        start = jax.vmap(functools.partial(_start_one, s, family, save, rows))
        advance = jax.vmap(
            functools.partial(_advance_one, s, family, save, bounds, capacity, self.frames + 1),
            in_axes=(0, 0, None, None),
        )
        if (
            devices > 1
        ):  # each device advances its own runs: its LU factorisations and FFTs stay local
            batch, whole = batch_sharding(devices)
            split, same = batch.spec, whole.spec
            self._start = on_batch_shards(start, batch.mesh, (split,), split)
            self._advance = on_batch_shards(advance, batch.mesh, (split, split, same, same), split)
        else:
            self._start, self._advance = jax.jit(start), jax.jit(advance)
        self.carry_struct = jax.eval_shape(start, example)
        _, _, outputs = jax.eval_shape(
            advance, example, self.carry_struct, jnp.int32(1), jnp.bool_(True)
        )
        info = {}
        if save == "full":
            info.update(
                {
                    f"observables/{name}": jax.ShapeDtypeStruct(
                        (runs, self.frames + 1, *r.shape), r.dtype
                    )
                    for name, r in rows.items()
                }
            )
        info.update(outputs)
        self.out_info: dict[str, jax.ShapeDtypeStruct] = info

    def start(self, inputs: dict) -> Carry:
        return self._start(inputs)

    def run(
        self,
        inputs: dict,
        carry: Carry | None = None,
        done: int = 0,
        frames: dict[str, np.ndarray] | None = None,
        between: Callable[[int, Carry, Callable[[], dict[str, np.ndarray]]], None] | None = None,
    ) -> dict[str, np.ndarray]:
        """The chunk's outputs (numpy), from its start or from `carry` after `done`
        frames (with the frames kept so far, for save = "full"). `between(done, carry,
        frames)` is called after every call that leaves frames to do: where a sweep
        checkpoints and may stop; `frames()` gives the frames kept so far (joined only
        when asked for: a checkpoint)."""
        if carry is None:
            carry, done, frames = self.start(inputs), 0, {}
        pieces = {name: [v] for name, v in (frames or {}).items()}
        sizer = ChunkSizer(self.chunk)
        outputs: dict[str, Any] = {}
        while done < self.frames:
            n = sizer.next(self.frames - done)
            count = n + 1 if done == 0 else n
            began = _now()
            carry, saved, outputs = self._advance(
                inputs, carry, jnp.int32(count), jnp.bool_(done == 0)
            )
            jax.block_until_ready(outputs)  # (the sizer times the call, not its dispatch)
            if saved is not None:
                for name, v in saved.items():
                    pieces.setdefault(name, []).append(fetch(v)[:, :count])
            done += n
            sizer.took(n, _now() - began)
            if done < self.frames and between is not None:
                between(
                    done,
                    carry,
                    lambda: {name: np.concatenate(p, axis=1) for name, p in pieces.items()},
                )
        values = {name: np.asarray(v) for name, v in fetch(outputs).items()}
        if self.save == "full":
            ok = values["status"] == OK
            full = {}
            for name, p in pieces.items():
                v = np.concatenate(p, axis=1)
                if np.issubdtype(v.dtype, np.floating):
                    v = np.where(ok.reshape((-1,) + (1,) * (v.ndim - 1)), v, np.nan)
                full[f"observables/{name}"] = v
            values = {**full, **values}
        return values

    def __call__(self, inputs: dict) -> dict[str, np.ndarray]:
        """The whole chunk (a Dask task, a rerun with larger buffers)."""
        return self.run(inputs)
