"""Text PDEs whose fields are coupled through derivatives: a field's equation that reads a
derivative of another field keeps that derivative out of its own Fourier symbol (it is
the other field's, evaluated pseudo-spectrally), checked against exact solutions on a
periodic grid of 32 points: the 1-D wave equation as two fields, and a damped, diffusing
field driven by the x-derivative of a second, decaying one."""

import jax.numpy as jnp
import numpy as np

import sim
from physics.pde import pde_model
from solvers import Etdrk, FourierGrid


def _run(
    model, params: dict, initial: np.ndarray, t: np.ndarray, steps_per_save: int
) -> dict[str, np.ndarray]:
    traj = sim.simulate(
        model,
        params,
        jnp.asarray(t),
        initial=jnp.asarray(initial),
        solver=Etdrk(order=4, steps_per_save=steps_per_save),
    )
    return {name: np.asarray(traj.observables[name]) for name in model.field_names}


def test_the_wave_equation_as_two_fields_follows_its_standing_wave():
    # u_t = v, v_t = c^2 u_xx on [0, 2 pi): from u = sin(k x), v = 0 the exact solution is
    # u = sin(k x) cos(c k t), v = -c k sin(k x) sin(c k t). Neither field's equation reads
    # its own field, so both symbols are 0 and everything is explicit (ETDRK4 is RK4 here);
    # had c^2 laplace(u) joined v's symbol, v would decay as exp(-c^2 k^2 t) and u not
    # oscillate; had v joined u's, u would grow as exp(t).
    c, k = 1.3, 2
    model = pde_model("wave", {"u": "v", "v": "c ** 2 * laplace(u)"}, {"c": c}, points=(32,))
    assert model.program.linear == [[], []]
    grid = FourierGrid(model.points, model.domain)
    np.testing.assert_array_equal(np.asarray(model.linear({"c": jnp.asarray(c)}, grid)), 0.0)
    x = np.asarray(model.mesh()[0])
    t = np.linspace(0.0, 1.5, 4)
    fields = _run(
        model, {"c": c}, np.stack([np.sin(k * x), np.zeros_like(x)]), t, steps_per_save=60
    )
    omega = c * k
    u = np.sin(k * x) * np.cos(omega * t)[:, None]
    v = -omega * np.sin(k * x) * np.sin(omega * t)[:, None]
    # (RK4's phase error at dt = 0.00625 is about 1e-8 of the amplitude)
    np.testing.assert_allclose(fields["u"], u, rtol=0, atol=1e-7)
    np.testing.assert_allclose(fields["v"], v, rtol=0, atol=1e-7)


def test_a_field_driven_by_the_derivative_of_another_keeps_only_its_own_symbol():
    # u_t = -a u + D u_xx + w_x, w_t = nu w_xx. From w = sin(k x), u = 0:
    # w = sin(k x) exp(-beta t), u = k cos(k x) (exp(-beta t) - exp(-alpha t)) / (alpha - beta)
    # with alpha = a + D k^2, beta = nu k^2. u's symbol is -a - D q^2 at each wavenumber q
    # (nothing of dx(w): i q would make it complex), w's -nu q^2.
    a, D, nu, k = 0.5, 0.1, 0.05, 3
    params = {"a": a, "D": D, "nu": nu}
    model = pde_model(
        "driven",
        {"u": "-a * u + D * laplace(u) + dx(w)", "w": "nu * laplace(w)"},
        params,
        points=(32,),
    )
    program = model.program
    assert sorted(ops for _, ops in program.linear[0]) == [(), ("laplace",)] and [
        ops for _, ops in program.linear[1]
    ] == [("laplace",)]
    assert [ops for _, ops, _ in program.spectral[0]] == [("dx",)] and program.physical[0] is None
    grid = FourierGrid(model.points, model.domain)
    symbol = np.asarray(model.linear({n: jnp.asarray(v) for n, v in params.items()}, grid))
    q = np.arange(17.0)  # (the wavenumbers of a real FFT of 32 points on [0, 2 pi))
    assert not np.iscomplexobj(symbol)
    np.testing.assert_allclose(symbol[0], -a - D * q**2, rtol=1e-14, atol=1e-14)
    np.testing.assert_allclose(symbol[1], -nu * q**2, rtol=1e-14, atol=1e-14)

    x = np.asarray(model.mesh()[0])
    t = np.linspace(0.0, 2.0, 3)
    fields = _run(model, params, np.stack([np.zeros_like(x), np.sin(k * x)]), t, steps_per_save=20)
    alpha, beta = a + D * k**2, nu * k**2
    w = np.sin(k * x) * np.exp(-beta * t)[:, None]
    u = k * np.cos(k * x) * ((np.exp(-beta * t) - np.exp(-alpha * t)) / (alpha - beta))[:, None]
    np.testing.assert_allclose(fields["w"], w, rtol=0, atol=1e-12)
    np.testing.assert_allclose(fields["u"], u, rtol=0, atol=1e-7)


