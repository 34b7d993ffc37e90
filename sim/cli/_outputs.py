"""The files a command writes: its output path (never an existing file without -o), its
lock, and the one line with the command that resumes it when it is interrupted."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
from pathlib import Path
from typing import Optional

import typer

from .._errors import InputError, shown
from .._interrupt import Interrupted

# The arguments of the command being run (for the resume command an interrupt prints).
_argv: list[str] = []


def output_path(
    config,
    option: Optional[Path],
    default_suffix: str = ".h5",
    inputs: tuple[Optional[Path], ...] = (),
) -> Path:
    """-o if given (relative to the working folder); else `[output] file` (relative to the
    config's folder); else the config's name with `default_suffix` in the working
    folder (`unasked`: never over an existing result). Checked before any work: writable,
    a regular file, and none of the command's input files (the config, the files it
    names, `inputs`)."""
    from .._store import check_output_path

    given = [*config.input_files(), *(p for p in inputs if p is not None)]
    if option is not None:
        return check_output_path(option, "-o", inputs=given)
    if config.spec.output.file:
        path = config.resolve_path(config.spec.output.file)
        return check_output_path(
            unasked(path, f"{config.source}: output.file"),
            config.source,
            "output.file",
            inputs=given,
        )
    return check_output_path(unasked(Path(config.path.stem + default_suffix)), "-o", inputs=given)


def unasked(path: Path, named_by: str = "") -> Path:
    """The output a command writes when -o is not given: `path`, unless a file is there
    already. The one rule of every command's default output: without -o, nothing that
    exists is replaced (a second run with other settings would silently overwrite the
    first one's result).

    Raises:
        InputError: `path` exists.
    """
    if os.path.lexists(path):
        where = f" (named by {named_by})" if named_by else ""
        raise InputError(
            path,
            "",
            f"exists already{where}; without -o no command replaces a file: pass -o {shown(path)} "
            "to replace it, or -o with another name",
        )
    return path


def resume_command(output: Path) -> str:
    """The command line that continues the interrupted command: its own arguments, with
    `-o` made explicit and `--resume` added."""
    args = list(_argv)
    if not any(a in ("-o", "--output") or a.startswith(("--output=", "-o")) for a in args):
        args += ["-o", str(output)]
    if "--resume" not in args:
        args.append("--resume")
    return " ".join(shown(a) for a in ["sim", *args])


@contextlib.contextmanager
def resumable(output: Path, what: str, unfinished: Path | None = None):
    """Within the block, an interrupt (SIGINT, SIGTERM) that stopped the work is reported
    in one line with the command that resumes it, and what it keeps: the checkpoint
    written at the safe point, or, stopped at once by a second signal, the `unfinished`
    file of an earlier checkpoint where one is left on disk."""
    try:
        yield
    except Interrupted as e:
        name = signal.Signals(e.signum).name
        if e.checkpoint is not None:
            kept = f"{what} so far is checkpointed in {shown(e.checkpoint)}"
        elif unfinished is not None and unfinished.exists():
            kept = (
                f"stopped before a checkpoint; {what} up to its last checkpoint is kept in "
                f"{shown(unfinished)}"
            )
        else:
            kept = "nothing was saved yet"
        print(
            f"interrupted ({name}): {kept}; resume with: {resume_command(output)}", file=sys.stderr
        )
        raise typer.Exit(e.exit_code) from None


@contextlib.contextmanager
def writing(path: Path, what: str, unfinished: Path, resume: bool, quiet: bool):
    """The block of a resumable command (run, sweep, fit) that writes `path`: holds its
    lock, reports an interrupt with the command that resumes it, and yields whether to
    resume (--resume with nothing unfinished and no finished file starts afresh)."""
    from .._lock import exclusive

    with exclusive(path), resumable(path, f"the {what}", unfinished):
        yield resume and not nothing_to_resume(path, unfinished, what, quiet)


def nothing_to_resume(path: Path, unfinished: Path, what: str, quiet: bool) -> bool:
    """--resume with no unfinished work of `path` and no finished file: start afresh
    (a job script may always pass --resume). True when that is the case."""
    if unfinished.exists() or path.exists():
        return False
    if not quiet:
        print(f"no unfinished {what} of {shown(path)}; starting it", file=sys.stderr)
    return True
