"""Intervals, power and multiplicity for small paired samples.

evictlab's suites are small (40 official cases, 5 synthetic guards, 45 pools), so a number
must come with an interval that means what it says:

* :func:`wilson_interval`: the Wilson score interval of one proportion (a retention cell, an
  accuracy), good coverage at small n and near 0 or 1;
* :func:`newcombe_paired_interval`: Newcombe's hybrid score interval for the difference of
  two paired proportions (his method 10, no continuity correction), built from the two
  Wilson intervals and the correlation of the pairs. Unlike a percentile bootstrap it does
  not collapse when every pair agrees, and its coverage stays close to nominal down to a few
  dozen pairs; below :data:`SMALL_SAMPLE` pairs no interval is reliable, and
  :func:`small_sample_warning` says so;
* :func:`mcnemar_power` and :func:`minimum_detectable_effect`: the exact power of the exact
  two-sided McNemar test, and the smallest accuracy difference it detects with a given power
  for n pairs (how large a difference a suite of this size can show at all);
* :func:`holm`: Holm's step-down adjustment of p-values, for any table comparing several
  policies, suites or settings at once.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

from .errors import ContractError

ALPHA = 0.05
#: Below this many pairs an interval on the paired difference is shown with a warning.
SMALL_SAMPLE = 30
POWER = 0.8


def _check_alpha(alpha: float) -> None:
    if not 0.0 < alpha < 1.0:
        raise ContractError(f"alpha must be in (0, 1), got {alpha!r}")


def wilson_interval(successes: float, cases: int, alpha: float = ALPHA) -> tuple[float, float]:
    """Wilson score interval of ``successes / cases``.

    ``successes`` may be an expected count (a sum of probabilities, e.g. retention under the
    ``expected`` tie-break); the interval is then that of a proportion with this point value.
    """
    if cases < 1 or not 0 <= successes <= cases:
        raise ContractError(
            f"a binomial interval needs 0 <= successes <= cases and cases >= 1, got {successes}/{cases}"
        )
    _check_alpha(alpha)
    z = NormalDist().inv_cdf(1 - alpha / 2)
    p = successes / cases
    denominator = 1 + z * z / cases
    centre = (p + z * z / (2 * cases)) / denominator
    half = z * math.sqrt(p * (1 - p) / cases + z * z / (4 * cases * cases)) / denominator
    # At 0 or all successes the bound is exactly 0 or 1; the subtraction would leave rounding dust.
    lower = 0.0 if successes == 0 else max(0.0, centre - half)
    upper = 1.0 if successes == cases else min(1.0, centre + half)
    return lower, upper


@dataclass(frozen=True)
class PairedInterval:
    """An interval for ``second - first`` over paired binary outcomes."""

    difference: float
    lower: float
    upper: float
    cases: int
    method: str = "Newcombe"

    @property
    def small_sample(self) -> bool:
        return self.cases < SMALL_SAMPLE


def newcombe_paired_interval(
    both: int, only_first: int, only_second: int, neither: int, alpha: float = ALPHA
) -> PairedInterval:
    """Newcombe's (1998) method-10 interval for ``p_second - p_first`` from a paired 2 x 2 table."""
    counts = (both, only_first, only_second, neither)
    if any(isinstance(v, bool) or not isinstance(v, int) or v < 0 for v in counts):
        raise ContractError(f"paired counts must be integers >= 0, got {counts}")
    n = sum(counts)
    if n == 0:
        raise ContractError("a paired interval needs at least one pair")
    # Newcombe's notation: theta = p1 - p2 with p1 the second policy's accuracy.
    a, b, c, d = both, only_second, only_first, neither
    p1, p2 = (a + b) / n, (a + c) / n
    l1, u1 = wilson_interval(a + b, n, alpha)
    l2, u2 = wilson_interval(a + c, n, alpha)
    margins = (a + b) * (c + d) * (a + c) * (b + d)
    phi = 0.0 if margins == 0 else (a * d - b * c) / math.sqrt(margins)
    theta = p1 - p2
    delta = math.sqrt(max(0.0, (p1 - l1) ** 2 - 2 * phi * (p1 - l1) * (u2 - p2) + (u2 - p2) ** 2))
    epsilon = math.sqrt(max(0.0, (u1 - p1) ** 2 - 2 * phi * (u1 - p1) * (p2 - l2) + (p2 - l2) ** 2))
    return PairedInterval(theta, max(-1.0, theta - delta), min(1.0, theta + epsilon), n)


