"""Protocol files: the config, the two manifests and the answer prompt (spec 2.1, 2.2, 2.4, 3.1, 7).

evictlab ships its own copies under ``data/protocol/`` in DeerFlow's schema, and reads
DeerFlow's own files unchanged when pointed at them. Loading is strict: unknown keys, wrong
types and inconsistent values are errors naming the file and the key. Every file is identified
by the SHA-256 of its exact bytes. The manifests' contents are parsed in
:mod:`evictlab.core.manifests`; this module parses the config, reads the four files and checks
them against each other.

This module also holds the protocol *variants* (spec section 0, item 4): the three details in
which DeerFlow's published runs differ, and the presets that name their combinations.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from ..errors import ContractError
from ..policies import PolicyParams
from ..readers import MAX_PROTOCOL_FILE_BYTES, parse_json, parse_yaml, read_bounded
from ..resources import DATA_DIR
from ..times import as_utc, read_iso
from .manifests import OfficialManifest, SyntheticManifest, parse_official_manifest, parse_synthetic_manifest
from .schema import HEX40, HEX64, Section

PROTOCOL_DIR = DATA_DIR / "protocol"
DEFAULT_CONFIG = PROTOCOL_DIR / "configs" / "pr4789-reproduction-v1.yaml"
DEFAULT_OFFICIAL_MANIFEST = PROTOCOL_DIR / "manifests" / "longmemeval-pr4789-v1.json"
DEFAULT_SYNTHETIC_MANIFEST = PROTOCOL_DIR / "manifests" / "synthetic-corrections-pr4789-v1.json"

PROTOCOL_POLICY_VERSION = "hybrid-v1"
PROVIDER = "openai-compatible"
#: The grader the config must name; evictlab.analysis.qa.grading implements exactly this version.
GRADER_VERSION = "deterministic-overlap-v1"
ARTIFACT_NAMES = ("config", "official_manifest", "synthetic_manifest", "answer_prompt")

#: The longest wait evictlab accepts for one network step (a provider attempt, a download read):
#: a day; anything longer is a hang, and the operating system refuses waits near 1e300 s.
MAX_TIMEOUT_SECONDS = 86_400.0


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: str | Path) -> str:
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


# --------------------------------------------------------------------------- variants


@dataclass(frozen=True)
class Variant:
    """The protocol details that changed between DeerFlow's published runs.

    ``evidence_header``: ``session`` (``SESSION {id} AT {date}``) or ``bracket``
    (``[session_id={id} date={date}]``); ``fact_ids``: ``protocol`` (``gold_``/``d_``) or ``raw``
    (source question ids); ``memory_joiner``: ``blank-line`` or ``newline`` between memory blocks.
    """

    evidence_header: str = "session"
    fact_ids: str = "protocol"
    memory_joiner: str = "blank-line"

    def __post_init__(self) -> None:
        for name, allowed in VARIANT_VALUES.items():
            value = getattr(self, name)
            if value not in allowed:
                raise ContractError(
                    f"variant {name} must be one of {', '.join(allowed)}, got {value!r}"
                )

    def as_dict(self) -> dict[str, str]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


VARIANT_VALUES: dict[str, tuple[str, ...]] = {
    "evidence_header": ("session", "bracket"),
    "fact_ids": ("protocol", "raw"),
    "memory_joiner": ("blank-line", "newline"),
}

PRESETS: dict[str, Variant] = {
    "pr4810-final": Variant("session", "protocol", "blank-line"),
    "pr4810-run2": Variant("session", "raw", "newline"),
    "pr4810-run1": Variant("bracket", "raw", "newline"),
}
DEFAULT_PRESET = "pr4810-final"


def preset_variant(name: str) -> Variant:
    try:
        return PRESETS[name]
    except KeyError:
        raise ContractError(
            f"unknown preset {name!r}; known presets: {', '.join(PRESETS)}"
        ) from None


def resolve_variant(preset: str | None = None, overrides: Iterable[str] | Mapping[str, str] = ()) -> Variant:
    """The preset's variant with ``key=value`` overrides applied in order (later ones win)."""
    variant = preset_variant(preset or DEFAULT_PRESET)
    pairs = overrides.items() if isinstance(overrides, Mapping) else map(parse_assignment, overrides)
    for key, value in pairs:
        if key not in VARIANT_VALUES:
            raise ContractError(
                f"unknown variant key {key!r}; known keys: {', '.join(VARIANT_VALUES)}"
            )
        variant = replace(variant, **{key: value})
    return variant


