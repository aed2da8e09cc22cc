"""What-if on an imported store: run-policy, explain, gate and trace replay read it as they read pools."""

from __future__ import annotations

import json

import pytest
from store_fixtures import replayed_store

from evictlab.cli import main
from evictlab.core.pools import open_pools
from evictlab.core.runspec import RunSpec
from evictlab.core.stores.imported import load_import
from evictlab.policies import PolicyParams, select

CASE = "demo-user/__default__"


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    root = tmp_path_factory.mktemp("whatif")
    replayed_store(root / "store", "confidence", shadow=True, seed=2, updates=40, max_facts=30)
    assert main(["import", "deermem", str(root / "store"), "--output-dir", str(root / "imported")]) == 0
    return root / "imported"


def test_the_pools_of_a_store_are_its_buckets_at_its_clock(imported):
    pools = open_pools(RunSpec().on_dataset(imported))
    store = load_import(imported)
    (case,) = pools.cases
    assert case.case_id == CASE and list(case.facts) == store.buckets[0].facts and case.support_fact_ids == ()
    assert pools.protocol.evaluation_time == store.clock
    spec = RunSpec.from_preset(evaluation_time="2027-01-01T00:00:00Z").on_dataset(imported)
    assert open_pools(spec).protocol.evaluation_time.year == 2027  # a spec's own clock wins


def test_run_policy_keeps_what_each_policy_would_have_kept(imported, tmp_path, capsys):
    out = tmp_path / "run"
    argv = ["run-policy", "--dataset", str(imported), "--policies", "hybrid-v1,lru,confidence",
            "--capacities", "20,80", "--output-dir", str(out)]  # fmt: skip
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert f"{CASE} at 20, lru: kept 20 of 30" in printed and f"{CASE} at 80, hybrid-v1: kept 30 of 30" in printed
    store = load_import(imported)
    (bucket,) = store.buckets
    rows = [json.loads(line) for line in (out / "policy.raw.jsonl").read_text().splitlines()]
    for row in rows:
        decision = select(row["policy"], bucket.facts, row["capacity"], usage=bucket.usage, now=store.clock)
        assert row["kept_fact_ids"] == decision.kept_ids and row["support_recall"] is None
    assert json.loads((out / "summary.json").read_text())["groups"][0]["mean_support_recall"] is None
    assert main(["view", str(out), "--output", str(tmp_path / "page.html")]) == 0
    assert main(["run-policy", "--dataset", str(imported), "--output-dir", str(tmp_path / "none")]) == 2
    assert "needs --capacities" in capsys.readouterr().err


def test_my_weights_gated_on_my_store(imported, tmp_path, capsys):
    base, mine, again = tmp_path / "base", tmp_path / "mine", tmp_path / "again"
    common = ["--dataset", str(imported), "--policies", "hybrid-v1", "--capacities", "12,20"]
    assert main(["run-policy", *common, "--output-dir", str(base)]) == 0
    assert main(["run-policy", *common, "--output-dir", str(again)]) == 0
    assert main(["run-policy", *common, "--param", "confidence_weight=0.3", "--param", "confirmation_weight=0.3",
                 "--param", "access_weight=0.4", "--output-dir", str(mine)]) == 0  # fmt: skip
    capsys.readouterr()
    assert main(["gate", "--baseline", str(base), "--candidate", str(again)]) == 0
    assert main(["gate", "--baseline", str(base), "--candidate", str(mine)]) == 1
    assert f"flipped: hybrid-v1|12|{CASE}" in capsys.readouterr().out


def test_explain_says_why_a_fact_of_the_store_went(imported, capsys):
    argv = ["explain", "--dataset", str(imported), "--case", CASE, "--policy", "hybrid-v1", "--capacity", "20"]
    assert main(argv) == 0
    text = capsys.readouterr().out
    assert text.startswith(f"bucket {CASE} of an imported store") and "why evicted:" in text
    assert main([*argv, "--format", "json"]) == 0
    document = json.loads(capsys.readouterr().out)
    (bucket,) = load_import(imported).buckets
    decision = select("hybrid-v1", bucket.facts, 20, usage=bucket.usage, now=load_import(imported).clock,
                      params=PolicyParams())  # fmt: skip
    assert {fact["fact_id"] for fact in document["facts"] if fact["status"] != "evicted"} == set(decision.kept_ids)


def test_trace_replay_reads_the_store_traces(imported, tmp_path):
    out = tmp_path / "curves"
    assert main(["trace", "replay", "--trace", str(imported), "--policies", "hybrid-v1,lru", "--capacities", "10,20",
                 "--output-dir", str(out)]) == 0  # fmt: skip
    record = json.loads((out / "trace-replay.run.json").read_text())
    assert record["parameters"]["traces"] == [str(imported / "traces" / "demo-user" / "__default__.jsonl")]
