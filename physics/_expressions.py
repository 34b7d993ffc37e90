"""Right-hand sides written as text: a small expression language, parsed without `eval`,
and differentiated symbolically.

The text is read by Python's own parser (`ast.parse`, which only builds a syntax tree)
and every node is checked against what the language allows: numbers, the names it is
given (states, parameters, `t`, the constants `pi` and `e`), + - * / ** and unary
minus, comparisons and `and`/`or`/`not` (for conditions), `a if cond else b`, and calls
of the functions in `FUNCTIONS` with their number of arguments. Anything else (attribute
access, subscripts, keywords, strings, lambdas, ...) is refused with its column. The
checked tree becomes a list of `jax.numpy` operations applied to a dict of values, so it
traces, compiles and differentiates like hand-written model code.

`Expression.derivative` builds the derivative with respect to a symbol as another tree
of the same nodes, folding constants so that structural zeros are known (an expression
that does not read the symbol has the derivative 0). The checked tree is at most
`MAX_DEPTH` deep; a derivative may be deeper, so everything done to trees after the
check (differentiation, evaluation, printing) walks them with an explicit stack (the
walking and the printing are `physics._expression_trees`).
"""

from __future__ import annotations

import ast
import difflib
import math
from collections.abc import Callable, Collection
from functools import reduce
from typing import Any

import jax.numpy as jnp

from ._expression_trees import _children, _postorder, _symbols, _text_length, tree_key, unparse

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

_BINARY = {
    ast.Add: jnp.add,
    ast.Sub: jnp.subtract,
    ast.Mult: jnp.multiply,
    ast.Div: jnp.divide,
    ast.Pow: jnp.power,
}
_COMPARE = {
    ast.Lt: jnp.less,
    ast.LtE: jnp.less_equal,
    ast.Gt: jnp.greater,
    ast.GtE: jnp.greater_equal,
    ast.Eq: jnp.equal,
    ast.NotEq: jnp.not_equal,
}


class ExpressionError(ValueError):
    """A text that is not an expression of the language; the message gives the column."""


def _did_you_mean(name: str, known: Collection[str]) -> str:
    close = difflib.get_close_matches(name, sorted(known), n=1)
    return f"; did you mean {close[0]!r}?" if close else ""


class Expression:
    """A checked expression: its `text`, the symbol `names` it reads and its syntax
    `tree`. `__call__(values)` evaluates it with a dict holding (at least) those names;
    `derivative(name)` is the expression of its derivative with respect to a symbol.

    Two expressions of the same tree over the same names are equal (and hash alike), so
    that models holding them as static fields compare as values: equal texts give equal
    models, which share their compiled programs."""

    def __init__(
        self,
        text: str | None,
        names: frozenset[str],
        tree: ast.expr,
        operators: frozenset[str] = frozenset(),
    ):
        self._text = text  # (None: written from the tree when asked for)
        self._text_length: int | None = None
        self.names = names
        self.tree = tree
        self._operators = operators
        self._steps = _compile(tree, names, operators)
        self._identity: tuple | None = None
        self._hash: int | None = None

    def _key(self) -> tuple:
        """What two equal expressions share: the syntax tree (`tree_key`), the names and
        the operators."""
        if self._identity is None:
            self._identity = (tree_key(self.tree), self.names, self._operators)
        return self._identity

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, Expression):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(self._key())
        return self._hash

    def __call__(self, values: dict[str, Any]) -> Any:
        slots: list[Any] = []
        for operation, arguments in self._steps:
            slots.append(operation(values, *(slots[i] for i in arguments)))
        return slots[-1]

    @property
    def text(self) -> str:
        """The expression as written; a derivative's as `unparse` writes its tree.

        Raises:
            ExpressionError: the text would be longer than an expression may be (a
                derivative repeats the subexpressions it shares).
        """
        if self._text is None:
            if self._length() > MAX_LENGTH:
                raise ExpressionError(
                    f"the text would have {self._length():,} characters, more than the "
                    f"{MAX_LENGTH:,} an expression may have"
                )
            self._text = unparse(self.tree)
        return self._text

    def _length(self) -> int:
        if self._text is not None:
            return len(self._text)
        if self._text_length is None:
            self._text_length = _text_length(self.tree)
        return self._text_length

    @property
    def is_zero(self) -> bool:
        """Whether the expression is the number 0 (as a derivative: a structural zero)."""
        return _value(self.tree) == 0

    def derivative(self, name: str) -> Expression:
        """The derivative with respect to the symbol `name` (0 when it does not read it).

        Example:
            >>> parse("k * x ** 2 + sin(t)", ["x", "k", "t"]).derivative("x").text
            'k * (2 * x)'

        Raises:
            ExpressionError: the expression applies an operator the values supply (a
                PDE's derivative) to something that reads `name`.
        """
        if name not in self.names:
            return _ZERO
        tree = _differentiate(self.tree, name, self._operators)
        if tree is None:
            return _ZERO
        return Expression(None, frozenset(_symbols(tree) & self.names), tree, self._operators)

    def __repr__(self) -> str:
        try:
            return f"Expression({self.text!r})"
        except ExpressionError:
            return f"Expression(<{self._length():,} characters>)"


