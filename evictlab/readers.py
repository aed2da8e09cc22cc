"""Bounded, strict readers for every input file: sizes, JSON and YAML.

Every file evictlab reads goes through :func:`read_bounded`, which refuses a file over its
kind's size limit before reading more than the limit (so ``/dev/zero`` or a 2 GB file fails
at once instead of filling memory). :func:`parse_json` and :func:`parse_yaml` are strict:
duplicate keys, nesting deeper than :data:`MAX_DEPTH`, integers longer than Python converts,
``NaN``/``Infinity``, strings holding a lone surrogate (not Unicode text) and YAML whose
aliases would expand to more than :data:`MAX_YAML_NODES` nodes are errors that name the file
and say why. Errors are raised as the caller's error type, so a dataset problem stays a
:class:`~evictlab.errors.DatasetError`.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from .errors import ContractError

MIB = 1 << 20
#: Protocol files (config, manifests, answer prompt), run specs and run markers.
MAX_PROTOCOL_FILE_BYTES = 4 * MIB
#: A run record (``{kind}.run.json``): a sweep's lists every part it wrote, a few MB at most.
MAX_RECORD_BYTES = 64 * MIB
#: A dataset file: the LongMemEval oracle file is about 15 MB.
MAX_DATASET_BYTES = 256 * MIB
#: A graded-rows JSONL file, and one line of it.
MAX_ROWS_FILE_BYTES = 256 * MIB
MAX_ROW_LINE_BYTES = 4 * MIB
#: A trace file (:mod:`evictlab.analysis.traces.schema`). Traces are streamed, so this bounds the disk
#: read, not memory: 1,000,000 events take about 17 MB as Parquet and 150 MB as JSONL.
MAX_TRACE_BYTES = 4096 * MIB
#: One row group of a Parquet trace, uncompressed: the unit a streamed read holds at once.
MAX_TRACE_ROW_GROUP_BYTES = 256 * MIB
#: A provider's response body, and a stored response row (which holds at most its content).
MAX_RESPONSE_BYTES = 8 * MIB
#: Nesting depth of any JSON or YAML document (the deepest real input has about 6 levels).
MAX_DEPTH = 64
#: Nodes of a YAML document after alias expansion (protocol files have a few hundred).
MAX_YAML_NODES = 100_000

_MAX_INTEGER_BITS = 14_000  # about 4,200 decimal digits, under Python's conversion limit
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE_ESCAPE_BYTES = re.compile(rb"\\u[dD][89a-fA-F]")


class _Refused(ValueError):
    """A strictness rule broken inside a parser hook; the message says which."""


def read_bounded(
    path: str | os.PathLike, limit: int, *, what: str = "file", error: type[Exception] = ContractError
) -> bytes:
    """The bytes of ``path``, or ``error`` when it cannot be read or exceeds ``limit`` bytes."""
    path = Path(path)
    try:
        with open(path, "rb") as handle:
            info = os.fstat(handle.fileno())
            if stat.S_ISREG(info.st_mode) and info.st_size > limit:
                raise error(_too_large(path, what, limit, f"{info.st_size} bytes"))
            data = handle.read(limit + 1)
    except OSError as problem:
        raise error(f"{path}: cannot read {what} ({problem.strerror or problem})") from None
    if len(data) > limit:
        raise error(_too_large(path, what, limit, "larger"))
    return data


def check_size(
    path: str | os.PathLike, limit: int, *, what: str = "file", error: type[Exception] = ContractError
) -> None:
    """Refuse a regular file over ``limit`` bytes, for readers that stream it."""
    try:
        info = os.stat(path)
    except OSError as problem:
        raise error(f"{path}: cannot read {what} ({problem.strerror or problem})") from None
    if stat.S_ISREG(info.st_mode) and info.st_size > limit:
        raise error(_too_large(Path(path), what, limit, f"{info.st_size} bytes"))


def bounded_lines(
    handle: Any, source: str | os.PathLike, *, line_limit: int = MAX_ROW_LINE_BYTES,
    file_limit: int = MAX_ROWS_FILE_BYTES, error: type[Exception] = ContractError,
) -> Iterator[bytes]:
    """The lines of a file opened in binary mode, without their b"\\n"; a line or file over its
    limit is ``error``. Lines end at b"\\n" only: str.splitlines() would also break at U+2028
    inside JSON strings."""
    total = 0
    while line := handle.readline(line_limit + 1):
        total += len(line)
        if len(line) > line_limit or total > file_limit:
            limit = line_limit if len(line) > line_limit else file_limit
            raise error(f"{source}: a line or the file is over evictlab's limit of {limit} bytes")
        yield line.removesuffix(b"\n")


def _too_large(path: Path, what: str, limit: int, size: str) -> str:
    return f"{path}: {what} is {size}, over evictlab's limit of {limit} bytes ({limit // MIB} MiB)"


# --------------------------------------------------------------------------- JSON


class JSONRefused(ValueError):
    """A document :func:`decode_json` refuses; the message says why, without the file name."""


def decode_json(data: bytes | str, *, max_depth: int = MAX_DEPTH, check_strings: bool = True) -> Any:
    """Parse one JSON document strictly or raise :class:`JSONRefused` (see the module docstring).

    ``check_strings=False`` leaves lone surrogates to the caller (a dataset checks only the
    strings it uses, so that an odd turn in a row nobody selects does not refuse the file).
    """
    try:
        value = json.loads(data, object_pairs_hook=_unique_object, parse_constant=_refuse_constant)
    except _Refused as problem:
        raise JSONRefused(f"not valid JSON ({problem})") from None
    except RecursionError:
        raise JSONRefused(f"not valid JSON (nested more than {max_depth} levels deep)") from None
    except json.JSONDecodeError as problem:
        raise JSONRefused(f"not valid JSON ({problem.msg}: line {problem.lineno} column {problem.colno})") from None
    except UnicodeDecodeError as problem:
        raise JSONRefused(f"not UTF-8 text ({problem.reason} at byte {problem.start})") from None
    except ValueError as problem:  # an integer longer than Python converts
        raise JSONRefused(f"not valid JSON ({_short_reason(problem)})") from None
    if not check_strings:
        escaped = False
    elif isinstance(data, bytes):
        escaped = _SURROGATE_ESCAPE_BYTES.search(data) is not None
    else:
        escaped = _SURROGATE_ESCAPE.search(data) is not None
    found = structure_problem(value, max_depth, strings=escaped)
    if found:
        raise JSONRefused(found)
    return value


def parse_json(
    data: bytes | str, *, where: str, error: type[Exception] = ContractError, max_depth: int = MAX_DEPTH,
    check_strings: bool = True,
) -> Any:
    """:func:`decode_json`, raising ``error`` whose message starts with ``where`` (a file, maybe a line)."""
    try:
        return decode_json(data, max_depth=max_depth, check_strings=check_strings)
    except JSONRefused as problem:
        raise error(f"{where}: {problem}") from None


def repeated_keys(pairs: list[tuple[str, Any]]) -> list[str]:
    """The keys of a JSON object's ``pairs`` that repeat an earlier one, in order (printable)."""
    seen: set[str] = set()
    repeated = []
    for key, _ in pairs:
        if key in seen:
            repeated.append(printable(key))
        seen.add(key)
    return repeated


