"""Electrostatics of point charges in a periodic box: Ewald summation and smooth
particle-mesh Ewald (SPME), and the Lennard-Jones + Coulomb model that uses them.

Units are reduced, with Coulomb's constant 1: two charges q_i, q_j at distance r have
energy q_i q_j / r (a charge is q / sqrt(4 pi eps0 sigma epsilon) in Lennard-Jones
units). The Ewald split of the periodic Coulomb sum with splitting parameter alpha
(Allen & Tildesley, Computer Simulation of Liquids, 2nd ed. 2017, sec. 6.2):

    U = U_real + U_recip + U_self
    U_real  = sum_{i<j, r_ij < rc} q_i q_j erfc(alpha r_ij) / r_ij      (minimum image)
    U_recip = 1 / (2 V) sum_{k != 0} 4 pi / k^2 exp(-k^2 / (4 alpha^2)) |S(k)|^2
    U_self  = -alpha / sqrt(pi) sum_i q_i^2,       S(k) = sum_j q_j exp(i k . r_j)

The system must be neutral (no neutralising background term). SPME (Essmann, Perera,
Berkowitz, Darden, Lee & Pedersen, J. Chem. Phys. 103, 8577 (1995)) computes U_recip
from the charges spread on a mesh by cardinal B-splines of order p, one FFT and the
influence function exp(-pi^2 m^2 / alpha^2) / m^2 |b(m)|^2; forces and the virial are
its autodiff derivatives, as are the Ewald sum's.

One accuracy `epsilon` chooses everything from the real-space cutoff rc (Kolafa &
Perram, Mol. Sim. 9, 351 (1992): the real-space error falls as exp(-alpha^2 rc^2), the
reciprocal one as exp(-k_c^2 / (4 alpha^2)); both are set to epsilon):
alpha = sqrt(-ln epsilon) / rc, k-vectors up to n_a = alpha L_a sqrt(-ln epsilon) / pi
per axis, and the smallest 2-3-5 mesh whose B-spline aliasing error, weighted by the
Gaussian screening, is at most epsilon at every frequency (`pme_mesh`).
"""

from __future__ import annotations

import dataclasses
import math
from typing import ClassVar

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import erf, erfc
from jaxtyping import Array, Float, PyTree

from .._base import Parameter
from ._potentials import (
    PairModel,
    _check_options,
    _check_species,
    _lj,
    lj_tail_energy,
    lj_tail_pressure,
)
from ._types import Edges, Forces, NeighbourIndex, Positions, Scalar
from ._units import REAL
from .base import System

Charges = Float[Array, " n"]
"""One charge per particle."""

METHODS = ("ewald", "pme")
METHOD_OPTIONS = {"ewald": ("ewald_kmax",), "pme": ("pme_mesh", "pme_order")}
"""The options that belong to one method: given with the other, they are a mistake."""
MAX_ACCURACY = 0.01
"""The loosest `ewald_accuracy`: beyond it the estimates that choose alpha, k-vectors and
mesh no longer hold (at 0.999999 a rock-salt crystal's energy came out 22% off)."""
MAX_POINTS = 2**27
"""The most k-vectors or mesh points a model may use (2 GiB of complex128 values)."""


# ----------------------------------------------------------------------------- parameters


def other_method_options(method: str) -> tuple[str, ...]:
    """The options of the methods other than `method` (`METHOD_OPTIONS`)."""
    return tuple(key for name, keys in METHOD_OPTIONS.items() if name != method for key in keys)


def _sizes(value):
    """`ewald_kmax` and `pme_mesh` as tuples (a list from a config), anything else as
    given, for the model's check to refuse in words."""
    return tuple(value) if isinstance(value, (list, tuple)) else value


def splitting_parameter(cutoff: float, accuracy: float) -> float:
    """alpha with exp(-alpha^2 rc^2) = accuracy (Kolafa & Perram 1992)."""
    return math.sqrt(-math.log(accuracy)) / cutoff


