"""``evictlab sweep``: support retention over a grid of hybrid-v1 settings, capacities and presets."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import pandas as pd

from ..analysis.sweep import (
    CHUNK_ROWS,
    MAX_SETTINGS,
    WEIGHT_COLUMNS,
    SweepGrid,
    SweepRequest,
    make_grid,
    parse_weights,
)
from ..analysis.sweep_output import (
    EXTREMES_FILE,
    MANIFEST_FILE,
    ROWS_FILE,
    SETTINGS_FILE,
    SUMMARY_FILE,
    WrittenSweep,
    write_sweep,
)
from ..core.protocol import DEFAULT_PRESET, PRESETS, Config
from ..distributed import add_placement_options, placement_from
from ..errors import ContractError
from ..policies import DEERMEM_POLICIES, known_policies
from ..selection import decisions
from ._common import (
    POLICY_HELP,
    add_command,
    add_param_option,
    add_pool_options,
    parse_csv,
    positive_int,
    report_dataset,
    spec_from,
    with_policy_parameters,
)

EXAMPLE = (
    "example:\n"
    "  evictlab sweep --weights-step 0.05 --confirmation-half-lives 30,90,180 \\\n"
    "    --access-half-lives 7,30,90 --capacities 5,7,9 --output-dir results/sweep-simplex"
)


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = add_command(
        subparsers, "sweep", raw=True,
        description=(
            "Evaluate support retention on the 45 pools for every setting of a grid: weight\n"
            "triples (the simplex at --weights-step and/or explicit --weights) x confirmation\n"
            "half-lives x access half-lives x reservation fractions x reservation maxima, at\n"
            "each capacity, for each policy and preset. Lists left out take the config's value.\n"
            "Every row is decided by the one decisions path (evictlab.decide_grid's, a chunk at a\n"
            "time): the vectorised selector where a policy has one, else the scalar selector.\n"
            "\n"
            "Each row says whether the support fact was kept, its rank, its margin to the cut line,\n"
            "the chance it is kept when tied facts are ordered at random, and a near-tie flag (a\n"
            "non-zero margin of at most 1e-12 of the larger score compared: a rounding artefact).\n"
            "The summary counts ties and near ties per setting, scenario and capacity: a count of\n"
            "decisions, so a sum over capacities counts a case once per capacity.\n"
            "\n"
            "Rows are decided and written in chunks of about --chunk-rows rows (a file each, the\n"
            "unit a rerun resumes from), so memory stays bounded whatever the grid. Writes to\n"
            f"--output-dir: {ROWS_FILE}/ (one row per preset x policy x setting x case x\n"
            f"capacity) and {SUMMARY_FILE}/ (per setting x scenario x capacity), Parquet\n"
            f"datasets of one file per chunk; {SETTINGS_FILE} (each setting's parameters,\n"
            "which evictlab.analysis.sweep_output.load_sweep joins back onto the rows);\n"
            f"{EXTREMES_FILE} (the best and worst setting per scenario); and the run record\n"
            f"{MANIFEST_FILE} (parameters, provenance, status, every file's SHA-256).\n"
            "A finished sweep is never overwritten. Rerun the same command into the folder of an\n"
            "interrupted or failed one (a full disk included) to continue: a chunk is kept only\n"
            "if its files are the ones the record lists, byte for byte; the others are redone.\n"
            "Chunks run in this process by default; --workers N runs them on a local Dask cluster,\n"
            "--scheduler on an existing one, writing the same files."
        ),
        epilog=EXAMPLE,
    )
    parser.add_argument("--output-dir", required=True, type=Path, metavar="DIR", help="folder for the output files")
    grid = parser.add_argument_group("grid")
    grid.add_argument(
        "--weights-step",
        type=float,
        metavar="STEP",
        help="every (confidence, confirmation, access) weight triple on the simplex at STEP;"
        " STEP must divide 1 (0.05 gives 231 triples, 0.01 gives 5,151)",
    )
    grid.add_argument(
        "--weights",
        metavar="W;W;...",
        help="explicit weight triples, e.g. '0.65,0.25,0.10;0.5,0.3,0.2' (added to --weights-step's)",
    )
    for option, (kind, metavar, what, default) in GRID_LISTS.items():
        grid.add_argument(f"--{option}", type=partial(parse_csv, kind=kind), metavar=f"{metavar},{metavar},...",
                          help=f"{what} (default: the config's, {default})")
    grid.add_argument(
        "--policies",
        type=parse_csv,
        default=list(DEERMEM_POLICIES),
        metavar="A,B,...",
        help=f"policies, each {POLICY_HELP} (default: {','.join(DEERMEM_POLICIES)};"
        f" known: {', '.join(known_policies())})",
    )
    add_param_option(grid, protocol=False)
    grid.add_argument(
        "--presets",
        type=parse_csv,
        metavar="P,P,...",
        help=f"sweep over several presets, building pools for each (instead of --preset; known: {', '.join(PRESETS)})",
    )
    grid.add_argument(
        "--max-settings", type=positive_int, default=MAX_SETTINGS, metavar="N",
        help="refuse a grid of more settings than N, before building it (default: %(default)s)",
    )  # fmt: skip
    parser.add_argument(
        "--chunk-rows", type=positive_int, default=CHUNK_ROWS, metavar="N",
        help="rows per file of the row and summary tables, the unit an interrupted sweep resumes from"
        " (a policy that ignores the setting has one file, of one setting's rows); a few chunks'"
        " encoded files are held in memory (default: %(default)s)",
    )  # fmt: skip
    parser.add_argument("--no-progress", action="store_true", help="never show the progress bar")
    add_placement_options(parser, default_workers=0)
    add_pool_options(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Handler of ``evictlab sweep``: the options resolved once into a request, swept, reported."""
    request = request_from(args)
    written = write_sweep(request)
    for line in report_lines(written):
        print(line)
    print(f"wrote {MANIFEST_FILE}, {ROWS_FILE}/, {SUMMARY_FILE}/, {SETTINGS_FILE} and {EXTREMES_FILE}"
          f" to {request.output_dir}")  # fmt: skip
    return 0


