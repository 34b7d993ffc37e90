"""PDEs written in a config's `[model.fields]`: the automatic split into the Fourier
symbol and the pseudo-spectral rest reproduces the built-in heat, Burgers,
Kuramoto-Sivashinsky and Gray-Scott models (float64, the same ETDRK4 steps) to 1e-10,
and bad text is one line naming the key."""

from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest

import sim
from physics.pde import pde_model
from tests.helpers import cli

COMMON = """
[initial]
kind = "random"
seed = 3
[time]
t1 = {t1}
save = 5
dt = {dt}
[solver]
method = "etdrk4"
"""

# name -> (built-in [model] and [params], the same model written as text, [grid], t1, dt)
CASES = {
    "heat_2d": (
        'name = "heat"\n[params]\ndiffusivity = 0.3',
        'name = "diffusion"\n[model.fields]\nu = "D * laplace(u)"\n[model.parameters]\nD = 0.3',
        "points = [16, 16]",
        1.0,
        0.05,
    ),
    "burgers": (
        'name = "burgers"\n[params]\nviscosity = 0.05',
        'name = "burgers_text"\n[model.fields]\nu = "nu * laplace(u) - 0.5 * dx(u * '
        'u)"\n[model.parameters]\nnu = 0.05',
        "points = [64]",
        1.0,
        0.01,
    ),
    "kuramoto_sivashinsky": (
        'name = "kuramoto_sivashinsky"',
        'name = "ks"\n[model.fields]\nu = "-p * laplace(u) - q * biharmonic(u) - a / 2 * dx(u ** '
        '2)"\n'
        "[model.parameters]\np = 1.0\nq = 1.0\na = 1.0",
        "points = [64]\ndomain = [[0.0, 100.53096491487338]]",
        10.0,
        0.25,
    ),
    "gray_scott": (
        'name = "gray_scott"\n[params]\nfeed = 0.03\nkill = 0.062\ndiffusivity_u = '
        "2e-5\ndiffusivity_v = 1e-5",
        'name = "gs"\n[model.fields]\nu = "Du * laplace(u) - u * v * v + F * (1 - u)"\nv = "Dv * '
        'laplace(v) + u * v * v - (F + k) * v"\n'
        "[model.parameters]\nF = 0.03\nk = 0.062\nDu = 2e-5\nDv = 1e-5",
        "points = [16, 16]\ndomain = [[0.0, 2.5], [0.0, 2.5]]",
        20.0,
        1.0,
    ),
}


def _fields(text: str, path: str):
    s = sim.setup(sim.load_config(_write(path, text)))
    traj = sim.simulate(s.model, s.params, s.t, initial=s.initial, solver=s.solver)
    return s.model, {name: np.asarray(traj.observables[name]) for name in s.model.field_names}


def _write(path: str, text: str) -> Path:
    Path(path).write_text(text)
    return Path(path)


# Kuramoto-Sivashinsky (fourth-order symbol, conservative nonlinearity) and Gray-Scott
# (two fields, linear terms inside products) by default; heat and Burgers with -m slow.
@pytest.mark.parametrize(
    "case",
    [
        c
        if c in ("kuramoto_sivashinsky", "gray_scott")
        else pytest.param(c, marks=pytest.mark.slow)
        for c in sorted(CASES)
    ],
)
def test_a_pde_written_in_its_config_reproduces_the_built_in_model(case, tmp_cwd):
    built_in, text, grid, t1, dt = CASES[case]
    common = COMMON.format(t1=t1, dt=dt) + f"[grid]\n{grid}\n"
    model_b, fields_b = _fields(f"[model]\n{built_in}\n{common}", "built_in.toml")
    model_t, fields_t = _fields(f"[model]\n{text}\n{common}", "text.toml")
    assert model_t.field_names == model_b.field_names
    for name in model_b.field_names:
        scale = np.max(np.abs(fields_b[name]))
        assert scale > 0 and np.all(np.isfinite(fields_t[name]))
        np.testing.assert_allclose(
            fields_t[name], fields_b[name], rtol=0, atol=1e-10 * scale, err_msg=name
        )


