"""PDEs on bounded boxes written as text (a config's `[model.fields]` on a `[grid]` with
boundary conditions): finite differences of second or fourth order, integrated by the
method of lines.

Each side of each axis takes one condition per field:
- `dirichlet`: the field's value there, u = g;
- `neumann`: its outward normal derivative, du/dn = g;
- `robin`: du/dn + a u = g (a, the `coefficient`, and g, the `value`);
- `periodic` (both sides of an axis, for every field).
The values g and a are expressions of `t`, the parameters and the coordinates (`x`, `y`,
`z`), so a side may vary in time and along the side. Dirichlet nodes are not integrated:
everything that reads the field (derivatives, observables, the saved fields) sees g(t)
there. An operator applied to a field itself (`laplace(u)`, `dx(u)`, `grad(u)`) uses that
field's conditions: a Neumann or Robin datum enters the boundary node's stencil, as the
first derivative itself or in the second. An operator applied to any other expression
(`dx(u * u)`, `div(D * grad(u))`) takes one-sided differences of the same order near a
bounded side. `grad` makes a vector (one component per axis) that `div` turns back into a
scalar; `biharmonic` needs two conditions per side and is refused on a bounded axis.

The right-hand side may read `t` (a forcing). Its terms that are a constant coefficient
times derivatives of the field's own variable (`D * laplace(u)`) make the stiff part that
IMEX methods (`kencarp4`) treat implicitly; the rest is explicit.
"""

from __future__ import annotations

import ast
from typing import Any, ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, PyTree

from .._base import Parameter
from .._expressions import CONSTANTS, Expression, ExpressionError, parse
from .._text import Program, frozen
from . import _initial
from ._text import COORDINATES, MAX_TERMS, _calls, _expand, _names, _op_chain, parse_observables
from .base import Field, GridPdeModel, as_domain, as_points

KINDS = ("dirichlet", "neumann", "robin", "periodic")
OPERATORS = ("laplace", "biharmonic", "dx", "dy", "dz", "grad", "div")
REDUCTIONS = ("integral", "mean")


class Side(eqx.Module):
    """One side's condition for one field: its kind, its value g and (Robin) the
    coefficient a, both expressions of t, the parameters and the coordinates."""

    kind: str = eqx.field(static=True)
    value: Expression | None = eqx.field(static=True, default=None)
    coefficient: Expression | None = eqx.field(static=True, default=None)
    key: str = eqx.field(
        static=True, default=""
    )  # where the config gives it ("boundary_value[0].low")


class TextGridProgram(Program):
    """What a bounded text PDE computes: per field, the implicit (stiff linear) and
    explicit parts of its right-hand side, the Laplacian coefficients (for the explicit
    step limit) and the sides; the observables."""

    def __init__(self, implicit, explicit, laplace_coefficients, sides, observables, periodic):
        expressions = [e for e in (*implicit, *explicit) if e is not None] + [
            e for _, e in observables
        ]
        expressions += [
            e
            for axes in sides
            for pair in axes
            for side in pair
            for e in (side.value, side.coefficient)
            if e is not None
        ]
        self.coordinates = frozenset().union(*(e.names for e in expressions)) & set(COORDINATES)
        self.implicit = implicit  # per field: Expression or None
        self.explicit = explicit  # per field: Expression or None
        self.laplace_coefficients = laplace_coefficients  # per field: [Expression]
        self.sides = sides  # per field: per axis (low Side, high Side)
        self.observables = observables  # [(name, Expression)]
        self.periodic = periodic  # per axis

    def _parts(self) -> tuple:
        return frozen(
            (
                self.implicit,
                self.explicit,
                self.laplace_coefficients,
                self.sides,
                self.observables,
                self.periodic,
            )
        )


def _is_scalar_spec(value: Any) -> bool:
    return isinstance(value, (int, float, str, dict)) and not isinstance(value, bool)


