"""Run specifications: presets, overrides, YAML files, type checks and the identity hash."""

from __future__ import annotations

import datetime as dt
import re
import shutil

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from evictlab.core.protocol import (
    DEFAULT_CONFIG,
    DEFAULT_OFFICIAL_MANIFEST,
    DEFAULT_SYNTHETIC_MANIFEST,
    PRESETS,
    Variant,
    load_protocol,
)
from evictlab.core.runspec import RunSpec, check_same_dataset, load_spec_file, parse_spec, resolve
from evictlab.errors import ContractError
from evictlab.policies import PolicyParams

UTC = dt.UTC
DEFAULT_PROMPT = DEFAULT_CONFIG.parent.parent / "prompts" / "answer-v1.txt"


def write_yaml(path, data):
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def copy_protocol(folder):
    """evictlab's own four protocol files copied, byte for byte, into DeerFlow's layout under ``folder``."""
    (folder / "configs").mkdir(parents=True)
    (folder / "manifests").mkdir()
    (folder / "prompts").mkdir()
    return {
        "config": shutil.copy(DEFAULT_CONFIG, folder / "configs" / "copy.yaml"),
        "official_manifest": shutil.copy(DEFAULT_OFFICIAL_MANIFEST, folder / "manifests" / "official.json"),
        "synthetic_manifest": shutil.copy(DEFAULT_SYNTHETIC_MANIFEST, folder / "manifests" / "synthetic.json"),
        "answer_prompt": shutil.copy(DEFAULT_PROMPT, folder / "prompts" / "answer-v1.txt"),
    }


# --------------------------------------------------------------------------- presets and values


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_a_preset_resolves_to_its_variant_and_the_configs_parameters_and_clock(name):
    spec = parse_spec(name)
    config = load_protocol().config
    assert spec.preset == name and spec.overrides == ()
    assert spec.variant == PRESETS[name]
    assert spec.params == config.hybrid
    assert spec.evaluation_time == config.evaluation_time
    assert re.fullmatch(r"[0-9a-f]{64}", spec.identity)
    assert spec == RunSpec.from_preset(name)


def test_the_presets_have_three_distinct_identities():
    assert len({parse_spec(name).identity for name in PRESETS}) == 3


def test_overrides_apply_key_by_key_and_later_values_win():
    spec = parse_spec("pr4810-final:confidence_weight=0.5,confirmation_weight=0.4,"
                      "confidence_weight=0.55,confirmation_weight=0.35")
    assert spec.params == PolicyParams(0.55, 0.35, 0.10)
    assert spec.variant == PRESETS["pr4810-final"]
    assert spec.settings == {"confidence_weight": 0.55, "confirmation_weight": 0.35}


def test_a_variant_override_on_a_preset():
    spec = parse_spec("pr4810-run2:fact_ids=protocol")
    assert spec.variant == Variant("session", "protocol", "newline")
    assert spec.params == load_protocol().config.hybrid


def test_identity_depends_on_resolved_values_not_on_spelling():
    # run2 with the final fact ids and joiner *is* the final protocol.
    spelled = parse_spec("pr4810-run2:fact_ids=protocol,memory_joiner=blank-line")
    assert spelled == parse_spec("pr4810-final")
    assert spelled.identity == parse_spec("pr4810-final").identity
    assert spelled.label != "pr4810-final"
    # An integer and a float of the same value, and the config's own value restated.
    assert parse_spec("pr4810-final:confirmation_half_life_days=90") == parse_spec("pr4810-final")
    assert parse_spec("pr4810-final:correction_reserved_max=10").identity == parse_spec("pr4810-final").identity
    assert parse_spec("pr4810-final:evaluation_time=2026-08-13T02:00:00+02:00") == parse_spec("pr4810-final")


@pytest.mark.parametrize(
    "override",
    [
        "evidence_header=bracket",
        "fact_ids=raw",
        "memory_joiner=newline",
        "confidence_weight=0.6,confirmation_weight=0.3",
        "confirmation_half_life_days=91",
        "access_half_life_days=29.5",
        "correction_reserved_fraction=0.2",
        "correction_reserved_max=3",
        "evaluation_time=2026-08-14T00:00:00Z",
    ],
)
def test_every_key_changes_the_identity(override):
    assert parse_spec(f"pr4810-final:{override}").identity != parse_spec("pr4810-final").identity


