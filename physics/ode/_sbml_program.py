"""What an imported SBML model computes at run time.

`_Program` computes from (t, y, params) the value of every id in dependency order, the
state's rates and the observables, and the start of a run from its parameters;
`_Values` serves the species and reaction rates that a vectorised model computes as
arrays one entry at a time; `_toposort` gives the dependency orders both need. None of
it reads the libsbml document, which is gone when a model runs.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp
import numpy as np

from ._sbml_math import TIME, Compiled, SbmlError, _num
from ._sbml_vector import VectorRates


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
        # What the program is made from (the file's SHA-256 and how it was compiled):
        # two programs of the same source are equal, so their models are.
        self.source: tuple | None = None
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
            # (no compartment of these species is computed by a formula: `vector_rates`)
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

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if not isinstance(other, _Program):
            return NotImplemented
        return self.source is not None and self.source == other.source

    def __hash__(self) -> int:
        return hash(self.source) if self.source is not None else id(self)


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