def request_from(args: argparse.Namespace) -> SweepRequest:
    """The options as one checked :class:`~evictlab.analysis.sweep.SweepRequest`: the options as
    given (for the record), a run spec per preset (its pools are opened under the folder's lock:
    bad input leaves no folder), where the chunks run and the grid."""
    arguments = _recorded(args)
    presets = presets_from(args)
    specs = [spec_from(args, preset) for preset in presets]
    placement = placement_from(args)
    grid = grid_from(args, specs[0].resolved.protocol.config)
    return SweepRequest(
        args.output_dir, specs, grid, chunk_rows=args.chunk_rows, placement=placement,
        progress=False if args.no_progress else None, arguments=arguments, notice=report_dataset,
    )  # fmt: skip


def grid_from(args: argparse.Namespace, config: Config) -> SweepGrid:
    """The grid of the options; a list left out takes the config's value."""
    defaults = config.hybrid
    policies = policies_from(args)
    weights: list[Any] = list(parse_weights(args.weights)) if args.weights else []
    if args.weights_step is None and not weights:
        weights = [defaults.weights]
    return make_grid(
        weights_step=args.weights_step,
        weights=weights,
        confirmation_half_lives=args.confirmation_half_lives or (defaults.confirmation_half_life_days,),
        access_half_lives=args.access_half_lives or (defaults.access_half_life_days,),
        reserved_fractions=args.reserved_fractions or (defaults.correction_reserved_fraction,),
        reserved_maxima=args.reserved_max or (defaults.correction_reserved_max,),
        capacities=args.capacities or config.pool.capacities,
        policies=policies,
        max_settings=args.max_settings,
    )


def policies_from(args: argparse.Namespace) -> list[str]:
    """``--policies`` with each ``--param POLICY.NAME=V,V`` expanded into one spec per value."""
    for text in args.param:
        if "." not in text.partition("=")[0]:
            raise ContractError(
                f"--param {text}: sweep takes POLICY.NAME=V,V (a policy's own parameters); sweep hybrid-v1's"
                " with --weights, --confirmation-half-lives, --access-half-lives, --reserved-fractions, --reserved-max"
            )
    return with_policy_parameters(args.policies, args.param)


def presets_from(args: argparse.Namespace) -> list[str]:
    """``--presets``, or the one ``--preset`` (the default preset when neither is given); an
    unknown name fails as its run spec is made, a repeated one as the request is."""
    if args.presets and args.preset:
        raise ContractError("give either --preset or --presets, not both")
    return args.presets or [args.preset or DEFAULT_PRESET]


