"""Run specifications: what a run reads (protocol files, variant, parameters, clock, dataset).

A :class:`RunSpec` is a plain description: a preset, overrides applied key by key, and the
dataset (None: the embedded demo). The overrides name the four protocol files (evictlab's own
by default), the protocol variant (``evidence_header``, ``fact_ids``, ``memory_joiner``), the
hybrid-v1 parameters (the :class:`~evictlab.policies.PolicyParams` field names) and the clock
(``evaluation_time``); parameters and clock default to the config's values. Making a spec
checks its keys and value types and reads no file.

:func:`resolve` (once per spec, :attr:`RunSpec.resolved`) reads and checks the protocol files,
applies the overrides and validates the parameters, giving a :class:`ResolvedSpec` with the
spec's ``identity``: the SHA-256 of a canonical JSON of the resolved values, the protocol files
identified by their content hashes, never their paths, and the dataset left out (every run file
identifies it by its own SHA-256). Two specs that resolve to the same values are equal however
they were written. :func:`parse_spec` and :func:`load_spec_file` resolve what they return, so an
invalid SPEC fails where it is read.

A SPEC string is ``BASE`` or ``BASE:KEY=VALUE,KEY=VALUE``, where ``BASE`` is a preset name
(``pr4810-final``, ``pr4810-run2``, ``pr4810-run1``) or the path of a small YAML file
(``.yaml``/``.yml``) holding an optional ``preset:`` and any spec keys. Later values win.
Besides the keys above, ``dataset`` (a LongMemEval file; a path holding no comma) and
``allow_unpinned`` (``true``/``false``) choose the dataset. Paths inside a YAML file are
relative to that file's folder.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from ..errors import ContractError
from ..policies import PolicyParams
from ..readers import MAX_PROTOCOL_FILE_BYTES, parse_yaml, read_bounded
from ..times import as_utc, iso_z, read_iso
from .protocol import (
    ARTIFACT_NAMES,
    DEFAULT_PRESET,
    PRESETS,
    VARIANT_VALUES,
    DatasetPin,
    Protocol,
    Variant,
    load_protocol,
    sha256_bytes,
)

FILE_KEYS = ARTIFACT_NAMES  # config, official_manifest, synthetic_manifest, answer_prompt
VARIANT_KEYS = tuple(VARIANT_VALUES)
PARAM_KEYS = tuple(f.name for f in fields(PolicyParams))
INTEGER_PARAM_KEYS = ("correction_reserved_max",)
CLOCK_KEY = "evaluation_time"
DATASET_KEYS = ("dataset", "allow_unpinned")  # set the spec's dataset fields, outside the identity
SPEC_KEYS = FILE_KEYS + VARIANT_KEYS + PARAM_KEYS + (CLOCK_KEY,) + DATASET_KEYS
PATH_KEYS = (*FILE_KEYS, "dataset")  # relative to a spec file's folder when written in one
SPEC_FILE_SUFFIXES = (".yaml", ".yml")
IDENTITY_SCHEMA = "evictlab-runspec-1"


@dataclass(frozen=True, eq=False)
class RunSpec:
    """A run specification: a preset plus ``(key, value)`` overrides, applied in order, and a dataset.

    Construct it with :meth:`from_preset`, :func:`parse_spec` or :meth:`override`; building
    one directly works too (``RunSpec("pr4810-run2", (("fact_ids", "protocol"),))``) but skips
    the string parsing, so values must already have their types. The dataset keys among the
    overrides set :attr:`dataset` and :attr:`allow_unpinned`. Two specs are equal when their
    ``identity`` is.
    """

    preset: str = DEFAULT_PRESET
    overrides: tuple[tuple[str, Any], ...] = ()
    origin: str = ""  # how the user wrote it (SPEC text or file path); for messages only
    dataset: Path | None = None  # None: the embedded demo
    allow_unpinned: bool = False
    _resolved: ResolvedSpec | None = field(default=None, init=False, repr=False)  # resolve(self), once

    def __post_init__(self) -> None:
        where = self.where
        if self.preset not in PRESETS:
            raise ContractError(f"{where}: unknown preset {self.preset!r}; known presets: {', '.join(PRESETS)}")
        pairs = self.overrides.items() if isinstance(self.overrides, Mapping) else self.overrides
        coerced = [(key, coerce_value(key, value, where=where)) for key, value in pairs]
        dataset_settings = {key: value for key, value in coerced if key in DATASET_KEYS}
        object.__setattr__(self, "overrides", tuple(pair for pair in coerced if pair[0] not in DATASET_KEYS))
        if self.dataset is not None:
            object.__setattr__(self, "dataset", Path(self.dataset))
        for key, value in dataset_settings.items():
            object.__setattr__(self, key, value)

    # ------------------------------------------------------------------ construction

    @classmethod
    def from_preset(cls, name: str = DEFAULT_PRESET, **overrides: Any) -> RunSpec:
        """The preset's spec with keyword overrides, e.g. ``from_preset("pr4810-run2", fact_ids="protocol")``."""
        return cls(name, tuple(overrides.items()))

    def override(self, **changes: Any) -> RunSpec:
        """A new spec with ``changes`` applied after this spec's own overrides."""
        return RunSpec(self.preset, self.overrides + tuple(changes.items()), "", self.dataset, self.allow_unpinned)

    def with_preset(self, name: str) -> RunSpec:
        """This spec under preset ``name``: its overrides and dataset apply there as well."""
        return RunSpec(name, self.overrides, "", self.dataset, self.allow_unpinned)

    def on_dataset(self, dataset: str | os.PathLike | None, *, allow_unpinned: bool = False) -> RunSpec:
        """This spec on ``dataset`` (None: the embedded demo); it resolves as this spec does."""
        moved = replace(self, dataset=None if dataset is None else Path(dataset), allow_unpinned=allow_unpinned)
        object.__setattr__(moved, "_resolved", self._resolved)  # the dataset takes no part in resolving
        return moved

    # ------------------------------------------------------------------ the description

    @property
    def where(self) -> str:
        """How messages name the spec: a spec file by its path, anything else as quoted SPEC text."""
        return _where(self.origin or self.preset)

    @property
    def settings(self) -> dict[str, Any]:
        """The effective overrides, one per key (the last one written wins)."""
        return dict(self.overrides)

    @property
    def names_official_manifest(self) -> bool:
        """Whether the spec names its own official manifest (else the dataset's default applies)."""
        return "official_manifest" in self.settings

    @property
    def label(self) -> str:
        """A short name: the text the spec was parsed from, or the preset and its overrides."""
        if self.origin:
            return self.origin
        if not self.overrides:
            return self.preset
        pairs = (f"{key}={_format_value(value)}" for key, value in self.settings.items())
        return self.preset + ":" + ",".join(pairs)

    # ------------------------------------------------------------------ resolved values

    @property
    def resolved(self) -> ResolvedSpec:
        """:func:`resolve` of this spec, computed on first use and kept."""
        resolved = self._resolved
        if resolved is None:
            resolved = resolve(self)
            object.__setattr__(self, "_resolved", resolved)
        return resolved

    # What runs read, from the resolved spec (ResolvedSpec documents each).

    @property
    def variant(self) -> Variant:
        return self.resolved.variant

    @property
    def params(self) -> PolicyParams:
        return self.resolved.params

    @property
    def evaluation_time(self) -> _dt.datetime:
        return self.resolved.evaluation_time

    @property
    def identity(self) -> str:
        return self.resolved.identity

    @property
    def files(self) -> dict[str, Path]:
        return self.resolved.files

    @property
    def artifact_hashes(self) -> dict[str, str]:
        return self.resolved.artifact_hashes

    @property
    def dataset_pin(self) -> DatasetPin:
        return self.resolved.dataset_pin

    def load_protocol(self) -> Protocol:
        return self.resolved.load_protocol()

    def identity_record(self) -> dict[str, Any]:
        return self.resolved.identity_record()

    def describe(self) -> str:
        return self.resolved.describe()

    def as_record(self) -> dict[str, Any]:
        return self.resolved.as_record()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, RunSpec):
            return NotImplemented
        return self.identity == other.identity

    def __hash__(self) -> int:
        return hash(self.identity)