def small_sample_warning(cases: int) -> str:
    """A one-line caution for an interval on ``cases`` pairs; empty from :data:`SMALL_SAMPLE` on."""
    if cases >= SMALL_SAMPLE:
        return ""
    return (
        f"only {cases} pairs (< {SMALL_SAMPLE}): no interval has reliable coverage here;"
        " read the counts and the exact McNemar p"
    )


# --- power of the exact McNemar test ----------------------------------------------------------


def _binomial_pmf(n: int, p: float) -> list[float]:
    if p <= 0.0:
        return [1.0] + [0.0] * n
    if p >= 1.0:
        return [0.0] * n + [1.0]
    return [math.comb(n, k) * p**k * (1 - p) ** (n - k) for k in range(n + 1)]


def _rejects(discordant: int, alpha: float) -> list[bool]:
    """For each split c of ``discordant`` pairs: does the exact two-sided McNemar test reject?"""
    if discordant == 0:
        return [False]
    total = 2**discordant
    tails, running = [], 0
    for k in range(discordant + 1):
        running += math.comb(discordant, k)
        tails.append(running)
    # p(c) = min(1, 2 * P(X <= min(c, m - c))) under Binomial(m, 1/2), as mcnemar_exact.
    return [min(1.0, 2 * tails[min(c, discordant - c)] / total) <= alpha for c in range(discordant + 1)]


def mcnemar_power(cases: int, only_first: float, only_second: float, alpha: float = ALPHA) -> float:
    """Exact power of the exact two-sided McNemar test at level ``alpha``.

    ``only_first`` / ``only_second`` are the probabilities that a pair is discordant in favour
    of the first / the second policy; the discordant count is binomial over ``cases`` pairs
    and, given it, the split is binomial.
    """
    if cases < 1:
        raise ContractError(f"power needs at least one pair, got {cases}")
    if only_first < 0 or only_second < 0 or only_first + only_second > 1 + 1e-12:
        raise ContractError(f"discordance probabilities must be >= 0 and sum to <= 1, got {only_first}, {only_second}")
    _check_alpha(alpha)
    discordance = min(1.0, only_first + only_second)
    if discordance == 0:
        return 0.0
    share = only_second / discordance
    power = 0.0
    for discordant, weight in enumerate(_binomial_pmf(cases, discordance)):
        if weight == 0.0:
            continue
        split = _binomial_pmf(discordant, share)
        power += weight * sum(w for w, reject in zip(split, _rejects(discordant, alpha)) if reject)
    return power


def minimum_detectable_effect(
    cases: int, discordance: float | None = None, *, power: float = POWER, alpha: float = ALPHA, step: float = 0.005
) -> float | None:
    """The smallest accuracy difference (to ``step``) that the exact McNemar test detects with ``power``.

    ``discordance`` is the assumed share of discordant pairs; ``None`` takes the most
    favourable case, every discordant pair in favour of the better policy (discordance equal
    to the difference). None when no difference up to the discordance (or 1) is detectable.
    """
    if not 0.0 < power < 1.0:
        raise ContractError(f"power must be in (0, 1), got {power!r}")
    if discordance is not None and not 0.0 < discordance <= 1.0:
        raise ContractError(f"discordance must be in (0, 1], got {discordance!r}")
    ceiling = 1.0 if discordance is None else discordance
    for index in range(1, round(ceiling / step) + 1):
        effect = min(ceiling, index * step)
        mixed = effect if discordance is None else discordance
        only_first = (mixed - effect) / 2
        if mcnemar_power(cases, only_first, only_first + effect, alpha) >= power:
            return round(effect, 10)
    return None


# --- multiplicity ------------------------------------------------------------------------------


def holm(p_values: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the input order (each capped at 1)."""
    values = [float(p) for p in p_values]
    for p in values:
        if not 0.0 <= p <= 1.0:
            raise ContractError(f"p-values must be in [0, 1], got {p!r}")
    order = sorted(range(len(values)), key=lambda index: values[index])
    adjusted = [0.0] * len(values)
    running = 0.0
    for rank, index in enumerate(order):
        running = max(running, min(1.0, (len(values) - rank) * values[index]))
        adjusted[index] = running
    return adjusted


__all__ = [
    "ALPHA",
    "POWER",
    "SMALL_SAMPLE",
    "PairedInterval",
    "holm",
    "mcnemar_power",
    "minimum_detectable_effect",
    "newcombe_paired_interval",
    "small_sample_warning",
    "wilson_interval",
]
