"""The persistent compilation cache: a program compiled once is loaded from disk by the
next process that needs it, instead of compiled again.

Importing `sim` turns it on (`enable`), in the user's cache folder (`default_folder`;
`SIMJAX_CACHE_DIR` moves it, an empty `SIMJAX_CACHE_DIR` or `sim --no-cache` turns it
off). A cache folder the user set for JAX itself (`JAX_COMPILATION_CACHE_DIR` or
`jax.config`) is left as it is.

JAX keys each entry by a hash of the program, the compile options, the backend and the
versions of jax and jaxlib, so an entry is only ever loaded for the program it was
compiled from. What JAX does not do is check the entry itself: its files are written in
place (a process killed mid-write leaves a truncated entry, which every later process
would try and fail to read, and never replace), and without a checksum a damaged entry
may not be noticed before the executable is deserialised. `CheckedCache` stores every
entry with a BLAKE2b digest of its key and contents, writes it to a temporary file renamed into
place, and treats anything it cannot read or verify as a miss (and removes it): a
corrupted or foreign file costs one compilation and never changes a result. A cache
that cannot be written (a read-only folder, a full disk, the folder deleted mid-run)
only stops saving. The folder is kept under `MAX_BYTES`, least recently used entries
first.
"""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
from pathlib import Path

_MAGIC = b"simjax-cache-1\n"
_DIGEST = 32
_SUFFIX = ".simjax"
# The cache is kept under this size: when a process first writes to it (and every 64
# writes after), the entries read or written longest ago are removed.
MAX_BYTES = 2 * 1024**3


def _digest(key: str, value: bytes) -> bytes:
    """The check of one entry: of its key and contents (an entry copied or renamed under
    another key fails it)."""
    return hashlib.blake2b(key.encode() + b"\0" + value, digest_size=_DIGEST).digest()


def user_folder() -> Path:
    """simjax's folder in the platform's user cache folder (XDG_CACHE_HOME or ~/.cache on
    Linux, ~/Library/Caches on macOS, LOCALAPPDATA on Windows), whatever
    `SIMJAX_CACHE_DIR` says."""
    if sys.platform == "win32":
        base = Path(os.environ.get("LOCALAPPDATA") or Path.home() / "AppData" / "Local")
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Caches"
    else:
        base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "simjax"


def default_folder() -> Path | None:
    """Where the cache lives: `SIMJAX_CACHE_DIR` if set (None if set empty), else
    `jax` in `user_folder()`."""
    given = os.environ.get("SIMJAX_CACHE_DIR")
    if given is not None:
        return Path(given).expanduser() if given.strip() else None
    return user_folder() / "jax"


class CheckedCache:
    """A folder of compiled programs, one file per key, each checked on reading (see the
    module's docstring). Implements JAX's cache interface (`get`, `put`, `clear`)."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path)
        self._path = str(self.path)  # (read by JAX's own logging)
        self._puts = 0

    def _file(self, key: str) -> Path:
        return self.path / f"{key}{_SUFFIX}"

    def get(self, key: str) -> bytes | None:
        file = self._file(key)
        try:
            data = file.read_bytes()
        except OSError:
            return None
        head = len(_MAGIC) + _DIGEST
        body = data[head:]
        if (
            data[: len(_MAGIC)] != _MAGIC
            or len(data) < head
            or _digest(key, body) != data[len(_MAGIC) : head]
        ):
            self._discard(file)
            return None
        try:
            os.utime(file)  # (recently used: kept when the folder is pruned)
        except OSError:
            pass
        return body

    def put(self, key: str, value: bytes) -> None:
        record = _MAGIC + _digest(key, value) + value
        try:
            self.path.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.path, prefix=".partial-", suffix=_SUFFIX)
        except OSError:
            return
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(record)
            os.replace(tmp, self._file(key))
        except OSError:
            self._discard(Path(tmp))
        if self._puts % 64 == 0:
            self.prune(MAX_BYTES)
        self._puts += 1

    def prune(self, max_bytes: int) -> None:
        """Remove the least recently used entries until the folder holds `max_bytes` or
        less (and unfinished writes left by killed processes over an hour ago)."""
        import time

        entries = []
        try:
            for file in self.path.iterdir():
                try:
                    st = file.stat()
                except OSError:
                    continue
                if file.name.startswith(".partial-"):
                    if st.st_mtime < time.time() - 3600:
                        self._discard(file)
                elif file.name.endswith(_SUFFIX):
                    entries.append((st.st_mtime, st.st_size, file))
        except OSError:
            return
        total = sum(size for _, size, _ in entries)
        for _, size, file in sorted(entries):
            if total <= max_bytes:
                break
            self._discard(file)
            total -= size

    def clear(self) -> None:
        for file in self.path.glob(f"*{_SUFFIX}"):
            self._discard(file)

    @staticmethod
    def _discard(file: Path) -> None:
        try:
            file.unlink()
        except OSError:
            pass


def _jax_cache_set_by_user() -> bool:
    import jax

    return bool(os.environ.get("JAX_COMPILATION_CACHE_DIR") or jax.config.jax_compilation_cache_dir)


def enable(folder: str | os.PathLike | None = None) -> Path | None:
    """Turn the checked cache on in `folder` (default: `default_folder()`), unless JAX's
    cache was configured by the user or the folder is None. Programs of every compile
    time are kept (JAX's default keeps only those that took over a second). An empty
    folder ("") turns nothing on, as an empty SIMJAX_CACHE_DIR does (it is not the current
    folder). Returns the folder in use, or None."""
    if folder is not None and not str(folder).strip():
        return None
    import jax
    from jax._src import compilation_cache as cc

    if folder is None:
        if _jax_cache_set_by_user():
            return None
        folder = default_folder()
        if folder is None:
            return None
    folder = Path(folder)
    jax.config.update("jax_enable_compilation_cache", True)
    jax.config.update("jax_compilation_cache_dir", str(folder))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    try:
        with cc._cache_initialized_mutex:
            cc._cache = CheckedCache(folder)
            cc._cache_initialized = True
            cc._cache_checked = False
    except AttributeError:  # (a JAX without these internals: its own cache, unchecked)
        pass
    return folder


def disable() -> None:
    """Turn the persistent cache off for this process (`sim --no-cache`)."""
    import jax
    from jax._src import compilation_cache as cc

    jax.config.update("jax_enable_compilation_cache", False)
    try:
        with cc._cache_initialized_mutex:
            cc._cache = None
            cc._cache_initialized = False
            cc._cache_checked = False
            cc._cache_used = False
    except AttributeError:
        pass
