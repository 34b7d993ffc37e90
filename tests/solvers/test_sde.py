"""The diffrax SDE strategy: exact moments, strong orders, gradients, reproducible paths.

Every solve here integrates the linear SDE dX = (a + b X) dt + (c + d X) dW, which is the
Ornstein-Uhlenbeck process for (a, b, c, d) = (theta mu, -theta, sigma, 0) and geometric
Brownian motion for (0, mu, 0, sigma): the two share compiled programs, since compiling
an SDE solve (the virtual Brownian tree above all) is what these tests spend their time on.
"""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from physics.sde import (
    NOISE_KINDS as MODEL_NOISE_KINDS,
    GeometricBrownianMotion,
    OrnsteinUhlenbeck,
    StochasticLotkaVolterra,
)
from solvers import NOISE_KINDS, Result, SdeSolver, result_message
from tests.helpers import fitted_order


def linear_drift(t, y, args):
    return args["a"] + args["b"] * y


def linear_diffusion(t, y, args):
    return args["c"] + args["d"] * y


def additive_diffusion(t, y, args):
    # the same diffusion with d = 0, written so that it visibly does not depend on y
    return args["c"] * jnp.ones_like(y)


def linear(a=0.0, b=0.0, c=0.0, d=0.0):
    return {k: jnp.asarray(v) for k, v in dict(a=a, b=b, c=c, d=d).items()}


# Nine save times on [0, T] unless told; at most 256 steps; NaN rows on failure.
def ensemble(
    method,
    t_end,
    x0,
    args,
    key,
    paths,
    dt,
    noise="diagonal",
    max_steps=256,
    drift=linear_drift,
    saves=9,
):
    solver = SdeSolver(method=method, dt=jnp.asarray(dt), max_steps=max_steps, throw=False)
    ts = jnp.linspace(0.0, t_end, saves)
    diffusion = additive_diffusion if noise == "additive" else linear_diffusion
    return _ensemble(solver, drift, diffusion, ts, jnp.array([x0]), args, key, paths, noise)


@eqx.filter_jit
def _ensemble(solver, drift, diffusion, ts, y0, args, key, paths, noise):
    return solver.solve_ensemble(drift, diffusion, ts, y0, args, key, paths, noise=noise)


# Ornstein-Uhlenbeck: theta = 1, mu = 0.5, sigma = 0.5 from x0 = 1.5, saved every 0.25 up
# to t = 2 (from near x0 to near the stationary law), dt = 1/64, 1000 paths.
THETA, MU, SIGMA, OU_X0, OU_T = 1.0, 0.5, 0.5, 1.5, 2.0
OU_KEY = jax.random.key(2024)


def ou_args(theta=THETA):
    return linear(a=theta * MU, b=-theta, c=SIGMA)


def ou_paths(method="euler", args=None, key=OU_KEY, paths=1000, noise="diagonal"):
    return ensemble(
        method, OU_T, OU_X0, ou_args() if args is None else args, key, paths, 2.0**-6, noise
    )


@pytest.fixture(scope="module")
def ou_euler():
    return ou_paths()


