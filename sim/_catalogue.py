"""What `sim models` tells of a model: its family, parameters, options, state or
configuration defaults and observables, as plain text in a dict (`entry`).

The built-in models' entries are kept in `sim/_model_table.py` (one module of entries per
family beside it, `sim/_model_table_ode.py`, ...), written from the models themselves by
`python -m sim._catalogue`, so that `sim models` and `sim models NAME`
answer without importing JAX or the models. The models stay the one source of truth:
`tests/sim/test_catalogue.py` checks that the table equals what `entry` makes of every
built-in model. This module imports nothing heavy; `entry` reads a model it is handed.
"""

from __future__ import annotations

import dataclasses
import inspect
import pprint
import sys
from pathlib import Path
from typing import Any

TABLE = Path(__file__).with_name("_model_table.py")

# The `[system]` keys of a particle (MD) config, with their defaults, units and meaning
# (reduced units: lengths in sigma, energies in epsilon). The MD family reads them
# (`sim.families.md._config`); tests/sim/test_catalogue.py checks the keys and the defaults
# against it.
SYSTEM_KEYS: tuple[tuple[str, str, str, str], ...] = (
    (
        "lattice",
        "fcc",
        "",
        "the crystal the particles start on: sc, bcc, fcc, rocksalt, caesium_chloride, zincblende, "
        "or random",
    ),
    (
        "cells",
        "4",
        "",
        "unit cells per axis (one whole number, or three); fcc has 4 particles a cell",
    ),
    ("density", "required", "1/length^3", "number density N / V"),
    (
        "temperature",
        "none (at rest)",
        "energy / k_B",
        "Maxwell-Boltzmann velocities at this temperature",
    ),
    ("seed", "0", "", "seed of the velocities and of a random placement"),
    ("particles", "required for random", "", 'lattice = "random": the number of particles'),
    (
        "min_distance",
        "0.8",
        "length",
        'lattice = "random": the least distance between two particles',
    ),
    (
        "file",
        "none",
        "",
        "an H5MD file to start from (positions, velocities, box; its /connectivity bonds make "
        "rigid molecules) instead of a lattice",
    ),
    ("frame", "-1 (the last)", "", "file: the frame of the file to start from"),
    ("group", "all", "", "file: the group of /particles to read"),
    (
        "units",
        "reduced",
        "",
        "reduced (k_B = 1) or real (nm, ps, kJ/mol, amu, e; temperatures in K, pressures in bar)",
    ),
    (
        "molecule",
        "none",
        "",
        "rigid molecules instead of a lattice: a water model (spce, tip3p; real units) or a table "
        "of species, mass, sites, constraints; with file, the water model of the file's molecules",
    ),
    (
        "molecules",
        "required with molecule",
        "",
        "the number of molecules, on a cubic grid, turned at random; density is then the mass "
        "density (g/cm^3 in real units)",
    ),
)


def entry(model: Any, family: str) -> dict[str, Any]:
    """What `sim models NAME` shows of `model` (an instance), as text.

    Arguments:
        model: a model built with its default options.
        family: the name of its family ("ode", "sde", "pde", "md").

    Returns:
        A dict of plain values: family, kind (its abstract base), description, summary
        (the first line of its docstring), parameters (name, default, unit, constraint,
        meaning), options (name, default, type, meaning), state (name, initial value),
        initial_field (a PDE's default initial field and its options), observables.
    """
    cls = type(model)
    doc = inspect.getdoc(cls) or ""
    parameters = []
    for p in model.parameters:
        constraint = (
            p.constraint
            if p.bounds is None
            else f"{p.constraint}, in [{p.bounds[0]:g}, {p.bounds[1]:g}]"
        )
        parameters.append([p.name, _text(p.default), p.unit, constraint, p.doc])
    options = []
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        default = getattr(model, f.name)
        if f.name == "domain" and hasattr(cls, "default_domain"):
            default = tuple(default) if default is not None else None
        options.append([f.name, _text(default), _type_text(f.type), _argument_doc(cls, f.name)])
    out: dict[str, Any] = {
        "family": family,
        "kind": next(b.__name__ for b in cls.__mro__[1:] if b.__name__.endswith("Model")),
        "description": cls.description,
        "summary": " ".join(doc.split("\n\n")[0].split()),
        "parameters": parameters,
        "options": options,
        "observables": list(model.observable_names),
    }
    state = getattr(model, "state_names", None)
    if state is not None:
        defaults = getattr(model, "initial_defaults", {})
        out["state"] = [[s, _text(defaults[s]) if s in defaults else "required"] for s in state]
    kind = getattr(cls, "initial_kind", None)
    if kind is not None:
        extra = getattr(cls, "initial_defaults", {})
        out["initial_field"] = kind + (
            " (" + ", ".join(f"{k} = {_text(v)}" for k, v in extra.items()) + ")" if extra else ""
        )
    return out