def ewald_kmax(edges, alpha: float, accuracy: float) -> tuple[int, ...]:
    """The largest |n_a| of the k-vectors 2 pi n_a / L_a per axis: exp(-k^2 / (4 alpha^2))
    falls to `accuracy` at n_a = alpha L_a sqrt(-ln accuracy) / pi."""
    reach = alpha * math.sqrt(-math.log(accuracy)) / math.pi
    # (at most MAX_POINTS per axis, which the caller refuses: a huge alpha gives infinity)
    return tuple(
        max(1, math.ceil(min(reach * float(edge), MAX_POINTS))) for edge in np.asarray(edges)
    )


def _smooth_sizes(start: int) -> int:
    """The smallest n >= start whose prime factors are 2, 3 and 5 (fast FFT sizes)."""
    n = start
    while True:
        m = n
        for p in (2, 3, 5):
            while m % p == 0:
                m //= p
        if m == 1:
            return n
        n += 1


def pme_mesh(edges, alpha: float, accuracy: float, order: int) -> tuple[int, ...]:
    """Mesh points per axis for SPME of B-spline order `order`.

    For each axis the smallest 2-3-5 size K whose aliasing estimate
    max_n exp(-(pi n / (alpha L))^2) sum_{j = +-1, +-2} |n / (n + j K)|^p over the
    frequencies 0 < n <= K/2 is at most `accuracy`: the relative error of the
    interpolated structure factor at frequency n (Essmann et al. 1995, sec. 3) weighted
    by the Gaussian screening of that frequency.
    """
    out = []
    for edge in np.asarray(
        edges, dtype=float
    ).tolist():  # (Python floats: a huge alpha makes inf, not a warning)
        size = _smooth_sizes(max(2 * order, 8))
        while size**3 <= MAX_POINTS:  # (beyond: refused by the caller)
            n = np.arange(1, size // 2 + 1, dtype=float)
            alias = sum(np.abs(n / (n + j * size)) ** order for j in (-2, -1, 1, 2))
            worst = np.max(np.exp(-((math.pi * n / (alpha * edge)) ** 2)) * alias)
            if worst <= accuracy:
                break
            size = _smooth_sizes(size + 1)
        out.append(size)
    return tuple(out)


# ----------------------------------------------------------------------------- the three parts


def real_space_pair(r2: Array, qq: Array, alpha: float) -> Array:
    """q_i q_j erfc(alpha r) / r at squared distances r2 (the screened real-space pair term)."""
    r = jnp.sqrt(r2)
    return qq * erfc(alpha * r) / r


def excluded_energy(
    position: Positions, charges: Charges, edges: Edges, pairs: Array, alpha: float
) -> Scalar:
    """-sum over excluded pairs of q_i q_j erf(alpha r) / r: what the reciprocal sum
    counts of the pairs within one molecule, which the real-space sum leaves out, so
    that such pairs do not interact at all (minimum image)."""
    i, j = pairs[:, 0], pairs[:, 1]
    d = position[i] - position[j]
    d = d - edges * jnp.floor(d / edges + 0.5)
    r = jnp.sqrt(jnp.sum(d * d, axis=-1))
    return -jnp.sum(charges[i] * charges[j] * erf(alpha * r) / r)


def self_energy(charges: Charges, alpha: float) -> Scalar:
    """-alpha / sqrt(pi) sum_i q_i^2: each Gaussian screening cloud's energy with its own charge."""
    return -alpha / math.sqrt(math.pi) * jnp.sum(charges * charges)


def _complex(dtype):
    return jnp.complex64 if dtype == jnp.float32 else jnp.complex128


def ewald_reciprocal_energy(
    position: Positions, charges: Charges, edges: Edges, alpha: float, kmax: tuple[int, ...]
) -> Scalar:
    """U_recip of the Ewald sum over k = 2 pi (n_x / L_x, n_y / L_y, n_z / L_z) with
    |n_a| <= kmax[a], k != 0 (3-D orthorhombic box).

    The structure factor is a product of per-axis phases: S(n) = sum_j q_j e_x[j, n_x]
    e_y[j, n_y] e_z[j, n_z] with e_a[j, n] = exp(2 pi i n x_ja / L_a), one contraction.

    Arguments:
        position: positions [n, 3] (wrapped into the box or not).
        charges: one charge per particle [n].
        edges: the box edges [3] (length).
        alpha: the Ewald splitting parameter (1 / length).
        kmax: the largest |n_a| per axis, three ints.

    Returns:
        U_recip, a scalar (charge^2 / length: Coulomb's constant 1).
    """
    dtype = position.dtype
    phases = []
    squares = []
    for axis, km in enumerate(kmax):
        n = jnp.arange(-km, km + 1, dtype=dtype)
        k = 2.0 * math.pi * n / edges[axis]
        phases.append(jnp.exp(1j * (position[:, axis, None] * k[None, :]).astype(_complex(dtype))))
        squares.append(k * k)
    structure = jnp.einsum("i,ia,ib,ic->abc", charges.astype(_complex(dtype)), *phases)
    k2 = squares[0][:, None, None] + squares[1][None, :, None] + squares[2][None, None, :]
    origin = k2 == 0
    safe = jnp.where(origin, 1.0, k2)
    weight = jnp.where(origin, 0.0, 4.0 * math.pi / safe * jnp.exp(-safe / (4.0 * alpha * alpha)))
    power = jnp.real(structure) ** 2 + jnp.imag(structure) ** 2
    return jnp.sum(weight * power) / (2.0 * jnp.prod(edges))


def bspline_weights(fraction: Array, order: int) -> Array:
    """M_p(f + j), j = 0 .. p - 1, of the cardinal B-spline of order p at fractional
    offsets f in [0, 1) (any shape; the result adds an axis of length p). Built by the
    recursion M_n(x) = x M_(n-1)(x) / (n - 1) + (n - x) M_(n-1)(x - 1) / (n - 1) from
    M_2(f) = f, M_2(f + 1) = 1 - f (Essmann et al. 1995, eq. 4.1): a polynomial in f,
    so that autodiff gives its exact derivative."""
    w = [fraction, 1.0 - fraction]
    for n in range(3, order + 1):
        new = []
        for j in range(n):
            up = (fraction + j) * w[j] if j < n - 1 else 0.0
            down = (n - fraction - j) * w[j - 1] if j >= 1 else 0.0
            new.append((up + down) / (n - 1))
        w = new
    return jnp.stack(w, axis=-1)


def bspline_moduli(size: int, order: int) -> np.ndarray:
    """|b(m)|^2 = 1 / |sum_{k=0}^{p-2} M_p(k + 1) exp(2 pi i m k / K)|^2 for m = 0 .. K - 1
    (Essmann et al. 1995, eq. 4.4); 0 where the sum vanishes (odd orders at m = K / 2)."""
    with jax.ensure_compile_time_eval():  # (a constant of the program that calls it)
        values = np.asarray(bspline_weights(jnp.zeros(()), order))[1:]  # M_p(1) .. M_p(p - 1)
    m = np.arange(size)[:, None]
    k = np.arange(order - 1)[None, :]
    total = np.sum(values[None, :] * np.exp(2j * np.pi * m * k / size), axis=1)
    power = np.abs(total) ** 2
    return np.where(power > 1e-10, 1.0 / np.maximum(power, 1e-300), 0.0)


def spread_charges(
    position: Positions,
    charges: Charges,
    edges: Edges,
    mesh: tuple[int, ...],
    order: int,
    first=0,
    planes: int | None = None,
) -> Array:
    """The SPME charge array Q [K_x, K_y, K_z]: each charge spread over p^3 mesh points by
    products of B-spline weights of its scaled fractional coordinates (periodic).

    With `first` and `planes`: the `planes` planes of the first axis from plane `first`
    (a first plane below 0 is the plane K_x below it), the charges that fall elsewhere
    dropped (the window of one device's slab, `physics.md.MeshEwald`)."""
    planes = mesh[0] if planes is None else planes
    dtype = position.dtype
    u = position / edges * jnp.asarray(mesh, dtype)
    base = jnp.floor(u)
    w = bspline_weights(u - base, order)  # [n, 3, p]
    points = base.astype(jnp.int32)[:, :, None] - jnp.arange(order, dtype=jnp.int32)
    x = jnp.mod(points[:, 0] - first, mesh[0])
    x = jnp.where(x < planes, x, planes)  # (beyond the planes: dropped below)
    y, z = jnp.mod(points[:, 1], mesh[1]), jnp.mod(points[:, 2], mesh[2])
    flat = (x[:, :, None, None] * mesh[1] + y[:, None, :, None]) * mesh[2] + z[:, None, None, :]
    weight = (
        charges[:, None, None, None]
        * w[:, 0, :, None, None]
        * w[:, 1, None, :, None]
        * w[:, 2, None, None, :]
    )
    size = planes * mesh[1] * mesh[2]
    grid = jnp.zeros(size, dtype).at[flat.reshape(-1)].add(weight.reshape(-1), mode="drop")
    return grid.reshape(planes, mesh[1], mesh[2])


def pme_reciprocal_energy(
    position: Positions,
    charges: Charges,
    edges: Edges,
    alpha: float,
    mesh: tuple[int, ...],
    order: int,
) -> Scalar:
    """U_recip by smooth particle-mesh Ewald (3-D orthorhombic box): the charges spread on
    the mesh (`spread_charges`), one real FFT, and
    U = 1 / (2 pi V) sum_{m != 0} exp(-pi^2 m^2 / alpha^2) / m^2 B(m) |F(Q)(m)|^2,
    m = (n_x / L_x, n_y / L_y, n_z / L_z), B the product of `bspline_moduli`.

    Arguments:
        position: positions [n, 3] (wrapped into the box or not).
        charges: one charge per particle [n].
        edges: the box edges [3] (length).
        alpha: the Ewald splitting parameter (1 / length).
        mesh: mesh points per axis (K_x, K_y, K_z).
        order: the B-spline order p of the charge spreading.

    Returns:
        U_recip, a scalar (charge^2 / length: Coulomb's constant 1).
    """
    dtype = position.dtype
    transform = jnp.fft.rfftn(spread_charges(position, charges, edges, mesh, order))
    power = jnp.real(transform) ** 2 + jnp.imag(transform) ** 2
    moduli = []
    squares = []
    for axis, size in enumerate(mesh):
        n = np.fft.fftfreq(size, 1.0 / size) if axis < 2 else np.arange(size // 2 + 1, dtype=float)
        b2 = bspline_moduli(size, order)[: len(n)] if axis == 2 else bspline_moduli(size, order)
        moduli.append(jnp.asarray(b2, dtype))
        m = jnp.asarray(n, dtype) / edges[axis]
        squares.append(m * m)
    m2 = squares[0][:, None, None] + squares[1][None, :, None] + squares[2][None, None, :]
    b = moduli[0][:, None, None] * moduli[1][None, :, None] * moduli[2][None, None, :]
    # The real FFT holds the half spectrum n_z >= 0: the other half mirrors n_z = 1 .. K/2 - 1.
    last = mesh[2]
    doubled = np.full(last // 2 + 1, 2.0)
    doubled[0] = 1.0
    if last % 2 == 0:
        doubled[-1] = 1.0
    origin = m2 == 0
    safe = jnp.where(origin, 1.0, m2)
    influence = jnp.where(origin, 0.0, jnp.exp(-(math.pi**2) * safe / (alpha * alpha)) / safe)
    total = jnp.sum(jnp.asarray(doubled, dtype) * influence * b * power)
    return total / (2.0 * math.pi * jnp.prod(edges))


# ----------------------------------------------------------------------------- the model


class LennardJonesCoulomb(PairModel):
    """Lennard-Jones particles with point charges per species, the Coulomb sum by Ewald
    summation or smooth particle-mesh Ewald (3-D periodic boxes, neutral systems).

    U = sum_{i<j, r < rc} [4 eps (s^12 - s^6) + q_i q_j erfc(alpha r) / r] + U_recip + U_self
    with s = sigma / r and q_i = charges[species_i] (see the module docstring). The
    real-space part shares the cutoff and the neighbour list of the Lennard-Jones part;
    forces and virial add the autodiff derivatives of U_recip. epsilon = 0 leaves
    charges alone (ionic crystals, Madelung energies).

    Arguments:
        cutoff: the Lennard-Jones and real-space cutoff (at most half the box).
        shift: subtract the Lennard-Jones phi(cutoff) (the Coulomb term is not shifted).
        tail_correction: add the Lennard-Jones long-range corrections to energy and
            pressure (as `LennardJones`).
        electrostatics: "ewald" or "pme".
        ewald_accuracy: the relative accuracy that chooses what is not given below
            (alpha from the cutoff, then k-vectors or mesh from the box).
        ewald_alpha: the splitting parameter alpha (0: sqrt(-ln accuracy) / cutoff).
        ewald_kmax: largest |n| of the k-vectors per axis (ewald; (): from the accuracy).
        pme_mesh: mesh points per axis (pme; (): from the accuracy).
        pme_order: B-spline order p of the charge spreading (3 to 8; 5 as LAMMPS).
        n_species: number of species; charges has one entry per species.

    The k-vectors and mesh depend on the box: `for_system` fixes them (the MD driver calls
    it before a run; energies of a concrete system fix them on the fly).

    Example:
        >>> model = LennardJonesCoulomb(cutoff=3.0, electrostatics="pme")
        >>> params = model.default_params()   # epsilon, sigma, charges [+1, -1]
    """

    rows_apart: ClassVar[bool] = False  # (the k-space sum is not a sum over rows)

    cutoff: float = eqx.field(static=True, default=2.5)
    shift: bool = eqx.field(static=True, default=False)
    tail_correction: bool = eqx.field(static=True, default=False)
    electrostatics: str = eqx.field(static=True, default="pme")
    ewald_accuracy: float = eqx.field(static=True, default=1e-5)
    ewald_alpha: float = eqx.field(static=True, default=0.0)
    ewald_kmax: tuple[int, ...] = eqx.field(static=True, default=(), converter=_sizes)
    pme_mesh: tuple[int, ...] = eqx.field(static=True, default=(), converter=_sizes)
    pme_order: int = eqx.field(static=True, default=5)
    n_species: int = eqx.field(static=True, default=2)

    name: ClassVar[str] = "lj_coulomb"
    description: ClassVar[str] = (
        "Lennard-Jones plus point charges per species, Coulomb by Ewald or particle-mesh Ewald"
    )
    parameters: ClassVar[tuple[Parameter, ...]] = (
        Parameter(
            "epsilon",
            1.0,
            "reduced",
            "depth of the Lennard-Jones well (0: charges only)",
            "nonnegative",
        ),
        Parameter(
            "sigma",
            1.0,
            "reduced",
            "particle diameter (where the Lennard-Jones phi = 0)",
            "positive",
        ),
        Parameter(
            "charges",
            (1.0, -1.0),
            "reduced",
            "charge of each species, q / sqrt(4 pi eps0 sigma epsilon) (n_species values)",
        ),
    )
    pair_parameters: ClassVar[tuple[str, ...]] = ("epsilon", "sigma")

    def __check_init__(self):
        _check_options(self)
        if self.electrostatics not in METHODS:
            raise ValueError(
                f"lj_coulomb: electrostatics = {self.electrostatics!r} is not a method; expected "
                f"one of: {', '.join(METHODS)}"
            )
        if not (
            isinstance(self.ewald_accuracy, (int, float))
            and 0 < self.ewald_accuracy <= MAX_ACCURACY
        ):
            raise ValueError(
                f"lj_coulomb: ewald_accuracy = {self.ewald_accuracy!r}; expected a number above 0 "
                f"and at most {MAX_ACCURACY:g} (such as 1e-5)"
            )
        if not (
            isinstance(self.ewald_alpha, (int, float))
            and self.ewald_alpha >= 0
            and math.isfinite(self.ewald_alpha)
        ):
            raise ValueError(
                f"lj_coulomb: ewald_alpha = {self.ewald_alpha!r}; expected a positive number (0: "
                "from ewald_accuracy)"
            )
        if (
            isinstance(self.pme_order, bool)
            or not isinstance(self.pme_order, int)
            or not 3 <= self.pme_order <= 8
        ):
            raise ValueError(
                f"lj_coulomb: pme_order = {self.pme_order!r}; expected a whole number from 3 to 8"
            )
        for key, low in (("ewald_kmax", 1), ("pme_mesh", self.pme_order)):
            value = getattr(self, key)
            if value != () and (
                not isinstance(value, tuple)
                or len(value) != 3
                or not all(
                    isinstance(v, int) and not isinstance(v, bool) and v >= low for v in value
                )
            ):
                shown = list(value) if isinstance(value, tuple) else value
                raise ValueError(
                    f"lj_coulomb: {key} = {shown!r}; expected three whole numbers >= {low}, one "
                    "per axis (or none: from ewald_accuracy)"
                )
            if value and _points(key, value) > MAX_POINTS:
                raise ValueError(
                    f"lj_coulomb: {key} = {list(value)!r} gives more than {MAX_POINTS:,} k-vectors "
                    "or mesh points"
                )
        defaults = {f.name: f.default for f in dataclasses.fields(self)}
        for key in other_method_options(self.electrostatics):
            if getattr(self, key) != defaults[key]:
                raise ValueError(
                    f"lj_coulomb: {key} = {getattr(self, key)!r} does not apply to electrostatics "
                    f"= {self.electrostatics!r}; leave it out, or choose the other method"
                )

    @property
    def alpha(self) -> float:
        """The splitting parameter: `ewald_alpha`, or sqrt(-ln ewald_accuracy) / cutoff."""
        return self.ewald_alpha or splitting_parameter(self.cutoff, self.ewald_accuracy)

    def default_params(self) -> dict[str, Array]:
        params = super().default_params()
        charges = np.zeros(self.n_species)
        charges[: min(2, self.n_species)] = (1.0, -1.0)[: self.n_species]
        params["charges"] = jnp.asarray(charges, dtype=params["epsilon"].dtype)
        return params

    # --------------------------------------------------------------- sizes from the box

    def for_system(self, system: System) -> LennardJonesCoulomb:
        """The model with alpha and the k-vectors (ewald) or the mesh (pme) fixed for the
        system's box, which must be concrete (not traced)."""
        if self.ewald_alpha and (
            self.ewald_kmax if self.electrostatics == "ewald" else self.pme_mesh
        ):
            return self
        edges = _concrete_edges(system)
        alpha = self.alpha
        if self.electrostatics == "ewald":
            sizes = {"ewald_kmax": self.ewald_kmax or ewald_kmax(edges, alpha, self.ewald_accuracy)}
        else:
            sizes = {
                "pme_mesh": self.pme_mesh
                or pme_mesh(edges, alpha, self.ewald_accuracy, self.pme_order)
            }
        ((key, value),) = sizes.items()
        if _points(key, value) > MAX_POINTS:
            given = f"ewald_alpha = {self.ewald_alpha:g} with " if self.ewald_alpha else ""
            cure = (
                "lower ewald_alpha or loosen ewald_accuracy"
                if self.ewald_alpha
                else "loosen ewald_accuracy or raise the cutoff"
            )
            raise ValueError(
                f"lj_coulomb: {given}ewald_accuracy = {self.ewald_accuracy:g} asks for {key} = "
                f"{list(value)} in this box, more than "
                f"{MAX_POINTS:,} k-vectors or mesh points; {cure}"
            )
        return dataclasses.replace(self, ewald_alpha=alpha, **sizes)

    # --------------------------------------------------------------- energy, forces, virial

    def pair_energy(self, r2, p):
        e = p["qq"] * erfc(self.alpha * jnp.sqrt(r2)) / jnp.sqrt(r2)
        lj = _lj(r2, p["epsilon"], p["sigma"])
        if self.shift:
            rc = jnp.asarray(self.cutoff, r2.dtype)
            lj = lj - _lj(rc * rc, p["epsilon"], p["sigma"])
        return e + lj

    def _pair_values(self, system: System, params: PyTree, i: Array, j: Array) -> dict[str, Array]:
        out = super()._pair_values(system, params, i, j)
        q = _charges(self, system, params)
        out["qq"] = q[i][:, None] * q[j]
        return out

    def reciprocal_energy(self, system: System, params: PyTree) -> Scalar:
        """U_recip of the configuration (the model must be sized: `for_system`), less
        the share of the pairs within one molecule (`excluded_energy`)."""
        return self._reciprocal(
            system.position, system.space.box, _charges(self, system, params), _excluded(system)
        )

    def _reciprocal(
        self, position: Positions, edges: Edges, charges: Charges, excluded: Array | None
    ) -> Scalar:
        if self.electrostatics == "ewald":
            energy = ewald_reciprocal_energy(position, charges, edges, self.alpha, self.ewald_kmax)
        else:
            energy = pme_reciprocal_energy(
                position, charges, edges, self.alpha, self.pme_mesh, self.pme_order
            )
        if excluded is not None:
            energy = energy + excluded_energy(position, charges, edges, excluded, self.alpha)
        return energy

    def mesh_part(self, system: System, multiple: int = 1):
        """The reciprocal part of SPME as `physics.md.MeshEwald`, for the box of `system`;
        a mesh chosen from the accuracy has its first size raised to the next 2-3-5 size
        that `multiple` divides (a given `pme_mesh` must be such a size)."""
        from ._mesh_ewald import MeshEwald, mesh_with_first

        if self.electrostatics != "pme":
            raise ValueError(
                f"lj_coulomb with electrostatics = {self.electrostatics!r} cannot be split over "
                "devices; electrostatics = 'pme' can"
            )
        sized = self.for_system(system)
        mesh = sized.pme_mesh
        if not self.pme_mesh:
            mesh = mesh_with_first(mesh, multiple, _smooth_sizes)
        elif mesh[0] % multiple:
            raise ValueError(
                f"lj_coulomb: pme_mesh = {list(mesh)} does not split into {multiple} slabs; give "
                f"a first size that {multiple} divides"
            )
        return MeshEwald(
            alpha=sized.alpha, mesh=mesh, order=self.pme_order, coulomb=self.unit_system.coulomb
        )

    def tail_energy(self, system: System, params: PyTree) -> Scalar:
        return lj_tail_energy(self, system, params)

    def tail_pressure(self, system: System, params: PyTree) -> Scalar:
        return lj_tail_pressure(self, system, params)

    def coulomb_self_energy(self, system: System, params: PyTree) -> Scalar:
        return self_energy(_charges(self, system, params), self.alpha)

    def interaction_energy(
        self, system: System, params: PyTree, neighbours: NeighbourIndex | None = None
    ) -> Scalar:
        sized = self.for_system(system)
        pairs = PairModel.interaction_energy(sized, system, params, neighbours)
        return (
            pairs
            + sized.reciprocal_energy(system, params)
            + sized.coulomb_self_energy(system, params)
        )

    def forces_and_virial(
        self, system: System, params: PyTree, neighbours: NeighbourIndex | None = None
    ) -> tuple[Forces, Edges]:
        """Forces [n, dim] and the diagonal of the virial tensor [dim]: the pairs' from one
        pass over the list, U_recip's from one reverse pass through it (with respect to
        the positions and to a stretch x_a -> lambda_a x_a, L_a -> lambda_a L_a of each axis)."""
        sized = self.for_system(system)
        force, virial = PairModel.pair_forces_and_virial(sized, system, params, neighbours)
        ones = jnp.ones(system.dim, system.position.dtype)
        q = _charges(sized, system, params)
        excluded = _excluded(system)
        reciprocal = lambda r, s: sized._reciprocal(r * s, system.space.box * s, q, excluded)
        d_position, d_stretch = jax.grad(reciprocal, argnums=(0, 1))(system.position, ones)
        return force - d_position, virial - d_stretch

    def forces(
        self, system: System, params: PyTree, neighbours: NeighbourIndex | None = None
    ) -> Forces:
        return self.forces_and_virial(system, params, neighbours)[0]

    def virial(
        self, system: System, params: PyTree, neighbours: NeighbourIndex | None = None
    ) -> Scalar:
        return jnp.sum(self.forces_and_virial(system, params, neighbours)[1])

    def check_params(self, system: System, params: PyTree) -> None:
        _check_species(self, system, params)
        if not system.space.periodic or system.dim != 3:
            raise ValueError(
                "lj_coulomb: Ewald sums need a 3-D periodic box, got a "
                f"{'periodic' if system.space.periodic else 'free'} {system.dim}-D space"
            )
        charges = np.asarray(params["charges"], dtype=float)
        if charges.shape != (self.n_species,):
            raise ValueError(
                f"lj_coulomb: params.charges must hold one charge per species ({self.n_species} "
                f"values, n_species = {self.n_species}), "
                f"got shape {charges.shape}"
            )
        largest = float(np.max(np.abs(charges))) if charges.size else 0.0
        with np.errstate(over="ignore", invalid="ignore"):
            # (sum q^2 in the real units' Coulomb constant, with room to spare)
            scale = np.sum(np.square(charges[np.asarray(system.species)])) * REAL.coulomb * 1e3
        if not np.isfinite(scale):
            raise ValueError(
                f"lj_coulomb: params.charges up to {largest:g} give Coulomb energies beyond the "
                "float range; expected charges a run can represent"
            )
        q = charges[np.asarray(system.species)]
        net = float(np.sum(q))
        if abs(net) > 1e-10 * max(float(np.sum(np.abs(q))), 1e-300):
            counts = np.bincount(np.asarray(system.species), minlength=self.n_species)
            raise ValueError(
                f"lj_coulomb: the system's net charge is {net:g} (params.charges = "
                f"{charges.tolist()} for "
                f"{' + '.join(str(c) for c in counts)} particles per species); Ewald sums need a "
                "neutral system"
            )


def _points(key: str, sizes: tuple[int, ...]) -> int:
    """How many k-vectors (ewald_kmax) or mesh points (pme_mesh) the sizes give."""
    return math.prod(2 * k + 1 for k in sizes) if key == "ewald_kmax" else math.prod(sizes)


def _charges(model: LennardJonesCoulomb, system: System, params: PyTree) -> Charges:
    """Each particle's charge times sqrt(Coulomb's constant) of the model's units, so
    that every product q_i q_j carries the constant (1 in reduced units)."""
    scale = math.sqrt(model.unit_system.coulomb)
    return jnp.asarray(params["charges"]).astype(system.position.dtype)[system.species] * scale


def _excluded(system: System) -> Array | None:
    """The pairs within one molecule [e, 2], or None."""
    if system.topology is None or system.topology.pairs.shape[0] == 0:
        return None
    return system.topology.pairs


def _concrete_edges(system: System) -> np.ndarray:
    if not system.space.periodic:
        raise ValueError("lj_coulomb: Ewald sums need a periodic box")
    try:
        return np.asarray(system.space.box, dtype=float)
    except (jax.errors.TracerArrayConversionError, jax.errors.ConcretizationTypeError):
        raise ValueError(
            "lj_coulomb: the box is traced, so the k-vectors or the mesh cannot be chosen from it; "
            "fix them first with model.for_system(system) (or give ewald_alpha with ewald_kmax or "
            "pme_mesh)"
        ) from None
