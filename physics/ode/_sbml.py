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
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import equinox as eqx
import jax.numpy as jnp
import jax.scipy.special as jsp
import numpy as np
from jaxtyping import Array, PyTree

from .._base import Parameter
from .._types import Scalar, State
from ._events import relation
from ._sbml_vector import Group, VectorRates, law_shape, slot_names
from .base import OdeModel

TIME = "@time"  # the key of time among the values (no SBML id can take it)
AVOGADRO = 6.02214179e23  # SBML Level 3 Version 1's value of the avogadro csymbol
# Models with this many reactions or more have their kinetic laws evaluated as arrays,
# grouped by form (`_sbml_vector`); `sbml_model(path, vectorise=...)` decides otherwise.
VECTORISE_FROM = 50

Compiled = Callable[[dict[str, Any]], Any]


MAX_DEPTH = 150
"""The deepest nesting of SBML math the reader compiles."""


class SbmlError(ValueError):
    """An SBML file that cannot be read or holds what the importer does not support; the
    message is one line naming the element."""


def _num(x):
    """A number from a boolean (SBML lets one stand for the other)."""
    if getattr(x, "dtype", None) == jnp.bool_ or isinstance(x, bool):
        return jnp.where(x, 1.0, 0.0)
    return x


def _bool(x):
    if getattr(x, "dtype", None) == jnp.bool_ or isinstance(x, bool):
        return x
    return jnp.not_equal(x, 0.0)


def _fold(fn, parts: list[Compiled], empty: float) -> Compiled:
    if not parts:
        return lambda v: empty
    if len(parts) == 1:
        only = parts[0]
        return lambda v: _num(only(v))

    def folded(v):
        out = _num(parts[0](v))
        for part in parts[1:]:
            out = fn(out, _num(part(v)))
        return out

    return folded


def _fold_bool(fn, parts: list[Compiled], empty: bool) -> Compiled:
    if not parts:
        return lambda v: jnp.asarray(empty)

    def folded(v):
        out = _bool(parts[0](v))
        for part in parts[1:]:
            out = fn(out, _bool(part(v)))
        return out

    return folded


def _relation(op, parts: list[Compiled]) -> Compiled:
    # n-ary relations hold between each neighbouring pair (MathML, SBML L3v2)
    def related(v):
        values = [_num(p(v)) for p in parts]
        out = jnp.asarray(True)
        for a, b in zip(values, values[1:], strict=False):
            out = jnp.logical_and(out, op(a, b))
        return out

    return related


def _unary(fn: Callable) -> Callable[[Compiled], Compiled]:
    return lambda a: lambda v: fn(_num(a(v)))


