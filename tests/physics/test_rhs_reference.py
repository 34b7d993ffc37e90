"""Every registered model's right-hand side against an independent NumPy evaluation of the
equation its docstring states, at random states and random (non-default) parameters.

- ODE models: the vector field, component by component.
- Periodic spectral PDE models: L u + N(u), back in physical space, for a random
  band-limited field written here as an explicit Fourier series u = c0 + sum_m Re(c_m
  e^{i k_m . x}); its derivatives are summed term by term (no FFT), and the products of
  the equation are taken point by point. The band is low enough that the model's
  pseudo-spectral products are exact (no aliasing), so both sides agree to round-off.
- Finite-difference PDE models: D times the second-order Laplacian (three-point stencil
  per axis) written with np.roll (every node on periodic axes, interior nodes on bounded
  ones: the boundary rows belong to `solvers.FdGrid` and are tested there) plus the reaction.
- Pair models: energy, forces and virial of a small random configuration (two species,
  per-pair parameter matrices; periodic 3-D and free 2-D) from the closed-form potential
  and its derivative, summed pair by pair.

A model cannot be registered without a reference here
(`test_every_registered_model_has_a_reference`), and every reference asserts that it
sets all the model's parameters, so a parameter added to a model without its reference
fails too.

Tolerance: RTOL below, the largest error over all cases relative to the largest
magnitude of the compared quantity (per component / field / observable).
"""

from __future__ import annotations

import dataclasses
import itertools
import math
import zlib
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import sim
from physics import md
from solvers import FdGrid, FourierGrid

# Measured (float64): largest relative error over all cases 6.4e-14 (the energy of the
# shifted Lennard-Jones, where the shift cancels most of each term); spectral PDEs 2.2e-14,
# finite differences 2.4e-16, ODEs 3.2e-16 at most; bound 1e-10, over three orders of
# magnitude of margin and far below any mistake in a term (a wrong coefficient or sign
# is O(1)).
RTOL = 1e-10

Case = tuple[str, np.ndarray, np.ndarray]  # (what, model's value, reference value)
Reference = Callable[[np.random.Generator, str], list[Case]]  # (rng, variant) -> cases
REFERENCES: dict[str, tuple[Reference, tuple[str, ...]]] = {}


def reference(name: str, variants: tuple[str, ...] = ("",)):
    """Register the reference of the model registered as `name`; each variant (a grid,
    a geometry, an option) is a test of its own, so that none compiles for long."""

    def register(fn):
        REFERENCES[name] = (fn, variants)
        return fn

    return register


def relative_error(got, want) -> float:
    got, want = np.asarray(got, dtype=float), np.asarray(want, dtype=float)
    assert got.shape == want.shape, (got.shape, want.shape)
    scale = np.max(np.abs(want))
    assert scale > 0, "a reference that is identically zero proves nothing"
    return float(np.max(np.abs(got - want)) / scale)


def full_params(model, **values) -> dict:
    """The parameter dict of `values`, which must name every parameter of `model`."""
    assert set(values) == set(model.parameter_names), (
        f"the reference of {model.name!r} sets {sorted(values)}, the model has "
        f"{sorted(model.parameter_names)}: "
        "update the reference"
    )
    return {
        k: v if isinstance(v, tuple) else jnp.asarray(v, dtype=float) for k, v in values.items()
    }


# ----------------------------------------------------------------------------- ODE models


def ode_cases(model, params, states: np.ndarray, want: np.ndarray) -> list[Case]:
    """The model's vector field at each row of `states` against `want`, per component."""
    t = jnp.asarray(0.37)
    # One compilation instead of op-by-op dispatch (a program per operation of the model).
    field = jax.jit(jax.vmap(model.vector_field, in_axes=(None, 0, None)))
    got = np.asarray(field(t, jnp.asarray(states), params))
    return [(f"d{name}/dt", got[:, i], want[:, i]) for i, name in enumerate(model.state_names)]


@reference("lotka_volterra")
def _(rng, variant):
    # dx/dt = alpha x - beta x y, dy/dt = delta x y - gamma y
    a, b, g, d = (
        rng.uniform(0.3, 1.0),
        rng.uniform(0.01, 0.05),
        rng.uniform(0.5, 1.2),
        rng.uniform(0.01, 0.04),
    )
    model = sim.get_model("lotka_volterra")
    params = full_params(model, alpha=a, beta=b, gamma=g, delta=d)
    x, y = rng.uniform(0.5, 60.0, (2, 16))
    return ode_cases(
        model, params, np.stack([x, y], 1), np.stack([a * x - b * x * y, d * x * y - g * y], 1)
    )


@reference("lorenz")
def _(rng, variant):
    # x' = sigma (y - x), y' = x (rho - z) - y, z' = x y - beta z
    s, r, b = rng.uniform(5, 15), rng.uniform(10, 40), rng.uniform(1, 4)
    model = sim.get_model("lorenz")
    params = full_params(model, sigma=s, rho=r, beta=b)
    x, y, z = rng.normal(0, 10, (3, 16))
    want = np.stack([s * (y - x), x * (r - z) - y, x * y - b * z], 1)
    return ode_cases(model, params, np.stack([x, y, z], 1), want)


@reference("van_der_pol")
def _(rng, variant):
    # x'' - mu (1 - x^2) x' + x = 0 as x' = v, v' = mu (1 - x^2) v - x
    mu = rng.uniform(0.2, 5.0)
    model = sim.get_model("van_der_pol")
    params = full_params(model, mu=mu)
    x, v = rng.normal(0, 2, (2, 16))
    return ode_cases(model, params, np.stack([x, v], 1), np.stack([v, mu * (1 - x**2) * v - x], 1))


