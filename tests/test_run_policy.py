"""`evictlab run-policy` on the embedded demo dataset: files, formats and retention (spec 2.10, 2.11)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from evictlab.cli import main

ROW_FIELDS = [
    "capacity",
    "case_id",
    "evicted",
    "kept_fact_ids",
    "policy",
    "question_type",
    "reserved_correction_slots",
    "scenario",
    "schema_version",
    "scores",
    "source",
    "support_all_retained",
    "support_fact_ids",
    "support_recall",
]
PUBLISHED_TOTALS = {  # (capacity, policy) -> support retained of 45, spec 2.10
    (5, "confidence"): 20,
    (5, "hybrid-v1"): 35,
    (7, "confidence"): 27,
    (7, "hybrid-v1"): 45,
    (9, "confidence"): 35,
    (9, "hybrid-v1"): 45,
}
SCENARIO_SPLITS = {  # (scenario, capacity, policy) -> retained, spec 2.10
    ("confirmation_help", 5, "confidence"): 0,
    ("access_help", 5, "confidence"): 0,
    ("confirmation_help", 7, "confidence"): 3,
    ("access_help", 7, "confidence"): 3,
    ("confirmation_help", 9, "confidence"): 6,
    ("access_help", 9, "confidence"): 6,
    ("confirmation_help", 5, "hybrid-v1"): 10,
    ("access_help", 5, "hybrid-v1"): 0,
    ("correction_reserve", 5, "confidence"): 0,
    ("correction_reserve", 7, "confidence"): 1,
    ("correction_reserve", 9, "confidence"): 3,
    ("correction_reserve", 5, "hybrid-v1"): 5,
}


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("run") / "policy"
    assert main(["run-policy", "--output-dir", str(out)]) == 0
    return out


def read_rows(run_dir):
    lines = (run_dir / "policy.raw.jsonl").read_text(encoding="utf-8").splitlines()
    return lines, [json.loads(line) for line in lines]


def test_rows_have_the_spec_fields_in_nesting_order(run_dir):
    lines, rows = read_rows(run_dir)
    assert len(rows) == 270
    for line, row in zip(lines, rows):
        assert list(row) == ROW_FIELDS  # sorted keys
        assert line == json.dumps(row, sort_keys=True, ensure_ascii=False)
        assert list(row["scores"]) == sorted(row["scores"])
    nesting = [(row["case_id"], row["capacity"], row["policy"]) for row in rows]
    cases = list(dict.fromkeys(case for case, _, _ in nesting))
    assert nesting == [(c, k, p) for c in cases for k in (5, 7, 9) for p in ("confidence", "hybrid-v1")]
    assert cases[-5:] == [
        "correction_peanut_allergy",
        "correction_language",
        "correction_timezone",
        "correction_review_resolution",
        "correction_shipping_address",
    ]
    synthetic = [row for row in rows if row["source"] == "synthetic"]
    assert {row["question_type"] for row in synthetic} == {"synthetic-correction"}
    assert {row["reserved_correction_slots"] for row in synthetic if row["policy"] == "hybrid-v1"} == {1}
    assert {row["reserved_correction_slots"] for row in rows if row not in synthetic} == {0}


def test_rows_are_internally_consistent(run_dir):
    _, rows = read_rows(run_dir)
    for row in rows:
        evicted = [item["fact_id"] for item in row["evicted"]]
        assert len(row["kept_fact_ids"]) == row["capacity"]
        assert sorted(row["kept_fact_ids"] + evicted) == sorted(row["scores"])
        assert row["support_all_retained"] == (row["support_fact_ids"][0] in row["kept_fact_ids"])
        assert row["support_recall"] == float(row["support_all_retained"])
        values = [row["scores"][item["fact_id"]]["value"] for item in row["evicted"]]
        assert values == sorted(values)  # evicted lowest rank first
        for item in row["evicted"]:
            assert set(item) == {"category", "components", "fact_id", "score"}
            assert item["components"] == row["scores"][item["fact_id"]]["components"]
        if row["policy"] == "confidence":
            assert all(set(s["components"]) == {"confidence"} for s in row["scores"].values())


def test_retention_matches_the_published_totals(run_dir):
    _, rows = read_rows(run_dir)
    for (capacity, policy), expected in PUBLISHED_TOTALS.items():
        kept = [r for r in rows if r["capacity"] == capacity and r["policy"] == policy and r["support_all_retained"]]
        assert len(kept) == expected, (capacity, policy)
    for (scenario, capacity, policy), expected in SCENARIO_SPLITS.items():
        kept = [
            r
            for r in rows
            if (r["scenario"], r["capacity"], r["policy"]) == (scenario, capacity, policy) and r["support_all_retained"]
        ]
        assert len(kept) == expected, (scenario, capacity, policy)


def test_summary_and_run_record(run_dir):
    text = (run_dir / "summary.json").read_text(encoding="utf-8")
    summary = json.loads(text)
    assert text == json.dumps(summary, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    assert summary["schema_version"] == 1
    assert summary["protocol_id"] == "deermem-hybrid-v1-pr4789-reproduction-v1"
    keys = [(g["source"], g["scenario"], g["capacity"], g["policy"]) for g in summary["groups"]]
    assert keys == sorted(keys) and len(keys) == 5 * 3 * 2
    group = next(g for g in summary["groups"] if keys[0] == (g["source"], g["scenario"], g["capacity"], g["policy"]))
    assert set(group) == {
        "source",
        "scenario",
        "capacity",
        "policy",
        "cases",
        "support_all_retained",
        "support_all_retained_rate",
        "mean_support_recall",
    }
    run = json.loads((run_dir / "run.json").read_text(encoding="utf-8"))
    assert run["schema_version"] == 1
    assert run["evaluation_time"] == "2026-08-13T00:00:00+00:00"
    assert run["created_at"].endswith("Z")
    assert run["policies"] == ["confidence", "hybrid-v1"] and run["capacities"] == [5, 7, 9]
    assert set(run["git"]) == {"head", "dirty"}
    assert set(run["dataset"]) == {"repository", "revision", "filename", "sha256"}
    assert set(run["artifacts"]) == {
        "config_sha256",
        "official_manifest_sha256",
        "synthetic_manifest_sha256",
        "answer_prompt_sha256",
    }
    assert run["preset"] == "pr4810-final"
    assert run["variant"] == {"evidence_header": "session", "fact_ids": "protocol", "memory_joiner": "blank-line"}


def test_refuses_to_write_into_a_folder_holding_any_run_file(tmp_path, capsys):
    (tmp_path / "summary.json").write_text("keep me")
    assert main(["run-policy", "--output-dir", str(tmp_path)]) != 0
    assert "refusing to overwrite" in capsys.readouterr().err
    assert (tmp_path / "summary.json").read_text() == "keep me"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["summary.json"]


@pytest.mark.parametrize("preset", ["pr4810-run1", "pr4810-run2"])
def test_every_preset_gives_the_same_totals(tmp_path, preset):
    assert main(["run-policy", "--output-dir", str(tmp_path), "--preset", preset]) == 0
    _, rows = read_rows(tmp_path)
    for (capacity, policy), expected in PUBLISHED_TOTALS.items():
        group = [r for r in rows if (r["capacity"], r["policy"]) == (capacity, policy)]
        assert sum(1 for r in group if r["support_all_retained"]) == expected
    assert json.loads((tmp_path / "run.json").read_text())["preset"] == preset


def test_cli_prints_retention_table_and_names_the_demo(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "evictlab", "run-policy", "--output-dir", str(tmp_path / "out")],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "using the embedded demo dataset" in result.stderr
    assert "27/45" in result.stdout and "45/45" in result.stdout and "confirmation_help" in result.stdout


def test_unknown_policy_and_bad_parameter_are_clear_errors(tmp_path, capsys):
    assert main(["run-policy", "--output-dir", str(tmp_path / "a"), "--policies", "confidence,nope"]) != 0
    assert "unknown policy 'nope'" in capsys.readouterr().err
    assert main(["run-policy", "--output-dir", str(tmp_path / "b"), "--param", "confidence_weight=0.64"]) != 0
    assert "weights must sum to 1.0" in capsys.readouterr().err
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


@pytest.mark.parametrize("capacity", ["0", "10", "12"])
def test_capacities_outside_the_pool_are_refused_naming_the_pool_size(tmp_path, capsys, capacity):
    assert main(["run-policy", "--output-dir", str(tmp_path / "out"), "--capacities", f"5,{capacity}"]) == 2
    error = capsys.readouterr().err.strip().splitlines()[-1]
    assert error == f"evictlab run-policy: error: capacity {capacity} is outside [1, 9] (pool size 10, 45 pools)"
    assert not (tmp_path / "out").exists()


def test_the_demo_file_passed_with_dataset_is_the_demo(tmp_path, capsys):
    """Identified by its SHA-256, a copy of the embedded demo needs no --allow-unpinned."""
    from evictlab.core.demo import DEMO_DATASET

    copy = tmp_path / "copy.json"
    copy.write_bytes(DEMO_DATASET.read_bytes())
    assert main(["run-policy", "--dataset", str(copy), "--output-dir", str(tmp_path / "out")]) == 0
    assert "using the embedded demo dataset" in capsys.readouterr().err
    record = json.loads((tmp_path / "out" / "run.json").read_text())
    assert record["dataset"]["repository"] == "evictlab/demo"


def test_the_files_hold_the_printed_table_for_every_registered_policy(tmp_path, capsys):
    """Issue 25: every printed cell is in retention.json, named by its tie-break, beside the
    input-order count that DeerFlow's summary.json and raw rows hold and the tie-neutral one."""
    from evictlab.policies import known_policies

    policies = list(known_policies())
    assert main(["run-policy", "--output-dir", str(tmp_path), "--policies", ",".join(policies)]) == 0
    lines = capsys.readouterr().out.splitlines()
    header, capacities = lines[0].split()[1:], lines[1].split()[1:]
    table = {
        line.split()[0]: line.split()[1:]
        for line in lines[3:]
        if line and not line.startswith(("decisions", "counted", "wrote"))
    }
    retention = json.loads((tmp_path / "retention.json").read_text())
    groups = {(g["scenario"], g["policy"], str(g["capacity"])): g for g in retention["groups"]}
    totals = {(g["policy"], str(g["capacity"])): g for g in retention["totals"]}
    assert len(header) == len(capacities) == 3 * len(policies) and set(header) == set(policies)

    def cell(group):
        value = group["retained"]
        return (f"{value:g}" if float(value).is_integer() else f"{value:.1f}") + f"/{group['cases']}"

    for row, cells in table.items():
        for policy, capacity, printed in zip(header, capacities, cells):
            group = totals[policy, capacity] if row == "total" else groups[row, policy, capacity]
            assert printed == cell(group), (row, policy, capacity)
    summary = {(g["source"], g["scenario"], g["capacity"], g["policy"]): g for g in
               json.loads((tmp_path / "summary.json").read_text())["groups"]}  # fmt: skip
    for group in retention["groups"]:
        key = (group["source"], group["scenario"], group["capacity"], group["policy"])
        assert group["support_all_retained"] == summary[key]["support_all_retained"], key
        assert group["tie_break"] == retention["tie_breaks"][group["policy"]]
        if group["tie_break"] == "input-order":
            assert group["retained"] == group["support_all_retained"]
        else:
            assert group["retained"] == pytest.approx(group["support_expected"])
    _, raw = read_rows(tmp_path)
    rows = [json.loads(line) for line in (tmp_path / "policy.decisions.jsonl").read_text().splitlines()]
    assert [(r["case_id"], r["capacity"], r["policy"]) for r in rows] == [
        (r["case_id"], r["capacity"], r["policy"]) for r in raw
    ]
    for row, line in zip(rows, raw):
        assert row["support_retained"] == line["support_all_retained"]
        assert row["tie_break"] in ("input-order", "expected")
        assert row["retention"] == (
            row["support_expected"] if row["tie_break"] == "expected" else float(row["support_retained"])
        )
    assert {r["tie_break"] for r in rows if r["policy"] in ("confidence", "hybrid-v1")} == {"input-order"}
    differ = [r for r in rows if r["support_retained"] != r["support_expected"]]
    assert differ  # ties the two numbers disagree on exist, and both are written


