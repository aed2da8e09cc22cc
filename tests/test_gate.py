"""``evictlab gate``: every kept-set change of a seeded hybrid-v1 perturbation fails it, reruns never do."""

from __future__ import annotations

import json
import math
import random
from xml.etree import ElementTree

import pytest

from evictlab.analysis.evaluate import write_run
from evictlab.cli import main
from evictlab.cli.gate import gate
from evictlab.core.pools import open_pools
from evictlab.core.runspec import RunSpec
from evictlab.policies import PolicyParams

WEIGHTS = ("confidence_weight", "confirmation_weight", "access_weight")


def perturbation(rng: random.Random) -> PolicyParams:
    """DeerMem's parameters with one of them moved (a weight's change shared out over the other two)."""
    base = PolicyParams()
    name = rng.choice([*WEIGHTS, "confirmation_half_life_days", "access_half_life_days",
                       "correction_reserved_fraction", "correction_reserved_max"])  # fmt: skip
    if name in WEIGHTS:
        value = min(1.0, max(0.0, getattr(base, name) + rng.gauss(0, 0.15)))
        others = [weight for weight in WEIGHTS if weight != name]
        rest = sum(getattr(base, weight) for weight in others)
        changes = {name: value, **{weight: getattr(base, weight) / rest * (1 - value) for weight in others}}
        changes[others[-1]] = 1 - value - changes[others[0]]
        return base.replace(**changes)
    if name == "correction_reserved_max":
        return base.replace(correction_reserved_max=rng.randint(0, 3))
    if name == "correction_reserved_fraction":
        return base.replace(correction_reserved_fraction=rng.uniform(0, 0.5))
    return base.replace(**{name: max(1.0, getattr(base, name) * math.exp(rng.gauss(0, 1.2)))})


@pytest.fixture(scope="module")
def pools():
    return open_pools(RunSpec())


def kept(rows):
    return {row["case_id"]: frozenset(row["kept_fact_ids"]) for row in rows}


@pytest.mark.slow
def test_every_kept_set_change_of_100_perturbations_fails_and_20_reruns_pass(pools, tmp_path):
    baseline = tmp_path / "baseline"
    expected = kept(write_run(baseline, pools, ["hybrid-v1"], [7])[1])
    for rerun in range(20):
        again = tmp_path / f"rerun-{rerun}"
        assert kept(write_run(again, pools, ["hybrid-v1"], [7])[1]) == expected
        assert gate(baseline, again)["passed"]
    rng = random.Random(24)
    caught = unchanged = 0
    while caught < 100:
        params = perturbation(rng)
        folder = tmp_path / f"candidate-{caught + unchanged}"
        changed = kept(write_run(folder, pools, ["hybrid-v1"], [7], params=params)[1]) != expected
        verdict = gate(baseline, folder)
        assert verdict["passed"] is not changed, params
        caught += changed
        unchanged += not changed
    assert unchanged > 0  # some perturbations change no kept set, and the gate lets them pass


def test_the_command_prints_flips_and_exits_by_the_tolerances(pools, tmp_path, capsys):
    baseline, candidate = tmp_path / "a", tmp_path / "b"
    write_run(baseline, pools, ["hybrid-v1"], [7])
    params = PolicyParams(confidence_weight=0.9, confirmation_weight=0.05, access_weight=0.05)
    write_run(candidate, pools, ["hybrid-v1"], [7], params=params)
    argv = ["gate", "--baseline", str(baseline), "--candidate", str(candidate)]
    assert main(argv) == 1
    text = capsys.readouterr().out
    assert "flipped: hybrid-v1|7|" in text and "kept only before: gold_" in text and "FAILED:" in text
    assert main([*argv, "--format", "json"]) == 1
    verdict = json.loads(capsys.readouterr().out)
    flips = len(verdict["flips"])
    drop = verdict["retention"]["baseline"] - verdict["retention"]["candidate"]
    assert flips > 0 and drop > 0
    assert main([*argv, "--max-flips", str(flips), "--max-retention-drop", f"{drop + 1e-9}"]) == 0
    capsys.readouterr()
    assert main([*argv, "--max-flips", str(flips), "--max-retention-drop", f"{drop / 2}"]) == 1
    capsys.readouterr()
    assert main([*argv, "--format", "junit"]) == 1
    suite = ElementTree.fromstring(capsys.readouterr().out)
    assert int(suite.get("failures")) == flips and len(suite.findall("testcase")) == 46


def test_folders_of_other_cases_or_kinds_fail(pools, tmp_path, capsys):
    write_run(tmp_path / "a", pools, ["hybrid-v1"], [7])
    write_run(tmp_path / "b", pools, ["hybrid-v1"], [5, 7])
    assert not gate(tmp_path / "a", tmp_path / "b")["passed"]
    assert "do not hold the same cases" in gate(tmp_path / "a", tmp_path / "b")["failures"][0]
    assert main(["gate", "--baseline", str(tmp_path / "a"), "--candidate", str(tmp_path / "nowhere")]) == 2
    assert "nowhere" in capsys.readouterr().err
