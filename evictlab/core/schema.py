"""Strict readers for protocol files: every error names the file and the key path.

A :class:`Section` wraps one mapping read from a file. Its typed getters reject wrong types
(booleans are never numbers), and :meth:`Section.expect_keys` rejects unknown and missing keys,
so a typo in a protocol file fails loudly instead of silently falling back to a default.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from ..errors import ContractError

HEX40 = re.compile(r"[0-9a-f]{40}")
HEX64 = re.compile(r"[0-9a-f]{64}")


class Section:
    def __init__(self, data: Any, *, file: str, path: str = "") -> None:
        self.file = file
        self.path = path
        if not isinstance(data, Mapping):
            raise self.error(f"must be a mapping, got {type(data).__name__}")
        self.data = data

    def where(self, key: str | None = None) -> str:
        parts = [p for p in (self.path, key) if p]
        return ".".join(parts) if parts else "<root>"

    def error(self, message: str, key: str | None = None) -> ContractError:
        return ContractError(f"{self.file}: {self.where(key)}: {message}")

    def expect_keys(self, required: set[str] | list[str], optional: set[str] | frozenset[str] = frozenset()) -> None:
        keys = set(self.data)
        unknown = sorted(keys - set(required) - set(optional))
        missing = sorted(set(required) - keys)
        if unknown:
            raise self.error(f"unknown key(s) {', '.join(map(str, unknown))}")
        if missing:
            raise self.error(f"missing key(s) {', '.join(missing)}")

    def raw(self, key: str) -> Any:
        if key not in self.data:
            raise self.error("missing", key)
        return self.data[key]

    def section(self, key: str) -> Section:
        return Section(self.raw(key), file=self.file, path=self.where(key))

    def string(self, key: str, *, pattern: re.Pattern[str] | None = None) -> str:
        value = self.raw(key)
        if not isinstance(value, str) or not value.strip():
            raise self.error(f"must be a non-empty string, got {value!r}", key)
        if pattern is not None and not pattern.fullmatch(value):
            raise self.error(f"must match {pattern.pattern}, got {value!r}", key)
        return value

    def literal(self, key: str, expected: Any) -> Any:
        value = self.raw(key)
        if type(value) is not type(expected) or value != expected:
            raise self.error(f"must be {expected!r}, got {value!r}", key)
        return value

    def integer(self, key: str, low: int | None = None, high: int | None = None) -> int:
        value = self.raw(key)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.error(f"must be an integer, got {value!r}", key)
        _check_range(self, key, value, low, high)
        return value

    def number(self, key: str, low: float | None = None, high: float | None = None) -> float:
        value = self.raw(key)
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise self.error(f"must be a finite number, got {value!r}", key)
        _check_range(self, key, value, low, high)
        return float(value)

    def boolean(self, key: str) -> bool:
        value = self.raw(key)
        if not isinstance(value, bool):
            raise self.error(f"must be true or false, got {value!r}", key)
        return value

    def string_list(self, key: str, *, unique: bool = True, non_empty: bool = True) -> tuple[str, ...]:
        value = self.raw(key)
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise self.error(f"must be a list of non-empty strings, got {value!r}", key)
        return _checked_list(self, key, value, unique, non_empty)

    def integer_list(self, key: str, low: int, high: int, *, unique: bool = True) -> tuple[int, ...]:
        value = self.raw(key)
        if not isinstance(value, list) or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in value
        ):
            raise self.error(f"must be a list of integers, got {value!r}", key)
        for item in value:
            if not low <= item <= high:
                raise self.error(f"values must be in [{low}, {high}], got {item!r}", key)
        return _checked_list(self, key, value, unique, True)


def _check_range(section: Section, key: str, value: float, low: float | None, high: float | None) -> None:
    if (low is not None and value < low) or (high is not None and value > high):
        raise section.error(f"must be in [{low}, {high}], got {value!r}", key)


def _checked_list(section: Section, key: str, value: list, unique: bool, non_empty: bool) -> tuple:
    if non_empty and not value:
        raise section.error("must not be empty", key)
    if unique and len(set(value)) != len(value):
        raise section.error(f"must not repeat values, got {value!r}", key)
    return tuple(value)
