"""The NUTS kernel of `sim infer` (`nuts_kernel`), whose chains start where the best of a
few short optimisations from the prior lies (`SearchedNUTS`)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import optax
from numpyro.infer import NUTS, init_to_median

from ._bayes_model import BayesModel, InferSection


def nuts_kernel(model: BayesModel, section: InferSection, init=None) -> NUTS:
    """The NUTS kernel for a model and `[infer]` settings. Unless `init` says where the
    chains start, each chain starts where the best of `section.start_candidates`
    optimised points lies (`SearchedNUTS`)."""
    settings = dict(
        dense_mass=section.dense_mass,
        target_accept_prob=section.target_accept,
        max_tree_depth=section.max_tree_depth,
    )
    if init is not None:
        return NUTS(model, init_strategy=init, **settings)
    return SearchedNUTS(model, candidates=section.start_candidates, **settings)


class SearchedNUTS(NUTS):
    """NUTS whose chains start at the lowest potential energy that `candidates` short
    optimisations reach, each chain from its own points.

    The candidates are the median of 15 prior draws and `candidates - 1` prior draws,
    each followed by `START_STEPS` Adam steps on the potential energy in the
    unconstrained space (a point where the density is zero or not finite counts as
    infinite). A posterior may have a local mode that a chain reaches from the prior
    and leaves only by chance: lynx-hare's at rtol 1e-6 (a poor fit, 40 nats below the
    main mode, with sigma near 1) holds the optimisation from the prior median in 3 of
    4 seeds and from half of the prior draws, and a chain started there was still in
    it after 500 warmup steps in 3 of 4 seeds (experiments/benchmarks/RESULTS.md).
    With one candidate, the chain starts at the prior median, unoptimised. The search
    runs inside `init`, so it is part of each chain's start program (compiled
    with the chain) and of every `MCMC.run`.
    """

    def __init__(self, model, *, candidates: int = 8, **settings):
        super().__init__(model, init_strategy=init_to_median(num_samples=15), **settings)
        self.candidates = candidates

    def init(
        self,
        rng_key,
        num_warmup,
        init_params=None,
        model_args=(),
        model_kwargs={},  # noqa: B006 (numpyro's signature; not mutated)
    ):
        if init_params is None and self.candidates > 1:
            search = lambda key: _searched_start(
                self.model, key, self.candidates, model_args, model_kwargs
            )  # noqa: E731
            key = (
                jax.random.fold_in(rng_key, 1)
                if jnp.ndim(rng_key) == 1
                else jax.vmap(jax.random.fold_in, (0, None))(rng_key, 1)
            )
            init_params = search(key) if jnp.ndim(rng_key) == 1 else jax.lax.map(search, key)
        return super().init(rng_key, num_warmup, init_params, model_args, model_kwargs)


# Adam steps of each candidate start and their size in the unconstrained space: from
# lynx-hare's prior draws, the best of 8 reaches each seed's main mode within 0.1% of its
# potential energy. (L-BFGS with its line search settles in fewer steps, but its program
# took 6x as long to compile and 20x as long to run, 1.6 s a chain, as NUTS's warmup.)
START_STEPS = 200
START_RATE = 0.1


def _searched_start(model, key, candidates: int, model_args, model_kwargs) -> dict[str, jax.Array]:
    """The unconstrained point of lowest potential energy that `START_STEPS` Adam steps
    from each of `candidates` points reach (`SearchedNUTS`)."""
    from jax.flatten_util import ravel_pytree
    from numpyro.infer import init_to_sample
    from numpyro.infer.util import initialize_model

    median_key, draws_key = jax.random.split(key)
    info = initialize_model(
        median_key,
        model,
        init_strategy=init_to_median(num_samples=15),
        model_args=model_args,
        model_kwargs=model_kwargs,
        dynamic_args=True,
    )
    potential = info.potential_fn(*model_args, **model_kwargs)
    drawn = initialize_model(
        jax.random.split(draws_key, candidates - 1),
        model,
        init_strategy=init_to_sample,
        model_args=model_args,
        model_kwargs=model_kwargs,
    )
    start, unravel = ravel_pytree(info.param_info.z)
    points = jnp.concatenate(
        [start[None], jax.vmap(lambda z: ravel_pytree(z)[0])(drawn.param_info.z)]
    )

    def energy(flat):
        value = potential(unravel(flat))
        return jnp.where(jnp.isfinite(value), value, jnp.inf)

    optimiser = optax.adam(START_RATE)

    def optimised(point):
        def step(carry, _):
            point, state = carry
            grad = jax.grad(energy)(point)
            updates, state = optimiser.update(
                jnp.where(jnp.isfinite(grad), grad, 0.0), state, point
            )
            return (optax.apply_updates(point, updates), state), None

        (point, _), _ = jax.lax.scan(step, (point, optimiser.init(point)), None, length=START_STEPS)
        return point, energy(point)

    ends, values = jax.vmap(optimised)(points)  # (`energy` is inf wherever it is not finite)
    best = jnp.argmin(values)
    # (where every optimisation failed, the prior median: its own check then refuses it)
    return unravel(jnp.where(jnp.isfinite(values[best]), ends[best], start))
