"""The expression language of text models against NumPy and SymPy: every operator,
comparison, boolean word and function on its own (one named case each), random
expression trees built at once as the language's text, as NumPy operations and as SymPy
expressions, and symbolic derivatives against SymPy's `diff` (never against jax.grad of
the same evaluator)."""

import math

import jax
import numpy as np
import pytest
import sympy as sp
from hypothesis import given, reject, settings, strategies as st

from physics._expressions import FUNCTIONS, parse

NAMES = ("x", "y", "k")
SYMBOLS = {name: sp.Symbol(name, real=True) for name in NAMES}
# Points where every function of the table is defined and away from its kinks.
AT = {
    "x": np.array([0.3, 0.55, 0.8]),
    "y": np.array([0.7, -0.45, 0.25]),
    "k": np.array([1.5, 0.2, -0.6]),
}


def _close(got, want, rtol: float = 1e-12, atol: float = 1e-12) -> np.ndarray:
    """Per point: both NaN, the same infinity, or finite and close."""
    got, want = np.broadcast_arrays(np.asarray(got, dtype=float), np.asarray(want, dtype=float))
    with np.errstate(all="ignore"):
        near = np.abs(got - want) <= atol + rtol * np.abs(want)
    return (
        (np.isnan(got) & np.isnan(want))
        | (np.isinf(want) & (got == want))
        | (np.isfinite(want) & np.isfinite(got) & near)
    )


# ----------------------------------------------------------------------------- one case each

# text -> the same value written with NumPy at AT (x, y, k)
OPERATOR_CASES = {
    "x + y": lambda x, y, k: x + y,
    "x - y": lambda x, y, k: x - y,
    "x * y": lambda x, y, k: x * y,
    "x / y": lambda x, y, k: x / y,
    "x ** y": lambda x, y, k: x**y,
    "-x": lambda x, y, k: -x,
    "+y": lambda x, y, k: y,
    "x - y - k": lambda x, y, k: (x - y) - k,  # (left-associative)
    "x / y / k": lambda x, y, k: (x / y) / k,
    "x ** y ** 2": lambda x, y, k: x ** (y**2),  # (right-associative)
    "-x ** 2": lambda x, y, k: -(x**2),
    "pi * x + e": lambda x, y, k: np.pi * x + np.e,
    "x < y": lambda x, y, k: x < y,
    "x <= 0.55": lambda x, y, k: x <= 0.55,
    "x > y": lambda x, y, k: x > y,
    "x >= 0.55": lambda x, y, k: x >= 0.55,
    "x == 0.55": lambda x, y, k: x == 0.55,
    "x != 0.55": lambda x, y, k: x != 0.55,
    # and/or with one operand true and the other false (x > 0 always, y > 0 only at
    # two points), in both orders and in threes, so that swapping the words changes values.
    "x > 0 and y > 0": lambda x, y, k: (x > 0) & (y > 0),
    "y > 0 and x > 0": lambda x, y, k: (y > 0) & (x > 0),
    "x > 0 or y > 0": lambda x, y, k: (x > 0) | (y > 0),
    "y > 1 or x > 0": lambda x, y, k: (y > 1) | (x > 0),
    "x < 0 or y > 0": lambda x, y, k: (x < 0) | (y > 0),
    "x > 0 and y > 0 and k > 0": lambda x, y, k: (x > 0) & (y > 0) & (k > 0),
    "x < 0 or y < 0 or k < 0": lambda x, y, k: (x < 0) | (y < 0) | (k < 0),
    "x > 0 and y > 0 or k < 0": lambda x, y, k: ((x > 0) & (y > 0)) | (k < 0),  # (and binds first)
    "not y > 0": lambda x, y, k: ~(y > 0),
    "not (x > 0 and y > 0)": lambda x, y, k: ~((x > 0) & (y > 0)),
    "x and y": lambda x, y, k: (x != 0) & (y != 0),
    "x if y > 0 else k": lambda x, y, k: np.where(y > 0, x, k),
    "x if y > 0 and k > 0 else -x": lambda x, y, k: np.where((y > 0) & (k > 0), x, -x),
}

