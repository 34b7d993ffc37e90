"""MCMC chains run in chunks (`run_chains`), laid over the local devices as the same
one-chain program on each (`chain_method`, `_OnDevices`), so that the draws do not
depend on the device count."""

from __future__ import annotations

import collections
import dataclasses
import json
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from sim.core import Fittable, family_of, process_count


def chain_method(chains: int, progress: bool, *, spread: bool = True) -> tuple[Any, bool, str]:
    """How `chains` chains run on this machine's devices: (a NumPyro chain_method,
    whether NumPyro's progress bar can follow it, a sentence for the log).

    The draws depend neither on the layout nor on the process's device count. Every
    chain is the same one-chain program (`_OnDevices`): the chains run in rounds over as many
    devices as divide their number (at most the device count; on one device, one chain after
    another), each on its own device, so a chain waits for no deeper tree of another and does
    the same arithmetic on one device as on four. `spread=False` (models solved by an
    IMEX method, `spreads`) keeps every chain on one device, vectorised, whatever
    the device count. `sim infer` starts with one CPU device per core."""
    devices = jax.device_count()  # (every process's, in a distributed run)
    kind = jax.default_backend().upper()
    if chains == 1:
        return _OnDevices(1), False, "1 chain"
    if not spread:
        why = " (an IMEX method's chains are not run as one-chain programs)" if devices > 1 else ""
        return "vectorized", progress, f"{chains} chains vectorised on one {kind} device{why}"
    used = max(k for k in range(1, min(devices, chains) + 1) if chains % k == 0)
    if used == chains:
        return _OnDevices(used), False, f"{chains} chains in parallel, one per {kind} device"
    if used > 1:
        return (
            _OnDevices(used),
            False,
            f"{chains} chains on {used} {kind} devices, {chains // used} after one another on each",
        )
    return _OnDevices(1), False, f"{chains} chains on one {kind} device, one after another"


def spreads(runs) -> bool:
    """Whether chains whose log density runs these (model, solver) pairs can be laid
    over several devices (`_OnDevices`): as each model's family says of its solver
    (not an IMEX ODE method)."""
    families = [(family_of(model), solver) for model, solver in runs]
    return all(isinstance(f, Fittable) and f.chains_spread(solver) for f, solver in families)


def sampled_on() -> str:
    """The devices of this process, as a posterior file records them (JSON: platform and
    count). The draws do not depend on the count (`_OnDevices`); on another platform
    (GPU, CPU) the compiled arithmetic differs in the last bits, which NUTS turns into
    other draws."""
    return json.dumps({"platform": jax.default_backend(), "devices": jax.device_count()})


@dataclasses.dataclass(frozen=True)
class _OnDevices:
    """A NumPyro chain_method: the chains (leading axis) run in rounds of `count`, one
    chain per device of the first `count` devices in each round (chain c in round
    c // count, on device c % count).

    Every chain runs the same program: one chain's, compiled for a single device (by
    `jax.jit`, once per device used) and dispatched to each device of a round before
    any is waited for. So a chain's draws are the same bits for every `count` and in a
    process of any device count. (A program replicated by `jax.pmap` over two or more
    devices is partitioned by XLA's SPMD pass and optimised otherwise than the same
    program on one device: an ODE posterior's draws parted from the first chunk on,
    between rounds of one device and rounds of two, however many devices the process
    had. Chains vectorised or mapped one after another inside a device's program,
    NumPyro's other layouts, drift apart the same way.)"""

    count: int

    def __call__(self, one_chain: Callable) -> Callable:
        program = self.compiled(one_chain)

        def run(chain_args):
            return _joined([program(part) for part in _rounds(chain_args, self.count)])

        return run

    def compiled(self, one_chain: Callable) -> Callable:
        """`one_chain` over a round of chains [count, ...] -> their results [count, ...]
        (NumPy arrays), chain i on device i; its attribute `program` is the one-chain
        program (`jax.jit`)."""
        program = jax.jit(one_chain)
        devices = jax.devices()[: self.count]

        def run(chains):
            count = jax.tree.leaves(chains)[0].shape[0]
            one = lambda i: jax.tree.map(lambda x: x[i], chains)  # noqa: E731
            if process_count() > 1:
                return _across_processes(program, one, devices[:count])
            parts = [program(jax.device_put(one(i), devices[i])) for i in range(count)]
            return jax.tree.map(lambda *each: np.stack([np.asarray(x) for x in each]), *parts)

        run.program = program
        return run


