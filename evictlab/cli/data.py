"""``evictlab data ...``: the embedded demo dataset and the explicit LongMemEval download."""

from __future__ import annotations

import argparse

from ..core import demo, demo_generator
from ..core.fetch import (
    DEFAULT_TIMEOUT_SECONDS,
    PRIMARY_HOST,
    default_output,
    fetch_dataset,
    pin_from_config,
)
from ..core.protocol import load_protocol, sha256_file
from ..errors import DatasetError
from ._common import command_group, timeout_seconds


def register(subparsers: argparse._SubParsersAction) -> None:
    commands = command_group(subparsers, "data", "Datasets for evictlab: check or copy the"
                             " embedded demo dataset, or download the pinned LongMemEval oracle file.")  # fmt: skip
    _register_demo(commands)
    _register_fetch(commands)


# --------------------------------------------------------------------------- demo


def _register_demo(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "demo",
        help="check the embedded demo dataset against its generator, or write a copy",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            "The demo dataset is a small LongMemEval-shaped file that evictlab generates itself\n"
            "(synthetic text, its own ids, its own official manifest derived by the protocol's\n"
            "selection rule). Commands use it whenever no --dataset is given.\n"
            "\n"
            f"Without options: print where the committed files live ({demo.DEMO_DATASET.name} and\n"
            f"{demo.DEMO_MANIFEST.name} under data/demo/) and check that they are byte-identical to\n"
            "what the generator makes and that the file has the pinned SHA-256.\n"
            "With --output / --manifest-output: write the generated files there. An existing\n"
            "file with the same bytes is left as it is; a different one is never replaced\n"
            "unless --force is given."
        ),
        epilog=(
            "examples:\n"
            "  evictlab data demo\n"
            "  evictlab data demo --output /tmp/demo.json --manifest-output /tmp/demo-manifest.json\n"
            "\n"
            "to change the demo on purpose (maintainers): edit evictlab/core/demo_generator.py, then\n"
            "  evictlab data demo --output data/demo/longmemeval-demo.json \\\n"
            "    --manifest-output data/demo/manifest.json --force\n"
            "and copy the printed SHA-256 into DEMO_SHA256 in evictlab/core/demo.py."
        ),
    )
    parser.add_argument("--output", metavar="PATH", help="write the demo dataset JSON here")
    parser.add_argument("--manifest-output", metavar="PATH", help="write the demo's official manifest JSON here")
    parser.add_argument("--force", action="store_true", help="replace existing files that differ")
    parser.add_argument("--config", metavar="PATH",
                        help="protocol config whose protocol_id the manifest carries (default: evictlab's own)")
    parser.set_defaults(handler=_run_demo)


def _run_demo(args: argparse.Namespace) -> int:
    protocol = load_protocol(config=args.config)
    if args.output is None and args.manifest_output is None:
        problems = demo_generator.committed_problems(protocol)
        if problems:
            raise DatasetError(
                "the committed demo files do not match the generator: " + "; ".join(problems)
                + " (see 'evictlab data demo --help' to regenerate them on purpose)"
            )
        rows = demo_generator.generate_rows()
        manifest = demo_generator.derive_manifest(protocol)
        cases = sum(len(ids) for ids in manifest["scenarios"].values())
        print(f"demo dataset:  {demo.DEMO_DATASET}")
        print(f"  {len(rows)} rows, SHA-256 {demo.DEMO_SHA256} (pinned as {demo.DEMO_REPOSITORY}"
              f" revision {demo.DEMO_REVISION})")
        print(f"demo manifest: {demo.DEMO_MANIFEST}")
        print(f"  {cases} official cases in {len(manifest['scenarios'])} scenarios")
        print("both files match the generator")
        return 0
    if args.output is not None:
        path = demo_generator.write_demo(args.output, force=args.force)
        digest = sha256_file(path)
        print(f"demo dataset written to {path} (SHA-256 {digest})")
        if digest != demo.DEMO_SHA256:
            print(f"note: DEMO_SHA256 in evictlab/core/demo.py is {demo.DEMO_SHA256}; update it to {digest}")
    if args.manifest_output is not None:
        path = demo_generator.write_manifest(args.manifest_output, protocol, force=args.force)
        print(f"demo manifest written to {path} (SHA-256 {sha256_file(path)})")
    return 0


# --------------------------------------------------------------------------- fetch


def _register_fetch(commands: argparse._SubParsersAction) -> None:
    parser = commands.add_parser(
        "fetch",
        help="download the pinned LongMemEval oracle file and verify its SHA-256",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=(
            "Download the dataset file that the protocol config pins (repository, revision,\n"
            "filename, SHA-256) from\n"
            f"  {PRIMARY_HOST}/datasets/REPOSITORY/resolve/REVISION/FILENAME\n"
            "or the same path on a mirror host. The file is streamed into a temporary file next\n"
            "to the destination and only renamed into place once its SHA-256 equals the pin; on\n"
            "a mismatch it is deleted. An existing destination is never replaced: if it already\n"
            "holds the pinned file there is nothing to do.\n"
            "\n"
            "evictlab never downloads anything unless you run this command, and the dataset must\n"
            "never be committed. The default destination is outside the work tree:\n"
            "$XDG_CACHE_HOME/evictlab/FILENAME, or ~/.cache/evictlab/FILENAME. Afterwards pass\n"
            "the path to other commands with --dataset."
        ),
        epilog=(
            "examples:\n"
            "  evictlab data fetch\n"
            "  evictlab data fetch --mirror https://mirror.example.org --output /data/longmemeval_oracle.json"
        ),
    )
    source = parser.add_mutually_exclusive_group()
    source.add_argument("--mirror", metavar="HOST", help="mirror host serving the same path, e.g. https://mirror.example.org")
    source.add_argument("--url", metavar="URL", help="full URL of the file (the pinned SHA-256 still decides)")
    parser.add_argument("--output", metavar="PATH", help="destination file (default: see above)")
    parser.add_argument("--config", metavar="PATH", help="protocol config holding the pin (default: evictlab's own)")
    parser.add_argument("--timeout", type=timeout_seconds, default=DEFAULT_TIMEOUT_SECONDS, metavar="SECONDS",
                        help=f"network timeout per read, at most a day (default: {DEFAULT_TIMEOUT_SECONDS:g})")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.set_defaults(handler=_run_fetch)


def _run_fetch(args: argparse.Namespace) -> int:
    pin = pin_from_config(args.config)
    output = args.output or default_output(pin)
    result = fetch_dataset(pin, output, mirror=args.mirror, url=args.url, progress=not args.quiet, timeout=args.timeout)
    if result.downloaded:
        print(f"downloaded {result.url}")
        print(f"  -> {result.path} ({result.size} bytes, SHA-256 {result.sha256}, matches the pin)")
    else:
        print(f"{result.path} already holds the pinned file (SHA-256 {result.sha256}); nothing to do")
    print(f"use it with: --dataset {result.path}")
    return 0