def test_identity_hashes_file_contents_not_paths(tmp_path):
    files = copy_protocol(tmp_path / "copy")
    copied = load_spec_file(write_yaml(tmp_path / "copied.yaml", {k: str(v) for k, v in files.items()}))
    assert copied.files["config"] != parse_spec("pr4810-final").files["config"]
    assert copied.identity == parse_spec("pr4810-final").identity
    # One changed byte in the config (a comment) is a different protocol file.
    config = files["config"]
    config.write_text(config.read_text(encoding="utf-8") + "# edited\n", encoding="utf-8")
    edited = load_spec_file(tmp_path / "copied.yaml")
    assert edited.artifact_hashes["config_sha256"] != copied.artifact_hashes["config_sha256"]
    assert edited.identity != copied.identity


def test_override_returns_a_new_spec_and_leaves_the_old_one_alone():
    base = parse_spec("pr4810-run1")
    changed = base.override(evidence_header="session", access_half_life_days=60)
    assert base.variant == PRESETS["pr4810-run1"] and base.params.access_half_life_days == 30
    assert changed.variant == PRESETS["pr4810-run2"] and changed.params.access_half_life_days == 60.0
    assert changed.label == "pr4810-run1:evidence_header=session,access_half_life_days=60"
    with pytest.raises(AttributeError):
        base.preset = "pr4810-final"  # frozen
    # Built directly, overrides may be a mapping or pairs.
    assert RunSpec("pr4810-run2", {"fact_ids": "protocol"}) == RunSpec("pr4810-run2", [("fact_ids", "protocol")])


def test_load_protocol_carries_the_specs_parameters_and_clock():
    spec = parse_spec("pr4810-final:confidence_weight=0.8,confirmation_weight=0.1,evaluation_time=2026-09-01T00:00:00Z")
    protocol = spec.load_protocol()
    assert protocol.config.hybrid == spec.params == PolicyParams(0.8, 0.1, 0.1)
    assert protocol.evaluation_time == dt.datetime(2026, 9, 1, tzinfo=UTC)
    assert protocol.artifact_hashes() == spec.artifact_hashes == load_protocol().artifact_hashes()


def test_describe_and_record():
    spec = parse_spec("pr4810-run2:confidence_weight=0.5,confirmation_weight=0.4")
    text = spec.describe()
    assert text.startswith("pr4810-run2:confidence_weight=0.5,confirmation_weight=0.4 [session/raw/newline;")
    assert "weights 0.5/0.4/0.1" in text and "clock 2026-08-13T00:00:00Z" in text and spec.identity[:12] in text
    record = spec.as_record()
    assert record["identity"] == spec.identity
    assert record["overrides"] == {"confidence_weight": 0.5, "confirmation_weight": 0.4}
    assert record["variant"] == {"evidence_header": "session", "fact_ids": "raw", "memory_joiner": "newline"}
    assert record["policy_parameters"]["confirmation_half_life_days"] == 90.0
    assert set(record["artifacts"]) == {
        "config_sha256", "official_manifest_sha256", "synthetic_manifest_sha256", "answer_prompt_sha256"
    }


# --------------------------------------------------------------------------- clock


@pytest.mark.parametrize(
    "text, expected",
    [
        ("2026-09-01T00:00:00Z", dt.datetime(2026, 9, 1, tzinfo=UTC)),
        ("2026-09-01T12:00:00+02:00", dt.datetime(2026, 9, 1, 10, tzinfo=UTC)),
    ],
)
def test_clock_overrides(text, expected):
    assert parse_spec(f"pr4810-final:evaluation_time={text}").evaluation_time == expected


@pytest.mark.parametrize("text", ["2026-09-01T12:00:00", "2026-09-01"])
def test_a_clock_without_a_zone_is_refused(text):
    # spec 0.5: protocol clocks are timezone-aware; a naive time would depend on the host
    with pytest.raises(ContractError, match="evaluation_time must be a timezone-aware ISO-8601 time"):
        parse_spec(f"pr4810-final:evaluation_time={text}")