@reference("sir")
def _(rng, variant):
    # S' = -beta S I / N, I' = beta S I / N - gamma I, R' = gamma I, N = S + I + R
    b, g = rng.uniform(0.1, 1.0), rng.uniform(0.05, 0.5)
    model = sim.get_model("sir")
    params = full_params(model, beta=b, gamma=g)
    s, i, r = rng.uniform(0.0, 100.0, (3, 16))
    n = s + i + r
    want = np.stack([-b * s * i / n, b * s * i / n - g * i, g * i], 1)
    return ode_cases(model, params, np.stack([s, i, r], 1), want)


@reference("damped_pendulum")
def _(rng, variant):
    # theta'' = -(g / length) sin(theta) - damping theta'
    g, length, c = rng.uniform(1, 20), rng.uniform(0.2, 3), rng.uniform(0.05, 1)
    model = sim.get_model("damped_pendulum")
    params = full_params(model, g=g, length=length, damping=c)
    theta, omega = rng.uniform(-3, 3, 16), rng.normal(0, 3, 16)
    want = np.stack([omega, -g / length * np.sin(theta) - c * omega], 1)
    return ode_cases(model, params, np.stack([theta, omega], 1), want)


@reference("fitzhugh_nagumo")
def _(rng, variant):
    # v' = v - v^3 / 3 - w + current, w' = (v + a - b w) / tau
    a, b, tau, current = (
        rng.uniform(-1, 1),
        rng.uniform(0.2, 1.5),
        rng.uniform(2, 20),
        rng.uniform(-1, 1),
    )
    model = sim.get_model("fitzhugh_nagumo")
    params = full_params(model, a=a, b=b, tau=tau, current=current)
    v, w = rng.normal(0, 1.5, (2, 16))
    want = np.stack([v - v**3 / 3 - w + current, (v + a - b * w) / tau], 1)
    return ode_cases(model, params, np.stack([v, w], 1), want)


@reference("brusselator")
def _(rng, variant):
    # x' = A + x^2 y - (B + 1) x, y' = B x - x^2 y
    a, b = rng.uniform(0.5, 2), rng.uniform(1, 4)
    model = sim.get_model("brusselator")
    params = full_params(model, A=a, B=b)
    x, y = rng.uniform(0, 4, (2, 16))
    want = np.stack([a + x**2 * y - (b + 1) * x, b * x - x**2 * y], 1)
    return ode_cases(model, params, np.stack([x, y], 1), want)


def map_cases(model, params, states: np.ndarray, want: np.ndarray) -> list[Case]:
    """The map's step at each row of `states` against `want`, per component."""
    step = jax.jit(jax.vmap(model.step, in_axes=(None, 0, None)))
    got = np.asarray(step(jnp.asarray(3), jnp.asarray(states), params))
    return [(f"{name}_next", got[:, i], want[:, i]) for i, name in enumerate(model.state_names)]


@reference("logistic_map")
def _(rng, variant):
    # x_{n+1} = r x_n (1 - x_n)
    r = rng.uniform(0, 4)
    model = sim.get_model("logistic_map")
    params = full_params(model, r=r)
    x = rng.uniform(0, 1, (16, 1))
    return map_cases(model, params, x, r * x * (1 - x))


@reference("henon_map")
def _(rng, variant):
    # x_{n+1} = 1 - a x_n^2 + y_n, y_{n+1} = b x_n
    a, b = rng.uniform(0.5, 1.5), rng.uniform(-0.5, 0.5)
    model = sim.get_model("henon_map")
    params = full_params(model, a=a, b=b)
    x, y = rng.uniform(-1.5, 1.5, (2, 16))
    want = np.stack([1 - a * x**2 + y, b * x], 1)
    return map_cases(model, params, np.stack([x, y], 1), want)


@reference("robertson")
def _(rng, variant):
    # y1' = -k1 y1 + k3 y2 y3, y2' = k1 y1 - k2 y2^2 - k3 y2 y3, y3' = k2 y2^2
    k1, k2, k3 = rng.uniform(0.01, 0.1), rng.uniform(1e7, 5e7), rng.uniform(5e3, 2e4)
    model = sim.get_model("robertson")
    params = full_params(model, k1=k1, k2=k2, k3=k3)
    y1, y2, y3 = rng.uniform(0, 1, 16), rng.uniform(0, 1e-4, 16), rng.uniform(0, 1, 16)
    want = np.stack([-k1 * y1 + k3 * y2 * y3, k1 * y1 - k2 * y2**2 - k3 * y2 * y3, k2 * y2**2], 1)
    return ode_cases(model, params, np.stack([y1, y2, y3], 1), want)


# The activations as their documented formulas (jax.nn's gelu is the tanh approximation).
NUMPY_ACTIVATIONS = {
    "tanh": np.tanh,
    "relu": lambda x: np.maximum(x, 0.0),
    "softplus": lambda x: np.log1p(np.exp(x)),
    "silu": lambda x: x / (1 + np.exp(-x)),
    "gelu": lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x**3))),
    "elu": lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0.0))),
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
}


def random_mlp(rng, sizes) -> tuple[dict, ...]:
    return tuple(
        {
            "weight": rng.normal(0, 1 / math.sqrt(n_in), (n_out, n_in)),
            "bias": rng.normal(0, 0.5, n_out),
        }
        for n_in, n_out in zip(sizes[:-1], sizes[1:], strict=False)
    )


def numpy_mlp(weights, activation, x):
    """depth hidden layers with `activation`, then a linear layer; x is [batch, in]."""
    for layer in weights[:-1]:
        x = NUMPY_ACTIVATIONS[activation](x @ layer["weight"].T + layer["bias"])
    return x @ weights[-1]["weight"].T + weights[-1]["bias"]


def as_jax(tree):
    return jax.tree.map(jnp.asarray, tree)


