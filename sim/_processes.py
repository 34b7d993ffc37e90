"""Several processes, one program (`sim run|sweep --distributed`): each process of the
run calls `jax.distributed.initialize`, and from then on `jax.devices()` are the devices
of every process, a sweep's batch or a PDE's grid is split over all of them, and each
process computes its own part.

Who the processes are comes from the command line (`--coordinator HOST:PORT`,
`--processes N`, `--process-id I`) or, for what it leaves out, from the environment a
scheduler sets: Slurm (`srun`: SLURM_NTASKS, SLURM_PROCID, the first node of
SLURM_STEP_NODELIST) or Open MPI (`mpirun`: OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_RANK,
the launcher's host from OMPI_MCA_orte_hnp_uri). Without a port the coordinator listens
on `PORT_BASE` plus the job's number modulo 1,000, so that two jobs on one node do not
meet.

Files are the lead's (process 0): it holds the output's lock and writes the output and
its checkpoints; the others compute their part, take part in moving split arrays to
the lead (`blocks` gathers a block of a split array onto every process), and write
nothing. Decisions that change what the processes compute next (a checkpoint due by
the clock, a signal to stop) are the lead's or any process's, made the same on all
(`agreed`), so that every process enters the same collectives in the same order.

A process that ends or stops answering ends the others: a collective with it fails at
once, and JAX's coordination service, which every process reports to every
`HEARTBEAT_SECONDS`, ends a process whose peers went silent. The `sim` command runs
its work in a child process (`sim._supervisor`) so that such an end is one line.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping

import numpy as np

from ._errors import InputError

PORT_BASE = 7600
"""The coordinator's port, plus the job's number modulo 1,000, when none is given."""
HEARTBEAT_SECONDS = 10
"""JAX's coordination service counts a process lost after this long without word."""
JOIN_SECONDS = 120
"""How long a process waits for the others (and the coordinator) to join, unless
`JOIN_VARIABLE` in the environment says."""
JOIN_VARIABLE = "SIMJAX_JOIN_SECONDS"


def join_seconds() -> int:
    """`SIMJAX_JOIN_SECONDS` (whole seconds), else `JOIN_SECONDS`.

    Raises:
        InputError: the variable is not a whole number of seconds >= 1.
    """
    text = os.environ.get(JOIN_VARIABLE, "").strip()
    if not text:
        return JOIN_SECONDS
    if not text.isdigit() or int(text) < 1:
        raise InputError(JOIN_VARIABLE, text, "expected a whole number of seconds >= 1")
    return int(text)


@dataclasses.dataclass(frozen=True)
class Processes:
    """The processes of one run: where the coordinator (process 0) listens, how many
    there are and which one this is, and where that was read (`source`)."""

    coordinator: str
    count: int
    index: int
    source: str = "the command line"


def _first_host(nodelist: str) -> str:
    """The first host of a Slurm node list (`node[07-09,12],gpu3` -> `node07`)."""
    match = re.match(r"([^,\[]+)(?:\[([^\]]+)\])?", nodelist.strip())
    if match is None:
        return ""
    prefix, ranges = match.group(1), match.group(2)
    if not ranges:
        return prefix
    first = ranges.split(",")[0].split("-")[0]
    return prefix + first


def _scheduler(environ: Mapping[str, str]) -> dict[str, str | int] | None:
    """What a scheduler's environment says of the processes (count, index, coordinator's
    host, the job's number), or None outside one."""
    if "SLURM_NTASKS" in environ and "SLURM_PROCID" in environ:
        nodes = environ.get("SLURM_STEP_NODELIST") or environ.get("SLURM_JOB_NODELIST", "")
        return {
            "source": "Slurm",
            "count": environ["SLURM_NTASKS"],
            "index": environ["SLURM_PROCID"],
            "host": _first_host(nodes),
            "job": environ.get("SLURM_JOB_ID", "0"),
        }
    if "OMPI_COMM_WORLD_SIZE" in environ and "OMPI_COMM_WORLD_RANK" in environ:
        uri = environ.get("OMPI_MCA_orte_hnp_uri", "")
        host = re.search(r"tcp6?://\[?([^,:\]/;]+)", uri)
        return {
            "source": "Open MPI",
            "count": environ["OMPI_COMM_WORLD_SIZE"],
            "index": environ["OMPI_COMM_WORLD_RANK"],
            "host": host.group(1) if host else "",
            "job": uri.split(".")[0] if uri[:1].isdigit() else "0",
        }
    return None