def _text(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return str(value).lower()
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, tuple):
        return "[" + ", ".join(_text(v) for v in value) + "]"
    return str(value)


def _type_text(annotation: Any) -> str:
    text = (
        annotation
        if isinstance(annotation, str)
        else getattr(annotation, "__name__", str(annotation))
    )
    return {
        "Any": "value",
        "tuple[int, ...]": "list of int",
        "tuple[float, ...] | None": "list of float",
        "tuple[tuple[float, float], ...] | None": "[low, high] per axis",
        "tuple[str, ...]": "list of str",
        "tuple[float, ...]": "list of float",
    }.get(text, text)


def _argument_doc(cls: type, name: str) -> str:
    """The meaning of `name` in the `Arguments` section of the first docstring along the
    class's bases that documents it (an item may name several: "width, depth: ...")."""
    for base in cls.__mro__:
        lines = inspect.cleandoc(base.__dict__.get("__doc__") or "").splitlines()
        starts = [
            i for i, line in enumerate(lines) if line.startswith("Arguments") and line.endswith(":")
        ]
        if not starts:
            continue
        items: list[list[str]] = []
        indent = None
        for line in lines[starts[0] + 1 :]:
            if not line.strip():
                break
            depth = len(line) - len(line.lstrip())
            indent = depth if indent is None else indent
            if depth == indent and ": " in line:
                items.append(line.strip().split(": ", 1))
            elif depth > indent and items:
                items[-1][1] += " " + line.strip()
            else:
                break
        for names, text in items:
            if name in [n.strip() for n in names.split(",")]:
                return " ".join(text.split())
    return ""


def built_in() -> dict[str, dict[str, Any]]:
    """The entries of every built-in model, from the models (imports them all)."""
    import sim
    from sim._family import family_of
    from sim._registry import _DEFERRED, _MODELS, get_model

    names = sorted(
        {
            *_DEFERRED,
            *(
                n
                for n, cls in _MODELS.items()
                if cls.__module__.split(".")[0] in ("physics", "sim")
            ),
        }
    )
    del sim
    out = {}
    for name in names:
        model = get_model(name)
        out[name] = entry(model, family_of(model).name)
    return out


# How the module of each family's entries names the family.
_FAMILY_NAMES = {"md": "molecular dynamics (MD)"}


def write_table(path: Path = TABLE) -> None:
    """Write the built-in models' entries to `path` (a Python module holding `MODELS`,
    by name) and, beside it, one module of entries per family (`_model_table_ode.py`,
    ...) that it gathers."""
    models = built_in()
    families = sorted({e["family"] for e in models.values()})
    for family in families:
        entries = {name: e for name, e in models.items() if e["family"] == family}
        what = _FAMILY_NAMES.get(family, family.upper())
        path.with_name(f"{path.stem}_{family}.py").write_text(
            f'"""The built-in {what} models as `sim models` shows them, written by\n'
            "`python -m sim._catalogue` from the models themselves (do not edit;\n"
            'tests/sim/test_catalogue.py checks it)."""\n\n'
            f"MODELS = {pprint.pformat(entries, width=110, sort_dicts=False)}\n"
        )
    imports = "".join(
        f"from .{path.stem}_{family} import MODELS as _{family.upper()}\n" for family in families
    )
    gathered = ", ".join(f"**_{family.upper()}" for family in families)
    path.write_text(
        '"""The built-in models as `sim models` shows them, by name: the entries of each '
        "family's\nmodule, written by `python -m sim._catalogue` from the models themselves "
        '(do not edit;\ntests/sim/test_catalogue.py checks it)."""\n\n'
        f"{imports}\nMODELS = dict(sorted({{{gathered}}}.items()))\n"
    )


if __name__ == "__main__":
    write_table(Path(sys.argv[1]) if len(sys.argv) > 1 else TABLE)
