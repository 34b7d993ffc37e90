"""Where a test run's compile time goes: a pytest plugin that records, for every XLA
compilation in the test processes, the test that asked for it, the program's name, its
persistent-cache key, whether the cache held it, and the seconds spent compiling, tracing
and lowering; then a summary by test file, by program name and by test.

Run from the repository root (an empty cache, to see a cold run)::

    SIMJAX_TEST_CACHE=$(mktemp -d) PYTHONPATH=experiments/benchmarks \\
        .venv/bin/python -m pytest -p compile_profile --compile-profile=profile.jsonl
    .venv/bin/python experiments/benchmarks/compile_profile.py profile.jsonl

The `sim` processes that tests start are not counted (their time shows in the tests'
durations). Each xdist worker appends its own lines to the file.
"""

from __future__ import annotations

import collections
import json
import logging
import os
import re
import sys

_COMPILE = re.compile(r"Finished XLA compilation of (.*) in ([0-9.]+) sec")
_TRACE = re.compile(r"Finished tracing (.*) for jit in ([0-9.]+) sec")
_LOWER = re.compile(r"Finished jaxpr to MLIR module conversion (.*) in ([0-9.]+) sec")
_CACHE = re.compile(
    r"(Persistent compilation cache hit|PERSISTENT COMPILATION CACHE MISS) for '(.*)' "
    r"with key '?([^']*)'?"
)


class _Recorder(logging.Handler):
    """Turns JAX's debug lines about compilation into JSON lines."""

    def __init__(self, out):
        super().__init__(logging.DEBUG)
        self.out = out
        self.cached = None

    def emit(self, record):
        message = record.getMessage()
        test = os.environ.get("PYTEST_CURRENT_TEST", "").rsplit(" (", 1)[0]
        found = _CACHE.search(message)
        if found:
            self.cached = (found.group(1).startswith("Persistent"), found.group(3)[-16:])
            return
        for kind, pattern in (("compile", _COMPILE), ("trace", _TRACE), ("lower", _LOWER)):
            found = pattern.search(message)
            if found:
                row = {"kind": kind, "name": found.group(1), "s": float(found.group(2))}
                if kind == "compile":
                    hit, key = self.cached or (False, "")
                    row |= {"hit": hit, "key": key}
                    self.cached = None
                self.out.write(json.dumps(row | {"test": test}) + "\n")
                return


def pytest_addoption(parser):
    parser.addoption("--compile-profile", default=None, help="append compile records here")


def pytest_configure(config):
    path = config.getoption("--compile-profile")
    if not path:
        return
    recorder = _Recorder(open(path, "a", buffering=1))  # noqa: SIM115 (open for the run)
    for name in ("jax._src.dispatch", "jax._src.compiler"):
        logger = logging.getLogger(name)
        logger.setLevel(logging.DEBUG)
        logger.addHandler(recorder)


def summary(path: str, top: int = 30) -> str:
    """The compile seconds of a profile by test file, by program name and by test."""
    rows = [json.loads(line) for line in open(path)]
    compiled = [r for r in rows if r["kind"] == "compile" and not r["hit"]]
    lines = []
    totals = collections.Counter()
    for r in rows:
        kind = r["kind"] if r["kind"] != "compile" else "hit" if r["hit"] else "compiled"
        totals[kind] += r["s"]
    lines.append(
        f"{len(compiled)} programs compiled in {totals['compiled']:.0f} s; "
        f"tracing {totals['trace']:.0f} s, lowering {totals['lower']:.0f} s"
    )
    for title, key in (
        ("test file", lambda r: r["test"].split("::")[0]),
        ("program", lambda r: r["name"]),
        ("test", lambda r: r["test"]),
    ):
        seconds, count, keys = collections.Counter(), collections.Counter(), {}
        for r in compiled:
            seconds[key(r)] += r["s"]
            count[key(r)] += 1
            keys.setdefault(key(r), set()).add(r["key"])
        lines.append(f"\nby {title}: compile s, programs, distinct keys")
        for name, s in seconds.most_common(top):
            lines.append(f"{s:8.1f} {count[name]:5d} {len(keys[name]):5d}  {name}")
    return "\n".join(lines)


if __name__ == "__main__":
    print(summary(sys.argv[1]))
