"""The repository's style, checked: ruff's formatting and lint rules (pyproject.toml,
[tool.ruff]) pass, and no line of a tracked .py file is over 100 characters (files given
an E501 exception in pyproject.toml only inside multi-line strings, text kept as it is), and
no module of the packages is over 800 lines, no function over 100."""

import ast
import importlib.util
import io
import shutil
import subprocess
import sys
import tokenize
from pathlib import Path

import pytest

if sys.version_info >= (3, 11):
    import tomllib
else:
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
LIMIT = 100
FOLDERS = ("sim", "solvers", "physics", "inference", "tests", "experiments", "mutation")

needs_ruff = pytest.mark.skipif(
    importlib.util.find_spec("ruff") is None,
    reason="ruff is not installed (pip install -e '.[dev]')",
)


def ruff(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "ruff", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )


@needs_ruff
def test_ruff_format_leaves_every_file_as_it_is():
    done = ruff("format", "--check", ".")
    assert done.returncode == 0, done.stdout + done.stderr


@needs_ruff
def test_ruff_check_passes():
    done = ruff("check", ".")
    assert done.returncode == 0, done.stdout + done.stderr


def python_files() -> list[Path]:
    """The tracked .py files (git ls-files), or those of the package folders without git."""
    if shutil.which("git") is not None:
        listed = subprocess.run(
            ["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True
        )
        if listed.returncode == 0 and listed.stdout.strip():
            return [ROOT / name for name in listed.stdout.split()]
    files = sorted(ROOT.glob("*.py"))
    for folder in FOLDERS:
        files += sorted((ROOT / folder).rglob("*.py"))
    return files


def long_text_allowed() -> set[str]:
    """Files whose long lines may stay inside multi-line strings (E501 per-file ignores)."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    ignores = config["tool"]["ruff"]["lint"].get("per-file-ignores", {})
    return {name for name, rules in ignores.items() if "E501" in rules}


def multi_line_string_rows(source: str) -> set[int]:
    rows = set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.STRING and tok.start[0] != tok.end[0]:
            rows.update(range(tok.start[0], tok.end[0] + 1))
    return rows


def test_no_line_is_over_100_characters():
    allowed = long_text_allowed()
    too_long = []
    for path in python_files():
        if not path.is_file():
            continue
        source = path.read_text(encoding="utf-8")
        name = path.relative_to(ROOT).as_posix()
        rows = [i for i, line in enumerate(source.split("\n"), 1) if len(line) > LIMIT]
        if rows and name in allowed:
            inside = multi_line_string_rows(source)
            rows = [i for i in rows if i not in inside]
        too_long += [f"{name}:{i}" for i in rows]
    assert not too_long, f"lines over {LIMIT} characters: {too_long}"


PACKAGES = ("sim", "solvers", "physics", "inference")
MODULE_LIMIT = 800
FUNCTION_LIMIT = 100


def package_modules() -> list[Path]:
    return [p for p in python_files() if p.is_file() and p.relative_to(ROOT).parts[0] in PACKAGES]


def test_no_module_of_the_packages_is_over_800_lines():
    too_long = {}
    for path in package_modules():
        lines = path.read_text(encoding="utf-8").count("\n")
        if lines > MODULE_LIMIT:
            too_long[path.relative_to(ROOT).as_posix()] = lines
    assert not too_long, f"modules over {MODULE_LIMIT} lines: {too_long}"


def test_no_function_of_the_packages_is_over_100_lines():
    """Every def, nested ones on their own, from its first line to its last."""
    too_long = []
    for path in package_modules():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > FUNCTION_LIMIT:
                    name = path.relative_to(ROOT).as_posix()
                    too_long.append(f"{name}:{node.lineno} {node.name} ({length} lines)")
    assert not too_long, f"functions over {FUNCTION_LIMIT} lines: {too_long}"