def test_yaml_timestamps_are_clocks_and_dates_are_refused(tmp_path):
    # YAML turns unquoted timestamps and dates into datetime/date objects; a date has no zone.
    stamp = tmp_path / "stamp.yaml"
    stamp.write_text("evaluation_time: 2026-09-01 12:00:00+02:00\n", encoding="utf-8")
    day = tmp_path / "day.yaml"
    day.write_text("evaluation_time: 2026-09-01\n", encoding="utf-8")
    assert load_spec_file(stamp).evaluation_time == dt.datetime(2026, 9, 1, 10, tzinfo=UTC)
    with pytest.raises(ContractError, match=r"day\.yaml.*timezone-aware"):
        load_spec_file(day)


# --------------------------------------------------------------------------- YAML files


def test_a_spec_file_with_a_preset_and_keys(tmp_path):
    path = write_yaml(
        tmp_path / "heavy.yaml",
        {"preset": "pr4810-run2", "fact_ids": "protocol", "confidence_weight": 0.9,
         "confirmation_weight": 0.05, "access_weight": 0.05, "correction_reserved_max": 2},
    )
    spec = parse_spec(str(path))
    assert spec == parse_spec(
        "pr4810-run2:fact_ids=protocol,confidence_weight=0.9,confirmation_weight=0.05,access_weight=0.05,"
        "correction_reserved_max=2"
    )
    assert spec.label == str(path)


def test_a_spec_file_without_a_preset_starts_from_the_default(tmp_path):
    path = write_yaml(tmp_path / "s.yaml", {"fact_ids": "raw"})
    assert load_spec_file(path) == parse_spec("pr4810-final:fact_ids=raw")


def test_a_spec_file_can_be_overridden_inline(tmp_path):
    path = write_yaml(tmp_path / "s.yaml",
                      {"preset": "pr4810-run1", "confidence_weight": 0.7, "confirmation_weight": 0.2})
    spec = parse_spec(f"{path}:confirmation_weight=0.25,access_weight=0.05")
    assert spec.variant == PRESETS["pr4810-run1"] and spec.params.weights == (0.7, 0.25, 0.05)


def test_paths_in_a_spec_file_are_relative_to_its_folder(tmp_path):
    copy_protocol(tmp_path / "proto")
    path = write_yaml(
        tmp_path / "proto" / "spec.yaml",
        {"config": "configs/copy.yaml", "official_manifest": "manifests/official.json"},
    )
    spec = load_spec_file(path)
    assert spec.files["config"] == tmp_path / "proto" / "configs" / "copy.yaml"
    assert spec.files["official_manifest"] == tmp_path / "proto" / "manifests" / "official.json"
    assert spec.names_official_manifest
    assert not parse_spec("pr4810-final").names_official_manifest


def test_the_committed_example_specs_parse():
    from evictlab.core.protocol import DATA_DIR

    examples = sorted((DATA_DIR / "specs").glob("*.yaml"))
    assert examples, "data/specs/ should hold example spec files"
    identities = {load_spec_file(path).identity for path in examples}
    assert len(identities) == len(examples)
    assert parse_spec("pr4810-final").identity not in identities


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    "text, message",
    [
        ("pr4810-final2",
         "spec 'pr4810-final2': unknown preset 'pr4810-final2'; known presets: pr4810-final, pr4810-run2, pr4810-run1"),
        ("pr4810-final:confidence=0.5",
         "spec 'pr4810-final:confidence=0.5': unknown spec key 'confidence'; known keys: config,"),
        ("pr4810-final:confidence_weight=abc",
         "spec 'pr4810-final:confidence_weight=abc': confidence_weight must be a number, got 'abc'"),
        ("pr4810-final:access_half_life_days=nan", "access_half_life_days must be a finite number, got 'nan'"),
        ("pr4810-final:correction_reserved_max=1.5", "correction_reserved_max must be an integer, got '1.5'"),
        ("pr4810-final:fact_ids=gold", "fact_ids must be one of protocol, raw, got 'gold'"),
        ("pr4810-final:evaluation_time=soon",
         "evaluation_time must be a timezone-aware ISO-8601 time such as 2026-08-13T00:00:00Z, got 'soon'"),
        ("pr4810-final:confidence_weight",
         "spec 'pr4810-final:confidence_weight': expected KEY=VALUE, got 'confidence_weight'"),
        ("pr4810-final:", "expected KEY=VALUE, got ''"),
        ("", "empty spec"),
        ("missing.yaml", "missing.yaml: cannot read spec file"),
        ("pr4810-fianl:config=x.yaml", "spec 'pr4810-fianl:config=x.yaml': unknown preset 'pr4810-fianl'"),
    ],
)
def test_bad_specs_are_clear_errors(text, message):
    with pytest.raises(ContractError) as caught:
        parse_spec(text)
    assert message in str(caught.value)


