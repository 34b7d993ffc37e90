"""Work spread beyond one device: how many local devices a command may use
(`--devices`), the Dask cluster of `--scheduler` (an address, or `local:N` for a cluster
of N worker processes on this machine), and the sharding that splits a batch along its
leading axis over the first N local devices. Sweeps (`sim._sweep`) and multistart fits
(`inference._multistart`) both use them.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
from collections.abc import Iterator

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from ._errors import InputError, optional_module

AXIS = "batch"
# How long `connect` waits for a scheduler address to answer.
CONNECT_SECONDS = 10.0


def device_count(devices: int | None) -> int:
    """The number of local devices to use: `devices`, checked, or all of them (None).

    Raises:
        InputError: (`--devices`) fewer than 1 or more than there are.
    """
    available = len(jax.devices())
    if devices is None:
        return available
    if not 1 <= devices <= available:
        raise InputError(
            "--devices",
            str(devices),
            f"expected 1 to {available} devices ({available} available; on CPU set "
            f"XLA_FLAGS=--xla_force_host_platform_device_count=N for more)",
        )
    return devices


def batch_sharding(devices: int) -> tuple[NamedSharding, NamedSharding]:
    """(split, whole): the sharding that splits an array's leading axis over the first
    `devices` local devices (a one-axis `Mesh`, axis `AXIS`), and the one that keeps a
    whole copy on each of them."""
    mesh = Mesh(np.asarray(jax.devices()[:devices]), (AXIS,))
    return NamedSharding(mesh, PartitionSpec(AXIS)), NamedSharding(mesh, PartitionSpec())


def needs_dask(scheduler: str | None) -> None:
    """Check, before any work, that a Dask cluster asked for (`scheduler` not None) can be
    reached with what is installed: Dask's distributed comes with the 'dask' extra.

    Raises:
        MissingExtra: (`--scheduler`) distributed is not installed.
    """
    if scheduler is not None:
        optional_module("distributed", "dask", "Dask clusters", "--scheduler", scheduler)


def connect(scheduler: str):
    """(client, cluster): a `distributed.Client` for a scheduler address (cluster None),
    or for `local:N` a new cluster of N single-threaded worker processes on the loopback
    interface (`_local_cluster`: on a machine with GPUs one GPU per worker, in turn) and a
    client of it.

    Raises:
        InputError: (`--scheduler`) a malformed `local:N`, more workers than cores, or an
            address that does not answer within `CONNECT_SECONDS`.
        MissingExtra: (`--scheduler`) distributed is not installed.
    """
    needs_dask(scheduler)
    from distributed import Client

    if scheduler.startswith("local:"):
        count = scheduler.partition(":")[2]
        if not count.isdigit() or int(count) < 1:
            raise InputError(
                "--scheduler",
                scheduler,
                "expected local:N with N >= 1 workers, or a scheduler address",
            )
        cores = os.cpu_count() or 1
        if int(count) > cores:  # each worker is a process with its own JAX: more only fill memory
            raise InputError(
                "--scheduler",
                scheduler,
                f"expected local:N with N at most the {cores} cores of this machine",
            )
        # Ctrl-C in a terminal sends SIGINT to the whole process group: the worker
        # processes ignore it (they inherit an ignored SIGINT), so that the command stops
        # at its next safe point and closes its cluster instead of losing its workers
        # mid-task.
        previous = (
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            if threading.current_thread() is threading.main_thread()
            else None
        )
        try:
            cluster = _local_cluster(int(count))
        finally:
            if previous is not None:
                signal.signal(signal.SIGINT, previous)
        return Client(cluster), cluster
    try:
        return Client(scheduler, timeout=f"{CONNECT_SECONDS}s"), None
    except (OSError, TimeoutError, ValueError) as e:
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        raise InputError(
            "--scheduler", scheduler, f"cannot reach the Dask scheduler ({first})"
        ) from None


def worker_environment(index: int, gpus: list[str]) -> dict[str, str]:
    """What worker `index` of a `local:N` cluster adds to its environment: with GPUs
    (`gpus`, their ids: `sim._limits.visible_gpus`) it sees one of them, worker i the
    (i mod len(gpus))-th, and JAX allocates its memory as it needs it instead of taking
    75% of the GPU at start (XLA_PYTHON_CLIENT_PREALLOCATE=false, unless the user set
    it), so that workers sharing a GPU and the command's own process all fit. Nothing
    without GPUs."""
    if not gpus:
        return {}
    env = {"CUDA_VISIBLE_DEVICES": gpus[index % len(gpus)]}
    env["XLA_PYTHON_CLIENT_PREALLOCATE"] = os.environ.get("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    return env


def _local_cluster(count: int):
    """A Dask cluster of `count` single-threaded worker processes on the loopback
    interface, each with its `worker_environment` (the options of Dask's LocalCluster,
    with one environment per worker)."""
    from distributed import Nanny, Scheduler, SpecCluster
    from distributed.system import MEMORY_LIMIT

    from ._limits import visible_gpus

    gpus = visible_gpus()
    scheduler = {
        "cls": Scheduler,
        "options": {"host": "127.0.0.1", "dashboard": False, "dashboard_address": ":0"},
    }
    options = {
        "host": "127.0.0.1",
        "nthreads": 1,
        "memory_limit": MEMORY_LIMIT // count,
        "dashboard": False,
        "silence_logs": logging.ERROR,  # (a task cancelled by a stop is not worth a warning)
    }
    workers = {
        i: {"cls": Nanny, "options": {**options, "env": worker_environment(i, gpus)}}
        for i in range(count)
    }
    return SpecCluster(workers=workers, scheduler=scheduler, silence_logs=logging.ERROR)


@contextlib.contextmanager
def dask_client(scheduler: str | None) -> Iterator:
    """The client of `connect(scheduler)` within the block (None without a scheduler),
    closed afterwards with the cluster it started."""
    client, cluster = connect(scheduler) if scheduler else (None, None)
    try:
        yield client
    finally:
        if client is not None:
            client.close()
        if cluster is not None:
            cluster.close()


def worker_threads(client) -> int:
    """How many tasks the cluster of `client` runs at once (its workers' threads),
    waiting up to `CONNECT_SECONDS` for a first worker to join.

    Raises:
        InputError: (`--scheduler`) no worker joined: tasks would wait for ever.
    """
    if not client.nthreads():
        try:
            client.wait_for_workers(1, timeout=CONNECT_SECONDS)
        except TimeoutError:
            address = client.scheduler.address if client.scheduler is not None else ""
            raise InputError(
                "--scheduler",
                address,
                f"the Dask cluster has no workers (none joined within {CONNECT_SECONDS:g} s)",
            ) from None
    return max(1, sum(client.nthreads().values()))
