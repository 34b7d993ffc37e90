"""`sim models`: the table of models, and one model's parameters, options, defaults and
observables, answered from the built-in table (`sim._model_table`) where it can."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from .._errors import InputError, optional_module
from ._app import _Command, app
from ._console import Table, _plain_table, out
from ._engine import _started, engine


def _family_name(cls: type) -> str:
    return next(b.__name__ for b in cls.__mro__[1:] if b.__name__.endswith("Model"))


def _table_answers() -> bool:
    """Whether the built-in model table (`sim._model_table`) tells of every model there
    is: at the command line (no models registered from Python) with no plugin installed.
    Then `sim models` imports no model."""
    if _started():
        return False
    from importlib.metadata import entry_points

    return not entry_points(group="simjax.models")  # (sim._sources.PLUGIN_GROUP)


def _list_models() -> None:
    """The table of models: name, family, description, where it comes from."""
    columns = ("model", "family", "description", "from")
    if _table_answers():
        from .._model_table import MODELS

        out.print(
            _plain_table(
                columns,
                [(name, e["kind"], e["description"], "built in") for name, e in MODELS.items()],
            )
        )
        return
    engine()
    from .._registry import is_plugin, model_class, model_names
    from .._sources import plugin_origin

    rows = []
    for name in model_names():
        origin = f"plugin {plugin_origin(name)}" if is_plugin(name) else "built in"
        try:
            cls = model_class(name)
        except ValueError as e:  # a plugin that does not load: listed with why
            rows.append((name, "?", str(e).partition(": ")[2], origin))
            continue
        rows.append((name, _family_name(cls), cls.description, origin))
    out.print(_plain_table(columns, rows))


# Where a config sets each part of a model, by family.
_OPTIONS_AT = {"md": "[model] or [params]", "pde": "[model]; points and domain also in [grid]"}


def _describe_model(label: str, e: dict) -> None:
    """`sim models NAME`: a `sim._catalogue.entry` as text."""
    out.print(f"{label} ({e['kind']}): {e['description']}", markup=False, highlight=False)
    out.print(e["summary"], markup=False, highlight=False)
    sections = [
        (
            "parameters, in [params]",
            ("parameter", "default", "unit", "constraint", "meaning"),
            e["parameters"],
        )
    ]
    if e["options"]:
        sections.append(
            (
                f"options, in {_OPTIONS_AT.get(e['family'], '[model]')}",
                ("option", "default", "type", "meaning"),
                e["options"],
            )
        )
    if e["family"] == "md":
        from .._catalogue import SYSTEM_KEYS

        sections.append(
            (
                "the starting system, in [system] (reduced units: lengths in sigma, energies in "
                "epsilon)",
                ("key", "default", "unit", "meaning"),
                SYSTEM_KEYS,
            )
        )
    if "state" in e:
        sections.append(("state, initial values in [initial]", ("state", "default"), e["state"]))
    for title, columns, rows in sections:
        out.print(f"\n{title}:", markup=False, highlight=False)
        out.print(_plain_table(columns, rows))
    if "initial_field" in e:
        out.print(
            f"\ninitial field ([initial] kind): {e['initial_field']}", markup=False, highlight=False
        )
    out.print(f"\nobservables: {', '.join(e['observables'])}", markup=False, highlight=False)


def _describe(label: str, model) -> None:
    from .._catalogue import entry
    from .._family import family_of

    _describe_model(label, entry(model, family_of(model).name))


_NONE = "none declared"


def _counted(n: int, what: str, plural: str | None = None) -> str:
    return f"{n} {what if n == 1 else plural or what + 's'}"


def _describe_sbml(label: str, model, d) -> None:
    """`sim models FILE.xml`: what the SBML file declares (`physics.ode.SbmlDeclarations`)
    and what a config sets of the model it imports to."""
    text = lambda line: out.print(line, markup=False, highlight=False)  # noqa: E731
    title = f" {d.model_name!r}" if d.model_name and d.model_name != d.model_id else ""
    text(f"{label} ({model.name}): SBML Level {d.level} Version {d.version} model{title}")
    counts = [
        _counted(len(d.species), "species", "species"),
        _counted(len(d.compartments), "compartment"),
        _counted(len(d.parameters), "parameter"),
        _counted(d.local_parameters, "local parameter"),
        _counted(d.reactions, "reaction"),
        _counted(d.assignment_rules, "assignment rule"),
        _counted(d.rate_rules, "rate rule"),
        _counted(d.initial_assignments, "initial assignment"),
        _counted(d.events, "event"),
        _counted(d.function_definitions, "function definition"),
    ]
    text("declares " + ", ".join(counts))
    if not d.units_declared:
        text("units: none declared")
    else:
        text(
            "model-wide units: "
            + (", ".join(f"{q} = {u}" for q, u in d.model_units) if d.model_units else _NONE)
        )
        if d.unit_definitions:
            text("unit definitions: " + ", ".join(f"{i} = {t}" for i, t in d.unit_definitions))
    unit = lambda u: u or _NONE  # noqa: E731
    sections = []
    if d.species:
        sections.append(
            (
                "species (initial values in [initial] by id)",
                ("species", "compartment", "initial", "substance unit", "observed as"),
                [(i, c, v or "by assignment or rule", unit(u), k) for i, c, v, u, k in d.species],
            )
        )
    if d.compartments:
        sections.append(
            (
                "compartments",
                ("compartment", "size", "unit", "dimensions"),
                [
                    (i, v or "by assignment or rule", unit(u), n or "3")
                    for i, v, u, n in d.compartments
                ],
            )
        )
    sections.append(
        (
            "parameters, in [params]",
            ("parameter", "default", "unit", "meaning"),
            [(p.name, f"{p.default:g}", unit(p.unit), p.doc) for p in model.parameters],
        )
    )
    sections.append(
        (
            "state, initial values in [initial] (a species as its amount)",
            ("state", "default"),
            [(s, f"{v:g}") for s, v in model.initial_defaults.items()],
        )
    )
    for title, columns, rows in sections:
        text(f"\n{title}:")
        out.print(_plain_table(columns, rows))
    text(f"\nobservables: {', '.join(model.observable_names)}")


def _file_models(name: str) -> None:
    """`sim models FILE.py[:CLASS]`: the model classes a Python file defines, or one."""
    from .._config import split_source
    from .._sources import SourceError, file_models, source_class

    file, cls_name = split_source(name)
    try:
        if cls_name is None:
            found = file_models(Path(file))
            if not found:
                raise SourceError(
                    f"{file}: defines no model class (a subclass of OdeModel, SdeModel, "
                    "SpectralPdeModel, GridPdeModel or ParticleModel)"
                )
            table = Table("model", "family", "description", "name in files", box=None)
            for n, cls in found.items():
                table.add_row(f"{file}:{n}", _family_name(cls), cls.description, cls.name)
            out.print(table)
            return
        cls = source_class(name, Path.cwd())
        model = cls()
    except SourceError as e:
        raise InputError("argument NAME", name, str(e).partition(": ")[2]) from None
    except Exception as e:  # the class's own constructor failed
        raise InputError(
            "argument NAME",
            name,
            f"{cls_name}() failed: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}",
        ) from None
    _describe(f"{name} ({cls.name})", model)


@app.command(cls=_Command)
def models(
    name: Annotated[
        Optional[str],
        typer.Argument(
            metavar="NAME",
            help="A model name (or FILE.py, FILE.py:CLASS, FILE.xml for SBML) for its details.",
        ),
    ] = None,
) -> None:
    """List models (built in and installed plugins); with NAME, its parameters, options,
    configuration defaults, state and observables, with units and meanings."""
    if name is None:
        _list_models()
        return
    if _table_answers():
        from .._model_table import MODELS

        if name in MODELS:
            _describe_model(name, MODELS[name])
            return
    engine()
    from solvers import did_you_mean

    from .._registry import get_model, model_names

    if name.endswith(".py") or ".py:" in name:
        _file_models(name)
        return
    if name.endswith(".xml") or name.endswith(".sbml"):
        optional_module("libsbml", "sbml", "SBML models", "argument NAME", name)
        from physics.ode import SbmlError, sbml_declarations, sbml_model

        try:
            model = sbml_model(Path(name))
        except SbmlError as e:
            raise InputError("argument NAME", name, str(e).partition(": ")[2]) from None
        _describe_sbml(name, model, sbml_declarations(Path(name)))
        return
    if name not in model_names():
        raise InputError(
            "argument NAME",
            name,
            f"unknown model; `sim models` lists them.{did_you_mean(name, model_names())}",
        )
    try:
        model = get_model(name)
    except ValueError as e:  # a plugin that does not load
        raise InputError("argument NAME", name, str(e)) from None
    _describe(name, model)