# The SHA-256 of DeerFlow's files as the scalar select() pass wrote them (main at 407e24b),
# before run-policy wrote them from its one decided table (#22 item 3): byte for byte the same.
PINNED_POLICIES = ("confidence,hybrid-v1,dory,fifo,generative-agents,generative-agents-code,keep-all,lfu-aging,lru,"
                   "memorybank,memorybank-seeded,memoryos-heat,oracle,random,lru+reserve(correction,0.1,10),"
                   "confidence+mmr(0.5),hybrid-v1+mmr(0.25)+reserve(correction)")  # fmt: skip
PINNED_FILES = [
    ([], "b1d8faf5e75fdaa5f7bb1df4cdbfc5ba6827f0afd3a4ec2c41e574c7992a7246",
     "48ed21e82604af889b2fea65b3ca1c13df5f17082094070029562d2002229538"),
    (["--policies", PINNED_POLICIES], "c1b0d023a4a2ab204bafe3c29f30fc82b4b63750d3cc73942a62fd58e2b3c388",
     "707c284936e0c7fbcc4de715795c03f41f9a91f2ac79d065ce279748767ea5b3"),
    (["--policies", "hybrid-v1,lfu-aging(half_life_days=7)", "--capacities", "1,4,9",
      "--param", "confidence_weight=0.55", "--param", "confirmation_weight=0.35"],
     "ac617caa31d5fe5f9091778f6ebdedfc0b5a3ac8e55cc4c76ed0543543b6c0e9",
     "08525111fe67028cbb0e9bad8d2d5bc85b48eaadbcefa787cffc5d0ed0d6d428"),
]  # fmt: skip


@pytest.mark.parametrize(("args", "raw", "summary"), PINNED_FILES)
def test_deerflow_files_are_byte_identical_to_the_scalar_pass(tmp_path, args, raw, summary):
    import hashlib

    assert main(["run-policy", "--output-dir", str(tmp_path), *args]) == 0
    files = ("policy.raw.jsonl", "summary.json")
    assert [hashlib.sha256((tmp_path / name).read_bytes()).hexdigest() for name in files] == [raw, summary]


def test_raw_rows_from_the_decided_table_equal_the_scalar_rows_for_every_policy():
    """Every registered policy (one added later too) and modified specs: decide_run's rows are the
    scalar selector's (evaluate), field for field."""
    from evictlab.analysis.evaluate import decide_run, evaluate
    from evictlab.core.pools import open_pools
    from evictlab.core.runspec import RunSpec
    from evictlab.policies import known_policies

    pool_set = open_pools(RunSpec())
    policies = (*known_policies(), "lru+reserve(correction,0.1,10)", "confidence+mmr(0.5)")
    params = pool_set.protocol.config.hybrid
    decisions, rows = decide_run(pool_set, policies, (3, 7), params)
    assert rows == evaluate(pool_set, policies, (3, 7), params)
    assert len(decisions) == len(rows)
