"""The files of a PEtab problem (format version 1), judged before any table is read: the
YAML file against the format's schema, every file it names inside the problem's folder,
and every table's header against the columns its kind of table requires.

A PEtab problem is data shared as a folder, often downloaded: the YAML file may only
name files inside its own folder, after resolving symbolic links (`confined`), unless
the caller allows more (`allow_outside`, the command line's `--allow-outside-folder`).
A file outside is refused by its name before it is opened, so that no table elsewhere
on the machine is read, parsed or quoted in an error. Every reader of a problem's files
(`inference._petab.load_petab`, `files_digest`, a Dask worker's `fit_block`) goes
through `named_files` and `confined`.
"""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

from sim.core import InputError, optional_module

# The YAML keys that name files: the parameter table(s) at the top, and per problem the
# model, the tables and the optional visualisation and mapping tables.
PROBLEM_KEYS = (
    "sbml_files",
    "condition_files",
    "measurement_files",
    "observable_files",
    "visualization_files",
    "mapping_files",
)

OUTSIDE_FLAG = "--allow-outside-folder"

# What each key of the YAML file holds (format version 1), for the message of one missing.
KEYS = {
    "format_version": "the PEtab format version, 1",
    "parameter_file": "the parameter table, a file name or a list of them",
    "problems": "a list of one problem, whose keys name its model and tables",
    "sbml_files": "a list of one SBML model file",
    "condition_files": "a list of condition tables",
    "measurement_files": "a list of measurement tables",
    "observable_files": "a list of observable tables",
}


class PetabError(InputError):
    """A PEtab problem that cannot be read or is not supported; the message names the
    file, the table, the row and the column (one line; the command line exits with 2)."""

    def __init__(self, message: str):
        source, _, rest = message.partition(": ")
        super().__init__(source, "", rest)


def _tables() -> dict[str, tuple[str, list[str], list[str]]]:
    """YAML key -> (kind of table, its required columns, every column the format
    defines for it), from the `petab` library's own lists (petab.v1.C)."""
    from petab.v1 import C

    return {
        "parameter_file": ("parameter", C.PARAMETER_DF_REQUIRED_COLS, C.PARAMETER_DF_COLS),
        "condition_files": ("condition", [C.CONDITION_ID], [C.CONDITION_ID, C.CONDITION_NAME]),
        "measurement_files": ("measurement", C.MEASUREMENT_DF_REQUIRED_COLS, C.MEASUREMENT_DF_COLS),
        "observable_files": ("observable", C.OBSERVABLE_DF_REQUIRED_COLS, C.OBSERVABLE_DF_COLS),
        "visualization_files": (
            "visualization",
            C.VISUALIZATION_DF_REQUIRED_COLS,
            C.VISUALIZATION_DF_COLS,
        ),
        "mapping_files": ("mapping", C.MAPPING_DF_REQUIRED_COLS, C.MAPPING_DF_REQUIRED_COLS),
    }


def petab_library(path: str | Path):
    """The `petab.v1` library, which reads a problem's tables, with python-libsbml, which
    reads its model: the 'petab' extra (which brings what they import: pandas, sympy,
    PyYAML, jsonschema).

    Raises:
        MissingExtra: (naming the problem's file) either is not installed.
    """
    petab = optional_module("petab.v1", "petab", "PEtab problems", path)
    optional_module("libsbml", "petab", "PEtab problems", path)
    return petab


def read_spec(path: Path) -> dict:
    """The YAML file of a PEtab problem, checked against the format's schema (the
    `petab` library's), with one problem of one SBML model.

    Raises:
        PetabError: naming the YAML file and the key: not YAML, not a mapping, another
            format version, a key missing or of the wrong type, several problems or
            models.
        MissingExtra: the 'petab' extra is not installed.
    """
    petab_library(path)
    import yaml

    try:
        spec = yaml.safe_load(path.read_text())
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        reason = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise PetabError(
            f"{path}: not a readable PEtab problem: not a YAML file ({reason})"
        ) from None
    if not isinstance(spec, dict):
        raise PetabError(
            f"{path}: not a readable PEtab problem: expected a YAML mapping with format_version, "
            f"parameter_file and problems, got {type(spec).__name__}"
        )
    spec = {"format_version": 1, **spec}  # (files without one have been read as version 1)
    if str(spec["format_version"]).split(".")[0] != "1":
        raise PetabError(
            f"{path}: format_version {spec['format_version']!r}: only PEtab format version 1 is "
            "supported"
        )
    _check_schema(path, spec)
    problems = spec["problems"]
    if len(problems) != 1:
        raise PetabError(f"{path}: problems: expected one problem, got {len(problems)}")
    sbml_files = problems[0]["sbml_files"]
    if len(sbml_files) != 1:
        raise PetabError(
            f"{path}: problems[0].sbml_files: expected one SBML file, got {len(sbml_files)}"
        )
    return spec


