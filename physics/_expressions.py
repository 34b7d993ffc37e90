"""Right-hand sides written as text: a small expression language, parsed without `eval`.

The text is read by Python's own parser (`ast.parse`, which only builds a syntax tree)
and every node is checked against what the language allows: numbers, the names it is
given (states, parameters, `t`, the constants `pi` and `e`), + - * / ** and unary
minus, comparisons and `and`/`or`/`not` (for conditions), `a if cond else b`, and calls
of the functions in `FUNCTIONS` with their number of arguments. Anything else (attribute
access, subscripts, keywords, strings, lambdas, ...) is refused with its column. The
checked tree becomes a Python function of a dict of values built from `jax.numpy`
operations, so it traces, compiles and differentiates like hand-written model code.
"""

from __future__ import annotations

import ast
import difflib
import math
from collections.abc import Callable, Collection
from typing import Any

import jax.numpy as jnp

# name -> (function, number of arguments)
FUNCTIONS: dict[str, tuple[Callable[..., Any], int]] = {
    "exp": (jnp.exp, 1),
    "log": (jnp.log, 1),
    "log10": (jnp.log10, 1),
    "sqrt": (jnp.sqrt, 1),
    "sin": (jnp.sin, 1),
    "cos": (jnp.cos, 1),
    "tan": (jnp.tan, 1),
    "arcsin": (jnp.arcsin, 1),
    "arccos": (jnp.arccos, 1),
    "arctan": (jnp.arctan, 1),
    "sinh": (jnp.sinh, 1),
    "cosh": (jnp.cosh, 1),
    "tanh": (jnp.tanh, 1),
    "abs": (jnp.abs, 1),
    "sign": (jnp.sign, 1),
    "floor": (jnp.floor, 1),
    "ceil": (jnp.ceil, 1),
    "min": (jnp.minimum, 2),
    "max": (jnp.maximum, 2),
    "pow": (jnp.power, 2),
    "where": (jnp.where, 3),
    "piecewise": (jnp.where, 3),
}
CONSTANTS = {"pi": math.pi, "e": math.e}
MAX_LENGTH = 100_000  # characters of one expression
MAX_DEPTH = 400  # nesting of one expression (a sum of n terms is n deep)

_BINARY = {ast.Add: jnp.add, ast.Sub: jnp.subtract, ast.Mult: jnp.multiply, ast.Div: jnp.divide, ast.Pow: jnp.power}
_COMPARE = {ast.Lt: jnp.less, ast.LtE: jnp.less_equal, ast.Gt: jnp.greater, ast.GtE: jnp.greater_equal, ast.Eq: jnp.equal, ast.NotEq: jnp.not_equal}


class ExpressionError(ValueError):
    """A text that is not an expression of the language; the message gives the column."""