def resolve(
    coordinator: str | None,
    count: int | None,
    index: int | None,
    environ: Mapping[str, str] | None = None,
) -> Processes:
    """The processes of a `--distributed` run: each of coordinator, count and index from
    its option where given, else from the scheduler's environment (see the module
    docstring).

    Raises:
        InputError: (the option) something is missing or out of range.
    """
    environ = os.environ if environ is None else environ
    found = _scheduler(environ)
    source = "the command line"
    if found is not None and (coordinator is None or count is None or index is None):
        source = str(found["source"])

    def number(option: str, given: int | None, key: str) -> int:
        if given is not None:
            return given
        if found is None:
            raise InputError(
                option,
                "",
                "missing: --distributed needs --coordinator HOST:PORT, --processes N and "
                "--process-id I, or a run started by Slurm (srun) or Open MPI (mpirun)",
            )
        text = str(found[key])
        if not text.isdigit():
            raise InputError(option, text, f"expected a whole number from {found['source']}")
        return int(text)

    count = number("--processes", count, "count")
    index = number("--process-id", index, "index")
    if count < 1:
        raise InputError("--processes", str(count), "expected at least 1 process")
    if not 0 <= index < count:
        raise InputError("--process-id", str(index), f"expected 0 to {count - 1}")
    if coordinator is None:
        if found is None or not found["host"]:
            raise InputError(
                "--coordinator",
                "",
                f"missing: {found['source'] if found else 'the environment'} does not say "
                "where process 0 runs; give --coordinator HOST:PORT",
            )
        job = str(found["job"])
        port = PORT_BASE + (int(job) % 1000 if job.isdigit() else 0)
        coordinator = f"{found['host']}:{port}"
    host, _, port = coordinator.rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise InputError("--coordinator", coordinator, "expected HOST:PORT (port 1 to 65535)")
    return Processes(coordinator, count, index, source)


def join(processes: Processes) -> None:
    """Join the run's other processes (`jax.distributed.initialize`), before JAX has
    started a backend: CPU devices talk through gloo, GPUs through NCCL.

    Raises:
        InputError: JAX has started already, or the others did not join within
            `JOIN_SECONDS`.
    """
    import jax

    from ._xla_flags import jax_started

    if jax_started():
        raise InputError(
            "--distributed",
            "",
            "JAX started before the processes joined; --distributed must come before any "
            "computation",
        )
    seconds = join_seconds()
    jax.config.update("jax_cpu_collectives_implementation", "gloo")
    # (JAX's preemption service takes SIGTERM over from C++: the command's own safe
    # points answer it instead, on every process at the same point: `safe_point`)
    jax.config.update("jax_enable_preemption_service", False)
    try:
        jax.distributed.initialize(
            processes.coordinator,
            processes.count,
            processes.index,
            initialization_timeout=seconds,
            heartbeat_timeout_seconds=HEARTBEAT_SECONDS,
        )
    except Exception as e:  # noqa: BLE001 - XLA's errors are RuntimeErrors of many texts
        reason = " ".join(str(e).split())[:200] or type(e).__name__
        raise InputError(
            "--coordinator",
            processes.coordinator,
            f"process {processes.index} of {processes.count} could not join the others within "
            f"{seconds} s ({reason})",
        ) from None
    global _joined
    _joined = processes


_joined: Processes | None = None


def count() -> int:
    """How many processes the run has (1 without --distributed)."""
    return 1 if _joined is None else _joined.count


def lead() -> bool:
    """Whether this process writes the files: process 0, or the only one."""
    return _joined is None or _joined.index == 0


def agreed(flag: bool) -> bool:
    """`flag` as any process of the run has it: True on every process when it is True on
    one (a signal to one process stops all at the same point), else False. One small
    collective with several processes; `flag` itself with one."""
    if count() == 1:
        return bool(flag)
    from jax.experimental import multihost_utils

    flags = multihost_utils.process_allgather(np.asarray(flag, dtype=np.int32))
    return bool(np.any(flags))


def from_lead(value: np.ndarray) -> np.ndarray:
    """The lead's `value` on every process (each passes an array of the same shape and
    dtype); `value` itself with one process."""
    if count() == 1:
        return value
    from jax.experimental import multihost_utils

    return np.asarray(multihost_utils.broadcast_one_to_all(value))


def together(name: str) -> None:
    """Wait until every process reaches this point (nothing with one)."""
    if count() > 1:
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices(name)


def fetch(tree):
    """`jax.device_get(tree)`, also for arrays split over several processes: those are
    gathered onto every process first (a collective: every process calls it)."""
    import jax

    def one(x):
        if isinstance(x, jax.Array) and not x.is_fully_addressable:
            from jax.experimental import multihost_utils

            return np.asarray(multihost_utils.process_allgather(x, tiled=True))
        return jax.device_get(x)

    return jax.tree.map(one, tree)


_scratch = 0


def h5_file(path, mode: str):
    """`h5py.File(path, mode)` on the lead; on the other processes of a distributed run
    an HDF5 file in memory (never on disk), which the same code writes into as if it
    were the file, split arrays' blocks left out (`sim._shards.write_blocks`)."""
    import h5py

    global _scratch
    if lead():
        return h5py.File(path, mode)
    _scratch += 1
    return h5py.File(f"sim-scratch-{_scratch}.h5", "w", driver="core", backing_store=False)
