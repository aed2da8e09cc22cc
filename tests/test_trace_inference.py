"""Findings over seeds: paired differences, intervals inside the data's range, sign counts,
and sentences that agree in sign with the table they cite."""

from __future__ import annotations

import re

import numpy as np
import pandas as pd
import pytest

from evictlab.analysis.traces.generate import WorkloadParams, generate
from evictlab.analysis.traces.inference import (
    BEST_OTHER,
    FINDING_CAPACITY,
    best_baseline,
    bootstrap_interval,
    direction,
    finding_sentences,
    paired_table,
)
from evictlab.analysis.traces.metrics import curve_rows, curve_summary


def made_rows(differences: dict[str, list[float]], capacity: int = FINDING_CAPACITY) -> pd.DataFrame:
    """Curve rows where hybrid-v1 minus confidence is ``differences[metric]`` seed by seed."""
    rows = []
    for seed in range(len(next(iter(differences.values())))):
        for policy, sign in (("hybrid-v1", 1), ("confidence", 0), ("lru", -1)):
            row = {"trace": f"seed-{seed}", "policy": policy, "role": "policy", "capacity": capacity}
            for metric, values in differences.items():
                row[metric] = 0.5 + sign * values[seed] if sign >= 0 else 0.2
            rows.append(row)
    return pd.DataFrame(rows)


def test_paired_counts_and_interval():
    rows = made_rows({"answerable_rate": [0.1, 0.2, -0.05, 0.0, 0.1], "correction_survival": [0.0] * 5,
                      "stale_kept_rate": [-0.1] * 5})
    table = paired_table(rows).set_index(["metric", "comparison"])
    answerable = table.loc[("answerable_rate", "hybrid-v1 - confidence")]
    assert (answerable["higher"], answerable["lower"], answerable["tied"], answerable["seeds"]) == (3, 1, 1, 5)
    assert answerable["mean"] == pytest.approx(0.07)
    assert -0.05 <= answerable["low"] <= answerable["mean"] <= answerable["high"] <= 0.2
    assert table.loc[("answerable_rate", "hybrid-v1 - best other policy"), "second"] == "lru"
    assert table.loc[("correction_survival", "hybrid-v1 - confidence"), "tied"] == 5


def test_the_best_baseline_is_chosen_per_capacity_or_over_every_capacity_and_the_paired_table_uses_it():
    """lru is best at capacity 10 and over both capacities, fifo at 100: the paired table's best other
    policy is the per-capacity choice; curve summaries choose as their rows do; a tie goes to the first."""
    rates = {("lru", 10): 0.9, ("lru", 100): 0.6, ("fifo", 10): 0.0, ("fifo", 100): 0.7}
    rows = pd.DataFrame([
        {"trace": f"seed-{seed}", "policy": policy, "role": "policy", "capacity": capacity,
         "answerable_rate": rates.get((policy, capacity), 0.95) + 0.01 * seed, "correction_survival": 0.5,
         "stale_kept_rate": 0.1}
        for seed in range(3) for capacity in (10, 100) for policy in ("hybrid-v1", "confidence", "lru", "fifo")])
    assert (best_baseline(rows, 10), best_baseline(rows, 100), best_baseline(rows)) == ("lru", "fifo", "lru")
    summary = curve_summary(rows, ["answerable_rate"])
    assert [best_baseline(summary, capacity) for capacity in (10, 100, None)] == ["lru", "fifo", "lru"]
    paired = paired_table(rows)
    best = paired[paired["comparison"] == f"hybrid-v1 - {BEST_OTHER}"].set_index("capacity")["second"]
    assert best.groupby(level=0).unique().map(list).to_dict() == {10: ["lru"], 100: ["fifo"]}
    tied = rows.assign(answerable_rate=0.5)
    assert best_baseline(tied) == "lru" and best_baseline(tied[tied["policy"] != "lru"]) == "fifo"
    assert best_baseline(rows[rows["policy"].isin(["hybrid-v1", "confidence"])]) is None


def test_bootstrap_stays_inside_the_values_and_is_seeded():
    values = np.array([0.0, 0.0, 1.0, 1.0, 1.0])
    low, high = bootstrap_interval(values)
    assert 0.0 <= low <= high <= 1.0
    assert bootstrap_interval(values) == (low, high)
    assert all(np.isnan(bootstrap_interval(np.array([0.3]))))


def cited(sentence: str) -> list[tuple[str, str, str]]:
    """(metric, direction, policy) for each clause "METRIC: hybrid-v1 is higher|lower than ..."."""
    return re.findall(r"([a-z][a-z ]*): hybrid-v1 is (higher|lower|level)(?: than| with) ([^ ]+)", sentence)


@pytest.mark.parametrize("sign", [1, -1])
def test_sentences_agree_in_sign_with_the_table(sign):
    rows = made_rows({"answerable_rate": [sign * 0.05] * 19 + [0.0], "correction_survival": [sign * -0.2] * 20,
                      "stale_kept_rate": [0.0001] * 20})
    table = paired_table(rows)
    headline, detail = finding_sentences(table)
    assert "over 20 seeds" in headline and "capacity 100" in headline
    found = cited(headline)
    assert [metric for metric, _, _ in found] == ["answerable rate", "correction survival", "stale kept rate"]
    means = table[table["comparison"] == "hybrid-v1 - confidence"].set_index("metric")["mean"]
    for metric, said, _ in found:
        assert said == direction(means[metric.replace(" ", "_")])
    assert found[2][1] == "level"
    assert "fewer than 20" not in detail and "chosen on the data" in detail
    # Each clause says which way is better, so "higher" never reads as good for a stale-kept rate.
    better = re.findall(r"([a-z][a-z ]*): hybrid-v1 is [^(]*\((higher|lower) is better;", headline)
    assert better == [("answerable rate", "higher"), ("correction survival", "higher"), ("stale kept rate", "lower")]


def test_the_sentences_of_a_real_replay_agree_with_its_table_read_back_from_csv(tmp_path):
    params = WorkloadParams(horizon_days=30)
    traces = [(f"seed-{seed}", lambda seed=seed: [generate(params, seed)]) for seed in range(3)]
    rows = curve_rows(traces, ["confidence", "hybrid-v1", "lru"], [10, FINDING_CAPACITY])
    paired_table(rows).to_csv(tmp_path / "paired.csv", index=False)
    table = pd.read_csv(tmp_path / "paired.csv")
    headline, detail = finding_sentences(table)
    at = table[(table["capacity"] == FINDING_CAPACITY) & (table["comparison"] == "hybrid-v1 - confidence")]
    for metric, said, _ in cited(headline):
        assert said == direction(at.set_index("metric").loc[metric.replace(" ", "_"), "mean"])
    assert detail.startswith("Only 3 seeds: fewer than 20")