# function -> (its text at AT, NumPy's value); every function of the language has a case.
FUNCTION_CASES = {
    "exp": ("exp(y)", lambda x, y, k: np.exp(y)),
    "log": ("log(x)", lambda x, y, k: np.log(x)),
    "log10": ("log10(x)", lambda x, y, k: np.log10(x)),
    "sqrt": ("sqrt(x)", lambda x, y, k: np.sqrt(x)),
    "sin": ("sin(k)", lambda x, y, k: np.sin(k)),
    "cos": ("cos(k)", lambda x, y, k: np.cos(k)),
    "tan": ("tan(k)", lambda x, y, k: np.tan(k)),
    "arcsin": ("arcsin(y)", lambda x, y, k: np.arcsin(y)),
    "arccos": ("arccos(y)", lambda x, y, k: np.arccos(y)),
    "arctan": ("arctan(k)", lambda x, y, k: np.arctan(k)),
    "sinh": ("sinh(k)", lambda x, y, k: np.sinh(k)),
    "cosh": ("cosh(k)", lambda x, y, k: np.cosh(k)),
    "tanh": ("tanh(k)", lambda x, y, k: np.tanh(k)),
    "abs": ("abs(y)", lambda x, y, k: np.abs(y)),
    "sign": ("sign(y)", lambda x, y, k: np.sign(y)),
    "floor": ("floor(3 * k)", lambda x, y, k: np.floor(3 * k)),
    "ceil": ("ceil(3 * k)", lambda x, y, k: np.ceil(3 * k)),
    "min": ("min(x, y)", lambda x, y, k: np.minimum(x, y)),
    "max": ("max(x, y)", lambda x, y, k: np.maximum(x, y)),
    "pow": ("pow(x, k)", lambda x, y, k: x**k),
    "where": ("where(y > 0, x, k)", lambda x, y, k: np.where(y > 0, x, k)),
    "piecewise": ("piecewise(y < 0, x, k)", lambda x, y, k: np.where(y < 0, x, k)),
}


def test_every_function_of_the_language_has_a_case():
    assert set(FUNCTION_CASES) == set(FUNCTIONS)


@pytest.mark.parametrize("text", sorted(OPERATOR_CASES))
def test_each_operator_comparison_and_boolean_word_evaluates_as_numpy_does(text):
    # The language's value against the same operation written with NumPy: a wrong
    # operator (and/or swapped, a comparison turned round, ...) fails its own case.
    got = np.asarray(parse(text, NAMES)(AT))
    want = OPERATOR_CASES[text](**AT)
    assert got.shape == want.shape and _close(got, want, rtol=1e-15, atol=0).all(), (
        text,
        got,
        want,
    )


@pytest.mark.parametrize("function", sorted(FUNCTION_CASES))
def test_each_function_evaluates_as_numpy_does(function):
    text, reference = FUNCTION_CASES[function]
    got, want = parse(text, NAMES)(AT), reference(**AT)
    assert _close(got, want, rtol=1e-14, atol=0).all(), (text, got, want)


# ----------------------------------------------------------------------------- random trees
#
# A tree is a tuple: ("name", n), ("number", c), ("constant", "pi" | "e"), ("binary", op,
# a, b), ("unary", "-" | "+", a), ("call", f, args), ("ifexp", condition, a, b);
# conditions: ("compare", op, a, b), ("boolean", "and" | "or", [a, b, ...]), ("not", a),
# ("truth", a) (a number as a condition: true where nonzero).

NUMBERS = (0.5, 1, 2, 3, 0.25, 1.5, 10)
UNARY_FUNCTIONS = tuple(f for f, (_, arity) in FUNCTIONS.items() if arity == 1)
COMPARISONS = ("<", "<=", ">", ">=", "==", "!=")
# No truth of a number in conditions that SymPy differentiates (its And/Or take relations).
_CONDITION_KINDS = {
    True: ("compare", "boolean", "not", "truth"),
    False: ("compare", "boolean", "not"),
}


@st.composite
def numbers(
    draw, depth: int = 3, functions: tuple[str, ...] = tuple(FUNCTIONS), truth: bool = True
):
    if depth == 0 or draw(st.integers(0, 4)) == 0:
        kind = draw(st.sampled_from(("name", "name", "number", "constant")))
        if kind == "name":
            return ("name", draw(st.sampled_from(NAMES)))
        if kind == "number":
            return ("number", draw(st.sampled_from(NUMBERS)))
        return ("constant", draw(st.sampled_from(("pi", "e"))))
    below = numbers(depth - 1, functions, truth)
    kind = draw(st.sampled_from(("binary", "binary", "unary", "call", "call", "ifexp")))
    if kind == "binary":
        return (
            "binary",
            draw(st.sampled_from(("+", "-", "*", "/", "**"))),
            draw(below),
            draw(below),
        )
    if kind == "unary":
        return ("unary", draw(st.sampled_from(("-", "+"))), draw(below))
    if kind == "ifexp":
        return ("ifexp", draw(conditions(depth - 1, functions, truth)), draw(below), draw(below))
    function = draw(st.sampled_from(functions))
    if function in ("where", "piecewise"):
        return (
            "call",
            function,
            [draw(conditions(depth - 1, functions, truth)), draw(below), draw(below)],
        )
    return ("call", function, [draw(below) for _ in range(FUNCTIONS[function][1])])


