"""Write docs/reference/config.md, the reference of every config key, from the schemas.

Each section's keys come from the pydantic models that validate it (`model_fields`: the
type, the default and the description, with a unit or a computed default where a field
declares one in `json_schema_extra`), and the `[checks]` bounds from the families'
declarations. Run from the repository root:

    python docs/gen_config_reference.py          # writes the page
    python docs/gen_config_reference.py --check  # exit 1 when the page is out of date

tests/test_docs.py checks that the committed page is what this script writes.
"""

from __future__ import annotations

import dataclasses
import re
import sys
import types
import typing
from pathlib import Path
from typing import Any

import pydantic
from pydantic_core import PydanticUndefined

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "reference" / "config.md"

RUNS = "run, sweep, fit, infer, profile"


@dataclasses.dataclass(frozen=True)
class Table:
    """One table of the page: the keys of `schema` under the dotted `prefix`."""

    prefix: str
    schema: type[pydantic.BaseModel] | tuple[tuple[str, str, str, str], ...]
    commands: str
    title: str = ""


def tables() -> list[tuple[str, str, list[Table]]]:
    """The page's sections in order: (section, what it is, its tables)."""
    import sim
    from inference._bayes_model import InferSection, NoiseSection
    from inference._data import DataSection
    from inference._experiments import PreequilibrationTable
    from inference._fit_build import ExperimentTable
    from inference._fit_rdf import RdfFitTable
    from inference._fit_section import FitSection
    from inference._observation import ObservableTable
    from inference._rdf_target import RdfDataTable
    from sim._catalogue import SYSTEM_KEYS
    from sim._config import ConfigSpec, EventSection, ModelSection, spec_class
    from sim._sweep_spec import ParamSpec, SweepSection
    from sim.families.md._config import BarostatTable, MdSolverExtras
    from sim.families.md._rdf import RdfTable
    from sim.families.ode._numerics import OdeSolverExtras
    from sim.families.pde._config import GridTable, PdeInitialTable, PdeSolverExtras
    from sim.families.sde import EnsembleSection
    from sim.families.sde._numerics import SdeSolverExtras

    del sim  # (imported for its families, which build the schema)
    fields = ConfigSpec.model_fields  # (the shared sections' descriptions)
    spec = spec_class()  # (with the families' keys)
    section = lambda name: spec.model_fields[name].annotation  # noqa: E731
    return [
        (
            "model",
            fields["model"].description,
            [
                Table("model", ModelSection, RUNS),
                Table("model", ModelKeys, RUNS, "A model from a file, or written in the config"),
            ],
        ),
        ("params", fields["params"].description, []),
        (
            "initial",
            fields["initial"].description,
            [Table("initial", PdeInitialTable, RUNS, "PDE runs")],
        ),
        ("time", fields["time"].description, [Table("time", section("time"), RUNS)]),
        (
            "solver",
            fields["solver"].description,
            [
                Table("solver", section("solver"), RUNS, "Every family"),
                Table("solver", OdeSolverExtras, RUNS, "ODE runs"),
                Table("solver", SdeSolverExtras, RUNS, "SDE runs"),
                Table("solver", PdeSolverExtras, RUNS, "PDE runs"),
                Table("solver", MdSolverExtras, RUNS, "MD runs"),
                Table("solver.barostat", BarostatTable, RUNS, "MD runs: the barostat"),
            ],
        ),
        (
            "output",
            fields["output"].description,
            [Table("output", section("output"), "run, sweep (output.file: every command)")],
        ),
        (
            "checks",
            fields["checks"].description,
            [Table("checks", section("checks"), "run, sweep")],
        ),
        ("events", fields["events"].description, [Table("events[]", EventSection, RUNS)]),
        ("ensemble", _doc(EnsembleSection), [Table("ensemble", EnsembleSection, RUNS)]),
        ("grid", _doc(GridTable), [Table("grid", GridTable, RUNS)]),
        (
            "system",
            "The particles an MD run starts from: generated (a lattice, a random packing, rigid "
            "molecules) or read from an H5MD file (reduced units: lengths in sigma, energies in "
            "epsilon).",
            [Table("system", SYSTEM_KEYS, RUNS)],
        ),
        ("rdf", _doc(RdfTable), [Table("rdf", RdfTable, "run, sweep, fit")]),
        (
            "sweep",
            fields["sweep"].description,
            [
                Table("sweep", SweepSection, "sweep"),
                Table("sweep.params.<name>", ParamSpec, "sweep", "One swept quantity"),
            ],
        ),
        (
            "data",
            fields["data"].description,
            [
                Table("data", DataSection, "fit, infer, profile"),
                Table(
                    "data.observables.<name>",
                    ObservableTable,
                    "fit, infer, profile",
                    "An observable as a table",
                ),
                Table("data", RdfDataTable, "fit", "A g(r) fit (MD with [rdf])"),
            ],
        ),
        (
            "fit",
            fields["fit"].description,
            [
                Table("fit", FitSection, "fit, profile"),
                Table("fit", RdfFitTable, "fit", "A g(r) fit (MD with [rdf])"),
            ],
        ),
        (
            "infer",
            fields["infer"].description,
            [
                Table("infer", InferSection, "infer"),
                Table("infer.noise", NoiseSection, "infer", "[infer.noise]"),
            ],
        ),
        (
            "experiments",
            fields["experiments"].description,
            [
                Table("experiments[]", ExperimentTable, "fit, infer, profile"),
                Table(
                    "experiments[].preequilibrate",
                    PreequilibrationTable,
                    "fit, infer, profile",
                    "preequilibrate",
                ),
            ],
        ),
    ]


