"""Options and loaders shared by the commands that read a protocol, a dataset or pools."""

from __future__ import annotations

import argparse
import itertools
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ..analysis.qa.stats import MAX_BOOTSTRAP_ITERATIONS, check_bootstrap_work
from ..core.dataset import Dataset
from ..core.demo import DEMO_PIN, open_dataset
from ..core.pools import PoolSet, open_pools
from ..core.protocol import (
    DEFAULT_PRESET,
    MAX_TIMEOUT_SECONDS,
    PRESETS,
    VARIANT_VALUES,
    Protocol,
    load_protocol,
    parse_assignment,
    resolve_variant,
)
from ..core.runspec import FILE_KEYS, PARAM_KEYS, RunSpec, coerce_value
from ..errors import ContractError
from ..policies import resolve_policy, split_list
from . import summary


def add_protocol_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "protocol files",
        "evictlab's own files under data/protocol/ by default; DeerFlow's own files are read unchanged",
    )
    group.add_argument("--config", metavar="PATH", help="protocol config YAML")
    group.add_argument("--official-manifest", metavar="PATH", help="official LongMemEval case manifest JSON")
    group.add_argument("--synthetic-manifest", metavar="PATH", help="synthetic correction manifest JSON")
    group.add_argument(
        "--answer-prompt",
        metavar="PATH",
        help="answer prompt file (default: the config's qa.answer_prompt.path, relative to the"
        " parent of the config's folder)",
    )


def add_dataset_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("dataset")
    group.add_argument(
        "--dataset",
        metavar="PATH",
        help="LongMemEval oracle JSON file, or an 'evictlab import deermem' folder (its buckets are the cases;"
        " run-policy, explain) (default: the embedded demo dataset)",
    )
    group.add_argument("--allow-unpinned", action="store_true",
                       help="accept a dataset whose SHA-256 is not the pinned one (warns; recorded as pinned: false)")


def add_variant_options(parser: argparse.ArgumentParser) -> None:
    keys = "; ".join(f"{key}={'|'.join(values)}" for key, values in VARIANT_VALUES.items())
    group = parser.add_argument_group("protocol variant")
    group.add_argument("--preset", choices=sorted(PRESETS), default=None,
                       help=f"named combination of variant settings (default: {DEFAULT_PRESET})")
    group.add_argument("--variant", action="append", default=[], metavar="KEY=VALUE",
                       help=f"override one variant setting, repeatable, applied after --preset ({keys})")


def add_pool_options(parser: argparse.ArgumentParser) -> None:
    """Everything needed to build pools: protocol files, dataset and variant."""
    add_dataset_options(parser)
    add_variant_options(parser)
    add_protocol_options(parser)


def protocol_from(args: argparse.Namespace) -> Protocol:
    return load_protocol(
        config=args.config,
        official_manifest=args.official_manifest,
        synthetic_manifest=args.synthetic_manifest,
        answer_prompt=args.answer_prompt,
    )


def dataset_from(args: argparse.Namespace, protocol: Protocol) -> tuple[Protocol, Dataset]:
    """Load ``--dataset``, or the embedded demo (with its own manifest) when none is given."""
    protocol, dataset = open_dataset(
        protocol,
        args.dataset,
        allow_unpinned=args.allow_unpinned,
        keep_official_manifest=args.official_manifest is not None,
    )
    report_dataset(dataset, protocol)
    return protocol, dataset


DEMO_NOTICE = "using the embedded demo dataset (data/demo/); pass --dataset for LongMemEval"


def report_dataset(dataset: Dataset, protocol: Protocol) -> None:
    """One line on stderr naming the demo, or a warning for an unpinned file."""
    if dataset.pin == DEMO_PIN:
        print(DEMO_NOTICE, file=sys.stderr)
    elif not dataset.pinned:
        print(
            f"warning: {dataset.path} has SHA-256 {dataset.sha256}, not the pinned"
            f" {protocol.config.dataset.sha256}; continuing because of --allow-unpinned"
            " (recorded as \"pinned\": false)",
            file=sys.stderr,
        )


