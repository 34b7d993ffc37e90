"""PDEs on a periodic box written as text (a config's `[model.fields]`; on a box with
walls, see `_text_grid`): each field with the right-hand side of its time derivative,
split automatically into the stiff linear part that ETDRK integrates exactly and the
nonlinear remainder.

The right-hand side is expanded into a sum of products (a product with a sum as a factor
is multiplied out, up to `MAX_TERMS` terms), after the derivatives are taken through the
sums and constant factors of their arguments (`laplace(D * u)` is `D * laplace(u)`: what
the equation means, however it is written). A term is linear when it is a constant
coefficient (numbers and parameters) times derivatives of the field's own variable:
`D * laplace(u)`, `-F * u`, `-nu * biharmonic(u)`, `c * dx(u)`. Such terms make the
Fourier symbol L of that field. Every other term is nonlinear and evaluated
pseudo-spectrally (the ETDRK solver dealiases its input and output by the 2/3 rule): a
constant times derivatives of an expression (`-0.5 * dx(u * u)`) as that expression's
transform times the symbol, the rest in physical space and transformed once.

Operators: `laplace`, `biharmonic` (laplace of laplace), `dx`, `dy`, `dz` (the
derivative along the first, second, third axis), `grad` (a vector, one component per
axis) and `div` (of such a vector; `div(grad(.))` is `laplace`). The coordinates `x`, `y`, `z` may
appear in nonlinear terms (a forcing). Observables may also use `integral(...)` and `mean(...)`
over the box.
"""

from __future__ import annotations

import ast
from typing import Any, ClassVar

import equinox as eqx
import jax.numpy as jnp
from jaxtyping import Array, Inexact, PyTree

from .._base import Parameter
from .._expressions import CONSTANTS, ExpressionError, parse
from .._text import Program, _identifier, _parameter, frozen
from .base import Field, GridPdeModel, SpectralPdeModel, as_domain, as_points

OPERATORS = ("laplace", "biharmonic", "dx", "dy", "dz", "grad", "div")
VECTOR_OPERATORS = ("grad", "div")
REDUCTIONS = ("integral", "mean")
COORDINATES = ("x", "y", "z")
MAX_TERMS = 256  # terms of one field's expanded right-hand side


def _symbol(op: str, grid: Any) -> Array:
    if op == "laplace":
        return grid.laplacian()
    if op == "biharmonic":
        lap = grid.laplacian()
        return lap * lap
    axis = "xyz".index(op[1])
    if axis >= grid.ndim:
        raise ValueError(f"{op}() on a grid of {grid.ndim} dimension{'s' if grid.ndim > 1 else ''}")
    return grid.derivative(axis)


def _chain(ops: tuple[str, ...], grid: Any) -> Array | float:
    out: Array | float = 1.0
    for op in ops:
        out = out * _symbol(op, grid)
    return out


class _Term:
    """A product of factors over divisors, with a sign."""

    def __init__(self, sign: float, factors: list[ast.expr], divisors: list[ast.expr]):
        self.sign, self.factors, self.divisors = sign, factors, divisors

    def node(self, without: ast.expr | None = None) -> ast.expr:
        """The term as one syntax tree (optionally leaving out one factor)."""
        factors = [f for f in self.factors if f is not without]
        out: ast.expr = ast.Constant(self.sign)
        for f in factors:
            out = ast.BinOp(out, ast.Mult(), f)
        for d in self.divisors:
            out = ast.BinOp(out, ast.Div(), d)
        return out


def _expand(node: ast.expr, limit: int) -> list[_Term]:
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
        left, right = _expand(node.left, limit), _expand(node.right, limit)
        if isinstance(node.op, ast.Sub):
            right = [_Term(-t.sign, t.factors, t.divisors) for t in right]
        return left + right
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        sign = -1.0 if isinstance(node.op, ast.USub) else 1.0
        return [_Term(sign * t.sign, t.factors, t.divisors) for t in _expand(node.operand, limit)]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        left, right = _expand(node.left, limit), _expand(node.right, limit)
        if len(left) * len(right) > limit:
            return [_Term(1.0, [node], [])]
        return [
            _Term(a.sign * b.sign, a.factors + b.factors, a.divisors + b.divisors)
            for a in left
            for b in right
        ]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div):
        return [
            _Term(t.sign, t.factors, t.divisors + [node.right]) for t in _expand(node.left, limit)
        ]
    return [_Term(1.0, [node], [])]