def test_weights_off_one_get_the_policy_parameters_error():
    with pytest.raises(ContractError) as caught:
        parse_spec("pr4810-final:confidence_weight=0.5")
    assert str(caught.value) == (
        "spec 'pr4810-final:confidence_weight=0.5': weights must sum to 1.0 within 1e-9:"
        " confidence_weight + confirmation_weight + access_weight = 0.85"
    )
    with pytest.raises(ContractError, match=r"confidence_weight must be in \[0, 1\], got 1\.4"):
        parse_spec("pr4810-final:confidence_weight=1.4,confirmation_weight=-0.5")


@pytest.mark.parametrize(
    "data, message",
    [
        ({"preset": "pr4810-final", "weights": {"confidence": 1}}, "unknown spec key 'weights'"),
        ({"confidence_weight": "abc"}, "confidence_weight must be a number, got 'abc'"),
        ({"confidence_weight": True}, "confidence_weight must be a number, got True"),
        ({"correction_reserved_max": 2.0}, "correction_reserved_max must be an integer, got 2.0"),
        ({"memory_joiner": "tab"}, "memory_joiner must be one of blank-line, newline, got 'tab'"),
        ({"config": 3}, "config must be a file path, got 3"),
        ({"preset": "run9"}, "unknown preset 'run9'"),
        ({"preset": ["pr4810-final"]}, "preset must be a preset name"),
        (["fact_ids", "raw"], "a spec file must be a mapping of spec keys, got list"),
    ],
)
def test_bad_spec_files_name_the_file_and_key(tmp_path, data, message):
    path = write_yaml(tmp_path / "bad.yaml", data)
    with pytest.raises(ContractError) as caught:
        parse_spec(str(path))
    assert str(caught.value).startswith(str(path))
    assert message in str(caught.value)


