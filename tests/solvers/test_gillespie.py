"""Gillespie's direct method (`solvers.gillespie`): 10^5 paths of a birth-death process
against its exact Poisson law, isomerisation against its exact binomial law (and the
count it conserves), the combinatorial propensity of a dimerisation against its exact
waiting time, a path that depends on its key alone, and the paths that stop; reactions
as written ("S + I -> 2 I") against the tables they mean, over generated networks; the
rate equations and the chemical Langevin equation of a birth-death process against its
exact mean and stationary variance."""

import math
import re

import hypothesis
import hypothesis.strategies as st
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from physics.reactions import MassAction, parse_reactions
from solvers import gillespie

TIMES = jnp.asarray([0.0, 0.5, 1.0, 5.0])


def _within(sample: np.ndarray, mean: float, variance: float, k: float = 4.5) -> None:
    """The sample's mean within k standard errors of `mean`."""
    error = np.sqrt(variance / sample.size)
    assert abs(sample.mean() - mean) < k * error + 1e-12, (sample.mean(), mean, error)


def test_a_birth_death_process_has_the_poisson_law_of_its_mean():
    # 0 -> X at k, X -> 0 at gamma x, from x = 0: X(t) is Poisson with mean
    # (k / gamma)(1 - exp(-gamma t)) (the M/M/infinity queue)
    network = MassAction(reactants=[[0], [1]], products=[[1], [0]])
    keys = jax.random.split(jax.random.key(0), 100_000)
    paths = gillespie(network, jnp.asarray([0]), jnp.asarray([10.0, 1.0]), TIMES, keys)
    counts = np.asarray(paths.counts[:, :, 0])
    assert counts.shape == (100_000, 4) and not np.any(paths.unfinished)
    for i, t in enumerate(np.asarray(TIMES)):
        m = 10.0 * (1.0 - np.exp(-t))
        _within(counts[:, i], m, max(m, 1e-12))
        if m > 0:  # its variance is its mean; P(X = 0) = exp(-m)
            _within((counts[:, i] - counts[:, i].mean()) ** 2, m, m + 2 * m * m)
            zero = np.exp(-m)
            _within((counts[:, i] == 0).astype(float), zero, zero * (1 - zero))
        else:
            assert np.all(counts[:, i] == 0)


def test_isomerisation_has_the_binomial_law_and_keeps_its_molecules():
    # A -> B at k1, B -> A at k2, 50 A at the start: each molecule flips on its own, so
    # A(t) is binomial(50, p(t)), p = (k2 + k1 exp(-(k1 + k2) t)) / (k1 + k2)
    network = MassAction(reactants=[[1, 0], [0, 1]], products=[[0, 1], [1, 0]])
    k1, k2 = 2.0, 0.5
    keys = jax.random.split(jax.random.key(1), 20_000)
    paths = gillespie(network, jnp.asarray([50, 0]), jnp.asarray([k1, k2]), TIMES, keys)
    counts = np.asarray(paths.counts)
    assert np.all(counts.sum(axis=2) == 50) and np.all(counts >= 0)
    for i, t in enumerate(np.asarray(TIMES)):
        p = (k2 + k1 * np.exp(-(k1 + k2) * t)) / (k1 + k2)
        _within(counts[:, i, 0], 50 * p, max(50 * p * (1 - p), 1e-12))


def test_a_dimerisation_waits_for_its_number_of_pairs():
    # 2 A -> B at c, from 3 A: one pair of three can react, a_0 = c * 3 * 2 / 2, so A
    # stays 3 until an exponential time of rate 3c (A^2 would give 9c), then 1 for ever
    network = MassAction(reactants=[[2, 0]], products=[[0, 1]])
    keys = jax.random.split(jax.random.key(2), 40_000)
    c = 0.4
    paths = gillespie(network, jnp.asarray([3, 0]), jnp.asarray([c]), TIMES, keys)
    counts = np.asarray(paths.counts)
    assert set(np.unique(counts[:, :, 0])) <= {1, 3}
    assert np.all(np.asarray(paths.events) == 1)  # (then no pair is left: it waits for ever)
    for i, t in enumerate(np.asarray(TIMES)):
        stays = np.exp(-3 * c * t)
        _within((counts[:, i, 0] == 3).astype(float), stays, max(stays * (1 - stays), 1e-12))


