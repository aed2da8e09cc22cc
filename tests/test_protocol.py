"""Strict loading of the protocol files (spec 2.1, 2.2, 2.4, 7) and the variant presets."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import yaml

from evictlab.core.demo import DEMO_MANIFEST
from evictlab.core.protocol import (
    DEFAULT_CONFIG,
    DEFAULT_OFFICIAL_MANIFEST,
    DEFAULT_SYNTHETIC_MANIFEST,
    PRESETS,
    PROTOCOL_DIR,
    Variant,
    load_protocol,
    resolve_variant,
    sha256_file,
)
from evictlab.errors import ContractError


@pytest.fixture()
def protocol_copy(tmp_path: Path) -> Path:
    """A copy of data/protocol in DeerFlow's layout (configs/, manifests/, prompts/)."""
    target = tmp_path / "protocol"
    shutil.copytree(PROTOCOL_DIR, target)
    return target


def edit_config(root: Path, change) -> Path:
    path = root / "configs" / DEFAULT_CONFIG.name
    data = yaml.safe_load(path.read_text())
    change(data)
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def test_own_protocol_loads_with_its_values():
    protocol = load_protocol()
    config = protocol.config
    assert config.protocol_id == "deermem-hybrid-v1-pr4789-reproduction-v1"
    assert config.evaluation_time.isoformat() == "2026-08-13T00:00:00+00:00"
    assert config.pool.capacities == (5, 7, 9) and config.pool.qa_capacity == 7
    assert config.hybrid.weights == (0.65, 0.25, 0.10)
    assert config.qa.temperature == 0.0 and isinstance(config.qa.temperature, float)
    assert config.statistics.bootstrap_seed == 4789
    assert len(protocol.official.case_ids) == 40
    assert [case.loss_rank for case in protocol.synthetic.cases] == [6, 8, 8, 10, 10]
    assert all(case.answer == "NO" for case in protocol.synthetic.cases)
    assert all(case.support_fact.startswith("USER CORRECTION:") for case in protocol.synthetic.cases)
    assert protocol.hashes["config"] == sha256_file(DEFAULT_CONFIG)
    assert set(protocol.artifact_hashes()) == {
        "config_sha256", "official_manifest_sha256", "synthetic_manifest_sha256", "answer_prompt_sha256",
    }


def test_answer_prompt_structure_matches_the_published_layout():
    text = (PROTOCOL_DIR / "prompts" / "answer-v1.txt").read_bytes()
    lines = text.decode("ascii").split("\n")
    assert text.endswith(b"\n") and b"\r" not in text
    assert lines[:1] == ["SYSTEM:"] and lines[2:5] == ["", "USER:", "{{CURRENT_DATE_SECTION}}STORED MEMORY:"]
    assert lines[5:8] == ["{{STORED_MEMORY}}", "", "QUESTION: {{QUESTION}}"]
    assert "INSUFFICIENT" in lines[1] and "YES" in lines[1] and "NO" in lines[1]


def test_prompt_resolves_relative_to_the_parent_of_the_config_folder(protocol_copy):
    config = protocol_copy / "configs" / DEFAULT_CONFIG.name
    protocol = load_protocol(config=config)
    assert protocol.files.answer_prompt == protocol_copy / "prompts" / "answer-v1.txt"
    (protocol_copy / "prompts" / "answer-v1.txt").rename(protocol_copy / "elsewhere.txt")
    with pytest.raises(ContractError, match="cannot read"):
        load_protocol(config=config)
    moved = load_protocol(config=config, answer_prompt=protocol_copy / "elsewhere.txt")
    assert moved.hashes["answer_prompt"] == protocol.hashes["answer_prompt"]