# Euler-Maruyama and SRA1 by default; the other additive-noise methods with `-m slow`.
@pytest.mark.parametrize(
    "method",
    [
        "euler",
        pytest.param("sra1", marks=pytest.mark.slow),
        pytest.param("shark", marks=pytest.mark.slow),
        pytest.param("heun", marks=pytest.mark.slow),
        pytest.param("milstein", marks=pytest.mark.slow),
    ],
)
def test_ornstein_uhlenbeck_moments_are_exact(method, ou_euler):
    # The OU process is Gaussian with mean mu + (x0 - mu) exp(-theta t) and variance
    # sigma^2 (1 - exp(-2 theta t)) / (2 theta) (Uhlenbeck & Ornstein, Phys. Rev. 36, 823,
    # 1930). With N paths the sample mean has standard error sigma_t / sqrt(N) and the
    # sample variance sqrt(2 / (N - 1)) sigma_t^2 (Gaussian data); every save time must
    # be within 4 of them. Euler-Maruyama's bias at dt = 1/64 is below a third of a
    # standard error (mean: (x0 - mu) theta^2 dt t exp(-theta t) / 2 <= 0.003; stationary
    # variance: relative theta dt / 2 = 0.8%). Measured: |z| <= 1.5 (euler), 2.4 (sra1).
    sol = ou_euler if method == "euler" else ou_paths(method, noise="additive")
    assert bool(jnp.all(sol.result == 0)) and bool(jnp.all(sol.num_steps == 128))
    x = np.asarray(sol.ys[:, :, 0])
    t = np.linspace(0.0, OU_T, 9)
    mean = MU + (OU_X0 - MU) * np.exp(-THETA * t)
    var = SIGMA**2 * (1.0 - np.exp(-2.0 * THETA * t)) / (2.0 * THETA)
    assert np.all(x[:, 0] == OU_X0)
    n = x.shape[0]
    z_mean = (x.mean(axis=0)[1:] - mean[1:]) / np.sqrt(var[1:] / n)
    z_var = (x.var(axis=0, ddof=1)[1:] - var[1:]) / (np.sqrt(2.0 / (n - 1)) * var[1:])
    assert np.all(np.abs(z_mean) < 4.0), z_mean
    assert np.all(np.abs(z_var) < 4.0), z_var


# Geometric Brownian motion with Higham's parameters (mu = 2, sigma = 1, x0 = 1, T = 1:
# "An Algorithmic Introduction to Numerical Simulation of Stochastic Differential
# Equations", SIAM Review 43, 525, 2001, sections 5 and 7), 500 paths.
GBM_KEY = jax.random.key(7)
GBM_PATHS = 500


@eqx.filter_jit
def brownian_at_end(solver, ts, key, paths):
    """W(ts[-1]) - W(ts[0]) of each path of `solver.solve_ensemble(..., key, paths)` (one
    component)."""
    keys = jax.vmap(lambda i: jax.random.fold_in(key, i))(jnp.arange(paths))
    return jax.lax.map(lambda k: solver.brownian_motion(ts, k, 1).evaluate(ts[0], ts[-1])[0], keys)


@pytest.mark.parametrize("method", ["euler", "milstein"])
def test_strong_order_on_geometric_brownian_motion(method):
    # Exact solution on the same Brownian path: x0 exp((mu - sigma^2 / 2) T + sigma W_T)
    # (Higham 2001, section 5), W_T read from the virtual Brownian tree the solver uses.
    # The strong error E|X_N - X(T)| is fitted against dt = 1/16 ... 1/128: measured
    # slopes 0.53 (Euler-Maruyama, 0.5 expected) and 0.95 (Milstein, 1.0 expected); with
    # 1/256 as well, 0.53 and 0.96 (the solves of the finest step took half the time).
    w = np.asarray(brownian_at_end(SdeSolver(dt=0.5), jnp.array([0.0, 1.0]), GBM_KEY, GBM_PATHS))
    exact = np.exp((2.0 - 0.5) * 1.0 + 1.0 * w)
    dts = [2.0**-k for k in range(4, 8)]
    errors = []
    for dt in dts:
        sol = ensemble(method, 1.0, 1.0, linear(b=2.0, d=1.0), GBM_KEY, GBM_PATHS, dt)
        assert bool(jnp.all(sol.result == 0))
        errors.append(float(np.mean(np.abs(np.asarray(sol.ys[:, -1, 0]) - exact))))
    order = fitted_order(dts, errors)
    declared = SdeSolver(method=method, dt=0.1).strong_order("diagonal")
    assert abs(order - declared) < 0.15, (order, errors)


def sine_drift(t, y, args):
    return -jnp.sin(y)


