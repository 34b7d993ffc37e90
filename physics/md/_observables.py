"""Observables of particle configurations and trajectories: energies, temperature,
pressure, radial distribution function, mean squared displacement, velocity
autocorrelation and the self-diffusion coefficient. Reduced units (k_B = 1)."""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array, Float, Int

from ._space import Space
from ._types import Masses, Positions, Scalar, ScalarLike, Velocities


def kinetic_energy(velocity: Velocities, mass: Masses) -> Scalar:
    """Total kinetic energy sum m v^2 / 2.

    Arguments:
        velocity: velocities [n, dim].
        mass: masses [n].

    Returns:
        The kinetic energy K, a scalar (energy units: mass times velocity squared).
    """
    return 0.5 * jnp.sum(mass[:, None] * velocity * velocity)


def temperature(velocity: Velocities, mass: Masses, degrees_of_freedom: int) -> Scalar:
    """Kinetic temperature 2 K / N_f (N_f = dim n, less dim when momentum is conserved).

    Arguments:
        velocity: velocities [n, dim].
        mass: masses [n].
        degrees_of_freedom: N_f.

    Returns:
        The temperature, a scalar (an energy: k_B = 1).
    """
    return 2.0 * kinetic_energy(velocity, mass) / degrees_of_freedom


def pressure(kinetic: Scalar, virial: Scalar, space: Space) -> Scalar:
    """Virial pressure P = (2 K + W) / (dim V), W = sum over pairs of r_ij . f_ij (NaN in free
    space).

    Arguments:
        kinetic: the kinetic energy K.
        virial: the virial W (an energy).
        space: the simulation space (its dimension and volume V).

    Returns:
        The pressure, a scalar (energy per unit volume; per unit area in 2-D).
    """
    return (2.0 * kinetic + virial) / (space.dim * space.volume())


def number_density(n: int, volume: Scalar) -> Scalar:
    """Particles per unit volume (area in 2-D), n / V (NaN in free space, whose volume is NaN)."""
    return n / volume


def rdf_pairs(n_species: int) -> tuple[tuple[int, int], ...]:
    """The species pairs (a, b), a <= b, in the order of the rows of a g(r) with several
    species: (0, 0), (0, 1), ..., (1, 1), ..."""
    return tuple((a, b) for a in range(n_species) for b in range(a, n_species))


def radial_distribution(
    positions: Float[Array, "T n dim"] | Positions,
    space: Space,
    *,
    bins: int = 100,
    r_max: float | None = None,
    smoothing: float = 0.0,
    species: Int[Array, " n"] | None = None,
    n_species: int = 1,
) -> tuple[Float[Array, " bins"], Float[Array, "*pairs bins"]]:
    """Radial distribution function g(r) of a periodic system, averaged over frames.

    Arguments:
        positions: one configuration [n, dim] or frames [T, n, dim].
        space: a periodic space.
        bins: number of histogram bins.
        r_max: largest distance (default and maximum: half the shortest box edge).
        smoothing: standard deviation of a Gaussian kernel in bin widths over which
            each pair is spread (`radial_distribution_frames`), so that g is
            differentiable with respect to the positions (0: the plain histogram).
        species: each particle's species [n] (default: all 0), with `n_species` species.

    Returns:
        Bin centres [bins] and g(r): [bins] for one species, else [pairs, bins] with the
        pairs of `rdf_pairs` (-> 1 at large r in a fluid, and 1 at every r for an ideal
        gas: the normalisation counts the N_a (N_b - 1) ordered pairs of one species, as
        MDAnalysis's InterRDF does with its diagonal excluded).
    """
    if not space.periodic:
        raise ValueError("radial_distribution needs a periodic space (the density must be defined)")
    frames = positions[None] if positions.ndim == 2 else positions
    half = 0.5 * jnp.min(space.box)
    r_max = half if r_max is None else jnp.minimum(r_max, half)
    edges = jnp.broadcast_to(space.box, (frames.shape[0], frames.shape[2]))
    centres, g = radial_distribution_frames(
        frames,
        edges,
        r_max=r_max,
        bins=bins,
        smoothing=smoothing,
        species=species,
        n_species=n_species,
    )
    g = jnp.mean(g, axis=0)
    return centres, g[0] if n_species == 1 else g


