"""ODE models from SBML files (Level 2 and 3 core), read with python-libsbml.

The importer turns an SBML model into one `OdeModel`:
- the state is every quantity that changes by reactions or by a rate rule: a species
  changed by reactions as its amount (so that a changing compartment is right), a species,
  compartment, parameter or stoichiometry with a rate rule as its value;
- the parameters are the global parameters (and the reactions' local parameters, promoted
  to `reaction_parameter` ids) and the constant compartments that no rule assigns: a fit,
  a sweep or `[params]` address them by their SBML ids;
- assignment rules, species concentrations (amount / compartment size) and variable
  stoichiometries are evaluated in the order their dependencies give, before the
  reaction rates;
- the observables are every species (as a concentration unless it has only substance
  units, or lives in a 0-dimensional compartment), compartment, parameter and reaction
  rate, under its SBML id.

Events without a delay become the model's `events()` (see `_events`): what they assign
joins the state. Mathematics is compiled from libsbml's syntax tree straight into
`jax.numpy` calls (no text, no `eval`). What the importer does not support (events with
a delay, triggers that root finding cannot locate, priorities that are not constant,
events of equal priority that change what the other reads (their order is random in
SBML), algebraic rules, delays, fast
reactions, `rateOf`, SBML packages) is refused with one line naming the element: never
a silently different model.

The import runs in steps, each in a module of its own: reading the document and its
checks (`_sbml_document`), the state, the parameters and the values that rules and
assignments give (`_sbml_values`), the rates of reactions and rate rules
(`_sbml_reactions`, as arrays by `_sbml_vector` for a large model), the events
(`_sbml_events`), all on SBML math compiled to JAX (`_sbml_math`); what the model then
computes at run time is a `_Program` (`_sbml_program`).
"""

from __future__ import annotations

import hashlib
import math
from pathlib import Path
from typing import Any, ClassVar

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, PyTree

from .._base import Parameter
from .._types import Scalar, State
from ._sbml_document import SbmlDocument, read_document
from ._sbml_events import sbml_events
from ._sbml_math import SbmlError, _num
from ._sbml_program import _Program
from ._sbml_reactions import state_rates, vector_rates
from ._sbml_values import Formulas, Start, right_hand_side, start_values, state_and_parameters
from ._sbml_vector import VectorRates
from .base import OdeModel

# Models with this many reactions or more have their kinetic laws evaluated as arrays,
# grouped by form (`_sbml_vector`); `sbml_model(path, vectorise=...)` decides otherwise.
VECTORISE_FROM = 50


class SbmlOdeModel(OdeModel):
    """An ODE model imported from SBML by `sbml_model`. Its observables are the SBML
    quantities by id (species, compartments, parameters, reaction rates).

    A value: its declarations and its compiled program are static fields, and the
    program is equal for every import of the same bytes (its `source`), so two imports
    of one file are equal models that share their compiled programs.

    Declared stiff: the rates of a biochemical network typically span orders of
    magnitude, where an explicit method's steps run out."""

    stiff: ClassVar[bool] = True
    name: str = eqx.field(static=True)
    description: str = eqx.field(static=True)
    parameters: tuple[Parameter, ...] = eqx.field(static=True)
    state_names: tuple[str, ...] = eqx.field(static=True)
    initial_values: tuple[float, ...] = eqx.field(static=True)
    parameter_dependent_initial: frozenset[str] = eqx.field(static=True)
    compartment_of: tuple[tuple[str, str], ...] = eqx.field(static=True)
    amount_species: frozenset[str] = eqx.field(static=True)
    program: Any = eqx.field(static=True)

    @property
    def initial_defaults(self) -> dict[str, float]:
        """The initial value of each state component, as the file gives it."""
        return dict(zip(self.state_names, self.initial_values, strict=True))

    @property
    def species_compartments(self) -> dict[str, str]:
        """The compartment of each species, by id."""
        return dict(self.compartment_of)

    def initial_state(
        self, initial: dict[str, Array] | None = None, params: PyTree | None = None
    ) -> State:
        """The initial state vector [n]: the values in `initial` by name (a species by
        amount), the others as the model's initial assignments compute them from
        `params` (default: the default parameters)."""
        return self.program.initial_state(
            self.default_params() if params is None else params, dict(initial or {})
        )

    def vector_field(self, t: Scalar, y: State, params: PyTree) -> State:
        return self.program.vector_field(t, y, params)

    def undefined(self, t: Scalar, y: State, params: PyTree) -> str | None:
        return self.program.undefined(t, y, params)

    def observables(self, t: Scalar, y: State, params: PyTree) -> dict[str, Array]:
        values = self.program.values(t, y, params)
        return {
            name: jnp.broadcast_to(jnp.asarray(_num(fn(values)), y.dtype), ())
            for name, fn in self.program.observed
        }

    @property
    def observable_names(self) -> tuple[str, ...]:
        return tuple(name for name, _ in self.program.observed)

    def events(self) -> tuple:
        """The SBML events, in the order simultaneous ones execute (decreasing priority)."""
        return self.program.events

    @property
    def checked_observables(self) -> tuple[str, ...]:
        """What a run checks for a blow-up: the quantities of the state. (An SBML model
        may declare a parameter of infinite value, or a compartment of no size that
        nothing reads: not a diverged solution.)"""
        return self.state_names


