"""Intervals, power and multiplicity (evictlab.intervals): exact coverage by enumeration, power
against a direct sum over every outcome, and Holm against its definition."""

from __future__ import annotations

import itertools
import math

import pytest

from evictlab.analysis.qa.stats import mcnemar_exact
from evictlab.errors import ContractError
from evictlab.intervals import (
    SMALL_SAMPLE,
    holm,
    mcnemar_power,
    minimum_detectable_effect,
    newcombe_paired_interval,
    small_sample_warning,
    wilson_interval,
)


def multinomial(counts, probabilities):
    n = sum(counts)
    coefficient = math.factorial(n)
    for k in counts:
        coefficient //= math.factorial(k)
    return coefficient * math.prod(p**k for p, k in zip(probabilities, counts))


def tables(n):
    for a, b, c in itertools.product(range(n + 1), repeat=3):
        if a + b + c <= n:
            yield a, b, c, n - a - b - c


@pytest.mark.parametrize("cell_probabilities", [(0.5, 0.05, 0.2, 0.25), (0.3, 0.1, 0.1, 0.5)])
def test_newcombe_covers_the_true_difference_near_nominal_at_30_pairs(cell_probabilities):
    # Exact coverage: the probability of every possible 2 x 2 table, summed where the
    # interval contains the true difference second - first = p(only second) - p(only first).
    truth = cell_probabilities[2] - cell_probabilities[1]
    coverage = sum(
        multinomial(table, cell_probabilities)
        for table in tables(30)
        if (interval := newcombe_paired_interval(*table)).lower <= truth <= interval.upper
    )
    assert 0.92 <= coverage <= 0.99


def test_newcombe_on_a_worked_table_and_its_edges():
    interval = newcombe_paired_interval(12, 2, 9, 21)  # Newcombe's (1998) first example, sides swapped
    assert interval.difference == pytest.approx(7 / 44)
    assert interval.lower == pytest.approx(0.0182, abs=5e-4) and interval.upper == pytest.approx(0.2892, abs=5e-4)
    agree = newcombe_paired_interval(5, 0, 0, 0)
    assert agree.difference == 0 and agree.lower < 0 < agree.upper  # a bootstrap would give [0, 0]
    assert agree.small_sample and small_sample_warning(5).startswith("only 5 pairs")
    assert small_sample_warning(SMALL_SAMPLE) == ""
    with pytest.raises(ContractError, match="at least one pair"):
        newcombe_paired_interval(0, 0, 0, 0)


def test_wilson_accepts_expected_counts_and_checks_bounds():
    low, high = wilson_interval(22.5, 45)
    assert low < 0.5 < high and wilson_interval(45, 45)[1] == 1.0 and wilson_interval(0, 45)[0] == 0.0
    with pytest.raises(ContractError, match="46/45"):
        wilson_interval(46, 45)


@pytest.mark.parametrize("cases, only_first, only_second", [(12, 0.1, 0.3), (9, 0.0, 0.4), (15, 0.2, 0.2)])
def test_mcnemar_power_is_the_probability_of_rejecting_over_every_outcome(cases, only_first, only_second):
    probabilities = (only_first, only_second, 1 - only_first - only_second)
    direct = sum(
        multinomial((b, c, cases - b - c), probabilities)
        for b in range(cases + 1)
        for c in range(cases + 1 - b)
        if mcnemar_exact(b, c) <= 0.05
    )
    assert mcnemar_power(cases, only_first, only_second) == pytest.approx(direct, abs=1e-12)


def test_minimum_detectable_effect_of_the_suite_sizes():
    assert minimum_detectable_effect(5) is None  # 5 pairs never reach p <= 0.05 (2 / 32 > 0.05)
    best, typical = minimum_detectable_effect(40), minimum_detectable_effect(40, 0.3)
    assert 0.18 <= best < typical <= 0.28
    assert mcnemar_power(40, 0.0, best) >= 0.8 > mcnemar_power(40, 0.0, best - 0.005)
    assert minimum_detectable_effect(45) < best  # more pairs, smaller effects


def test_holm_adjustment():
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.5, 0.001]) == pytest.approx([0.5, 0.002])
    assert holm([]) == []
    with pytest.raises(ContractError, match="p-values"):
        holm([1.5])


def test_qa_power_command_prints_the_suite_sizes(capsys):
    from evictlab import cli

    assert cli.main(["qa", "power"]) == 0
    printed = capsys.readouterr().out
    assert "official (n = 40)   0.195  0.245  0.320" in printed
    assert "synthetic (n = 5)    none   none   none" in printed
    assert cli.main(["qa", "power", "--cases", "100", "--discordance", "minimal,0.2"]) == 0
    assert "n = 100" in capsys.readouterr().out
    assert cli.main(["qa", "power", "--cases", "0"]) != 0
    assert "every suite size must be >= 1" in capsys.readouterr().err