def _across_processes(program, one: Callable, devices: list) -> Any:
    """A round of chains whose devices belong to several processes (`--distributed`):
    each process runs the chains of its own devices (chain i on `devices[i]`), and every
    process gets every chain's results [count, ...], in chain order."""
    from jax.experimental import multihost_utils

    # (chain i is row where[i] = (process, rank among that process's devices) once gathered)
    held, where = collections.Counter(), []
    for d in devices:
        where.append((d.process_index, held[d.process_index]))
        held[d.process_index] += 1
    per = max(held.values())
    me = jax.process_index()
    parts = [
        program(jax.device_put(one(i), d)) for i, d in enumerate(devices) if d.process_index == me
    ]

    def stacked(shape, *rows):
        rows = [np.asarray(x) for x in rows]
        rows += [np.zeros(shape.shape, shape.dtype)] * (per - len(rows))  # (padding)
        return np.stack(rows)

    local = jax.tree.map(stacked, jax.eval_shape(program, one(0)), *parts)
    gathered = multihost_utils.process_allgather(local)  # [process, per, ...] each
    return jax.tree.map(lambda g: np.stack([np.asarray(g)[w] for w in where]), gathered)


def _rounds(tree, count: int) -> list:
    """[chain, ...] -> the rounds [count, ...] of `_OnDevices`."""
    chains = jax.tree.leaves(tree)[0].shape[0]
    return [jax.tree.map(lambda x: x[r : r + count], tree) for r in range(0, chains, count)]


def _joined(rounds: list):
    """The rounds [count, ...] of `_OnDevices` -> [chain, ...]."""
    return jax.tree.map(
        lambda *parts: jnp.concatenate(parts) if len(parts) > 1 else parts[0], *rounds
    )