def parse(text: str, symbols: Collection[str], operators: Collection[str] = ()) -> Expression:
    """Parse `text` into an `Expression` over `symbols` (and the constants). `operators`
    names functions of one argument that the values supply at evaluation time (under
    "@NAME"): a PDE's derivatives, which need the grid. An operator applied to a symbol
    itself calls "@NAME:SYMBOL" instead, when the values supply it (with no argument).

    Raises:
        ExpressionError: a syntax error, or a construct or name the language does not
            have (with its column, counted from 1).
    """
    source = _source(text)
    tree = _syntax_tree(source)
    checker = _Checker(source, set(symbols), operators)
    try:
        checker.check(tree.body)
    except RecursionError:
        raise ExpressionError(
            "nested too deeply to read; split it into observables or shorter terms"
        ) from None
    return Expression(source, frozenset(checker.used), tree.body, frozenset(operators))


def _source(text: str) -> str:
    """The text of an expression without its surrounding blanks, refused when it is no
    text, empty or too long."""
    if not isinstance(text, str):
        raise ExpressionError(f"expected an expression as text, got {text!r}")
    source = text.strip()
    if not source:
        raise ExpressionError("expected an expression, got an empty text")
    if len(source) > MAX_LENGTH:
        raise ExpressionError(
            f"expected an expression of at most {MAX_LENGTH:,} characters, got {len(source):,}"
        )
    return source


def _syntax_tree(source: str) -> ast.Expression:
    """Python's syntax tree of the text, its syntax errors as `ExpressionError`s."""
    try:
        return ast.parse(source, mode="eval")
    except SyntaxError as e:
        raise ExpressionError(f"column {e.offset or 1}: syntax error ({e.msg})") from None
    except (RecursionError, MemoryError):
        raise ExpressionError(
            "nested too deeply to read; split it into observables or shorter terms"
        ) from None