@st.composite
def conditions(draw, depth: int, functions: tuple[str, ...], truth: bool):
    kind = draw(
        st.sampled_from(_CONDITION_KINDS[truth] if depth > 0 else ("compare", "truth")[: 1 + truth])
    )
    below = numbers(max(depth - 1, 0), functions, truth)
    if kind == "compare":
        return ("compare", draw(st.sampled_from(COMPARISONS)), draw(below), draw(below))
    if kind == "truth":
        return ("truth", draw(below))
    if kind == "not":
        return ("not", draw(conditions(depth - 1, functions, truth)))
    parts = draw(st.lists(conditions(depth - 1, functions, truth), min_size=2, max_size=3))
    return ("boolean", draw(st.sampled_from(("and", "or"))), parts)


def text_of(tree) -> str:
    """The language's text, every operand in parentheses."""
    kind = tree[0]
    if kind in ("name", "constant"):
        return tree[1]
    if kind == "number":
        return repr(tree[1])
    if kind == "binary":
        return f"({text_of(tree[2])}) {tree[1]} ({text_of(tree[3])})"
    if kind == "unary":
        return f"{tree[1]}({text_of(tree[2])})"
    if kind == "call":
        return f"{tree[1]}({', '.join(text_of(a) for a in tree[2])})"
    if kind == "ifexp":
        return f"({text_of(tree[2])}) if ({text_of(tree[1])}) else ({text_of(tree[3])})"
    if kind == "compare":
        return f"({text_of(tree[2])}) {tree[1]} ({text_of(tree[3])})"
    if kind == "truth":
        return f"({text_of(tree[1])})"
    if kind == "not":
        return f"not ({text_of(tree[1])})"
    return f" {tree[1]} ".join(f"({text_of(p)})" for p in tree[2])


_NUMPY_BINARY = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide, "**": np.power}
_NUMPY_COMPARE = {
    "<": np.less,
    "<=": np.less_equal,
    ">": np.greater,
    ">=": np.greater_equal,
    "==": np.equal,
    "!=": np.not_equal,
}
_NUMPY_FUNCTIONS = {
    "exp": np.exp, "log": np.log, "log10": np.log10, "sqrt": np.sqrt, "sin": np.sin, "cos": np.cos,
    "tan": np.tan,
    "arcsin": np.arcsin, "arccos": np.arccos, "arctan": np.arctan, "sinh": np.sinh, "cosh": np.cosh,
    "tanh": np.tanh,
    "abs": np.abs, "sign": np.sign, "floor": np.floor, "ceil": np.ceil, "min": np.minimum,
    "max": np.maximum,
    "pow": np.power, "where": np.where, "piecewise": np.where,
}  # fmt: skip


def numpy_of(tree, at: dict[str, np.ndarray]) -> np.ndarray:
    """The tree's value computed with NumPy (conditions as booleans)."""
    kind = tree[0]
    if kind == "name":
        return at[tree[1]]
    if kind == "number":
        return np.float64(tree[1])
    if kind == "constant":
        return np.float64(math.pi if tree[1] == "pi" else math.e)
    if kind == "binary":
        return _NUMPY_BINARY[tree[1]](numpy_of(tree[2], at), numpy_of(tree[3], at))
    if kind == "unary":
        return -numpy_of(tree[2], at) if tree[1] == "-" else numpy_of(tree[2], at)
    if kind == "call":
        return _NUMPY_FUNCTIONS[tree[1]](*(numpy_of(a, at) for a in tree[2]))
    if kind == "ifexp":
        return np.where(numpy_of(tree[1], at), numpy_of(tree[2], at), numpy_of(tree[3], at))
    if kind == "compare":
        return _NUMPY_COMPARE[tree[1]](numpy_of(tree[2], at), numpy_of(tree[3], at))
    if kind == "truth":
        return numpy_of(tree[1], at) != 0  # (NaN is true, as in Python)
    if kind == "not":
        return np.logical_not(numpy_of(tree[1], at))
    join = np.logical_and if tree[1] == "and" else np.logical_or
    parts = [numpy_of(p, at) for p in tree[2]]
    out = parts[0]
    for p in parts[1:]:
        out = join(out, p)
    return out