def radial_distribution_frames(
    positions: Float[Array, "T n dim"],
    edges: Float[Array, "T dim"],
    *,
    r_max: ScalarLike,
    bins: int,
    smoothing: float = 0.0,
    species: Int[Array, " n"] | None = None,
    n_species: int = 1,
) -> tuple[Float[Array, " bins"], Float[Array, "T pairs bins"]]:
    """g(r) of each frame in its own periodic box (minimum image), for every species pair.

    Each pair at distance r spreads a unit weight over the bins around its own, in
    proportion to a Gaussian of standard deviation `smoothing` x the bin width centred
    at r, taken at the bin centres within about six standard deviations (all of it in
    its own bin when `smoothing` is 0); weight that falls beyond the last bin is lost.
    Bin k of the pair (a, b) is then divided by what an ideal gas gives, N_a N_b / V
    (N_a (N_a - 1) / V for a = b) times the volume of the shell. Pairs are walked a block at a time
    (about 2^16 pair and bin entries), so memory stays small for any n.

    Arguments:
        positions: frames [T, n, dim] (wrapped or not).
        edges: each frame's box edges [T, dim].
        r_max: the largest distance; the bins are [k, k + 1] r_max / bins.
        bins, smoothing, species, n_species: as for `radial_distribution`.

    Returns:
        Bin centres [bins] and g [T, pairs, bins] (pairs as in `rdf_pairs`).
    """
    t, n, dim = positions.shape
    dtype = positions.dtype
    width = jnp.asarray(r_max, dtype) / bins
    species = jnp.zeros(n, jnp.int32) if species is None else jnp.asarray(species)
    pairs = rdf_pairs(n_species)
    table = np.zeros((n_species, n_species), np.int32)
    for k, (a, b) in enumerate(pairs):
        table[a, b] = table[b, a] = k
    reach = max(0, math.ceil(6.0 * smoothing - 0.5)) if smoothing > 0 else 0
    offsets = jnp.arange(-reach, reach + 1)
    kind = jnp.asarray(table, offsets.dtype)
    # Each particle i is paired with i + 1 .. i + n // 2 (mod n): every pair once, but
    # those n / 2 apart (n even) twice, so they weigh a half.
    shifts = n // 2
    block = max(1, min(shifts, (1 << 16) // (n * (2 * reach + 1))))  # shifts per block
    blocks = -(-shifts // block)
    ids = jnp.arange(n)
    last = len(pairs) * bins  # where masked contributions go
    near = [math.exp(-0.5 * (o / smoothing) ** 2) for o in range(reach + 1)] if reach else [1.0]

    def frame_counts(frame, box):
        def block_counts(b):
            m = 1 + b * block + jnp.arange(block)
            partner = (ids[None, :] + m[:, None]) % n
            d = frame[None, :, :] - frame[partner]
            d = d - box * jnp.round(d / box)
            r = jnp.sqrt(jnp.sum(d * d, axis=-1))  # [block, n]
            weight = jnp.where(m > shifts, 0.0, jnp.where(2 * m == n, 0.5, 1.0)).astype(dtype)[
                :, None
            ]
            j0 = jnp.floor(jax.lax.stop_gradient(r) / width).astype(offsets.dtype)
            j = j0[..., None] + offsets
            if reach:
                mass = _spread(r, j0, width, smoothing, reach, near, dtype)
            else:
                mass = jnp.ones(j.shape, dtype)
            ok = (j >= 0) & (j < bins) & (weight[..., None] > 0)
            slot = kind[species[None, :], species[partner]][..., None] * bins + j
            values = jnp.where(ok, mass * weight[..., None], 0.0)
            return (
                jnp.zeros(last + 1, dtype)
                .at[jnp.where(ok, slot, last).ravel()]
                .add(values.ravel())[:last]
            )

        return jnp.sum(jax.lax.map(block_counts, jnp.arange(blocks)), axis=0).reshape(
            len(pairs), bins
        )

    counts = jax.lax.map(
        lambda a: frame_counts(*a), (positions, edges.astype(dtype))
    )  # [T, pairs, bins]
    return _normalised(counts, edges, species, pairs, width, bins, n_species, dim, dtype)


def _spread(r, j0, width, smoothing: float, reach: int, near: list[float], dtype):
    """Each pair's unit weight over the bins j0 - reach .. j0 + reach around its own: a
    Gaussian of `smoothing` bin widths centred at its distance `r` (`near`: the
    Gaussian's factor e^{-o^2 a^2 / 2} of each offset o), normalised to sum to 1."""
    # exp(-(o a - u)^2 / 2) for the offsets o, a = 1 / smoothing, u the
    # distance from the centre of bin j0 in kernel widths: two exponentials
    # and products per pair, e^{-u^2/2} q^o e^{-o^2 a^2 / 2} with q = e^{a u}.
    u = (r - (j0.astype(dtype) + 0.5) * width) / (smoothing * width)
    base = jnp.exp(-0.5 * u * u)
    q = jnp.exp(u / smoothing)
    up, down = [base], [base]
    for o in range(1, reach + 1):  # noqa: B007 (a count)
        up.append(up[-1] * q)
        down.append(down[-1] / q)
    terms = [down[-o] * near[-o] for o in range(-reach, 0)] + [
        up[o] * near[o] for o in range(reach + 1)
    ]
    kernel = jnp.stack(terms, axis=-1)
    return kernel / jnp.sum(kernel, axis=-1, keepdims=True)


def _normalised(counts, edges, species, pairs, width, bins: int, n_species: int, dim: int, dtype):
    """Bin centres [bins] and g [T, pairs, bins]: each frame's pair counts over what an
    ideal gas of its density gives in each shell."""
    bounds = jnp.arange(bins + 1, dtype=dtype) * width
    shell = _shell_volume(bounds, dim)
    number = jnp.bincount(species, length=n_species).astype(dtype)
    a, b = (np.array([p[k] for p in pairs]) for k in (0, 1))
    ordered = np.where(
        a == b, 2.0, 1.0
    )  # unordered pairs of one species count twice as ordered pairs
    volume = jnp.prod(edges.astype(dtype), axis=1)
    ideal = (
        (number[a] * (number[b] - jnp.asarray(a == b, dtype)))[None, :, None]
        / volume[:, None, None]
        * shell[None, None, :]
    )
    centres = 0.5 * (bounds[1:] + bounds[:-1])
    return centres, jnp.asarray(ordered, dtype)[None, :, None] * counts / ideal


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


def velocity_autocorrelation(
    velocities: Float[Array, "T n dim"], *, normalize: bool = False
) -> Float[Array, " T"]:
    """VACF(t) = <v_i(t) . v_i(0)>, averaged over particles and time origins [T]
    (divided by its value at lag 0 when `normalize`).

    Arguments:
        velocities: velocities at equally spaced times [T, n, dim].
        normalize: divide by the value at lag 0, so that VACF(0) = 1.

    Returns:
        The VACF at lags 0 .. T-1 [T] (velocity squared, or dimensionless when
        `normalize`).
    """
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
    """Self-diffusion coefficient D = (1/dim) integral of the VACF (trapezoidal rule).

    Arguments:
        vacf: the unnormalised VACF at lags 0 .. T-1 [T] (`velocity_autocorrelation`).
        dt: the time between frames.
        dim: the dimension of space.

    Returns:
        D, a scalar (length squared per unit time).
    """
    return (jnp.sum(vacf) - 0.5 * (vacf[0] + vacf[-1])) * dt / dim


def block_average(values: Float[Array, " T"] | np.ndarray, blocks: int = 10) -> tuple[float, float]:
    """Mean and its standard error from `blocks` block means (for correlated samples).

    Arguments:
        values: the samples [T], in order; the last T mod `blocks` are left out.
        blocks: the number of blocks of T // blocks consecutive samples.

    Returns:
        (mean of the block means, their standard deviation over sqrt(blocks)), as
        Python floats in the units of `values`.

    Raises:
        ValueError: fewer samples than blocks.
    """
    v = np.asarray(values, dtype=float)
    size = len(v) // blocks
    if size < 1:
        raise ValueError(f"need at least {blocks} samples for {blocks} blocks, got {len(v)}")
    means = v[: size * blocks].reshape(blocks, size).mean(axis=1)
    return float(means.mean()), float(means.std(ddof=1) / math.sqrt(blocks))