def _check_schema(path: Path, spec: dict) -> None:
    """The `petab` library's JSON schema of format version 1, its first complaint as one
    line naming the key."""
    import jsonschema
    from petab.v1.yaml import validate_yaml_syntax

    try:
        validate_yaml_syntax(spec)
    except jsonschema.ValidationError as e:
        key = _key_path(e.absolute_path)
        if e.validator == "required" and isinstance(e.instance, dict):
            missing = [k for k in e.validator_value if k not in e.instance]
            names = ", ".join(repr(_key_path([*e.absolute_path, k])) for k in missing)
            meant = "; ".join(f"{k}: {KEYS[k]}" for k in missing if k in KEYS)
            raise PetabError(
                f"{path}: not a readable PEtab problem: the key{'s' if len(missing) > 1 else ''} "
                f"{names} {'are' if len(missing) > 1 else 'is'} missing "
                f"({meant or 'the format requires it'})"
            ) from None
        raise PetabError(f"{path}: {key or 'the file'}: {e.message}") from None


def _key_path(parts) -> str:
    """problems, 0, sbml_files -> 'problems[0].sbml_files'."""
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def named_files(path: Path, spec: dict) -> list[tuple[str, str, Path]]:
    """Every file the YAML file `path` names, as (its key path, its YAML key, the path
    the `petab` library opens: relative names from the YAML file's folder)."""
    out = []
    names = spec.get("parameter_file")
    names = [names] if isinstance(names, str) else (names if isinstance(names, list) else [])
    single = isinstance(spec.get("parameter_file"), str)
    for i, name in enumerate(names):
        if isinstance(name, str):
            out.append(
                (
                    "parameter_file" if single else f"parameter_file[{i}]",
                    "parameter_file",
                    path.parent / name,
                )
            )
    for p, problem in enumerate(spec.get("problems") or []):
        if not isinstance(problem, dict):
            continue
        for key in PROBLEM_KEYS:
            files = problem.get(key)
            for i, name in enumerate(files if isinstance(files, list) else []):
                if isinstance(name, str):
                    out.append((f"problems[{p}].{key}[{i}]", key, path.parent / name))
    return out


def confined(path: Path, spec: dict, allow_outside: bool = False) -> list[tuple[str, str, Path]]:
    """`named_files`, each checked to lie inside the YAML file's folder once every
    symbolic link is resolved (unless `allow_outside`); no file is opened.

    Raises:
        PetabError: naming the YAML file, the key and the path of the first file that
            lies outside.
    """
    files = named_files(path, spec)
    if allow_outside:
        return files
    folder = path.parent.resolve()
    for key, _, file in files:
        target = file.resolve()
        if not target.is_relative_to(folder):
            name = file.relative_to(path.parent) if file.is_relative_to(path.parent) else file
            raise PetabError(
                f"{path}: {key}: {str(name)!r} lies outside the problem's folder {str(folder)!r} "
                f"(at {str(target)!r}); "
                f"a PEtab problem may only name files inside its own folder: pass {OUTSIDE_FLAG} "
                "to read it anyway"
            )
    return files