class _Checker:
    """Checks a syntax tree against the language node by node, refusing what it does not
    have, and gathers the symbols the tree reads (`used`)."""

    def __init__(self, source: str, known: set[str], operators: Collection[str]):
        self.source = source
        self.known = known
        self.operators = operators
        self.used: set[str] = set()

    def fail(self, node: ast.AST, why: str) -> ExpressionError:
        """The refusal of `node`, with its column."""
        return ExpressionError(f"column {getattr(node, 'col_offset', 0) + 1}: {why}")

    def check(self, node: ast.AST, depth: int = 0) -> None:
        """Checks `node` and, below it, its operands."""
        if depth > MAX_DEPTH:  # (the check recurses as deep as the tree)
            raise ExpressionError(
                f"nested more than {MAX_DEPTH} levels deep; split it into observables or shorter "
                "terms"
            )
        if isinstance(node, ast.Constant):
            self._number(node)
            return
        if isinstance(node, ast.Name):
            self._name(node)
            return
        if isinstance(node, ast.Call):
            self._call(node)
        else:
            self._operation(node)
        for child in _children(node):
            self.check(child, depth + 1)

    def _number(self, node: ast.Constant) -> None:
        """Checks that a constant is a finite number."""
        value = node.value
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.fail(node, f"expected a number, got {value!r}")
        try:
            number = float(value)
        except OverflowError:
            number = math.inf
        if not math.isfinite(number):
            raise self.fail(
                node,
                "expected a finite number, got "
                f"{ast.get_source_segment(self.source, node) or value!r}",
            )

    def _name(self, node: ast.Name) -> None:
        """Checks that a name is a symbol (noting it as used) or a constant."""
        name = node.id
        if name in self.known:
            self.used.add(name)
            return
        if name in CONSTANTS:
            return
        if name in FUNCTIONS or name in self.operators:
            raise self.fail(node, f"{name!r} is a function: call it, as {name}(...)")
        raise self.fail(
            node, f"unknown name {name!r}{_did_you_mean(name, self.known | set(CONSTANTS))}"
        )

    def _operation(self, node: ast.AST) -> None:
        """Checks that an operator, comparison, `and`/`or` or conditional expression is
        one of the language."""
        if isinstance(node, ast.BinOp):
            if isinstance(node.op, ast.BitXor):
                raise self.fail(node, "^ is not a power here: write x ** 2")
            if type(node.op) not in _BINARY:
                raise self.fail(
                    node,
                    f"the operator {type(node.op).__name__} is not in the language (+ - * / **)",
                )
        elif isinstance(node, ast.UnaryOp):
            if not isinstance(node.op, (ast.USub, ast.UAdd, ast.Not)):
                raise self.fail(
                    node, f"the operator {type(node.op).__name__} is not in the language"
                )
        elif isinstance(node, ast.Compare):
            if len(node.ops) != 1:
                raise self.fail(
                    node, "chained comparisons are not in the language: join them with `and`"
                )
            if type(node.ops[0]) not in _COMPARE:
                raise self.fail(
                    node, f"the comparison {type(node.ops[0]).__name__} is not in the language"
                )
        elif not isinstance(node, (ast.BoolOp, ast.IfExp)):
            raise self.fail(node, f"{type(node).__name__} is not in the expression language")

    def _call(self, node: ast.Call) -> None:
        """Checks that a call is of an operator the values supply, with one argument, or
        of a function of the language, with its number of plain arguments."""
        if isinstance(node.func, ast.Name) and node.func.id in self.operators:
            if node.keywords or len(node.args) != 1 or isinstance(node.args[0], ast.Starred):
                raise self.fail(
                    node,
                    f"{node.func.id}() takes 1 argument, got {len(node.args) + len(node.keywords)}",
                )
            return
        if not isinstance(node.func, ast.Name) or node.func.id not in FUNCTIONS:
            name = node.func.id if isinstance(node.func, ast.Name) else ast.unparse(node.func)
            raise self.fail(
                node,
                "unknown function "
                f"{name!r}{_did_you_mean(name, set(FUNCTIONS) | set(self.operators))}",
            )
        arity = FUNCTIONS[node.func.id][1]
        if node.keywords or any(isinstance(a, ast.Starred) for a in node.args):
            raise self.fail(node, f"{node.func.id}() takes plain arguments, no keywords")
        if len(node.args) != arity:
            raise self.fail(
                node,
                f"{node.func.id}() takes {arity} argument{'s' if arity > 1 else ''}, got "
                f"{len(node.args)}",
            )


# -------------------------------------------------------------------------- evaluating trees


def _compile(
    tree: ast.expr, names: Collection[str], operators: Collection[str]
) -> list[tuple[Callable[..., Any], list[int]]]:
    """The operations that evaluate `tree`, in an order where each reads the slots of its
    operands (a shared subtree is evaluated once): (operation(values, *operands), the
    operands' slots)."""
    slot: dict[int, int] = {}
    steps = []
    for node in _postorder(tree):
        slot[id(node)] = len(steps)
        steps.append(
            (_operation(node, names, operators), [slot[id(child)] for child in _children(node)])
        )
    return steps