@reference("neural_ode", tuple(sorted(NUMPY_ACTIVATIONS)))
def _(rng, activation):
    # dy/dt = MLP(features(y)), features identity (y) or cubic (y^3)
    i = sorted(NUMPY_ACTIVATIONS).index(activation)
    n, width, depth = 1 + i % 3, 3 + i, 1 + i % 2
    features = ("identity", "cubic")[i % 2]
    names = tuple(f"y{j}" for j in range(n))
    model = sim.get_model(
        "neural_ode",
        state_names=names,
        width=width,
        depth=depth,
        activation=activation,
        features=features,
    )
    weights = random_mlp(rng, (n,) + (width,) * depth + (n,))
    params = full_params(model, net=as_jax(weights))
    y = rng.normal(0, 1.5, (16, n))
    want = numpy_mlp(weights, activation, y if features == "identity" else y**3)
    return [
        (f"{features}: {what}", got, ref) for what, got, ref in ode_cases(model, params, y, want)
    ]


@reference("hybrid_lotka_volterra")
def _(rng, variant):
    # dx/dt = alpha x + c_x, dy/dt = -gamma y + c_y, (c_x, c_y) = scale MLP((x, y) / scale)
    scale, a, g = 13.0, rng.uniform(0.3, 1.0), rng.uniform(0.5, 1.2)
    model = sim.get_model(
        "hybrid_lotka_volterra", width=5, depth=2, activation="softplus", scale=scale
    )
    weights = random_mlp(rng, (2, 5, 5, 2))
    params = full_params(model, alpha=a, gamma=g, net=as_jax(weights))
    y = rng.uniform(0.5, 60.0, (16, 2))
    want = np.stack([a * y[:, 0], -g * y[:, 1]], 1) + scale * numpy_mlp(
        weights, "softplus", y / scale
    )
    return ode_cases(model, params, y, want)


# ------------------------------------------------------------------- spectral PDE models


@dataclasses.dataclass(frozen=True)
class FourierSeries:
    """u(x) = mean + sum_m Re(c_m exp(i k_m . x)), k_m = 2 pi m / L, x the absolute
    coordinate; derivatives are taken term by term."""

    lengths: np.ndarray  # [dim]
    modes: np.ndarray  # [modes, dim] integer mode vectors m
    coefficients: np.ndarray  # [modes] complex c_m
    mean: float = 0.0

    @classmethod
    def random(
        cls, rng, domain, band: int, *, mean: float = 0.0, amplitude: float = 1.0
    ) -> FourierSeries:
        """Random c_m on every mode vector of one half space with |m_i| <= band."""
        modes = [
            m
            for m in itertools.product(range(-band, band + 1), repeat=len(domain))
            if any(m) and next(v for v in m if v) > 0
        ]
        c = (
            amplitude
            * (rng.normal(size=len(modes)) + 1j * rng.normal(size=len(modes)))
            / math.sqrt(len(modes))
        )
        return cls(np.array([b - a for a, b in domain]), np.array(modes, dtype=float), c, mean)

    @property
    def wavevectors(self) -> np.ndarray:
        return 2 * np.pi * self.modes / self.lengths  # [modes, dim]

    def d(self, *orders: int) -> FourierSeries:
        """The partial derivative of order orders[i] along axis i."""
        factor = np.prod((1j * self.wavevectors) ** np.array(orders), axis=1)
        return dataclasses.replace(
            self, coefficients=self.coefficients * factor, mean=0.0 if any(orders) else self.mean
        )

    def laplacian(self) -> FourierSeries:
        return dataclasses.replace(
            self, coefficients=-np.sum(self.wavevectors**2, axis=1) * self.coefficients, mean=0.0
        )

    def __call__(self, mesh) -> np.ndarray:
        phase = sum(
            k[:, None] * x.reshape(1, -1) for k, x in zip(self.wavevectors.T, mesh, strict=False)
        )
        values = self.mean + np.real(self.coefficients @ np.exp(1j * phase))
        return values.reshape(mesh[0].shape)


def periodic_mesh(model) -> list[np.ndarray]:
    """The nodes low + j L / n, j = 0..n-1, per axis ('ij'), as the spectral family documents."""
    return np.meshgrid(
        *(
            a + (b - a) * np.arange(n) / n
            for (a, b), n in zip(model.domain, model.points, strict=False)
        ),
        indexing="ij",
    )


def spectral_rhs(model, params, u) -> np.ndarray:
    """L u + N(u) of a spectral model, in physical space [C, *points]."""
    grid = FourierGrid(model.points, model.domain)

    @jax.jit  # one compilation instead of op-by-op dispatch
    def rhs(params, u):
        u_hat = grid.rfft(u)
        with jax.numpy_dtype_promotion(
            "standard"
        ):  # a real symbol times a complex field, as the solver does
            rhs_hat = model.linear(params, grid) * u_hat + model.nonlinear(u_hat, params, grid)
        return grid.irfft(rhs_hat)

    return np.asarray(rhs(params, jnp.asarray(u)))


def pde_cases(label, model, params, u, want) -> list[Case]:
    got = spectral_rhs(model, params, np.stack(u))
    return [(f"{label} {name}_t", got[c], want[c]) for c, name in enumerate(model.field_names)]


def grid_of(rng, points):
    """A random domain per axis, not starting at 0 (phase errors show)."""
    return [
        [float(a), float(a + rng.uniform(1.0, 7.0))] for a in rng.uniform(-3.0, 3.0, len(points))
    ]


# (points, band) per dimension; the band is below a sixth of every axis's points, so that
# even cubic products stay below the Nyquist mode.
GRIDS = {"1d": ([32], 5), "2d": ([20, 16], 2), "3d": ([8, 8, 12], 1)}


@reference("heat", tuple(GRIDS))
def _(rng, dims):
    # u_t = D Laplacian(u)
    points, band = GRIDS[dims]
    model = sim.get_model("heat", points=points, domain=grid_of(rng, points))
    D = rng.uniform(0.05, 2.0)
    series = FourierSeries.random(rng, model.domain, band, mean=rng.normal())
    mesh = periodic_mesh(model)
    return pde_cases(
        dims,
        model,
        full_params(model, diffusivity=D),
        [series(mesh)],
        [D * series.laplacian()(mesh)],
    )