def chunk_length(total: int) -> int:
    """Steps per chunk of a run of `total` steps: about a tenth of them (8 to 16 chunks),
    a length that divides `total` where one does, else the one that pads the last chunk
    least (the padded steps are run and dropped, so every chunk is the same program)."""
    best = None
    for n in range(min(8, total), min(16, total) + 1):
        length = -(-total // n)
        chunks = -(-total // length)
        rank = (chunks * length - total, abs(chunks - 10))
        if best is None or rank < best[0]:
            best = (rank, length)
    return best[1]


@dataclasses.dataclass
class ChainRun:
    """What `run_chains` gives: the draws after warmup and the chains' last state.

    Attributes:
        samples: site -> draws [chain, draw, ...] (constrained, as `MCMC.get_samples`).
        diverging: [chain, draw] booleans.
        last_state: the kernel's state of every chain after its last step (leading axis
            the chain), from which the chains could go on.
    """

    samples: dict[str, np.ndarray]
    diverging: np.ndarray
    last_state: Any


class NoValidStart(RuntimeError):
    """Some chain's start has a zero or non-finite posterior density (or gradient)."""


def run_chains(
    kernel,
    model_args: tuple,
    *,
    chains: int,
    warmup: int,
    samples: int,
    key: jax.Array,
    method,
    progress: bool = False,
    started: Callable[[], None] | None = None,
    notes: tuple[str, ...] = (),
) -> ChainRun:
    """Run `chains` chains of an MCMC kernel (NUTS) for `warmup` + `samples` steps, in
    chunks: the draws NumPyro's `MCMC.run` gives for the same key, settings and
    `method`, and (`_OnDevices`) the same draws on any number of devices, in a process of
    any device count.

    One program starts the chains (`kernel.init`, one key per chain as MCMC makes
    them; see `chain_programs`), one compiled program advances the chains of a round
    (`_OnDevices`; all of them when vectorised) by `chunk_length` steps of
    `kernel.sample` and returns each step's constrained sites and divergence; warmup
    and sampling steps are the same program (the kernel adapts while its step counter
    is below `warmup`). Between two chunks the host reports progress (`sim._progress`)
    and is at a safe point for an interrupt; no program holds a host callback, so both
    are saved in the persistent compilation cache and the next run loads them.

    Arguments:
        kernel: a fresh NumPyro kernel (its `init` sets it up for this model).
        model_args: the model's arguments, constants of the compiled programs.
        method: how the chains lie on the devices (`chain_method`): `_OnDevices(count)`
            or "vectorized".
        progress: a bar on a terminal, a line every tenth of the steps elsewhere.
        started: called once every chain has a valid start, before the first chunk
            (a failed start prints nothing but its error).
        notes: lines printed with the progress once the chains have ended
            (`Family.solver_notes`).

    Raises:
        NoValidStart: a chain starts where the log density or its gradient is not
            finite (its initialisation found no valid point).
    """
    from sim.core import Progress, safe_point

    total = warmup + samples
    length = chunk_length(total)
    keys = jax.random.split(key, chains) if chains > 1 else key[None]
    init, chunk = chain_programs(kernel, model_args, warmup=warmup, length=length, method=method)
    rounds = _rounds(keys, method.count) if isinstance(method, _OnDevices) else [keys]
    parts, flags = [], []
    with Progress(enabled=progress, description="warmup") as bar:
        for line in notes:
            bar.note(line)
        bar.start(total)
        try:
            states = [init(k) for k in rounds]
        except RuntimeError as e:  # (NumPyro's own check, when the start runs op by op)
            if "Cannot find valid initial parameters" not in str(e):
                raise
            raise NoValidStart(str(e)) from None
        for state in states:
            if not all(
                bool(np.all(np.isfinite(x)))
                for x in (state.potential_energy, *jax.tree.leaves(state.z_grad))
            ):
                raise NoValidStart("Cannot find valid initial parameters")
        if started is not None:
            started()
        for begin in range(0, total, length):
            safe_point()
            # (every round is dispatched before any is waited for)
            states, outs = zip(*(chunk(state) for state in states), strict=False)
            keep = slice(max(warmup - begin, 0), min(total - begin, length))
            if keep.start < keep.stop:
                z, diverging = jax.tree.map(
                    lambda *p: np.concatenate([np.asarray(x) for x in p]), *outs
                )
                parts.append(jax.tree.map(lambda x: x[:, keep], z))
                flags.append(diverging[:, keep])
            else:
                jax.block_until_ready(outs)
            done = min(begin + length, total)
            bar.describe("warmup" if done <= warmup else "sampling")
            bar.advance(done - begin)
    draws = {name: np.concatenate([p[name] for p in parts], axis=1) for name in parts[0]}
    return ChainRun(draws, np.concatenate(flags, axis=1), _joined(list(states)))


def chain_programs(
    kernel, model_args: tuple, *, warmup: int, length: int, method
) -> tuple[Callable, Callable]:
    """The two programs of `run_chains`: init(keys) -> the chains' states, and
    chunk(states) -> (the states `length` steps on, (constrained sites, diverging) of
    each step [chain, step, ...]), for the chains of one round of `_OnDevices` (one
    chain per device, each the same one-chain program) or all chains "vectorized" on
    one device.

    One chain per device starts as NumPyro's MCMC.run starts it with one chain per
    device (compiled), vectorised chains as MCMC.run starts those (op by op)."""

    def start(key):
        return kernel.init(key, warmup, None, model_args=model_args, model_kwargs={})

    vectorized = method == "vectorized"  # (then `kernel.init` vmaps itself and its `sample`)

    # (a step is a program of its own inside the loop, as in NumPyro's `fori_collect`:
    # inlined, XLA fuses it differently and the draws drift from MCMC.run's)
    @jax.jit
    def step(state):
        state = kernel.sample(state, model_args, {})
        constrain = kernel.postprocess_fn(model_args, {})
        return state, ((jax.vmap(constrain) if vectorized else constrain)(state.z), state.diverging)

    def advance(state):
        state, out = jax.lax.scan(lambda s, _: step(s), state, None, length=length)
        return state, jax.tree.map(lambda x: jnp.swapaxes(x, 0, 1), out) if vectorized else out

    if vectorized:
        return start, jax.jit(advance)
    return method.compiled(start), method.compiled(advance)
