"""Observables of particle configurations and trajectories: energies, temperature,
pressure, radial distribution function, mean squared displacement, velocity
autocorrelation and the self-diffusion coefficient. Reduced units (k_B = 1)."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float

from ._space import Space
from ._types import Masses, Positions, Scalar, Velocities


def kinetic_energy(velocity: Velocities, mass: Masses) -> Scalar:
    """Total kinetic energy sum m v^2 / 2."""
    return 0.5 * jnp.sum(mass[:, None] * velocity * velocity)


def temperature(velocity: Velocities, mass: Masses, degrees_of_freedom: int) -> Scalar:
    """Kinetic temperature 2 K / N_f (N_f = dim n, less dim when momentum is conserved)."""
    return 2.0 * kinetic_energy(velocity, mass) / degrees_of_freedom


def pressure(kinetic: Scalar, virial: Scalar, space: Space) -> Scalar:
    """Virial pressure P = (2 K + W) / (dim V), W = sum over pairs of r_ij . f_ij (NaN in free space)."""
    return (2.0 * kinetic + virial) / (space.dim * space.volume())


def number_density(n: int, volume: Scalar) -> Scalar:
    """Particles per unit volume (area in 2-D), n / V (NaN in free space, whose volume is NaN)."""
    return n / volume


def radial_distribution(
    positions: Float[Array, "T n dim"] | Positions,
    space: Space,
    *,
    bins: int = 100,
    r_max: float | None = None,
) -> tuple[Float[Array, " bins"], Float[Array, " bins"]]:
    """Radial distribution function g(r) of a periodic system, averaged over frames.

    Arguments:
        positions: one configuration [n, dim] or frames [T, n, dim].
        space: a periodic space.
        bins: number of histogram bins.
        r_max: largest distance (default and maximum: half the shortest box edge).

    Returns:
        Bin centres [bins] and g(r) [bins] (-> 1 at large r in a fluid).
    """
    if not space.periodic:
        raise ValueError("radial_distribution needs a periodic space (the density must be defined)")
    frames = positions[None] if positions.ndim == 2 else positions
    t, n, dim = frames.shape
    half = 0.5 * jnp.min(space.box)
    r_max = half if r_max is None else jnp.minimum(r_max, half)
    edges = jnp.linspace(0.0, 1.0, bins + 1) * r_max
    iu = jnp.triu_indices(n, k=1)

    def histogram(frame):
        dr = space.displacement(frame[:, None, :] - frame[None, :, :])
        r = jnp.sqrt(jnp.sum(dr * dr, axis=-1))[iu]
        counts, _ = jnp.histogram(r, bins=edges)
        return counts

    counts = jnp.sum(jax.lax.map(histogram, frames), axis=0)
    shell = _shell_volume(edges, dim)
    density = n / space.volume()
    ideal = 0.5 * n * density * shell * t
    centres = 0.5 * (edges[1:] + edges[:-1])
    return centres, counts / ideal


def _shell_volume(edges, dim: int):
    unit = math.pi ** (dim / 2) / math.gamma(dim / 2 + 1)
    return unit * (edges[1:] ** dim - edges[:-1] ** dim)


def mean_squared_displacement(positions: Float[Array, "T n dim"]) -> Float[Array, " T"]:
    """MSD(t) = <|r_i(t) - r_i(0)|^2>, averaged over particles and all time origins.

    Uses the FFT form MSD(m) = S1(m) - 2 S2(m) (Calandrini et al., Collection SFN 12, 201
    (2011)): S1 from cumulative sums of |r|^2, S2 the positional autocorrelation. O(T log T).

    Arguments:
        positions: unwrapped positions at equally spaced times [T, n, dim] (trajectory
            positions are never wrapped into the box, so they can be used directly).

    Returns:
        MSD at lags 0 .. T-1 [T].
    """
    t = positions.shape[0]
    x = positions - positions[0]
    d = jnp.sum(x * x, axis=-1)  # [T, n]
    c = jnp.concatenate([jnp.zeros_like(d[:1]), jnp.cumsum(d, axis=0)], axis=0)
    lags = jnp.arange(t)
    counts = (t - lags).astype(positions.dtype)
    s1 = (c[t - lags] + c[t] - c[lags]) / counts[:, None]
    s2 = jnp.sum(_autocorrelation(x), axis=-1) / counts[:, None]
    return jnp.mean(s1 - 2.0 * s2, axis=1)


def _autocorrelation(x: Float[Array, "T ..."]) -> Float[Array, "T ..."]:
    """sum_t x(t) x(t + m) for every lag m, per trailing index (zero-padded FFT)."""
    t = x.shape[0]
    size = 1 << (2 * t - 1).bit_length()
    f = jnp.fft.rfft(x, n=size, axis=0)
    return jnp.fft.irfft(f * jnp.conj(f), n=size, axis=0)[:t]


def velocity_autocorrelation(velocities: Float[Array, "T n dim"], *, normalize: bool = False) -> Float[Array, " T"]:
    """VACF(t) = <v_i(t) . v_i(0)>, averaged over particles and time origins [T]
    (divided by its value at lag 0 when `normalize`)."""
    t = velocities.shape[0]
    counts = (t - jnp.arange(t)).astype(velocities.dtype)
    c = jnp.mean(jnp.sum(_autocorrelation(velocities), axis=-1), axis=1) / counts
    return c / c[0] if normalize else c


def diffusion_coefficient(
    msd: Float[Array, " T"],
    dt: float,
    *,
    dim: int = 3,
    start: float = 0.2,
    stop: float = 0.8,
) -> Scalar:
    """Self-diffusion coefficient from the Einstein relation MSD(t) ~ 2 dim D t, by a
    least-squares line through the lags between `start` and `stop` (fractions of the
    trajectory), which skips the ballistic start and the noisy end.

    Arguments:
        msd: from `mean_squared_displacement` [T].
        dt: time between frames.
    """
    t = msd.shape[0]
    lo, hi = int(start * (t - 1)), max(int(stop * (t - 1)), int(start * (t - 1)) + 2)
    lags = jnp.arange(lo, hi).astype(msd.dtype) * dt
    y = msd[lo:hi]
    slope = jnp.sum((lags - lags.mean()) * (y - y.mean())) / jnp.sum((lags - lags.mean()) ** 2)
    return slope / (2 * dim)


def green_kubo_diffusion(vacf: Float[Array, " T"], dt: float, *, dim: int = 3) -> Scalar:
    """Self-diffusion coefficient D = (1/dim) integral of the VACF (trapezoidal rule)."""
    return (jnp.sum(vacf) - 0.5 * (vacf[0] + vacf[-1])) * dt / dim


def block_average(values: Float[Array, " T"] | np.ndarray, blocks: int = 10) -> tuple[float, float]:
    """Mean and its standard error from `blocks` block means (for correlated samples)."""
    v = np.asarray(values, dtype=float)
    size = len(v) // blocks
    if size < 1:
        raise ValueError(f"need at least {blocks} samples for {blocks} blocks, got {len(v)}")
    means = v[: size * blocks].reshape(blocks, size).mean(axis=1)
    return float(means.mean()), float(means.std(ddof=1) / math.sqrt(blocks))