class _Compiler:
    """SBML math (a libsbml ASTNode) to a function of a dict of values by id."""

    def __init__(
        self, libsbml, functions: dict[str, Any], where: str, incomplete: list | None = None
    ):
        self.sbml = libsbml
        self.functions = functions  # id -> FunctionDefinition
        self.where = where
        # (where, whether some piece applies) of each piecewise without an otherwise:
        # its value is undefined where none applies (NaN here; `_Program.undefined`)
        self.incomplete = incomplete if incomplete is not None else []
        s = libsbml
        sec = lambda x: 1.0 / jnp.cos(x)  # noqa: E731
        csc = lambda x: 1.0 / jnp.sin(x)  # noqa: E731
        cot = lambda x: 1.0 / jnp.tan(x)  # noqa: E731
        self.unary = {
            s.AST_FUNCTION_ABS: jnp.abs,
            s.AST_FUNCTION_EXP: jnp.exp,
            s.AST_FUNCTION_LN: jnp.log,
            s.AST_FUNCTION_FLOOR: jnp.floor,
            s.AST_FUNCTION_CEILING: jnp.ceil,
            s.AST_FUNCTION_SIN: jnp.sin,
            s.AST_FUNCTION_COS: jnp.cos,
            s.AST_FUNCTION_TAN: jnp.tan,
            s.AST_FUNCTION_SEC: sec,
            s.AST_FUNCTION_CSC: csc,
            s.AST_FUNCTION_COT: cot,
            s.AST_FUNCTION_SINH: jnp.sinh,
            s.AST_FUNCTION_COSH: jnp.cosh,
            s.AST_FUNCTION_TANH: jnp.tanh,
            s.AST_FUNCTION_SECH: lambda x: 1.0 / jnp.cosh(x),
            s.AST_FUNCTION_CSCH: lambda x: 1.0 / jnp.sinh(x),
            s.AST_FUNCTION_COTH: lambda x: 1.0 / jnp.tanh(x),
            s.AST_FUNCTION_ARCSIN: jnp.arcsin,
            s.AST_FUNCTION_ARCCOS: jnp.arccos,
            s.AST_FUNCTION_ARCTAN: jnp.arctan,
            s.AST_FUNCTION_ARCSEC: lambda x: jnp.arccos(1.0 / x),
            s.AST_FUNCTION_ARCCSC: lambda x: jnp.arcsin(1.0 / x),
            s.AST_FUNCTION_ARCCOT: lambda x: jnp.arctan(1.0 / x),
            s.AST_FUNCTION_ARCSINH: jnp.arcsinh,
            s.AST_FUNCTION_ARCCOSH: jnp.arccosh,
            s.AST_FUNCTION_ARCTANH: jnp.arctanh,
            s.AST_FUNCTION_ARCSECH: lambda x: jnp.arccosh(1.0 / x),
            s.AST_FUNCTION_ARCCSCH: lambda x: jnp.arcsinh(1.0 / x),
            s.AST_FUNCTION_ARCCOTH: lambda x: jnp.arctanh(1.0 / x),
            s.AST_FUNCTION_FACTORIAL: lambda x: jsp.gamma(x + 1.0),
        }
        self.relations = {
            s.AST_RELATIONAL_EQ: jnp.equal,
            s.AST_RELATIONAL_NEQ: jnp.not_equal,
            s.AST_RELATIONAL_LT: jnp.less,
            s.AST_RELATIONAL_LEQ: jnp.less_equal,
            s.AST_RELATIONAL_GT: jnp.greater,
            s.AST_RELATIONAL_GEQ: jnp.greater_equal,
        }

    def refuse(self, what: str) -> SbmlError:
        return SbmlError(f"{self.where}: {what}")

    def reads_time(self, node) -> bool:
        """Whether a formula reads the time (through the function definitions it calls)."""
        if node is None:
            return False
        if node.getType() == self.sbml.AST_NAME_TIME:
            return True
        if node.getType() == self.sbml.AST_FUNCTION:
            definition = self.functions.get(node.getName())
            if (
                definition is not None
                and definition.getMath() is not None
                and self.reads_time(definition.getMath())
            ):
                return True
        return any(self.reads_time(node.getChild(i)) for i in range(node.getNumChildren()))

    def names(self, node, bound: frozenset[str] = frozenset()) -> set[str]:
        """The ids a formula reads (through the function definitions it calls)."""
        s = self.sbml
        out: set[str] = set()
        if node is None:
            return out
        kind = node.getType()
        if kind == s.AST_NAME and node.getName() not in bound:
            out.add(node.getName())
        if kind == s.AST_FUNCTION:
            definition = self.functions.get(node.getName())
            if definition is not None and definition.getMath() is not None:
                body = definition.getMath()
                args = frozenset(
                    body.getChild(i).getName() for i in range(body.getNumChildren() - 1)
                )
                out |= self.names(body.getChild(body.getNumChildren() - 1), args)
        for i in range(node.getNumChildren()):
            out |= self.names(node.getChild(i), bound)
        return out

    def _node(self, node, depth: int) -> tuple[int, list]:
        """(type, children) of a math node, refusing none and runaway nesting."""
        if node is None:
            raise self.refuse("has no math")
        # (below Python's recursion limit with every frame a level takes, the compiler's
        # two or three included: at 400, math of 399 levels raised RecursionError)
        if depth > MAX_DEPTH:
            raise self.refuse(f"math nested more than {MAX_DEPTH} levels deep")
        return node.getType(), [node.getChild(i) for i in range(node.getNumChildren())]

    def root(self, node, scope: dict[str, Compiled] | None = None, depth: int = 0) -> Compiled:
        """A trigger (boolean math) as a function g that rises through zero where the
        trigger becomes true: the difference of the sides of a relation (-1 where a side
        is NaN, as the relation judges it: `physics.ode.relation`), the minimum over
        `and`, the maximum over `or`, minus g for `not`.

        Raises:
            SbmlError: a trigger that is no such combination (eq, neq, xor, ...).
        """
        s = self.sbml
        kind, kids = self._node(node, depth)
        if kind == s.AST_CONSTANT_TRUE:
            return lambda v: 1.0
        if kind == s.AST_CONSTANT_FALSE:
            return lambda v: -1.0
        if kind in (
            s.AST_INTEGER,
            s.AST_REAL,
            s.AST_REAL_E,
            s.AST_RATIONAL,
        ):  # (a number as a boolean: true unless 0)
            return (lambda v: 1.0) if float(node.getValue()) != 0 else (lambda v: -1.0)
        signs = {
            s.AST_RELATIONAL_LT: -1.0,
            s.AST_RELATIONAL_LEQ: -1.0,
            s.AST_RELATIONAL_GT: 1.0,
            s.AST_RELATIONAL_GEQ: 1.0,
        }
        if kind in signs and len(kids) >= 2:
            sign = signs[kind]
            sides = [self.compile(k, scope, depth + 1) for k in kids]
            pairs = [
                relation(sign, lambda v, _a=a: _num(_a(v)), lambda v, _b=b: _num(_b(v)))
                for a, b in zip(sides, sides[1:], strict=False)
            ]
            return _fold(jnp.minimum, pairs, math.inf) if len(pairs) > 1 else pairs[0]
        if kind in (s.AST_LOGICAL_AND, s.AST_LOGICAL_OR) and kids:
            parts = [self.root(k, scope, depth + 1) for k in kids]
            return _fold(jnp.minimum if kind == s.AST_LOGICAL_AND else jnp.maximum, parts, 0.0)
        if kind == s.AST_LOGICAL_NOT and len(kids) == 1:
            inner = self.root(kids[0], scope, depth + 1)
            return lambda v: -_num(inner(v))
        if kind == s.AST_FUNCTION and self.functions.get(node.getName()) is not None:
            body = self.functions[node.getName()].getMath()
            if body is not None:
                params = [body.getChild(i).getName() for i in range(body.getNumChildren() - 1)]
                if len(params) == len(kids):
                    args = {
                        p: self.compile(k, scope, depth + 1)
                        for p, k in zip(params, kids, strict=False)
                    }
                    return self.root(body.getChild(body.getNumChildren() - 1), args, depth + 1)
        raise self.refuse(
            f"the trigger uses {node.getName() or 'an element'!r}, whose becoming true cannot be "
            "located by root finding (relations <, <=, >, >= joined by and, or, not can)"
        )

    def compile(self, node, scope: dict[str, Compiled] | None = None, depth: int = 0) -> Compiled:
        s = self.sbml
        kind, kids = self._node(node, depth)
        sub = lambda n: self.compile(n, scope, depth + 1)  # noqa: E731
        if kind in (s.AST_INTEGER, s.AST_REAL, s.AST_REAL_E, s.AST_RATIONAL):
            value = float(node.getValue())
            return lambda v: value
        if kind == s.AST_CONSTANT_PI:
            return lambda v: math.pi
        if kind == s.AST_CONSTANT_E:
            return lambda v: math.e
        if kind == s.AST_CONSTANT_TRUE:
            return lambda v: jnp.asarray(True)
        if kind == s.AST_CONSTANT_FALSE:
            return lambda v: jnp.asarray(False)
        if kind == s.AST_NAME_TIME:
            return lambda v: v[TIME]
        if kind == s.AST_NAME_AVOGADRO:
            return lambda v: AVOGADRO
        if kind == s.AST_NAME:
            name = node.getName()
            if scope is not None and name in scope:
                return scope[name]
            return lambda v: v[name]  # (<infinity/> and <notanumber/> are numbers, not names)
        if kind == s.AST_PLUS:
            return _fold(jnp.add, [sub(k) for k in kids], 0.0)
        if kind == s.AST_TIMES:
            return _fold(jnp.multiply, [sub(k) for k in kids], 1.0)
        if kind == s.AST_MINUS:
            parts = [sub(k) for k in kids]
            if len(parts) == 1:
                return _unary(jnp.negative)(parts[0])
            return _fold(jnp.subtract, parts, 0.0)
        if kind == s.AST_DIVIDE:
            return _fold(jnp.divide, [sub(k) for k in kids], 1.0)
        if kind in (s.AST_POWER, s.AST_FUNCTION_POWER):
            return _fold(jnp.power, [sub(k) for k in kids], 1.0)
        if kind == s.AST_FUNCTION_ROOT:
            if len(kids) == 1:
                return _unary(jnp.sqrt)(sub(kids[0]))
            degree, x = sub(kids[0]), sub(kids[1])
            return lambda v: jnp.power(_num(x(v)), 1.0 / _num(degree(v)))
        if kind == s.AST_FUNCTION_LOG:
            if len(kids) == 1:
                return _unary(jnp.log10)(sub(kids[0]))
            base, x = sub(kids[0]), sub(kids[1])
            return lambda v: jnp.log(_num(x(v))) / jnp.log(_num(base(v)))
        if kind in self.unary:
            if len(kids) != 1:
                raise self.refuse(
                    f"{node.getName() or 'a function'} takes one argument, got {len(kids)}"
                )
            return _unary(self.unary[kind])(sub(kids[0]))
        if kind == s.AST_FUNCTION_MAX:
            return _fold(jnp.maximum, [sub(k) for k in kids], -math.inf)
        if kind == s.AST_FUNCTION_MIN:
            return _fold(jnp.minimum, [sub(k) for k in kids], math.inf)
        if kind == s.AST_FUNCTION_QUOTIENT:
            a, b = sub(kids[0]), sub(kids[1])
            return lambda v: jnp.trunc(_num(a(v)) / _num(b(v)))
        if kind == s.AST_FUNCTION_REM:
            a, b = sub(kids[0]), sub(kids[1])
            return lambda v: jnp.fmod(_num(a(v)), _num(b(v)))
        if kind in self.relations:
            return _relation(self.relations[kind], [sub(k) for k in kids])
        if kind == s.AST_LOGICAL_AND:
            return _fold_bool(jnp.logical_and, [sub(k) for k in kids], True)
        if kind == s.AST_LOGICAL_OR:
            return _fold_bool(jnp.logical_or, [sub(k) for k in kids], False)
        if kind == s.AST_LOGICAL_XOR:
            return _fold_bool(jnp.logical_xor, [sub(k) for k in kids], False)
        if kind == s.AST_LOGICAL_NOT:
            a = sub(kids[0])
            return lambda v: jnp.logical_not(_bool(a(v)))
        if kind == s.AST_LOGICAL_IMPLIES:
            a, b = sub(kids[0]), sub(kids[1])
            return lambda v: jnp.logical_or(jnp.logical_not(_bool(a(v))), _bool(b(v)))
        if kind == s.AST_FUNCTION_PIECEWISE:
            parts = [sub(k) for k in kids]
            otherwise = parts[-1] if len(parts) % 2 else (lambda v: math.nan)
            pieces = list(
                zip(parts[0:-1:2] if len(parts) % 2 else parts[0::2], parts[1::2], strict=False)
            )

            def piecewise(v):
                out = _num(otherwise(v))
                for value, condition in reversed(pieces):
                    out = jnp.where(_bool(condition(v)), _num(value(v)), out)
                return out

            if not len(parts) % 2:
                self.incomplete.append(
                    (
                        self.where,
                        lambda v: _fold_bool(jnp.logical_or, [c for _, c in pieces], False)(v),
                    )
                )
            return piecewise
        if kind == s.AST_FUNCTION:
            name = node.getName()
            definition = self.functions.get(name)
            if definition is None or definition.getMath() is None:
                raise self.refuse(f"calls {name!r}, which is no function definition of the model")
            body = definition.getMath()
            params = [body.getChild(i).getName() for i in range(body.getNumChildren() - 1)]
            if len(params) != len(kids):
                raise self.refuse(
                    f"calls {name}() with {len(kids)} arguments; it takes {len(params)}"
                )
            args = [sub(k) for k in kids]
            # A function body sees its arguments only (and time, constants), never the
            # model's ids: a new scope of the arguments' values.
            inner = self.compile(
                body.getChild(body.getNumChildren() - 1),
                {p: a for p, a in zip(params, args, strict=False)},
                depth + 1,
            )
            return inner
        if kind == s.AST_FUNCTION_DELAY:
            raise self.refuse("uses delay(), which is not supported")
        if kind == getattr(s, "AST_FUNCTION_RATE_OF", -1):
            raise self.refuse("uses rateOf(), which is not supported")
        if kind == s.AST_LAMBDA:
            raise self.refuse("has a lambda outside a function definition")
        raise self.refuse(
            f"uses the MathML element {node.getName() or kind!r}, which is not supported"
        )


