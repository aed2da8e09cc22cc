"""Robustness curves (evictlab.analysis.robustness): seeded perturbations of the demo pools, decided on
the engine and checked against the scalar selector."""

from __future__ import annotations

import copy

import pytest

from evictlab.analysis.robustness import COLUMNS, PERTURBATIONS, perturb_cases, robustness_curves
from evictlab.errors import ContractError
from evictlab.policies import select
from evictlab.policies.signals import parse_timestamp
from evictlab.workbench import loaders, plots


@pytest.fixture(scope="module")
def pool_set():
    return loaders.load_pool_set()


def test_perturbations_are_seeded_pure_and_do_what_they_say(pool_set):
    cases = pool_set.cases[:6]
    now = pool_set.protocol.evaluation_time
    before = copy.deepcopy([(case.facts, case.usage) for case in cases])
    for name in PERTURBATIONS:
        first = perturb_cases(cases, name, PERTURBATIONS[name].levels[-1], [0, 1], now)
        assert first == perturb_cases(cases, name, PERTURBATIONS[name].levels[-1], [0, 1], now)
        assert [case.case_id for case in first[:2]] == [f"{cases[0].case_id}#0", f"{cases[1].case_id}#0"]
        assert [(c.facts, c.usage) for c in first[:6]] != [(c.facts, c.usage) for c in first[6:]]  # seeds differ
        unchanged = perturb_cases(cases, name, 0.0, [3], now)
        assert [c.facts for c in unchanged] == [list(case.facts) for case in cases]
    assert before == [(case.facts, case.usage) for case in cases]  # the input is never mutated
    noisy = perturb_cases(cases, "confidence_noise", 0.1, range(5), now)
    values = [fact["confidence"] for case in noisy for fact in case.facts]
    assert all(0.0 <= value <= 1.0 for value in values) and len(set(values)) > len(values) // 2
    confirmed = perturb_cases(cases, "false_confirmations", 1.0, [0], now)
    for case in confirmed:
        for fact in case.facts:
            age = (now - parse_timestamp(fact["lastConfirmedAt"])).total_seconds() / 86400
            assert 0 <= age <= 30 or fact.get("confirmationCount", 0) > 1
    inflated = perturb_cases(cases, "heat_inflation", 1.0, [0], now)
    assert all(entry["accessHeat"] >= 8 for case in inflated for entry in case.usage.values())
    assert all(len(case.usage) == len(case.facts) for case in inflated)
    missing = perturb_cases(cases, "missing_metadata", 1.0, [0], now)
    assert all("confidence" not in fact and "lastConfirmedAt" not in fact for case in missing for fact in case.facts)
    assert all(not case.usage for case in missing)
    with pytest.raises(ContractError, match="unknown perturbation"):
        perturb_cases(cases, "gremlins", 0.1, [0], now)


def test_engine_decisions_on_perturbed_pools_match_the_scalar_selector(pool_set):
    from evictlab.selection.engine import PreparedCases

    now = pool_set.protocol.evaluation_time
    params = pool_set.protocol.config.hybrid
    for name in PERTURBATIONS:
        copies = perturb_cases(pool_set.cases[::9], name, PERTURBATIONS[name].levels[2], range(3), now)
        result = PreparedCases(copies, now).select("hybrid-v1", [params], (5, 7), details=True)
        for c, case in enumerate(copies):
            for k, capacity in enumerate((5, 7)):
                scalar = select("hybrid-v1", case.facts, capacity, usage=case.usage, now=now, params=params)
                assert result.kept_fact_ids(0, c, k) == tuple(scalar.kept_ids), (name, case.case_id, capacity)


def test_curves_on_the_demo(pool_set):
    curves = robustness_curves(pool_set, ["confidence_noise", "missing_metadata"],
                               levels={"confidence_noise": [0.0, 0.05], "missing_metadata": [0.2]}, seeds=4)
    assert list(curves.columns) == list(COLUMNS)
    assert len(curves) == (2 + 1) * 2 * 3
    clean = curves[curves["level"] == 0.0]
    assert (clean["mean_retained"] == clean["baseline_retained"]).all() and (clean["churn"] == 0).all()
    hybrid = clean.set_index(["policy", "capacity"])["baseline_retained"]
    assert hybrid["hybrid-v1", 7] == 45 and hybrid["confidence", 7] == 27
    noisy = curves[(curves["level"] == 0.05)]
    assert (noisy["churn"] > 0).all() and (noisy["lower"] <= noisy["mean_retained"]).all()
    assert (noisy["mean_retained"] <= noisy["upper"]).all()
    figure = plots.robustness_curves(curves, 7, source="demo")
    assert "Robustness at capacity 7" in plots.figure_title(figure)
    with pytest.raises(ContractError, match="rank keys"):
        robustness_curves(pool_set, ["confidence_noise"], policies=["confidence+mmr(0.5)"], seeds=1)
