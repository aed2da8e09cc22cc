"""``evictlab weights``: which hybrid-v1 weights keep the most supports, and what that choice is worth held out."""

from __future__ import annotations

import argparse
import textwrap

from ..analysis import validation
from ..analysis.sweep import check_pools, make_grid, run_sweep, simplex_size
from ..analysis.weights import choice_lines, triple, weight_choice
from ..core.pools import open_pools
from ..policies import PolicyParams
from ..workbench.loaders import dataset_label
from ._common import add_command, add_pool_options, parse_csv, report_dataset, spec_from
from .sweep import number


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = add_command(
        subparsers, "weights", raw=True,
        description=(
            "Sweep hybrid-v1's (confidence, confirmation, access) weights over the simplex and print,\n"
            "per capacity and for the capacities together: the most supports a triple keeps, over all\n"
            "cases and per scenario, with the number of triples that tie at that best and DeerMem's\n"
            "default (0.65, 0.25, 0.10) beside them; then what choosing that way is worth held out\n"
            "(choose on all scenarios but one, score on the one left out; the same by loss rank), and\n"
            "which weights to take, saying when a tie decides the choice and that the in-sample best\n"
            "was chosen on the cases that score it. Nothing is written; notebook 03 opens with the\n"
            "same tables and draws the maps."
        ),
        epilog="example:\n  evictlab weights --capacities 7",
    )
    parser.add_argument(
        "--weights-step", type=float, default=0.05, metavar="STEP",
        help="lattice step of the weight simplex; STEP must divide 1 (default: %(default)s, 231 triples)",
    )  # fmt: skip
    parser.add_argument(
        "--capacities", type=lambda text: parse_csv(text, int), metavar="K,K,...",
        help="capacities, each in [1, pool size - 1] (default: the config's, 5,7,9)",
    )  # fmt: skip
    parser.add_argument("--confirmation-half-life", type=number, metavar="D",
                        help="confirmation half-life in days (default: the config's, 90)")
    parser.add_argument("--access-half-life", type=number, metavar="D",
                        help="access half-life in days (default: the config's, 30)")
    add_pool_options(parser)
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Handler of ``evictlab weights``: check the grid, build the pools, sweep, choose, print."""
    spec = spec_from(args)
    config = spec.resolved.protocol.config
    default = PolicyParams()
    grid = make_grid(
        weights_step=args.weights_step,
        weights=[default.weights],  # on the lattice of 0.05 already; added to a coarser one
        confirmation_half_lives=[args.confirmation_half_life or config.hybrid.confirmation_half_life_days],
        access_half_lives=[args.access_half_life or config.hybrid.access_half_life_days],
        capacities=args.capacities or config.pool.capacities,
        policies=["hybrid-v1"],
    )
    check_pools({spec.preset: spec}, grid)  # the sweep's capacity check, before the pools are opened
    pool_set = open_pools(spec, notice=report_dataset)
    rows = run_sweep({spec.preset: pool_set}, grid, progress=False).rows
    choice = weight_choice(rows, {g: validation.case_groups(pool_set, g) for g in validation.GROUPINGS})
    setting = grid.settings[0]
    added = len(grid.weights) > simplex_size(args.weights_step)
    extra = f", DeerMem's default {triple(default.weights)} added" if added else ""
    variant = f" with {', '.join(args.variant)}" if args.variant else ""
    header = (f"hybrid-v1 on the {len(pool_set.cases)} cases of {dataset_label(pool_set)}, preset {spec.preset}"
              f"{variant}: {len(grid.weights)} weight triples (lattice step {args.weights_step:g}{extra}), half-lives"
              f" {setting.confirmation_half_life_days:g}/{setting.access_half_life_days:g} days, reservation"
              f" {setting.correction_reserved_fraction:g}/{setting.correction_reserved_max}")  # fmt: skip
    print("\n".join(textwrap.wrap(header, 100)))
    print()
    for line in choice_lines(choice):
        print(line)
    return 0