class SbmlOdeModel(OdeModel):
    """An ODE model imported from SBML by `sbml_model`. Its observables are the SBML
    quantities by id (species, compartments, parameters, reaction rates)."""

    # Class attributes set per import: state_names, initial_defaults, parameters, name,
    # description; and what the compiled program needs.
    species_compartments: ClassVar[dict[str, str]]
    amount_species: ClassVar[frozenset[str]]
    program: Any = eqx.field(static=True)

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
        return self.program.events + tuple(getattr(self, "event_list", ()))

    @property
    def checked_observables(self) -> tuple[str, ...]:
        """What a run checks for a blow-up: the quantities of the state. (An SBML model
        may declare a parameter of infinite value, or a compartment of no size that
        nothing reads: not a diverged solution.)"""
        return self.state_names


class _Program:
    """What an imported model computes from (t, y, params): the values of every id in
    dependency order, the state's rates and the observables."""

    def __init__(
        self,
        state: list[str],
        derived: list[tuple[str, Compiled]],
        fixed: dict[str, float],
        rates: list[Compiled],
        observed: list[tuple[str, Compiled]],
        vector: VectorRates | None = None,
    ):
        # keys of the state components (a species changed by reactions: its amount, as "@amount:ID")
        self.state = state
        self.derived = derived  # (id, function of the values so far), in dependency order
        # (with `vector`: the reactions it groups and the values of the species in the
        # state are computed as arrays, and `derived` leaves them out)
        self.vector = vector
        self.fixed = fixed
        self.rates = rates
        self.observed = observed
        self.events: tuple = ()  # physics.ode.Event, set once the program exists
        self.incomplete: tuple = ()  # (where, applies) of each piecewise without an otherwise
        # The values at the start (attributes, initial assignments, assignment rules),
        # set once the program exists: functions and dependencies by id, an order.
        self.start: dict[str, Compiled] = {}
        self.start_deps: dict[str, set[str]] = {}
        self.start_order: list[str] = []
        self.concentration_of: dict[
            str, str
        ] = {}  # state species read by concentration -> compartment
        # Constants of the run whose value an initial assignment computes from the
        # parameters (a parameter k2 = 2 * k1 at the start): recomputed from the
        # parameters of each run, in this order (their dependencies included).
        self.from_params: list[str] = []

    def start_values(
        self, params, order: list[str] | None = None, start: dict[str, Compiled] | None = None
    ) -> dict[str, Any]:
        """The values at t = 0 of the ids in `order` (default: all), the free parameters
        read from `params`."""
        start = self.start if start is None else start
        values: dict[str, Any] = {
            TIME: jnp.asarray(0.0)
        }  # (initial assignments that read time see 0)
        for sid in self.start_order if order is None else order:
            values[sid] = params[sid] if sid in params else _num(start[sid](values))
        return values

    def initial_state(self, params, overrides: dict[str, Any]) -> Any:
        """The initial state vector of a run with these parameters; `overrides` gives
        values of state components by name (a species by amount), which replace what the
        model computes for them (and what is computed from them sees the new value)."""
        start, deps, order = self.start, self.start_deps, self.start_order
        names = [key.removeprefix("@amount:") for key in self.state]
        given = {name: overrides[name] for name in names if name in overrides}
        if given:
            start, deps = dict(start), dict(deps)
            for name, value in given.items():
                compartment = self.concentration_of.get(name)
                if compartment is None:
                    start[name], deps[name] = (lambda v, _x=value: _x), set()
                else:  # (the override is an amount; the species' symbol its concentration)
                    start[name], deps[name] = (
                        (lambda v, _x=value, _c=compartment: _x / v[_c]),
                        {compartment},
                    )
            order = _toposort(deps, "initial values")
        values = self.start_values(params, order, start)
        out = []
        for key, name in zip(self.state, names, strict=False):  # noqa: B007
            if name in given:
                out.append(jnp.asarray(given[name], dtype=float))
            elif name in self.concentration_of:
                out.append(
                    jnp.asarray(values[name] * values[self.concentration_of[name]], dtype=float)
                )
            else:
                out.append(jnp.asarray(values[name], dtype=float))
        return jnp.stack(out) if out else jnp.zeros((0,), dtype=float)

    def undefined(self, t, y, params) -> str | None:
        """Where a piecewise without an otherwise has no piece that applies at (t, y),
        its value undefined in SBML (NaN here), or None."""
        if not self.incomplete:
            return None
        values = self.values(t, y, params)
        for where, applies in self.incomplete:
            if not bool(np.all(np.asarray(applies(values)))):
                return f"{where}: a piecewise with no otherwise, and none of its pieces applies"
        return None

    def values(self, t, y, params) -> dict[str, Any]:
        """The value of every id at (t, y) (a dict; with `vector`, a `_Values` whose
        species and grouped rates are taken from their arrays when read)."""
        return self.evaluate(t, y, params)[0]

    def evaluate(self, t, y, params) -> tuple[dict[str, Any], Any]:
        """The values by id and, with `vector`, the vector of every reaction's rate."""
        values: dict[str, Any] = dict(self.fixed) if self.vector is None else _Values(self.fixed)
        if self.from_params:
            computed = self.start_values(params, self.from_params)
            values.update({sid: computed[sid] for sid in self.from_params if sid not in params})
        values.update(params)
        values[TIME] = t
        vector = self.vector
        if vector is None:
            for i, name in enumerate(self.state):
                values[name] = y[i]
        else:
            rows = set(vector.species_rows.tolist())
            for i, name in enumerate(self.state):
                if i in rows:
                    values.lazy[name] = (y, i)
                else:
                    values[name] = y[i]
            # (no compartment of these species is computed by a formula: `_vector_rates`)
            species = vector.species_values(y, values)
            values.lazy.update({sid: (species, j) for j, sid in enumerate(vector.species_ids)})
        for name, fn in self.derived:
            values[name] = fn(values)
        if vector is None:
            return values, None
        rates = vector.rates(species, values, TIME, t)
        values.lazy.update({rid: (rates, j) for j, rid in enumerate(vector.grouped)})
        return values, rates

    def vector_field(self, t, y, params):
        """d(state)/dt [n]."""
        values, rates = self.evaluate(t, y, params)
        if not self.rates:  # (everything is set by assignment rules)
            return jnp.zeros((0,), y.dtype)
        scalar = lambda r: jnp.broadcast_to(jnp.asarray(_num(r(values)), y.dtype), ())  # noqa: E731
        if rates is None:
            return jnp.stack([scalar(r) for r in self.rates])
        out = self.vector.species_rates(rates, values, len(self.state)).astype(y.dtype)
        rows = set(self.vector.species_rows.tolist())
        others = [i for i in range(len(self.state)) if i not in rows]
        if others:
            out = out.at[np.asarray(others)].set(jnp.stack([scalar(self.rates[i]) for i in others]))
        return out