def points(size: int = 6):
    # Values with both signs, zero and one among them (x and y often equal, so that
    # comparisons, min and max meet their ties); none tiny (XLA on CPU flushes subnormal
    # numbers to zero, NumPy keeps them: log of 1e-313 is -inf in one and -720 in the other).
    magnitude = st.floats(1e-3, 3)
    value = st.one_of(
        st.sampled_from((0.0, 1.0, -1.0, 0.5, 2.0)), magnitude, magnitude.map(lambda v: -v)
    )
    return st.fixed_dictionaries(
        {n: st.lists(value, min_size=size, max_size=size).map(np.array) for n in NAMES}
    )


def _periodic_of_a_huge_argument(tree, at) -> bool:
    """Whether the tree takes sin, cos or tan of a value beyond 1e6 in size: there one ulp
    of the argument (exp(exp(pi)) is 1.1e10; XLA's exp and NumPy's may differ by one) moves
    the result by more than any tolerance, and no two libraries need agree."""
    if tree[0] == "call" and tree[1] in ("sin", "cos", "tan"):
        with np.errstate(all="ignore"):
            argument = np.asarray(numpy_of(tree[2][0], at), dtype=float)
        if np.any(np.abs(argument) > 1e6):
            return True
    return any(_periodic_of_a_huge_argument(p, at) for p in _subtrees(tree))


def _subtrees(tree) -> list:
    """The trees a tree is made of: its operands, a call's arguments."""
    return [p for p in tree[1:] if isinstance(p, tuple)] + [
        p for q in tree[1:] if isinstance(q, list) for p in q
    ]


@settings(max_examples=150, deadline=None)
@given(tree=numbers(), at=points())
def test_random_expressions_evaluate_as_numpy_does(tree, at):
    # Each tree written as text for the parser and evaluated independently with NumPy;
    # NaN where NumPy has NaN (log of a negative number, 0 / 0, ...), the same infinities.
    # (Standard promotion, as the solvers evaluate: a number as a condition next to a
    # comparison is a float and a bool, which the tests' strict promotion refuses.)
    if _periodic_of_a_huge_argument(tree, at):
        reject()
    text = text_of(tree)
    with np.errstate(all="ignore"), jax.numpy_dtype_promotion("standard"):
        want = np.broadcast_to(numpy_of(tree, at), (6,))
        got = np.asarray(parse(text, NAMES)(at))
    assert _close(got, want, rtol=1e-9, atol=1e-12).all(), (text, at, got, want)


# ----------------------------------------------------------------------------- derivatives


def _piecewise(condition, yes, no):
    return sp.Piecewise((yes, condition), (no, True))


_SYMPY_BINARY = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "/": lambda a, b: a / b,
    "**": sp.Pow,
}
_SYMPY_COMPARE = {"<": sp.Lt, "<=": sp.Le, ">": sp.Gt, ">=": sp.Ge, "==": sp.Eq, "!=": sp.Ne}
_SYMPY_FUNCTIONS = {
    "exp": sp.exp, "log": sp.log, "log10": lambda u: sp.log(u, 10), "sqrt": sp.sqrt, "sin": sp.sin,
    "cos": sp.cos,
    "tan": sp.tan, "arcsin": sp.asin, "arccos": sp.acos, "arctan": sp.atan, "sinh": sp.sinh,
    "cosh": sp.cosh,
    "tanh": sp.tanh, "abs": sp.Abs, "sign": sp.sign, "floor": sp.floor, "ceil": sp.ceiling,
    # min and max choose their first argument at a tie, as the language's derivative does
    "min": lambda a, b: _piecewise(a <= b, a, b), "max": lambda a, b: _piecewise(a >= b, a, b),
    "pow": sp.Pow, "where": _piecewise, "piecewise": _piecewise,
}  # fmt: skip


