"""``evictlab weights`` and :mod:`evictlab.analysis.weights`: the best triples, ties counted, their held-out worth."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from evictlab import cli
from evictlab.analysis import validation, weights
from evictlab.analysis.sweep import make_grid, run_sweep
from evictlab.workbench import loaders


@pytest.fixture(scope="module")
def pool_set():
    return loaders.load_pool_set()


@pytest.fixture(scope="module")
def groups(pool_set):
    return {grouping: validation.case_groups(pool_set, grouping) for grouping in validation.GROUPINGS}


@pytest.fixture(scope="module")
def rows(pool_set):
    grid = make_grid(weights_step=0.05, capacities=(5, 7), policies=("hybrid-v1",))
    return run_sweep({"pr4810-final": pool_set}, grid, progress=False).rows


@pytest.fixture(scope="module")
def choice(rows, groups):
    return weights.weight_choice(rows, groups)


def test_the_best_triples_against_a_plain_recount(rows, choice):
    best = choice.best
    assert list(best.columns) == list(weights.BEST_COLUMNS)
    assert list(best["capacities"].unique()) == ["5", "7", "5,7"]
    for row in best.itertuples():
        part = rows[rows["capacity"].isin([int(k) for k in row.capacities.split(",")])]
        if row.group != weights.ALL_CASES:
            part = part[part["scenario"] == row.group]
        kept = part.groupby("setting")["support_retained"].sum()
        assert row.best == kept.max() and row.optimal_settings == (kept == kept.max()).sum()
        assert row.setting == kept.idxmax() and row.settings == 231  # the first in grid order
        default = part[(part["confidence_weight"] == 0.65) & (part["confirmation_weight"] == 0.25)]
        assert row.default == default["support_retained"].sum()
        assert row.default_is_best == (row.default == row.best)
        assert row.decisions == len(part) / 231
    at7 = best[(best["capacities"] == "7") & (best["group"] == weights.ALL_CASES)].iloc[0]
    # The numbers: 18 of 231 triples tie at 45/45, DeerMem's default among them.
    assert (at7["best"], at7["decisions"], at7["optimal_settings"], at7["default"]) == (45, 45, 18, 45)
    assert weights.triple(at7[list(validation.WEIGHTS)]) == "0.75/0.15/0.1"


def test_held_out_counts_are_the_held_out_selection_and_score_every_case_once(rows, groups, choice):
    held = choice.held_out
    assert list(held.columns) == list(weights.HELD_OUT_COLUMNS)
    for (label, grouping), members in held.groupby(["capacities", "grouping"], sort=False):
        capacities = [int(k) for k in label.split(",")]
        table = validation.held_out_selection(rows, groups[grouping], grouping=grouping, capacities=capacities)
        folds = members[members["held_out"] != "total"].set_index("held_out")
        for fold in table.itertuples():
            row = folds.loc[fold.held_out]
            assert row["first"] == round(fold.held_out_rate * fold.held_out_decisions)
            assert row["lowest"] <= row["first"] <= row["highest"] and row["optimal_settings"] == fold.optimal_settings
        total = members[members["held_out"] == "total"].iloc[0]
        assert total["decisions"] == 45 * len(capacities)  # each case is left out once
        for column in ("first", "lowest", "highest", "default"):
            assert total[column] == folds[column].sum()
    # The case: chosen without access_help at capacity 7, the first winner keeps 3/10, DeerMem's 10/10.
    fold = held[(held["capacities"] == "7") & (held["held_out"] == "access_help")].iloc[0]
    assert (fold["first"], fold["decisions"], fold["default"]) == (3, 10, 10)


def numbers(text: str) -> list[str]:
    """The counts in ``text`` ("31/45", "18 of 231"), not the weight triples ("0.75/0.15/0.1")."""
    return re.findall(r"(?<![\d./])\d+/\d+(?!/|\.?\d)|\d+ of \d+", text)


def test_the_sentence_states_the_tie_the_sample_and_the_held_out_counts_of_its_table(choice):
    lines = weights.choice_lines(choice)
    block = lines[lines.index(next(line for line in lines if line.startswith("capacity 7"))):]
    block = block[: block.index("")]
    sentence = " ".join(line for line in block if not line.startswith("  ") and not line.startswith("capacity"))
    assert sentence.startswith("At capacity 7, 18 of 231 weight triples keep the most supports, 45/45: a tie")
    assert "in sample, chosen on the cases that score it" in sentence
    totals = choice.held_out[(choice.held_out["capacities"] == "7") & (choice.held_out["held_out"] == "total")]
    by = totals.set_index("grouping")
    expected = ["18 of 231", "45/45"]
    for grouping in ("scenario", "loss_rank"):
        expected += [f"{int(by.loc[grouping, 'first'])}/45", f"{int(by.loc[grouping, 'default'])}/45"]
    assert numbers(sentence) == expected == ["18 of 231", "45/45", "31/45", "45/45", "45/45", "45/45"]
    assert "(21 to 45 over the tied)" in sentence
    assert "Take DeerMem's default 0.65/0.25/0.1: it is among the best in sample" in sentence
    # The printed table says the same.
    assert any(re.fullmatch(r"\s+by scenario\s+31/45\s+21-45 \(166\)\s+45/45", line) for line in block)
    assert any(re.fullmatch(r"\s+all cases\s+45/45\s+18 of 231\s+0.75/0.15/0.1\s+45/45, among them", line)
               for line in block)  # fmt: skip


def test_a_better_choice_that_holds_out_is_recommended_and_one_that_does_not_is_not():
    """Two triples on four cases of two scenarios: the second keeps more, held out too, unless one
    scenario is reversed."""
    def frame(kept_second: dict[str, int]) -> pd.DataFrame:
        cases = {"a1": "s1", "a2": "s1", "b1": "s2", "b2": "s2"}
        records = []
        for setting, (confidence, confirmation, access) in enumerate([(0.65, 0.25, 0.10), (0.5, 0.3, 0.2)]):
            for case, scenario in cases.items():
                kept = kept_second[case] if setting else int(case.endswith("1"))
                records.append({
                    "policy": "hybrid-v1", "preset": "p", "setting": setting, "confidence_weight": confidence,
                    "confirmation_weight": confirmation, "access_weight": access, "case_id": case,
                    "scenario": scenario, "capacity": 7, "support_retained": kept, "support_tied": False,
                    "support_near_tie": False,
                })  # fmt: skip
        groups = {"scenario": cases, "loss_rank": {case: case[1] for case in cases}}
        return weights.weight_choice(pd.DataFrame(records), groups)

    better = weights.choice_lines(frame({"a1": 1, "a2": 1, "b1": 1, "b2": 1}))
    text = " ".join(better)
    assert "1 of 2 weight triples keep the most supports, 4/4; this is in sample" in text
    assert "Take 0.5/0.3/0.2: it keeps 2 more supports than DeerMem's default in sample" in text
    worse = " ".join(weights.choice_lines(frame({"a1": 1, "a2": 1, "b1": 0, "b2": 1})))
    assert "Take DeerMem's default 0.65/0.25/0.1: 0.5/0.3/0.2 keeps 1 more in sample" in worse


def test_cli_answers_which_weights_to_take_at_capacity_7(capsys):
    assert cli.main(["weights", "--capacities", "7"]) == 0
    captured = capsys.readouterr()
    assert "embedded demo dataset" in captured.err
    out = captured.out
    assert "231 weight triples (lattice step 0.05)" in out and "half-lives 90/30 days" in out
    assert "capacity 7:" in out and "capacities" not in out.split("capacity 7:")[1].split("\n")[0]
    assert "18 of 231 weight triples keep the most supports, 45/45" in " ".join(out.split())
    assert "Take DeerMem's default" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--weights-step", "0.3"], "weight step 0.3 does not divide 1"),
        (["--capacities", "10"], "capacity 10 is outside [1, 9]"),
        (["--dataset", "/nonexistent/file.json"], "dataset file not found"),
    ],
)
def test_cli_errors_are_one_line(argv, message, capsys):
    assert cli.main(["weights", *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err


def test_an_off_lattice_default_is_added_and_said(capsys):
    assert cli.main(["weights", "--weights-step", "0.1", "--capacities", "7"]) == 0
    assert "67 weight triples (lattice step 0.1, DeerMem's default 0.65/0.25/0.1 added)" in " ".join(
        capsys.readouterr().out.split())