@dataclass(frozen=True)
class ResolvedSpec:
    """A spec with its protocol files read and checked and its overrides applied (:func:`resolve`)."""

    spec: RunSpec
    protocol: Protocol  # as read: the config still holds the file's own parameters and clock
    variant: Variant
    params: PolicyParams
    evaluation_time: _dt.datetime
    identity: str

    @property
    def files(self) -> dict[str, Path]:
        """The protocol files this spec reads, defaults included."""
        paths = self.protocol.files
        return {name: getattr(paths, name) for name in FILE_KEYS}

    @property
    def artifact_hashes(self) -> dict[str, str]:
        """SHA-256 of each protocol file: ``{config_sha256, ..., answer_prompt_sha256}``."""
        return self.protocol.artifact_hashes()

    @property
    def dataset_pin(self) -> DatasetPin:
        """The dataset the spec's config pins (repository, revision, filename, SHA-256)."""
        return self.protocol.config.dataset

    def load_protocol(self) -> Protocol:
        """The protocol with this spec's parameters and clock in its config.

        Pools, policy evaluation and QA tasks read ``config.hybrid`` and
        ``config.evaluation_time``, so handing them this protocol applies the spec. The file
        hashes still identify the files as read; :attr:`identity` identifies the whole spec.
        """
        config = replace(self.protocol.config, hybrid=self.params, evaluation_time=self.evaluation_time)
        return replace(self.protocol, config=config)

    def identity_record(self) -> dict[str, Any]:
        """The resolved values that :attr:`identity` hashes."""
        return _identity_record(self.artifact_hashes, self.variant, self.params, self.evaluation_time)

    def describe(self) -> str:
        """One line for people: label, variant, parameters, clock and a short identity."""
        p = self.params
        variant = "/".join(self.variant.as_dict().values())
        return (
            f"{self.spec.label} [{variant}; weights {p.confidence_weight:g}/{p.confirmation_weight:g}"
            f"/{p.access_weight:g}, half-lives {p.confirmation_half_life_days:g}/"
            f"{p.access_half_life_days:g} d, reserve {p.correction_reserved_fraction:g}"
            f" max {p.correction_reserved_max}; clock {iso_z(self.evaluation_time)};"
            f" identity {self.identity[:12]}]"
        )

    def as_record(self) -> dict[str, Any]:
        """The spec for run files: label, preset, overrides, resolved values, files and identity."""
        return {
            "label": self.spec.label,
            "description": self.describe(),
            "preset": self.spec.preset,
            "overrides": {key: _json_value(value) for key, value in self.spec.settings.items()},
            "files": {name: str(path) for name, path in self.files.items()},
            **self.identity_record(),
            "identity": self.identity,
        }


