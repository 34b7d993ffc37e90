"""Named initial fields of the PDE models against their docstrings and their physics.

Each field is rebuilt here with NumPy from the formula its docstring states, on nodes
written from the family's docstring (periodic: low + j L / n; bounded: both ends
included), on grids that are not square and domains that do not start at 0, with
option values that are not the defaults, so that a swapped axis, operator or bound
shows. Where the field has a physical meaning it is checked too: the Taylor-Green
velocity is divergence free and its curl is the stated vorticity, the Taylor-Green
vorticity is minus the Laplacian of its streamfunction, the KdV soliton travels
unchanged, a gaussian has its centre and width as moments, Pearson's square has its
area and its noise bounds. Derivatives are spectral (NumPy FFT, written here).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import sim

# A box that starts away from 0 and is longer along y: a swapped axis, a missing
# `- low` or a length taken as high instead of high - low changes the field.
DOMAIN_2D = [[-1.0, 2.0], [0.5, 4.5]]


def periodic_nodes(domain, points) -> list[np.ndarray]:
    """low + j L / n, j = 0..n-1 per axis, broadcast ('ij'), as the spectral family documents."""
    return np.meshgrid(
        *(a + (b - a) * np.arange(n) / n for (a, b), n in zip(domain, points, strict=False)),
        indexing="ij",
    )


def bounded_nodes(domain, points) -> list[np.ndarray]:
    """low + j L / (n - 1), j = 0..n-1 per axis (both ends), as the grid family documents."""
    return np.meshgrid(
        *(np.linspace(a, b, n) for (a, b), n in zip(domain, points, strict=False)), indexing="ij"
    )


def derivative(u: np.ndarray, axis: int, length: float, order: int = 1) -> np.ndarray:
    """d^order u / dx_axis^order of a periodic field by FFT (the Nyquist mode dropped
    for odd orders)."""
    n = u.shape[axis]
    m = np.fft.fftfreq(n, 1.0 / n)
    symbol = (2j * np.pi * m / length) ** order
    if order % 2:
        symbol[n // 2] = 0.0
    shape = [1] * u.ndim
    shape[axis] = n
    return np.real(np.fft.ifft(np.fft.fft(u, axis=axis) * symbol.reshape(shape), axis=axis))


# ----------------------------------------------------------------------------- generic kinds


@pytest.mark.parametrize(
    "points, domain",
    [([16, 12], DOMAIN_2D), ([8, 6, 10], [[-1.0, 2.0], [0.5, 4.5], [-3.0, -1.5]])],
    ids=["2d", "3d"],
)
def test_sine_and_cosine_are_products_of_one_mode_per_axis(points, domain):
    # u = offset + A prod_i sin(2 pi m_i (x_i - low_i) / L_i), and the same with cos.
    model = sim.get_model("heat", points=points, domain=domain)
    mesh = periodic_nodes(domain, points)
    modes, amplitude, offset = [2, 3, 1][: len(points)], 1.7, -0.4
    for kind, f in (("sine", np.sin), ("cosine", np.cos)):
        expected = offset + amplitude * math.prod(
            f(2 * np.pi * m * (x - a) / (b - a))
            for x, (a, b), m in zip(mesh, domain, modes, strict=False)
        )
        got = model.initial_field(kind, modes=modes, amplitude=amplitude, offset=offset)[0]
        np.testing.assert_allclose(got, expected, rtol=0, atol=1e-13, err_msg=kind)
    # One number for every axis, and a zero mode: that axis's factor is 1.
    x = mesh[0]
    (a, b) = domain[0]
    got = model.initial_field("sine", modes=[1] + [0] * (len(points) - 1))[0]
    np.testing.assert_allclose(got, np.sin(2 * np.pi * (x - a) / (b - a)), rtol=0, atol=1e-13)
    got = model.initial_field("cosine", modes=2)[0]
    expected = math.prod(
        np.cos(4 * np.pi * (x - a) / (b - a)) for x, (a, b) in zip(mesh, domain, strict=False)
    )
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-13)


def test_the_default_heat_fd_field_fits_its_dirichlet_sides():
    # heat_fd starts from the half sine sin(pi (x - low) / L): zero on both (Dirichlet,
    # value 0) ends, 1 in the middle, the slowest decaying mode of the bounded problem.
    domain = [[-1.0, 2.0]]
    model = sim.get_model("heat_fd", points=[31], domain=domain)
    (x,) = bounded_nodes(domain, [31])
    u = model.initial_field()[0]
    np.testing.assert_allclose(u, np.sin(np.pi * (x + 1.0) / 3.0), rtol=0, atol=1e-15)
    assert abs(u[0]) < 1e-15 and abs(u[-1]) < 1e-15 and u[15] == pytest.approx(1.0, abs=1e-15)


def test_a_gaussian_has_its_centre_and_width_as_moments():
    # u = offset + A exp(-sum (x_i - c_i)^2 / (2 w_i^2)), centred on the box by default:
    # (u - offset) / A is then an unnormalised normal density of mean c and variance w^2
    # per axis. The box is wide enough (7.5 and 5.7 widths to the nearest side) that the
    # cut tails change the moments by < 1e-6 (measured: the mean along y by 1.2e-8, from
    # the node on the low side whose mirror on the high side is the same node), and the
    # nodes are close enough (w / h > 3) that the sums are the integrals to round-off.
    points = [48, 64]
    model = sim.get_model("heat", points=points, domain=DOMAIN_2D)
    x, y = periodic_nodes(DOMAIN_2D, points)
    width, amplitude, offset = [0.2, 0.35], 2.0, 0.3
    u = model.initial_field("gaussian", width=width, amplitude=amplitude, offset=offset)[0]
    centre = (0.5, 2.5)  # the middle of [-1, 2] x [0.5, 4.5]
    r2 = (x - centre[0]) ** 2 / (2 * width[0] ** 2) + (y - centre[1]) ** 2 / (2 * width[1] ** 2)
    np.testing.assert_allclose(u, offset + amplitude * np.exp(-r2), rtol=0, atol=1e-14)
    weight = (u - offset) / amplitude
    total = weight.sum()
    assert total * (3.0 / 48) * (4.0 / 64) == pytest.approx(
        2 * np.pi * width[0] * width[1], rel=1e-6
    )
    for coordinate, c, w in ((x, centre[0], width[0]), (y, centre[1], width[1])):
        mean = (coordinate * weight).sum() / total
        variance = ((coordinate - mean) ** 2 * weight).sum() / total
        assert mean == pytest.approx(c, abs=1e-7)
        assert variance == pytest.approx(w**2, rel=1e-6)
    # An explicit centre, and one width for every axis.
    u = model.initial_field("gaussian", center=[0.0, 1.0], width=0.3)[0]
    np.testing.assert_allclose(
        u, np.exp(-(x**2 + (y - 1.0) ** 2) / (2 * 0.3**2)), rtol=0, atol=1e-15
    )


@pytest.mark.parametrize("width", [0.0, -0.1, [0.1, -0.2]])
def test_a_gaussian_needs_positive_widths(width):
    model = sim.get_model("heat", points=[8, 8])
    with pytest.raises(ValueError, match="width = .*expected positive lengths"):
        model.initial_field("gaussian", width=width)


def test_per_axis_options_accept_numbers_only():
    model = sim.get_model("heat", points=[8, 8])
    for modes in ([True, 1], [1, "2"], [1, 2, 3]):
        with pytest.raises(ValueError, match="modes = .*expected a number or a list of 2 numbers"):
            model.initial_field("sine", modes=modes)


def test_a_random_field_is_a_band_limited_periodic_series():
    # Fourier modes |m_i| <= max_mode only (so periodic on the box: no leakage into the
    # other modes of the grid), every one of them present, no mean with zero_mean, and
    # max |u - offset| = amplitude.
    points, max_mode, amplitude, offset = [16, 20], 3, 0.8, 0.25
    model = sim.get_model("heat", points=points, domain=DOMAIN_2D)
    u = model.initial_field(
        "random", seed=5, max_mode=max_mode, amplitude=amplitude, offset=offset
    )[0]
    assert np.max(np.abs(u - offset)) == pytest.approx(amplitude, rel=1e-14)
    assert abs(u.mean() - offset) < 1e-14
    c = np.abs(np.fft.fft2(u - offset)) / u.size
    mx, my = np.meshgrid(*(np.fft.fftfreq(n, 1.0 / n) for n in points), indexing="ij")
    band = (np.abs(mx) <= max_mode) & (np.abs(my) <= max_mode)
    # measured 2e-17 outside the band; inside, the smallest mode is 2e-3 of the largest
    assert np.max(c[~band]) < 1e-14 * np.max(c)
    inside = band & ((mx != 0) | (my != 0))
    assert np.min(c[inside]) > 1e-4 * np.max(c), np.min(c[inside]) / np.max(c)
    assert c[0, 0] < 1e-14
    # Without zero_mean the constant mode is drawn too.
    v = model.initial_field("random", seed=5, max_mode=max_mode, zero_mean=False)[0]
    assert abs(v.mean()) > 1e-3 and np.max(np.abs(v)) == pytest.approx(1.0, rel=1e-14)
    # Reproducible from the seed, and another seed is another field.
    np.testing.assert_array_equal(
        u,
        model.initial_field(
            "random", seed=5, max_mode=max_mode, amplitude=amplitude, offset=offset
        )[0],
    )
    assert (
        np.max(
            np.abs(
                u
                - model.initial_field(
                    "random", seed=6, max_mode=max_mode, amplitude=amplitude, offset=offset
                )[0]
            )
        )
        > 0.1
    )


def test_a_random_field_damps_its_modes_as_a_gaussian():
    # Mode m has coefficient weight exp(-|m|^2 / M^2) times independent normals; on the
    # grid it meets -m (same |m|), so its power is w_m^2 times an exponential variable
    # of the same law for every mode (the rescaling to amplitude cancels in a ratio).
    # The mean over seeds of log power is then -2 |m|^2 / M^2 plus a constant: fitted
    # over every mode of the band, the slope is -2 / M^2.
    points, max_mode = [12, 12], 3
    model = sim.get_model("heat", points=points, domain=DOMAIN_2D)
    mx, my = np.meshgrid(*(np.fft.fftfreq(n, 1.0 / n) for n in points), indexing="ij")
    band = (np.abs(mx) <= max_mode) & (np.abs(my) <= max_mode) & ((mx != 0) | (my != 0))
    logs = np.mean(
        [
            np.log(
                np.abs(
                    np.fft.fft2(model.initial_field("random", seed=seed, max_mode=max_mode)[0])[
                        band
                    ]
                )
                ** 2
            )
            for seed in range(100)
        ],
        axis=0,
    )
    slope = np.polyfit((mx**2 + my**2)[band], logs, 1)[0]
    # measured -0.219 against -2 / 9 = -0.222 (other sets of 100 seeds: -0.213 to -0.230);
    # bound 10%. A weight exp(-|m|^2 / M) would give -2 / 3.
    assert slope == pytest.approx(-2 / max_mode**2, rel=0.1), slope


def test_a_random_field_needs_at_least_one_mode():
    model = sim.get_model("heat", points=[8])
    for max_mode in (0, -2):
        with pytest.raises(
            ValueError, match=f"max_mode = {max_mode}: expected a whole number >= 1"
        ):
            model.initial_field("random", max_mode=max_mode)


def test_each_channel_of_a_random_start_has_its_own_seed():
    # Channel c of a multi-field model is drawn with seed + c: the two Gray-Scott fields
    # differ, and each is the one-field draw of its seed on the same grid.
    options = {"points": [12, 10], "domain": DOMAIN_2D}
    u, v = sim.get_model("gray_scott", **options).initial_field("random", seed=7, max_mode=2)
    heat = sim.get_model("heat", **options)
    np.testing.assert_array_equal(u, heat.initial_field("random", seed=7, max_mode=2)[0])
    np.testing.assert_array_equal(v, heat.initial_field("random", seed=8, max_mode=2)[0])


def test_a_tanh_front_goes_from_low_to_high_along_its_axis():
    # u = low + (high - low) (1 + tanh((x_axis - position) / width)) / 2 on a bounded grid.
    points = [11, 41]
    model = sim.get_model("heat_fd", points=points, domain=DOMAIN_2D)
    x, y = bounded_nodes(DOMAIN_2D, points)
    u = model.initial_field("tanh_front", axis=1, position=2.0, width=0.3, low=0.2, high=1.4)[0]
    np.testing.assert_allclose(
        u, 0.2 + 1.2 * 0.5 * (1 + np.tanh((y - 2.0) / 0.3)), rtol=0, atol=1e-15
    )
    # By default the front sits in the middle of its axis (y = 2.5, node 20), from 1 on
    # the low side to 0 on the high side.
    u = model.initial_field("tanh_front", axis=1)[0]
    np.testing.assert_allclose(u[:, 20], 0.5, rtol=0, atol=1e-15)
    np.testing.assert_allclose(u[:, 0], 1.0, rtol=0, atol=1e-15)
    np.testing.assert_allclose(u[:, -1], 0.0, rtol=0, atol=1e-15)
    assert np.all(np.diff(u, axis=1) <= 0) and np.all(np.diff(u, axis=0) == 0)
    with pytest.raises(ValueError, match="axis = 2"):
        model.initial_field("tanh_front", axis=2)
    for width in (0.0, -0.1):
        with pytest.raises(ValueError, match="width = .*expected a positive length"):
            model.initial_field("tanh_front", width=width)


# ----------------------------------------------------------------------------- Taylor-Green


def test_the_taylor_green_vorticity_is_minus_the_laplacian_of_its_streamfunction():
    # psi = A sin(kx (x - ax)) sin(ky (y - ay)), k = 2 pi m / L per axis, and w = -Lap psi
    # = (kx^2 + ky^2) psi; here -Lap psi is taken spectrally from psi.
    points, modes, amplitude = [24, 16], [2, 3], 1.3
    model = sim.get_model("navier_stokes_2d", points=points, domain=DOMAIN_2D)
    x, y = periodic_nodes(DOMAIN_2D, points)
    kx, ky = 2 * np.pi * 2 / 3.0, 2 * np.pi * 3 / 4.0
    psi = amplitude * np.sin(kx * (x + 1.0)) * np.sin(ky * (y - 0.5))
    w = model.initial_field("taylor_green", amplitude=amplitude, modes=modes)[0]
    minus_laplacian = -(derivative(psi, 0, 3.0, 2) + derivative(psi, 1, 4.0, 2))
    scale = amplitude * (kx**2 + ky**2)
    # measured 1.1e-14 relative; bound 1e-12
    assert np.max(np.abs(w - minus_laplacian)) < 1e-12 * scale
    np.testing.assert_allclose(w, (kx**2 + ky**2) * psi, rtol=0, atol=1e-13 * scale)


def test_the_taylor_green_velocity_is_divergence_free_with_the_stated_curl():
    # u = A sin(kx x') cos(ky y'), v = -A (kx / ky) cos(kx x') sin(ky y') (x' = x - ax,
    # y' = y - ay): u_x + v_y = 0 and v_x - u_y = A (kx^2 + ky^2) / ky sin(kx x') sin(ky y').
    points, amplitude = [24, 16], 0.7
    model = sim.get_model("burgers", points=points, domain=DOMAIN_2D)
    x, y = periodic_nodes(DOMAIN_2D, points)
    kx, ky = 2 * np.pi * 2 / 3.0, 2 * np.pi * 3 / 4.0
    u, v = model.initial_field("taylor_green", amplitude=amplitude, modes=[2, 3])
    sx, sy, cx, cy = (
        np.sin(kx * (x + 1.0)),
        np.sin(ky * (y - 0.5)),
        np.cos(kx * (x + 1.0)),
        np.cos(ky * (y - 0.5)),
    )
    np.testing.assert_allclose(u, amplitude * sx * cy, rtol=0, atol=1e-14)
    np.testing.assert_allclose(v, -amplitude * kx / ky * cx * sy, rtol=0, atol=1e-14)
    scale = amplitude * kx
    divergence = derivative(u, 0, 3.0) + derivative(v, 1, 4.0)
    curl = derivative(v, 0, 3.0) - derivative(u, 1, 4.0)
    # measured 4e-15 relative; bound 1e-12
    assert np.max(np.abs(divergence)) < 1e-12 * scale
    assert np.max(np.abs(curl - amplitude * (kx**2 + ky**2) / ky * sx * sy)) < 1e-12 * scale * kx
    assert "taylor_green" not in sim.get_model("burgers", points=[16]).initial_kinds  # 2D only


# ----------------------------------------------------------------------------- Gray-Scott


def test_pearsons_square_has_its_size_values_and_noise():
    # u = 1, v = 0 outside a central box of side `size` (a fraction of each side), u = 1/2,
    # v = 1/4 inside, each value times (1 + noise U(-1, 1)), independently drawn.
    points, domain, size = [40, 24], [[-1.0, 1.5], [0.5, 2.5]], 0.33
    model = sim.get_model("gray_scott", points=points, domain=domain)
    x, y = periodic_nodes(domain, points)
    # centres 0.25 and 1.5, half sides 0.4125 and 0.33: no node on an edge
    inside = (np.abs(x - 0.25) <= 0.4125) & (np.abs(y - 1.5) <= 0.33)
    assert inside.sum() == 13 * 7  # nodes -0.125..0.625 along x, 1.25..1.75 along y
    u, v = model.initial_field("pearson", size=size, noise=0.0)
    np.testing.assert_array_equal(u, np.where(inside, 0.5, 1.0))
    np.testing.assert_array_equal(v, np.where(inside, 0.25, 0.0))
    # The area fraction is size^2, to one node per side.
    assert abs(inside.mean() - size**2) <= (size + 1 / 40) * (size + 1 / 24) - size**2

    noise = 0.05
    u, v = model.initial_field("pearson", size=size, noise=noise, seed=3)
    ru, rv = u / np.where(inside, 0.5, 1.0) - 1, v[inside] / 0.25 - 1
    for r in (ru, rv):
        # uniform in [-noise, noise]: 960 and 91 draws reach within 10% of both bounds
        assert np.max(np.abs(r)) <= noise * (1 + 1e-12)
        assert r.max() > 0.9 * noise and r.min() < -0.9 * noise
        assert abs(r.mean()) < 0.2 * noise
    assert np.all(v[~inside] == 0.0)
    assert np.max(np.abs(ru[inside] - rv)) > 0.1 * noise  # u and v are drawn independently
    np.testing.assert_array_equal(
        np.stack([u, v]), model.initial_field("pearson", size=size, noise=noise, seed=3)
    )
    assert (
        np.max(np.abs(u - model.initial_field("pearson", size=size, noise=noise, seed=4)[0]))
        > 0.5 * noise
    )
    with pytest.raises(ValueError, match="size = 1.5"):
        model.initial_field("pearson", size=1.5)


# ----------------------------------------------------------------------------- KdV and KS


def kdv_model_and_params(a: float, b: float):
    import jax.numpy as jnp

    model = sim.get_model("kdv", points=[256], domain=[[-15.0, 25.0]])
    return model, {"nonlinearity": jnp.asarray(a), "dispersion": jnp.asarray(b)}


def test_the_kdv_soliton_travels_at_its_speed():
    # u = (3 c / a) sech^2(sqrt(c / b) (x - x0) / 2) solves u_t + a u u_x + b u_xxx = 0 as
    # u(x - c t): so -a u u_x - b u_xxx = -c u_x. By default x0 = low + L / 4, where it peaks.
    a, b, c = 3.0, 0.5, 0.8
    model, params = kdv_model_and_params(a, b)
    (x,) = periodic_nodes(model.domain, model.points)
    u = model.initial_field("soliton", params=params, speed=c)[0]
    assert np.max(u) == pytest.approx(3 * c / a, rel=1e-14)
    assert x[np.argmax(u)] == pytest.approx(-5.0, abs=1e-12)  # -15 + 40 / 4, a node
    ux, uxxx = derivative(u, 0, 40.0), derivative(u, 0, 40.0, 3)
    residual = -a * u * ux - b * uxxx + c * ux
    # measured 6e-15 of c max|u_x|; bound 1e-10
    assert np.max(np.abs(residual)) < 1e-10 * c * np.max(np.abs(ux)), np.max(np.abs(residual))
    # symmetric about its peak (on the periodic interval)
    centred = np.roll(u, -int(np.argmax(u)))
    np.testing.assert_allclose(centred[1:], centred[1:][::-1], rtol=0, atol=1e-15)


def test_the_kdv_soliton_is_periodic_on_the_interval():
    # On a periodic interval the soliton is the sum of its images x0 + j L; a wide one
    # (sqrt(c / b) L / 2 = 6) overlaps its neighbours. The model keeps the images j = -1,
    # 0, 1, so it differs from the full sum by the next images, at a distance d >= 1.25 L
    # from every node for the default x0 = low + L / 4 (1.075 L for x0 = 22 on [-15, 25]):
    # sech^2 <= 4 exp(-2 kappa d), kappa = sqrt(c / b) / 2, of the peak, 1.2e-6 and 1.0e-5.
    # (Without the image j = -1, the default start would be off by 5e-4.)
    a, b, c = 6.0, 1.0, 0.09
    model, params = kdv_model_and_params(a, b)
    (x,) = periodic_nodes(model.domain, model.points)
    kappa = math.sqrt(c / b) / 2
    for position, x0, distance in ((None, -5.0, 50.0), (22.0, 22.0, 43.0)):
        u = model.initial_field("soliton", params=params, speed=c, position=position)[0]
        full = sum(3 * c / a / np.cosh(kappa * (x - x0 - j * 40.0)) ** 2 for j in range(-30, 31))
        error = np.max(np.abs(u - full)) / (3 * c / a)
        assert error < 1.1 * 4 * math.exp(-2 * kappa * distance), (
            position,
            error,
        )  # the farther images add < 1%
    with pytest.raises(ValueError, match="speed = -1"):
        model.initial_field("soliton", speed=-1.0)


def test_the_kuramoto_sivashinsky_start_is_kassam_and_trefethens():
    # Kassam & Trefethen, SIAM J. Sci. Comput. 26 (2005), section 6: u0 = cos(x / 16)
    # (1 + sin(x / 16)) on [0, 32 pi], the model's default; on another interval the same
    # shape, rescaled to it.
    model = sim.get_model("kuramoto_sivashinsky")
    (x,) = periodic_nodes([[0.0, 32 * np.pi]], model.points)
    np.testing.assert_allclose(
        model.initial_field()[0], np.cos(x / 16) * (1 + np.sin(x / 16)), rtol=0, atol=1e-15
    )
    model = sim.get_model("kuramoto_sivashinsky", points=[64], domain=[[-3.0, 47.0]])
    (x,) = periodic_nodes(model.domain, model.points)
    s = 2 * np.pi * (x + 3.0) / 50.0
    np.testing.assert_allclose(
        model.initial_field()[0], np.cos(s) * (1 + np.sin(s)), rtol=0, atol=1e-15
    )