# Models already imported, by (resolved path, modification time, size): a config built
# several times in one process (a run, a sweep's chunks, a fit) is read once (equal
# imports of one file's bytes are equal models in any case).
_IMPORTED: dict[tuple[str, int, int], SbmlOdeModel] = {}


def sbml_model(path: str | Path, vectorise: bool | None = None) -> SbmlOdeModel:
    """The ODE model of an SBML file (Level 2 or 3 core).

    Arguments:
        path: the SBML file.
        vectorise: evaluate kinetic laws of the same form as arrays, one group at a
            time, and the species' rates as one sum over the stoichiometry (the same
            numbers, a much smaller program for a large model); False keeps one
            expression per reaction; None (default) vectorises models of at least
            `VECTORISE_FROM` reactions.

    Raises:
        SbmlError: the file is missing or not valid SBML, or uses what the importer does
            not support (named in one line: delayed events, algebraic rules, delays,
            fast reactions, rateOf, packages).

    Example:
        >>> model = sbml_model("tests/data/sbml/00001/00001-sbml-l3v2.xml")
    """
    path = Path(path)
    try:
        stat = path.resolve().stat()
    except OSError:
        raise SbmlError(f"{path}: no such file") from None
    key = (str(path.resolve()), stat.st_mtime_ns, stat.st_size, vectorise)
    if key not in _IMPORTED:
        _IMPORTED[key] = _import(path, vectorise)
    return _IMPORTED[key]


def _import(path: Path, vectorise: bool | None = None) -> SbmlOdeModel:
    """The model of an SBML file, imported anew."""
    doc = read_document(path)
    layout = state_and_parameters(doc)
    start = start_values(doc, layout)
    formulas = right_hand_side(doc, layout, start)
    rates = state_rates(doc, layout.state, formulas.ids)
    if vectorise is None:
        vectorise = len(doc.reactions) >= VECTORISE_FROM
    vector = vector_rates(doc, layout.state, formulas.fns, formulas.deps) if vectorise else None
    # (what the start of a run computes from the free parameters)
    reads_params = start.from_parameters()
    program = _program(doc, layout.state, start, formulas, rates, vector, reads_params)
    program.source = (hashlib.sha256(path.read_bytes()).hexdigest(), vectorise)
    return _model(doc, path, layout.state, start, program, reads_params)