class ModelKeys(pydantic.BaseModel):
    """The keys of `[model]` beside `name` that name a model's file or write a model (the
    options of a model are its own keys: `sim models NAME` lists them)."""

    source: str | None = pydantic.Field(
        None, description='a model class in a Python file: "file.py:Class"'
    )
    sbml: str | None = pydantic.Field(None, description="an SBML file (Level 2 or 3 core)")
    states: dict[str, Any] | None = pydantic.Field(
        None, description="an ODE or SDE written as text: state = d(state)/dt"
    )
    noise: dict[str, Any] | None = pydantic.Field(
        None, description="an SDE written as text: state = its diffusion"
    )
    fields: dict[str, Any] | None = pydantic.Field(
        None, description="a PDE written as text: field = d(field)/dt"
    )
    parameters: dict[str, Any] | None = pydantic.Field(
        None,
        description="a text model's parameters: a default, or a table of value, unit, doc, "
        "positive, bounds",
    )
    observables: dict[str, Any] | None = pydantic.Field(
        None, description="a text model's observables: name = expression"
    )
    stiff: bool = pydantic.Field(
        False,
        description="an ODE written as text is stiff: with no [solver] method it is solved "
        "with kvaerno5",
    )


def _doc(schema: type) -> str:
    """The first paragraph of a schema's docstring, on one line."""
    text = " ".join((schema.__doc__ or "").strip().split("\n\n")[0].split())
    return re.sub(r"^`\[\w+\]`: ", "", text)


def type_name(annotation: Any) -> str:
    """A field's type as a config writer reads it."""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        names = [type_name(a) for a in args if a is not type(None)]
        return " or ".join(dict.fromkeys(names))
    if origin is typing.Literal:
        return "one of " + ", ".join(f"`{a}`" for a in args)
    if origin is list:
        inner = type_name(args[0]) if args else "any"
        return "array" if inner == "any" else f"array ({inner})"
    if origin is dict or annotation is dict:
        return "table"
    if isinstance(annotation, type) and issubclass(annotation, pydantic.BaseModel):
        return "table"
    return {
        bool: "boolean",
        int: "integer",
        float: "number",
        str: "string",
        Any: "any",
    }.get(annotation, getattr(annotation, "__name__", str(annotation)))


def _extra(field) -> dict[str, Any]:
    extra = field.json_schema_extra
    return extra if isinstance(extra, dict) else {}


