"""Finite differences on boxes with boundary conditions, integrated by the method of lines.

`FdGrid` discretises the Laplacian to second or fourth order on a uniform grid whose
bounded axes include both end nodes. Each side of an axis is Dirichlet (the node holds a
given value and never changes), Neumann (the outward normal derivative is given) or
periodic. Boundary rows use one-sided stencils of the same order, whose weights are
solved here from Taylor expansions (exact on polynomials of the needed degree), see
Fornberg, "Generation of finite difference formulas on arbitrarily spaced grids",
Math. Comp. 51 (1988) 699-706. `MethodOfLines` then integrates the resulting ODE system
with diffrax: explicit, implicit (stiff diffusion) or IMEX (implicit diffusion, explicit
reaction).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int, PyTree

from ._ode import (
    ADJOINTS,
    EXPLICIT_METHODS,
    IMEX_METHODS,
    IMPLICIT_METHODS,
    LINEAR_SOLVERS,
    OdeSolver,
    did_you_mean,
)
from ._types import Times

if TYPE_CHECKING:
    from ._halo import HaloGrid

BOUNDARY_KINDS = ("dirichlet", "neumann", "periodic")
ORDERS = (2, 4)


def stencil_weights(
    offsets, derivative: int = 2, flux_at: float | None = None
) -> tuple[np.ndarray, float]:
    """Weights w (and w_flux) with u^(derivative)(0) h^derivative ~ sum_j w_j u(o_j h)
    + w_flux h u'(flux_at h), exact for polynomials of degree < number of unknowns.

    Arguments:
        offsets: node offsets o_j in units of h.
        derivative: the derivative approximated.
        flux_at: where a known first derivative enters (None: nodes only).

    Returns:
        (w [len(offsets)], w_flux (0.0 when `flux_at` is None)).
    """
    offsets = np.asarray(offsets, dtype=float)
    m = len(offsets) + (flux_at is not None)
    a = np.zeros((m, m))
    for p in range(m):
        a[p, : len(offsets)] = offsets**p / math.factorial(p)
        if flux_at is not None and p >= 1:
            a[p, -1] = flux_at ** (p - 1) / math.factorial(p - 1)
    rhs = np.zeros(m)
    rhs[derivative] = 1.0
    w = np.linalg.solve(a, rhs)
    if flux_at is None:
        return w, 0.0
    return w[:-1], float(w[-1])


class _Row(eqx.Module):
    """One boundary row: node offsets, weights and the weight of the flux datum."""

    offsets: tuple[int, ...] = eqx.field(static=True)
    weights: tuple[float, ...] = eqx.field(static=True)
    flux_weight: float = eqx.field(static=True)


def _centered(order: int) -> tuple[tuple[int, ...], np.ndarray]:
    r = order // 2
    offsets = tuple(range(-r, r + 1))
    return offsets, stencil_weights(offsets)[0]


def _boundary_rows(kind: str, order: int) -> tuple[_Row | None, ...]:
    """Rows 0..r-1 counted inward from one side (None: a fixed Dirichlet node)."""
    rows: list[_Row | None] = []
    if order == 2:
        if kind == "dirichlet":
            return (None,)
        # Nodes 0..2 and the flux datum: second order at the boundary node itself (the
        # ghost-node closure (2 u_1 - 2 u_0 - 2 h u'_0) / h^2 is only first order there).
        offsets = (0, 1, 2)
        w, wf = stencil_weights(offsets, flux_at=0.0)
        return (_Row(offsets, tuple(float(v) for v in w), wf),)
    # Fourth order: node 0 (fixed, or Neumann with the flux datum on nodes 0..4) and
    # node 1 (one-sided on nodes 0..5).
    if kind == "dirichlet":
        rows.append(None)
    else:
        offsets = (0, 1, 2, 3, 4)
        w, wf = stencil_weights(offsets, flux_at=0.0)
        rows.append(_Row(offsets, tuple(float(v) for v in w), wf))
    offsets = (-1, 0, 1, 2, 3, 4)
    w, _ = stencil_weights(offsets)
    rows.append(_Row(offsets, tuple(float(v) for v in w), 0.0))
    return tuple(rows)


def _one_sided_rows(derivative: int, order: int, flux: bool) -> tuple[_Row, ...]:
    """Rows 0..order/2-1 counted inward from a side for a first or second derivative of
    accuracy `order`: on the nodes alone, or with the side's first-derivative datum at
    node 0 (there, a first derivative is the datum itself)."""
    rows = []
    for i in range(order // 2):
        if i == 0 and flux:
            if derivative == 1:
                rows.append(_Row((), (), 1.0))
                continue
            offsets = tuple(range(order + 1))
            w, wf = stencil_weights(offsets, derivative, flux_at=0.0)
            rows.append(_Row(offsets, tuple(float(x) for x in w), wf))
            continue
        # (order + derivative) nodes make the accuracy `order` at node i.
        offsets = tuple(range(-i, order + derivative - i))
        w, _ = stencil_weights(offsets, derivative)
        rows.append(_Row(offsets, tuple(float(x) for x in w), 0.0))
    return tuple(rows)


def _central_rows(
    v: Array, start: int, count: int, offsets: tuple[int, ...], weights: np.ndarray
) -> Array:
    """The centred stencil at rows start..start+count-1 of `v` (the stencil's axis
    first): sum_j w_j v[row + o_j], zero weights skipped, terms in the order of
    `offsets`."""
    return sum(
        float(w) * v[start + o : start + o + count]
        for o, w in zip(offsets, weights, strict=False)
        if w != 0.0
    )


class FdGrid(eqx.Module):
    """A uniform box grid with boundary conditions and finite-difference Laplacian.

    Nodes of a bounded axis i are low + j L / (n - 1), j = 0..n-1 (both ends); of a
    periodic axis low + j L / n. Fields have the grid's shape in their last `ndim` axes.

    Arguments:
        points: nodes per axis (>= 5 on a bounded axis of order 2, >= 7 of order 4).
        domain: (low, high) per axis.
        boundaries: (low kind, high kind) per axis: "dirichlet", "neumann", "periodic".
        values: (low, high) per axis: the Dirichlet value, or the Neumann outward normal
            derivative du/dn.
        order: 2 or 4, the order of accuracy of the Laplacian (boundary rows included).

    Raises:
        ValueError: unknown boundary kind, periodic on one side only, too few points,
            malformed domain.

    Example:
        >>> grid = FdGrid((101,), ((0.0, 1.0),), (("dirichlet", "dirichlet"),), ((0.0, 0.0),))
        >>> lap_u = grid.laplacian(u)
    """

    points: tuple[int, ...] = eqx.field(static=True)
    domain: tuple[tuple[float, float], ...] = eqx.field(static=True)
    boundaries: tuple[tuple[str, str], ...] = eqx.field(static=True)
    values: tuple[tuple[float, float], ...] = eqx.field(static=True)
    order: int = eqx.field(static=True, default=2)

    def __check_init__(self):
        n = len(self.points)
        if not 1 <= n <= 3:
            raise ValueError(f"grid points must list 1 to 3 axes, got {self.points!r}")
        if len(self.domain) != n or len(self.boundaries) != n or len(self.values) != n:
            raise ValueError("grid domain, boundaries and values need one entry per axis of points")
        if self.order not in ORDERS:
            raise ValueError(f"finite-difference order must be 2 or 4, got {self.order!r}")
        for i, ((a, b), (lo, hi), m) in enumerate(
            zip(self.domain, self.boundaries, self.points, strict=False)
        ):
            if not b > a:
                raise ValueError(f"grid domain[{i}] = [{a}, {b}]: expected low < high")
            for side, kind in (("low", lo), ("high", hi)):
                if kind not in BOUNDARY_KINDS:
                    raise ValueError(
                        f"boundary[{i}] {side} side = {kind!r}: unknown boundary kind "
                        f"(kinds: {', '.join(BOUNDARY_KINDS)}).{did_you_mean(kind, BOUNDARY_KINDS)}"
                    )
            if (lo == "periodic") != (hi == "periodic"):
                raise ValueError(
                    f"boundary[{i}] = [{lo!r}, {hi!r}]: periodic must be on both sides of an axis"
                )
            minimum = 7 if self.order == 4 else 5
            if m < minimum:
                raise ValueError(
                    f"grid points[{i}] = {m}: order {self.order} needs at least {minimum} nodes "
                    "per axis"
                )

    @property
    def ndim(self) -> int:
        return len(self.points)

    def periodic(self, axis: int) -> bool:
        return self.boundaries[axis][0] == "periodic"

    @property
    def spacing(self) -> tuple[float, ...]:
        return tuple(
            (b - a) / (n if self.periodic(i) else n - 1)
            for i, ((a, b), n) in enumerate(zip(self.domain, self.points, strict=False))
        )

    def coordinates(self) -> tuple[np.ndarray, ...]:
        """Node coordinates per axis (float64 numpy)."""
        return tuple(
            a + h * np.arange(n)
            for (a, _), h, n in zip(self.domain, self.spacing, self.points, strict=False)
        )

    def fixed_mask(self) -> np.ndarray:
        """True on Dirichlet nodes (they keep their boundary value), grid-shaped."""
        fixed = np.zeros(self.points, dtype=bool)
        for i, (lo, hi) in enumerate(self.boundaries):
            index = [slice(None)] * self.ndim
            if lo == "dirichlet":
                index[i] = 0
                fixed[tuple(index)] = True
            if hi == "dirichlet":
                index[i] = -1
                fixed[tuple(index)] = True
        return fixed

    def boundary_field(self) -> np.ndarray:
        """The Dirichlet values on Dirichlet nodes (0 elsewhere), grid-shaped. Where two
        Dirichlet sides meet at a corner, the later axis's value wins."""
        out = np.zeros(self.points)
        for i, ((lo, hi), (vlo, vhi)) in enumerate(zip(self.boundaries, self.values, strict=False)):
            index = [slice(None)] * self.ndim
            if lo == "dirichlet":
                index[i] = 0
                out[tuple(index)] = vlo
            if hi == "dirichlet":
                index[i] = -1
                out[tuple(index)] = vhi
        return out

    def apply_boundary(self, u: Float[Array, "..."]) -> Float[Array, "..."]:
        """`u` with its Dirichlet nodes set to their boundary values."""
        fixed = jnp.asarray(self.fixed_mask())
        return jnp.where(fixed, jnp.asarray(self.boundary_field(), dtype=u.dtype), u)

    # The ODE state of a method of lines on this grid is the field itself; a grid split
    # over devices (`HaloGrid`) lays it out otherwise, behind the same three methods.

    def constrain(self, tree: PyTree) -> PyTree:
        """`tree` as it is (a split grid keeps its fields split in slabs)."""
        return tree

    def ode_state(self, u: Float[Array, "..."]) -> Float[Array, "..."]:
        """The state a method of lines integrates: here the field itself."""
        return u

    def ode_fields(self, y: Float[Array, "..."]) -> Float[Array, "..."]:
        """The field of an `ode_state`: here the state itself."""
        return y

    def ode_rhs(self, field: Callable | tuple[Callable, Callable]):
        """A right-hand side of fields as one of `ode_state`s: here the same."""
        return field

    def second_derivative(self, u: Float[Array, "..."], axis: int) -> Float[Array, "..."]:
        """d^2 u / dx_axis^2 with this axis's boundary conditions (zero on Dirichlet nodes).

        Arguments:
            u: a field whose last `ndim` axes are the grid.
            axis: the grid axis, 0..ndim-1.
        """
        h = self.spacing[axis]
        array_axis = u.ndim - self.ndim + axis
        v = jnp.moveaxis(u, array_axis, 0)
        offsets, weights = _centered(self.order)
        if self.periodic(axis):
            out = sum(
                float(w) * jnp.roll(v, -o, axis=0) for o, w in zip(offsets, weights, strict=False)
            )
            return jnp.moveaxis(out / h**2, 0, array_axis)
        n = v.shape[0]
        r = self.order // 2
        interior = _central_rows(v, r, n - 2 * r, offsets, weights)
        low, high = self._second_sides(v, axis, 0, n - 1)
        out = jnp.concatenate([jnp.stack(low), interior, jnp.stack(high[::-1])], axis=0)
        return jnp.moveaxis(out / h**2, 0, array_axis)

    def _second_sides(
        self, v: Array, axis: int, low_node: int, high_node: int
    ) -> tuple[list[Array], list[Array]]:
        """The boundary rows of `second_derivative` along a bounded `axis` (before the
        division by h^2), for `v` with that axis first: (rows counted inward from
        `v[low_node]`, the low side's node, and from `v[high_node]`, the high side's)."""
        h = self.spacing[axis]
        lo_kind, hi_kind = self.boundaries[axis]
        lo_value, hi_value = self.values[axis]
        # Both sides are written in inward coordinates; the datum there is the inward
        # derivative, i.e. minus the outward normal derivative.
        low = [
            self._row(v, row, low_node + i, +1, -lo_value * h)
            for i, row in enumerate(_boundary_rows(lo_kind, self.order))
        ]
        high = [
            self._row(v, row, high_node - i, -1, -hi_value * h)
            for i, row in enumerate(_boundary_rows(hi_kind, self.order))
        ]
        return low, high

    @staticmethod
    def _row(
        v: Array, row: _Row | None, node: int, direction: int, flux_datum: float | Array
    ) -> Array:
        if row is None:
            return jnp.zeros_like(v[0])
        value = sum(
            w * v[node + direction * o] for o, w in zip(row.offsets, row.weights, strict=False)
        )
        if row.flux_weight != 0.0:
            value = value + row.flux_weight * flux_datum
        return value

    def laplacian(self, u: Float[Array, "..."]) -> Float[Array, "..."]:
        """The Laplacian of `u` (grid in the last axes) with the boundary conditions."""
        return sum(self.second_derivative(u, i) for i in range(self.ndim))

    def derivative(
        self,
        u: Float[Array, "..."],
        axis: int,
        derivative: int,
        fluxes: tuple[Array | float | None, Array | float | None] = (None, None),
    ) -> Float[Array, "..."]:
        """The first or second derivative of `u` along `axis`, of the grid's order, with
        boundary data given by value (traced values welcome): per side, the outward
        normal derivative of `u` there (a number, or an array over that side's nodes), or
        None for no datum.

        With a datum, the boundary node's first derivative is the datum itself and its
        second derivative uses it (as a Neumann side does); without one, the rows near
        the side take one-sided differences of the same order on the nodes alone (a
        Dirichlet side, whose node `u` already holds, or an expression with no boundary
        condition of its own). Periodic axes ignore `fluxes`.

        Arguments:
            u: a field whose last `ndim` axes are the grid.
            axis: the grid axis, 0..ndim-1.
            derivative: 1 or 2.
            fluxes: (low, high) outward normal derivatives, or None.
        """
        if derivative not in (1, 2):
            raise ValueError(f"derivative must be 1 or 2, got {derivative!r}")
        h = self.spacing[axis]
        array_axis = u.ndim - self.ndim + axis
        v = jnp.moveaxis(u, array_axis, 0)
        r = self.order // 2
        offsets = tuple(range(-r, r + 1))
        weights = stencil_weights(offsets, derivative=derivative)[0]
        if self.periodic(axis):
            out = sum(
                float(w) * jnp.roll(v, -o, axis=0)
                for o, w in zip(offsets, weights, strict=False)
                if w != 0.0
            )
            return jnp.moveaxis(out / h**derivative, 0, array_axis)
        n = v.shape[0]
        interior = _central_rows(v, r, n - 2 * r, offsets, weights)
        low, high = self._derivative_sides(v, axis, derivative, fluxes, 0, n - 1)
        out = jnp.concatenate([jnp.stack(low), interior, jnp.stack(high[::-1])], axis=0)
        return jnp.moveaxis(out / h**derivative, 0, array_axis)

    def _derivative_sides(
        self,
        v: Array,
        axis: int,
        derivative: int,
        fluxes: tuple[Array | float | None, Array | float | None],
        low_node: int,
        high_node: int,
    ) -> tuple[list[Array], list[Array]]:
        """The boundary rows of `derivative` along a bounded `axis` (before the division
        by h^derivative), for `v` with that axis first: (rows counted inward from
        `v[low_node]`, the low side's node, and from `v[high_node]`, the high side's)."""
        h = self.spacing[axis]
        sides = []
        for direction, node0, flux in ((+1, low_node, fluxes[0]), (-1, high_node, fluxes[1])):
            rows = []
            for i, row in enumerate(_one_sided_rows(derivative, self.order, flux is not None)):
                # In inward coordinates s (s = x on the low side, -x on the high one):
                # d/ds = direction d/dx, and the datum at the node is ds-derivative -flux.
                datum = 0.0 if flux is None else -jnp.asarray(flux) * h
                value = self._row(v, row, node0 + direction * i, direction, datum)
                value = jnp.broadcast_to(value, v.shape[1:])
                rows.append(value * direction if derivative == 1 else value)
            sides.append(rows)
        return sides[0], sides[1]

    def integral(self, u: Float[Array, "..."]) -> Float[Array, "..."]:
        """Integral over the box: trapezoidal on bounded axes, rectangles on periodic ones."""
        k = u.ndim - self.ndim  # the grid axis to reduce is always the first remaining one
        for axis in range(self.ndim):
            h = self.spacing[axis]
            if self.periodic(axis):
                u = jnp.sum(u, axis=k) * h
            else:
                u = (
                    jnp.sum(u, axis=k) - 0.5 * (jnp.take(u, 0, axis=k) + jnp.take(u, -1, axis=k))
                ) * h
        return u

    def spectral_radius(self) -> float:
        """A Gershgorin bound on |eigenvalues| of the Laplacian (for explicit step limits)."""
        total = 0.0
        for axis, h in enumerate(self.spacing):
            _, weights = _centered(self.order)
            bound = float(np.sum(np.abs(weights)))
            if not self.periodic(axis):
                for kind in self.boundaries[axis]:
                    for row in _boundary_rows(kind, self.order):
                        if row is not None:
                            bound = max(bound, float(np.sum(np.abs(row.weights))))
            total += bound / h**2
        return total