def test_a_path_depends_on_its_key_alone_and_a_capped_path_says_so():
    network = MassAction(reactants=[[0], [1]], products=[[1], [0]])
    keys = jax.random.split(jax.random.key(3), 64)
    rates = jnp.asarray([10.0, 1.0])
    many = gillespie(network, jnp.asarray([0]), rates, TIMES, keys)
    few = gillespie(network, jnp.asarray([0]), rates, TIMES, keys[5:13])
    assert np.array_equal(np.asarray(many.counts[5:13]), np.asarray(few.counts))
    capped = gillespie(network, jnp.asarray([0]), rates, TIMES, keys, max_events=5)
    assert np.all(capped.unfinished) and np.all(np.asarray(capped.events) == 5)
    assert np.all(np.asarray(capped.counts[:, -1, 0]) <= 5)


def test_malformed_networks_and_inputs_are_refused_in_one_line():
    with pytest.raises(ValueError, match="tables of one shape"):
        MassAction(reactants=[[1, 0]], products=[[1]])
    with pytest.raises(ValueError, match=">= 0"):
        MassAction(reactants=[[-1]], products=[[0]])
    with pytest.raises(ValueError, match="whole numbers"):
        MassAction(reactants=[[0.5]], products=[[0]])
    network = MassAction(reactants=[[0], [1]], products=[[1], [0]])
    keys = jax.random.split(jax.random.key(0), 4)
    with pytest.raises(ValueError, match="x0 holds 2 species, the network 1"):
        gillespie(network, jnp.asarray([0, 1]), jnp.asarray([1.0, 1.0]), TIMES, keys)


NAMES = st.sampled_from(["S", "I", "R", "A_2", "B", "dimer"])
SIDE = st.dictionaries(NAMES, st.integers(1, 3), max_size=3)


def _written(side: dict[str, int], draw_space) -> str:
    """A side as a user writes it: "0" for none, counts of 1 left out or not, any spaces."""
    if not side:
        return "0"
    terms = []
    for name, count in side.items():
        shown = "" if count == 1 and draw_space(st.booleans()) else f"{count}"
        gap = draw_space(st.sampled_from(["", " ", "  "])) if shown else ""
        terms.append(f"{shown}{gap}{name}")
    return draw_space(st.sampled_from([" + ", "+", "  +  "])).join(terms)


@hypothesis.given(st.lists(st.tuples(SIDE, SIDE), min_size=1, max_size=5), st.data())
@hypothesis.settings(max_examples=60, deadline=None)
def test_reactions_as_written_give_their_tables(reactions, data):
    species = ["S", "I", "R", "A_2", "B", "dimer"]
    text = [
        f"{_written(left, data.draw)} {data.draw(st.sampled_from(['->', ' -> ']))} "
        f"{_written(right, data.draw)}"
        for left, right in reactions
    ]
    network = parse_reactions(text, species=species)
    for r, (left, right) in enumerate(reactions):
        for s, name in enumerate(species):
            assert network.reactants[r, s] == left.get(name, 0), text[r]
            assert network.products[r, s] == right.get(name, 0), text[r]


@hypothesis.given(st.integers(0, 40), st.integers(1, 4), st.floats(0.01, 100.0))
@hypothesis.settings(max_examples=60, deadline=None)
def test_a_propensity_counts_the_distinct_sets_of_reactant_molecules(x, need, rate):
    network = MassAction(reactants=[[need]], products=[[0]])
    a = float(network.propensities(jnp.asarray([x]), jnp.asarray([rate]))[0])
    assert a == pytest.approx(rate * math.comb(x, need), rel=1e-12, abs=1e-300)