def _distribute(node: ast.expr, constant) -> ast.expr:
    """`node` with every derivative operator taken through the sums and the constant
    factors and divisors of its argument (the operators are linear with constant
    coefficients): laplace(D * u) is D * laplace(u), div(c * grad(u) + v) is
    c * div(grad(u)) + div(v), so that a linear term reaches the symbol however it is
    written. `constant(node)`: whether a subtree is a constant coefficient."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in OPERATORS
        and len(node.args) == 1
    ):
        terms = _expand(_distribute(node.args[0], constant), MAX_TERMS)
        out: ast.expr | None = None
        for term in terms:
            coefficients = [f for f in term.factors if constant(f)]
            varying = [f for f in term.factors if not constant(f)]
            if not varying or not all(constant(d) for d in term.divisors):
                inner = term.node()
                piece: ast.expr = ast.Call(ast.Name(node.func.id, ast.Load()), [inner], [])
            else:
                product = varying[0]
                for f in varying[1:]:
                    product = ast.BinOp(product, ast.Mult(), f)
                piece = _Term(
                    term.sign,
                    [*coefficients, ast.Call(ast.Name(node.func.id, ast.Load()), [product], [])],
                    term.divisors,
                ).node()
            out = piece if out is None else ast.BinOp(out, ast.Add(), piece)
        return out if out is not None else node
    for name, value in ast.iter_fields(node):
        if isinstance(value, ast.expr):
            setattr(node, name, _distribute(value, constant))
        elif isinstance(value, list):
            setattr(
                node,
                name,
                [_distribute(v, constant) if isinstance(v, ast.expr) else v for v in value],
            )
    return node


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _calls(node: ast.AST) -> set[str]:
    return {
        n.func.id
        for n in ast.walk(node)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
    }


def _op_chain(node: ast.expr, operators: tuple[str, ...] = ()) -> tuple[tuple[str, ...], ast.expr]:
    """The derivative operators applied at the top of `node`, and what they apply to."""
    operators = operators or OPERATORS
    ops: list[str] = []
    while (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in operators
        and len(node.args) == 1
    ):
        ops.append(node.func.id)
        node = node.args[0]
    return tuple(ops), node


def _vector(v: Any, grid: Any) -> Array:
    """`v` if it is a vector field (one component per axis), else a ValueError."""
    v = jnp.asarray(v)
    if v.ndim != grid.ndim + 1 or v.shape[0] != grid.ndim:
        raise ValueError(
            "div() takes a vector (such as grad(u) or a coefficient times it), got an array of "
            f"shape {v.shape}"
        )
    return v


def parse_observables(
    observables: dict[str, str], symbols: set[str], operators: tuple[str, ...]
) -> list[tuple[str, Any]]:
    """[(name, Expression)] of a PDE's observables.

    Raises:
        ValueError: naming `observables.NAME` and the column.
    """
    parsed = []
    for name, text in observables.items():
        try:
            parsed.append((name, parse(text, symbols, operators)))
        except ExpressionError as e:
            raise ValueError(f"observables.{name}: {e}") from None
    return parsed


def _times_symbol(symbol, spectrum):
    """A spectrum multiplied by an operator's symbol, the symbol cast to the spectrum's
    complex type (a real symbol times a complex spectrum is refused under strict dtype
    promotion)."""
    return jnp.asarray(symbol).astype(spectrum.dtype) * spectrum


def _scalar_chain(ops: tuple[str, ...]) -> tuple[str, ...] | None:
    """`ops` with each div(grad(.)) made a laplace, or None if grad or div remain."""
    out: list[str] = []
    i = 0
    while i < len(ops):
        if ops[i : i + 2] == ("div", "grad"):
            out.append("laplace")
            i += 2
            continue
        if ops[i] in VECTOR_OPERATORS:
            return None
        out.append(ops[i])
        i += 1
    return tuple(out)


class TextSpectralProgram(Program):
    """What a text PDE computes: per field, its linear terms (coefficient, operators),
    its spectral terms (coefficient, operators, expression) and its physical-space rest."""

    def __init__(self, linear, spectral, physical, observables):
        self.linear = linear  # per field: [(coefficient Expression, ops)]
        self.spectral = spectral  # per field: [(coefficient Expression, ops, Expression)]
        self.physical = physical  # per field: Expression or None
        self.observables = observables  # [(name, Expression)]

    def _parts(self) -> tuple:
        return frozen((self.linear, self.spectral, self.physical, self.observables))


def split(field: str, text: str, fields: tuple[str, ...], parameters: tuple[str, ...]):
    """The linear, spectral and physical parts of one field's right-hand side.

    Raises:
        ExpressionError: as `parse`, with the column.
    """
    symbols = set(fields) | set(parameters) | set(COORDINATES)
    parse(text, symbols, OPERATORS)  # every check of the language, with columns
    tree = ast.parse(text.strip(), mode="eval").body
    if "t" in _names(tree):
        raise ExpressionError(
            "t is not available in a PDE's right-hand side (its terms do not depend on time)"
        )
    constant = lambda n: (
        _names(n) <= set(parameters) | set(CONSTANTS) and not (_calls(n) & set(OPERATORS))
    )  # noqa: E731
    tree = _distribute(tree, constant)
    linear, spectral, physical = [], [], []
    for term in _expand(tree, MAX_TERMS):
        if not all(constant(d) for d in term.divisors):
            physical.append(term.node())
            continue
        varying = [f for f in term.factors if not constant(f)]
        if len(varying) == 1:
            ops, inner = _op_chain(varying[0])
            ops = _scalar_chain(ops)
            if ops is None:  # (a vector operator left over: evaluated in physical space)
                physical.append(term.node())
                continue
            coefficient = ast.unparse(term.node(without=varying[0]))
            if isinstance(inner, ast.Name) and inner.id == field:
                linear.append((parse(coefficient, parameters), ops))
                continue
            if ops:
                spectral.append(
                    (
                        parse(coefficient, parameters),
                        ops,
                        parse(ast.unparse(inner), symbols, OPERATORS),
                    )
                )
                continue
        physical.append(term.node())
    rest = None
    if physical:
        total = physical[0]
        for node in physical[1:]:
            total = ast.BinOp(total, ast.Add(), node)
        rest = parse(ast.unparse(total), symbols, OPERATORS)
    return linear, spectral, rest


class TextSpectralModel(SpectralPdeModel):
    """A periodic PDE built by `pde_model` from text (see the module): a value, whose
    declarations and program are static fields (equal texts give equal models)."""

    name: str = eqx.field(static=True, default="text_pde")
    description: str = eqx.field(static=True, default="a PDE written as text")
    parameters: tuple[Parameter, ...] = eqx.field(static=True, default=())
    field_names: tuple[str, ...] = eqx.field(static=True, default=("u",))
    extra_observable_names: tuple[str, ...] = eqx.field(static=True, default=())
    points: tuple[int, ...] = eqx.field(static=True, default=(64,), converter=as_points)
    domain: tuple[tuple[float, float], ...] | None = eqx.field(
        static=True, default=None, converter=as_domain
    )
    program: Any = eqx.field(static=True, default=None)

    dims: ClassVar[tuple[int, ...]] = (1, 2, 3)
    initial_kind: ClassVar[str] = "sine"

    def _values(self, fields: Any, params: PyTree, grid: Any) -> dict[str, Any]:
        values = dict(params)
        values.update({name: fields[i] for i, name in enumerate(self.field_names)})
        mesh = grid.mesh()
        values.update({COORDINATES[i]: mesh[i] for i in range(grid.ndim)})
        for op in OPERATORS:
            if op not in VECTOR_OPERATORS:
                values[f"@{op}"] = lambda f, _op=op: grid.irfft(
                    _times_symbol(_chain((_op,), grid), grid.rfft(jnp.broadcast_to(f, grid.points)))
                )
        derivative = lambda f, axis: grid.irfft(
            _times_symbol(grid.derivative(axis), grid.rfft(jnp.broadcast_to(f, grid.points)))
        )  # noqa: E731
        values["@grad"] = lambda f: jnp.stack([derivative(f, i) for i in range(grid.ndim)])
        values["@div"] = lambda v: sum(derivative(_vector(v, grid)[i], i) for i in range(grid.ndim))
        values["@integral"] = lambda f: grid.integral(jnp.broadcast_to(f, grid.points))
        values["@mean"] = lambda f: grid.mean(jnp.broadcast_to(f, grid.points))
        return values

    def linear(self, params: PyTree, grid: Any) -> Inexact[Array, "..."]:
        shape = grid.spectral_shape
        real = jnp.dtype(grid.dtype)
        symbols = [
            [(coefficient(params), jnp.asarray(_chain(ops, grid))) for coefficient, ops in terms]
            for terms in self.program.linear
        ]
        # A first derivative makes the symbol complex (and every channel with it).
        complex_ = any(jnp.iscomplexobj(symbol) for terms in symbols for _, symbol in terms)
        # (the complex type of the grid's precision, named: promoting real with complex64
        # is refused under strict dtype promotion)
        dtype = (
            jnp.dtype(jnp.complex128 if real == jnp.float64 else jnp.complex64)
            if complex_
            else real
        )
        channels = []
        for terms in symbols:
            total = jnp.zeros(shape, dtype)
            for coefficient, symbol in terms:
                total = total + jnp.asarray(coefficient, dtype) * symbol.astype(dtype)
            channels.append(total)
        return jnp.stack(channels)

    def nonlinear(
        self, u_hat: Inexact[Array, "C ..."], params: PyTree, grid: Any
    ) -> Inexact[Array, "C ..."]:
        u = grid.irfft(u_hat)
        values = self._values(u, params, grid)
        out = []
        for c in range(len(self.field_names)):
            total = jnp.zeros_like(u_hat[c])
            rest = self.program.physical[c]
            if rest is not None:
                total = total + grid.rfft(jnp.broadcast_to(rest(values), grid.points))
            for coefficient, ops, inner in self.program.spectral[c]:
                factor = jnp.asarray(coefficient(params), total.dtype) * jnp.asarray(
                    _chain(ops, grid)
                ).astype(total.dtype)
                total = total + factor * grid.rfft(jnp.broadcast_to(inner(values), grid.points))
            out.append(total)
        return jnp.stack(out)

    def extra_observables(self, u: Field, params: PyTree, grid: Any) -> dict[str, Array]:
        values = self._values(u, params, grid)
        return {name: e(values) for name, e in self.program.observables}


def pde_model(
    label: str,
    fields: dict[str, str],
    parameters: dict[str, Any] | None = None,
    observables: dict[str, str] | None = None,
    points: Any = (64,),
    domain: Any = None,
    boundary: Any = None,
    boundary_value: Any = None,
) -> SpectralPdeModel | GridPdeModel:
    """A PDE model from text: `fields` maps each field to the right-hand side of its time
    derivative, `parameters` each parameter to a default (a number, or a table with value,
    unit, doc, positive, bounds), `observables` derived quantities.

    Without `boundary` (or with every side periodic) the box is periodic and the model a
    Fourier-spectral `SpectralPdeModel`; otherwise `boundary` gives each side's kind
    (`dirichlet`, `neumann`, `robin`, `periodic`) and `boundary_value` its value, and the
    model is a finite-difference `GridPdeModel` (see `physics.pde._text_grid`).

    Arguments:
        label: the model's name.
        fields: field name -> the right-hand side of its time derivative (an expression
            of the fields, their derivatives such as `laplace(u)`, the parameters, `t`
            and the coordinates); at least one field.
        parameters: parameter name -> its default (a number, or a table with `value`,
            `unit`, `doc`, `positive`, `bounds`); None for none.
        observables: observable name -> its expression; None for none.
        points: grid nodes per axis (an int for one axis); the number of axes is the
            dimension.
        domain: (low, high) per axis; None for (0, 2 pi) on every axis of a periodic
            box, (0, 1) of a bounded one.
        boundary: each side's kind: one kind for every side, or per axis a kind or a
            [low, high] pair, or a table of these by field; None for a periodic box.
        boundary_value: each side's value (Dirichlet value, Neumann outward derivative,
            or a Robin table of `coefficient` and `value`; numbers or expressions of `t`,
            the parameters and the coordinates), laid out as `boundary`; None for 0.

    Returns:
        A `TextSpectralModel` (a `SpectralPdeModel`) for a periodic box, else a
        `TextGridModel` (a `GridPdeModel` of finite differences).

    Example:
        >>> model = pde_model("heat", {"u": "D * laplace(u)"}, {"D": 0.1}, points=(64,))
        >>> bounded = pde_model("heat", {"u": "D * laplace(u)"}, {"D": 0.1}, points=(65,),
        ...                     boundary="dirichlet", boundary_value=["sin(t)", 0.0])

    Raises:
        ValueError: naming the entry (`fields.u`, `parameters.D`, ...) and, for an
            expression, the column; `boundary_value` given for a periodic box.
    """
    parameters = dict(parameters or {})
    observables = dict(observables or {})
    _check_names(fields, parameters, observables)
    declared = tuple(_parameter(name, spec) for name, spec in parameters.items())
    names = tuple(fields)
    ndim = len(as_points(points)) if isinstance(as_points(points), tuple) else 1
    _check_dimensions(fields, observables, ndim)
    if boundary is not None:
        from ._text_grid import boundary_program, grid_model

        _, periodic = boundary_program(names, boundary, boundary_value, ndim, tuple(parameters))
        if not all(periodic):
            return grid_model(
                label,
                fields,
                parameters,
                observables,
                declared,
                points,
                domain,
                boundary,
                boundary_value,
            )
        if boundary_value is not None:
            raise ValueError("boundary_value: a periodic box has no boundary values")
    linear, spectral, physical = _split_fields(fields, names, tuple(parameters))
    parsed = parse_observables(
        observables, set(names) | set(parameters) | set(COORDINATES), OPERATORS + REDUCTIONS
    )
    return TextSpectralModel(
        name=label,
        description=f"a PDE written in its config ({len(names)} "
        f"field{'s' if len(names) > 1 else ''}), Fourier spectral",
        parameters=declared,
        field_names=names,
        extra_observable_names=tuple(observables),
        points=points,
        domain=domain,
        program=TextSpectralProgram(linear, spectral, physical, parsed),
    )


def _check_names(fields: dict[str, str], parameters: dict[str, Any], observables: dict) -> None:
    """Refuses no field, a name that is no identifier or is an operator's or a
    coordinate's, and a name given to two of fields, parameters and observables."""
    if not fields:
        raise ValueError("fields: expected at least one field = its right-hand side")
    reserved = set(OPERATORS) | set(REDUCTIONS) | set(COORDINATES)
    for group, names in (
        ("fields", fields),
        ("parameters", parameters),
        ("observables", observables),
    ):
        for name in names:
            _identifier(group, name)
            if name in reserved:
                raise ValueError(f"{group}.{name}: is the name of an operator or a coordinate")
    for name in parameters:
        if name in fields:
            raise ValueError(f"parameters.{name}: is also a field")
    for name in observables:
        if name in fields or name in parameters:
            raise ValueError(
                f"observables.{name}: is also a {'field' if name in fields else 'parameter'}"
            )