def test_the_split_puts_constant_coefficient_derivatives_of_a_field_in_its_symbol():
    model = pde_model(
        "gs",
        {
            "u": "Du * laplace(u) - u * v * v + F * (1 - u)",
            "v": "Dv * laplace(v) + u * v * v - (F + k) * v",
        },
        {"F": 0.03, "k": 0.06, "Du": 2e-5, "Dv": 1e-5},
        points=(8, 8),
    )
    program = model.program
    # u: Du laplace(u) and -F u are linear; -u v v and F are not.
    assert sorted(ops for _, ops in program.linear[0]) == [(), ("laplace",)]
    assert sorted(ops for _, ops in program.linear[1]) == [
        (),
        (),
        ("laplace",),
    ]  # -(F + k) v: two terms
    assert program.physical[0] is not None and program.spectral[0] == []
    burgers = pde_model(
        "b", {"u": "nu * laplace(u) - 0.5 * dx(u * u)"}, {"nu": 0.1}, points=(8,)
    ).program
    assert [ops for _, ops in burgers.linear[0]] == [("laplace",)]
    assert [ops for _, ops, _ in burgers.spectral[0]] == [("dx",)] and burgers.physical[0] is None


def test_observables_of_a_text_pde_integrate_over_the_box(tmp_cwd, capsys):
    """The mass of a heat equation (integral of u) is conserved, and its text observable
    equals the built-in's `mass`."""
    text = (
        '[model]\nname = "diffusion"\n[model.fields]\nu = "D * laplace(u)"\n[model.parameters]\nD '
        "= 0.2\n"
        '[model.observables]\nmass = "integral(u)"\nsquare = "mean(u ** 2)"\n'
        + COMMON.format(t1=1.0, dt=0.05)
        + "[grid]\npoints = [32]\n"
    )
    _write("text.toml", text)
    code, err = cli(["run", "text.toml", "-o", "text.h5", "--quiet"], capsys)
    assert code == 0, err
    record = sim.read("text.h5")
    mass = np.asarray(record.observables["mass"])
    np.testing.assert_allclose(mass, mass[0], rtol=1e-12, atol=1e-12)
    u = np.asarray(record.observables["u"])
    np.testing.assert_allclose(record.observables["square"], np.mean(u**2, axis=1), rtol=1e-12)
    np.testing.assert_allclose(mass, np.sum(u, axis=1) * 2 * np.pi / 32, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    "override, key",
    [
        ('model.fields.u="D * laplace(u) + lap(u)"', "model.fields.u"),
        ('model.fields.u="D * laplace(u) * t"', "model.fields.u"),
        ('model.fields.u="D * dy(u)"', "model.fields.u"),
        ('model.fields.u="D * laplace(u, u)"', "model.fields.u"),
        ("model.parameters.u=1.0", "model.parameters.u"),
        ('model.observables.mass="integral(w)"', "model.observables.mass"),
        ('grid.boundary="dirichlett"', "grid.boundary"),
        ("grid.points=[1000000, 1000000]", "grid.points"),
        ('grid.boundary="robin"', "grid.boundary_value"),
        ('grid.boundary_value="sin(t)"', "grid.boundary_value"),
        ('model.states={ x = "-x" }', "model.fields"),
    ],
)
def test_bad_text_pdes_are_one_line_errors(override, key, tmp_cwd, capsys):
    text = (
        '[model]\nname = "diffusion"\n[model.fields]\nu = "D * laplace(u)"\n[model.parameters]\nD '
        "= 0.2\n" + COMMON.format(t1=1.0, dt=0.05) + "[grid]\npoints = [32]\n"
    )
    _write("text.toml", text)
    code, err = cli(["run", "text.toml", "-o", "out.h5", "--set", override], capsys)
    assert (
        code == 2 and len(err.strip().splitlines()) == 1 and key in err and "Traceback" not in err
    ), err
    assert not Path("out.h5").exists()


