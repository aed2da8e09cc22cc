"""``evictlab validate-contracts`` and ``evictlab validate``."""

from __future__ import annotations

import argparse

from ..analysis.qa.prompt import parse_answer_template
from ..core.dataset import select_official
from ._common import (
    add_bootstrap_limit_option,
    add_command,
    add_pool_options,
    add_protocol_options,
    check_config_bootstrap,
    pool_set_from,
    protocol_from,
)


def register(subparsers: argparse._SubParsersAction) -> None:
    contracts = add_command(
        subparsers, "validate-contracts",
        description=(
            "Load the config, both manifests and the answer prompt strictly (unknown keys, wrong"
            " types and inconsistent values are errors naming the file and key), check them"
            " against each other, parse the answer prompt's template, check that the bootstrap"
            " stays within --max-bootstrap-iterations, and print the five identity hashes."
        ),
    )
    add_protocol_options(contracts)
    add_bootstrap_limit_option(contracts)
    contracts.set_defaults(handler=run_validate_contracts)

    dataset = add_command(
        subparsers, "validate",
        description=(
            "Verify the dataset's SHA-256 against the pin, check its rows, recompute the official"
            " selection with every exclusion and compare it with the official manifest, build the"
            " distractor bank and prepare the 45 cases under the chosen variant."
        ),
    )
    add_pool_options(dataset)
    dataset.set_defaults(handler=run_validate)


def run_validate_contracts(args: argparse.Namespace) -> int:
    protocol = protocol_from(args)
    parse_answer_template(protocol.answer_prompt, source=str(protocol.files.answer_prompt))
    check_config_bootstrap(protocol, args.max_bootstrap_iterations)
    print(f"protocol {protocol.protocol_id}")
    for name, path in vars(protocol.files).items():
        print(f"  {name:<19} {protocol.hashes[name]}  {path}")
    print(f"  {'dataset (pinned)':<19} {protocol.config.dataset.sha256}  {protocol.config.dataset.filename}")
    print(
        f"validated {len(protocol.official.case_ids)} official and"
        f" {len(protocol.synthetic.cases)} synthetic cases"
    )
    return 0


def run_validate(args: argparse.Namespace) -> int:
    # open_pools checks the pin, the recomputed selection against the manifest, the bank and every case.
    pools = pool_set_from(args)
    protocol, dataset, variant, bank = pools.protocol, pools.dataset, pools.variant, pools.bank
    selection = select_official(dataset, protocol.official, variant.evidence_header)  # for its exclusions
    status = "pinned" if dataset.pinned else "NOT pinned"
    print(f"dataset {dataset.path}: {len(dataset.rows)} rows, SHA-256 {dataset.sha256} ({status})")
    print(f"  selection: {sum(len(ids) for ids in selection.by_type.values())} eligible cases chosen,"
          f" {len(selection.exclusions)} candidates excluded; matches {protocol.files.official_manifest}")
    print(f"  distractor bank: {len(bank)} records ({bank[0].question_id} .. {bank[-1].question_id})")
    print(f"  variant: {', '.join(f'{k}={v}' for k, v in variant.as_dict().items())}")
    print(f"validated dataset {dataset.sha256} and prepared {len(pools.cases)} cases")
    return 0