def resolve(spec: RunSpec) -> ResolvedSpec:
    """Read and check ``spec``'s protocol files, apply its overrides and validate the parameters.

    A function of the spec and the files' contents alone; errors name the spec (or its file)
    and the offending file or key. :attr:`RunSpec.resolved` keeps the result.
    """
    settings = spec.settings
    protocol = load_protocol(**{key: settings[key] for key in FILE_KEYS if key in settings})
    variant = replace(PRESETS[spec.preset], **{k: settings[k] for k in VARIANT_KEYS if k in settings})
    try:
        params = protocol.config.hybrid.replace(**{k: settings[k] for k in PARAM_KEYS if k in settings})
    except ContractError as error:
        raise ContractError(f"{spec.where}: {error}") from None
    clock = settings.get(CLOCK_KEY, protocol.evaluation_time)
    record = _identity_record(protocol.artifact_hashes(), variant, params, clock)
    identity = sha256_bytes(canonical_json(record).encode("utf-8"))
    return ResolvedSpec(spec, protocol, variant, params, clock, identity)


def _identity_record(
    artifacts: dict[str, str], variant: Variant, params: PolicyParams, clock: _dt.datetime
) -> dict[str, Any]:
    return {
        "schema": IDENTITY_SCHEMA,
        "artifacts": artifacts,
        "variant": variant.as_dict(),
        "policy_parameters": canonical_params(params),
        "evaluation_time": iso_z(clock),
    }