def test_a_text_pde_is_differentiable_in_its_parameters():
    """d/dD of a Fourier mode's amplitude, sin(x) exp(-D t), through the ETDRK steps."""
    import jax

    from solvers import Etdrk

    model = pde_model("diffusion", {"u": "D * laplace(u)"}, {"D": 0.3}, points=(16,))
    t = jnp.linspace(0.0, 1.0, 3)
    u0 = np.sin(np.asarray(model.mesh()[0]))[None]
    amplitude = lambda d: sim.simulate(
        model, {"D": d}, t, initial=u0, solver=Etdrk(order=4, steps_per_save=5)
    ).observables["u"][-1, 4]  # noqa: E731
    x4 = 2 * np.pi * 4 / 16
    value, gradient = jax.jit(jax.value_and_grad(amplitude))(
        jnp.asarray(0.3)
    )  # (one compiled program)
    np.testing.assert_allclose(value, np.sin(x4) * np.exp(-0.3), rtol=1e-12)
    np.testing.assert_allclose(gradient, -np.sin(x4) * np.exp(-0.3), rtol=1e-10)


# u = exp(-D k^2 t) sin(k x + phi) (k = 2, phi = 0.5) solves u_t = D u_xx: a Dirichlet side
# that decays in time at x = 0, and at x = 1 a Robin side du/dn + 3 u = g(t) (du/dn = u_x
# there).
BOUNDED = """
[model]
name = "heat_bounded"
[model.fields]
u = "D * laplace(u)"
[model.parameters]
D = 0.5
[grid]
points = [{n}]
boundary = ["dirichlet", "robin"]
boundary_value = ["exp(-4 * D * t) * sin(0.5)", {{ coefficient = 3.0, value = "exp(-4 * D * t) * (2 * cos(2.5) + 3 * sin(2.5))" }}]
[initial]
u = "sin(2 * x + 0.5)"
[time]
t1 = 0.5
save = 6
[solver]
method = "{method}"
rtol = 1e-11
atol = 1e-13
order = {order}
"""


def _bounded_errors(order: int, points: tuple[int, ...], method: str = "tsit5") -> list[float]:
    # (tsit5 by default: it compiles in a fraction of kvaerno5's time, and the few
    # thousand steps its stability limit asks for on these grids take milliseconds)
    errors = []
    for n in points:
        s = sim.setup(
            sim.load_config(
                _write(f"bounded_{n}.toml", BOUNDED.format(n=n, order=order, method=method))
            )
        )
        traj = sim.simulate(s.model, s.params, s.t, initial=s.initial, solver=s.solver)
        x = np.linspace(0.0, 1.0, n)
        t = np.asarray(s.t)[:, None]
        exact = np.exp(-2.0 * t) * np.sin(2 * x + 0.5)
        u = np.asarray(traj.observables["u"])
        # The Dirichlet node holds the side's value at every time (it is not integrated).
        np.testing.assert_allclose(u[:, 0], exact[:, 0], rtol=0, atol=1e-15)
        errors.append(float(np.max(np.abs(u - exact))))
    return errors


@pytest.mark.parametrize("order", [2, pytest.param(4, marks=pytest.mark.slow)])
def test_a_bounded_heat_equation_with_time_dependent_sides_converges_at_its_order(order, tmp_cwd):
    """Finite differences with a time-dependent Dirichlet side and a Robin side: the error
    against the exact solution falls as h^order (fitted over three grids)."""
    points = (
        (17, 33, 65) if order == 2 else (33, 65, 129)
    )  # (fourth order: past its pre-asymptotic range)
    errors = _bounded_errors(order, points)
    slope = np.polyfit(np.log([1.0 / (n - 1) for n in points]), np.log(errors), 1)[0]
    assert order - 0.2 < slope < order + 0.6, (errors, slope)
    assert errors[-1] < (5e-5 if order == 2 else 1e-8), errors


