"""Checkpoints of iterative optimisation (`sim fit` of a config or a PEtab problem,
neural ODE training): the iteration, the parameters and the optimiser state, the loss
history, and what earlier starts of a multi-start fit found (a PEtab fit: its starts'
ends and evaluations, `inference._lbfgsb.StartLog`), kept the way runs and sweeps keep
theirs (`sim._unfinished`): one
small HDF5 file beside the output, `.<name>.checkpoint`, replaced atomically (a kill at
any moment leaves the previous one whole), states stored leaf by leaf, and a resume
refused when the config differs in anything but where and how often results are written.
Resuming reads the state into a template of the same structure (the optimiser's state at
the start) and continues with the same compiled steps, so it ends where an uninterrupted
run ends.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import h5py
import numpy as np
from jaxtyping import PyTree

from sim import DataError, InputError
from sim.core import (
    InputIdentity,
    atomic_h5,
    checkpoint_path as checkpoint_path,
    config_difference,
    read_leaves,
    remove_stale,
    safe_point,
    tree_from_leaves,
    write_tree,
)

FORMAT = "simjax.optimizer_checkpoint"


def fingerprint(*parts: Any) -> str:
    """A digest of what an optimisation depends on besides its config (data arrays, the
    arguments of a training call)."""
    digest = hashlib.sha256()
    for part in parts:
        if isinstance(part, dict):
            for key in sorted(part):
                digest.update(str(key).encode())
                digest.update(fingerprint(part[key]).encode())
        elif isinstance(part, (list, tuple)):
            digest.update(f"[{len(part)}]".encode())
            for item in part:
                digest.update(fingerprint(item).encode())
        elif isinstance(part, (np.ndarray, np.generic)):
            digest.update(np.ascontiguousarray(part).tobytes())
            digest.update(str(part.dtype).encode())
        else:
            digest.update(str(part).encode())
    return digest.hexdigest()


@dataclasses.dataclass
class Saved:
    """A checkpoint as read back."""

    start: int
    iteration: int
    history: list[float]
    state: list[tuple[np.ndarray, str]]
    best: dict[str, Any] | None


def _write_ends(group, ends: list) -> None:
    """Every finished start's end: final loss, ok and natural values (name -> float)."""
    group.create_dataset("loss", data=np.array([e[0] for e in ends], dtype=float))
    group.create_dataset("ok", data=np.array([e[1] for e in ends], dtype=np.int8))
    for name in ends[0][2]:
        group.create_dataset(f"x/{name}", data=np.array([e[2][name] for e in ends], dtype=float))


def _read_ends(group) -> list:
    loss, ok = group["loss"][()], group["ok"][()]
    x = {name: group[f"x/{name}"][()] for name in group["x"]} if "x" in group else {}
    return [
        (float(loss[k]), bool(ok[k]), {name: float(v[k]) for name, v in x.items()})
        for k in range(len(loss))
    ]