def check_headers(path: Path, files: list[tuple[str, str, Path]]) -> None:
    """Every table named is a file whose header has the columns its kind of table
    requires (`_tables`); read by pandas as the `petab` library reads it, the header
    only.

    Raises:
        PetabError: naming the table's file, the column missing and what the table
            needs, with the column meant where one is spelt close to it.
    """
    import pandas as pd

    tables = _tables()
    for key_path, key, file in files:
        if not file.is_file():
            what = "is a folder" if file.is_dir() else "no such file"
            raise PetabError(
                f"{path}: {key_path}: {str(file)!r}: {what}; expected a "
                f"{tables[key][0] + ' table' if key in tables else 'SBML model'}"
            )
        if key not in tables:
            continue
        kind, required, known = tables[key]
        try:
            columns = [str(c) for c in pd.read_csv(file, sep="\t", nrows=0).columns]
        except Exception as e:  # (pandas reports an unreadable table in many ways)
            reason = str(e).splitlines()[0] if str(e) else type(e).__name__
            raise PetabError(
                f"{file}: not a readable PEtab {kind} table (tab-separated, a header of column "
                f"names): {reason}"
            ) from None
        for column in required:
            if column not in columns:
                raise PetabError(
                    f"{file}: column {column!r} missing (a PEtab {kind} table needs the columns "
                    f"{', '.join(required)}){_meant(column, columns, known)}"
                )


def _meant(column: str, columns: list[str], known: list[str]) -> str:
    """'; found 'measurment': perhaps you meant 'measurement'', where a column the
    format does not define is spelt close to the missing one."""
    strangers = [c for c in columns if c not in known]
    close = difflib.get_close_matches(
        column, strangers, n=1, cutoff=0.6
    ) or difflib.get_close_matches(column.lower(), [c.lower() for c in strangers], n=1, cutoff=0.6)
    if not close:
        return ""
    found = next(c for c in strangers if c == close[0] or c.lower() == close[0])
    return f"; found {found!r}: perhaps you meant {column!r}"


def lint(path: Path, problem: Any, files: list[tuple[str, str, Path]]) -> None:
    """The `petab` library's own checks of each table (`petab.v1.lint`: bounds in
    order, identifiers, estimate flags, prior types, noise distributions, ...), each
    complaint one line naming the table's file(s).

    Raises:
        PetabError: the first complaint.
    """
    from petab.v1 import lint as petab_lint

    checks = [
        ("parameter_file", lambda: petab_lint.check_parameter_df(problem.parameter_df)),
        ("observable_files", lambda: petab_lint.check_observable_df(problem.observable_df)),
        ("condition_files", lambda: petab_lint.check_condition_df(problem.condition_df)),
        (
            "measurement_files",
            lambda: petab_lint.check_measurement_df(problem.measurement_df, problem.observable_df),
        ),
    ]
    for key, check in checks:
        try:
            check()
        except (AssertionError, ValueError, TypeError, KeyError) as e:
            tables = ", ".join(str(f) for _, k, f in files if k == key)
            reason = (str(e).splitlines()[0] if str(e) else type(e).__name__).strip()
            raise PetabError(f"{tables or path}: {_tables()[key][0]} table: {reason}") from None


def files_digest(path: str | Path, allow_outside: bool = False) -> str:
    """A digest of a PEtab problem's files (the YAML file, its tables and its model),
    each named file inside the YAML file's folder unless `allow_outside` (as
    `load_petab`: a file outside is refused before it is read).

    Raises:
        PetabError: a file outside the folder.
    """
    import hashlib

    path = Path(path)
    digest = hashlib.sha256()
    digest.update(path.name.encode())
    digest.update(path.read_bytes() if path.is_file() else b"")
    for _, _, file in confined(path, read_spec(path), allow_outside):
        digest.update(str(file.name).encode())
        digest.update(file.read_bytes() if file.is_file() else b"")
    return digest.hexdigest()


def problem_files(path: str | Path) -> list[Path]:
    """The YAML file of a PEtab problem and every table and model it names (inputs an
    output must not overwrite); none is opened.

    Raises:
        MissingExtra: the 'petab' extra is not installed.
    """
    petab_library(path)
    import yaml

    path = Path(path)
    try:
        spec = yaml.safe_load(path.read_text())
    except Exception:  # (an unreadable problem is reported when it is loaded)
        return [path]
    return [
        path,
        *(file for _, _, file in named_files(path, spec if isinstance(spec, dict) else {})),
    ]