class _Values(dict):
    """Values by id, some of them entries of arrays (`lazy`: id -> (array, index)) taken
    out only when something reads them: a large model's right-hand side reads few of
    its species and reactions one by one."""

    def __init__(self, *args):
        super().__init__(*args)
        self.lazy: dict[str, tuple[Any, int]] = {}

    def __missing__(self, key: str):
        array, index = self.lazy[key]
        self[key] = value = array[index]
        return value


def _vector_rates(
    libsbml,
    compiler,
    reactions: list,
    state: list[str],
    species: dict,
    amount_valued,
    derived_fns: dict[str, Compiled],
    derived_deps: dict[str, set[str]],
    stoichiometry,
    conversion: dict[str, str],
    changing: set[str],
) -> VectorRates | None:
    """The model's reactions grouped by the form of their kinetic laws, and its species'
    rates as a sum over the stoichiometry (see `_sbml_vector`), or None when no two
    kinetic laws share a form. A reaction whose rate another formula of the right-hand
    side reads stays on its own (its rate must exist before that formula runs).
    `changing`: the species whose amount reactions change (the others' terms are none)."""
    row_of = {key: i for i, key in enumerate(state)}
    species_rows = [
        (row_of[f"@amount:{sid}"], sid) for sid in species if f"@amount:{sid}" in row_of
    ]
    compartments = sorted(
        {species[sid].getCompartment() for _, sid in species_rows if not amount_valued(sid)}
    )
    if any(c in derived_fns for c in compartments):
        return (
            None  # (a compartment an assignment rule sizes is computed among the species' values)
        )
    read_by_formulas = set().union(*derived_deps.values()) if derived_deps else set()
    shapes: dict[tuple, list[tuple[str, Any, list[str]]]] = {}
    for reaction in reactions:
        rid = reaction.getId()
        if rid in read_by_formulas:
            continue
        node = reaction.getKineticLaw().getMath()
        shape, names = law_shape(libsbml, node)
        shapes.setdefault(shape, []).append((rid, node, names))
    members = [group for group in shapes.values() if len(group) > 1]
    if not members:
        return None
    species_ids = tuple(sid for _, sid in species_rows)
    position = {sid: j for j, sid in enumerate(species_ids)}
    others: list[str] = []
    for group in members:
        for _, _, names in group:
            for n in names:
                if n not in position and n not in others:
                    others.append(n)
    where = {**position, **{n: len(species_ids) + k for k, n in enumerate(others)}}
    groups = []
    for group in members:
        rid, node, names = group[0]
        law = compiler(f"kinetic law of {rid!r}").compile(slot_names(libsbml, node))
        reads = tuple(
            np.asarray([where[g_names[k]] for _, _, g_names in group]) for k in range(len(names))
        )
        groups.append(Group(law, reads, len(group)))
    grouped = tuple(rid for group in members for rid, _, _ in group)
    single = tuple(r.getId() for r in reactions if r.getId() not in set(grouped))
    rate_position = {rid: j for j, rid in enumerate(grouped + single)}
    rows, positions, coefficients, variable = [], [], [], []
    for reaction in reactions:
        for sign, refs in (
            (-1.0, reaction.getListOfReactants()),
            (1.0, reaction.getListOfProducts()),
        ):
            for ref in refs:
                key = f"@amount:{ref.getSpecies()}"
                if ref.getSpecies() not in changing:
                    continue
                fixed = not (ref.isSetId() and ref.getId()) and not (
                    ref.isSetStoichiometryMath()
                    and ref.getStoichiometryMath().getMath() is not None
                )
                if fixed:
                    coefficients.append(sign * float(_num(stoichiometry(ref)({}))))
                else:
                    variable.append((len(rows), sign, lambda v, _s=stoichiometry(ref): _num(_s(v))))
                    coefficients.append(0.0)
                rows.append(row_of[key])
                positions.append(rate_position[reaction.getId()])
    factors = tuple(
        conversion.get(key.removeprefix("@amount:"), "") if key.startswith("@amount:") else ""
        for key in state
    )
    return VectorRates(
        groups=tuple(groups),
        grouped=grouped,
        single=single,
        species_rows=np.asarray([r for r, _ in species_rows], dtype=int),
        species_ids=species_ids,
        per_size=np.asarray(
            [
                -1 if amount_valued(sid) else compartments.index(species[sid].getCompartment())
                for sid in species_ids
            ],
            dtype=int,
        ),
        compartments=tuple(compartments),
        others=tuple(others),
        term_rows=np.asarray(rows, dtype=int),
        term_rates=np.asarray(positions, dtype=int),
        term_coefficients=np.asarray(coefficients, dtype=float),
        variable_terms=tuple(variable),
        factors=factors if any(factors) else (),
    )