def parse_assignment(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise ContractError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value.strip()


# --------------------------------------------------------------------------- config


@dataclass(frozen=True)
class DatasetPin:
    repository: str
    revision: str
    filename: str
    sha256: str

    def as_dict(self) -> dict[str, str]:
        return {f.name: getattr(self, f.name) for f in fields(self)}


@dataclass(frozen=True)
class PoolConfig:
    size: int
    capacities: tuple[int, ...]
    qa_capacity: int
    distractors: int
    distractor_bank_size: int
    distractor_types: tuple[str, ...]
    distractor_min_evidence_chars: int
    distractor_max_evidence_chars: int
    offset_namespace: str
    fact_order: str


@dataclass(frozen=True)
class QAConfig:
    answer_prompt_path: str
    answer_prompt_sha256: str
    grader_version: str
    provider: str
    api_key_env: str
    base_url_env: str
    model: str
    temperature: float
    max_tokens: int
    stream: bool
    timeout_seconds: float
    max_attempts: int
    workers: int


@dataclass(frozen=True)
class StatisticsConfig:
    bootstrap_seed: int
    bootstrap_iterations: int
    alpha: float


@dataclass(frozen=True)
class Config:
    schema_version: int
    protocol_id: str
    required_policy_version: str
    evaluation_time: _dt.datetime
    dataset: DatasetPin
    pool: PoolConfig
    hybrid: PolicyParams
    qa: QAConfig
    statistics: StatisticsConfig


def parse_config(data: Any, *, file: str) -> Config:
    root = Section(data, file=file)
    root.expect_keys(
        {"schema_version", "protocol_id", "required_policy_version", "evaluation_time",
         "dataset", "pool", "policies", "qa", "statistics"}
    )
    root.literal("schema_version", 1)
    required = root.string("required_policy_version")
    if required != PROTOCOL_POLICY_VERSION:
        raise root.error(f"must be {PROTOCOL_POLICY_VERSION!r}, got {required!r}", "required_policy_version")
    return Config(
        schema_version=1,
        protocol_id=root.string("protocol_id"),
        required_policy_version=required,
        evaluation_time=_parse_clock(root),
        dataset=_parse_dataset_pin(root.section("dataset")),
        pool=_parse_pool(root.section("pool")),
        hybrid=_parse_policies(root.section("policies")),
        qa=_parse_qa(root.section("qa")),
        statistics=_parse_statistics(root.section("statistics")),
    )


def _parse_clock(root: Section) -> _dt.datetime:
    value = root.raw("evaluation_time")
    if isinstance(value, str):
        if (parsed := read_iso(value)) is None:
            raise root.error(f"must be an ISO-8601 time, got {value!r}", "evaluation_time")
        value = parsed
    if not isinstance(value, _dt.datetime) or value.tzinfo is None:
        raise root.error(f"must be a timezone-aware time, got {value!r}", "evaluation_time")
    try:
        return as_utc(value)
    except OverflowError:
        raise root.error(
            f"is out of the representable range in UTC, got {value.isoformat()!r}", "evaluation_time"
        ) from None


def _parse_dataset_pin(section: Section) -> DatasetPin:
    section.expect_keys({"repository", "revision", "filename", "sha256"})
    return DatasetPin(
        repository=section.string("repository"),
        revision=section.string("revision", pattern=HEX40),
        filename=section.string("filename"),
        sha256=section.string("sha256", pattern=HEX64),
    )


def _parse_pool(section: Section) -> PoolConfig:
    section.expect_keys(
        {"size", "capacities", "qa_capacity", "distractors", "distractor_bank_size",
         "distractor_types", "distractor_min_evidence_chars", "distractor_max_evidence_chars",
         "offset_namespace", "fact_order"}
    )
    size = section.integer("size", 2)
    distractors = section.integer("distractors", 1)
    if distractors != size - 1:
        raise section.error(f"must equal size - 1 = {size - 1}, got {distractors}", "distractors")
    bank_size = section.integer("distractor_bank_size", 1)
    if bank_size < distractors:
        raise section.error(f"must be >= distractors ({distractors}), got {bank_size}", "distractor_bank_size")
    capacities = section.integer_list("capacities", 1, size - 1)
    qa_capacity = section.integer("qa_capacity")
    if qa_capacity not in capacities:
        raise section.error(f"must be one of the capacities {list(capacities)}, got {qa_capacity}", "qa_capacity")
    low = section.integer("distractor_min_evidence_chars", 0)
    high = section.integer("distractor_max_evidence_chars", 0)
    if low > high:
        raise section.error(
            f"must be >= distractor_min_evidence_chars ({low}), got {high}", "distractor_max_evidence_chars"
        )
    fact_order = section.string("fact_order")
    if fact_order != "fact-id":
        raise section.error(
            f"must be 'fact-id' (the only order the protocol defines), got {fact_order!r}", "fact_order"
        )
    return PoolConfig(
        size=size,
        capacities=capacities,
        qa_capacity=qa_capacity,
        distractors=distractors,
        distractor_bank_size=bank_size,
        distractor_types=section.string_list("distractor_types"),
        distractor_min_evidence_chars=low,
        distractor_max_evidence_chars=high,
        offset_namespace=section.string("offset_namespace"),
        fact_order=fact_order,
    )


def _parse_policies(section: Section) -> PolicyParams:
    section.expect_keys({"confidence", "hybrid_v1"})
    confidence = section.section("confidence")
    confidence.expect_keys({"policy"})
    if confidence.string("policy") != "confidence":
        raise confidence.error("must be 'confidence'", "policy")
    hybrid = section.section("hybrid_v1")
    hybrid.expect_keys(
        {"policy", "weights", "confirmation_half_life_days", "access_half_life_days",
         "correction_reserved_fraction", "correction_reserved_max"}
    )
    if hybrid.string("policy") != PROTOCOL_POLICY_VERSION:
        raise hybrid.error(f"must be {PROTOCOL_POLICY_VERSION!r}", "policy")
    weights = hybrid.section("weights")
    weights.expect_keys({"confidence", "confirmation", "access"})
    values = [weights.number(key, 0.0, 1.0) for key in ("confidence", "confirmation", "access")]
    if abs(values[0] + values[1] + values[2] - 1.0) > 1e-9:
        raise weights.error(f"must sum to 1.0 within 1e-9, got {values[0] + values[1] + values[2]!r}")
    try:
        return PolicyParams(
            confidence_weight=values[0],
            confirmation_weight=values[1],
            access_weight=values[2],
            confirmation_half_life_days=hybrid.integer("confirmation_half_life_days", 1, 3650),
            access_half_life_days=hybrid.integer("access_half_life_days", 1, 3650),
            correction_reserved_fraction=hybrid.number("correction_reserved_fraction", 0.0, 1.0),
            correction_reserved_max=hybrid.integer("correction_reserved_max", 0, 100),
        )
    except ContractError as error:
        raise hybrid.error(str(error)) from None


def _parse_qa(section: Section) -> QAConfig:
    section.expect_keys(
        {"answer_prompt", "grader_version", "provider", "api_key_env", "base_url_env", "model",
         "temperature", "max_tokens", "stream", "timeout_seconds", "max_attempts", "workers"}
    )
    prompt = section.section("answer_prompt")
    prompt.expect_keys({"path", "sha256"})
    grader = section.string("grader_version")
    if grader != GRADER_VERSION:
        raise section.error(f"must be {GRADER_VERSION!r} (the grader evictlab ships), got {grader!r}", "grader_version")
    provider = section.string("provider")
    if provider != PROVIDER:
        raise section.error(f"must be {PROVIDER!r}, got {provider!r}", "provider")
    return QAConfig(
        answer_prompt_path=prompt.string("path"),
        answer_prompt_sha256=prompt.string("sha256", pattern=HEX64),
        grader_version=grader,
        provider=provider,
        api_key_env=section.string("api_key_env"),
        base_url_env=section.string("base_url_env"),
        model=section.string("model"),
        temperature=section.number("temperature", 0.0, 2.0),
        max_tokens=section.integer("max_tokens", 1),
        stream=section.boolean("stream"),
        timeout_seconds=section.number("timeout_seconds", 0.001, MAX_TIMEOUT_SECONDS),
        max_attempts=section.integer("max_attempts", 1, 100),
        workers=section.integer("workers", 1, 64),
    )


def _parse_statistics(section: Section) -> StatisticsConfig:
    section.expect_keys({"bootstrap_seed", "bootstrap_iterations", "alpha"})
    return StatisticsConfig(
        bootstrap_seed=section.integer("bootstrap_seed", 0),
        bootstrap_iterations=section.integer("bootstrap_iterations", 1),
        alpha=section.number("alpha", 1e-12, 0.999999),
    )


# --------------------------------------------------------------------------- the protocol


@dataclass(frozen=True)
class ProtocolFiles:
    config: Path
    official_manifest: Path
    synthetic_manifest: Path
    answer_prompt: Path


@dataclass(frozen=True)
class Protocol:
    """The four protocol files, parsed, checked against each other and identified by hash."""

    files: ProtocolFiles
    config: Config
    official: OfficialManifest
    synthetic: SyntheticManifest
    answer_prompt: str
    hashes: dict[str, str]

    @property
    def protocol_id(self) -> str:
        return self.config.protocol_id

    @property
    def evaluation_time(self) -> _dt.datetime:
        return self.config.evaluation_time

    def artifact_hashes(self) -> dict[str, str]:
        """``{config_sha256, official_manifest_sha256, synthetic_manifest_sha256, answer_prompt_sha256}``."""
        return {f"{name}_sha256": self.hashes[name] for name in ARTIFACT_NAMES}

    def with_official_manifest(self, path: str | Path) -> Protocol:
        """The same protocol with another official manifest (the demo dataset has its own)."""
        path = Path(path)
        data = _read_bytes(path)
        manifest = parse_official_manifest(
            _read_json(path, data), file=str(path), pool_size=self.config.pool.size
        )
        _check_protocol_id(self.config, manifest.protocol_id, path)
        _check_case_ids(manifest, path, self.synthetic, self.files.synthetic_manifest)
        return replace(
            self,
            files=replace(self.files, official_manifest=path),
            official=manifest,
            hashes={**self.hashes, "official_manifest": sha256_bytes(data)},
        )


def load_config(path: str | Path | None = None) -> Config:
    """Parse one config file strictly (evictlab's own by default), without the other protocol files."""
    path = Path(path) if path else DEFAULT_CONFIG
    return parse_config(_read_yaml(path, _read_bytes(path)), file=str(path))


def load_protocol(
    config: str | Path | None = None, official_manifest: str | Path | None = None,
    synthetic_manifest: str | Path | None = None, answer_prompt: str | Path | None = None,
) -> Protocol:
    """Load and cross-check the protocol files (evictlab's own by default).

    The answer prompt path in the config resolves against the parent of the config's folder
    (DeerFlow's layout) unless ``answer_prompt`` is given. Each file is read once, with a
    size limit, and hashed from the bytes that were parsed.
    """
    config_path = Path(config) if config else DEFAULT_CONFIG
    config_bytes = _read_bytes(config_path)
    parsed = parse_config(_read_yaml(config_path, config_bytes), file=str(config_path))
    prompt_path = (
        Path(answer_prompt) if answer_prompt
        else config_path.resolve().parent.parent / parsed.qa.answer_prompt_path
    )
    official_path = Path(official_manifest) if official_manifest else DEFAULT_OFFICIAL_MANIFEST
    synthetic_path = Path(synthetic_manifest) if synthetic_manifest else DEFAULT_SYNTHETIC_MANIFEST
    pool_size = parsed.pool.size
    official_bytes = _read_bytes(official_path)
    synthetic_bytes = _read_bytes(synthetic_path)
    official = parse_official_manifest(
        _read_json(official_path, official_bytes), file=str(official_path), pool_size=pool_size
    )
    synthetic = parse_synthetic_manifest(
        _read_json(synthetic_path, synthetic_bytes), file=str(synthetic_path), pool_size=pool_size
    )
    _check_protocol_id(parsed, official.protocol_id, official_path)
    _check_protocol_id(parsed, synthetic.protocol_id, synthetic_path)
    _check_case_ids(official, official_path, synthetic, synthetic_path)
    prompt_bytes = _read_bytes(prompt_path)
    prompt_hash = sha256_bytes(prompt_bytes)
    if prompt_hash != parsed.qa.answer_prompt_sha256:
        raise ContractError(
            f"{prompt_path}: SHA-256 {prompt_hash} does not match qa.answer_prompt.sha256"
            f" {parsed.qa.answer_prompt_sha256} in {config_path}"
        )
    try:
        prompt_text = prompt_bytes.decode("utf-8")
    except UnicodeDecodeError as error:
        raise ContractError(f"{prompt_path}: not UTF-8 text ({error})") from None
    files = ProtocolFiles(config_path, official_path, synthetic_path, prompt_path)
    hashes = {
        "config": sha256_bytes(config_bytes),
        "official_manifest": sha256_bytes(official_bytes),
        "synthetic_manifest": sha256_bytes(synthetic_bytes),
        "answer_prompt": prompt_hash,
    }
    return Protocol(files, parsed, official, synthetic, prompt_text, hashes)


def _check_case_ids(
    official: OfficialManifest, official_path: Path, synthetic: SyntheticManifest, synthetic_path: Path
) -> None:
    # Row ids are "{case_id}__{policy}": a shared case id would make two tasks write one file.
    shared = sorted(set(official.case_ids) & {case.case_id for case in synthetic.cases})
    if shared:
        raise ContractError(
            f"{synthetic_path}: case id(s) {', '.join(shared)} also appear in the official"
            f" manifest {official_path}; every case id must be unique across both manifests"
        )


def _check_protocol_id(config: Config, protocol_id: str, path: Path) -> None:
    if protocol_id != config.protocol_id:
        raise ContractError(
            f"{path}: protocol_id {protocol_id!r} does not match the config's {config.protocol_id!r}"
        )


def _read_bytes(path: Path) -> bytes:
    return read_bounded(path, MAX_PROTOCOL_FILE_BYTES, what="protocol file")


def _read_yaml(path: Path, data: bytes) -> Any:
    return parse_yaml(data, where=str(path))


def _read_json(path: Path, data: bytes) -> Any:
    return parse_json(data, where=str(path))