def _did_you_mean(name: str, known: Collection[str]) -> str:
    close = difflib.get_close_matches(name, sorted(known), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


class Expression:
    """A parsed expression: `names` it reads, and `__call__(values)` with a dict holding
    (at least) those names."""

    def __init__(self, text: str, names: frozenset[str], fn: Callable[[dict[str, Any]], Any]):
        self.text = text
        self.names = names
        self._fn = fn

    def __call__(self, values: dict[str, Any]) -> Any:
        return self._fn(values)

    def __repr__(self) -> str:
        return f"Expression({self.text!r})"


def parse(text: str, symbols: Collection[str], operators: Collection[str] = ()) -> Expression:
    """Parse `text` into an `Expression` over `symbols` (and the constants). `operators`
    names functions of one argument that the values supply at evaluation time (under
    "@NAME"): a PDE's derivatives, which need the grid. An operator applied to a symbol
    itself calls "@NAME:SYMBOL" instead, when the values supply it (with no argument).

    Raises:
        ExpressionError: a syntax error, or a construct or name the language does not
            have (with its column, counted from 1).
    """
    if not isinstance(text, str):
        raise ExpressionError(f"expected an expression as text, got {text!r}")
    source = text.strip()
    if not source:
        raise ExpressionError("expected an expression, got an empty text")
    if len(source) > MAX_LENGTH:
        raise ExpressionError(f"expected an expression of at most {MAX_LENGTH:,} characters, got {len(source):,}")
    try:
        tree = ast.parse(source, mode="eval")
    except SyntaxError as e:
        raise ExpressionError(f"column {e.offset or 1}: syntax error ({e.msg})") from None
    except (RecursionError, MemoryError):
        raise ExpressionError("nested too deeply to read; split it into observables or shorter terms") from None
    known = set(symbols)
    used: set[str] = set()

    def fail(node: ast.AST, why: str) -> ExpressionError:
        return ExpressionError(f"column {getattr(node, 'col_offset', 0) + 1}: {why}")

    def build(node: ast.AST, depth: int = 0) -> Callable[[dict[str, Any]], Any]:
        if depth > MAX_DEPTH:  # (evaluation recurses as deep as the tree)
            raise ExpressionError(f"nested more than {MAX_DEPTH} levels deep; split it into observables or shorter terms")
        if isinstance(node, ast.Constant):
            value = node.value
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                raise fail(node, f"expected a number, got {value!r}")
            try:
                number = float(value)
            except OverflowError:
                number = math.inf
            if not math.isfinite(number):
                raise fail(node, f"expected a finite number, got {ast.get_source_segment(source, node) or value!r}")
            return lambda v: number
        if isinstance(node, ast.Name):
            name = node.id
            if name in known:
                used.add(name)
                return lambda v: v[name]
            if name in CONSTANTS:
                constant = CONSTANTS[name]
                return lambda v: constant
            if name in FUNCTIONS or name in operators:
                raise fail(node, f"{name!r} is a function: call it, as {name}(...)")
            raise fail(node, f"unknown name {name!r}{_did_you_mean(name, known | set(CONSTANTS))}")
        if isinstance(node, ast.BinOp):
            if isinstance(node.op, ast.BitXor):
                raise fail(node, "^ is not a power here: write x ** 2")
            op = _BINARY.get(type(node.op))
            if op is None:
                raise fail(node, f"the operator {type(node.op).__name__} is not in the language (+ - * / **)")
            left, right = build(node.left, depth + 1), build(node.right, depth + 1)
            return lambda v: op(left(v), right(v))
        if isinstance(node, ast.UnaryOp):
            operand = build(node.operand, depth + 1)
            if isinstance(node.op, ast.USub):
                return lambda v: jnp.negative(operand(v))
            if isinstance(node.op, ast.UAdd):
                return operand
            if isinstance(node.op, ast.Not):
                return lambda v: jnp.logical_not(operand(v))
            raise fail(node, f"the operator {type(node.op).__name__} is not in the language")
        if isinstance(node, ast.Compare):
            if len(node.ops) != 1:
                raise fail(node, "chained comparisons are not in the language: join them with `and`")
            op = _COMPARE.get(type(node.ops[0]))
            if op is None:
                raise fail(node, f"the comparison {type(node.ops[0]).__name__} is not in the language")
            left, right = build(node.left, depth + 1), build(node.comparators[0], depth + 1)
            return lambda v: op(left(v), right(v))
        if isinstance(node, ast.BoolOp):
            parts = [build(n, depth + 1) for n in node.values]
            join = jnp.logical_and if isinstance(node.op, ast.And) else jnp.logical_or

            def boolean(v):
                out = parts[0](v)
                for part in parts[1:]:
                    out = join(out, part(v))
                return out

            return boolean
        if isinstance(node, ast.IfExp):
            cond, yes, no = build(node.test, depth + 1), build(node.body, depth + 1), build(node.orelse, depth + 1)
            return lambda v: jnp.where(cond(v), yes(v), no(v))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in operators:
            if node.keywords or len(node.args) != 1 or isinstance(node.args[0], ast.Starred):
                raise fail(node, f"{node.func.id}() takes 1 argument, got {len(node.args) + len(node.keywords)}")
            key, arg = f"@{node.func.id}", build(node.args[0], depth + 1)
            if isinstance(node.args[0], ast.Name) and node.args[0].id in known:
                # Applied to a symbol itself: the values may supply "@NAME:SYMBOL" (a
                # field's derivative with that field's boundary conditions).
                own = f"{key}:{node.args[0].id}"
                return lambda v: v[own]() if own in v else v[key](arg(v))
            return lambda v: v[key](arg(v))
        if isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
                name = node.func.id if isinstance(node.func, ast.Name) else ast.unparse(node.func)
                raise fail(node, f"unknown function {name!r}{_did_you_mean(name, set(FUNCTIONS) | set(operators))}")
            fn, arity = FUNCTIONS[node.func.id]
            if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
                raise fail(node, f"{node.func.id}() takes plain arguments, no keywords")
            if len(node.args) != arity:
                raise fail(node, f"{node.func.id}() takes {arity} argument{'s' if arity > 1 else ''}, got {len(node.args)}")
            args = [build(a, depth + 1) for a in node.args]
            return lambda v: fn(*(a(v) for a in args))
        raise fail(node, f"{type(node).__name__} is not in the expression language")

    try:
        fn = build(tree.body)
    except RecursionError:
        raise ExpressionError("nested too deeply to read; split it into observables or shorter terms") from None
    return Expression(source, frozenset(used), fn)