def _check_dimensions(fields: dict[str, str], observables: dict[str, str], ndim: int) -> None:
    """Refuses a right-hand side or observable that uses a derivative or a coordinate along
    an axis the grid does not have (a text that does not parse is left to `split`)."""
    for group, table in (("fields", fields), ("observables", observables)):
        for name, text in table.items():
            try:
                tree = ast.parse(text.strip(), mode="eval") if isinstance(text, str) else None
            except SyntaxError:
                continue  # (reported with its column below)
            used = (_calls(tree) | _names(tree)) if tree is not None else set()
            for axis, (op, coordinate) in enumerate((("dx", "x"), ("dy", "y"), ("dz", "z"))):
                if axis >= ndim and (op in used or coordinate in used):
                    what = f"{op}()" if op in used else f"the coordinate {coordinate}"
                    raise ValueError(
                        f"{group}.{name}: uses {what}, but the grid has {ndim} "
                        f"dimension{'s' if ndim > 1 else ''}"
                    )


def _split_fields(
    fields: dict[str, str], names: tuple[str, ...], parameters: tuple[str, ...]
) -> tuple[list, list, list]:
    """The linear, spectral and physical parts (`split`) of each field's right-hand side,
    an expression error named by its field."""
    linear, spectral, physical = [], [], []
    for name, text in fields.items():
        if not isinstance(text, str):
            raise ValueError(f"fields.{name}: expected the right-hand side as text, got {text!r}")
        try:
            lin, spec, rest = split(name, text, names, parameters)
        except ExpressionError as e:
            raise ValueError(f"fields.{name}: {e}") from None
        linear.append(lin)
        spectral.append(spec)
        physical.append(rest)
    return linear, spectral, physical