def _toposort(nodes: dict[str, set[str]], what: str) -> list[str]:
    """The keys of `nodes` (id -> the ids it depends on) in an order in which each comes
    after what it depends on (dependencies outside `nodes` are given)."""
    order: list[str] = []
    state: dict[str, int] = {}

    def visit(name: str, path: list[str]) -> None:
        mark = state.get(name)
        if mark == 2:
            return
        if mark == 1:
            loop = path[path.index(name) :] + [name]
            raise SbmlError(f"{what} depend on each other in a loop ({' -> '.join(loop)})")
        state[name] = 1
        for dep in sorted(nodes[name]):
            if dep in nodes and dep != name:
                visit(dep, path + [name])
            elif dep == name:
                raise SbmlError(f"{what}: {name} depends on itself")
        state[name] = 2
        order.append(name)

    for name in nodes:
        visit(name, [])
    return order


def _read(path: Path):
    try:
        import libsbml
    except ImportError:  # pragma: no cover
        raise SbmlError("reading SBML needs python-libsbml (pip install python-libsbml)") from None
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


# Models already imported, by (resolved path, modification time, size): a config built
# several times in one process (a run, a sweep's chunks, a fit) gives one class, compiled
# once.
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


def _events(
    name: str,
    events: list,
    program: _Program,
    compiler: Callable[[str], _Compiler],
    ids: set[str],
    species: dict,
    amount_valued,
    rules: dict[str, set[str]],
) -> tuple:
    """The model's events as `physics.ode.Event`s, in decreasing priority (document order
    among equals): the trigger as a root function and as a condition, the assignments
    (all computed from the values before the event; a species' value is its
    concentration unless it has only substance units, the state its amount)."""
    from ._events import Event

    index = {key: i for i, key in enumerate(program.state)}
    out = []
    explicit = []  # (priority, label, event, compiler) of the events with a priority
    for label, event in events:
        where = f"event {label!r}"
        trigger = event.getTrigger()
        c = compiler(f"trigger of {where}")
        math_node = trigger.getMath()
        for dep in c.names(math_node):
            if dep not in ids:
                raise SbmlError(
                    f"{name}: trigger of {where} reads {dep!r}, which is no id of the model"
                )
        root, condition = c.root(math_node), c.compile(math_node)
        priority = 0.0
        if (
            event.isSetPriority()
            and event.getPriority() is not None
            and event.getPriority().isSetMath()
        ):
            pc = compiler(f"priority of {where}")
            node = pc.names(event.getPriority().getMath())
            if node or pc.reads_time(event.getPriority().getMath()):
                read = sorted(node)[0] if node else "time"
                raise SbmlError(
                    f"{name}: priority of {where} reads {read!r}: only constant priorities are "
                    "supported"
                )
            priority = float(_num(pc.compile(event.getPriority().getMath())({TIME: 0.0})))
            explicit.append((priority, label, event, c))
        assignments = []
        for assignment in event.getListOfEventAssignments():
            if not assignment.isSetMath():
                continue
            target = assignment.getVariable()
            ac = compiler(f"assignment of {where} to {target!r}")
            for dep in ac.names(assignment.getMath()):
                if dep not in ids:
                    raise SbmlError(
                        f"{name}: assignment of {where} to {target!r} reads {dep!r}, which is no "
                        "id of the model"
                    )
            assignments.append((target, ac.compile(assignment.getMath())))

        # (what the assignments need of the SBML document, read now: the document is
        # gone when they run)
        targets = []
        for target, fn in assignments:
            key = f"@amount:{target}"
            if target in species and key in index:
                per_size = None if amount_valued(target) else species[target].getCompartment()
                targets.append((target, fn, index[key], per_size))
            else:
                targets.append((target, fn, index[target], None))

        # A species whose state is its concentration (a rate rule) keeps its amount when
        # the event resizes its compartment: the concentration (an assigned one being of
        # the size before the event) scales by old / new size.
        assigned = {target for target, _ in assignments}
        rescaled = tuple(
            (index[sid], species[sid].getCompartment())
            for sid in species
            if sid in index and not amount_valued(sid) and species[sid].getCompartment() in assigned
        )

        def apply(t, y, params, source=None, _targets=tuple(targets), _rescaled=rescaled):
            values = program.values(t, *(source if source is not None else (y, params)))
            now = program.values(t, y, params) if source is not None else values
            new = {target: _num(fn(values)) for target, fn, _, _ in _targets}
            for target, _, i, compartment in _targets:
                # (a concentration assigned with its compartment: of the size before the event)
                value = new[target] if compartment is None else new[target] * now[compartment]
                y = y.at[i].set(jnp.asarray(value, y.dtype))
            for i, compartment in _rescaled:
                y = y.at[i].set(
                    jnp.asarray(y[i] * _num(now[compartment]) / new[compartment], y.dtype)
                )
            return y, params

        def trigger_fn(t, y, params, _root=root):
            return jnp.asarray(_num(_root(program.values(t, y, params))), float)

        def holds(t, y, params, _condition=condition):
            return _bool(_condition(program.values(t, y, params)))

        out.append(
            (
                -priority,
                len(out),
                Event(
                    trigger=trigger_fn,
                    apply=apply,
                    label=label,
                    holds=holds,
                    initial_value=trigger.getInitialValue()
                    if trigger.isSetInitialValue()
                    else True,
                    persistent=trigger.getPersistent() if trigger.isSetPersistent() else True,
                    values_at_trigger=event.getUseValuesFromTriggerTime()
                    if event.isSetUseValuesFromTriggerTime()
                    else True,
                ),
            )
        )
    _refuse_random_order(name, explicit, rules)
    return tuple(e for _, _, e in sorted(out, key=lambda item: item[:2]))


