"""Diagnostics of MCMC draws [chain, draw]: rank-normalised split R-hat, bulk and tail
effective sample sizes (Vehtari et al. 2021), summaries and the warnings they call for."""

from __future__ import annotations

import numpy as np
from numpyro.diagnostics import effective_sample_size, gelman_rubin
from scipy import stats

QUANTILES = (0.05, 0.5, 0.95)


def _rank_normalise(draws: np.ndarray) -> np.ndarray:
    """Rank-normalised draws [chain, draw] (Vehtari et al. 2021, Bayesian Analysis 16(2))."""
    flat = draws.ravel()
    ranks = stats.rankdata(flat, method="average")
    z = stats.norm.ppf((ranks - 3.0 / 8.0) / (flat.size + 0.25))
    return z.reshape(draws.shape)


def ess_bulk(draws: np.ndarray) -> float:
    """Bulk effective sample size: the ESS of the rank-normalised split chains.

    NaN when it cannot be estimated: fewer than 4 draws per chain, draws that do not
    vary, or an estimate that is not a positive finite number (the autocorrelation
    estimate of a short run can make it negative: it is reported as NaN, never clamped
    to a made-up value)."""
    if draws.shape[1] < 4:
        return float("nan")
    with np.errstate(all="ignore"):
        ess = float(effective_sample_size(_rank_normalise(_split_chains(draws))))
    return ess if np.isfinite(ess) and ess > 0 else float("nan")


def _split_chains(draws: np.ndarray) -> np.ndarray:
    """Each chain's first and second half as two chains [2 chain, draw // 2]."""
    half = draws.shape[1] // 2
    return np.concatenate([draws[:, :half], draws[:, -half:]], axis=0)


def r_hat(draws: np.ndarray) -> float:
    """Rank-normalised split R-hat, the larger of its bulk and tail (folded) versions
    (Vehtari et al. 2021); NaN when it cannot be estimated (fewer than 4 draws per
    chain, draws that do not vary)."""
    if draws.shape[1] < 4:
        return float("nan")
    # (the chains split first, then ranked, as Vehtari et al. and ArviZ do: with an odd
    # number of draws the middle one takes no part)
    split = _split_chains(draws)
    with np.errstate(all="ignore"):
        bulk = gelman_rubin(_rank_normalise(split))
        folded = np.abs(split - np.median(split))
        tail = gelman_rubin(_rank_normalise(folded))
    value = float(max(bulk, tail))
    return value if np.isfinite(value) else float("nan")


def ess_tail(draws: np.ndarray) -> float:
    """Tail effective sample size: the smaller ESS of the indicators of the draws below
    their 5% and above their 95% quantile, over split chains (Vehtari et al. 2021); NaN
    when it cannot be estimated (see `ess_bulk`)."""
    if draws.shape[1] < 4:
        return float("nan")
    split = _split_chains(draws)
    low, high = np.quantile(split, [0.05, 0.95])
    out = []
    for indicator in (split <= low, split >= high):
        with np.errstate(all="ignore"):
            out.append(float(effective_sample_size(indicator.astype(float))))
    ess = min(out)
    return ess if np.isfinite(ess) and ess > 0 else float("nan")


def _listed(items: list[str], most: int = 4) -> str:
    more = f" and {len(items) - most} more" if len(items) > most else ""
    return ", ".join(items[:most]) + more


def sampling_warnings(
    posterior: dict[str, np.ndarray], diverging: np.ndarray, summary: dict[str, dict[str, float]]
) -> list[str]:
    """Lines that tell when the draws cannot be trusted, each with what to try: an r_hat
    above 1.01, a bulk or tail ESS below 100 per chain (the thresholds of Vehtari et al.
    2021, Bayesian Analysis 16(2)), any divergent transition. Empty when all is well.

    Arguments:
        posterior: quantity -> draws [chain, draw, ...]; the first one's leading axis
            gives the number of chains.
        diverging: whether each transition diverged [chain, draw].
        summary: quantity -> statistics with at least `r_hat` and `ess_bulk` (as
            `summarise` gives them); the tail ESS is computed from `posterior`.

    Returns:
        A list of at most three warning lines (mixing, effective sample size,
        divergences), each starting "warning: ".
    """
    chains = next(iter(posterior.values())).shape[0] if posterior else 1
    out = []
    mixing = [f"{n} {s['r_hat']:.3f}" for n, s in summary.items() if not s["r_hat"] <= 1.01]
    if mixing:
        out.append(
            f"warning: r_hat above 1.01 (or not estimable) for {_listed(mixing)}: the chains have "
            "not mixed; "
            "run a longer warmup and more samples (--warmup, --samples), or reparametrise (priors "
            "on the scale the data inform, e.g. log)"
        )
    need = 100 * chains
    thin = []
    for n, s in summary.items():
        tail = ess_tail(np.asarray(posterior[n], dtype=float)) if n in posterior else float("nan")
        if not (s["ess_bulk"] >= need and tail >= need):
            thin.append(f"{n} {s['ess_bulk']:.0f}/{tail:.0f}")
    if thin:
        out.append(
            f"warning: bulk/tail ESS below 100 per chain ({need} for {chains} "
            f"chain{'s' if chains > 1 else ''}) for {_listed(thin)}: "
            "means and 5%/95% quantiles are unreliable; run more samples (--samples) and warmup "
            "(--warmup), or reparametrise"
        )
    count = int(np.sum(diverging))
    if count:
        out.append(
            f"warning: {count} divergent transition{'s' if count > 1 else ''} "
            f"({100 * count / max(np.size(diverging), 1):.2g}% of draws): "
            "the sampler missed part of the posterior; raise [infer] target_accept (e.g. 0.95, "
            "--set infer.target_accept=0.95) or reparametrise"
        )
    return out


def summarise(posterior: dict[str, np.ndarray]) -> dict[str, dict[str, float]]:
    """mean, sd, 5%, 50%, 95%, ess_bulk and r_hat of each scalar quantity [chain, draw].
    A statistic that cannot be estimated from the draws (sd of one draw; ess_bulk and
    r_hat of a short run, see `ess_bulk`) is NaN; ess_bulk is never negative."""
    out = {}
    for name, draws in posterior.items():
        draws = np.asarray(draws, dtype=float)
        q = np.quantile(draws, QUANTILES)
        out[name] = {
            "mean": float(draws.mean()),
            "sd": float(draws.std(ddof=1)) if draws.size > 1 else float("nan"),
            "5%": float(q[0]),
            "50%": float(q[1]),
            "95%": float(q[2]),
            "ess_bulk": ess_bulk(draws),
            "r_hat": r_hat(draws),
        }
    return out