@reference("advection_diffusion", tuple(GRIDS))
def _(rng, dims):
    # u_t + velocity (direction . grad u) = D Laplacian(u), direction normalised (default:
    # the first axis)
    points, band = GRIDS[dims]
    direction = {"1d": None, "2d": (1.0, -2.0), "3d": (0.3, 0.0, 1.0)}[dims]
    model = sim.get_model(
        "advection_diffusion", points=points, domain=grid_of(rng, points), direction=direction
    )
    c, D = rng.uniform(-3.0, 3.0), rng.uniform(0.01, 1.0)
    n = np.array(direction or (1.0,)) / np.linalg.norm(direction or (1.0,))
    series = FourierSeries.random(rng, model.domain, band, mean=rng.normal())
    mesh = periodic_mesh(model)
    grad = [series.d(*np.eye(len(points), dtype=int)[i])(mesh) for i in range(len(points))]
    want = -c * sum(ni * gi for ni, gi in zip(n, grad, strict=False)) + D * series.laplacian()(mesh)
    return pde_cases(
        dims, model, full_params(model, velocity=c, diffusivity=D), [series(mesh)], [want]
    )


@reference("burgers", ("1d", "2d"))
def _(rng, dims):
    # 1D: u_t + (u^2 / 2)_x = nu u_xx; 2D: u_t + (u . grad) u = nu Laplacian(u) per component
    points, band = GRIDS[dims]
    model = sim.get_model("burgers", points=points, domain=grid_of(rng, points))
    params = full_params(model, viscosity=(nu := rng.uniform(0.01, 0.5)))
    mesh = periodic_mesh(model)
    if dims == "1d":
        u = FourierSeries.random(rng, model.domain, band, mean=rng.normal())
        return pde_cases(
            dims, model, params, [u(mesh)], [-u(mesh) * u.d(1)(mesh) + nu * u.d(2)(mesh)]
        )
    u, v = (FourierSeries.random(rng, model.domain, band, mean=rng.normal()) for _ in range(2))
    advect = lambda f: u(mesh) * f.d(1, 0)(mesh) + v(mesh) * f.d(0, 1)(mesh)  # noqa: E731
    want = [-advect(u) + nu * u.laplacian()(mesh), -advect(v) + nu * v.laplacian()(mesh)]
    return pde_cases(dims, model, params, [u(mesh), v(mesh)], want)


@reference("kdv")
def _(rng, variant):
    # u_t + a u u_x + b u_xxx = 0
    model = sim.get_model("kdv", points=[32], domain=grid_of(rng, [32]))
    a, b = rng.uniform(-6.0, 6.0), rng.uniform(0.1, 2.0)
    u = FourierSeries.random(rng, model.domain, 7, mean=rng.normal())
    mesh = periodic_mesh(model)
    want = -a * u(mesh) * u.d(1)(mesh) - b * u.d(3)(mesh)
    return pde_cases(
        "1d", model, full_params(model, nonlinearity=a, dispersion=b), [u(mesh)], [want]
    )


@reference("kuramoto_sivashinsky")
def _(rng, variant):
    # u_t + (a / 2) (u^2)_x + p u_xx + q u_xxxx = 0
    model = sim.get_model("kuramoto_sivashinsky", points=[32], domain=grid_of(rng, [32]))
    a, p, q = rng.uniform(-2.0, 2.0), rng.uniform(-1.0, 2.0), rng.uniform(0.1, 2.0)
    u = FourierSeries.random(rng, model.domain, 7, mean=rng.normal())
    mesh = periodic_mesh(model)
    want = -a * u(mesh) * u.d(1)(mesh) - p * u.d(2)(mesh) - q * u.d(4)(mesh)
    params = full_params(model, nonlinearity=a, anti_diffusivity=p, hyper_diffusivity=q)
    return pde_cases("1d", model, params, [u(mesh)], [want])


@reference("allen_cahn", tuple(GRIDS))
def _(rng, dims):
    # u_t = D Laplacian(u) + r (u - u^3)
    points, band = GRIDS[dims]
    model = sim.get_model("allen_cahn", points=points, domain=grid_of(rng, points))
    D, r = rng.uniform(0.01, 1.0), rng.uniform(0.2, 3.0)
    u = FourierSeries.random(rng, model.domain, band, mean=rng.normal(0, 0.3), amplitude=0.8)
    mesh = periodic_mesh(model)
    want = D * u.laplacian()(mesh) + r * (u(mesh) - u(mesh) ** 3)
    return pde_cases(dims, model, full_params(model, diffusivity=D, rate=r), [u(mesh)], [want])


@reference("gray_scott", tuple(GRIDS))
def _(rng, dims):
    # u_t = D_u Laplacian(u) - u v^2 + F (1 - u), v_t = D_v Laplacian(v) + u v^2 - (F + k) v
    points, band = GRIDS[dims]
    model = sim.get_model("gray_scott", points=points, domain=grid_of(rng, points))
    F, k = rng.uniform(0.01, 0.08), rng.uniform(0.03, 0.08)
    du, dv = rng.uniform(1e-3, 1e-1, 2)  # distinct: swapping them changes the result
    u = FourierSeries.random(rng, model.domain, band, mean=0.7, amplitude=0.2)
    v = FourierSeries.random(rng, model.domain, band, mean=0.25, amplitude=0.1)
    mesh = periodic_mesh(model)
    uvv = u(mesh) * v(mesh) ** 2
    want = [
        du * u.laplacian()(mesh) - uvv + F * (1 - u(mesh)),
        dv * v.laplacian()(mesh) + uvv - (F + k) * v(mesh),
    ]
    params = full_params(model, feed=F, kill=k, diffusivity_u=du, diffusivity_v=dv)
    return pde_cases(dims, model, params, [u(mesh), v(mesh)], want)