# --------------------------------------------------------------------------- parsing


def parse_spec(text: str) -> RunSpec:
    """A spec from ``PRESET[:KEY=VALUE,...]`` or ``FILE.yaml[:KEY=VALUE,...]``.

    Errors name the spec text (or file) and the offending key and value.
    """
    if not isinstance(text, str) or not text.strip():
        raise ContractError(f"empty spec; expected a preset ({', '.join(PRESETS)}) or a YAML spec file")
    text = text.strip()
    base, sep, rest = text.partition(":")
    base = base.strip()
    overrides: list[tuple[str, Any]] = []
    if sep:
        for item in rest.split(","):
            key, eq, value = item.partition("=")
            key, value = key.strip(), value.strip()
            if not eq or not key:
                raise ContractError(f"{_where(text)}: expected KEY=VALUE, got {item.strip()!r}")
            _check_key(key, _where(text))
            overrides.append((key, value))
    if base in PRESETS:
        spec = RunSpec(base, tuple(overrides), text)
    elif _looks_like_file(base):
        written = _read_spec_file(Path(base))
        spec = RunSpec(written.preset, written.overrides + tuple(overrides), text, written.dataset,
                       written.allow_unpinned)
    else:
        raise ContractError(
            f"{_where(text)}: unknown preset {base!r}; known presets: {', '.join(PRESETS)}"
            f" (or give the path of a {'/'.join(SPEC_FILE_SUFFIXES)} spec file)"
        )
    spec.resolved  # noqa: B018 - an invalid spec fails here, naming the text
    return spec


def load_spec_file(path: str | Path) -> RunSpec:
    """A spec from a YAML mapping with an optional ``preset`` and any spec keys, resolved."""
    spec = _read_spec_file(Path(path))
    spec.resolved  # noqa: B018 - an invalid spec fails here, naming the file
    return spec


def _read_spec_file(path: Path) -> RunSpec:
    data = parse_yaml(read_bounded(path, MAX_PROTOCOL_FILE_BYTES, what="spec file"), where=str(path))
    if not isinstance(data, Mapping):
        raise ContractError(f"{path}: a spec file must be a mapping of spec keys, got {type(data).__name__}")
    preset = data.get("preset", DEFAULT_PRESET)
    if not isinstance(preset, str):
        raise ContractError(f"{path}: preset must be a preset name, got {preset!r}")
    overrides = []
    for key, value in data.items():
        if key == "preset":
            continue
        _check_key(key, str(path))
        if key in PATH_KEYS and isinstance(value, str) and value.strip():
            value = path.parent / value.strip()  # relative to the spec file, not the working folder
        overrides.append((key, value))
    return RunSpec(preset, tuple(overrides), str(path))


def _where(origin: str) -> str:
    """How messages name a spec: a spec file by its path, anything else as quoted SPEC text."""
    return origin if ":" not in origin and _looks_like_file(origin) else f"spec {origin!r}"


def _looks_like_file(text: str) -> bool:
    return text.lower().endswith(SPEC_FILE_SUFFIXES)


def _check_key(key: Any, where: str) -> None:
    if key not in SPEC_KEYS:
        raise ContractError(f"{where}: unknown spec key {key!r}; known keys: {', '.join(SPEC_KEYS)}")