def _recorded(args: argparse.Namespace) -> dict[str, Any]:
    """The options as given, JSON-ready, for the manifest."""
    return {
        name: str(value) if isinstance(value, Path) else value
        for name, value in vars(args).items()
        if name != "handler"
    }


def number(text: str) -> int | float:
    """``"90"`` -> 90, ``"7.5"`` -> 7.5 (named so, as parse_csv's errors name the type)."""
    try:
        return int(text)
    except ValueError:
        return float(text)


#: The grid's lists besides the weights: option -> (parser of one item, metavar, what it lists,
#: the config's value, named in the help).
GRID_LISTS: dict[str, tuple[Callable[[str], Any], str, str, str]] = {
    "confirmation-half-lives": (number, "D", "confirmation half-lives in days", "90"),
    "access-half-lives": (number, "D", "access half-lives in days", "30"),
    "reserved-fractions": (float, "F", "correction reservation fractions", "0.1"),
    "reserved-max": (int, "N", "correction reservation maxima", "10"),
    "capacities": (int, "K", "capacities, each in [1, pool size - 1]", "5,7,9"),
}


# --------------------------------------------------------------------------- the printed summary


def report_lines(written: WrittenSweep) -> list[str]:
    """What the command prints: the size of the sweep, DeerMem's default setting if it is in
    the grid, and the best and worst setting per scenario."""
    grid = written.grid
    capacities = ",".join(str(capacity) for capacity in grid.capacities)
    lines = [
        f"swept {_plural(len(written.presets), 'preset')} x {_plural(len(grid.policies), 'policy', 'policies')}"
        f" x {_plural(grid.size, 'setting')} x capacities {capacities}: {written.rows:,} decisions"
        + (f" ({written.reused_chunks:,} of {written.chunks:,} chunks kept from the interrupted run)"
           if written.reused_chunks else "")
    ]  # fmt: skip
    for preset in written.presets:
        mine = written.defaults[written.defaults["preset"] == preset]
        for index in sorted(set(mine["setting"])):
            rows = mine[mine["setting"] == index]
            lines += ["", f"DeerMem default, {describe(rows.iloc[0])}, preset {preset}:"]
            lines += retention_table(rows).to_string().splitlines()
        lines += [
            "",
            f"best and worst setting per scenario, preset {preset} (support retained summed over"
            f" capacities {capacities}; ties go to the first setting in grid order):",
        ]
        extremes = written.extremes[written.extremes["preset"] == preset]
        for policy in grid.policies:
            rows = extremes[extremes["policy"] == policy]
            if (rows["tied"] == rows["settings"]).all():
                lines.append(f"  {policy}: every setting retains the same number of supports in every scenario")
                continue
            lines.append(f"  {policy}:")
            for _, row in rows.iterrows():
                tie = f", {row['tied']:,} settings tie" if row["tied"] > 1 else ""
                retained = f"{row['support_retained']}/{row['cases']}"
                lines.append(f"    {row['scenario']:<22} {row['extreme']:<5} {retained:>7}  {describe(row)}{tie}")
    return lines


def describe(row: pd.Series) -> str:
    """A setting as the tables hold it: its index and its parameters (:data:`SETTING_COLUMNS`)."""
    weights = "/".join(f"{row[name]:g}" for name in WEIGHT_COLUMNS)
    return (
        f"setting {row['setting']} (weights {weights}, half-lives {row['confirmation_half_life_days']:g}"
        f"/{row['access_half_life_days']:g} d, reserve {row['correction_reserved_fraction']:g}"
        f"/{row['correction_reserved_max']})"
    )


def retention_table(summary: pd.DataFrame) -> pd.DataFrame:
    """Retained/cases per scenario (rows) and policy/capacity (columns), with a total row.

    Counts ``retention``: the decisions as made for DeerMem's policies, the expectation over
    tie orders for the others (``random``: its exact expectation).
    """
    counted = "retention" if "retention" in summary else "support_retained"
    counts = (
        summary.drop(columns=["retained"], errors="ignore")
        .rename(columns={counted: "retained"})
        .assign(scenario=summary["scenario"].astype(str), policy=summary["policy"].astype(str), seeds=1)
    )
    table = decisions.retention_table(counts, "scenario", ["policy", "capacity"], total="total")
    table.columns = [f"{policy}/{capacity}" for policy, capacity in table.columns]
    table.index.name = None
    return table


def _plural(count: int, word: str, plural: str | None = None) -> str:
    return f"{count:,} {word if count == 1 else (plural or word + 's')}"