def test_a_bounded_text_pde_reproduces_the_built_in_finite_difference_heat(tmp_cwd):
    """The text `D * laplace(u)` with constant Dirichlet and Neumann sides in 2D is the
    built-in `heat_fd` (the same stencils, the same steps) to rounding."""
    common = (
        '[grid]\npoints = [9, 11]\nboundary = [["dirichlet", "neumann"], '
        '"dirichlet"]\nboundary_value = [[1.0, -0.5], 0.25]\n'
    )
    common += (
        '[initial]\nkind = "gaussian"\n[time]\nt1 = 0.2\nsave = 3\n[solver]\nmethod = '
        '"tsit5"\nrtol = 1e-9\natol = 1e-11\n'
    )
    built_in = '[model]\nname = "heat_fd"\n[params]\ndiffusivity = 0.3\n' + common
    text = (
        '[model]\nname = "h"\n[model.fields]\nu = "D * laplace(u)"\n[model.parameters]\nD = 0.3\n'
        + common
    )
    _, b = _fields(built_in, "built_in.toml")
    _, t = _fields(text, "text.toml")
    assert np.max(np.abs(b["u"][-1] - b["u"][0])) > 0.01  # (it moved)
    np.testing.assert_allclose(t["u"], b["u"], rtol=0, atol=1e-12)


@pytest.mark.slow
def test_a_bounded_text_pde_is_differentiable_through_its_sides(tmp_cwd):
    """d u(x, t1) / dD through the method of lines and the time-dependent sides, against
    the exact derivative -k^2 t u of the exact solution (to the grid's error)."""
    import jax

    s = sim.setup(
        sim.load_config(_write("bounded.toml", BOUNDED.format(n=65, order=4, method="kvaerno5")))
    )
    node = 20
    value = lambda d: sim.simulate(
        s.model, {"D": d}, s.t, initial=s.initial, solver=s.solver
    ).observables["u"][-1, node]  # noqa: E731
    x = node / 64
    exact = -4 * 0.5 * np.exp(-2.0 * 0.5) * np.sin(2 * x + 0.5)
    np.testing.assert_allclose(jax.grad(value)(0.5), exact, rtol=1e-6)


@pytest.mark.parametrize(
    "override, key",
    [
        ('model.fields.u="-biharmonic(u)"', "model.fields.u"),
        ('model.fields.u="D * grad(u)"', "model.fields.u"),
        ('grid.boundary_value=["sin(q)", 0.0]', "grid.boundary_value"),
        ('grid.boundary=["dirichlet", "periodic"]', "grid.boundary"),
        ('grid.boundary={ v = "neumann" }', "grid.boundary"),
        ('initial.u="sin(2 * w)"', "initial.u"),
        ("grid.boundary_value=[nan, 0.0]", "grid.boundary_value"),
        ("grid.points=[100000000]", "solver.method"),  # (an implicit method's dense Jacobian)
    ],
)
def test_bad_bounded_text_pdes_are_one_line_errors(override, key, tmp_cwd, capsys):
    _write("text.toml", BOUNDED.format(n=17, order=2, method="kvaerno5"))
    code, err = cli(["run", "text.toml", "-o", "out.h5", "--set", override], capsys)
    assert (
        code == 2 and len(err.strip().splitlines()) == 1 and key in err and "Traceback" not in err
    ), err
    assert not Path("out.h5").exists()


def test_a_bounded_text_model_of_any_size_is_checked_without_memory_for_its_fields():
    # The expressions' shapes are checked abstractly: a grid of 10^12 points (8 TB a
    # field) builds its model at once, and the run's own memory checks refuse it.
    model = pde_model(
        "huge",
        {"u": "D * laplace(u) + x * v", "v": "dx(u) - v"},
        {"D": 0.5},
        {"total": "integral(u)"},
        points=(10**12,),
        boundary="dirichlet",
        boundary_value=0.0,
    )
    assert tuple(model.points) == (10**12,)
    with pytest.raises(ValueError, match="fields.v"):
        pde_model(
            "huge",
            {"u": "laplace(u)", "v": "grad(u)"},
            points=(10**12,),
            boundary="dirichlet",
            boundary_value=0.0,
        )