# Length of the real stability interval [-beta, 0] of explicit methods: 2 for the
# Taylor-polynomial methods of orders 1-2, 2.5127 for order 3 (Hairer, Norsett & Wanner I,
# IV.2); for tsit5, dopri5 and dopri8 the largest x with |R(-y)| <= 1 on [0, x], R the
# stability function of diffrax's Butcher tableau (rounded down).
_REAL_STABILITY = {
    "euler": 2.0,
    "heun": 2.0,
    "midpoint": 2.0,
    "ralston": 2.0,
    "bosh3": 2.5127,
    "tsit5": 3.506,
    "dopri5": 3.306,
    "dopri8": 5.166,
}


def jacobian_spectral_radius(
    field: Callable, t0: float, u0: Array, *, iterations: int = 40
) -> float:
    """An estimate of the spectral radius of d field(t0, u, None) / du at u0: the largest
    |Ritz value| of `iterations` steps of Arnoldi's method on Jacobian-vector products
    (`jax.linearize`), from the grid's sawtooth (-1)^(i + j + ...) per channel plus a
    small seeded perturbation, the mode that an explicit step amplifies first under
    diffusion. The operator is what the right-hand side computes, however its text is
    written: D * laplace(u) and laplace(D * u) give the same Jacobian.

    For the 1-D Laplacian with Dirichlet sides the exact largest |eigenvalue| is
    (4 / h^2) cos^2(pi / (2 (n - 1))); measured, 40 steps give it to 2e-15 on 21 nodes,
    1e-12 on 64 and 2.5e-5 (low) on 257.
    """
    u0 = jnp.asarray(u0)
    n = u0.size
    k = int(max(1, min(iterations, n, 2**25 // max(n, 1))))
    index = np.indices(u0.shape[1:]).sum(axis=0) if u0.ndim > 1 else np.arange(n)
    start = np.broadcast_to(np.where(index % 2 == 0, 1.0, -1.0), u0.shape)
    start = start + 1e-3 * np.random.default_rng(0).standard_normal(u0.shape)

    @jax.jit
    def arnoldi(u0, start):
        _, jvp = jax.linearize(lambda u: field(t0, u, None), u0)
        v0 = start.reshape(-1) / jnp.linalg.norm(start)
        basis = jnp.zeros((k + 1, n), u0.dtype).at[0].set(v0.astype(u0.dtype))
        hessenberg = jnp.zeros((k + 1, k), u0.dtype)

        def body(j, carry):
            basis, hessenberg = carry
            w = jvp(basis[j].reshape(u0.shape)).reshape(-1)
            for _ in range(2):  # (Gram-Schmidt twice: the basis stays orthonormal)
                live = jnp.arange(k + 1) <= j
                c = jnp.where(live, basis @ w, 0.0)
                w = w - c @ basis
                hessenberg = hessenberg.at[:, j].add(c)
            norm = jnp.linalg.norm(w)
            hessenberg = hessenberg.at[j + 1, j].set(norm)
            basis = basis.at[j + 1].set(
                jnp.where(norm > 0, w / jnp.where(norm > 0, norm, 1.0), 0.0)
            )
            return basis, hessenberg

        return jax.lax.fori_loop(0, k, body, (basis, hessenberg))[1]

    h = np.asarray(arnoldi(u0, jnp.asarray(start, u0.dtype)), dtype=float)[:k, :k]
    # (an invariant subspace found early: the columns after it are zero)
    return float(np.max(np.abs(np.linalg.eigvals(h)))) if np.all(np.isfinite(h)) else math.inf


class MethodOfLines(eqx.Module):
    """Integrate u_t = D Laplacian(u) + R(u) on an `FdGrid`: the grid's Laplacian makes
    an ODE system that an `OdeSolver` (`stepper`) integrates.

    Arguments:
        method: explicit `tsit5` (default), `dopri5`, `dopri8`, `bosh3`, `heun`,
            `midpoint`, `ralston`, `euler`; implicit (the whole right-hand side) for stiff
            diffusion: `kvaerno3`, `kvaerno4`, `kvaerno5`, `implicit_euler`; IMEX
            (diffusion implicit, reaction explicit): `kencarp3`, `kencarp4`, `kencarp5`.
            Implicit and IMEX methods solve linear systems of the grid's size: dense
            ones on one device (meant for 1D and small 2D grids), matrix-free GMRES on
            several (`linear_solver`).
        order: spatial order of the Laplacian, 2 or 4.
        rtol, atol: tolerances of the adaptive step (traced).
        dt0: first step; the constant step when `adaptive=False` (then required).
        adaptive: False takes constant steps of dt0 (explicit methods check it against
            their diffusive stability limit at run time).
        max_steps: bound on the number of steps.
        adjoint: `recursive_checkpoint` (default), `backsolve`, `forward`, `direct`.
        dtype: "float64" (default) or "float32".
        throw: raise on a failed solve (True) or report it in the result code (False).
        devices: split the grid over this many local devices in slabs of its first
            axis (`HaloGrid`: ghost planes exchanged between neighbours at every
            evaluation of the right-hand side); the state stays split, and the error
            norm of the adaptive step is the norm of the whole field (one reduction
            over the devices), so the steps are those of one device.
        linear_solver: the linear systems of implicit and IMEX stages: `dense` (the
            Jacobian formed and factorised) or `gmres` (matrix-free GMRES on
            Jacobian-vector products); None (default): dense on one device, gmres on
            several (a dense Jacobian cannot be split).

    Raises:
        ValueError: unknown method, order, adjoint, dtype or linear solver; a
            non-positive dt0; a fixed step without dt0; devices not a whole number >= 1;
            a dense linear solver on several devices.

    Example:
        >>> solver = MethodOfLines(method="kvaerno5", order=4, rtol=1e-10, atol=1e-12)
    """

    method: str = eqx.field(static=True, default="tsit5")
    order: int = eqx.field(static=True, default=2)
    rtol: float | Array = 1e-6
    atol: float | Array = 1e-8
    dt0: float | Array | None = None
    adaptive: bool = eqx.field(static=True, default=True)
    max_steps: int = eqx.field(static=True, default=65536)
    adjoint: str = eqx.field(static=True, default="recursive_checkpoint")
    dtype: str = eqx.field(static=True, default="float64")
    throw: bool = eqx.field(static=True, default=True)
    devices: int = eqx.field(static=True, default=1)
    linear_solver: str | None = eqx.field(static=True, default=None)

    methods: ClassVar[tuple[str, ...]] = (*EXPLICIT_METHODS, *IMPLICIT_METHODS, *IMEX_METHODS)

    def __check_init__(self):
        if self.method not in self.methods:
            raise ValueError(
                f"unknown method-of-lines method {self.method!r}; expected one of "
                f"{', '.join(self.methods)}." + did_you_mean(self.method, self.methods)
            )
        if self.order not in ORDERS:
            raise ValueError(f"finite-difference order must be 2 or 4, got {self.order!r}")
        if self.adjoint not in ADJOINTS:
            raise ValueError(
                f"unknown adjoint {self.adjoint!r}; expected one of "
                f"{', '.join(ADJOINTS)}.{did_you_mean(self.adjoint, ADJOINTS)}"
            )
        if self.dtype not in ("float32", "float64"):
            raise ValueError(f"dtype must be 'float32' or 'float64', got {self.dtype!r}")
        if not self.adaptive and self.dt0 is None:
            raise ValueError("a fixed-step MethodOfLines (adaptive=False) needs dt0")
        if isinstance(self.dt0, (int, float)) and not self.dt0 > 0:
            raise ValueError(f"dt0 must be positive, got {self.dt0}")
        if isinstance(self.devices, bool) or not isinstance(self.devices, int) or self.devices < 1:
            raise ValueError(f"devices = {self.devices!r}: expected a whole number >= 1")
        if self.linear_solver is not None and self.linear_solver not in LINEAR_SOLVERS:
            raise ValueError(
                f"unknown linear solver {self.linear_solver!r}; expected one of "
                f"{', '.join(LINEAR_SOLVERS)}.{did_you_mean(self.linear_solver, LINEAR_SOLVERS)}"
            )
        if self.devices > 1 and self.linear_solver == "dense":
            raise ValueError(
                f"devices = {self.devices}: the dense Jacobian of the stage equations cannot be "
                "split over devices; take linear_solver = 'gmres' (matrix-free) or leave it out"
            )

    @property
    def stage_solver(self) -> str:
        """How implicit and IMEX stages solve their linear systems: `dense` or `gmres`."""
        if self.linear_solver is not None:
            return self.linear_solver
        return "gmres" if self.devices > 1 else "dense"

    def split(self, grid: FdGrid) -> FdGrid | HaloGrid:
        """The grid the solve runs on: `grid` itself on one device, split over `devices`
        devices (`HaloGrid`) on several.

        Raises:
            ValueError: the grid does not split over `devices` (`check_halo`).
        """
        from ._halo import HaloGrid

        if isinstance(grid, HaloGrid):
            if grid.devices != self.devices:
                raise ValueError(
                    f"a grid split over {grid.devices} devices given to a MethodOfLines of "
                    f"devices = {self.devices}"
                )
            return grid
        return grid if self.devices == 1 else HaloGrid.of(grid, self.devices)

    @property
    def stepper(self) -> OdeSolver:
        """The `OdeSolver` that integrates the semi-discrete system."""
        return OdeSolver(
            method=self.method,
            rtol=self.rtol,
            atol=self.atol,
            dt0=self.dt0,
            adaptive=self.adaptive,
            max_steps=self.max_steps,
            adjoint=self.adjoint,
            throw=self.throw,
            linear_solver=self.stage_solver,
        )

    @property
    def kind(self) -> str:
        """`explicit`, `implicit` or `imex`."""
        return self.stepper.kind

    def stability_limit(self, grid: FdGrid, diffusivity: float) -> float | None:
        """The largest stable fixed step of an explicit method for pure diffusion (None
        when the method has no tabulated limit or is not explicit)."""
        beta = _REAL_STABILITY.get(self.method)
        if beta is None:
            return None
        rho = diffusivity * grid.spectral_radius()
        return math.inf if rho == 0 else beta / rho

    def stable_step(self, field: Callable, t0: float, u0: Array) -> float | None:
        """The largest fixed step of an explicit method that keeps the linearised
        right-hand side `field` at (t0, u0) stable along the negative real axis: beta /
        rho, beta the length of the method's real stability interval, rho the spectral
        radius of the Jacobian (`jacobian_spectral_radius`). None when the method has no
        tabulated interval or is not explicit."""
        beta = _REAL_STABILITY.get(self.method)
        if beta is None:
            return None
        rho = jacobian_spectral_radius(field, t0, u0)
        return math.inf if rho == 0 else beta / rho

    def problem(
        self, grid: FdGrid, diffusivities: Array, reaction: Callable[[Array], Array], u0: Array
    ):
        """The semi-discrete system of this method of lines on `grid`: the initial state
        (the field cast to the solver's dtype, Dirichlet nodes set), the diffusivities
        shaped to broadcast over the grid, and the right-hand side for `stepper` (for IMEX
        methods the pair (reaction, diffusion): the diffusion is the stiff part). Shared
        by `solve` and the resumable loop of `sim run` (`OdeLoop.from_method_of_lines`).
        On several devices the state is `HaloGrid.ode_state` of the field (the split
        axis first) and the right-hand side takes and gives such states; `split(grid)`
        turns a state back into the field (`ode_fields`).

        Raises:
            ValueError: `u0` does not end in the grid's shape; the grid does not split
                over `devices`.
        """
        if tuple(u0.shape[-grid.ndim :]) != grid.points:
            raise ValueError(
                f"initial field has shape {u0.shape}; expected trailing grid shape {grid.points}"
            )
        grid = self.split(grid)
        dtype = jnp.dtype(self.dtype)
        u0 = grid.apply_boundary(grid.constrain(u0.astype(dtype)))
        free = jnp.asarray(~grid.fixed_mask(), dtype=dtype)
        d = jnp.asarray(diffusivities).astype(dtype).reshape((-1,) + (1,) * grid.ndim)

        def diffusion(t, u, args):
            return free * d * grid.laplacian(u)

        def react(t, u, args):
            return free * reaction(u)

        def full(t, u, args):
            return diffusion(t, u, args) + react(t, u, args)

        field = (react, diffusion) if self.kind == "imex" else full
        return grid.ode_state(u0), d, grid.ode_rhs(field)

    def solve(
        self,
        grid: FdGrid,
        diffusivities: Float[Array, " C"],
        reaction: Callable[[Array], Array],
        u0: Float[Array, "C ..."],
        t: Times,
        observe: Callable[[Array], PyTree] | None = None,
    ) -> FdSolution:
        """Integrate from t[0], saving `observe(u)` at every time of `t`.

        Arguments:
            grid: the grid with its boundary conditions.
            diffusivities: D per channel [C].
            reaction: u -> R(u), [C, *points] -> [C, *points].
            u0: the initial field [C, *points]; its Dirichlet nodes are set to the
                boundary values.
            t: increasing save times [T].
            observe: field -> pytree saved at each time (default: the field).

        Returns:
            An `FdSolution`.

        Raises:
            ValueError: `u0` does not end in the grid's shape.
            EqxRuntimeError (at run time): a fixed explicit step beyond the stability
                limit of the diffusion.
        """
        u0, d, field = self.problem(grid, diffusivities, reaction, u0)
        if not self.adaptive:
            beta = _REAL_STABILITY.get(self.method)
            if beta is not None:
                limit = beta / (jnp.max(d) * grid.spectral_radius())
                u0 = eqx.error_if(
                    u0,
                    self.dt0 > limit,
                    "the fixed step dt0 is beyond the diffusive stability limit of the explicit "
                    "method "
                    f"{self.method} (dt <= {beta} / (D * {grid.spectral_radius():.4g})); take a "
                    "smaller step or "
                    "an implicit (kvaerno5) or IMEX (kencarp4) method",
                )
        split = self.split(grid)
        if not isinstance(split, FdGrid):  # (the saved fields stay split as the state is)
            look = observe or (lambda u: u)
            observe = lambda y: split.constrain(look(split.ode_fields(y)))  # noqa: E731
        sol = self.stepper.solve(field, t, u0, observe=observe)
        saved = jax.tree.map(lambda leaf: jnp.where(sol.result != 0, jnp.nan, leaf), sol.ys)
        return FdSolution(saved=saved, num_steps=sol.num_steps, result=sol.result)


class FdSolution(eqx.Module):
    """What `MethodOfLines.solve` returns: `saved` (observations, leading dimension T),
    `num_steps` and `result` (0 on success, a diffrax result code otherwise)."""

    saved: PyTree
    num_steps: Int[Array, ""]
    result: Int[Array, ""]