def _refuse_random_order(name: str, explicit: list, rules: dict) -> None:
    """Two events of equal priority that fire together execute in random order (SBML
    4.12.6); the order changes the outcome when one assigns what the other reads (its
    trigger, if it is not persistent, or its assignments) or assigns the same variable.
    Such a pair is refused; `rules` maps a variable set by an assignment rule to the ids
    its formula reads, so that a read through a rule counts."""

    def closure(ids: set[str]) -> set[str]:
        out, todo = set(), list(ids)
        while todo:
            key = todo.pop()
            if key not in out:
                out.add(key)
                todo.extend(rules.get(key, ()))
        return out

    def profile(event, c):
        targets = {a.getVariable() for a in event.getListOfEventAssignments() if a.isSetMath()}
        reads = set()
        for a in event.getListOfEventAssignments():
            if a.isSetMath():
                reads |= c.names(a.getMath())
        if not (
            event.getTrigger().getPersistent() if event.getTrigger().isSetPersistent() else True
        ):
            reads |= c.names(event.getTrigger().getMath())
        return targets, closure(reads)

    seen = [(priority, label, *profile(event, c)) for priority, label, event, c in explicit]
    for i, (p1, l1, t1, r1) in enumerate(seen):
        for p2, l2, t2, r2 in seen[i + 1 :]:
            if p1 == p2 and (t1 & (r2 | t2) or t2 & r1):
                raise SbmlError(
                    f"{name}: events {l1!r} and {l2!r} have the same priority and change what the "
                    "other reads: "
                    "their order at one instant is random in SBML, which is not supported"
                )


