"""Run a target's tests with the ones that exercise the mutated module first.

cosmic-ray mutates one file of the scratch worktree in place; `git diff` names it. The
test files that import that module by name (`inference._train`) or are named after it
(`test_train*.py`) run first, with -x: most mutants fail there within seconds; a mutant that passes
them runs the rest of the target's tests as well, so the verdict is that of the whole list.

    python mutation/tests_first.py tests/inference/test_a.py tests/inference/test_b.py ...
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

PYTEST = [sys.executable, "-m", "pytest", "-x", "-q", "-n", "0", "-p", "no:cacheprovider"]


def mutated() -> list[Path]:
    out = subprocess.run(
        ["git", "diff", "--name-only"], capture_output=True, text=True, check=True
    ).stdout
    return [Path(line) for line in out.splitlines() if line.endswith(".py")]


def reads(test: str, module: Path) -> bool:
    """Whether a test file imports `module` by its dotted name or is named after it
    (tests/inference/test_train*.py for inference/_train.py)."""
    dotted = ".".join(module.with_suffix("").parts)
    named = Path(test).stem.startswith("test_" + module.stem.lstrip("_"))
    return named or bool(re.search(rf"\b{re.escape(dotted)}\b", Path(test).read_text()))


def main(tests: list[str]) -> int:
    modules = mutated()
    first = [t for t in tests if any(reads(t, m) for m in modules)]
    rest = [t for t in tests if t not in first]
    for group in (first, rest):
        if group and subprocess.run([*PYTEST, *group]).returncode != 0:
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
