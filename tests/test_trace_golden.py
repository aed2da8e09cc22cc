"""Trace replay keeps today's kept lists: every write, every policy, capacities 10-500.

``tests/fixtures/trace-golden/kept-lists.json`` holds a digest of the kept list after every
write of the default workload (seeds 0-2), in DeerMem's stored order (sorted by id), captured
when the selector's input became DeerMem's and checked against the scalar reference loop
(``make_golden.py`` beside it says how). This is also the
"every lifecycle stage off but the cap" configuration.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

from evictlab.analysis.traces.generate import generate
from evictlab.analysis.traces.metrics import default_policies, uncapped_bounds

FOLDER = Path(__file__).parent / "fixtures" / "trace-golden"
GOLDEN = json.loads((FOLDER / "kept-lists.json").read_text())
_spec = importlib.util.spec_from_file_location("make_golden", FOLDER / "make_golden.py")
assert _spec is not None and _spec.loader is not None
make_golden = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make_golden)


@pytest.mark.parametrize("seed", make_golden.SEEDS)
def test_kept_lists_at_every_write_are_todays(seed):
    chunk = generate(seed=seed)
    keys = [key for key in GOLDEN if key.startswith(f"seed={seed} ")]
    assert len(keys) == len([*default_policies(), *uncapped_bounds()]) * len(make_golden.CAPACITIES)
    different = []
    for key in keys:
        _, policy, capacity = (part.split("=", 1)[1] for part in key.split(" "))
        writes = make_golden.kept_writes(chunk, policy, int(capacity))
        if make_golden.digest_of(writes) != GOLDEN[key]["sha256"] or len(writes) != GOLDEN[key]["writes"]:
            different.append(key)
    assert different == []