@reference("navier_stokes_2d")
def _(rng, variant):
    # w_t + (u . grad) w = nu Laplacian(w) - mu w + f, (u, v) = (psi_y, -psi_x),
    # Laplacian(psi) = -w, f = -A n' cos(n' y), n' = 2 pi n / L_y
    points = [24, 20]
    domain = grid_of(rng, points)
    n = 3
    model = sim.get_model("navier_stokes_2d", points=points, domain=domain, forcing_mode=n)
    nu, mu, A = rng.uniform(1e-3, 0.1), rng.uniform(0.05, 0.5), rng.uniform(-2.0, 2.0)
    w = FourierSeries.random(
        rng, domain, 4
    )  # zero mean: the circulation around a periodic box vanishes
    mesh = periodic_mesh(model)
    psi = dataclasses.replace(
        w, coefficients=w.coefficients / np.sum(w.wavevectors**2, axis=1)
    )  # Laplacian(psi) = -w
    vx, vy = psi.d(0, 1)(mesh), -psi.d(1, 0)(mesh)
    k = 2 * np.pi * n / (domain[1][1] - domain[1][0])
    f = -A * k * np.cos(k * mesh[1])
    want = (
        -(vx * w.d(1, 0)(mesh) + vy * w.d(0, 1)(mesh)) + nu * w.laplacian()(mesh) - mu * w(mesh) + f
    )
    params = full_params(model, viscosity=nu, drag=mu, forcing=A)
    return pde_cases("2d", model, params, [w(mesh)], [want])


@reference("navier_stokes_3d", ("rotational", "advective"))
def _(rng, form):
    # u_t = P[-(u . grad) u] + nu Laplacian(u), P the projection onto divergence-free fields.
    # u = U0 + curl A for a random vector potential A, written as complex exponentials over
    # the full mode set (m and -m), so the product (u . grad) u is the explicit double sum
    # over pairs of modes and P acts on each product mode s as c - s (s . c) / |s|^2: no FFT.
    points = [8, 8, 12]
    domain = grid_of(rng, points)
    model = sim.get_model("navier_stokes_3d", points=points, domain=domain, form=form)
    nu = rng.uniform(1e-3, 0.2)
    half = [FourierSeries.random(rng, domain, 1) for _ in range(3)]  # A_x, A_y, A_z
    k_half = half[0].wavevectors  # [M, 3], the same modes for each component
    a_half = np.stack([s.coefficients for s in half], 1) / 2  # Re(c e^{ikx}) = (c e^{ikx} + cc) / 2
    u_half = np.cross(1j * k_half, a_half)  # curl A, mode by mode
    mean = rng.normal(size=3)
    k = np.concatenate([k_half, -k_half, np.zeros((1, 3))])  # [2M + 1, 3]
    u_hat = np.concatenate([u_half, np.conj(u_half), mean[None].astype(complex)])
    mesh = periodic_mesh(model)
    x = np.stack([m.reshape(-1) for m in mesh], 1)  # [nodes, 3]

    def evaluate(wavevectors, coefficients):  # sum_j c_j exp(i s_j . x), [3, *points]
        values = np.real(np.exp(1j * x @ wavevectors.T) @ coefficients)
        return values.T.reshape(3, *points)

    # -(u . grad) u = -sum_{p, q} (U_p . i k_q) U_q exp(i (k_p + k_q) . x)
    s = (k[:, None, :] + k[None, :, :]).reshape(-1, 3)
    c = (-(u_hat @ (1j * k).T)[:, :, None] * u_hat[None, :, :]).reshape(-1, 3)
    s2 = np.sum(s**2, 1, keepdims=True)
    projected = c - s * np.sum(s * c, 1, keepdims=True) / np.where(s2 == 0, 1.0, s2)
    projected = np.where(s2 == 0, c, projected)
    want = evaluate(s, projected) + nu * evaluate(k, -np.sum(k**2, 1, keepdims=True) * u_hat)
    velocity = evaluate(k, u_hat)
    return pde_cases(form, model, full_params(model, viscosity=nu), list(velocity), list(want))


# -------------------------------------------------------------- finite-difference models


def fd_cases(label, model, params, u, reaction) -> list[Case]:
    """D Laplacian(u) + R(u) of a grid model against the second-order stencil in NumPy,
    on every node of a periodic axis and the interior nodes of a bounded one."""
    grid = FdGrid(model.points, model.domain, model.boundary_kinds, model.boundary_values, order=2)

    @jax.jit  # one compilation instead of op-by-op dispatch
    def rhs(params, u):
        d = model.diffusivities(params).reshape((-1,) + (1,) * len(model.points))
        return d * grid.laplacian(u) + model.reaction(u, params)

    got = np.asarray(rhs(params, jnp.asarray(u)))
    d = np.asarray(model.diffusivities(params)).reshape((-1,) + (1,) * len(model.points))
    lap = np.zeros_like(u)
    keep = np.ones(u.shape, dtype=bool)
    for axis, ((a, b), n, (kind, _)) in enumerate(
        zip(model.domain, model.points, model.boundary_kinds, strict=False)
    ):
        h = (b - a) / n if kind == "periodic" else (b - a) / (n - 1)
        ax = axis + 1  # channel axis first
        lap += (np.roll(u, 1, ax) - 2 * u + np.roll(u, -1, ax)) / h**2
        if kind != "periodic":
            index = [slice(None)] * u.ndim
            index[ax] = [0, -1]
            keep[tuple(index)] = False
    want = d * lap + reaction(u)
    return [
        (f"{label} {name}_t", got[c][keep[c]], want[c][keep[c]])
        for c, name in enumerate(model.field_names)
    ]


FD_LAYOUTS = {
    "1d-periodic": ([17], "periodic"),
    "1d-dirichlet": ([15], "dirichlet"),
    "1d-neumann": ([15], "neumann"),
    "2d-periodic": ([9, 11], "periodic"),
    "2d-mixed": ([9, 11], [["neumann", "dirichlet"], "periodic"]),
}