def _unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    document = dict(pairs)
    if len(document) != len(pairs):
        raise _Refused(f"duplicate key {repeated_keys(pairs)[0]!r}")
    return document


def _refuse_constant(name: str) -> Any:
    raise _Refused(f"{name} is not a JSON number")


def _short_reason(problem: ValueError) -> str:
    text = str(problem)
    if "integer string conversion" in text:
        return "an integer has more digits than evictlab reads (4300)"
    return text.split(";")[0]


def structure_problem(value: Any, max_depth: int = MAX_DEPTH, *, strings: bool = True) -> str | None:
    """Why ``value`` (parsed JSON or YAML) is refused: too deep, or a string that is not text.

    ``strings=False`` skips the string check (for input that cannot hold a lone surrogate).
    """
    found = _scalar_problem(value, strings)
    if found:
        return f"<root>: {found}"
    stack: list[tuple[Any, str, int]] = [(value, "", 0)] if isinstance(value, (dict, list)) else []
    while stack:
        item, path, depth = stack.pop()
        if depth >= max_depth:
            return f"{path or '<root>'}: nested more than {max_depth} levels deep"
        in_list = isinstance(item, list)
        for key, child in enumerate(item) if in_list else item.items():
            if strings and not in_list and isinstance(key, str) and not is_text(key):
                return f"{path or '<root>'}: a key holds a lone surrogate (not Unicode text)"
            # Only containers are visited later (with their path); other values are checked here.
            if isinstance(child, (dict, list)):
                stack.append((child, _child_path(path, key, in_list), depth + 1))
            elif isinstance(child, (str, int)) and (found := _scalar_problem(child, strings)):
                return f"{_child_path(path, key, in_list)}: {found}"
    return None