def _operation(
    node: ast.expr, names: Collection[str], operators: Collection[str]
) -> Callable[..., Any]:
    if isinstance(node, ast.Constant):
        number = float(node.value)
        return lambda v: number
    if isinstance(node, ast.Name):
        name = node.id
        if name in names:
            return lambda v: v[name]
        constant = CONSTANTS[name]
        return lambda v: constant
    if isinstance(node, ast.BinOp):
        op = _BINARY[type(node.op)]
        return lambda v, a, b: op(a, b)
    if isinstance(node, ast.UnaryOp):
        if isinstance(node.op, ast.USub):
            return lambda v, a: jnp.negative(a)
        if isinstance(node.op, ast.Not):
            return lambda v, a: jnp.logical_not(a)
        return lambda v, a: a
    if isinstance(node, ast.Compare):
        op = _COMPARE[type(node.ops[0])]
        return lambda v, a, b: op(a, b)
    if isinstance(node, ast.BoolOp):
        join = jnp.logical_and if isinstance(node.op, ast.And) else jnp.logical_or
        return lambda v, *parts: reduce(join, parts)
    if isinstance(node, ast.IfExp):
        return lambda v, cond, yes, no: jnp.where(cond, yes, no)
    assert isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
    if node.func.id in operators:
        key = f"@{node.func.id}"
        if isinstance(node.args[0], ast.Name) and node.args[0].id in names:
            # Applied to a symbol itself: the values may supply "@NAME:SYMBOL" (a
            # field's derivative with that field's boundary conditions).
            own = f"{key}:{node.args[0].id}"
            return lambda v, a: v[own]() if own in v else v[key](a)
        return lambda v, a: v[key](a)
    fn = FUNCTIONS[node.func.id][0]
    return lambda v, *args: fn(*args)


# ----------------------------------------------------------------------------- derivatives
#
# A derivative is None where it is structurally zero. The builders below fold numbers
# and drop zeros and ones, so a derivative reads as one would write it by hand.


def _value(node: ast.expr | None) -> float | None:
    """The number a node is (a constant under any signs), else None."""
    sign = 1.0
    while isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        sign = -sign if isinstance(node.op, ast.USub) else sign
        node = node.operand
    if (
        isinstance(node, ast.Constant)
        and isinstance(node.value, (int, float))
        and not isinstance(node.value, bool)
    ):
        return sign * float(node.value)
    return None


def _number(x: float) -> ast.expr:
    magnitude: int | float = abs(x)
    if magnitude.is_integer() and magnitude < 2**53:
        magnitude = int(magnitude)  # (read as the same float; printed without ".0")
    node: ast.expr = ast.Constant(magnitude)
    return ast.UnaryOp(ast.USub(), node) if x < 0 else node


def _fold(op: Callable[[float, float], float], a: ast.expr, b: ast.expr) -> ast.expr | None:
    """`a op b` as one number when both are numbers and the result is a finite real."""
    x, y = _value(a), _value(b)
    if x is None or y is None:
        return None
    try:
        z = op(x, y)
    except (ArithmeticError, ValueError):
        return None
    return _number(z) if isinstance(z, float) and math.isfinite(z) else None