@pytest.mark.parametrize(
    "change, message",
    [
        (lambda d: d.update(extra=1), "<root>: unknown key"),
        (lambda d: d["pool"].update(capacites=[5]), "pool: unknown key"),
        (lambda d: d["pool"].update(capacities=[5, 10]), r"pool.capacities: values must be in \[1, 9\]"),
        (lambda d: d["pool"].update(capacities=[0, 7]), "pool.capacities"),
        (lambda d: d["pool"].update(qa_capacity=8), "pool.qa_capacity"),
        (lambda d: d["pool"].update(size="10"), "pool.size: must be an integer"),
        (lambda d: d["pool"].update(distractors=8), "pool.distractors: must equal size - 1"),
        (lambda d: d["pool"].update(fact_order="draw"), "pool.fact_order"),
        (lambda d: d["policies"]["hybrid_v1"]["weights"].update(access=0.09), "weights: must sum to 1.0"),
        (lambda d: d["policies"]["hybrid_v1"]["weights"].update(access=True),
         "weights.access: must be a finite number"),
        (lambda d: d["policies"]["hybrid_v1"].update(access_half_life_days=0), "access_half_life_days"),
        (lambda d: d.update(required_policy_version="hybrid-v2"), "required_policy_version"),
        (lambda d: d.update(evaluation_time="2026-08-13T00:00:00"), "timezone-aware"),
        (lambda d: d["dataset"].update(sha256="abc"), "dataset.sha256: must match"),
        (lambda d: d["qa"].update(grader_version="other-v2"), "qa.grader_version"),
        (lambda d: d["qa"].update(stream="no"), "qa.stream: must be true or false"),
        (lambda d: d["qa"]["answer_prompt"].update(sha256="0" * 64), "does not match qa.answer_prompt.sha256"),
        (lambda d: d.update(protocol_id="other"),
         "protocol_id 'deermem-hybrid-v1-pr4789-reproduction-v1' does not match"),
    ],
)
def test_config_errors_name_file_and_key(protocol_copy, change, message):
    path = edit_config(protocol_copy, change)
    with pytest.raises(ContractError, match=message) as caught:
        load_protocol(config=path)
    assert str(path.name) in str(caught.value) or "manifest" in str(caught.value)


def test_bad_yaml_and_missing_file(tmp_path):
    broken = tmp_path / "c.yaml"
    broken.write_text("pool: [unclosed\n")
    with pytest.raises(ContractError, match="not valid YAML"):
        load_protocol(config=broken)
    with pytest.raises(ContractError, match="cannot read"):
        load_protocol(config=tmp_path / "missing.yaml")


@pytest.mark.parametrize(
    "which, change, message",
    [
        ("official", lambda d: d.update(scenario_order=d["scenario_order"][::-1]), "scenario_order"),
        ("official", lambda d: d["scenarios"]["access_help"].pop(), "must list 10 case ids"),
        ("official", lambda d: d.update(loss_ranks=[6] * 9 + [11]), r"loss_ranks: values must be in \[1, 10\]"),
        ("official", lambda d: d.update(protocol_id="x"), "does not match the config"),
        ("official", lambda d: d["scenarios"].update(extra=[]), "scenarios: unknown key"),
        ("official", lambda d: d.pop("selection"), "<root>: missing key"),
        ("official", lambda d: d["selection"].update(note="x"), "selection: unknown key"),
        ("official", lambda d: d["selection"].pop("answer_max_chars"), "selection: missing key"),
        ("official", lambda d: d["selection"].update(eligible_question_types=["multi-session"]),
         "selection.eligible_question_types: values must be knowledge-update or temporal-reasoning"),
        ("official", lambda d: d["selection"].update(eligible_question_types=[]),
         "eligible_question_types: must not be empty"),
        ("official", lambda d: d["selection"].update(excluded_pilot_ids="0f05491a"),
         "selection.excluded_pilot_ids: must be a list of non-empty strings"),
        ("official", lambda d: d["selection"].update(exclude_abstention_suffix=""),
         "selection.exclude_abstention_suffix: must be a non-empty string"),
        ("official", lambda d: d["selection"].update(answer_min_chars=-1),
         r"selection.answer_min_chars: must be in \[0"),
        ("official", lambda d: d["selection"].update(answer_max_chars=0),
         r"selection.answer_max_chars: must be in \[1"),
        ("official", lambda d: d["selection"].update(evidence_min_chars=True),
         "selection.evidence_min_chars: must be an integer"),
        ("official", lambda d: d["selection"].update(evidence_max_chars=2000.0),
         "selection.evidence_max_chars: must be an integer"),
        ("official", lambda d: d["selection"].update(evidence_min_chars=2001),
         "evidence_max_chars: must be >= evidence_min_chars"),
        ("official", lambda d: d["selection"].update(answer_excluded_substrings=[""]), "answer_excluded_substrings"),
        ("official", lambda d: d["selection"].update(take_per_question_type=0),
         r"take_per_question_type: must be in \[1"),
        ("official", lambda d: d["selection"].update(take_per_question_type=21),
         "take_per_question_type: must equal 4 scenarios x cases_per_type_per_scenario = 20, got 21"),
        ("official", lambda d: d["selection"].update(cases_per_type_per_scenario=4, take_per_question_type=16),
         r"scenarios.confirmation_help: must list 8 case ids \(selection"),
        ("synthetic", lambda d: d["cases"].pop(), "exactly 5 cases"),
        ("synthetic", lambda d: d["cases"][1].update(case_id=d["cases"][0]["case_id"]), "unique"),
        ("synthetic", lambda d: d["cases"][2].update(loss_rank="8"), r"cases\[2\].loss_rank"),
        ("synthetic", lambda d: d["cases"][0].update(note="x"), r"cases\[0\]: unknown key"),
        ("synthetic", lambda d: d.update(scenario="other"), "correction_reserve"),
    ],
)
def test_manifest_errors_name_file_and_key(tmp_path, which, change, message):
    source = DEFAULT_OFFICIAL_MANIFEST if which == "official" else DEFAULT_SYNTHETIC_MANIFEST
    data = json.loads(source.read_text())
    change(data)
    path = tmp_path / source.name
    path.write_text(json.dumps(data))
    option = {"official_manifest" if which == "official" else "synthetic_manifest": path}
    with pytest.raises(ContractError, match=message) as caught:
        load_protocol(**option)
    assert source.name in str(caught.value)


