"""SBML math compiled to JAX, and what every part of the SBML importer shares.

`_Compiler` turns libsbml's syntax trees (MathML) into functions of a dict of values by
id made of `jax.numpy` calls (no text, no `eval`): a formula as its value, a trigger as
a function that rises through zero where it becomes true. Beside it: the error the
importer raises (`SbmlError`), the key of time among the values, and the conversions
between SBML's booleans and numbers that the compiled functions apply.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import jax.numpy as jnp
import jax.scipy.special as jsp

from ._events import relation

TIME = "@time"  # the key of time among the values (no SBML id can take it)
AVOGADRO = 6.02214179e23  # SBML Level 3 Version 1's value of the avogadro csymbol

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
        """The function of the values by id that the math computes (`scope`: what the
        arguments of the function definition whose body it is stand for).

        Raises:
            SbmlError: math the importer does not support (delay, rateOf, a lambda
                outside a function definition, any other MathML element).
        """
        s = self.sbml
        kind, kids = self._node(node, depth)
        sub = lambda n: self.compile(n, scope, depth + 1)  # noqa: E731
        compiled = self._atom(node, kind, scope)
        if compiled is None:
            compiled = self._arithmetic(node, kind, kids, sub)
        if compiled is None:
            compiled = self._logic(kind, kids, sub)
        if compiled is not None:
            return compiled
        if kind == s.AST_FUNCTION_PIECEWISE:
            return self._piecewise([sub(k) for k in kids])
        if kind == s.AST_FUNCTION:
            return self._call(node, kids, sub, depth)
        raise self._unsupported(node, kind)

    def _atom(self, node, kind: int, scope: dict[str, Compiled] | None) -> Compiled | None:
        """A number, a constant, the time or an id; None for any other node."""
        s = self.sbml
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
        return None

    def _arithmetic(
        self, node, kind: int, kids: list, sub: Callable[[Any], Compiled]
    ) -> Compiled | None:
        """An arithmetic operator or a function of numbers; None for any other node."""
        s = self.sbml
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
        return None

    def _logic(self, kind: int, kids: list, sub: Callable[[Any], Compiled]) -> Compiled | None:
        """A relation or a logical operator; None for any other node."""
        s = self.sbml
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
        return None

    def _piecewise(self, parts: list[Compiled]) -> Compiled:
        """A piecewise of (value, condition) pieces and an otherwise; without one, NaN
        where no piece applies, and the pieces' conditions noted in `incomplete`."""
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

    def _call(self, node, kids: list, sub: Callable[[Any], Compiled], depth: int) -> Compiled:
        """A call of one of the model's function definitions, its body compiled on the
        arguments' values."""
        name = node.getName()
        definition = self.functions.get(name)
        if definition is None or definition.getMath() is None:
            raise self.refuse(f"calls {name!r}, which is no function definition of the model")
        body = definition.getMath()
        params = [body.getChild(i).getName() for i in range(body.getNumChildren() - 1)]
        if len(params) != len(kids):
            raise self.refuse(f"calls {name}() with {len(kids)} arguments; it takes {len(params)}")
        args = [sub(k) for k in kids]
        # A function body sees its arguments only (and time, constants), never the
        # model's ids: a new scope of the arguments' values.
        inner = self.compile(
            body.getChild(body.getNumChildren() - 1),
            {p: a for p, a in zip(params, args, strict=False)},
            depth + 1,
        )
        return inner

    def _unsupported(self, node, kind: int) -> SbmlError:
        """The refusal of math the importer does not compile."""
        s = self.sbml
        if kind == s.AST_FUNCTION_DELAY:
            return self.refuse("uses delay(), which is not supported")
        if kind == getattr(s, "AST_FUNCTION_RATE_OF", -1):
            return self.refuse("uses rateOf(), which is not supported")
        if kind == s.AST_LAMBDA:
            return self.refuse("has a lambda outside a function definition")
        return self.refuse(
            f"uses the MathML element {node.getName() or kind!r}, which is not supported"
        )
