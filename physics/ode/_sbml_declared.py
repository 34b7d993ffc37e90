"""What an SBML file declares, as the file states it: its species, compartments,
parameters, the number of its reactions, rules, events and function definitions, and the
units it names (`sbml_declarations`).

This is the file as written (before the importer promotes reactions' local parameters
or works out a state), for telling a user what a model file holds; the model itself is
`sbml_model`'s.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from ._sbml_math import SbmlError

# Model-wide default units of a Level 3 model, by attribute.
_MODEL_UNITS = ("substance", "time", "volume", "area", "length", "extent")


@dataclasses.dataclass(frozen=True)
class SbmlDeclarations:
    """The declarations of one SBML file. Units are the unit ids the file gives, "" where
    it gives none.

    Attributes:
        file: the file's name.
        model_id, model_name: the model's id and name ("" when not set).
        level, version: the SBML level and version.
        species: (id, compartment, initial value as written, substance units,
            "amount" or "concentration": what its observable is, an amount when it has
            only substance units or lives in a 0-dimensional compartment) of each species.
        compartments: (id, size as written, units, spatial dimensions) of each.
        parameters: (id, value as written, units, constant) of each global parameter.
        local_parameters: the number of reactions' local parameters.
        reactions, assignment_rules, rate_rules: how many of each the file declares.
        initial_assignments, events, function_definitions: how many of each, likewise.
        model_units: (quantity, unit id) of the model-wide default units it sets.
        unit_definitions: (id, definition as text, such as "(60 second)") of each.
    """

    file: str
    model_id: str
    model_name: str
    level: int
    version: int
    species: tuple[tuple[str, str, str, str, str], ...]
    compartments: tuple[tuple[str, str, str, str], ...]
    parameters: tuple[tuple[str, str, str, bool], ...]
    local_parameters: int
    reactions: int
    assignment_rules: int
    rate_rules: int
    initial_assignments: int
    events: int
    function_definitions: int
    model_units: tuple[tuple[str, str], ...]
    unit_definitions: tuple[tuple[str, str], ...]

    @property
    def units_declared(self) -> bool:
        """Whether the file names any unit at all."""
        named = [s[3] for s in self.species] + [c[2] for c in self.compartments]
        named += [p[2] for p in self.parameters]
        return bool(self.model_units or self.unit_definitions or any(named))


def sbml_declarations(path: str | Path) -> SbmlDeclarations:
    """What the SBML file at `path` declares, as written.

    Raises:
        SbmlError: the file is missing, not valid SBML, or holds no model.

    Examples:
        >>> sbml_declarations("tests/data/sbml/cases/00028/00028-sbml-l3v2.xml").species[0][0]
        'S1'
    """
    path = Path(path)
    try:
        import libsbml
    except ImportError:  # pragma: no cover
        raise SbmlError("reading SBML needs the 'sbml' extra: pip install 'simjax[sbml]'") from None
    if not path.is_file():
        raise SbmlError(f"{path}: no such file")
    document = libsbml.readSBMLFromFile(str(path))
    serious = [
        document.getError(i)
        for i in range(document.getNumErrors())
        if document.getError(i).getSeverity() >= libsbml.LIBSBML_SEV_ERROR
    ]
    if serious:
        raise SbmlError(f"{path}: not valid SBML (line {serious[0].getLine()})")
    model = document.getModel()
    if model is None:
        raise SbmlError(f"{path}: holds no SBML model")
    compartments = list(model.getListOfCompartments())
    reactions = list(model.getListOfReactions())
    rules = list(model.getListOfRules())
    return SbmlDeclarations(
        file=path.name,
        model_id=model.getId(),
        model_name=model.getName(),
        level=document.getLevel(),
        version=document.getVersion(),
        species=tuple(
            _species(s, point={c.getId() for c in compartments if _point(c)})
            for s in model.getListOfSpecies()
        ),
        compartments=tuple(
            (
                c.getId(),
                f"{c.getSize():g}" if c.isSetSize() else "",
                c.getUnits() if c.isSetUnits() else "",
                f"{c.getSpatialDimensionsAsDouble():g}" if c.isSetSpatialDimensions() else "",
            )
            for c in compartments
        ),
        parameters=tuple(
            (
                p.getId(),
                f"{p.getValue():g}" if p.isSetValue() else "",
                p.getUnits() if p.isSetUnits() else "",
                bool(p.getConstant()),
            )
            for p in model.getListOfParameters()
        ),
        local_parameters=sum(
            # (Level 3 names them localParameter, Level 2 parameter; libsbml counts
            # either under both names)
            r.getKineticLaw().getNumLocalParameters()
            if document.getLevel() >= 3
            else r.getKineticLaw().getNumParameters()
            for r in reactions
            if r.isSetKineticLaw()
        ),
        reactions=len(reactions),
        assignment_rules=sum(1 for r in rules if r.isAssignment()),
        rate_rules=sum(1 for r in rules if r.isRate()),
        initial_assignments=model.getNumInitialAssignments(),
        events=model.getNumEvents(),
        function_definitions=model.getNumFunctionDefinitions(),
        model_units=tuple(
            (quantity, getattr(model, f"get{quantity.title()}Units")())
            for quantity in _MODEL_UNITS
            if document.getLevel() >= 3 and getattr(model, f"isSet{quantity.title()}Units")()
        ),
        unit_definitions=tuple(
            (ud.getId(), _definition(libsbml, ud)) for ud in model.getListOfUnitDefinitions()
        ),
    )


def _point(c) -> bool:
    """Whether a compartment has no extent (0 spatial dimensions)."""
    return c.isSetSpatialDimensions() and c.getSpatialDimensionsAsDouble() == 0


def _species(s, point: set[str]) -> tuple[str, str, str, str, str]:
    if s.isSetInitialConcentration():
        initial = f"concentration {s.getInitialConcentration():g}"
    elif s.isSetInitialAmount():
        initial = f"amount {s.getInitialAmount():g}"
    else:
        initial = ""
    return (
        s.getId(),
        s.getCompartment(),
        initial,
        s.getSubstanceUnits() if s.isSetSubstanceUnits() else "",
        "amount"
        if s.getHasOnlySubstanceUnits() or s.getCompartment() in point
        else "concentration",
    )


def _definition(libsbml, ud) -> str:
    """A unit definition as a product of its units: `(0.001 mole) * litre^-1`."""
    terms = []
    for u in ud.getListOfUnits():
        kind = libsbml.UnitKind_toString(u.getKind())
        factor = u.getMultiplier() * 10.0 ** u.getScale()
        term = kind if factor == 1 else f"({factor:g} {kind})"
        if u.getExponentAsDouble() != 1:
            term += f"^{u.getExponentAsDouble():g}"
        terms.append(term)
    return " * ".join(terms) or "dimensionless"
