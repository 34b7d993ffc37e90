"""PEtab's observable and noise formulas, parsed by PEtab's own parser (`sympify_petab`),
compiled from their sympy syntax tree to `jax.numpy` closures (never evaluated as text)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax.numpy as jnp

from ._petab_files import PetabError


def _compile(expr, where: str) -> tuple[Callable[[dict], Any], set[str]]:
    """A function of a dict of values computing the sympy expression `expr`, and the
    names it reads."""
    import sympy as sp

    names: set[str] = set()
    functions = _functions(sp)

    def build(e) -> Callable[[dict], Any]:
        if e is sp.true or e is sp.false:
            flag = bool(e)
            return lambda v: flag
        if e.is_Number or e in (sp.pi, sp.E):
            value = float(e)
            return lambda v: value
        if e.is_Symbol:
            name = e.name
            names.add(name)
            return lambda v: v[name]
        if isinstance(e, sp.Piecewise):
            pieces = [(build(pair.args[0]), build(pair.args[1])) for pair in e.args]

            def piecewise(v):
                out = jnp.nan
                for value, condition in reversed(pieces):
                    out = jnp.where(condition(v), value(v), out)
                return out

            return piecewise
        args = [build(a) for a in e.args]
        if isinstance(e, sp.Add):
            return lambda v: _fold(jnp.add, [a(v) for a in args])
        if isinstance(e, sp.Mul):
            return lambda v: _fold(jnp.multiply, [a(v) for a in args])
        if isinstance(e, sp.Pow):
            base, power = args
            return lambda v: jnp.power(base(v), power(v))
        for kind, fn in functions.items():
            if isinstance(e, kind):
                return lambda v, _f=fn: _f(*(a(v) for a in args))
        raise PetabError(f"{where}: uses {type(e).__name__}, which is not supported")

    return build(expr), names


def _functions(sp) -> dict:
    return {
        sp.exp: jnp.exp,
        sp.log: jnp.log,
        sp.sin: jnp.sin,
        sp.cos: jnp.cos,
        sp.tan: jnp.tan,
        sp.sinh: jnp.sinh,
        sp.cosh: jnp.cosh,
        sp.tanh: jnp.tanh,
        sp.asin: jnp.arcsin,
        sp.acos: jnp.arccos,
        sp.atan: jnp.arctan,
        sp.Abs: jnp.abs,
        sp.sign: jnp.sign,
        sp.floor: jnp.floor,
        sp.ceiling: jnp.ceil,
        sp.Min: lambda *a: _fold(jnp.minimum, list(a)),
        sp.Max: lambda *a: _fold(jnp.maximum, list(a)),
        sp.StrictLessThan: jnp.less,
        sp.LessThan: jnp.less_equal,
        sp.StrictGreaterThan: jnp.greater,
        sp.GreaterThan: jnp.greater_equal,
        sp.Equality: jnp.equal,
        sp.Unequality: jnp.not_equal,
        sp.And: lambda *a: _fold(jnp.logical_and, list(a)),
        sp.Or: lambda *a: _fold(jnp.logical_or, list(a)),
        sp.Not: jnp.logical_not,
    }


def _fold(fn, values):
    out = values[0]
    for x in values[1:]:
        out = fn(out, x)
    return out