def spec_from(args: argparse.Namespace, preset: str | None = None) -> RunSpec:
    """The :class:`~evictlab.runspec.RunSpec` of the pool options: preset (``preset``, else
    ``--preset``), variant overrides, protocol files and dataset (``--variant`` checked first,
    with its own messages)."""
    preset = preset or preset_name(args)
    variant = resolve_variant(preset, args.variant)
    files = [(key, getattr(args, key)) for key in FILE_KEYS if getattr(args, key, None) is not None]
    overrides = (*files, *((key, value) for key, value in variant.as_dict().items()))
    dataset = None if args.dataset is None else Path(args.dataset)
    return RunSpec(preset, tuple(overrides), "", dataset, bool(args.allow_unpinned))


def pool_set_from(args: argparse.Namespace) -> PoolSet:
    """The pools of the command's options, through :func:`evictlab.core.pools.open_pools`."""
    return open_pools(spec_from(args), notice=report_dataset)


def preset_name(args: argparse.Namespace) -> str:
    return args.preset or DEFAULT_PRESET


def parse_csv(text: str, kind: Callable[[str], Any] = str) -> list:
    """``"5,7,9"`` -> ``[5, 7, 9]`` (with ``kind=int``); blank items are ignored.

    Commas inside parentheses do not split (:func:`~evictlab.policies.split_list`), so a list
    of policies may hold ``lru+reserve(correction,0.1,10)``.
    """
    try:
        return [kind(item) for item in split_list(text)]
    except ContractError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    except ValueError:
        name = getattr(kind, "__name__", "value")
        raise argparse.ArgumentTypeError(f"expected a comma-separated list of {name}, got {text!r}") from None


def add_command(subparsers: argparse._SubParsersAction, name: str, *, raw: bool = False, **options: Any):
    """The parser of the top-level command ``name``, with its one-line help from the index
    (``raw``: the description's own line breaks are kept)."""
    if raw:
        options["formatter_class"] = argparse.RawDescriptionHelpFormatter
    return subparsers.add_parser(name, help=summary(name), **options)


def command_group(
    subparsers: argparse._SubParsersAction, name: str, description: str, metavar: str = "SUBCOMMAND"
) -> argparse._SubParsersAction:
    """The subcommands of a command group ``evictlab NAME``, which alone prints its help."""
    epilog = f"Run 'evictlab {name} {metavar} --help' for the options of one subcommand."
    group = subparsers.add_parser(name, help=summary(name), description=description,
                                  epilog=epilog if metavar == "SUBCOMMAND" else None)  # fmt: skip
    group.set_defaults(handler=lambda args: group.print_help() or 0)
    return group.add_subparsers(dest=f"{name}_command", metavar=metavar)


def non_negative_float(text: str) -> float:
    """argparse type: a finite number >= 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 0.0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a finite number >= 0, got {text!r}")
    return value


def timeout_seconds(text: str) -> float:
    """argparse type: a number of seconds > 0 and at most :data:`~evictlab.core.protocol.MAX_TIMEOUT_SECONDS`."""
    value = non_negative_float(text)
    if not 0 < value <= MAX_TIMEOUT_SECONDS:
        raise argparse.ArgumentTypeError(f"expected seconds > 0 and at most {MAX_TIMEOUT_SECONDS:g}, got {text!r}")
    return value


def positive_int(text: str) -> int:
    """argparse type: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {value}")
    return value


def add_bootstrap_limit_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--max-bootstrap-iterations", type=positive_int, default=MAX_BOOTSTRAP_ITERATIONS, metavar="N",
        help="refuse more bootstrap iterations than N (default: %(default)s)",
    )  # fmt: skip


def check_config_bootstrap(protocol: Protocol, limit: int) -> None:
    """The config's bootstrap iterations must be within ``limit`` (--max-bootstrap-iterations)."""
    check_bootstrap_work(
        protocol.config.statistics.bootstrap_iterations, limit,
        where=f"{protocol.files.config}: statistics.bootstrap_iterations",
    )  # fmt: skip