def _program(
    doc: SbmlDocument,
    state: list[str],
    start: Start,
    formulas: Formulas,
    rates: list,
    vector: VectorRates | None,
    reads_params: set[str],
) -> _Program:
    """What the model computes from (t, y, params): the formulas (less those `vector`
    computes as arrays), the rates, the observables, the start of a run and the events."""
    species = doc.species
    observed: list[tuple[str, Any]] = []
    for sid in list(species) + list(doc.compartments) + list(doc.parameters):
        observed.append((sid, lambda v, _s=sid: v[_s]))
    for reaction in doc.reactions:
        observed.append((reaction.getId(), lambda v, _r=reaction.getId(): v[_r]))
    derived = formulas.derived
    if vector is not None:
        derived = [
            (sid, fn)
            for sid, fn in derived
            if sid not in set(vector.grouped) | set(vector.species_ids)
        ]
    program = _Program(state, derived, formulas.fixed, rates, observed, vector)
    program.incomplete = tuple(doc.incomplete)
    program.start, program.start_deps, program.start_order = start.fns, start.deps, start.order
    program.from_params = start.recomputed(formulas.fixed, reads_params)
    program.concentration_of = {
        key.removeprefix("@amount:"): species[key.removeprefix("@amount:")].getCompartment()
        for key in state
        if key.startswith("@amount:") and not doc.amount_valued(key.removeprefix("@amount:"))
    }
    program.events = sbml_events(doc, program, formulas.ids)
    return program


def _model(
    doc: SbmlDocument,
    path: Path,
    state: list[str],
    start: Start,
    program: _Program,
    reads_params: set[str],
) -> SbmlOdeModel:
    """The `SbmlOdeModel` of the file: its name, parameters, state names and initial
    values, and its program.

    Raises:
        SbmlError: a state component with no initial value.
    """
    species, reactions, name = doc.species, doc.reactions, doc.name
    state_names = tuple(k.removeprefix("@amount:") for k in state)
    missing = [
        n
        for n, k in zip(state_names, state, strict=False)
        if not math.isfinite(_initial_of(doc, start.initial, k))
    ]
    # (a parameter or compartment with no value is no parameter to set: NaN wherever read)
    parameter_ids = [pid for pid in start.parameter_ids if start.finite(pid)]
    if missing:
        raise SbmlError(
            f"{name}: {missing[0]!r} has no initial value (no value attribute, initial assignment "
            "or rule gives one)"
        )
    return SbmlOdeModel(
        name=doc.model.getId() or path.stem,
        description=f"imported from the SBML file {name} ({len(species)} species, "
        f"{len(reactions)} reaction{'' if len(reactions) == 1 else 's'})",
        parameters=_declared_parameters(doc, parameter_ids, start.initial),
        state_names=state_names,
        initial_values=tuple(_initial_of(doc, start.initial, k) for k in state),
        parameter_dependent_initial=frozenset(
            n
            for n, k in zip(state_names, state, strict=False)
            if k.removeprefix("@amount:") in reads_params
            or program.concentration_of.get(n) in reads_params
        ),
        compartment_of=tuple((sid, s.getCompartment()) for sid, s in species.items()),
        amount_species=frozenset(sid for sid in species if doc.amount_valued(sid)),
        program=program,
    )


def _initial_of(doc: SbmlDocument, initial: dict[str, Any], key: str) -> float:
    """The initial value of a state component (a species' amount)."""
    if key.startswith("@amount:"):
        sid = key.removeprefix("@amount:")
        value = float(initial[sid])
        return (
            value
            if doc.amount_valued(sid)
            else value * float(initial[doc.species[sid].getCompartment()])
        )
    return float(initial[key])


def _declared_parameters(
    doc: SbmlDocument, parameter_ids: list[str], initial: dict[str, Any]
) -> tuple[Parameter, ...]:
    """The model's parameters: default value, units and a description of each."""
    parameters, compartments, species = doc.parameters, doc.compartments, doc.species
    return tuple(
        Parameter(
            pid,
            float(initial[pid]),
            (
                parameters[pid].getUnits()
                if pid in parameters
                else compartments[pid].getUnits()
                if pid in compartments
                else species[pid].getSubstanceUnits()
            ),  # ("" where the file declares none: no unit is claimed for it)
            (
                parameters[pid].getName()
                if pid in parameters
                else f"size of compartment {compartments[pid].getName() or pid}"
                if pid in compartments
                else f"{'amount' if doc.amount_valued(pid) else 'concentration'} of species "
                f"{species[pid].getName() or pid}, which nothing changes"
            ),
        )
        for pid in parameter_ids
    )