def _scalar_problem(value: Any, strings: bool) -> str | None:
    if isinstance(value, str):
        return "a string holds a lone surrogate (not Unicode text)" if strings and not is_text(value) else None
    if isinstance(value, int) and value.bit_length() > _MAX_INTEGER_BITS:
        # YAML's hexadecimal or octal integers convert without Python's digit limit, but
        # no message could then print them.
        return "an integer has more digits than evictlab reads (4300)"
    return None


def _child_path(path: str, key: Any, in_list: bool) -> str:
    if in_list:
        return f"{path}[{key}]"
    return f"{path}.{printable(key)}" if path else printable(key)


def is_text(text: str) -> bool:
    """Whether ``text`` is Unicode text (encodes as UTF-8: no lone surrogate)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def printable(key: Any) -> str:
    """``str(key)`` as Unicode text: a lone surrogate (a non-UTF-8 byte of a file name or an
    argument) written as its escape, e.g. ``\\udcff``."""
    return str(key).encode("utf-8", "backslashreplace").decode("utf-8")


# --------------------------------------------------------------------------- YAML


# libyaml's parser where PyYAML has it (about 10x faster: a store's 500 front matters), with
# the same safe constructor and resolver; the pure-Python one otherwise.
_SafeBase: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _StrictLoader(_SafeBase):
    """PyYAML's safe loader, refusing duplicate mapping keys (or, with ``repeated`` a list, taking
    the last value as PyYAML does and naming the key there)."""

    repeated: list[str] | None = None

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen = set()
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # "<<" merges are allowed to repeat keys that they provide
            key = self.construct_object(key_node, deep=True)
            try:
                duplicate = key in seen
            except TypeError:
                continue  # an unhashable key; the base constructor reports it
            if duplicate and self.repeated is not None:
                self.repeated.append(printable(key))
            elif duplicate:
                raise yaml.constructor.ConstructorError(
                    "while constructing a mapping", node.start_mark,
                    f"found duplicate key {printable(key)!r}", key_node.start_mark,
                )  # fmt: skip
            seen.add(key)
        return super().construct_mapping(node, deep=deep)


def parse_yaml(
    data: bytes | str, *, where: str, error: type[Exception] = ContractError, max_nodes: int = MAX_YAML_NODES,
    max_depth: int = MAX_DEPTH, repeated: list[str] | None = None,
) -> Any:
    """Parse one YAML document safely: no tags beyond YAML's own, aliases bounded, keys unique.

    ``repeated``, a list, allows a key repeated in a mapping as PyYAML's ``safe_load`` does (the
    last value wins) and collects those keys (for files another program reads that way).
    """
    loader = _StrictLoader(data)
    loader.repeated = repeated
    loader.name = where  # error marks then name the file instead of "<byte string>"
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        nodes = _expanded_nodes(node, max_nodes)
        if nodes > max_nodes:
            raise error(
                f"{where}: refused: its aliases expand to more than {max_nodes} nodes"
                " (a YAML alias bomb?)"
            )
        value = loader.construct_document(node)
    except yaml.YAMLError as problem:
        raise error(f"{where}: not valid YAML ({_yaml_reason(problem)})") from None
    except RecursionError:
        raise error(f"{where}: not valid YAML (nested too deeply)") from None
    except ValueError as problem:  # a scalar PyYAML cannot convert: a huge integer, 2026-13-45
        raise error(f"{where}: not valid YAML ({_short_reason(problem)})") from None
    finally:
        loader.dispose()
    found = structure_problem(value, max_depth)
    if found:
        raise error(f"{where}: {found}")
    return value


def _yaml_reason(problem: yaml.YAMLError) -> str:
    # One line: PyYAML's own message spans several and quotes the offending line.
    if not isinstance(problem, yaml.MarkedYAMLError):
        return str(problem).splitlines()[0]
    text = problem.problem or problem.context or "invalid"
    mark = problem.problem_mark or problem.context_mark
    return f"{text}, line {mark.line + 1} column {mark.column + 1}" if mark else text


def _expanded_nodes(root: yaml.Node, limit: int) -> int:
    """The node count of ``root`` with every alias expanded, counting stops past ``limit``."""
    sizes: dict[int, int] = {}

    def size(node: yaml.Node) -> int:
        known = sizes.get(id(node))
        if known is not None:
            return known
        sizes[id(node)] = limit + 1  # a node that contains itself expands without end
        total = 1
        if isinstance(node, yaml.MappingNode):
            children: Iterator[yaml.Node] = (child for pair in node.value for child in pair)
        elif isinstance(node, yaml.SequenceNode):
            children = iter(node.value)
        else:
            children = iter(())
        for child in children:
            total += size(child)
            if total > limit:
                break
        sizes[id(node)] = total
        return total

    return size(root)