# Every method's declared strong order for additive noise, on dX = -sin(X) dt + dW from
# X0 = 1.5 to T = 1 (a nonlinear drift: on the linear Ornstein-Uhlenbeck drift SRA1 and
# ShARK converge faster than their order, measured 2.05), 200 paths, against a fine
# solve of the same paths: the virtual Brownian tree gives every step size the same path
# (its values, and space-time Levy areas, at the dyadic grid points do not depend on the
# resolution). A key's path depends on the Levy area the method reads, so the reference
# is Heun (dt = 1/4096) for the methods that read increments and SRA1 (dt = 1/1024) for
# those that read Levy areas. Only the end is saved (a step never spans a save time, and
# the largest step here is longer than 1/8). Measured slopes over dt = 1/4 ... 1/32: euler and
# milstein 1.01 (the same scheme for additive noise), heun 0.93, sra1 1.63, shark 1.64.
@pytest.mark.slow
@pytest.mark.parametrize("method", SdeSolver.methods)
def test_strong_order_for_additive_noise(method):
    args, key, paths = linear(c=1.0), jax.random.key(11), 200
    levy = method in ("sra1", "shark")
    reference_method, steps = ("sra1", 1024) if levy else ("heun", 4096)
    reference = ensemble(
        reference_method,
        1.0,
        1.5,
        args,
        key,
        paths,
        1.0 / steps,
        "additive",
        steps,
        sine_drift,
        saves=2,
    )
    reference = np.asarray(reference.ys[:, -1, 0])
    dts = [2.0**-k for k in range(2, 6)]
    errors = []
    for dt in dts:
        x = np.asarray(
            ensemble(
                method, 1.0, 1.5, args, key, paths, dt, "additive", drift=sine_drift, saves=2
            ).ys[:, -1, 0]
        )
        errors.append(float(np.mean(np.abs(x - reference))))
    order = fitted_order(dts, errors)
    declared = SdeSolver(method=method, dt=0.1).strong_order("additive")
    assert abs(order - declared) < 0.2, (order, errors)


def test_gradient_of_the_ensemble_mean_matches_finite_differences():
    # d E[X_T] / d theta of the Ornstein-Uhlenbeck ensemble (500 paths) by reverse mode
    # through the solve, against a central difference of the same discretisation with
    # the same key (the Brownian paths do not depend on theta). Measured relative
    # difference 7e-9 (h = 1e-4; the difference's truncation error is O(h^2)).
    def mean_at_end(theta):
        return jnp.mean(ou_paths(args=ou_args(theta), paths=500).ys[:, -1, 0])

    theta, h = 1.0, 1e-4
    grad = float(jax.jit(jax.grad(mean_at_end))(jnp.asarray(theta)))
    fd = (
        float(mean_at_end(jnp.asarray(theta + h))) - float(mean_at_end(jnp.asarray(theta - h)))
    ) / (2 * h)
    assert grad == pytest.approx(fd, rel=1e-7)
    # The continuous-time value -(x0 - mu) T exp(-theta T) = -0.271, within 4 standard
    # errors (the noise term's derivative has standard deviation
    # sigma sqrt(int_0^T u^2 exp(-2 theta u) du) = 0.24 per path, 0.011 for the mean);
    # measured -0.285.
    assert grad == pytest.approx(-(OU_X0 - MU) * OU_T * np.exp(-THETA * OU_T), abs=4 * 0.011)


def test_paths_are_reproducible_and_independent_of_the_ensemble_size(ou_euler):
    first = np.asarray(ou_euler.ys)
    # distinct paths within one ensemble
    assert len(np.unique(first[:, -1, 0])) == first.shape[0]
    # Path i is drawn from fold_in(key, i), so it is the same in a smaller ensemble.
    fewer = np.asarray(ou_paths(paths=500).ys)
    assert fewer.tobytes() == first[:500].tobytes()
    # (the rest on the smaller ensemble, whose program the tests above share: running
    # 1,000 paths again took longer than the 500)
    again = np.asarray(ou_paths(paths=500).ys)
    assert fewer.tobytes() == again.tobytes()
    other = np.asarray(ou_paths(key=jax.random.key(2025), paths=500).ys)
    assert not np.any(np.all(fewer[:, 1:] == other[:, 1:], axis=(1, 2)))


