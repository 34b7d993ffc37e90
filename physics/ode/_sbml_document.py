"""The SBML document as the importer reads it, and the checks made on reading it.

`read_document` opens a file with python-libsbml and refuses what the importer does not
support in the document itself (invalid SBML, Level 1, packages, events with a delay,
algebraic rules, fast reactions, rules and events that set what they cannot), then
gathers the model's elements by id into an `SbmlDocument`: what every later step of the
import reads, and what it asks of each species.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._sbml_math import SbmlError, _Compiler


@dataclass(frozen=True, eq=False)
class SbmlDocument:
    """What the importer reads of one SBML file: the libsbml objects of its model by id,
    its rules, the events it imports and what they assign."""

    libsbml: Any  # the python-libsbml module
    document: Any  # (held for as long as the model's objects are read)
    model: Any
    name: str  # the file's name, which every message begins with
    events: list[tuple[str, Any]]  # (label, event) of the events with a trigger
    functions: dict[str, Any]  # id -> FunctionDefinition
    compartments: dict[str, Any]
    species: dict[str, Any]
    parameters: dict[str, Any]
    references: dict[str, Any]  # species references with ids (their stoichiometry is a value)
    reactions: list
    rate_rules: dict[str, Any]
    assignment_rules: dict[str, Any]
    initial_assignments: dict[str, Any]
    event_targets: list[str]  # what the events assign (in document order)
    changed_by_reactions: set[str]  # the species whose amount reactions change
    # (where, whether some piece applies) of each piecewise without an otherwise, in the
    # order the math is compiled (`_Program.incomplete`)
    incomplete: list = field(default_factory=list)

    @property
    def level(self) -> int:
        """The document's SBML Level."""
        return self.document.getLevel()

    def compiler(self, where: str) -> _Compiler:
        """A compiler of the model's math whose refusals name `where`."""
        return _Compiler(self.libsbml, self.functions, f"{self.name}: {where}", self.incomplete)

    def amount_valued(self, sid: str) -> bool:
        """Whether the species' symbol means its amount (else its concentration)."""
        s = self.species[sid]
        compartment = self.compartments.get(s.getCompartment())
        # (a Level 3 compartment may leave its dimensions unset, which libsbml reports as
        # 0: only dimensions set to 0 make a compartment without size)
        return s.getHasOnlySubstanceUnits() or (
            compartment is not None
            and compartment.isSetSpatialDimensions()
            and compartment.getSpatialDimensionsAsDouble() == 0
        )

    def conversion_factor(self, sid: str) -> str:
        """The id of the species' conversion factor (its own, else the model's), or ""."""
        s, model = self.species[sid], self.model
        return (
            s.getConversionFactor()
            if s.isSetConversionFactor()
            else (model.getConversionFactor() if model.isSetConversionFactor() else "")
        )

    def is_quantity(self, sid: str) -> bool:
        """Whether `sid` is a species, compartment, parameter or stoichiometry."""
        return _is_quantity(sid, self.species, self.compartments, self.parameters, self.references)


def read_document(path: Path) -> SbmlDocument:
    """The SBML document of the file, checked and gathered.

    Raises:
        SbmlError: the file is missing or not valid SBML, or its document holds what the
            importer does not support.
    """
    libsbml, document, model = _read(path)
    name = path.name
    events = _events_with_triggers(model, name)
    _refuse_algebraic_rules_and_fast_reactions(model, name)
    functions = {
        model.getFunctionDefinition(i).getId(): model.getFunctionDefinition(i)
        for i in range(model.getNumFunctionDefinitions())
    }
    compartments = {c.getId(): c for c in model.getListOfCompartments()}
    species = {s.getId(): s for s in model.getListOfSpecies()}
    parameters = {p.getId(): p for p in model.getListOfParameters()}
    reactions = list(model.getListOfReactions())
    references = _references(reactions)
    rate_rules, assignment_rules = _rules(model)
    initial_assignments = {
        a.getSymbol(): a for a in model.getListOfInitialAssignments() if a.isSetMath()
    }
    quantities = (species, compartments, parameters, references)
    event_targets = _event_targets(name, events, assignment_rules, quantities)
    changed = _changed_by_reactions(
        name, reactions, species, set(rate_rules) | set(assignment_rules)
    )
    return SbmlDocument(
        libsbml=libsbml,
        document=document,
        model=model,
        name=name,
        events=events,
        functions=functions,
        compartments=compartments,
        species=species,
        parameters=parameters,
        references=references,
        reactions=reactions,
        rate_rules=rate_rules,
        assignment_rules=assignment_rules,
        initial_assignments=initial_assignments,
        event_targets=event_targets,
        changed_by_reactions=changed,
    )