def _per_side(key: str, value: Any, ndim: int, scalar) -> list[tuple[Any, Any]]:
    """(low, high) per axis from one spec for every side, or per axis a spec or a
    [low, high] pair (in one dimension, [low, high] alone also reads as the pair)."""
    if scalar(value):
        return [(value, value)] * ndim
    if isinstance(value, list):
        if ndim == 1 and len(value) == 2 and all(scalar(v) for v in value):
            return [(value[0], value[1])]
        if len(value) == ndim:
            out = []
            for i, v in enumerate(value):
                if scalar(v):
                    out.append((v, v))
                elif isinstance(v, list) and len(v) == 2 and all(scalar(s) for s in v):
                    out.append((v[0], v[1]))
                else:
                    raise ValueError(
                        f"{key}[{i}]: expected one entry for both sides or a [low, high] pair, got "
                        f"{v!r}"
                    )
            return out
    raise ValueError(
        f"{key}: expected one entry for every side, or one per axis ({ndim}) as an entry or a "
        f"[low, high] pair, got {value!r}"
    )


def _per_field(key: str, value: Any, fields: tuple[str, ...]) -> dict[str, Any]:
    """The spec of each field: a table keyed by field names, or one spec for all."""
    if (
        isinstance(value, dict)
        and value
        and set(value) <= set(fields)
        and not set(value) <= {"value", "coefficient"}
    ):
        missing = [f for f in fields if f not in value]
        if missing:
            raise ValueError(
                f"{key}: gives fields {', '.join(value)} but not {', '.join(missing)} (give every "
                "field, or one entry for all)"
            )
        return {f: value[f] for f in fields}
    return {f: value for f in fields}


def _side_expression(key: str, value: Any, symbols: set[str]) -> Expression:
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(
            f"{key}: expected a number or an expression of t, the parameters and the coordinates, "
            f"got {value!r}"
        )
    if not isinstance(value, str) and not np.isfinite(value):
        raise ValueError(f"{key}: expected a finite number, got {value!r}")
    text = value if isinstance(value, str) else repr(float(value))
    try:
        return parse(text, symbols)
    except ExpressionError as e:
        raise ValueError(f"{key}: {e}") from None


def boundary_program(
    fields: tuple[str, ...],
    boundary: Any,
    boundary_value: Any,
    ndim: int,
    parameters: tuple[str, ...],
):
    """Per field, per axis, the (low, high) `Side`s, and per axis whether it is periodic.

    Raises:
        ValueError: naming `boundary` or `boundary_value` (and the field and axis).
    """
    symbols = set(parameters) | {"t"} | set(COORDINATES[:ndim])
    kinds = _per_field("boundary", boundary, fields)
    values = _per_field("boundary_value", 0.0 if boundary_value is None else boundary_value, fields)
    out, periodic = [], None
    for name in fields:
        where = "boundary" if not isinstance(boundary, dict) else f"boundary.{name}"
        per_axis = _per_side(where, kinds[name], ndim, lambda v: isinstance(v, str))
        vwhere = (
            "boundary_value"
            if not isinstance(boundary_value, dict)
            or set(boundary_value) <= {"value", "coefficient"}
            else f"boundary_value.{name}"
        )
        per_axis_values = _per_side(vwhere, values[name], ndim, _is_scalar_spec)
        axes = []
        for i, ((lo, hi), (vlo, vhi)) in enumerate(zip(per_axis, per_axis_values, strict=False)):
            sides = []
            for side, kind, value in (("low", lo, vlo), ("high", hi, vhi)):
                if kind not in KINDS:
                    raise ValueError(
                        f"{where}[{i}]: {side} side {kind!r} is no boundary kind (kinds: "
                        f"{', '.join(KINDS)}).{_initial.did_you_mean(kind, KINDS)}"
                    )
                vkey = f"{vwhere}[{i}].{side}"
                if kind == "periodic":
                    sides.append(Side("periodic"))
                elif kind == "robin":
                    if not isinstance(value, dict) or set(value) != {"coefficient", "value"}:
                        raise ValueError(
                            f"{vkey}: a robin side (du/dn + coefficient * u = value) needs a table "
                            f"{{ coefficient = ..., value = ... }}, got {value!r}"
                        )
                    sides.append(
                        Side(
                            "robin",
                            _side_expression(f"{vkey}.value", value["value"], symbols),
                            _side_expression(f"{vkey}.coefficient", value["coefficient"], symbols),
                            vkey,
                        )
                    )
                else:
                    if isinstance(value, dict):
                        raise ValueError(
                            f"{vkey}: a table is for robin sides; a {kind} side takes a number or "
                            "an expression"
                        )
                    sides.append(Side(kind, _side_expression(vkey, value, symbols), key=vkey))
            if (sides[0].kind == "periodic") != (sides[1].kind == "periodic"):
                raise ValueError(f"{where}[{i}]: periodic must be on both sides of an axis")
            axes.append(tuple(sides))
        flags = tuple(s[0].kind == "periodic" for s in axes)
        if periodic is not None and flags != periodic:
            raise ValueError(f"{where}: every field must be periodic along the same axes")
        periodic = flags
        out.append(tuple(axes))
    return tuple(out), periodic


