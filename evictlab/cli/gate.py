"""``evictlab gate``: fail a policy change that flips cases beyond a tolerance (two run folders)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

from ..errors import ContractError
from ..results import SUCCESS, read_record, record_path
from ..workbench.viewer import compare, load_run
from ._common import add_command, non_negative_float

FORMATS = ("text", "json", "junit")
SUCCESSES = {"policy": "support kept", "qa": "correct"}
#: The run records of the folders the gate compares (a DeerFlow folder has none).
RECORDS = ("run-policy", "grade-qa")


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = add_command(
        subparsers, "gate", raw=True,
        description=(
            "Compare two run folders of the same kind case by case, as 'evictlab view A B' pairs them\n"
            "(run-policy folders, on the 45 pools or an imported store: the kept set and the support\n"
            "outcome of each policy x capacity x case, or of each capacity x case when each folder\n"
            "holds one policy; grade-qa folders: each row's grade), and exit 1 when more cases flip\n"
            "than --max-flips or the retention (support kept, or graded correct) drops by more than\n"
            "--max-retention-drop (a share, 0-1), or when the two folders do not hold the same cases.\n"
            "Prints every flipped case with the facts only one side kept."
        ),
        epilog=(
            "example (a change to the eviction weights on the 45 pools):\n"
            "  evictlab run-policy --policies hybrid-v1 --output-dir results/gate-base\n"
            "  evictlab run-policy --policies hybrid-v1 --param confidence_weight=0.6 \\\n"
            "      --param confirmation_weight=0.3 --output-dir results/gate-candidate\n"
            "  evictlab gate --baseline results/gate-base --candidate results/gate-candidate --max-flips 2"
        ),
    )
    parser.add_argument("--baseline", required=True, type=Path, metavar="RUN_A", help="the folder before the change")
    parser.add_argument("--candidate", required=True, type=Path, metavar="RUN_B", help="the run folder after it")
    parser.add_argument("--max-flips", type=int, default=0, metavar="N", help="cases allowed to flip [0]")
    parser.add_argument("--max-retention-drop", type=non_negative_float, default=0.0, metavar="X",
                        help="largest allowed drop of the retention share, baseline minus candidate [0]")
    parser.add_argument("--format", choices=FORMATS, default="text", help="report format [%(default)s]")
    parser.set_defaults(handler=run)


def gate(baseline: Path, candidate: Path, max_flips: int = 0, max_retention_drop: float = 0.0) -> dict[str, Any]:
    """The gate's verdict: the pairing, the flips, the two retention shares and why it fails."""
    if max_flips < 0:
        raise ContractError(f"--max-flips must be >= 0, got {max_flips}")
    for folder in (baseline, candidate):
        check_finished(folder)
    first, second = load_run(baseline), load_run(candidate)
    result = compare(first, second)
    success = SUCCESSES[first.kind]
    pairs = result["pairs"]
    paired = {case["key"] for case in first.cases}
    shares = [sum(case["status"] == success for case in run.cases) / len(run.cases) if run.cases else 0.0
              for run in (first, second)]  # fmt: skip
    failures = []
    if result["only_in_a"] or result["only_in_b"] or not pairs:
        failures.append(f"the folders do not hold the same cases ({pairs} paired, {result['only_in_a']} only in the"
                        f" baseline, {result['only_in_b']} only in the candidate)")  # fmt: skip
    flips = result["disagreeing"]
    if len(flips) > max_flips:
        failures.append(f"{len(flips)} flipped cases, more than --max-flips {max_flips}")
    drop = shares[0] - shares[1]
    if drop > max_retention_drop + 1e-12:
        failures.append(f"retention dropped by {drop:.4f} ({shares[0]:.4f} -> {shares[1]:.4f}), more than"
                        f" --max-retention-drop {max_retention_drop:g}")  # fmt: skip
    return {"kind": first.kind, "baseline": str(baseline), "candidate": str(candidate),
            "paired_by": result["paired_by"], "pairs": pairs, "flips": flips,
            "retention": {"baseline": shares[0], "candidate": shares[1]},
            "max_flips": max_flips, "max_retention_drop": max_retention_drop, "passed": not failures,
            "failures": failures, "cases": sorted(paired)}  # fmt: skip


def check_finished(folder: Path) -> None:
    """Refuse a folder whose evictlab run is still running, was interrupted or failed: its files
    may be those of an earlier, unfinished run, or not all there."""
    for kind in RECORDS:
        record = read_record(folder, kind) if folder.is_dir() else None
        if record is not None and record.status != SUCCESS:
            raise ContractError(f"{record_path(folder, kind)}: the {kind} run is {record.status}; gate only"
                                " finished runs (rerun it into the same folder to finish it)")  # fmt: skip


def run(args: argparse.Namespace) -> int:
    verdict = gate(args.baseline, args.candidate, args.max_flips, args.max_retention_drop)
    if args.format == "json":
        print(json.dumps({key: value for key, value in verdict.items() if key != "cases"}, indent=2))
    elif args.format == "junit":
        sys.stdout.write(junit(verdict))
    else:
        print("\n".join(text_lines(verdict)))
    return 0 if verdict["passed"] else 1


def text_lines(verdict: dict[str, Any]) -> list[str]:
    retention = verdict["retention"]
    lines = [f"{verdict['kind']} runs, {verdict['pairs']} cases paired by {verdict['paired_by']};"
             f" {len(verdict['flips'])} flipped; retention {retention['baseline']:.4f} -> {retention['candidate']:.4f}"]
    for flip in verdict["flips"]:
        lines.append(f"  flipped: {flip['pair']} ({flip['differs_in']}; {flip['a_status']} -> {flip['b_status']})"
                     + (f"; kept only before: {', '.join(flip['only_in_a'])}" if flip["only_in_a"] else "")
                     + (f"; kept only after: {', '.join(flip['only_in_b'])}" if flip["only_in_b"] else ""))
    lines += [f"FAILED: {failure}" for failure in verdict["failures"]] or ["passed"]
    return lines


def junit(verdict: dict[str, Any]) -> str:
    """One JUnit test suite, a test case per paired case; a flipped one fails with its facts."""
    flipped = {flip["a_key"]: flip for flip in verdict["flips"]}
    suite = ElementTree.Element("testsuite", name="evictlab gate", tests=str(len(verdict["cases"])),
                                failures=str(len(flipped)), errors="0")  # fmt: skip
    for key in verdict["cases"]:
        case = ElementTree.SubElement(suite, "testcase", classname=f"gate.{verdict['kind']}", name=key)
        if key in flipped:
            flip = flipped[key]
            message = f"{flip['differs_in']}: {flip['a_status']} -> {flip['b_status']}"
            failure = ElementTree.SubElement(case, "failure", message=message)
            failure.text = f"kept only before: {flip['only_in_a']}; kept only after: {flip['only_in_b']}"
    gate_case = ElementTree.SubElement(suite, "testcase", classname="gate", name="tolerances")
    for failure in verdict["failures"]:
        ElementTree.SubElement(gate_case, "failure", message=failure)
    return ElementTree.tostring(suite, encoding="unicode") + "\n"