def _read(path: Path):
    try:
        import libsbml
    except ImportError:  # pragma: no cover
        raise SbmlError("reading SBML needs the 'sbml' extra: pip install 'simjax[sbml]'") from None
    if not path.is_file():
        raise SbmlError(f"{path}: no such file")
    document = libsbml.readSBMLFromFile(str(path))
    errors = [document.getError(i) for i in range(document.getNumErrors())]
    serious = [e for e in errors if e.getSeverity() >= libsbml.LIBSBML_SEV_ERROR]
    if serious:
        first = serious[0]
        message = " ".join(first.getShortMessage().split()) or " ".join(first.getMessage().split())
        raise SbmlError(f"{path}: not valid SBML (line {first.getLine()}: {message})")
    model = document.getModel()
    if model is None:
        raise SbmlError(f"{path}: holds no SBML model")
    if document.getLevel() < 2:
        raise SbmlError(
            f"{path}: SBML Level {document.getLevel()} is not supported (Level 2 and 3 are); "
            "convert it to Level 3"
        )
    for i in range(document.getNumPlugins()):
        package = document.getPlugin(i).getPackageName()
        # (libsbml represents Level 3 Version 2's own math as a package of its own; the
        # layout and render packages only draw the model, they change nothing it computes)
        if package not in ("l3v2extendedmath", "layout", "render") and document.isPackageEnabled(
            package
        ):
            raise SbmlError(
                f"{path}: uses the SBML package {package!r}, which is not supported (SBML core "
                "only)"
            )
    properties = libsbml.ConversionProperties()
    properties.addOption("promoteLocalParameters", True)
    if document.convert(properties) != libsbml.LIBSBML_OPERATION_SUCCESS:
        raise SbmlError(f"{path}: its reactions' local parameters cannot be made global")
    return libsbml, document, document.getModel()


def _events_with_triggers(model, name: str) -> list[tuple[str, Any]]:
    """(label, event) of the model's events that have a trigger; an event with a delay
    is refused."""
    events = []
    for i in range(model.getNumEvents()):
        event = model.getEvent(i)
        label = event.getId() or str(i + 1)
        if event.isSetDelay() and event.getDelay() is not None and event.getDelay().isSetMath():
            raise SbmlError(f"{name}: event {label!r}: events with a delay are not supported")
        if event.getTrigger() is None or not event.getTrigger().isSetMath():
            continue  # (an event without a trigger never fires)
        events.append((label, event))
    return events


def _refuse_algebraic_rules_and_fast_reactions(model, name: str) -> None:
    """Refuses the model's first algebraic rule, then its first fast reaction."""
    for i in range(model.getNumRules()):
        if model.getRule(i).isAlgebraic():
            raise SbmlError(f"{name}: algebraic rule {i + 1}: algebraic rules are not supported")
    for i in range(model.getNumReactions()):
        reaction = model.getReaction(i)
        if reaction.isSetFast() and reaction.getFast():
            raise SbmlError(
                f"{name}: reaction {reaction.getId()!r}: fast reactions are not supported"
            )


def _references(reactions: list) -> dict[str, Any]:
    """The reactions' species references that have an id, by id."""
    references: dict[str, Any] = {}
    for reaction in reactions:
        for ref in list(reaction.getListOfReactants()) + list(reaction.getListOfProducts()):
            if ref.isSetId() and ref.getId():
                references[ref.getId()] = ref
    return references


def _rules(model) -> tuple[dict[str, Any], dict[str, Any]]:
    """The rate rules and the assignment rules by the id they set."""
    # A rule or initial assignment without math (allowed since Level 3 Version 2) says
    # nothing: it is left out, as the specification reads it.
    rate_rules, assignment_rules = {}, {}
    for rule in model.getListOfRules():
        target = rule.getVariable()
        if not rule.isSetMath():
            continue
        if rule.isRate():
            rate_rules[target] = rule
        elif rule.isAssignment():
            assignment_rules[target] = rule
    return rate_rules, assignment_rules


def _is_quantity(sid: str, *elements: dict[str, Any]) -> bool:
    """Whether `sid` is an id of the dicts of elements."""
    return any(sid in ids for ids in elements)


def _event_targets(
    name: str, events: list, assignment_rules: dict[str, Any], quantities: tuple
) -> list[str]:
    """What the events assign, in document order; an assignment to what an assignment
    rule sets, or to no species, compartment, parameter or stoichiometry (`quantities`,
    their dicts), is refused."""
    event_targets: list[str] = []
    for label, event in events:
        for assignment in event.getListOfEventAssignments():
            target = assignment.getVariable()
            if not assignment.isSetMath():
                continue
            if target in assignment_rules:
                raise SbmlError(
                    f"{name}: event {label!r} assigns {target!r}, which an assignment rule sets"
                )
            if not _is_quantity(target, *quantities):
                raise SbmlError(
                    f"{name}: event {label!r} assigns {target!r}, which is no species, "
                    "compartment, parameter or stoichiometry"
                )
            if target not in event_targets:
                event_targets.append(target)
    return event_targets


def _changed_by_reactions(name: str, reactions: list, species: dict, ruled: set[str]) -> set[str]:
    """The species whose amount reactions change (neither boundary nor constant ones); a
    reaction naming no species, or such a species that a rule sets (`ruled`), is
    refused."""
    changed_by_reactions: set[str] = set()
    for reaction in reactions:
        for ref in list(reaction.getListOfReactants()) + list(reaction.getListOfProducts()):
            s = species.get(ref.getSpecies())
            if s is None:
                raise SbmlError(
                    f"{name}: reaction {reaction.getId()!r} names no species {ref.getSpecies()!r}"
                )
            if not s.getBoundaryCondition() and not s.getConstant():
                changed_by_reactions.add(s.getId())
    for sid in changed_by_reactions & ruled:
        raise SbmlError(
            f"{name}: species {sid!r} is changed by reactions and set by a rule (it must be a "
            "boundary species)"
        )
    return changed_by_reactions