def coerce_value(key: str, value: Any, *, where: str = "spec") -> Any:
    """``value`` for ``key`` with its type checked (strings from a SPEC text are parsed).

    File keys and ``dataset`` give a :class:`Path`, variant keys one of their allowed strings,
    integer parameters an ``int``, the other parameters a finite ``float``, the clock an aware
    UTC datetime (a time without a zone is refused, spec 0.5), ``allow_unpinned`` a ``bool``.
    """
    _check_key(key, where)

    def bad(expected: str) -> ContractError:
        return ContractError(f"{where}: {key} must be {expected}, got {value!r}")

    if key == "allow_unpinned":
        flags = {"true": True, "false": False}
        if isinstance(value, str) and value.strip().lower() in flags:
            return flags[value.strip().lower()]
        if not isinstance(value, bool):
            raise bad("true or false")
        return value
    if key in PATH_KEYS:
        if isinstance(value, Path):
            return value
        if isinstance(value, str) and value.strip():
            return Path(value.strip())
        raise bad("a file path")
    if key in VARIANT_KEYS:
        allowed = VARIANT_VALUES[key]
        if value not in allowed:
            raise bad("one of " + ", ".join(allowed))
        return value
    if key in INTEGER_PARAM_KEYS:
        if isinstance(value, str):
            try:
                return int(value.strip())
            except ValueError:
                raise bad("an integer") from None
        if isinstance(value, bool) or not isinstance(value, int):
            raise bad("an integer")
        return value
    if key in PARAM_KEYS:
        if isinstance(value, str):
            try:
                number = float(value.strip())
            except ValueError:
                raise bad("a number") from None
        elif isinstance(value, bool) or not isinstance(value, (int, float)):
            raise bad("a number")
        else:
            try:
                number = float(value)
            except OverflowError:  # an integer beyond any float
                raise bad("a finite number") from None
        if not math.isfinite(number):
            raise bad("a finite number")
        return number
    return _coerce_clock(value, bad)


def _coerce_clock(value: Any, bad: Any) -> _dt.datetime:
    # Spec 0.5: every protocol clock is timezone-aware. A time without a zone (or a bare date)
    # would be read differently by different hosts, so it is refused rather than guessed.
    aware = "a timezone-aware ISO-8601 time such as 2026-08-13T00:00:00Z"
    if isinstance(value, str):
        if (parsed := read_iso(value)) is None:
            raise bad(aware)
        value = parsed
    if not isinstance(value, _dt.datetime) or value.tzinfo is None:
        raise bad(aware)
    try:
        return as_utc(value)
    except OverflowError:
        raise bad("a time within the years 1-9999 in UTC") from None


# --------------------------------------------------------------------------- canonical form


def canonical_params(params: PolicyParams) -> dict[str, Any]:
    """Parameters with one type per field, so ``90`` and ``90.0`` hash alike."""
    return {
        name: (int(value) if name in INTEGER_PARAM_KEYS else float(value))
        for name, value in params.as_dict().items()
    }


def canonical_json(value: Any) -> str:
    """Sorted keys, no whitespace, raw non-ASCII: the bytes an identity hash is taken of."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _json_value(value: Any) -> Any:
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, _dt.datetime):
        return iso_z(value)
    return value


def _format_value(value: Any) -> str:
    value = _json_value(value)
    return f"{value:g}" if isinstance(value, float) else str(value)


# --------------------------------------------------------------------------- pools


def check_same_dataset(specs: Iterable[RunSpec]) -> DatasetPin:
    """The dataset pin all ``specs`` share; a :class:`ContractError` if their configs disagree."""
    specs = list(specs)
    pins = {spec.dataset_pin.sha256 for spec in specs}
    if len(pins) > 1:
        listed = "; ".join(
            f"{spec.label} pins {spec.dataset_pin.sha256} ({spec.files['config']})" for spec in specs
        )
        raise ContractError(
            f"the specs use different datasets: {listed}; a comparison needs one dataset"
        )
    return specs[0].dataset_pin
