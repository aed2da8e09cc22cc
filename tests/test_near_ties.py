"""What a count of near ties counts, recomputed by a plain loop over the scalar selector.

A near tie is a decision whose support fact's margin to the cut line is non-zero but at most
1e-12 of the larger of the two scores. The margin compares the support with one fact: the
best-ranked evicted fact when the support is kept; when it is evicted, the lowest-ranked kept
fact it could displace (one holding no reserved slot, unless the support is a correction and
could take one itself). Near-equal scores anywhere else in the ranking do not count. The loop
here applies that definition to the scores of :func:`evictlab.policies.select` on the demo's 45
pools, over the weight simplex of notebook 03 (step 0.05, one map per capacity 5, 7 and 9), and
compares what every reader-facing count reports: the decisions table's ``support_near_tie``, the
sweep summary's ``near_ties`` (in memory and as written by ``evictlab sweep``),
:func:`~evictlab.selection.decisions.tie_counts`, and the numbers quoted in docs/using-policies.md.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest

from evictlab import cli
from evictlab.analysis.sweep import make_grid, run_sweep
from evictlab.analysis.sweep_output import SUMMARY_FILE
from evictlab.policies import PolicyParams, select
from evictlab.selection.decisions import tie_counts
from evictlab.workbench.loaders import load_pool_set, retention

CAPACITIES = (5, 7, 9)
STEP = 0.05  # notebook 03's lattice
HALF_LIVES = (90, 30)  # DeerMem's confirmation and access half-lives, as notebook 03 maps them
POLICY_GUIDE = Path(__file__).resolve().parents[1] / "docs" / "using-policies.md"


def loop_near_ties(pool_set, policy, settings, capacities):
    """{(setting, case_id, capacity): support kept} for every near tie, by the definition above."""
    now = pool_set.protocol.evaluation_time
    found = {}
    for s, params in enumerate(settings):
        for case in pool_set.cases:
            facts = list(case.facts)
            (support,) = [i for i, fact in enumerate(facts) if fact["id"] in case.support_fact_ids]
            for capacity in capacities:
                decision = select(
                    policy, facts, capacity, usage=case.usage, now=now, params=params,
                    support_fact_ids=case.support_fact_ids,
                )
                score = [decision.scores[fact["id"]].value for fact in facts]
                kept = set(decision.kept_positions)
                if support in kept:
                    across = [score[i] for i in range(len(facts)) if i not in kept]
                    reference = max(across, default=None)
                else:
                    corrections = [i for i in decision.ranking if facts[i]["category"] == "correction"]
                    reserved = set(corrections[: decision.reserved_correction_slots])
                    may_take_reserved = facts[support]["category"] == "correction" and policy == "hybrid-v1"
                    across = [score[i] for i in kept if may_take_reserved or i not in reserved]
                    reference = min(across, default=None)
                if reference is None:
                    continue
                margin = score[support] - reference
                if margin != 0 and abs(margin) <= 1e-12 * max(abs(score[support]), abs(reference)):
                    found[(s, case.case_id, capacity)] = support in kept
    return found


@pytest.fixture(scope="module")
def pool_set():
    return load_pool_set()


@pytest.fixture(scope="module")
def simplex(pool_set):
    grid = make_grid(
        weights_step=STEP, confirmation_half_lives=[HALF_LIVES[0]], access_half_lives=[HALF_LIVES[1]],
        capacities=list(CAPACITIES), policies=["hybrid-v1"],
    )
    result = run_sweep({"pr4810-final": pool_set}, grid, progress=False)
    return grid, result, loop_near_ties(pool_set, "hybrid-v1", grid.settings, CAPACITIES)


@pytest.mark.slow
def test_the_near_tie_flag_is_the_margin_of_the_support_to_the_cut_line_only(simplex):
    _, result, expected = simplex
    rows = result.rows
    flagged = rows[rows["support_near_tie"]]
    assert set(zip(flagged["setting"], flagged["case_id"].astype(str), flagged["capacity"])) == set(expected)
    assert dict(zip(zip(flagged["setting"], flagged["case_id"].astype(str), flagged["capacity"]),
                    flagged["support_retained"])) == expected


@pytest.mark.slow
def test_the_map_counts_per_capacity_and_summed_over_capacities(simplex, tmp_path):
    """7 on the capacity-7 map and 25 over the three maps were two readings of one flag:
    per capacity, and summed over capacities (a case counted once per capacity)."""
    grid, result, expected = simplex
    per_capacity = Counter(capacity for _, _, capacity in expected)
    kept = Counter(capacity for (_, _, capacity), retained in expected.items() if retained)
    settings = {c: len({s for s, _, capacity in expected if capacity == c}) for c in CAPACITIES}
    # The demo must tell the two readings apart, or this test could not fail on a mix-up.
    assert 0 < per_capacity[7] < sum(per_capacity.values())

    counts = tie_counts(result.rows).set_index("capacity")
    assert counts["decisions"].to_dict() == {c: len(grid.settings) * 45 for c in CAPACITIES}
    assert counts["near_ties"].to_dict() == {c: per_capacity[c] for c in CAPACITIES}
    assert counts["near_ties_kept"].to_dict() == {c: kept[c] for c in CAPACITIES}
    assert counts["near_tie_settings"].to_dict() == settings

    summary = result.summary.groupby("capacity")["near_ties"].sum()
    assert summary.to_dict() == {c: per_capacity[c] for c in CAPACITIES}
    folder = tmp_path / "sweep"
    assert cli.main([
        "sweep", "--no-progress", "--weights-step", str(STEP), "--confirmation-half-lives", str(HALF_LIVES[0]),
        "--access-half-lives", str(HALF_LIVES[1]), "--capacities", ",".join(map(str, CAPACITIES)),
        "--output-dir", str(folder),
    ]) == 0
    written = pd.read_parquet(folder / SUMMARY_FILE).groupby("capacity")["near_ties"].sum()
    assert written.to_dict() == {c: per_capacity[c] for c in CAPACITIES}

    # docs/using-policies.md quotes both numbers and says every such support was kept.
    words = " ".join(POLICY_GUIDE.read_text().split())
    quoted = re.search(r"has (\d+) at capacity 7 and (\d+) summed over capacities 5, 7 and 9", words)
    assert quoted is not None
    assert (int(quoted[1]), int(quoted[2])) == (per_capacity[7], sum(per_capacity.values()))
    assert sum(kept.values()) == sum(per_capacity.values())


def test_deermem_defaults_count_near_ties_as_the_loop_does(pool_set):
    """Notebook 02's count: both policies at DeerMem's default setting (none on the demo, which
    docs/using-policies.md states)."""
    frame = retention(pool_set, capacities=list(CAPACITIES))
    counts = tie_counts(frame)
    for policy in ("confidence", "hybrid-v1"):
        expected = Counter(c for _, _, c in loop_near_ties(pool_set, policy, [PolicyParams()], CAPACITIES))
        mine = counts[counts["policy"] == policy].set_index("capacity")["near_ties"].to_dict()
        assert mine == {c: expected[c] for c in CAPACITIES}
    assert counts["near_ties"].sum() == 0
    assert "DeerMem's default setting has none" in " ".join(POLICY_GUIDE.read_text().split())
