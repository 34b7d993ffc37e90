"""Ensemble reweighting of a run's frames for a g(r) fit: the `Ensemble` of one run's
frames at reference parameters, whose Boltzmann weights give the average g(r) at nearby
parameters, and the sums over blocks of frames (`_BlockSums`) from which the loss of the
run's average, the Jacobian of its residuals, the step they give and the jackknife
standard errors of each follow."""

from __future__ import annotations

import dataclasses

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import Array

from ._fit_problem import Free


class Ensemble(eqx.Module):
    """The frames of one run at reference parameters and what reweighting needs of them.

    Attributes:
        model: the particle model; system: the starting system (box, species, masses).
        params: every parameter at the reference point.
        positions: the frames averaged [F, n, dim]; g: their g(r) [F, pairs, bins].
        energy: the potential energy of each frame at the reference parameters [F].
        kt: Boltzmann's constant times the thermostat's temperature.
        free: the free quantities (their transforms).
    """

    model: object
    system: object
    params: dict[str, Array]
    positions: Array
    g: Array
    energy: Array
    kt: Array
    free: tuple[Free, ...] = eqx.field(static=True)

    def parameters(self, u: Array) -> dict[str, Array]:
        """The model's parameters at unconstrained free values `u` [p]."""
        return {**self.params, **{f.key: f.to_natural(u[k]) for k, f in enumerate(self.free)}}

    def energies(self, params: dict[str, Array]) -> Array:
        """The potential energy of every frame [F] (all pairs within the cutoff)."""
        return jax.lax.map(lambda x: self.model.energy(self.system.at(x), params), self.positions)

    def weights(self, u: Array) -> Array:
        """Boltzmann weights of the frames at `u` [F] (uniform at the reference point)."""
        return jax.nn.softmax(-(self.energies(self.parameters(u)) - self.energy) / self.kt)

    def average(self, u: Array) -> Array:
        """The reweighted time average of g at `u` [pairs, bins]."""
        return jnp.einsum("f,fpb->pb", self.weights(u), self.g)


@eqx.filter_jit
def _residuals(ensemble: Ensemble, u: Array, target: Array) -> tuple[Array, Array]:
    """(residuals [pairs x bins], effective sample size) of the reweighted g at `u`."""
    w = ensemble.weights(u)
    return (jnp.einsum("f,fpb->pb", w, ensemble.g) - target).ravel(), 1.0 / jnp.sum(w * w)


def reweighted_loss(ensemble: Ensemble, u: Array, target: Array) -> Array:
    """Half the sum of squared differences of the reweighted g at `u` from `target`
    (differentiable: `jax.grad` of it is the gradient the fit steps on)."""
    return 0.5 * jnp.sum((ensemble.average(u) - target) ** 2)


@eqx.filter_jit
def _energies(ensemble: Ensemble, params: dict[str, Array]) -> Array:
    return ensemble.energies(params)


@dataclasses.dataclass(frozen=True)
class _BlockSums:
    """Sums over blocks of a run's frames of what the reweighted average and its
    derivative at the run's own parameters are made of: g [M] and dU/du [p] of each
    frame, and their products. The full average leaves no block out; the jackknife
    leaves out one block at a time.

    Attributes:
        count: frames [blocks]; g: sums of g [blocks, M]; du: sums of dU/du
            [blocks, p]; gdu: sums of g dU/du^T [blocks, M, p]; target [M]; kt.
    """

    count: np.ndarray
    g: np.ndarray
    du: np.ndarray
    gdu: np.ndarray
    target: np.ndarray
    kt: float

    @classmethod
    def of(
        cls, ensemble: Ensemble, u: np.ndarray, target: Array, labels: np.ndarray, kt: float
    ) -> "_BlockSums":
        g = np.asarray(ensemble.g, dtype=float).reshape(len(labels), -1)
        du = np.asarray(_energy_derivatives(ensemble, jnp.asarray(u)), dtype=float)
        blocks = int(labels.max()) + 1
        count = np.bincount(labels, minlength=blocks).astype(float)
        sum_g = np.stack([g[labels == b].sum(axis=0) for b in range(blocks)])
        sum_du = np.stack([du[labels == b].sum(axis=0) for b in range(blocks)])
        sum_gdu = np.stack([g[labels == b].T @ du[labels == b] for b in range(blocks)])
        return cls(count, sum_g, sum_du, sum_gdu, np.asarray(target, dtype=float).ravel(), kt)

    def _pieces(self, leave: int | None) -> tuple[np.ndarray, np.ndarray]:
        """The residuals [M] and the Jacobian [M, p] of the average without block `leave`."""
        keep = np.ones(len(self.count), bool)
        if leave is not None:
            keep[leave] = False
        n = self.count[keep].sum()
        g, du, gdu = (
            self.g[keep].sum(axis=0) / n,
            self.du[keep].sum(axis=0) / n,
            self.gdu[keep].sum(axis=0) / n,
        )
        return g - self.target, -(gdu - np.outer(g, du)) / self.kt

    def _jackknife(self, value) -> tuple[np.ndarray, np.ndarray]:
        """A quantity of the (residuals, Jacobian) of all frames, and its jackknife
        standard error over the blocks."""
        full = np.asarray(value(*self._pieces(None)))
        left = np.stack([np.asarray(value(*self._pieces(b))) for b in range(len(self.count))])
        n = len(self.count)
        return full, np.asarray(
            np.sqrt((n - 1) / n * np.sum((left - left.mean(axis=0)) ** 2, axis=0))
        )

    def loss(self) -> tuple[float, float]:
        """Half the sum of squared residuals of the run's average, and its standard error."""
        value, se = self._jackknife(lambda r, j: 0.5 * r @ r)
        return float(value), float(se)

    def step(
        self, radius: float, scaling: str = "identity"
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The step from the run [p] that no unconstrained value takes further than
        `radius`: the Gauss-Newton step if it stays within, else the Levenberg step
        (J^T J + lambda I) s = -J^T r with lambda, doubled from 1e-3 times the largest
        diagonal element of J^T J, the first that keeps it within. Also the Gauss-Newton
        step [p] and its standard errors [p] (the jackknife): what convergence is judged
        by. NaN where the residuals or the Jacobian are not finite. (`scaling =
        "diagonal"` damps by lambda diag(J^T J) instead, Marquardt's: what
        experiments/benchmarks/rdf_fit_steps.py compares the fit's step with.)"""
        r, j = self._pieces(None)
        jtj = j.T @ j
        if not (np.all(np.isfinite(r)) and np.all(np.isfinite(jtj))):
            nan = np.full(jtj.shape[0], np.nan)
            return nan, nan, nan
        top = max(float(np.max(np.diag(jtj))), 1e-300)  # (a Jacobian of zeros: a step of zeros)
        scale = {
            "identity": top * np.eye(len(jtj)),
            "diagonal": np.diag(np.maximum(np.diag(jtj), 1e-300)),
        }[scaling]

        def solve(r, j, damping=1e-12):
            return -np.linalg.solve(j.T @ j + damping * scale, j.T @ r)

        newton = solve(r, j)
        _, se = self._jackknife(solve)
        step, damping = newton, 1e-3
        while float(np.max(np.abs(step))) > radius and damping < 1e12:
            step = solve(r, j, damping)
            damping *= 2
        return step, newton, se


@eqx.filter_jit
def _energy_derivatives(ensemble: Ensemble, u: Array) -> Array:
    """dU/du of every frame [F, p]: the energy's derivatives by the free values."""
    return jax.jacfwd(lambda v: ensemble.energies(ensemble.parameters(v)), argnums=0)(u).reshape(
        -1, len(u)
    )