POLICY_HELP = (
    "a policy spec: a registered name, optionally with parameters and modifiers, e.g. lru,"
    " lfu-aging(half_life_days=7), lru+reserve(correction,0.1,10), confidence+mmr(0.5)"
)


def add_param_option(parser: argparse.ArgumentParser, *, protocol: bool = True) -> None:
    """``--param``: a hybrid-v1 parameter of the config (``NAME=VALUE``, when ``protocol``) or a
    policy's declared parameter (``POLICY.NAME=VALUE[,VALUE...]``, one run per value)."""
    hybrid = "a hybrid-v1 parameter of the config, e.g. confidence_weight=0.5, or " if protocol else ""
    parser.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="NAME=VALUE" if protocol else "POLICY.NAME=V,V",
        help=f"set {hybrid}a policy's own parameter, one run per value, e.g. lfu-aging.half_life_days=7,30"
        " (repeatable)",
    )


def parameter_changes(assignments: list[str]) -> dict[str, Any]:
    """``--param NAME=VALUE`` overrides of the config's hybrid-v1 parameters, names and types checked.

    ``POLICY.NAME=...`` assignments are a policy's own parameters (:func:`with_policy_parameters`).
    """
    changes = {}
    for text in assignments:
        key, value = parse_assignment(text)
        if "." in key:
            continue
        if key not in PARAM_KEYS:
            raise ContractError(f"--param {text}: unknown parameter {key!r}; known: {', '.join(PARAM_KEYS)}")
        changes[key] = coerce_value(key, value, where=f"--param {text}")
    return changes


def with_policy_parameters(policies: Sequence[str], assignments: Sequence[str]) -> list[str]:
    """``policies`` with the ``--param POLICY.NAME=V[,V...]`` assignments applied.

    A policy named there becomes one spec per combination of its values, ``POLICY(NAME=V,...)``
    followed by its modifiers, in the order given; every spec is checked
    (:func:`~evictlab.policies.resolve_policy`) before anything runs.
    """
    values: dict[str, dict[str, list[str]]] = {}
    for text in assignments:
        key, value = parse_assignment(text)
        policy, dot, name = key.partition(".")
        if not dot:
            continue
        items = split_list(value)
        if not policy or not name or not items:
            raise ContractError(f"--param {text}: expected POLICY.NAME=VALUE[,VALUE...]")
        if name in values.setdefault(policy, {}):
            raise ContractError(f"--param {text}: {key} is given twice")
        values[policy][name] = items
    specs = []
    bases = []
    for spec in policies:
        base, *modifiers = split_list(spec, "+")
        bases.append(base)
        assigned = values.get(base)
        if not assigned:
            specs.append(spec)
            continue
        for combination in itertools.product(*assigned.values()):
            inner = ",".join(f"{name}={value}" for name, value in zip(assigned, combination))
            specs.append("+".join([f"{base}({inner})", *modifiers]))
    unused = [policy for policy in values if policy not in bases]
    if unused:
        raise ContractError(
            f"--param {unused[0]}.{next(iter(values[unused[0]]))}: {unused[0]} is not among the policies"
            f" ({', '.join(policies)}); a parameter goes to a policy named without parentheses"
        )
    for spec in specs:
        resolve_policy(spec)
    return specs


def check_apart(output: Path, source: Path, what: str) -> None:
    """Refuse an output folder that is ``source`` (an input folder), lies inside it or holds it:
    a run would write among the files it reads (and clear stray temporary files there)."""
    out, into = Path(output).resolve(), Path(source).resolve()
    if out == into or into in out.parents:
        raise ContractError(f"--output-dir {output} is inside {what} {source}, which evictlab only reads;"
                            " choose an output folder outside it")  # fmt: skip
    if out in into.parents:
        raise ContractError(f"--output-dir {output} holds {what} {source}, which evictlab only reads;"
                            " choose an output folder beside it")  # fmt: skip