def default_text(field) -> str:
    extra = _extra(field)
    if "default" in extra:
        return str(extra["default"])
    if extra.get("required") or field.default is PydanticUndefined:
        return "required"
    value = field.default
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return f'"{value}"' if value else '""'
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, (dict, list)) and not value:
        return "{}" if isinstance(value, dict) else "[]"
    if isinstance(value, pydantic.BaseModel):
        return "(its keys' defaults)"
    return str(value)


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def rows(table: Table) -> list[tuple[str, str, str, str, str]]:
    """(key, type, default, unit, meaning) of each field of a table."""
    if isinstance(table.schema, tuple):  # (key, default, unit, meaning): `sim models`' table
        return [(f"{table.prefix}.{k}", "", d, u, m) for k, d, u, m in table.schema]
    out = []
    checks = _checks() if table.prefix == "checks" else {}
    for name, field in table.schema.model_fields.items():
        if table.prefix == "checks":
            default, meaning, family = checks[name]
            out.append((f"checks.{name}", "number", f"{default:g}", "", f"{family}: {meaning}"))
            continue
        if table.prefix == "solver" and table.title != "Every family" and name in ("method",):
            continue
        extra = _extra(field)
        out.append(
            (
                f"{table.prefix}.{name}",
                type_name(field.annotation),
                default_text(field),
                str(extra.get("unit", "")),
                field.description or "",
            )
        )
    return out


def _checks() -> dict[str, tuple[float, str, str]]:
    from sim._family import families

    return {
        key: (default, meaning, family.name.upper())
        for family in families()
        for key, (default, meaning) in family.checks.items()
    }


def key_paths() -> set[str]:
    """Every dotted key the page documents."""
    return {row[0] for _, _, group in tables() for table in group for row in rows(table)}


def page() -> str:
    lines = [
        "# Config keys",
        "",
        "<!-- Written by docs/gen_config_reference.py from the config schemas: edit the",
        "schemas (their fields' descriptions), then run the script. -->",
        "",
        "Every key a config may hold, section by section: its type, its default, its unit",
        "where it has one, what it means, and which `sim` commands read it. Times are in the",
        "model's time unit, and lengths in its length unit (`sim models NAME` lists a model's",
        "parameters with their units). `<name>` stands for a name of your choosing (a",
        "parameter, an observable); `[]` marks a list of tables (`[[events]]`). A key a",
        "section does not list is refused with one line naming it and the keys it takes.",
        "",
    ]
    for section, about, group in tables():
        about = _cell(about or "")
        lines += [f"## `[{section}]`", "", about[:1].upper() + about[1:].rstrip(".") + ".", ""]
        if section == "params":
            lines += [
                f"Read by {_commands(RUNS)}.",
                "",
            ]
        for table in group:
            if table.title:
                lines += [f"**{table.title}**", ""]
            lines += [
                f"Read by {_commands(table.commands)}.",
                "",
                "| key | type | default | unit | meaning |",
                "| --- | --- | --- | --- | --- |",
            ]
            for key, kind, default, unit, meaning in rows(table):
                lines.append(
                    f"| `{key}` | {_cell(kind)} | {_cell(default)} | {_cell(unit)} | "
                    f"{_cell(meaning)} |"
                )
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def _commands(text: str) -> str:
    """`run, sweep (...)` as `sim run`, `sim sweep` (...)."""
    names, _, note = text.partition(" (")
    out = ", ".join(f"`sim {name}`" for name in names.split(", "))
    return f"{out} ({note.replace('output.file', '`output.file`')}" if note else out


def main(argv: list[str]) -> int:
    text = page()
    if "--check" in argv:
        if not PAGE.exists() or PAGE.read_text() != text:
            print(f"{PAGE.relative_to(ROOT)} is out of date: run docs/gen_config_reference.py")
            return 1
        return 0
    PAGE.write_text(text)
    print(f"wrote {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    raise SystemExit(main(sys.argv[1:]))