def partition(field: str, text: str, fields: tuple[str, ...], parameters: tuple[str, ...]):
    """(implicit, explicit, Laplacian coefficients) of one field's right-hand side: the
    terms that are a constant coefficient times derivatives of the field itself, the
    rest, and the coefficients of its `laplace` (or `div(grad(.))`) terms."""
    symbols = set(fields) | set(parameters) | set(COORDINATES) | {"t"}
    parse(text, symbols, OPERATORS)  # every check of the language, with columns
    tree = ast.parse(text.strip(), mode="eval").body
    constant = lambda n: (
        _names(n) <= set(parameters) | set(CONSTANTS) and not (_calls(n) & set(OPERATORS))
    )  # noqa: E731
    implicit, explicit, laplace = [], [], []
    for term in _expand(tree, MAX_TERMS):
        if all(constant(d) for d in term.divisors):
            varying = [f for f in term.factors if not constant(f)]
            if len(varying) == 1:
                ops, inner = _op_chain(varying[0], OPERATORS)
                if ops and isinstance(inner, ast.Name) and inner.id == field:
                    implicit.append(term.node())
                    if ops in (("laplace",), ("div", "grad")):
                        laplace.append(
                            parse(ast.unparse(term.node(without=varying[0])), parameters)
                        )
                    continue
        explicit.append(term.node())

    def join(nodes):
        if not nodes:
            return None
        total = nodes[0]
        for node in nodes[1:]:
            total = ast.BinOp(total, ast.Add(), node)
        return parse(ast.unparse(total), symbols, OPERATORS)

    return join(implicit), join(explicit), laplace