@reference("heat_fd", tuple(FD_LAYOUTS))
def _(rng, layout):
    # u_t = D Laplacian(u)
    points, boundary = FD_LAYOUTS[layout]
    model = sim.get_model("heat_fd", points=points, domain=grid_of(rng, points), boundary=boundary)
    D = rng.uniform(0.05, 2.0)
    u = rng.normal(size=(1, *points))
    return fd_cases(layout, model, full_params(model, diffusivity=D), u, lambda u: 0 * u)


@reference("fisher_kpp", tuple(FD_LAYOUTS))
def _(rng, layout):
    # u_t = D Laplacian(u) + r u (1 - u)
    points, boundary = FD_LAYOUTS[layout]
    model = sim.get_model(
        "fisher_kpp", points=points, domain=grid_of(rng, points), boundary=boundary
    )
    D, r = rng.uniform(1e-3, 1.0), rng.uniform(0.2, 3.0)
    u = rng.uniform(-0.5, 1.5, size=(1, *points))
    return fd_cases(
        layout, model, full_params(model, diffusivity=D, rate=r), u, lambda u: r * u * (1 - u)
    )


# -------------------------------------------------------------------------- pair models


def scatter(rng, n: int, dim: int, box: float, min_distance: float, periodic: bool) -> np.ndarray:
    """n random points in [0, box)^dim, no two closer than min_distance (minimum image)."""
    points: list[np.ndarray] = []
    while len(points) < n:
        p = rng.uniform(0.0, box, dim)
        dr = np.asarray(points) - p if points else np.zeros((0, dim))
        if periodic:
            dr -= box * np.round(dr / box)
        if np.all(np.linalg.norm(dr, axis=1) >= min_distance):
            points.append(p)
    return np.asarray(points)


def symmetric(rng, low, high, n_species=2) -> np.ndarray:
    m = rng.uniform(low, high, (n_species, n_species))
    return np.triu(m) + np.triu(m, 1).T


def pair_sums(position, species, box, cutoff, values, phi, dphi, bonds=(), bond=None):
    """Energy, forces and virial sum r_ij . f_ij of a pair potential phi(r, p) with
    derivative dphi, p the per-pair parameter values, summed over i < j within cutoff
    (minimum image when box is given); plus bonds with energy bond(r) -> (e, de/dr)."""
    n = len(position)
    energy, virial, forces, inside = 0.0, 0.0, np.zeros_like(position), 0

    def add(i, j, e, de):
        nonlocal energy, virial
        dr = position[i] - position[j]
        if box is not None:
            dr -= box * np.round(dr / box)
        r = np.linalg.norm(dr)
        e, de = e(r), de(r)
        energy += e
        forces[i] -= de * dr / r
        forces[j] += de * dr / r
        virial -= de * r
        return e != 0.0

    for i, j in itertools.combinations(range(n), 2):
        dr = position[i] - position[j]
        if box is not None:
            dr -= box * np.round(dr / box)
        if np.linalg.norm(dr) < cutoff:
            p = {k: v[species[i], species[j]] for k, v in values.items()}
            inside += add(i, j, lambda r: phi(r, p), lambda r: dphi(r, p))  # noqa: B023
    for i, j in bonds:
        add(i, j, lambda r: bond(r)[0], lambda r: bond(r)[1])
    return energy, forces, virial, inside


GEOMETRIES = ("periodic-3d", "free-2d")


def pair_cases(
    rng, geometry, model, values, phi, dphi, *, min_distance=0.75, bonds=None, bond=None
) -> list[Case]:
    """Energy, forces and virial of the model against `pair_sums`, for two species in a
    periodic 3-D box or in free 2-D space."""
    periodic = geometry == "periodic-3d"
    dim, n = (3, 36) if periodic else (2, 20)
    box = max(2 * model.cutoff + 0.2, 4.5) if periodic else 5.0
    position = scatter(rng, n, dim, box, min_distance, periodic)
    species = rng.integers(0, 2, n)
    space = md.Periodic(jnp.full(dim, box)) if periodic else md.Free(ndim=dim)
    bond_pairs = np.zeros((0, 2), int) if bonds is None else bonds(n)
    system = md.System(
        jnp.asarray(position),
        jnp.zeros((n, dim)),
        jnp.ones(n),
        jnp.asarray(species, jnp.int32),
        space,
        None if bonds is None else jnp.asarray(bond_pairs, jnp.int32),
    )
    params = full_params(model, **values)
    model.check_params(system, params)

    @jax.jit  # one compilation instead of op-by-op dispatch
    def evaluate(system, params):
        return (
            model.interaction_energy(system, params),
            model.forces(system, params),
            model.virial(system, params),
        )

    energy, forces, virial = evaluate(system, params)
    pair_values = {k: np.broadcast_to(values[k], (2, 2)) for k in model.pair_parameters}
    e, f, w, inside = pair_sums(
        position,
        species,
        box if periodic else None,
        model.cutoff,
        pair_values,
        phi,
        dphi,
        bond_pairs,
        bond,
    )
    assert inside >= 10, f"only {inside} interacting pairs: the configuration tests too little"
    return [
        (f"{geometry} energy", energy, e),
        (f"{geometry} forces", forces, f),
        (f"{geometry} virial", virial, w),
    ]


def lj(r, p):
    s6 = (p["sigma"] / r) ** 6
    return 4 * p["epsilon"] * (s6 * s6 - s6)


def dlj(r, p):
    s6 = (p["sigma"] / r) ** 6
    return 4 * p["epsilon"] * (-12 * s6 * s6 + 6 * s6) / r


def wca(r, p):
    return np.where(r < 2 ** (1 / 6) * p["sigma"], lj(r, p) + p["epsilon"], 0.0)


def dwca(r, p):
    return np.where(r < 2 ** (1 / 6) * p["sigma"], dlj(r, p), 0.0)


LJ_OPTIONS = {"truncated": {}, "shifted": {"shift": True}, "force_shifted": {"force_shift": True}}