def test_invalid_yaml_is_named(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("fact_ids: [raw\n", encoding="utf-8")
    with pytest.raises(ContractError, match=f"{re.escape(str(path))}: not valid YAML"):
        parse_spec(str(path))


def test_a_missing_protocol_file_is_named(tmp_path):
    with pytest.raises(ContractError, match=r"nowhere\.yaml: cannot read"):
        parse_spec(f"pr4810-final:config={tmp_path / 'nowhere.yaml'}")


def test_specs_pinning_different_datasets_are_refused(tmp_path):
    files = copy_protocol(tmp_path / "other")
    config = files["config"]
    text = config.read_text(encoding="utf-8")
    pinned = load_protocol().config.dataset.sha256
    config.write_text(text.replace(pinned, "f" * 64), encoding="utf-8")
    other = parse_spec(f"pr4810-final:config={config}")
    assert check_same_dataset([parse_spec("pr4810-final"), parse_spec("pr4810-run1")]).sha256 == pinned
    with pytest.raises(ContractError) as caught:
        check_same_dataset([parse_spec("pr4810-final"), other])
    message = str(caught.value)
    assert "the specs use different datasets" in message and pinned in message and "f" * 64 in message
    assert str(config) in message


# --------------------------------------------------------------------------- properties


VALUE_CHOICES = {
    "evidence_header": st.sampled_from(["session", "bracket"]),
    "fact_ids": st.sampled_from(["protocol", "raw"]),
    "memory_joiner": st.sampled_from(["blank-line", "newline"]),
    "confirmation_half_life_days": st.integers(1, 3650),
    "access_half_life_days": st.sampled_from([0.5, 7.25, 30, 365]),
    "correction_reserved_fraction": st.sampled_from([0.0, 0.1, 0.25, 1.0]),
    "correction_reserved_max": st.integers(0, 100),
}


@settings(max_examples=25, deadline=None)
@given(
    preset=st.sampled_from(sorted(PRESETS)),
    overrides=st.fixed_dictionaries({}, optional=VALUE_CHOICES),
)
def test_inline_yaml_and_keyword_forms_resolve_alike(tmp_path_factory, preset, overrides):
    inline = parse_spec(preset + "".join(
        (":" if i == 0 else ",") + f"{k}={v}" for i, (k, v) in enumerate(overrides.items())
    ))
    path = write_yaml(tmp_path_factory.mktemp("spec") / "s.yaml", {"preset": preset, **overrides})
    from_file = load_spec_file(path)
    keywords = RunSpec.from_preset(preset, **overrides)
    assert inline == from_file == keywords
    assert inline.identity == from_file.identity == keywords.identity
    assert inline.variant == Variant(**{**PRESETS[preset].as_dict(), **{
        k: v for k, v in overrides.items() if k in PRESETS[preset].as_dict()
    }})
    # The same overrides in reverse order give the same spec (distinct keys do not interact).
    reverse = RunSpec.from_preset(preset, **dict(reversed(list(overrides.items()))))
    assert reverse == keywords


# --------------------------------------------------------------------------- description and resolution


def test_the_identities_of_published_specs_are_unchanged():
    # Run files written before resolve() was split from RunSpec carry these identities.
    assert parse_spec("pr4810-final").identity == "98ace38b1e9163a0da0dab3793225d836eb5336bd57bccad4b90394b8ddf1054"
    assert parse_spec("pr4810-run1").identity == "5f22c11c77bd8d6b634fd656466928eda575877a6579078731ba29dbffe1d8d8"
    assert parse_spec("pr4810-final:confidence_weight=0.55,confirmation_weight=0.35").identity == (
        "ef66f1b65c1526885806787403b2add8abab6257813535af1d402e5191917b33"
    )


def test_making_a_spec_reads_no_file_and_resolve_reads_them(tmp_path):
    config = tmp_path / "configs" / "later.yaml"
    spec = RunSpec("pr4810-final", (("config", config),))  # the file does not exist yet: no error
    with pytest.raises(ContractError, match=r"later\.yaml: cannot read"):
        resolve(spec)
    copy_protocol(tmp_path)
    shutil.copy(DEFAULT_CONFIG, config)
    resolved = resolve(spec)
    assert resolved.files["config"] == config and resolved.identity == parse_spec("pr4810-final").identity
    assert resolve(spec) == resolved  # a function of the spec and the files' contents
    # A spec resolves once: the files it was resolved from are the ones its runs use.
    assert spec.resolved is spec.resolved and spec.identity == resolved.identity


def test_type_errors_are_found_when_a_spec_is_made_value_errors_when_it_resolves():
    with pytest.raises(ContractError, match="confidence_weight must be a number"):
        RunSpec("pr4810-final", (("confidence_weight", "heavy"),))
    off_one = RunSpec("pr4810-final", (("confidence_weight", 0.5),))
    with pytest.raises(ContractError, match=r"spec 'pr4810-final': weights must sum to 1\.0"):
        resolve(off_one)


def test_a_spec_text_and_a_spec_file_carry_the_dataset(tmp_path):
    spec = parse_spec(f"pr4810-run2:dataset={tmp_path / 'oracle.json'},allow_unpinned=true,fact_ids=protocol")
    assert spec.dataset == tmp_path / "oracle.json" and spec.allow_unpinned is True
    assert spec.settings == {"fact_ids": "protocol"}  # the dataset keys are no overrides ...
    assert spec == parse_spec("pr4810-run2:fact_ids=protocol")  # ... and take no part in the identity
    (tmp_path / "data").mkdir()
    path = write_yaml(tmp_path / "data" / "s.yaml", {"preset": "pr4810-run1", "dataset": "oracle.json"})
    from_file = parse_spec(str(path))
    assert from_file.dataset == tmp_path / "data" / "oracle.json"  # relative to the spec file
    assert from_file.allow_unpinned is False
    assert parse_spec(f"{path}:allow_unpinned=True").dataset == from_file.dataset  # inline keys add to the file's
    moved = from_file.on_dataset(None)
    assert moved.dataset is None and moved == from_file and moved.resolved is from_file.resolved


@pytest.mark.parametrize(
    "text, message",
    [
        ("pr4810-final:allow_unpinned=maybe", "allow_unpinned must be true or false, got 'maybe'"),
        ("pr4810-final:dataset=", "dataset must be a file path, got ''"),
    ],
)
def test_bad_dataset_keys_are_clear_errors(text, message):
    with pytest.raises(ContractError, match=re.escape(message)):
        parse_spec(text)