def test_linear_terms_written_in_several_ways_give_the_exact_symbol_and_solution():
    # u_t = D u_xx - q u_xxxx + dx(dx(u)) / 4 + laplace(w - u) / 2, w_t = -w / T: u's
    # symbol is lambda(p) = -(D + 1/4 - 1/2) p^2 - q p^4 at each wavenumber p (a
    # difference, a divisor, an operator chain, biharmonic, and a laplace of a
    # difference whose w part is w's, not u's); w's is -1 / T. From u = 0, w = sin(k x):
    # u = -(k^2 / 2) sin(k x) (exp(lambda(k) t) - exp(-t / T)) / (lambda(k) + 1 / T).
    D, q, T, k = 0.1, 0.05, 2.0, 1
    params = {"D": D, "q": q, "T": T}
    model = pde_model(
        "several",
        {
            "u": "D * laplace(u) - q * biharmonic(u) + dx(dx(u)) / 4 + laplace(w - u) / 2",
            "w": "-w / T",
        },
        params,
        points=(32,),
    )
    grid = FourierGrid(model.points, model.domain)
    # (dx makes the symbol complex: of the grid's precision, under the tests' strict promotion too)
    symbol = np.asarray(model.linear({n: jnp.asarray(v) for n, v in params.items()}, grid))
    p = np.arange(16.0)  # (at the Nyquist wavenumber 16 a first derivative's symbol is 0)
    np.testing.assert_allclose(
        symbol[0, :16], -(D - 0.25) * p**2 - q * p**4, rtol=1e-14, atol=1e-12
    )
    np.testing.assert_allclose(symbol[1], -1 / T, rtol=1e-14)

    x = np.asarray(model.mesh()[0])
    t = np.linspace(0.0, 2.0, 3)
    fields = _run(model, params, np.stack([np.zeros_like(x), np.sin(k * x)]), t, steps_per_save=20)
    lam, beta = -(D - 0.25) * k**2 - q * k**4, 1 / T
    u = (
        -(k**2 / 2)
        * np.sin(k * x)
        * ((np.exp(lam * t) - np.exp(-beta * t)) / (lam + beta))[:, None]
    )
    np.testing.assert_allclose(
        fields["w"], np.sin(k * x) * np.exp(-beta * t)[:, None], rtol=0, atol=1e-12
    )
    np.testing.assert_allclose(fields["u"], u, rtol=0, atol=1e-7)


def test_on_a_bounded_grid_only_a_fields_own_laplacian_counts_as_its_diffusion():
    # The finite-difference split: in v's equation `c^2 laplace(u) + 3 laplace(v)` the
    # term in u is explicit and v's diffusivity (the explicit step limit's) is 3, whether
    # the other field's name sorts before or after this one's.
    from physics.pde._text_grid import partition

    for other, this in (("u", "v"), ("w", "v")):
        implicit, explicit, laplace = partition(
            this, f"c**2 * laplace({other}) + 3*laplace({this})", (other, this), ("c",)
        )
        assert [float(c({})) for c in laplace] == [3.0], (other, this)
        assert f"laplace({other})" in explicit.text and f"laplace({other})" not in implicit.text
        assert f"laplace({this})" in implicit.text