@reference("lennard_jones", tuple(f"{o}-{g}" for o in LJ_OPTIONS for g in GEOMETRIES))
def _(rng, variant):
    # phi(r) = 4 eps [(sigma/r)^12 - (sigma/r)^6], minus phi(rc) when shifted, minus also
    # (r - rc) phi'(rc) when force-shifted
    kind, geometry = variant.split("-", 1)
    options = LJ_OPTIONS[kind]
    rc = rng.uniform(2.0, 2.6)
    model = sim.get_model("lennard_jones", cutoff=rc, n_species=2, **options)
    values = {"epsilon": symmetric(rng, 0.5, 2.0), "sigma": symmetric(rng, 0.8, 1.2)}
    shift, slope = kind != "truncated", kind == "force_shifted"

    def phi(r, p):
        return lj(r, p) - shift * lj(rc, p) - slope * (r - rc) * dlj(rc, p)

    def dphi(r, p):
        return dlj(r, p) - slope * dlj(rc, p)

    return pair_cases(rng, geometry, model, values, phi, dphi)


@reference("wca", GEOMETRIES)
def _(rng, geometry):
    # phi(r) = 4 eps [(sigma/r)^12 - (sigma/r)^6] + eps for r < 2^(1/6) sigma, else 0
    model = sim.get_model("wca", cutoff=1.45, n_species=2)
    values = {"epsilon": symmetric(rng, 0.5, 2.0), "sigma": symmetric(rng, 0.85, 1.25)}
    return pair_cases(rng, geometry, model, values, wca, dwca, min_distance=0.7)


@reference("morse", tuple(f"{s}-{g}" for s in ("truncated", "shifted") for g in GEOMETRIES))
def _(rng, variant):
    # phi(r) = eps [(1 - exp(-alpha (r - r0)))^2 - 1], minus phi(rc) when shifted
    kind, geometry = variant.split("-", 1)
    rc = rng.uniform(1.8, 2.4)
    model = sim.get_model("morse", cutoff=rc, shift=kind == "shifted", n_species=2)
    values = {
        "epsilon": symmetric(rng, 0.5, 2.0),
        "alpha": symmetric(rng, 2.0, 6.0),
        "r0": symmetric(rng, 0.9, 1.3),
    }

    def morse(r, p):
        return p["epsilon"] * ((1 - np.exp(-p["alpha"] * (r - p["r0"]))) ** 2 - 1)

    def phi(r, p):
        return morse(r, p) - (kind == "shifted") * morse(rc, p)

    def dphi(r, p):
        x = np.exp(-p["alpha"] * (r - p["r0"]))
        return 2 * p["epsilon"] * p["alpha"] * x * (1 - x)

    return pair_cases(rng, geometry, model, values, phi, dphi, min_distance=0.6)


@reference("soft_sphere", GEOMETRIES)
def _(rng, geometry):
    # phi(r) = eps / alpha (1 - r / sigma)^alpha for r < sigma, else 0
    def phi(r, p):
        return np.where(
            r < p["sigma"],
            p["epsilon"] / p["alpha"] * np.abs(1 - r / p["sigma"]) ** p["alpha"],
            0.0,
        )

    def dphi(r, p):
        return np.where(
            r < p["sigma"],
            -p["epsilon"] / p["sigma"] * np.abs(1 - r / p["sigma"]) ** (p["alpha"] - 1),
            0.0,
        )

    model = sim.get_model("soft_sphere", cutoff=1.5, n_species=2)
    values = {
        "epsilon": symmetric(rng, 0.5, 2.0),
        "sigma": symmetric(rng, 1.0, 1.45),
        "alpha": symmetric(rng, 1.5, 3.0),
    }
    return pair_cases(rng, geometry, model, values, phi, dphi, min_distance=0.5)


