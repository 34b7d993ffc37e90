"""SDE strategy on diffrax: fixed-step Ito integration driven by a virtual Brownian tree."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, ClassVar, NamedTuple

import diffrax
import equinox as eqx
import jax
import jax.numpy as jnp
import lineax
import numpy as np
from jaxtyping import Array, Float, Int, PRNGKeyArray

from ._ode import did_you_mean
from ._results import Result, from_diffrax, result_message
from ._types import Times

NOISE_KINDS = ("diagonal", "additive", "general")
"""What the diffusion returns: a vector [n] (diagonal; additive when it does not depend
on y) or a matrix [n, m] (general)."""

Drift = Callable[[Any, Float[Array, " n"], Any], Float[Array, " n"]]
Diffusion = Callable[[Any, Float[Array, " n"], Any], Float[Array, " n"] | Float[Array, "n m"]]


class _Method(NamedTuple):
    """A diffrax solver, the noise kinds for which it converges to the Ito solution, the
    Brownian information it reads, and its strong order for each of those noise kinds."""

    solver: Callable[[], diffrax.AbstractSolver]
    levy_area: type[diffrax.AbstractBrownianIncrement]
    strong_order: dict[str, float]


# Strong orders: Euler-Maruyama 0.5 and Milstein 1.0 (Kloeden & Platen, "Numerical
# Solution of Stochastic Differential Equations", 1992, sections 10.2 and 10.3; Milstein
# needs commutative noise, which diagonal noise with g_i depending on y_i alone is). For
# additive noise Milstein's correction vanishes, so Euler-Maruyama is Milstein's scheme
# and has order 1.0, as Heun's method has. SRA1 1.5 (Roessler, SIAM J. Numer. Anal. 48,
# 922, 2010); ShARK 1.5 (Foster, dos Reis & Strange, arXiv:2210.17543). Heun, SRA1 and
# ShARK converge to the Stratonovich solution, which is the Ito solution for additive
# noise only. tests/solvers/test_sde.py measures every declared order.
_METHODS: dict[str, _Method] = {
    "euler": _Method(
        diffrax.Euler, diffrax.BrownianIncrement, {"diagonal": 0.5, "additive": 1.0, "general": 0.5}
    ),
    "milstein": _Method(
        diffrax.ItoMilstein, diffrax.BrownianIncrement, {"diagonal": 1.0, "additive": 1.0}
    ),
    "heun": _Method(diffrax.Heun, diffrax.BrownianIncrement, {"additive": 1.0}),
    "sra1": _Method(diffrax.SRA1, diffrax.SpaceTimeLevyArea, {"additive": 1.5}),
    "shark": _Method(diffrax.ShARK, diffrax.SpaceTimeLevyArea, {"additive": 1.5}),
}


class SdeSolution(eqx.Module):
    """What `SdeSolver.solve` and `SdeSolver.solve_ensemble` return.

    Attributes:
        ys: state at each requested time, [T, n], or [paths, T, n] for an ensemble (NaN
            rows from a failure on when `throw=False`).
        num_steps: steps taken, int scalar (or [paths]).
        result: a `Result` code, 0 on success (see `result_message`), int32 scalar (or
            [paths]).
    """

    ys: Float[Array, "*paths T n"]
    num_steps: Int[Array, "*paths"]
    result: Int[Array, "*paths"]


def interval_steps(ts: Times, dt: float | Array) -> Float[Array, " intervals"]:
    """The steps between consecutive save times: the fewest of at most `dt` each (whole
    numbers, as floats: a count beyond any integer type is still a count).

    A spacing that is a whole number of steps up to rounding (0.1 / 0.01 computes as
    10.000000000000002) takes that number, not one more.
    """
    ratio = jnp.diff(ts) / dt
    eps = jnp.finfo(ratio.dtype).eps
    return jnp.maximum(jnp.ceil(ratio * (1 - 64 * eps)), 1)


class SdeSolver(eqx.Module):
    """Fixed-step integration of the Ito SDE dy = f(t, y, args) dt + g(t, y, args) dW with diffrax.

    The Brownian motion is a `diffrax.VirtualBrownianTree` on [ts[0], ts[-1]] built from
    a key (`brownian_motion`): a path is reproducible from its key alone, the same path
    serves every step size (its values at the dyadic grid points do not depend on the
    resolution), and reverse-mode gradients flow through the solve (diffrax's recursive
    checkpointing). The tree also draws the Levy areas the method reads, which changes
    the path a key gives: euler, milstein and heun share one path per key, sra1 and
    shark another.

    Between two save times a path takes the fewest equal steps of at most `dt`
    (`interval_steps`), so every save time is a step end: nothing is interpolated, and
    a path can be stopped at any save time and continued from its state there with the
    same numbers (what `SdeLoop` does for runs written chunk by chunk).

    Arguments:
        method: `euler` (Euler-Maruyama, default; any noise), `milstein` (Ito
            Milstein; diagonal or additive noise, where each g_i depends on y_i alone),
            and for additive noise only `heun`, `sra1` (Roessler 2010) and `shark`
            (Foster, dos Reis & Strange 2023), which converge to the Stratonovich
            solution, the Ito solution when the noise is additive.
        dt: the largest step. Traced: changing it does not recompile.
        max_steps: bound on the number of steps of one path from ts[0] to ts[-1];
            needing more is the failure `max_steps_reached` (from the save interval that
            would exceed it on).
        throw: True raises at run time when a solve fails; False returns the failure in
            `SdeSolution.result` (NaN states), for batched sweeps.

    Strong orders (the rate of E|y_N - y(t_N)| in the step), from `strong_order`:
    euler 0.5 (1.0 for additive noise), milstein 1.0, heun 1.0, sra1 1.5, shark 1.5.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> solver = SdeSolver(method="euler", dt=0.01)
        >>> sol = solver.solve_ensemble(lambda t, y, a: -y, lambda t, y, a: 0.5 * jnp.ones_like(y),
        ...     jnp.linspace(0.0, 1.0, 11), jnp.array([1.0]), None, jax.random.key(0), 100,
        ...     noise="additive")
        >>> sol.ys.shape
        (100, 11, 1)
    """

    method: str = eqx.field(static=True, default="euler")
    dt: float | Array = eqx.field(kw_only=True)
    max_steps: int = eqx.field(static=True, default=16384)
    throw: bool = eqx.field(static=True, default=True)

    methods: ClassVar[tuple[str, ...]] = tuple(_METHODS)

    def __check_init__(self):
        if self.method not in _METHODS:
            raise ValueError(
                f"unknown SDE method {self.method!r}; expected one of {', '.join(_METHODS)}."
                + did_you_mean(self.method, _METHODS)
            )
        if self.max_steps < 1:
            raise ValueError(f"max_steps must be >= 1, got {self.max_steps}")
        if not isinstance(self.dt, jax.core.Tracer):
            dt = np.asarray(self.dt)
            if (
                dt.ndim != 0
                or not np.issubdtype(dt.dtype, np.number)
                or not (np.isfinite(dt) and dt > 0)
            ):
                raise ValueError(f"dt must be a positive finite number (the step), got {self.dt!r}")

    @property
    def noise_kinds(self) -> tuple[str, ...]:
        """The noise kinds for which this method converges to the Ito solution."""
        return tuple(_METHODS[self.method].strong_order)

    def strong_order(self, noise: str) -> float:
        """The method's strong order of convergence for `noise` (one of NOISE_KINDS)."""
        self._check_noise(noise)
        return _METHODS[self.method].strong_order[noise]

    def steps(self, ts: Times) -> Float[Array, " intervals"]:
        """The steps a path takes between consecutive save times (see `interval_steps`)."""
        return interval_steps(ts, self.dt)

    def brownian_motion(
        self, ts: Times, key: PRNGKeyArray, dims: int, dtype: Any = None
    ) -> diffrax.VirtualBrownianTree:
        """The Brownian motion that `solve` draws from `key`: `dims` independent components on
        [ts[0], ts[-1]], resolved to half the smallest step, with the Levy area the method needs.

        Arguments:
            ts: the save times [T] given to `solve`.
            key: a JAX random key.
            dims: the number of Brownian motions (n for diagonal and additive noise, m
                for general noise).
            dtype: float dtype of the increments (default: JAX's default float).

        Returns:
            A `diffrax.VirtualBrownianTree`; `.evaluate(ts[0], t)` is W(t) - W(ts[0]).
        """
        dtype = jnp.result_type(float) if dtype is None else dtype
        return diffrax.VirtualBrownianTree(
            ts[0],
            ts[-1],
            tol=jnp.min(jnp.diff(ts) / self.steps(ts)) / 2,
            shape=jax.ShapeDtypeStruct((dims,), dtype),
            key=key,
            levy_area=_METHODS[self.method].levy_area,
        )

    def interval(
        self,
        drift: Drift,
        diffusion: Diffusion,
        ts: Times,
        args: Any,
        noise: str,
        bm,
        k: Array,
        y: Array,
    ) -> tuple[Float[Array, " n"], Int[Array, ""], Int[Array, ""]]:
        """One path from save time k to k + 1, started from `y` there: (state at k + 1,
        steps taken, `Result` code). The building block of `solve` and of `SdeLoop`."""
        steps = self.steps(ts)
        t0, t1 = ts[k], ts[k + 1]
        field = diffusion if noise == "general" else _Diagonal(diffusion)
        terms = diffrax.MultiTerm(diffrax.ODETerm(drift), diffrax.ControlTerm(field, bm))
        sol = diffrax.diffeqsolve(
            terms,
            _METHODS[self.method].solver(),
            t0=t0,
            t1=t1,
            dt0=(t1 - t0) / steps[k],
            y0=y,
            args=args,
            saveat=diffrax.SaveAt(t1=True),
            stepsize_controller=diffrax.ConstantStepSize(),
            max_steps=self.max_steps,
            throw=False,
        )
        code = from_diffrax(sol.result)
        over = jnp.cumsum(steps)[k] > self.max_steps  # the path's budget, known before stepping
        code = jnp.where(over, jnp.int32(Result.max_steps_reached), code)
        return sol.ys[0], jnp.asarray(sol.stats["num_steps"], jnp.int32), code

    def _path(self, drift, diffusion, ts, y0, args, bm, noise) -> SdeSolution:
        """Every save interval of one path in turn (a scan: reverse-mode differentiable);
        NaN from the first failure on."""

        def step(carry, k):
            y, taken, code = carry
            y1, n, c = self.interval(drift, diffusion, ts, args, noise, bm, k, y)
            code = jnp.where(code == 0, c, code)
            y1 = jnp.where(code != 0, jnp.nan, y1)
            return (y1, jnp.where(carry[2] == 0, taken + n, taken), code), y1

        zero = jnp.asarray(0, jnp.int32)
        (_, taken, code), ys = jax.lax.scan(step, (y0, zero, zero), jnp.arange(ts.shape[0] - 1))
        return SdeSolution(ys=jnp.concatenate([y0[None], ys]), num_steps=taken, result=code)

    def _thrown(self, sol: SdeSolution) -> SdeSolution:
        if not self.throw:
            return sol
        messages = [result_message(code) for code in Result]
        ys = eqx.branched_error_if(sol.ys, sol.result != 0, jnp.max(sol.result), messages)
        return SdeSolution(ys=ys, num_steps=sol.num_steps, result=sol.result)

    def solve(
        self,
        drift: Drift,
        diffusion: Diffusion,
        ts: Times,
        y0: Float[Array, " n"],
        args: Any,
        key: PRNGKeyArray,
        *,
        noise: str = "diagonal",
    ) -> SdeSolution:
        """Integrate one path from ts[0] to ts[-1], saving the state at every entry of `ts`.

        Arguments:
            drift: f(t, y, args) -> [n].
            diffusion: g(t, y, args) -> [n] for diagonal and additive noise (component i
                driven by its own Brownian motion), [n, m] for general noise.
            ts: increasing save times [T], T >= 2.
            y0: initial state [n].
            args: passed through to `drift` and `diffusion` (for example the params dict).
            key: a JAX random key; the same key gives the same path.
            noise: one of NOISE_KINDS; it must be one the method handles.

        Returns:
            An `SdeSolution` with `ys` [T, n].

        Raises:
            ValueError: (at trace time) an unknown noise kind, a method that does not
                handle it, or shapes that do not fit.
        """
        dims = self._check(drift, diffusion, ts, y0, args, noise)
        bm = self.brownian_motion(ts, key, dims, y0.dtype)
        return self._thrown(self._path(drift, diffusion, ts, y0, args, bm, noise))

    def solve_ensemble(
        self,
        drift: Drift,
        diffusion: Diffusion,
        ts: Times,
        y0: Float[Array, " n"],
        args: Any,
        key: PRNGKeyArray,
        paths: int,
        *,
        noise: str = "diagonal",
    ) -> SdeSolution:
        """Integrate `paths` independent paths in one vectorised computation.

        Path i is `solve(..., key=jax.random.fold_in(key, i))`: it does not depend on how
        many paths are asked for, and the same key gives the same ensemble.

        Arguments:
            drift, diffusion, ts, y0, args, noise: as in `solve` (shared by every path).
            key: a JAX random key.
            paths: the number of paths (static: changing it recompiles).

        Returns:
            An `SdeSolution` with `ys` [paths, T, n], `num_steps` and `result` [paths].
        """
        if not (isinstance(paths, (int, np.integer)) and paths >= 1):
            raise ValueError(f"paths must be an int >= 1, got {paths!r}")
        dims = self._check(drift, diffusion, ts, y0, args, noise)

        def one(i):
            bm = self.brownian_motion(ts, jax.random.fold_in(key, i), dims, y0.dtype)
            return self._path(drift, diffusion, ts, y0, args, bm, noise)

        return self._thrown(jax.vmap(one)(jnp.arange(paths)))

    def _check_noise(self, noise: str) -> None:
        if noise not in NOISE_KINDS:
            raise ValueError(
                f"unknown noise kind {noise!r}; expected one of {', '.join(NOISE_KINDS)}."
                + did_you_mean(noise, NOISE_KINDS)
            )
        if noise not in _METHODS[self.method].strong_order:
            fitting = [m for m, spec in _METHODS.items() if noise in spec.strong_order]
            raise ValueError(
                f"SDE method {self.method!r} does not apply to {noise} noise: it converges to "
                f"the Ito solution for {' and '.join(self.noise_kinds)} noise only. "
                f"Methods for {noise} noise: {', '.join(fitting)}."
            )

    def _check(self, drift, diffusion, ts, y0, args, noise) -> int:
        """Validate the problem at trace time; return the number of Brownian motions."""
        self._check_noise(noise)
        if jnp.ndim(ts) != 1 or jnp.shape(ts)[0] < 2:
            raise ValueError(
                f"ts must be a vector of at least 2 save times, got shape {jnp.shape(ts)}"
            )
        if jnp.ndim(y0) != 1 or not jnp.issubdtype(jnp.result_type(y0), jnp.floating):
            raise ValueError(
                f"y0 must be a float vector [n], got {jnp.result_type(y0)} of shape {jnp.shape(y0)}"
            )
        n = y0.shape[0]
        f = jax.eval_shape(drift, ts[0], y0, args)
        if f.shape != (n,):
            raise ValueError(f"drift returned shape {f.shape}; expected {(n,)}, the shape of y0")
        g = jax.eval_shape(diffusion, ts[0], y0, args)
        if noise == "general":
            if len(g.shape) != 2 or g.shape[0] != n or g.shape[1] < 1:
                raise ValueError(
                    f"diffusion returned shape {g.shape}; general noise expects a matrix (n, m) "
                    f"with n = {n} and m >= 1 Brownian motions"
                )
            return g.shape[1]
        if g.shape != (n,):
            raise ValueError(
                f"diffusion returned shape {g.shape}; {noise} noise expects {(n,)}, the shape of "
                f"y0 (one Brownian motion per component; a matrix needs noise='general')"
            )
        if noise == "additive" and _depends_on_y(diffusion, ts[0], y0, args):
            raise ValueError(
                "noise='additive' needs a diffusion that does not depend on y (it may depend "
                "on t); this one does. Use noise='diagonal' with euler or milstein."
            )
        return n


def _depends_on_y(diffusion: Diffusion, t, y0, args) -> bool:
    """Whether the diffusion depends on y at all (a structural check: its derivative with
    respect to y is not identically zero in JAX's tracing, as diffrax's SRK solvers check)."""
    _, tangent = eqx.filter_jvp(lambda y: diffusion(t, y, args), (y0,), (jnp.ones_like(y0),))
    return len(jax.tree.leaves(tangent)) > 0


class _Diagonal(eqx.Module):
    """A diffusion vector [n] as the diagonal operator diffrax multiplies the increment by."""

    diffusion: Diffusion

    def __call__(self, t, y, args) -> lineax.DiagonalLinearOperator:
        return lineax.DiagonalLinearOperator(self.diffusion(t, y, args))