class Checkpointer:
    """Writes and reads the checkpoints of one optimisation.

    Arguments:
        path: the checkpoint file (None: no checkpoints, nothing to resume).
        identity: `fingerprint` of what the optimisation depends on besides its config;
            a checkpoint of another identity is refused on resume.
        config: the resolved config text ('' for none); a checkpoint of a config that
            differs in more than where and how often results are written is refused.
        resume: continue from the checkpoint at `path`.
        every: iterations between checkpoints; None: at most one per `seconds` of wall
            time (and none in the first `seconds`).
        seconds: see `every`.
        same: what a refused resume asks to keep the same (the inputs that make up
            `config`).
        inputs: the files the optimisation reads, digested, and the package versions
            (`sim._identity`); a checkpoint of other files or versions is refused, naming
            the file that changed. None: nothing is compared but `identity` and `config`.

    Raises:
        InputError: `resume` without a checkpoint, or a checkpoint of another
            optimisation; an existing checkpoint without `resume`.
        DataError: a damaged checkpoint.
    """

    def __init__(
        self,
        path: Path | None,
        identity: str,
        *,
        config: str = "",
        resume: bool = False,
        every: int | None = None,
        seconds: float = 30.0,
        same: str = "config and --set values",
        inputs: InputIdentity | None = None,
    ):
        self.path = path
        self.inputs = inputs
        self.identity = identity
        self.config = config
        self.same = same
        self.every = every
        self.seconds = seconds
        self.saved: Saved | None = None
        self._last_time = time.monotonic()
        self._last_iteration = 0
        if path is None:
            if resume:
                raise InputError(
                    "--resume", "", "needs the output file of the unfinished optimisation"
                )
            return
        if resume:
            self.saved = self._read()
        elif path.exists():
            raise InputError(
                path,
                "",
                "an unfinished optimisation of this output is here; pass --resume to continue it, "
                "or delete it to start over",
            )

    def _read(self) -> Saved:
        source = self.path
        if not source.exists():
            raise InputError(
                source, "", "no checkpoint to resume from (run without --resume to start)"
            )
        try:
            with h5py.File(source, "r") as f:
                if f.attrs.get("format") != FORMAT:
                    raise DataError(
                        source,
                        "format",
                        "is not a simjax optimisation checkpoint; delete it to start over",
                    )
                if not isinstance(f.get("state"), h5py.Group):
                    raise DataError(
                        source,
                        "state",
                        "was written by an earlier version of simjax; delete the checkpoint to "
                        "start over",
                    )
                identity = str(f.attrs["identity"])
                config = f.attrs.get("config", "")
                attrs = dict(f.attrs)
                saved = Saved(
                    start=int(f.attrs["start"]),
                    iteration=int(f.attrs["iteration"]),
                    history=[float(v) for v in f["history"][()]],
                    state=read_leaves(f["state"]),
                    best=None,
                )
                if "best" in f:
                    g = f["best"]
                    saved.best = {
                        "u": read_leaves(g["u"]),
                        "history": [float(v) for v in g["history"][()]],
                        "ok": bool(g.attrs["ok"]),
                        "message": str(g.attrs["message"]),
                        "ends": _read_ends(g["ends"]) if "ends" in g else [],
                    }
        except DataError:
            raise
        except (
            OSError,
            RuntimeError,
            KeyError,
            ValueError,
            TypeError,
        ) as e:  # h5py on a damaged file
            detail = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise DataError(
                source,
                "",
                f"cannot be read ({detail}); the checkpoint is damaged: delete it to start over",
            ) from None
        difference = config_difference(config, self.config)
        if difference:
            raise InputError(
                source,
                "config",
                "the checkpoint belongs to another optimisation: a different config "
                f"({difference}); resume with the same {self.same}, or delete it to start over",
            )
        if self.inputs is not None:
            self.inputs.check(attrs, source, "fit")
        if identity != self.identity:
            raise InputError(
                source,
                "config",
                "the checkpoint belongs to another optimisation (its data or arguments differ); "
                "resume with the same ones, or delete it to start over",
            )
        return saved

    def restore(
        self,
        start: int,
        like: PyTree = None,
        *,
        sized: Callable[[list[tuple[int, ...]]], PyTree] | None = None,
    ) -> tuple[int, PyTree, list[float]] | None:
        """(iteration, state, loss history) saved for `start`, deserialised into the
        structure of `like`; None when the checkpoint is of no use for it (it is of
        another start, or keeps no state: a checkpoint between the blocks of a
        multi-start fit). For a state whose sizes only the checkpoint knows (the
        evaluations a PEtab fit's starts have had), `sized` gives the template from the
        shapes of the stored arrays; every shape and dtype is checked against it."""
        if self.saved is None or self.saved.start != start or not self.saved.state:
            return None
        if sized is not None:
            like = sized([data.shape for data, _ in self.saved.state])
        state = tree_from_leaves(self.saved.state, like, self.path, "state")
        self._last_iteration = self.saved.iteration
        return self.saved.iteration, state, list(self.saved.history)

    def restore_best(self, like: PyTree) -> tuple[PyTree, list[float], bool, str, list] | None:
        """What the starts finished before the checkpoint found (multi-start fits): the
        best one's (u, history, ok, message) and every finished start's end (final
        loss, ok, natural values)."""
        if self.saved is None or self.saved.best is None:
            return None
        best = self.saved.best
        return (
            tree_from_leaves(best["u"], like, self.path, "best/u"),
            best["history"],
            best["ok"],
            best["message"],
            best["ends"],
        )

    def first_start(self) -> int:
        return 0 if self.saved is None else self.saved.start

    def due(self, iteration: int) -> bool:
        if self.path is None:
            return False
        if self.every is not None:
            return iteration - self._last_iteration >= self.every
        return time.monotonic() - self._last_time >= self.seconds

    def write(
        self, start: int, iteration: int, state: PyTree, history: list[float], best=None
    ) -> None:
        """Write a checkpoint (atomically) of iteration `iteration` of start `start`."""
        if self.path is None:
            return
        with atomic_h5(self.path) as f:
            f.attrs["format"] = FORMAT
            f.attrs["identity"] = self.identity
            f.attrs["config"] = self.config
            if self.inputs is not None:
                self.inputs.write(f.attrs)
            f.attrs["start"] = int(start)
            f.attrs["iteration"] = int(iteration)
            f.create_dataset("history", data=np.asarray(history, dtype=float))
            write_tree(f.create_group("state"), state)
            if best is not None:
                u, best_history, ok, message, *rest = best
                g = f.create_group("best")
                write_tree(g.create_group("u"), u)
                g.create_dataset("history", data=np.asarray(best_history, dtype=float))
                g.attrs["ok"] = bool(ok)
                g.attrs["message"] = str(message)
                if rest and rest[0]:
                    _write_ends(g.create_group("ends"), rest[0])
        self._last_time = time.monotonic()
        self._last_iteration = iteration

    def save(
        self, start: int, iteration: int, state: PyTree, history: list[float], best=None
    ) -> Path | None:
        """Write this checkpoint now (what a stop keeps): its path, or None when there is
        no checkpoint file."""
        if self.path is None:
            return None
        self.write(start, iteration, state, history, best)
        return self.path

    def safe_point(
        self, start: int, iteration: int, state: PyTree, history: list[float], best=None
    ) -> None:
        """Stop here if SIGINT or SIGTERM asked to (`sim._interrupt`): write this
        iteration's checkpoint (when there is a checkpoint file), then raise
        `Interrupted`. A resumed optimisation continues from this iteration."""
        safe_point(lambda: self.save(start, iteration, state, history, best))

    def finish(self) -> None:
        """The optimisation completed: its checkpoint goes."""
        if self.path is not None:
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
            remove_stale(self.path)