def test_malformed_reactions_are_refused_in_one_line_naming_them():
    for bad, said in (
        (["S + -> I"], "'' is not a species with an optional whole-number count"),
        (["S -> I -> R"], "expected one '->' between two sides"),
        (["0 S -> I"], "'0 S' counts no molecule"),
        (["S - I"], "expected one '->'"),
    ):
        with pytest.raises(ValueError, match=re.escape(said)):
            parse_reactions(bad)
    with pytest.raises(ValueError, match=r"reaction 'S -> I': unknown species I \(species: S\)"):
        parse_reactions(["S -> I"], species=["S"])
    sir = parse_reactions(["S + I -> 2 I", "I -> R"])
    assert sir.stoichiometry.tolist() == [[-1, 1, 0], [0, -1, 1]]


@hypothesis.given(
    st.integers(1, 6).flatmap(
        lambda species: st.tuples(
            st.lists(
                st.lists(st.integers(0, 3), min_size=species, max_size=species),
                min_size=1,
                max_size=8,
            ),
            st.lists(st.integers(0, 30), min_size=species, max_size=species),
        )
    )
)
@hypothesis.settings(max_examples=30, deadline=None)
def test_the_propensities_of_a_network_are_its_reactions_combinations(network_and_counts):
    reactants, x = network_and_counts
    network = MassAction(reactants=reactants, products=np.zeros_like(reactants))
    rates = np.linspace(0.5, 2.0, len(reactants))
    a = np.asarray(network.propensities(jnp.asarray(x), jnp.asarray(rates)))
    expected = [
        k * math.prod(math.comb(c, n) for c, n in zip(x, row, strict=True))
        for k, row in zip(rates, reactants, strict=True)
    ]
    np.testing.assert_allclose(a, expected, rtol=1e-12, atol=0)


def test_the_rate_equations_and_the_chemical_langevin_equation_of_a_birth_death_process():
    import diffrax

    network = MassAction(reactants=[[0], [1]], products=[[1], [0]])
    rates = jnp.asarray([10.0, 1.0])
    # dx/dt = k - gamma x from 0: x(t) = (k / gamma)(1 - exp(-gamma t)), the exact mean
    term = diffrax.ODETerm(lambda t, x, _: network.rates_of_change(x, rates))
    solution = diffrax.diffeqsolve(
        term,
        diffrax.Tsit5(),
        0.0,
        5.0,
        0.01,
        jnp.asarray([0.0]),
        saveat=diffrax.SaveAt(ts=TIMES),
        stepsize_controller=diffrax.PIDController(rtol=1e-10, atol=1e-10),
    )
    exact = 10.0 * (1.0 - np.exp(-np.asarray(TIMES)))
    np.testing.assert_allclose(solution.ys[:, 0], exact, rtol=1e-8, atol=1e-10)
    # its chemical Langevin equation, dx = (k - gamma x) dt + sqrt(k + gamma x) dW (one
    # noise per reaction), is exact in the first two moments of this linear network: at
    # its stationary state mean and variance k / gamma; Euler-Maruyama from x = 10
    dt, steps, paths = 0.01, 1000, 4000

    def path(key):
        def step(x, dw):
            return x + network.rates_of_change(x, rates) * dt + network.noise(x, rates) @ dw, None

        noise = jax.random.normal(key, (steps, 2)) * np.sqrt(dt)
        return jax.lax.scan(step, jnp.asarray([10.0]), noise)[0][0]

    end = np.asarray(jax.jit(jax.vmap(path))(jax.random.split(jax.random.key(4), paths)))
    _within(end, 10.0, 10.0)
    _within((end - end.mean()) ** 2, 10.0, 10.0 + 2 * 100.0, k=5.0)