def test_too_many_steps_is_a_reported_failure():
    # 300 steps needed, 256 allowed: every path reports it and, with throw=False, its
    # states from the save interval that would exceed the budget on are NaN rather than
    # a plausible number (8 intervals of 38 steps: the 7th would end at step 266).
    sol = ensemble("euler", OU_T, OU_X0, ou_args(), OU_KEY, 500, OU_T / 300)
    assert bool(jnp.all(sol.result == Result.max_steps_reached))
    assert bool(jnp.all(jnp.isfinite(sol.ys[:, :7]))) and bool(jnp.all(jnp.isnan(sol.ys[:, 7:])))
    assert "max_steps" in result_message(Result.max_steps_reached)


@pytest.mark.slow
@pytest.mark.raising_checks
def test_too_many_steps_raises_when_throwing():
    solver = SdeSolver(dt=0.01, max_steps=10)
    ts, args = jnp.array([0.0, 1.0]), linear(b=1.0, d=1.0)
    with pytest.raises(Exception, match="maximum number of solver steps"):
        solver.solve(
            linear_drift, linear_diffusion, ts, jnp.array([1.0]), args, jax.random.key(0)
        ).ys.block_until_ready()


# With general noise, a zero drift and a constant 3 x 2 diffusion matrix G,
# Euler-Maruyama is exact: y(t) = y0 + G (W(t) - W(0)) for the two Brownian motions.
@pytest.mark.slow
def test_general_noise_multiplies_the_increment_by_the_matrix():
    g = jnp.array([[1.0, 0.0], [0.5, -2.0], [0.0, 3.0]])
    ts, y0, key = jnp.linspace(0.0, 1.0, 5), jnp.array([1.0, 2.0, 3.0]), jax.random.key(3)
    solver = SdeSolver(dt=0.125)
    sol = solver.solve(
        lambda t, y, a: jnp.zeros_like(y), lambda t, y, a: a, ts, y0, g, key, noise="general"
    )
    bm = solver.brownian_motion(ts, key, 2)
    w = np.stack([np.asarray(bm.evaluate(ts[0], t)) for t in ts[1:]])
    np.testing.assert_allclose(
        np.asarray(sol.ys[1:]), np.asarray(y0) + w @ np.asarray(g).T, rtol=1e-12, atol=1e-12
    )
    assert int(sol.num_steps) == 8 and int(sol.result) == 0