def sympy_of(tree) -> sp.Expr:
    kind = tree[0]
    if kind == "name":
        return SYMBOLS[tree[1]]
    if kind == "number":
        return sp.Rational(str(tree[1])) if isinstance(tree[1], float) else sp.Integer(tree[1])
    if kind == "constant":
        return sp.pi if tree[1] == "pi" else sp.E
    if kind == "binary":
        return _SYMPY_BINARY[tree[1]](sympy_of(tree[2]), sympy_of(tree[3]))
    if kind == "unary":
        return -sympy_of(tree[2]) if tree[1] == "-" else sympy_of(tree[2])
    if kind == "call":
        return _SYMPY_FUNCTIONS[tree[1]](*(sympy_of(a) for a in tree[2]))
    if kind == "ifexp":
        return _piecewise(sympy_of(tree[1]), sympy_of(tree[2]), sympy_of(tree[3]))
    if kind == "compare":
        return _SYMPY_COMPARE[tree[1]](sympy_of(tree[2]), sympy_of(tree[3]))
    if kind == "not":
        return sp.Not(sympy_of(tree[1]))
    return (sp.And if tree[1] == "and" else sp.Or)(*(sympy_of(p) for p in tree[2]))


def sympy_derivative(expression: sp.Expr, name: str):
    """SymPy's derivative as a NumPy function of the names; sign, floor and ceil have the
    derivative 0 (SymPy's DiracDelta, or an unevaluated Derivative, away from their jumps)."""
    d = sp.diff(expression, SYMBOLS[name])
    d = d.replace(
        lambda e: isinstance(e, (sp.Derivative, sp.Subs, sp.DiracDelta)), lambda e: sp.S.Zero
    )
    return sp.lambdify([SYMBOLS[n] for n in NAMES], d, "numpy")


def _sympy_values(f, at: dict[str, np.ndarray], size: int) -> np.ndarray:
    with np.errstate(all="ignore"):
        out = np.broadcast_to(np.asarray(f(*(at[n] for n in NAMES)), dtype=complex), (size,))
    return np.where(np.abs(out.imag) > 0, np.nan, out.real)  # (complex where the language has NaN)


# (text, the name to differentiate by, the same expression built in SymPy), at AT: every
# rule of `_CHAIN`, the piecewise constant functions, the choices, and the folding of
# signs in sums and differences.
X, Y, K = (SYMBOLS[n] for n in NAMES)
DERIVATIVE_CASES = [
    *(
        (f"{f}(0.5 * x + 0.1 * y)", "x", _SYMPY_FUNCTIONS[f](X / 2 + Y / 10))
        for f in UNARY_FUNCTIONS
    ),
    ("x * y + x / y - y / x", "x", X * Y + X / Y - Y / X),
    ("x * y + x / y - y / x", "y", X * Y + X / Y - Y / X),
    ("x / 4 + 3 / y - x / -2", "x", X / 4 + 3 / Y + X / 2),  # (numbers folded: 1 / 4 + 1 / 2)
    ("x ** 3 + pow(x, y) + x ** x", "x", X**3 + X**Y + X**X),
    ("x ** 3 + pow(x, y) + k ** x", "y", X**3 + X**Y + K**X),
    ("pow(2, x) + x ** -1.5 + e ** x + pi", "x", 2**X + X ** sp.Rational(-3, 2) + sp.E**X + sp.pi),
    (
        "min(x, y) + max(x, y) * x",
        "x",
        _SYMPY_FUNCTIONS["min"](X, Y) + _SYMPY_FUNCTIONS["max"](X, Y) * X,
    ),
    (
        "min(x, y) + max(x, y) * x",
        "y",
        _SYMPY_FUNCTIONS["min"](X, Y) + _SYMPY_FUNCTIONS["max"](X, Y) * X,
    ),
    (
        "where(y > 0, x ** 2, -x) + piecewise(k > 0, sin(x), x)",
        "x",
        _piecewise(Y > 0, X**2, -X) + _piecewise(K > 0, sp.sin(X), X),
    ),
    ("x ** 2 if y > 0 and k > 0 else -x", "x", _piecewise(sp.And(Y > 0, K > 0), X**2, -X)),
    ("x ** 2 if y > 0 or k > 0 else -x", "x", _piecewise(sp.Or(Y > 0, K > 0), X**2, -X)),
    ("x ** 2 if not y > 0 else -x", "x", _piecewise(sp.Not(Y > 0), X**2, -X)),
    # sums and differences with negated terms, folded by the derivative's simplifier:
    ("x ** 2 + -log(x)", "x", X**2 - sp.log(X)),  # 2 x + -1 / x, written 2 * x - 1 / x
    ("x ** 2 - -log(x)", "x", X**2 + sp.log(X)),  # 2 x - -1 / x, written 2 * x + 1 / x
    ("x ** 2 + -(3 * log(x))", "x", X**2 - 3 * sp.log(X)),
    ("y * x - -(2 * x) + -x * k - -(x / y)", "x", Y * X + 2 * X - X * K + X / Y),
    ("-(x * y) + -(-sin(x))", "x", -X * Y + sp.sin(X)),
    ("k * x + -k / x + 1 / -x", "x", K * X - K / X - 1 / X),
    ("x / -y + -x ** 2 / 3", "x", -X / Y - X**2 / 3),
    ("-log(x) - log(x) * -2 + -2 / x", "x", sp.log(X) - 2 / X),
]


