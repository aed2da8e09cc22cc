"""The golden decisions: every registered policy's decisions on the demo's 45 pools, pinned.

Each group (preset x policy spec x grid x seed) is decided through
:func:`evictlab.selection.decisions.decide_grid` with ``details=True``; its rows (setting x case
x capacity, in that order) are rendered one line each (kept ids in the selector's order,
support rank, reserved slots, margin, expectation, tie and near-tie flags; floats by ``repr``,
so every bit counts) and the group is pinned by the SHA-256 of those lines, beside two counts a
reader can check by eye. ``tests/test_golden_decisions.py`` decides every group again and
compares.

The groups: the three presets x every registered policy (plus a few modifier specs) x
capacities 5, 7 and 9 at the protocol's parameters; for the policies that read the setting
(``reads_params``), the grids of notebooks 03 (the weight simplex at step 0.05) and 04 (two
weight triples x 10 x 10 half-lives) too, on ``pr4810-final``; seeded policies under seeds 0-19.

Regenerate on purpose (after a change that is meant to change decisions, said in its commit):

    .venv/bin/python tests/golden_decisions.py --write
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Iterator
from pathlib import Path

from evictlab.analysis.sweep import make_grid
from evictlab.core.pools import PoolSet, open_pools
from evictlab.core.runspec import parse_spec
from evictlab.policies import PolicyParams, resolve_policy
from evictlab.selection.decisions import decide_grid

FIXTURE = Path(__file__).parent / "fixtures" / "decisions-golden.json"
PRESETS = ("pr4810-final", "pr4810-run2", "pr4810-run1")
CAPACITIES = (5, 7, 9)
SEEDS = tuple(range(20))
#: The specs decided under every seed (as captured; modified specs under seed 0 only).
SEEDED = ("random", "memorybank-seeded")
MODIFIED = (
    "lru+reserve(correction,0.1,10)",
    "hybrid-v1+reserve(correction,0.2,10)",
    "random+reserve(correction)",
    "memorybank+reserve(preference,0.3,2)",
    "oracle+reserve(correction,0.3,2)",
    "confidence+mmr(0.5)",
    "lfu-aging(half_life_days=7)",
    "dory(recency_rate_per_day=0.5,archive_threshold=0.4)",
)
HALF_LIVES = (1, 2, 4, 7, 14, 30, 60, 90, 180, 365)


#: The registered policies when the fixture was captured; a policy added later is not pinned here
#: (its rank keys are property-tested against its score like every other's).
REGISTERED = (
    "confidence", "dory", "fifo", "generative-agents", "generative-agents-code", "hybrid-v1", "keep-all",
    "lfu-aging", "lru", "memorybank", "memorybank-seeded", "memoryos-heat", "oracle", "random",
)  # fmt: skip


def policies() -> tuple[str, ...]:
    return (*REGISTERED, *MODIFIED)


def reads_params(selector) -> bool:
    """Whether a policy or the policy under its modifiers reads the setting."""
    while not selector.reads_params and hasattr(selector, "base"):
        selector = selector.base
    return selector.reads_params


def grids(pools: PoolSet) -> dict[str, tuple[PolicyParams, ...]]:
    """The settings of each grid: the protocol's, notebook 03's and notebook 04's."""
    weights = make_grid(weights_step=0.05, confirmation_half_lives=[90], access_half_lives=[30])
    half_lives = make_grid(
        weights=[[0.65, 0.25, 0.10], [0.5, 0.3, 0.2]],
        confirmation_half_lives=HALF_LIVES,
        access_half_lives=HALF_LIVES,
    )
    return {"protocol": (pools.protocol.config.hybrid,), "nb03": weights.settings, "nb04": half_lives.settings}


def groups() -> Iterator[tuple[str, str, str, tuple[int, ...]]]:
    """(preset, policy, grid, seeds) of every group, in the fixture's order."""
    for preset in PRESETS:
        for policy in policies():
            selector = resolve_policy(policy)
            seeds = SEEDS if policy in SEEDED else (0,)
            names = ["protocol"]
            if preset == PRESETS[0] and reads_params(selector):
                names += ["nb03", "nb04"]
            for grid in names:
                yield preset, policy, grid, seeds


def lines(pools: PoolSet, policy: str, settings, seeds) -> tuple[list[str], int, int]:
    """The group's rows as text, with the number of supports retained and of tied decisions."""
    frame = decide_grid(pools, [policy], settings, CAPACITIES, seeds, details=True)
    text = {
        "kept_fact_ids": [",".join(kept) for kept in frame["kept_fact_ids"]],
        **{name: [repr(float(value)) for value in frame[name]] for name in ("support_margin", "support_expected")},
    }
    columns = [
        "seed", "setting", "case_id", "capacity", "kept_fact_ids", "support_rank", "reserved_correction_slots",
        "support_margin", "support_expected", "support_tied", "support_near_tie",
    ]  # fmt: skip
    rendered = [" ".join(map(str, row)) for row in zip(*(text.get(name, frame[name]) for name in columns))]
    return rendered, int(frame["support_retained"].sum()), int(frame["support_tied"].sum())


def summary(rendered: list[str], retained: int, tied: int) -> dict[str, object]:
    """What the fixture pins of one group: its size, two counts and the SHA-256 of its rows."""
    digest = hashlib.sha256("\n".join(rendered).encode()).hexdigest()
    return {"rows": len(rendered), "retained": retained, "tied": tied, "sha256": digest}


def compute() -> dict[str, dict[str, object]]:
    pool_sets = {preset: open_pools(parse_spec(preset)) for preset in PRESETS}
    out: dict[str, dict[str, object]] = {}
    for preset, policy, grid, seeds in groups():
        pools = pool_sets[preset]
        out[f"{preset} {policy} {grid}"] = summary(*lines(pools, policy, grids(pools)[grid], seeds))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Regenerate the golden decisions fixture.")
    parser.add_argument("--write", action="store_true", help=f"write {FIXTURE.name} (otherwise compare)")
    args = parser.parse_args(argv)
    computed = compute()
    if args.write:
        FIXTURE.write_text(json.dumps(computed, indent=1, sort_keys=False) + "\n")
        print(f"wrote {len(computed)} groups to {FIXTURE}")
        return 0
    pinned = json.loads(FIXTURE.read_text())
    differing = [name for name in pinned if computed.get(name) != pinned[name]]
    for name in differing:
        print(f"differs: {name}: {computed.get(name)} != {pinned[name]}")
    return 1 if differing or set(computed) != set(pinned) else 0


if __name__ == "__main__":
    sys.exit(main())