def test_derivatives_of_nonlinear_terms_are_taken_spectrally_and_exactly():
    # At u = sin(x): u^2 = (1 - cos 2x) / 2, so laplace(u^2) = 2 cos 2x, which `u *
    # laplace(u**2)` multiplies in physical space (the operator inside a product), and
    # dx(u**3) = 3 sin(x)^2 cos(x), a term of its own (taken spectrally): all band-limited
    # on 32 points, so exact to rounding.
    model = pde_model("nonlinear", {"u": "u * laplace(u**2) + 0.5 * dx(u**3)"}, {}, points=(32,))
    grid = FourierGrid(model.points, model.domain)
    x = np.asarray(model.mesh()[0])
    u_hat = grid.rfft(jnp.asarray(np.sin(x)))[None]
    out = np.asarray(grid.irfft(model.nonlinear(u_hat, {}, grid)[0]))
    np.testing.assert_allclose(
        out, 2 * np.sin(x) * np.cos(2 * x) + 1.5 * np.sin(x) ** 2 * np.cos(x), rtol=0, atol=1e-12
    )


def test_every_pair_of_side_kinds_is_accepted_unless_one_side_alone_is_periodic():
    # Each (low, high) pair of the four kinds on a 1-D grid: refused exactly where one side
    # is periodic and the other is not (as a periodic axis joins its two ends).
    import pytest

    from physics.pde._text_grid import KINDS, boundary_program

    robin = {"coefficient": 1.0, "value": 0.0}
    for low in KINDS:
        for high in KINDS:
            values = [[robin if low == "robin" else 0.0, robin if high == "robin" else 0.0]]
            if (low == "periodic") != (high == "periodic"):
                with pytest.raises(ValueError, match="periodic must be on both sides"):
                    boundary_program(("u",), [[low, high]], values, 1, ())
            else:
                sides, periodic = boundary_program(("u",), [[low, high]], values, 1, ())
                assert [s.kind for s in sides[0][0]] == [low, high] and periodic == (
                    low == "periodic",
                )


def test_a_product_is_multiplied_out_up_to_max_terms_and_kept_whole_beyond():
    # (p0 + p1) (laplace(u) + p2 u) multiplies out into linear terms: symbol
    # (p0 + p1)(p2 - q^2) = 3 (3 - q^2). A product of two 17-term sums (289 terms >
    # MAX_TERMS = 256) stays one term, evaluated as written: no symbol, and its value at
    # u = sin x is the product of the two sums there (laplace(sin x) = -sin x).
    from physics.pde._text import MAX_TERMS

    assert MAX_TERMS == 256
    params = {f"p{i}": 1.0 + i for i in range(17)}
    cases = {
        "small": ("p0 + p1", "laplace(u) + p2 * u"),
        "large": (
            " + ".join(f"p{i}" for i in range(17)),
            "laplace(u) + " + " + ".join(f"p{i} * u" for i in range(16)),
        ),
    }
    q = np.arange(9.0)
    for name, (left, right) in cases.items():
        model = pde_model(name, {"u": f"({left}) * ({right})"}, params, points=(16,))
        grid = FourierGrid(model.points, model.domain)
        symbol = np.asarray(model.linear({k: jnp.asarray(v) for k, v in params.items()}, grid))[0]
        if name == "small":
            np.testing.assert_allclose(symbol, 3.0 * (3.0 - q**2), rtol=1e-14)
        else:
            np.testing.assert_array_equal(symbol, 0.0)
            x = np.asarray(model.mesh()[0])
            out = np.asarray(
                grid.irfft(
                    model.nonlinear(grid.rfft(jnp.asarray(np.sin(x)))[None], params, grid)[0]
                )
            )
            expected = sum(params.values()) * (
                -np.sin(x) + sum(1.0 + i for i in range(16)) * np.sin(x)
            )
            np.testing.assert_allclose(out, expected, rtol=1e-12, atol=1e-10)