@pytest.mark.parametrize(
    "text, name, expression", DERIVATIVE_CASES, ids=[f"d/d{n} {t}" for t, n, _ in DERIVATIVE_CASES]
)
def test_each_derivative_rule_agrees_with_sympy(text, name, expression):
    # The derivative's value, and the value of its text read back, against SymPy's
    # derivative of the same expression built with SymPy.
    d = parse(text, NAMES).derivative(name)
    want = _sympy_values(sympy_derivative(expression, name), AT, 3)
    assert np.isfinite(want).all()
    for got in (d(AT), parse(d.text, NAMES)(AT)):
        assert _close(got, want, rtol=1e-12, atol=1e-14).all(), (text, d.text, got, want)


def _names_in(tree) -> list[str]:
    if tree[0] == "name":
        return [tree[1]]
    return sorted({n for p in _subtrees(tree) for n in _names_in(p)})


@settings(max_examples=100, deadline=None)
@given(
    tree=numbers(depth=3, truth=False).filter(
        lambda tree: tree[0] not in ("name", "number", "constant")
    ),
    at=points(),
    data=st.data(),
)
def test_derivatives_of_random_expressions_agree_with_sympy(tree, at, data):
    name = data.draw(
        st.sampled_from(_names_in(tree) or ["x"]), label="name"
    )  # (a name the tree reads)
    # The derivative's value (and its text's, read back) against SymPy's diff of the same
    # tree, at the points where both are finite and so is SymPy's value of the function
    # itself: SymPy simplifies as it builds (sqrt(x) ** 2 is x, exp(log(x)) is x, log(x - x)
    # is a constant infinity of derivative 0), which defines values where the language's
    # NaN stays. A tree SymPy cannot build (min of a complex constant, log(-0.5)) or builds
    # as infinite or undefined (tan(arcsin(cos(pi)))) is not a case.
    d = parse(text_of(tree), NAMES).derivative(name)
    try:
        expression = sympy_of(tree)
    except TypeError:
        reject()
    if expression.has(sp.zoo, sp.oo, sp.nan):  # (infinite or undefined as SymPy builds it)
        reject()
    want = _sympy_values(sympy_derivative(expression, name), at, 6)
    value = _sympy_values(sp.lambdify([SYMBOLS[n] for n in NAMES], expression, "numpy"), at, 6)
    with np.errstate(all="ignore"):
        got = np.broadcast_to(np.asarray(d(at), dtype=float), (6,))
        again = np.broadcast_to(np.asarray(parse(d.text, NAMES)(at), dtype=float), (6,))
    both = np.isfinite(got) & np.isfinite(want) & np.isfinite(value)
    error = np.abs(np.where(both, got, 0.0) - np.where(both, want, 0.0))
    assert (error <= 1e-7 * (1 + np.abs(want)))[both].all(), (
        text_of(tree),
        name,
        d.text,
        at,
        got,
        want,
    )
    assert _close(again, got, rtol=1e-12, atol=1e-12).all(), (d.text, again, got)


def test_a_call_with_the_wrong_number_of_arguments_says_how_many_its_function_takes():
    # The count each function takes, from the language's own table, and the plural
    # that goes with it: one-argument functions say "1 argument", the others "N arguments".
    from physics._expressions import ExpressionError

    for name, (_, arity) in FUNCTIONS.items():
        args = ", ".join(["x"] * (arity + 1))
        with pytest.raises(ExpressionError) as raised:
            parse(f"{name}({args})", ["x"])
        noun = "argument" if arity == 1 else "arguments"
        assert str(raised.value).endswith(f"{name}() takes {arity} {noun}, got {arity + 1}"), str(
            raised.value
        )