def test_a_method_that_does_not_fit_the_noise_is_refused():
    # Refused at trace time, before anything is compiled.
    ts, y0, key, args = (
        jnp.array([0.0, 1.0]),
        jnp.array([1.0]),
        jax.random.key(0),
        linear(b=2.0, d=1.0),
    )
    solve = SdeSolver(method="sra1", dt=0.1).solve
    with pytest.raises(
        ValueError,
        match="SDE method 'sra1' does not apply to diagonal noise.*Methods for diagonal noise: "
        "euler, milstein",
    ):
        solve(linear_drift, linear_diffusion, ts, y0, args, key, noise="diagonal")
    with pytest.raises(ValueError, match="SDE method 'milstein' does not apply to general noise"):
        SdeSolver(method="milstein", dt=0.1).strong_order("general")
    with pytest.raises(ValueError, match="Perhaps you meant 'diagonal'"):
        SdeSolver(dt=0.1).solve(linear_drift, linear_diffusion, ts, y0, args, key, noise="diagnoal")
    with pytest.raises(ValueError, match="Perhaps you meant 'shark'"):
        SdeSolver(method="shrak", dt=0.1)
    for dt in (0.0, -0.1, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="dt must be a positive finite number"):
            SdeSolver(dt=dt)
    # shapes: a matrix diffusion needs noise="general"; a drift of the wrong size
    with pytest.raises(ValueError, match="a matrix needs noise='general'"):
        SdeSolver(dt=0.1).solve(linear_drift, lambda t, y, a: jnp.ones((1, 1)), ts, y0, args, key)
    with pytest.raises(ValueError, match=r"drift returned shape \(2,\); expected \(1,\)"):
        SdeSolver(dt=0.1).solve(lambda t, y, a: jnp.ones(2), linear_diffusion, ts, y0, args, key)
    for shape in ((2, 1), (1, 0)):  # general noise: n rows and at least one Brownian motion
        with pytest.raises(
            ValueError, match=r"general noise expects a matrix \(n, m\) with n = 1 and m >= 1"
        ):
            SdeSolver(dt=0.1).solve(
                linear_drift,
                lambda t, y, a, s=shape: jnp.ones(s),
                ts,
                y0,
                args,
                key,
                noise="general",
            )
    # ... and a matrix (n, m) with n rows and m >= 1 is what general noise takes (traced only)
    general = jax.eval_shape(
        lambda: SdeSolver(dt=0.1).solve(
            linear_drift, lambda t, y, a: jnp.ones((1, 2)), ts, y0, args, key, noise="general"
        )
    )
    assert general.ys.shape == (2, 1)
    with pytest.raises(
        ValueError, match="noise='additive' needs a diffusion that does not depend on y"
    ):
        SdeSolver(method="heun", dt=0.1).solve(
            linear_drift, linear_diffusion, ts, y0, args, key, noise="additive"
        )
    with pytest.raises(ValueError, match="paths must be an int >= 1"):
        SdeSolver(dt=0.1).solve_ensemble(linear_drift, linear_diffusion, ts, y0, args, key, 0)


@pytest.mark.parametrize(
    "model",
    [OrnsteinUhlenbeck(), GeometricBrownianMotion(), StochasticLotkaVolterra()],
    ids=lambda m: m.name,
)
def test_every_sde_model_traces_with_the_best_method_for_its_noise(model):
    # The whole solve is traced (shapes, the noise-kind checks, diffrax's own check that
    # additive noise does not depend on y), not compiled.
    method = {"additive": "sra1", "diagonal": "milstein"}[model.noise]
    solver = SdeSolver(method=method, dt=0.01)
    ts, y0 = jnp.linspace(0.0, 1.0, 5), model.initial_state()
    out = jax.eval_shape(
        lambda p, k: solver.solve_ensemble(
            model.drift, model.diffusion, ts, y0, p, k, 3, noise=model.noise
        ),
        model.default_params(),
        jax.random.key(0),
    )
    assert out.ys.shape == (3, 5, len(model.state_names)) and out.result.shape == (3,)


def test_noise_kinds_agree_between_models_and_solvers():
    # physics and solvers do not import each other; the two declarations must agree.
    assert MODEL_NOISE_KINDS == NOISE_KINDS
    for method in SdeSolver.methods:
        assert set(SdeSolver(method=method, dt=0.1).noise_kinds) <= set(NOISE_KINDS)


def test_an_ensembles_brownian_trees_resolve_half_its_smallest_step():
    # Save intervals 0.3 and 0.65 with dt = 0.1 take 3 steps of 0.1 and 7 of 0.0929: each
    # path's VirtualBrownianTree is resolved to half the smallest step, 0.0464 (diffrax
    # keeps the tolerance relative to the span, here 0.95).
    ts = jnp.asarray([0.0, 0.3, 0.95])
    tree = SdeSolver(dt=0.1).brownian_motion(ts, jax.random.key(0), 1, jnp.float64)
    np.testing.assert_allclose(float(tree.tol) * 0.95, 0.65 / 7 / 2, rtol=1e-12)