class TextGridModel(GridPdeModel):
    """A PDE on a bounded box built by `pde_model` from text (see the module): a value,
    whose declarations and program are static fields (equal texts give equal models)."""

    name: str = eqx.field(static=True, default="text_pde")
    description: str = eqx.field(static=True, default="a PDE written as text")
    parameters: tuple[Parameter, ...] = eqx.field(static=True, default=())
    field_names: tuple[str, ...] = eqx.field(static=True, default=("u",))
    extra_observable_names: tuple[str, ...] = eqx.field(static=True, default=())
    points: tuple[int, ...] = eqx.field(static=True, default=(65,), converter=as_points)
    domain: tuple[tuple[float, float], ...] | None = eqx.field(
        static=True, default=None, converter=as_domain
    )
    program: Any = eqx.field(static=True, default=None)
    boundary: Any = eqx.field(static=True, default="neumann")  # (the program holds the sides)
    boundary_value: Any = eqx.field(static=True, default=0.0)

    dims: ClassVar[tuple[int, ...]] = (1, 2, 3)
    initial_kind: ClassVar[str] = "sine"

    @property
    def boundary_kinds(self) -> tuple[tuple[str, str], ...]:
        # The grid's own kinds: periodic or not (each field's conditions are the program's).
        return tuple(
            ("periodic", "periodic") if p else ("neumann", "neumann") for p in self.program.periodic
        )

    @property
    def boundary_values(self) -> tuple[tuple[float, float], ...]:
        return ((0.0, 0.0),) * self.ndim

    def diffusivities(self, params: PyTree) -> Float[Array, " C"]:
        """Per field, the sum of |coefficient| of its Laplacian terms (for the step limit
        of explicit methods)."""
        out = [
            sum((jnp.abs(jnp.asarray(c(params), float)) for c in coefficients), jnp.asarray(0.0))
            for coefficients in self.program.laplace_coefficients
        ]
        return jnp.stack(out)

    def reaction(self, u: Field, params: PyTree) -> Field:
        raise TypeError(
            "a PDE written as text gives its whole right-hand side through method_of_lines"
        )

    def side_problem(
        self, params: PyTree, grid: Any, times: Any, dtype: Any
    ) -> tuple[str, str] | None:
        """The first boundary datum (a side's value, or a Robin side's coefficient) that
        is not a finite number of `dtype` at one of `times` and one node of its side:
        (its key in the config, what it gives and where), or None when every one is.
        (A solver meets such a datum as a step it can never take.)"""
        nodes = [np.asarray(c, dtype=float) for c in grid.coordinates()]
        tt = np.asarray(times, dtype=float).reshape((-1,) + (1,) * self.ndim)
        for axes in self.program.sides:
            for axis, sides in enumerate(axes):
                for index, side in zip((0, -1), sides, strict=False):
                    # (the side alone: its coordinate at the wall, the others along it)
                    mesh = {}
                    for i, c in enumerate(nodes):
                        c = c[[index]] if i == axis else c
                        mesh[COORDINATES[i]] = c.reshape(
                            [1] * (i + 1) + [c.size] + [1] * (self.ndim - i - 1)
                        )
                    values = {
                        **{k: np.asarray(v, dtype=float) for k, v in params.items()},
                        "t": tt,
                        **mesh,
                    }
                    data = [("value", side.value), ("coefficient", side.coefficient)]
                    for part, expression in data:
                        if expression is None:
                            continue
                        with np.errstate(all="ignore"):
                            shape = (
                                tt.shape[0],
                                *(1 if i == axis else len(c) for i, c in enumerate(nodes)),
                            )
                            out = np.broadcast_to(
                                np.asarray(
                                    jnp.asarray(expression(values), dtype=float).astype(dtype)
                                ),
                                shape,
                            )
                        bad = np.argwhere(~np.isfinite(out))
                        if bad.size:
                            at = bad[0]
                            where = ", ".join(
                                f"{COORDINATES[i]} = "
                                f"{nodes[i][index] if i == axis else nodes[i][at[i + 1]]:.6g}"
                                for i in range(self.ndim)
                            )
                            key = f"{side.key}.{part}" if side.kind == "robin" else side.key
                            return key, (
                                f"{expression.text!r} is {out[tuple(at)]} at t = "
                                f"{float(tt.flat[at[0]]):.6g}, {where}; "
                                f"expected a finite number ({np.dtype(dtype).name}) at every save "
                                "time and node of the side"
                            )
        return None

    # ------------------------------------------------------------------ the discretisation

    def _mesh(self, grid: Any) -> dict[str, Any]:
        """The coordinates the expressions read, each broadcast over the grid (as
        constants of the compiled program: only those that are used)."""
        out = {}
        for i, c in enumerate(grid.coordinates()):
            name = COORDINATES[i]
            if name in self.program.coordinates:
                shape = [1] * grid.ndim
                shape[i] = c.shape[0]
                out[name] = jnp.broadcast_to(jnp.asarray(c).reshape(shape), tuple(grid.points))
        return out

    def _sides(self, t, u: Field, params: PyTree, grid: Any):
        """The field with its Dirichlet values set at time t, and per field and axis the
        (low, high) outward-derivative data (None where the side has none)."""
        base = dict(params)
        base["t"] = t
        base.update(self._mesh(grid))
        shape = tuple(grid.points)

        def full(expression: Expression) -> Array:
            return jnp.broadcast_to(jnp.asarray(expression(base), u.dtype), shape)

        channels, fluxes = [], []
        for c, axes in enumerate(self.program.sides):
            uc = u[c]
            for axis, sides in enumerate(axes):
                for index, side in zip((0, -1), sides, strict=False):
                    if side.kind == "dirichlet":
                        uc = _set_side(uc, axis, index, full(side.value))
            per_axis = []
            for axis, sides in enumerate(axes):
                data = []
                for index, side in zip((0, -1), sides, strict=False):
                    if side.kind == "neumann":
                        data.append(jnp.take(full(side.value), index, axis=axis))
                    elif side.kind == "robin":
                        data.append(
                            jnp.take(
                                full(side.value) - full(side.coefficient) * uc, index, axis=axis
                            )
                        )
                    else:
                        data.append(None)
                per_axis.append(tuple(data))
            channels.append(uc)
            fluxes.append(tuple(per_axis))
        return jnp.stack(channels), tuple(fluxes)

    def _values(self, t, u: Field, fluxes, params: PyTree, grid: Any) -> dict[str, Any]:
        values = dict(params)
        values["t"] = t
        values.update(self._mesh(grid))
        shape = tuple(grid.points)
        ndim = grid.ndim

        def whole(f):
            return jnp.broadcast_to(f, jnp.broadcast_shapes(jnp.shape(f), shape))

        def d(f, axis, order, data=(None, None)):
            if axis >= ndim:
                raise ValueError(
                    f"a derivative along axis {axis + 1} on a grid of {ndim} "
                    f"dimension{'s' if ndim > 1 else ''}"
                )
            return grid.derivative(whole(f), axis, order, data)

        def div(vector):
            vector = jnp.asarray(vector)
            if vector.ndim != ndim + 1 or vector.shape[0] != ndim:
                raise ValueError(
                    "div() takes a vector (such as grad(u) or a coefficient times it), got an "
                    f"array of shape {vector.shape}"
                )
            return sum(d(vector[i], i, 1) for i in range(ndim))

        values["@laplace"] = lambda f: sum(d(f, i, 2) for i in range(ndim))
        values["@grad"] = lambda f: jnp.stack([d(f, i, 1) for i in range(ndim)])
        values["@div"] = div
        for axis, op in enumerate(("dx", "dy", "dz")):
            values[f"@{op}"] = lambda f, _a=axis: d(f, _a, 1)
        values["@integral"] = lambda f: grid.integral(whole(f))
        values["@mean"] = lambda f: (
            grid.integral(whole(f)) / float(np.prod([b - a for a, b in self.domain]))
        )
        for c, name in enumerate(self.field_names):
            values[name] = u[c]
            data = fluxes[c]
            values[f"@laplace:{name}"] = lambda _u=u[c], _f=data: sum(
                d(_u, i, 2, _f[i]) for i in range(ndim)
            )
            values[f"@grad:{name}"] = lambda _u=u[c], _f=data: jnp.stack(
                [d(_u, i, 1, _f[i]) for i in range(ndim)]
            )
            for axis, op in enumerate(("dx", "dy", "dz")):
                if axis < ndim:
                    values[f"@{op}:{name}"] = lambda _u=u[c], _f=data, _a=axis: d(_u, _a, 1, _f[_a])
        return values

    def fixed_mask(self) -> np.ndarray:
        """[C, *points]: True on each field's Dirichlet nodes."""
        out = np.zeros((len(self.field_names), *self.points), dtype=bool)
        for c, axes in enumerate(self.program.sides):
            for axis, sides in enumerate(axes):
                for index, side in zip((0, -1), sides, strict=False):
                    if side.kind == "dirichlet":
                        sl = [c] + [slice(None)] * self.ndim
                        sl[1 + axis] = index
                        out[tuple(sl)] = True
        return out

    def method_of_lines(self, params: PyTree, grid: Any, imex: bool, u0: Field, t0):
        """The semi-discrete system on `grid` (an `FdGrid`): (the initial field with its
        Dirichlet values at t0, the right-hand side f(t, u, args), or for IMEX methods
        the pair (explicit part, implicit part), and the observables at (t, u))."""
        free = jnp.asarray(~self.fixed_mask(), dtype=u0.dtype)
        shape = tuple(grid.points)

        def part(which):
            def f(t, u, args):
                u, fluxes = self._sides(t, u, params, grid)
                values = self._values(t, u, fluxes, params, grid)
                out = []
                for expression in which:
                    out.append(
                        jnp.zeros(shape, u.dtype)
                        if expression is None
                        else jnp.broadcast_to(jnp.asarray(expression(values), u.dtype), shape)
                    )
                return free * jnp.stack(out)

            return f

        program = self.program
        explicit, implicit = part(program.explicit), part(program.implicit)

        def full(t, u, args):
            return explicit(t, u, args) + implicit(t, u, args)

        def observe(t, u):
            u, fluxes = self._sides(t, u, params, grid)
            out = {name: u[i] for i, name in enumerate(self.field_names)}
            values = self._values(t, u, fluxes, params, grid)
            out.update({name: jnp.asarray(e(values), u.dtype) for name, e in program.observables})
            return out

        start, _ = self._sides(t0, u0, params, grid)
        return start, ((explicit, implicit) if imex else full), observe

    def extra_observables(self, u: Field, params: PyTree, grid: Any) -> dict[str, Array]:
        raise TypeError(
            "the observables of a PDE written as text on a bounded grid come from method_of_lines "
            "(they may read t)"
        )


