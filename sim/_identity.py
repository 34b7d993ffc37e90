"""A run's identity: its resolved config and the bytes of every file it reads.

Runs, sweeps and fits store the identity they were started from in their unfinished
files (the partial output and the checkpoint) and so in the result: the resolved config
as the root attribute `config`, the files as `inputs` (JSON: the key that names each file
-> the SHA-256 of its bytes; no paths, so that the same work in another folder writes the
same file) and the package versions as `versions`. A
resume compares all three with the work it is asked to continue (`InputIdentity.check`)
and refuses in one line naming what differs: the config key, the file that changed, or
the package whose version is not the one the first part was computed with. Only then
can the first part of a file and the rest be one computation.

The config text is compared by `sim._unfinished.config_difference` (which leaves out
where and how often results are written); this module holds the files and versions.
A file is digested once per process and version of it (path, size, time of change and
inode), so a sweep's chunks and a fit's starts do not read a large start file again.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ._errors import InputError
from ._store import package_versions

INPUTS = "inputs"
"""The root attribute that holds the digests of a run's input files (JSON)."""
VERSIONS = "versions"
"""The root attribute that holds the package versions a file was computed with (JSON)."""

_BLOCK = 1 << 20
_digests: dict[tuple, str] = {}


def file_digest(path: str | Path) -> str:
    """The SHA-256 of a file's bytes (hex), or "" when it cannot be read.

    Read once per version of the file in a process (its resolved path, size, time of
    change and inode); a file rewritten within one tick of the file system's clock at
    the same size and inode would be taken for the old one, so files under 1 MiB are
    read again every time (cheap), larger ones are not.
    """
    try:
        resolved = Path(path).resolve()
        stat = resolved.stat()
    except (OSError, RuntimeError):
        return ""
    key = (str(resolved), stat.st_size, stat.st_mtime_ns, stat.st_ino)
    if stat.st_size >= _BLOCK and key in _digests:
        return _digests[key]
    digest = hashlib.sha256()
    try:
        with open(resolved, "rb") as f:
            while block := f.read(_BLOCK):
                digest.update(block)
    except OSError:
        return ""
    if len(_digests) > 256:
        _digests.clear()
    _digests[key] = digest.hexdigest()
    return _digests[key]


@dataclasses.dataclass(frozen=True)
class InputIdentity:
    """The files a run reads (by the key or flag that names each) with their digests,
    and the package versions it runs on: with the resolved config, what makes it the
    same work as another.

    Attributes:
        files: key (`model.source`, `data.file`, `--data`) -> (path, SHA-256 hex; "" for
            a file that cannot be read).
        versions: package -> version (`sim._store.package_versions`).
    """

    files: Mapping[str, tuple[str, str]]
    versions: Mapping[str, str]

    @classmethod
    def of(cls, named: Mapping[str, str | Path | None]) -> InputIdentity:
        """The identity of the files `named` (key -> path; None entries are left out)."""
        files = {
            key: (str(path), file_digest(path)) for key, path in named.items() if path is not None
        }
        return cls(files=files, versions=package_versions())

    def write(self, attrs: Any) -> None:
        """Store this identity in an HDF5 object's attributes (`inputs`, `versions`)."""
        attrs[INPUTS] = self.inputs_json()
        attrs[VERSIONS] = json.dumps(dict(self.versions))

    def inputs_json(self) -> str:
        return json.dumps({key: digest for key, (_, digest) in sorted(self.files.items())})

    def check(self, attrs: Any, source: str | Path, what: str) -> None:
        """Refuse to continue the work stored in `source` (whose attributes are `attrs`)
        unless it read the same files and ran on the same package versions.

        Arguments:
            attrs: the stored object's attributes (a mapping).
            source: the unfinished file, for the message.
            what: "run", "sweep", "fit", for the message.

        Raises:
            InputError: naming the file that changed (its key), or the package whose
                version differs, or an unfinished file that records no identity.
        """
        delete = f"delete {source} to start over"
        stored_inputs, stored_versions = attrs.get(INPUTS), attrs.get(VERSIONS)
        if stored_inputs is None or stored_versions is None:
            raise InputError(
                source,
                "",
                f"records no digests of the files the unfinished {what} read (written by an "
                f"earlier version of simjax), so it cannot be checked; {delete}",
            )
        try:
            inputs = json.loads(_text(stored_inputs))
            versions = json.loads(_text(stored_versions))
            stored = {str(k): str(v) for k, v in inputs.items()}
            versions = {str(k): str(v) for k, v in versions.items()}
        except (ValueError, TypeError, KeyError, AttributeError):
            raise InputError(
                source,
                INPUTS,
                f"cannot be read as the digests of the unfinished {what}'s files; {delete}",
            ) from None
        for key in [*self.files, *(k for k in stored if k not in self.files)]:
            now, then = self.files.get(key), stored.get(key)
            if now is not None and now[1] and now[1] == then:
                continue
            if now is None:
                raise InputError(
                    source,
                    key,
                    f"the unfinished {what} read a file named by {key}, which is not named now; "
                    f"resume with the inputs it was started with, or {delete}",
                )
            if then is None:
                raise InputError(
                    now[0],
                    key,
                    f"was not read by the unfinished {what} in {source}; resume with the inputs it "
                    f"was started with, or {delete}",
                )
            if not now[1]:
                raise InputError(
                    now[0],
                    key,
                    f"cannot be read, so it cannot be checked against the unfinished {what} in "
                    f"{source}; restore it, or {delete}",
                )
            if now[1] != then:
                raise InputError(
                    now[0],
                    key,
                    f"has changed since the unfinished {what} in {source} was started (its bytes "
                    f"differ); restore it, or {delete}",
                )
        for package in [*self.versions, *(p for p in versions if p not in self.versions)]:
            now_v, then_v = (
                self.versions.get(package, "not installed"),
                versions.get(package, "not installed"),
            )
            if now_v != then_v:
                raise InputError(
                    source,
                    VERSIONS,
                    f"the unfinished {what} was computed with {package} {then_v}, this is "
                    f"{package} {now_v}: its rest would not be the same computation; "
                    f"install {package} {then_v} to resume, or {delete}",
                )


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def config_inputs(config, extra: Mapping[str, str | Path | None] | None = None) -> InputIdentity:
    """The identity of the files a config's work reads: `Config.named_inputs` and the
    files given beside it on the command line (`extra`: `{"--data": path}`; a `--data`
    file replaces `data.file`, which is then not read).

    Arguments:
        config: the loaded `Config`.
        extra: option -> path of the files given on the command line; None entries are
            left out.

    Returns:
        An `InputIdentity`: each file's path and SHA-256 digest by the key or option that
        names it, and the package versions.
    """
    named: dict[str, str | Path | None] = dict(config.named_inputs())
    extra = {key: path for key, path in (extra or {}).items() if path is not None}
    if "--data" in extra:
        named.pop("data.file", None)
    named.update(extra)
    return InputIdentity.of(named)