def test_div_of_grad_is_the_laplacian_in_the_symbol():
    """div(grad(u)) with a constant coefficient goes to the Fourier symbol as laplace does;
    div((1 + u) * grad(u)) splits into laplace(u) (the symbol) and div(u * grad(u)),
    evaluated pseudo-spectrally: |grad u|^2 + u laplace(u) exactly, for u = sin x cos 2y."""
    a = pde_model("a", {"u": "D * div(grad(u))"}, {"D": 0.2}, points=(8, 8)).program
    assert [ops for _, ops in a.linear[0]] == [("laplace",)] and a.physical[0] is None
    model = pde_model("b", {"u": "div((1 + u) * grad(u))"}, {}, points=(16, 16))
    assert [ops for _, ops in model.program.linear[0]] == [("laplace",)]
    from solvers import FourierGrid

    grid = FourierGrid(model.points, model.domain)
    x, y = model.mesh()
    u = np.sin(x) * np.cos(2 * y)
    out = grid.irfft(model.nonlinear(grid.rfft(jnp.asarray(u)[None]), {}, grid))[0]
    gradient_squared = (np.cos(x) * np.cos(2 * y)) ** 2 + (2 * np.sin(x) * np.sin(2 * y)) ** 2
    np.testing.assert_allclose(out, gradient_squared - 5 * u * u, atol=1e-12)


@pytest.mark.parametrize(
    "form",
    [
        "D * laplace(u)",
        "laplace(D * u)",
        "laplace(u) * D",
        "0.5 * laplace(2 * D * u)",
        "div(D * grad(u))",
        "-div(-D * grad(u)) + laplace(0 * u)",
    ],
)
def test_a_linear_term_is_in_the_symbol_however_it_is_written(form):
    """Derivatives are linear: a constant inside them comes out, and their sums split, so
    every way of writing D u_xx gives the symbol -D k^2 (k = 0, 1, ..., N / 2 on [0, 2 pi)),
    integrated exactly by ETDRK, and nothing explicit. laplace(D * u) was evaluated as an
    explicit term, and etdrk1 at dt = 0.025 blew up on it."""
    program = pde_model("heat", {"u": form}, {"D": 0.3}, points=(16,)).program
    assert program.spectral[0] == [] and program.physical[0] is None, (
        program.spectral,
        program.physical,
    )
    model = pde_model("heat", {"u": form}, {"D": 0.3}, points=(16,))
    from solvers import FourierGrid

    symbol = np.asarray(
        model.linear({"D": jnp.asarray(0.3)}, FourierGrid(model.points, model.domain))
    )
    np.testing.assert_allclose(
        symbol.reshape(-1), -0.3 * np.arange(9.0) ** 2, rtol=1e-14, atol=1e-14
    )


def test_heat_written_as_laplace_of_d_u_runs_exactly_at_a_large_step(tmp_cwd, capsys):
    """u_t = laplace(D * u) on a periodic [0, 1) by etdrk1 at dt = 0.025, nine times
    the explicit limit 2 / (D k_max^2) of the highest mode kept: the symbol is integrated
    exactly, so each mode decays as exp(-D k^2 t) (the run blew up, exit 1, while the
    term was explicit)."""
    text = (
        '[model]\nname = "heat_text"\n[model.fields]\nu = "laplace(D * u)"\n[model.parameters]\nD '
        "= 0.5\n"
        '[grid]\npoints = [20]\ndomain = [[0.0, 1.0]]\n[initial]\nu = "sin(2 * pi * x) + 0.01 * '
        'sin(12 * pi * x)"\n'
        '[time]\nt1 = 0.5\nsave = 3\ndt = 0.025\n[solver]\nmethod = "etdrk1"\n'
    )
    _write("heat.toml", text)
    code, err = cli(["run", "heat.toml", "-o", "heat.h5", "--quiet"], capsys)
    assert code == 0, err
    record = sim.read("heat.h5")
    x, t = np.asarray(record.grid["x"]), float(record.time[-1])
    exact = np.sin(2 * np.pi * x) * np.exp(-0.5 * (2 * np.pi) ** 2 * t) + 0.01 * np.sin(
        12 * np.pi * x
    ) * np.exp(-0.5 * (12 * np.pi) ** 2 * t)
    np.testing.assert_allclose(record.observables["u"][-1], exact, rtol=0, atol=1e-12)