@reference("lj_coulomb", ("ewald-periodic-3d",))
def _(rng, variant):
    # Lennard-Jones plus the Ewald sum of point charges with splitting parameter alpha
    # (Allen & Tildesley, Computer Simulation of Liquids, 2nd ed., sec. 6.2): pairs within
    # rc add q_i q_j erfc(alpha r) / r; every k = 2 pi n / L with 0 < max |n_a| <= kmax adds
    # 2 pi / (V k^2) exp(-k^2 / 4 alpha^2) |S(k)|^2, S(k) = sum_j q_j exp(i k . r_j); each
    # charge adds -alpha q^2 / sqrt(pi). The reciprocal virial is the trace of the Ewald
    # pressure tensor: sum_k A_k |S|^2 (1 - k^2 / (2 alpha^2)).
    from scipy.special import erfc

    n, rc, kmax = 24, rng.uniform(2.0, 2.3), (4, 5, 4)
    box = 2 * rc + 0.3
    alpha = rng.uniform(0.9, 1.3)
    model = sim.get_model(
        "lj_coulomb", cutoff=rc, electrostatics="ewald", ewald_alpha=alpha, ewald_kmax=kmax
    )
    q = rng.uniform(0.5, 1.5)
    values = {
        "epsilon": symmetric(rng, 0.5, 2.0),
        "sigma": symmetric(rng, 0.8, 1.2),
        "charges": np.array([q, -q]),
    }
    position = scatter(rng, n, 3, box, 0.8, True)
    species = rng.permutation(np.repeat([0, 1], n // 2))  # neutral
    charge = values["charges"][species]
    system = md.System(
        jnp.asarray(position),
        jnp.zeros((n, 3)),
        jnp.ones(n),
        jnp.asarray(species, jnp.int32),
        md.Periodic(jnp.full(3, box)),
    )
    params = full_params(model, **{k: v for k, v in values.items()})
    model.check_params(system, params)

    @jax.jit
    def evaluate(system, params):
        return (
            model.interaction_energy(system, params),
            model.forces(system, params),
            model.virial(system, params),
        )

    energy, forces, virial = evaluate(system, params)

    def phi(r, p):
        return lj(r, p) + p["qq"] * erfc(alpha * r) / r

    def dphi(r, p):
        return dlj(r, p) - p["qq"] * (
            erfc(alpha * r) / r**2 + 2 * alpha / np.sqrt(np.pi) * np.exp(-((alpha * r) ** 2)) / r
        )

    pair_values = {
        "epsilon": values["epsilon"],
        "sigma": values["sigma"],
        "qq": np.outer(values["charges"], values["charges"]),
    }
    e, f, w, inside = pair_sums(position, species, box, rc, pair_values, phi, dphi)
    assert inside >= 10, f"only {inside} interacting pairs: the configuration tests too little"
    volume = box**3
    for nvec in itertools.product(*(range(-k, k + 1) for k in kmax)):
        if not any(nvec):
            continue
        k = 2 * np.pi * np.asarray(nvec) / box
        k2 = k @ k
        a = 4 * np.pi / k2 * np.exp(-k2 / (4 * alpha**2)) / (2 * volume)
        phase = np.exp(1j * position @ k)
        structure = np.sum(charge * phase)
        e += a * abs(structure) ** 2
        f += (2 * a * charge * np.imag(np.conj(structure) * phase))[:, None] * k
        w += a * abs(structure) ** 2 * (1 - k2 / (2 * alpha**2))
    e -= alpha / np.sqrt(np.pi) * np.sum(charge**2)
    return [
        ("periodic-3d energy", energy, e),
        ("periodic-3d forces", forces, f),
        ("periodic-3d virial", virial, w),
    ]


@reference("bead_spring", GEOMETRIES)
def _(rng, geometry):
    # WCA between all beads plus (1/2) bond_k (r - bond_length)^2 per bond
    k, length = rng.uniform(20.0, 200.0), rng.uniform(0.8, 1.2)
    model = sim.get_model("bead_spring", cutoff=1.45, n_species=2)
    values = {
        "epsilon": symmetric(rng, 0.5, 2.0),
        "sigma": symmetric(rng, 0.85, 1.25),
        "bond_k": k,
        "bond_length": length,
    }

    def chains(n):  # chains of 4 beads: 0-1-2-3, 4-5-6-7, ...
        return np.array([(i, i + 1) for i in range(n - 1) if (i + 1) % 4])

    def bond(r):
        return 0.5 * k * (r - length) ** 2, k * (r - length)

    return pair_cases(
        rng, geometry, model, values, wca, dwca, min_distance=0.7, bonds=chains, bond=bond
    )


# ---------------------------------------------------------------------------------- SDE


def sde_cases(rng, name: str, equations) -> list[Case]:
    """Drift and diffusion at random states and parameters of either sign (the equations
    hold for any values) against `equations(y, p) -> (drift, diffusion)`."""
    model = sim.get_model(name)
    # One program for the three draws (traced once), instead of op-by-op dispatch.
    terms = jax.jit(lambda t, y, p: (model.drift(t, y, p), model.diffusion(t, y, p)))
    cases = []
    for i in range(3):
        p = {k: rng.uniform(-2.0, 2.0) for k in model.parameter_names}
        y = rng.uniform(-3.0, 3.0, len(model.state_names))
        t, jp, jy = (
            jnp.asarray(rng.uniform(0.0, 10.0)),
            {k: jnp.asarray(v) for k, v in p.items()},
            jnp.asarray(y),
        )
        drift, diffusion = equations(y, p)
        got_drift, got_diffusion = terms(t, jy, jp)
        cases += [(f"drift {i}", got_drift, drift), (f"diffusion {i}", got_diffusion, diffusion)]
    return cases


@reference("ornstein_uhlenbeck")
def _(rng, variant):
    # dx = theta (mu - x) dt + sigma dW
    return sde_cases(
        rng, "ornstein_uhlenbeck", lambda y, p: (p["theta"] * (p["mu"] - y), np.full(1, p["sigma"]))
    )


@reference("geometric_brownian_motion")
def _(rng, variant):
    # dx = mu x dt + sigma x dW
    return sde_cases(rng, "geometric_brownian_motion", lambda y, p: (p["mu"] * y, p["sigma"] * y))


@reference("stochastic_lotka_volterra")
def _(rng, variant):
    # Lotka-Volterra drift; d prey += sigma_prey prey dW1, d predator += sigma_predator predator dW2
    def equations(y, p):
        prey, predator = y
        drift = [
            p["alpha"] * prey - p["beta"] * prey * predator,
            p["delta"] * prey * predator - p["gamma"] * predator,
        ]
        return np.array(drift), np.array([p["sigma_prey"] * prey, p["sigma_predator"] * predator])

    return sde_cases(rng, "stochastic_lotka_volterra", equations)


# ---------------------------------------------------------------------------------- tests


CASES = [
    pytest.param(name, variant, id=f"{name}-{variant}" if variant else name)
    for name, (_, variants) in sorted(REFERENCES.items())
    for variant in variants
]


@pytest.mark.parametrize("name, variant", CASES)
def test_right_hand_side_matches_the_numpy_reference(name, variant):
    rng = np.random.default_rng(zlib.crc32(f"{name}/{variant}".encode()))
    fn, _ = REFERENCES[name]
    errors = {what: relative_error(got, want) for what, got, want in fn(rng, variant)}
    worst = max(errors, key=errors.get)
    assert errors[worst] < RTOL, (
        f"{name} [{variant}] {worst}: relative error {errors[worst]:.2e} (all: {errors})"
    )


@pytest.mark.parametrize("name", sim.model_names())
def test_every_registered_model_has_a_reference(name):
    assert name in REFERENCES, (
        f"model {name!r} is registered but has no NumPy reference of its right-hand side in "
        f"tests/physics/test_rhs_reference.py: add one (@reference({name!r}))"
    )


def test_every_reference_is_of_a_registered_model():
    assert set(REFERENCES) <= set(sim.model_names())