def _import(path: Path, vectorise: bool | None = None) -> SbmlOdeModel:
    libsbml, document, model = _read(path)
    name = path.name

    events = []
    for i in range(model.getNumEvents()):
        event = model.getEvent(i)
        label = event.getId() or str(i + 1)
        if event.isSetDelay() and event.getDelay() is not None and event.getDelay().isSetMath():
            raise SbmlError(f"{name}: event {label!r}: events with a delay are not supported")
        if event.getTrigger() is None or not event.getTrigger().isSetMath():
            continue  # (an event without a trigger never fires)
        events.append((label, event))
    for i in range(model.getNumRules()):
        if model.getRule(i).isAlgebraic():
            raise SbmlError(f"{name}: algebraic rule {i + 1}: algebraic rules are not supported")
    for i in range(model.getNumReactions()):
        reaction = model.getReaction(i)
        if reaction.isSetFast() and reaction.getFast():
            raise SbmlError(
                f"{name}: reaction {reaction.getId()!r}: fast reactions are not supported"
            )

    functions = {
        model.getFunctionDefinition(i).getId(): model.getFunctionDefinition(i)
        for i in range(model.getNumFunctionDefinitions())
    }

    incomplete: list = []

    def compiler(where: str) -> _Compiler:
        return _Compiler(libsbml, functions, f"{name}: {where}", incomplete)

    compartments = {c.getId(): c for c in model.getListOfCompartments()}
    species = {s.getId(): s for s in model.getListOfSpecies()}
    parameters = {p.getId(): p for p in model.getListOfParameters()}
    references: dict[str, Any] = {}  # species references with ids (their stoichiometry is a value)
    reactions = list(model.getListOfReactions())
    for reaction in reactions:
        for ref in list(reaction.getListOfReactants()) + list(reaction.getListOfProducts()):
            if ref.isSetId() and ref.getId():
                references[ref.getId()] = ref

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
    initial_assignments = {
        a.getSymbol(): a for a in model.getListOfInitialAssignments() if a.isSetMath()
    }
    event_targets: list[str] = []  # (in document order)
    for label, event in events:
        for assignment in event.getListOfEventAssignments():
            target = assignment.getVariable()
            if not assignment.isSetMath():
                continue
            if target in assignment_rules:
                raise SbmlError(
                    f"{name}: event {label!r} assigns {target!r}, which an assignment rule sets"
                )
            if (
                target not in species
                and target not in compartments
                and target not in parameters
                and target not in references
            ):
                raise SbmlError(
                    f"{name}: event {label!r} assigns {target!r}, which is no species, "
                    "compartment, parameter or stoichiometry"
                )
            if target not in event_targets:
                event_targets.append(target)

    def amount_valued(sid: str) -> bool:
        """Whether the species' symbol means its amount (else its concentration)."""
        s = species[sid]
        compartment = compartments.get(s.getCompartment())
        # (a Level 3 compartment may leave its dimensions unset, which libsbml reports as
        # 0: only dimensions set to 0 make a compartment without size)
        return s.getHasOnlySubstanceUnits() or (
            compartment is not None
            and compartment.isSetSpatialDimensions()
            and compartment.getSpatialDimensionsAsDouble() == 0
        )

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
    for sid in changed_by_reactions & (set(rate_rules) | set(assignment_rules)):
        raise SbmlError(
            f"{name}: species {sid!r} is changed by reactions and set by a rule (it must be a "
            "boundary species)"
        )

    # The state: reaction species by amount (under "@amount:ID"), rate-rule targets by
    # value, and what events assign (species by amount, the rest by value; constant
    # between events).
    event_species = {
        t
        for t in event_targets
        if t in species and t not in changed_by_reactions and t not in rate_rules
    }
    event_values = [t for t in event_targets if t not in species and t not in rate_rules]
    state = (
        [f"@amount:{sid}" for sid in species if sid in changed_by_reactions or sid in event_species]
        + list(rate_rules)
        + event_values
    )
    for target in rate_rules:
        if (
            target not in species
            and target not in compartments
            and target not in parameters
            and target not in references
        ):
            raise SbmlError(
                f"{name}: rate rule for {target!r}, which is no species, compartment, parameter or "
                "stoichiometry"
            )

    # Model parameters: global parameters and constant compartments that no rule sets,
    # and the species nothing changes whose value is a number of their own (read as
    # given: an amount-valued species, or a concentration in a compartment of constant
    # size): a run, a sweep or a PEtab condition may set them as it sets a parameter.
    ruled = set(rate_rules) | set(assignment_rules) | set(event_values)

    def constant_species(sid: str) -> bool:
        s = species[sid]
        unchanged = (
            sid not in changed_by_reactions
            and sid not in event_species
            and sid not in ruled
            and sid not in initial_assignments
        )
        read_as_given = (s.isSetInitialAmount() and amount_valued(sid)) or (
            s.isSetInitialConcentration()
            and not amount_valued(sid)
            and s.getCompartment() not in ruled
        )
        return unchanged and read_as_given

    settable_species = [sid for sid in species if constant_species(sid)]
    parameter_ids = (
        [p for p in parameters if p not in ruled]
        + [c for c in compartments if c not in ruled]
        + settable_species
    )

    # --- Initial values: attributes, then initial assignments and assignment rules in
    # dependency order (species from their amount or concentration and compartment).
    start: dict[str, Compiled] = {}
    start_deps: dict[str, set[str]] = {}

    def constant_start(sid: str, value: float | None) -> None:
        # (no value: NaN, refused below if the model needs it)
        start[sid] = (
            lambda v, _x=math.nan if value is None else float(value): _x  # noqa: E701 (a lambda)
        )
        start_deps[sid] = set()

    for pid, p in parameters.items():
        constant_start(pid, p.getValue() if p.isSetValue() else None)
    for cid, c in compartments.items():
        constant_start(
            cid, c.getSize() if c.isSetSize() else (1.0 if document.getLevel() == 2 else None)
        )
    for rid, ref in references.items():
        constant_start(
            rid,
            ref.getStoichiometry()
            if ref.isSetStoichiometry() or document.getLevel() == 2
            else None,
        )
    for sid, s in species.items():
        cid = s.getCompartment()
        if s.isSetInitialAmount():
            amount, conc = s.getInitialAmount(), None
        elif s.isSetInitialConcentration():
            amount, conc = None, s.getInitialConcentration()
        else:
            constant_start(sid, None)
            continue
        is_amount = amount_valued(sid)
        if amount is not None and is_amount or conc is not None and not is_amount:
            constant_start(sid, amount if amount is not None else conc)
        elif amount is not None:  # an amount, read as a concentration
            start[sid] = lambda v, _a=amount, _c=cid: _a / v[_c]
            start_deps[sid] = {cid}
        else:  # a concentration, read as an amount
            start[sid] = lambda v, _x=conc, _c=cid: _x * v[_c]
            start_deps[sid] = {cid}
    for sid, assignment in initial_assignments.items():
        if sid in assignment_rules:
            raise SbmlError(
                f"{name}: {sid!r} has both an initial assignment and an assignment rule"
            )
        c = compiler(f"initial assignment to {sid!r}")
        start[sid] = c.compile(assignment.getMath())
        start_deps[sid] = c.names(assignment.getMath())
    for sid, rule in assignment_rules.items():
        c = compiler(f"assignment rule for {sid!r}")
        start[sid] = c.compile(rule.getMath())
        start_deps[sid] = c.names(rule.getMath())

    def what(sid: str) -> str:
        """The element that defines `sid`'s value, for a message."""
        if sid in rate_deps:
            return f"kinetic law of {sid!r}"
        if sid in assignment_rules:
            return f"assignment rule for {sid!r}"
        if sid in initial_assignments:
            return f"initial assignment to {sid!r}"
        return f"stoichiometry of {sid!r}" if sid in references else repr(sid)

    # A reaction's id stands for its rate.
    rate_of: dict[str, Compiled] = {}
    rate_deps: dict[str, set[str]] = {}
    for reaction in reactions:
        law = reaction.getKineticLaw()
        rid = reaction.getId()
        if law is None or law.getMath() is None:
            raise SbmlError(f"{name}: reaction {rid!r} has no kinetic law")
        c = compiler(f"kinetic law of {rid!r}")
        rate_of[rid], rate_deps[rid] = c.compile(law.getMath()), c.names(law.getMath())
        start[rid], start_deps[rid] = rate_of[rid], rate_deps[rid]
    for sid, deps in start_deps.items():
        for dep in deps:
            if dep not in start:
                raise SbmlError(f"{name}: {what(sid)} reads {dep!r}, which is no id of the model")
    # A species whose amount nothing changes, read by concentration: its amount at the
    # start ("@amount0:ID"), a constant of the run (the concentration follows the size
    # of a compartment that changes).
    for sid, s in species.items():
        if (
            sid not in changed_by_reactions
            and sid not in event_species
            and sid not in rate_rules
            and sid not in assignment_rules
            and not amount_valued(sid)
            and sid not in settable_species
        ):
            cid = s.getCompartment()
            start[f"@amount0:{sid}"] = lambda v, _s=sid, _c=cid: v[_s] * v[_c]
            start_deps[f"@amount0:{sid}"] = {sid, cid}
    # A parameter or compartment that an initial assignment computes from other ids is
    # no free parameter: its value follows theirs in every run.
    parameter_ids = [
        pid for pid in parameter_ids if pid not in initial_assignments or not start_deps[pid]
    ]
    start_order = _toposort(start_deps, "initial values")
    initial: dict[str, Any] = {TIME: jnp.asarray(0.0)}  # (initial assignments that read time see 0)
    for sid in start_order:
        initial[sid] = start[sid](initial)

    # --- The program of the right-hand side.
    derived_fns: dict[str, Compiled] = dict(rate_of)
    derived_deps: dict[str, set[str]] = dict(rate_deps)
    for sid in species:
        if sid in changed_by_reactions or sid in event_species:
            key, cid = f"@amount:{sid}", species[sid].getCompartment()
            if amount_valued(sid):
                derived_fns[sid], derived_deps[sid] = (lambda v, _k=key: v[_k]), set()
            else:
                derived_fns[sid], derived_deps[sid] = (
                    (lambda v, _k=key, _c=cid: v[_k] / v[_c]),
                    {cid},
                )
        elif f"@amount0:{sid}" in start:
            # Nothing changes its amount: in a compartment that changes size, its
            # concentration follows the size.
            cid = species[sid].getCompartment()
            derived_fns[sid], derived_deps[sid] = (
                (lambda v, _a=f"@amount0:{sid}", _c=cid: v[_a] / v[_c]),
                {cid},
            )
    for sid, rule in assignment_rules.items():
        c = compiler(f"assignment rule for {sid!r}")
        derived_fns[sid], derived_deps[sid] = c.compile(rule.getMath()), c.names(rule.getMath())
    for rid, ref in references.items():
        if ref.isSetStoichiometryMath() and ref.getStoichiometryMath().getMath() is not None:
            c = compiler(f"stoichiometry of {rid!r}")
            math_node = ref.getStoichiometryMath().getMath()
            derived_fns[rid], derived_deps[rid] = c.compile(math_node), c.names(math_node)
    order = _toposort(derived_deps, "assignment rules")
    derived = [(sid, derived_fns[sid]) for sid in order]

    known = (
        set(state)
        | set(derived_fns)
        | {pid for pid in parameter_ids if math.isfinite(float(initial[pid]))}
    )
    fixed = {sid: float(initial[sid]) for sid in initial if sid != TIME and sid not in known}
    all_ids = known | set(fixed)
    for sid, deps in derived_deps.items():
        for dep in deps:
            if dep not in all_ids:
                raise SbmlError(f"{name}: {what(sid)} reads {dep!r}, which is no id of the model")

    def stoichiometry(ref) -> Compiled:
        if ref.isSetId() and ref.getId():
            rid = ref.getId()
            return lambda v, _r=rid: v[_r]
        if ref.isSetStoichiometryMath() and ref.getStoichiometryMath().getMath() is not None:
            return compiler("stoichiometry").compile(ref.getStoichiometryMath().getMath())
        value = (
            ref.getStoichiometry() if ref.isSetStoichiometry() or document.getLevel() == 2 else 1.0
        )
        return lambda v, _x=float(value): _x

    terms: dict[str, list[tuple[float, Compiled, Compiled]]] = {
        sid: [] for sid in changed_by_reactions
    }
    for reaction in reactions:
        rid = reaction.getId()
        for sign, refs in (
            (-1.0, reaction.getListOfReactants()),
            (1.0, reaction.getListOfProducts()),
        ):
            for ref in refs:
                if ref.getSpecies() in terms:
                    terms[ref.getSpecies()].append(
                        (sign, stoichiometry(ref), lambda v, _r=rid: v[_r])
                    )

    def species_rate(sid: str) -> Compiled:
        s = species[sid]
        factor_id = (
            s.getConversionFactor()
            if s.isSetConversionFactor()
            else (model.getConversionFactor() if model.isSetConversionFactor() else "")
        )
        parts = terms.get(sid, [])  # (none for a species only events change)

        def rate(v):
            total = 0.0
            for sign, stoich, flux in parts:
                total = total + sign * _num(stoich(v)) * _num(flux(v))
            return total * v[factor_id] if factor_id else total

        return rate

    rates: list[Compiled] = []
    for key in state:
        if key.startswith("@amount:"):
            rates.append(species_rate(key.removeprefix("@amount:")))
        elif key not in rate_rules:  # (changed by events only)
            rates.append(lambda v: 0.0)
        else:
            c = compiler(f"rate rule for {key!r}")
            rates.append(c.compile(rate_rules[key].getMath()))
            for dep in c.names(rate_rules[key].getMath()):
                if dep not in all_ids:
                    raise SbmlError(
                        f"{name}: rate rule for {key!r} reads {dep!r}, which is no id of the model"
                    )

    observed: list[tuple[str, Compiled]] = []
    for sid in list(species) + list(compartments) + list(parameters):
        observed.append((sid, lambda v, _s=sid: v[_s]))
    for reaction in reactions:
        observed.append((reaction.getId(), lambda v, _r=reaction.getId(): v[_r]))
    if vectorise is None:
        vectorise = len(reactions) >= VECTORISE_FROM
    vector = None
    if vectorise:
        conversion = {
            sid: species[sid].getConversionFactor()
            if species[sid].isSetConversionFactor()
            else (model.getConversionFactor() if model.isSetConversionFactor() else "")
            for sid in species
        }
        vector = _vector_rates(
            libsbml,
            compiler,
            reactions,
            state,
            species,
            amount_valued,
            derived_fns,
            derived_deps,
            stoichiometry,
            conversion,
            changed_by_reactions,
        )
    if vector is not None:
        derived = [
            (sid, fn)
            for sid, fn in derived
            if sid not in set(vector.grouped) | set(vector.species_ids)
        ]
    program = _Program(state, derived, fixed, rates, observed, vector)
    program.incomplete = tuple(incomplete)
    # (what the start of a run computes from the free parameters)
    free = {pid for pid in parameter_ids if math.isfinite(float(initial[pid]))}
    reads_params: set[str] = set()
    for sid in start_order:
        if sid in free or start_deps[sid] & reads_params:
            reads_params.add(sid)
    needed: set[str] = set()

    def need(sid: str) -> None:
        if sid not in needed:
            needed.add(sid)
            for dep in start_deps[sid]:
                need(dep)

    for sid in fixed:
        if sid in reads_params:
            need(sid)
    program.start, program.start_deps, program.start_order = start, start_deps, start_order
    program.from_params = [sid for sid in start_order if sid in needed]
    program.concentration_of = {
        key.removeprefix("@amount:"): species[key.removeprefix("@amount:")].getCompartment()
        for key in state
        if key.startswith("@amount:") and not amount_valued(key.removeprefix("@amount:"))
    }
    rule_reads = {
        target: compiler(f"rule for {target!r}").names(rule.getMath())
        for target, rule in assignment_rules.items()
        if rule.isSetMath()
    }
    program.events = _events(
        name, events, program, compiler, all_ids, species, amount_valued, rule_reads
    )

    def initial_of(key: str) -> float:
        if key.startswith("@amount:"):
            sid = key.removeprefix("@amount:")
            value = float(initial[sid])
            return (
                value
                if amount_valued(sid)
                else value * float(initial[species[sid].getCompartment()])
            )
        return float(initial[key])

    state_names = tuple(k.removeprefix("@amount:") for k in state)
    missing = [
        n for n, k in zip(state_names, state, strict=False) if not math.isfinite(initial_of(k))
    ]
    # (a parameter or compartment with no value is no parameter to set: NaN wherever read)
    parameter_ids = [pid for pid in parameter_ids if math.isfinite(float(initial[pid]))]
    if missing:
        raise SbmlError(
            f"{name}: {missing[0]!r} has no initial value (no value attribute, initial assignment "
            "or rule gives one)"
        )
    label = model.getId() or path.stem
    declared = tuple(
        Parameter(
            pid,
            float(initial[pid]),
            (
                parameters[pid].getUnits()
                if pid in parameters
                else compartments[pid].getUnits()
                if pid in compartments
                else species[pid].getSubstanceUnits()
            )
            or "1",
            (
                parameters[pid].getName()
                if pid in parameters
                else f"size of compartment {compartments[pid].getName() or pid}"
                if pid in compartments
                else f"{'amount' if amount_valued(pid) else 'concentration'} of species "
                f"{species[pid].getName() or pid}, which nothing changes"
            ),
        )
        for pid in parameter_ids
    )
    namespace = {
        "name": label,
        "description": f"imported from the SBML file {name} ({len(species)} species, "
        f"{len(reactions)} reaction{'' if len(reactions) == 1 else 's'})",
        "parameters": declared,
        "state_names": state_names,
        "initial_defaults": {n: initial_of(k) for n, k in zip(state_names, state, strict=False)},
        "parameter_dependent_initial": frozenset(
            n
            for n, k in zip(state_names, state, strict=False)
            if k.removeprefix("@amount:") in reads_params
            or program.concentration_of.get(n) in reads_params
        ),
        "species_compartments": {sid: s.getCompartment() for sid, s in species.items()},
        "amount_species": frozenset(sid for sid in species if amount_valued(sid)),
        "__doc__": f"The SBML model {label!r} of {name}.",
        "__module__": __name__,
    }
    cls = type(f"Sbml_{label}" if label.isidentifier() else "SbmlModel", (SbmlOdeModel,), namespace)
    return cls(program=program)