def _set_side(u: Array, axis: int, index: int, value: Array) -> Array:
    sl = [slice(None)] * u.ndim
    sl[axis] = index
    return u.at[tuple(sl)].set(value[tuple(sl)])


def grid_model(
    label: str,
    fields: dict[str, str],
    parameters: dict[str, Any],
    observables: dict[str, str],
    declared,
    points,
    domain,
    boundary,
    boundary_value,
) -> TextGridModel:
    """The bounded-box model of `pde_model` (its arguments checked there)."""
    names = tuple(fields)
    pnames = tuple(parameters)
    points = as_points(points)
    ndim = len(points) if isinstance(points, tuple) else 1
    sides, periodic = boundary_program(names, boundary, boundary_value, ndim, pnames)
    implicit, explicit, laplace = [], [], []
    for name, text in fields.items():
        if not isinstance(text, str):
            raise ValueError(f"fields.{name}: expected the right-hand side as text, got {text!r}")
        try:
            i, e, lap = partition(name, text, names, pnames)
        except ExpressionError as err:
            raise ValueError(f"fields.{name}: {err}") from None
        implicit.append(i)
        explicit.append(e)
        laplace.append(lap)
    parsed = parse_observables(
        observables, set(names) | set(pnames) | set(COORDINATES) | {"t"}, OPERATORS + REDUCTIONS
    )
    for group, table in (("fields", fields), ("observables", observables)):
        for name, text in table.items():
            if "biharmonic" in _calls(ast.parse(text.strip(), mode="eval")) and not all(periodic):
                raise ValueError(
                    f"{group}.{name}: biharmonic() needs two conditions per side; on a bounded "
                    "axis it is not supported"
                )
    program = TextGridProgram(implicit, explicit, laplace, sides, parsed, periodic)
    model = TextGridModel(
        name=label,
        description=f"a PDE written in its config ({len(names)} "
        f"field{'s' if len(names) > 1 else ''}), finite differences with boundary conditions",
        parameters=declared,
        field_names=names,
        extra_observable_names=tuple(observables),
        points=points,
        domain=domain,
        program=program,
    )
    _check_shapes(model, fields, observables)
    return model