def _negated(node: ast.expr) -> ast.expr | None:
    """x for -x (x not a number), else None."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and _value(node) is None:
        return node.operand
    return None


def _minus(node: ast.expr) -> ast.expr | None:
    """x when `node` is -x as a negative number, a negation, or a negative number times
    (or over) x; else None (a + -2 * y is written a - 2 * y)."""
    if (x := _value(node)) is not None:
        return _number(-x) if x < 0 else None
    if (inner := _negated(node)) is not None:
        return inner
    if (
        isinstance(node, ast.BinOp)
        and isinstance(node.op, (ast.Mult, ast.Div))
        and (x := _value(node.left)) is not None
        and x < 0
    ):
        return (
            node.right
            if x == -1 and isinstance(node.op, ast.Mult)
            else ast.BinOp(_number(-x), node.op, node.right)
        )
    return None


def _neg(a: ast.expr | None) -> ast.expr | None:
    if a is None or _value(a) == 0:
        return None
    if (x := _value(a)) is not None:
        return _number(-x)
    if (inner := _negated(a)) is not None:
        return inner
    if (
        isinstance(a, ast.BinOp)
        and isinstance(a.op, (ast.Mult, ast.Div))
        and (x := _value(a.left)) is not None
    ):
        return ast.BinOp(_number(-x), a.op, a.right)  # -(2 * x) -> -2 * x
    return ast.UnaryOp(ast.USub(), a)


def _add(a: ast.expr | None, b: ast.expr | None) -> ast.expr | None:
    if a is None or _value(a) == 0:
        return b
    if b is None or _value(b) == 0:
        return a
    if (folded := _fold(lambda x, y: x + y, a, b)) is not None:
        return folded
    if (positive := _minus(b)) is not None:
        return ast.BinOp(a, ast.Sub(), positive)
    return ast.BinOp(a, ast.Add(), b)


def _sub(a: ast.expr | None, b: ast.expr | None) -> ast.expr | None:
    if b is None or _value(b) == 0:
        return a
    if a is None or _value(a) == 0:
        return _neg(b)
    if (folded := _fold(lambda x, y: x - y, a, b)) is not None:
        return folded
    if (positive := _minus(b)) is not None:
        return ast.BinOp(a, ast.Add(), positive)
    return ast.BinOp(a, ast.Sub(), b)


def _mul(a: ast.expr | None, b: ast.expr | None) -> ast.expr | None:
    if a is None or b is None or _value(a) == 0 or _value(b) == 0:
        return None
    if (folded := _fold(lambda x, y: x * y, a, b)) is not None:
        return folded
    if _value(a) is None and _value(b) is not None:
        a, b = b, a  # a number first: 2 * x
    x = _value(a)
    if x == 1:
        return b
    if x == -1:
        return _neg(b)
    if (
        x is not None
        and isinstance(b, ast.BinOp)
        and isinstance(b.op, ast.Mult)
        and _value(b.left) is not None
    ):
        return _mul(_mul(a, b.left), b.right)  # 3 * (2 * x) -> 6 * x
    if (inner := _negated(a)) is not None:
        return _neg(_mul(inner, b))
    if (inner := _negated(b)) is not None:
        return _neg(_mul(a, inner))
    return ast.BinOp(a, ast.Mult(), b)


def _div(a: ast.expr | None, b: ast.expr) -> ast.expr | None:
    if a is None or _value(a) == 0:
        return None
    if (folded := _fold(lambda x, y: x / y, a, b)) is not None:
        return folded
    if _value(b) == 1:
        return a
    if _value(b) == -1:
        return _neg(a)
    if (inner := _negated(a)) is not None:
        return _neg(_div(inner, b))
    return ast.BinOp(a, ast.Div(), b)


def _pow(a: ast.expr, b: ast.expr) -> ast.expr:
    if _value(b) == 0:
        return ast.Constant(1)
    if _value(b) == 1:
        return a
    folded = _fold(lambda x, y: x**y, a, b)
    return folded if folded is not None else ast.BinOp(a, ast.Pow(), b)


def _call(name: str, *args: ast.expr) -> ast.expr:
    return ast.Call(ast.Name(name, ast.Load()), list(args), [])


def _branches(
    make: Callable[[ast.expr, ast.expr], ast.expr], yes: ast.expr | None, no: ast.expr | None
) -> ast.expr | None:
    """A choice between two derivatives under the condition of the original (0 when both are)."""
    if yes is None and no is None:
        return None
    return make(ast.Constant(0) if yes is None else yes, ast.Constant(0) if no is None else no)


def _power(
    node: ast.expr,
    base: ast.expr,
    exponent: ast.expr,
    d_base: ast.expr | None,
    d_exponent: ast.expr | None,
) -> ast.expr | None:
    """d(base ** exponent) = exponent * base ** (exponent - 1) * d_base + base ** exponent *
    log(base) * d_exponent."""
    power_rule = (
        None
        if d_base is None
        else _mul(d_base, _mul(exponent, _pow(base, _sub(exponent, ast.Constant(1)))))
    )
    exponential_rule = (
        None if d_exponent is None else _mul(d_exponent, _mul(node, _call("log", base)))
    )
    return _add(power_rule, exponential_rule)


# The derivative of f(u) as a function of (the call f(u), u, du).
_CHAIN: dict[str, Callable[[ast.expr, ast.expr, ast.expr], ast.expr | None]] = {
    "exp": lambda f, u, du: _mul(du, f),
    "log": lambda f, u, du: _div(du, u),
    "log10": lambda f, u, du: _div(du, _mul(u, _call("log", ast.Constant(10)))),
    "sqrt": lambda f, u, du: _div(du, _mul(ast.Constant(2), f)),
    "sin": lambda f, u, du: _mul(du, _call("cos", u)),
    "cos": lambda f, u, du: _neg(_mul(du, _call("sin", u))),
    "tan": lambda f, u, du: _mul(du, _add(ast.Constant(1), _pow(f, ast.Constant(2)))),
    "arcsin": lambda f, u, du: _div(
        du, _call("sqrt", _sub(ast.Constant(1), _pow(u, ast.Constant(2))))
    ),
    "arccos": lambda f, u, du: _neg(
        _div(du, _call("sqrt", _sub(ast.Constant(1), _pow(u, ast.Constant(2)))))
    ),
    "arctan": lambda f, u, du: _div(du, _add(ast.Constant(1), _pow(u, ast.Constant(2)))),
    "sinh": lambda f, u, du: _mul(du, _call("cosh", u)),
    "cosh": lambda f, u, du: _mul(du, _call("sinh", u)),
    "tanh": lambda f, u, du: _mul(du, _sub(ast.Constant(1), _pow(f, ast.Constant(2)))),
    "abs": lambda f, u, du: _mul(du, _call("sign", u)),
}
_PIECEWISE_CONSTANT = ("sign", "floor", "ceil")
_CHOICES = ("where", "piecewise")


def _differentiated(node: ast.AST) -> list[ast.expr]:
    """The operands whose derivatives the derivative of `node` needs (a condition has none)."""
    if isinstance(node, (ast.Compare, ast.BoolOp)) or (
        isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not)
    ):
        return []
    if isinstance(node, ast.IfExp):
        return [node.body, node.orelse]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        if node.func.id in _PIECEWISE_CONSTANT:
            return []
        if node.func.id in _CHOICES:
            return list(node.args[1:])
    return _children(node)


def _differentiate(tree: ast.expr, name: str, operators: Collection[str]) -> ast.expr | None:
    """The derivative of a checked tree with respect to the symbol `name` (None: zero)."""
    done: dict[int, ast.expr | None] = {}
    for node in _postorder(tree, _differentiated):
        d = [done[id(child)] for child in _differentiated(node)]
        done[id(node)] = _rule(node, name, d, operators)
    return done[id(tree)]


def _rule(
    node: ast.expr, name: str, d: list[ast.expr | None], operators: Collection[str]
) -> ast.expr | None:
    """The derivative of `node` from the derivatives `d` of its `_differentiated` operands."""
    if isinstance(node, ast.Name):
        return ast.Constant(1) if node.id == name else None
    if isinstance(node, ast.BinOp):
        left, right = node.left, node.right
        if isinstance(node.op, ast.Add):
            return _add(d[0], d[1])
        if isinstance(node.op, ast.Sub):
            return _sub(d[0], d[1])
        if isinstance(node.op, ast.Mult):
            return _add(_mul(d[0], right), _mul(left, d[1]))
        if isinstance(node.op, ast.Div):
            quotient = _div(d[0], right)
            return (
                quotient
                if d[1] is None
                else _sub(quotient, _div(_mul(left, d[1]), _pow(right, ast.Constant(2))))
            )
        return _power(node, left, right, d[0], d[1])
    if isinstance(node, ast.UnaryOp):
        return (
            _neg(d[0])
            if isinstance(node.op, ast.USub)
            else d[0]
            if isinstance(node.op, ast.UAdd)
            else None
        )
    if isinstance(node, ast.IfExp):
        return _branches(lambda yes, no: ast.IfExp(node.test, yes, no), d[0], d[1])
    if not isinstance(node, ast.Call) or not d:  # numbers, conditions, sign/floor/ceil
        return None
    function = node.func.id
    if function in operators:
        if d[0] is None:
            return None
        raise ExpressionError(
            f"{function}() of an expression that reads {name!r} has no symbolic derivative"
        )
    if function in _CHOICES:
        return _branches(lambda yes, no: _call(function, node.args[0], yes, no), d[0], d[1])
    if function in ("min", "max"):
        a, b = node.args
        keeps_a = ast.LtE() if function == "min" else ast.GtE()
        return _branches(
            lambda yes, no: _call("where", ast.Compare(a, [keeps_a], [b]), yes, no), d[0], d[1]
        )
    if function == "pow":
        return _power(node, node.args[0], node.args[1], d[0], d[1])
    return None if d[0] is None else _CHAIN[function](node, node.args[0], d[0])


_ZERO = Expression("0", frozenset(), ast.Constant(0))