def test_the_selection_block_holds_deerflows_values():
    rule = load_protocol().official.selection
    assert rule.eligible_question_types == ("knowledge-update", "temporal-reasoning")
    assert set(rule.excluded_pilot_ids) == {
        "0f05491a", "dfde3500", "4b24c848", "7e974930", "8077ef71", "bcbe585f", "gpt4_85da3956", "gpt4_af6db32f",
    }
    assert rule.exclude_abstention_suffix == "_abs"
    assert (rule.answer_min_chars, rule.answer_max_chars) == (1, 100)
    assert rule.answer_excluded_substrings == ("not enough", "only mentioned")
    assert (rule.evidence_min_chars, rule.evidence_max_chars) == (1, 2000)
    assert (rule.take_per_question_type, rule.cases_per_type_per_scenario) == (20, 5)
    manifest = json.loads(DEFAULT_OFFICIAL_MANIFEST.read_text())
    assert rule.as_dict() == manifest["selection"]


def test_presets_and_overrides():
    assert resolve_variant() == PRESETS["pr4810-final"] == Variant("session", "protocol", "blank-line")
    assert resolve_variant("pr4810-run1") == Variant("bracket", "raw", "newline")
    assert resolve_variant("pr4810-run2", ["fact_ids=protocol", "fact_ids=raw"]) == PRESETS["pr4810-run2"]
    assert resolve_variant("pr4810-run2", ["memory_joiner=blank-line"]).memory_joiner == "blank-line"
    with pytest.raises(ContractError, match="known presets: pr4810-final"):
        resolve_variant("pr4810-run9")
    with pytest.raises(ContractError, match="unknown variant key 'header'"):
        resolve_variant(None, ["header=session"])
    with pytest.raises(ContractError, match="evidence_header must be one of session, bracket"):
        resolve_variant(None, ["evidence_header=square"])
    with pytest.raises(ContractError, match="expected KEY=VALUE"):
        resolve_variant(None, ["fact_ids"])


def test_the_docs_name_the_current_manifest_hashes():
    readme = (Path(__file__).resolve().parents[1] / "docs" / "commands.md").read_text(encoding="utf-8")
    for path in (DEFAULT_OFFICIAL_MANIFEST, DEMO_MANIFEST):
        assert f"`{sha256_file(path)[:8]}…`" in readme, path