class _ShapeGrid:
    """A stand-in for the finite-difference grid with its shapes only (derivatives keep
    the shape, integrals reduce it), to check expressions before any run."""

    def __init__(self, model: TextGridModel):
        self.points, self.ndim, self._model = tuple(model.points), model.ndim, model

    def coordinates(self):
        # (traced inside `jax.eval_shape`: abstract, nothing the size of the grid is made)
        return tuple(jnp.zeros(n) for n in self.points)

    def derivative(self, u, axis, derivative, fluxes=(None, None)):
        return u

    def integral(self, u):
        return jnp.sum(u, axis=tuple(range(u.ndim - self.ndim, u.ndim)))


def _check_shapes(
    model: TextGridModel, fields: dict[str, str], observables: dict[str, str]
) -> None:
    """Every right-hand side is a field and every observable a field or a number (a `grad`
    left without `div` is refused here, before any run)."""
    grid = _ShapeGrid(model)
    params = model.default_params()
    field = jax.ShapeDtypeStruct(tuple(model.field_shape), jnp.result_type(float))
    program = model.program
    points = tuple(model.points)

    def shape_of(expression) -> tuple[int, ...]:
        # Shapes only: a grid of any size is checked without memory for its fields.
        def evaluate(u):
            v, fluxes = model._sides(0.0, u, params, grid)
            return jnp.asarray(expression(model._values(0.0, v, fluxes, params, grid)))

        return tuple(jax.eval_shape(evaluate, field).shape)

    checks = [
        ("fields", name, e)
        for name, pair in zip(
            fields, zip(program.explicit, program.implicit, strict=False), strict=False
        )
        for e in pair
        if e is not None
    ]
    checks += [("observables", name, e) for name, e in program.observables]
    for group, name, expression in checks:
        try:
            shape = shape_of(expression)
        except (ValueError, TypeError) as err:
            raise ValueError(f"{group}.{name}: {str(err).splitlines()[0]}") from None
        if shape not in ((), points):
            raise ValueError(
                f"{group}.{name}: evaluates to an array of shape {shape} (a vector such as grad(u) "
                "needs div() around it)"
            )