@pytest.mark.parametrize(
    ("save", "dt", "steps"),
    [(11, 0.01, 10), (101, 0.01, 1), (41, 0.001, 25), (21, 0.05, 1), (4, 0.1, 4)],
)
def test_a_save_spacing_of_whole_steps_takes_exactly_those_steps(save, dt, steps):
    # linspace(0, 1, save) spacings divided by dt compute as, say, 10.000000000000002 or
    # 9.999999999999998: the count must not jump to the next integer on rounding; a
    # spacing of 1/3 with dt 0.1 is 3.33 steps and takes 4.
    counts = np.asarray(SdeSolver(dt=dt).steps(jnp.linspace(0.0, 1.0, save)))
    assert np.all(counts == steps), np.unique(counts)


@eqx.filter_jit
def advance_two(loop, state, frames):
    return loop.advance(state, frames, 2)


def test_the_loop_cut_anywhere_gives_the_same_bytes():
    # The loop of a run written chunk by chunk steps each save interval from the state
    # saved at its start (0.3 / 0.07 is 4.3 steps, so 5; then 3, 8 and 4).
    from solvers import SdeEnsemble, SdeLoop

    ts, y0 = jnp.asarray([0.0, 0.3, 0.45, 0.95, 1.2]), jnp.array([1.0])

    def chunked(args, pattern):
        loop = SdeLoop(
            SdeEnsemble(SdeSolver(dt=0.07, throw=False), 3),
            linear_drift,
            linear_diffusion,
            ts,
            args,
            jax.random.key(11),
        )
        state, rows = loop.init(y0), []
        for frames in pattern:
            state, saved = advance_two(
                loop, state, jnp.asarray(frames, jnp.int32)
            )  # (traced: one program for every cut)
            rows.append(np.asarray(saved[:frames]))
        return np.concatenate(rows).transpose(1, 0, 2), state

    noisy = linear(b=-1.0, d=0.5)
    first, state = chunked(noisy, (2, 1, 2))
    # One compiled chunk program: any cut gives the same bytes, and the steps counted.
    assert (
        chunked(noisy, (1, 2, 2))[0].tobytes()
        == chunked(noisy, (1, 1, 1, 1, 1))[0].tobytes()
        == first.tobytes()
    )
    assert int(state.num_steps) == 3 * (5 + 3 + 8 + 4)
    # Without noise (the same program, other values) Euler-Maruyama is Euler's method:
    # interval i multiplies the state by (1 + b h_i)^n_i with h_i = its length / n_i.
    steps = np.array([5, 3, 8, 4])
    growth = (1.0 - np.diff(np.asarray(ts)) / steps) ** steps
    exact = np.concatenate([[1.0], np.cumprod(growth)])
    quiet, _ = chunked(linear(b=-1.0), (2, 1, 2))
    np.testing.assert_allclose(quiet[:, :, 0], np.broadcast_to(exact, (3, 5)), rtol=1e-13)
    # The one-call solve (another program: XLA may round the last bit differently) is
    # compared in tests/sim/test_sde_family.py, where `sim.simulate` calls it.


def test_max_steps_bounds_the_whole_path_and_fails_from_the_interval_beyond_it():
    # 4 save intervals of 5 steps each: 20 steps in all. With max_steps = 12 the third
    # interval would end at step 15, so the path fails there and is NaN from then on.
    solver = SdeSolver(dt=0.05, max_steps=12, throw=False)
    ts, y0 = jnp.linspace(0.0, 1.0, 5), jnp.array([1.0])
    sol = eqx.filter_jit(solver.solve)(
        linear_drift, linear_diffusion, ts, y0, linear(b=-1.0, d=0.5), jax.random.key(0)
    )  # (compiled whole)
    assert int(sol.result) == Result.max_steps_reached
    assert np.all(np.isfinite(np.asarray(sol.ys[:3]))) and np.all(np.isnan(np.asarray(sol.ys[3:])))
