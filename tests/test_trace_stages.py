"""DeerMem's lifecycle in a replay (analysis.traces.stages): every stage off is today's replay,
each stage does what spec 1.12-1.13 says on a trace, and every lost answer has one stage."""

from __future__ import annotations

import datetime as _dt

import numpy as np
import pandas as pd
import pytest

from evictlab.analysis.traces.generate import WorkloadParams, generate
from evictlab.analysis.traces.lifecycle import LOSSES, MIDDLEWARE, parse_stages, written_category
from evictlab.analysis.traces.memory import Lockstep, MemorySpec
from evictlab.analysis.traces.output import load_run
from evictlab.analysis.traces.replay import replay, replay_specs
from evictlab.analysis.traces.schema import chunk_from_rows
from evictlab.analysis.traces.stages import Lifecycle, stage_table
from evictlab.cli import main
from evictlab.core.tokens import char_tokens, fact_line
from evictlab.policies.arrays import EXACT, NO_TIME
from evictlab.workbench.plots import stage_losses

POLICIES = ("confidence", "hybrid-v1", "lru", "fifo", "lfu-aging")
DAY = _dt.timedelta(days=1)
START = _dt.datetime(2026, 1, 1, tzinfo=_dt.UTC)


def kept_after_every_write(chunk, specs, stages):
    memories = Lockstep(specs)
    lifecycle = None if stages is None else Lifecycle(stages, memories)
    writes = []
    replay([chunk], memories, lifecycle=lifecycle,
           on_write=lambda _, found: writes.append([found.kept_ids(m) for m in range(len(specs))]))
    return writes


@pytest.mark.parametrize("seed", [0, 1])
def test_every_stage_off_is_the_cap_alone(seed):
    chunk = generate(WorkloadParams(horizon_days=20, reextraction_rate=1.0, label_failure_rate=0.3), seed)
    specs = [MemorySpec.of(policy, capacity) for policy in POLICIES for capacity in (5, 20)]
    assert kept_after_every_write(chunk, specs, frozenset()) == kept_after_every_write(chunk, specs, None)
    # and the stages do change them
    assert kept_after_every_write(chunk, specs, frozenset(MIDDLEWARE)) != kept_after_every_write(chunk, specs, None)


def row(day, event, **fields):
    return {"time": START + day * DAY, "event": event, **fields}


def add(day, fact_id, confidence=0.9, category="preference", content_length=20, **fields):
    return row(day, "add", fact_id=fact_id, content_length=content_length, confidence=confidence, category=category,
               **fields)


def run(rows, stages, policy="confidence", capacity=10):
    (result,) = replay_specs([chunk_from_rows(rows)], [MemorySpec.of(policy, capacity)],
                             lifecycle=parse_stages(stages))
    return result.row()


def test_admission_and_duplicates_in_a_replay():
    rows = [add(0, "a", content_key="k"), add(0, "low", confidence=0.6), add(0, "thread", scope="thread",
            durability="durable", authority="descriptive"), add(1, "copy", content_key="K"),
            add(1, "copy2", content_key="k"), row(2, "ask", fact_id="low"), row(2, "ask", fact_id="thread"),
            row(2, "ask", fact_id="copy2")]
    found = run(rows, "admission,dedup")
    assert (found["answerable"], found["lost_rejected"], found["facts_added"]) == (1, 2, 5)
    assert run(rows, "none")["answerable"] == 3


def test_paired_removal_keeps_the_old_fact_when_the_replacement_is_evicted():
    rows = [add(0, "vim", 0.9), add(1, "code", 0.8, supersedes="vim"), row(2, "ask", fact_id="vim"),
            row(2, "ask", fact_id="code", supersedes="vim")]
    assert run(rows, "contradiction", capacity=1)["answerable"] == 1  # vim stays, code evicted
    found = run(rows, "contradiction", capacity=2)
    assert (found["answerable"], found["lost_contradicted"], found["stale_kept"]) == (1, 1, 0)


def test_staleness_removes_superseded_candidates_but_not_corrections_or_the_just_confirmed():
    rows = [add(0, name, 0.8 + i / 100, category="correction" if name == "c" else "context")
            for i, name in enumerate(["a", "b", "c", "d", "e"])]
    rows += [add(1, f"new-{name}", supersedes=name) for name in "abcde"]
    rows += [row(120, "message", role="human", text="Perfect."), row(120, "confirm", fact_ids=["d"],
             reinforcement=True), add(120, "late")]
    rows += [row(121, "ask", fact_id=name) for name in "abcde"]
    found = run(rows, "staleness", policy="hybrid-v1")
    # a, b and e are removed; c is protected; d was confirmed in the same update (1.11a C7)
    assert (found["answerable"], found["lost_stale"]) == (2, 3)
    # under confidence DeerMem does not stamp (spec 1.9), so d's review clock is its creation
    assert run(rows, "staleness", policy="confidence")["lost_stale"] == 4


def test_the_staleness_cap_breaks_confidence_ties_in_storage_order():
    # spec 1.12 C3: above 10 removals, confidence ascending, stable in snapshot order, which is
    # storage's (sorted by id, 1.14), not the order the facts were added or kept in
    old = [f"z{i}" for i in range(6)] + [f"a{i}" for i in range(6)]
    rows = [add(0, name, 0.8) for name in old] + [add(1, f"new-{name}", supersedes=name) for name in old]
    rows += [add(120, "late"), *(row(121, "ask", fact_id=name) for name in old)]
    memories = Lockstep([MemorySpec.of("confidence", 100)])
    replay([chunk_from_rows(rows)], memories, lifecycle=Lifecycle(parse_stages("staleness"), memories))
    assert [name for name in old if name in memories.kept_ids(0)] == ["z4", "z5"]


def test_a_category_is_parsed_stripped_before_storage_sees_it():
    # spec 1.12 B7: the parsed category is the stripped string (or context), so " correction " is
    # stored as correction (1.14), keeps its protection from staleness and its guaranteed pool
    rows = [add(0, name, 0.8, category=" correction " if name == "c" else "context") for name in "abcd"]
    rows += [add(1, f"new-{name}", supersedes=name) for name in "abcd"]
    rows += [add(120, "late"), *(row(121, "ask", fact_id=name) for name in "abcd")]
    found = run(rows, "staleness,storage")
    assert (found["answerable"], found["lost_stale"]) == (1, 3)
    rows = [add(0, f"f{i}", 0.9, tokens=1000) for i in range(2)] + [add(0, "fix", 0.5, category="correction ",
                                                                      tokens=400), row(1, "ask", fact_id="fix")]
    assert run(rows, "storage,injection")["answerable"] == 1


def test_reinforcement_from_the_message_text():
    def confirmed(text):
        rows = [add(0, "a", 0.7), add(0, "b", 0.9), row(100, "message", role="human", text=text),
                row(100, "confirm", fact_ids=["a"], reinforcement=True), add(100, "c", 0.95),
                row(101, "ask", fact_id="a")]
        return run(rows, "reinforcement", policy="hybrid-v1", capacity=2)["answerable"]

    assert confirmed("Yes, that's right.") == 1
    assert confirmed("对不起，我说错了") == 0  # the gate stays shut: a is not stamped and loses its slot
    assert run([add(0, "a", 0.7), add(0, "b", 0.9), row(100, "message", role="human", text="对不起"),
                row(100, "confirm", fact_ids=["a"], reinforcement=True), add(100, "c", 0.95),
                row(101, "ask", fact_id="a")], "none", policy="hybrid-v1", capacity=2)["answerable"] == 1


def test_injection_budget_and_the_correction_pool():
    rows = [add(0, f"f{i}", 0.9 - i / 100, tokens=600) for i in range(4)]
    rows += [add(0, "fix", 0.5, category="correction", tokens=400), add(0, "big", 0.3, category="correction",
             tokens=200)]
    rows += [row(1, "ask", fact_id=name) for name in ("f0", "f2", "f3", "fix", "big")]
    found = run(rows, "injection")
    # regular budget 2000 - 1 - 400: two 600-token lines fit; fix fits the 500 pool, big does not
    assert (found["answerable"], found["lost_not_injected"]) == (2, 3)


def test_an_injected_line_is_the_stored_facts():
    # spec 1.13: get_context reads the stored document and prints `- [<category> | <conf 2dp>] <content>`;
    # spec 1.14: a category outside the nine core values is "rewritten to `other`". The question comes
    # after the update that stored the fact, so a `knowledge` fact of 20 characters costs
    # "\n- [other | 0.80] " + 20 = 38 characters, 9 tokens (as `knowledge` 42, 10 tokens)
    rows = [add(0, "big", 0.9, tokens=2000 - 1 - 9), add(0, "k", 0.8, category="knowledge"),
            row(1, "ask", fact_id="k")]
    assert run(rows, "storage,injection")["answerable"] == 1


def test_the_first_line_of_a_pool_is_counted_alone():
    # spec 1.13: "The first line is counted alone and each later one as `\\n` + line". A trace's
    # `tokens` count a later line: "- [preference | 0.95] " + 21 characters is 43, 10 tokens alone and
    # 11 after a `\\n`, so a first line of 2000 such tokens costs 1999, the regular budget 2000 - 1
    rows = [add(0, "big", 0.95, content_length=21, tokens=2000), row(1, "ask", fact_id="big")]
    assert run(rows, "injection")["answerable"] == 1
    rows = [add(0, "big", 0.95, content_length=21, tokens=2001), row(1, "ask", fact_id="big")]
    assert run(rows, "injection")["answerable"] == 0
    # a generated trace's first lines, as the stages cost them
    chunk = generate(WorkloadParams(horizon_days=3), 0)
    memories = Lockstep([MemorySpec.of("keep-all", None)])
    lifecycle = Lifecycle(parse_stages("injection"), memories)
    replay([chunk], memories, lifecycle=lifecycle)
    table = memories.table
    rows = [table.index[fact_id] for fact_id in memories.kept_ids(0)]
    index = {fact_id: at for at, fact_id in enumerate(chunk["fact_id"]) if chunk["event"][at] == "add"}
    at = [index[table.ids[row]] for row in rows]
    alone = [char_tokens(fact_line(written_category(chunk["category"][i]), chunk["confidence"][i],
                                   "x" * chunk["content_length"][i])) for i in at]
    assert table.extra["first_tokens"][rows].tolist() == alone
    assert table.extra["tokens"][rows].tolist() == [chunk["tokens"][i] for i in at] != alone


def replayed(rows, stages, policy="hybrid-v1", capacity=10):
    memories = Lockstep([MemorySpec.of(policy, capacity)])
    lifecycle = Lifecycle(parse_stages(stages), memories)
    replay([chunk_from_rows(rows)], memories, lifecycle=lifecycle)
    return memories


def test_an_update_with_a_confidence_above_1_is_refused_whole():
    # spec 1.12 C5: "A confidence above 1 passes this gate; a negative one never does, because the
    # threshold is >= 0. Storage then refuses the whole commit (`fact.confidence must be a number
    # between 0 and 1`): the update returns false, nothing is written, and the watermark stays"
    # (D6: "Any failure leaves it in place, so the next turn feeds the same messages again")
    rows = [add(0, "a", 0.9), add(0, "b", 0.8), add(0, "old", 0.7),
            row(5, "message", role="human", text="Perfect."), row(5, "confirm", fact_ids=["a"], reinforcement=True),
            add(5, "c", 0.95), add(5, "big", 1.5, supersedes="old"),
            row(6, "message", role="human", text="Tell me about Lisbon."),
            row(6, "confirm", fact_ids=["b"], reinforcement=True), row(6, "add", fact_id="d", content_length=20,
                                                                           confidence=0.75, category="context"),
            *(row(7, "ask", fact_id=name) for name in ("a", "b", "old", "c", "big", "d"))]
    found = run(rows, "middleware", policy="hybrid-v1", capacity=3)
    # c and big never stored, old not contradicted, nothing evicted at write 5; at write 6 d evicts one
    assert (found["lost_refused"], found["lost_contradicted"], found["facts_added"]) == (2, 0, 6)
    memories = replayed(rows, "reinforcement,storage", capacity=10)
    table = memories.table
    assert sorted(memories.kept_ids(0)) == ["a", "b", "d", "old"]
    # a's stamp of the refused update was not applied; the next update's feed still holds "Perfect."
    assert table.times["confirmed"][table.index["a"]] == NO_TIME
    assert table.times["confirmed"][table.index["b"]] != NO_TIME
    unrefused = replayed(rows, "reinforcement", capacity=10)
    assert unrefused.table.times["confirmed"][unrefused.table.index["b"]] == NO_TIME
    assert unrefused.table.times["confirmed"][unrefused.table.index["a"]] != NO_TIME
    # the gates come first: a confidence above 1 the scope gate rejects, or a duplicate of an
    # earlier fact of the batch, never reaches storage; a negative one is refused only without the
    # threshold (the admission stage)
    gated = [add(0, "a"), add(0, "big", 1.5, scope="thread", durability="durable", authority="descriptive"),
             row(1, "ask", fact_id="a")]
    assert run(gated, "admission,storage")["answerable"] == 1
    assert run(gated, "storage")["lost_refused"] == 1
    copies = [add(0, "a", content_key="k"), add(0, "big", 1.5, content_key="k"), row(1, "ask", fact_id="a")]
    assert run(copies, "dedup,storage")["answerable"] == 1
    assert run(copies, "storage")["lost_refused"] == 1
    negative = [add(0, "a"), add(0, "neg", -0.5), row(1, "ask", fact_id="a")]
    assert run(negative, "admission,storage")["answerable"] == 1
    assert run(negative, "storage")["lost_refused"] == 1
    assert run(negative, "none")["answerable"] == 1


def test_an_empty_content_is_dropped_and_then_a_removal_refuses_the_update():
    # spec 1.12 B7: "`content` must be a string; it is stripped and must not be empty", else the
    # entry is dropped; B8: "If the normalized `factsToRemove` is non-empty while ... any `newFacts`
    # entry was dropped, the whole response is rejected as a parse failure and nothing is applied."
    rows = [add(0, "a"), add(1, "empty", content_length=0), add(1, "b"), row(2, "ask", fact_id="empty"),
            row(2, "ask", fact_id="b")]
    found = run(rows, "admission,contradiction")
    assert (found["answerable"], found["lost_rejected"], found["lost_refused"]) == (1, 1, 0)
    assert run(rows, "none")["answerable"] == 2
    rows = [add(0, "a"), add(1, "empty", content_length=0), add(1, "b", supersedes="a"),
            *(row(2, "ask", fact_id=name) for name in ("a", "b", "empty"))]
    found = run(rows, "admission,contradiction")
    assert (found["answerable"], found["lost_refused"], found["lost_contradicted"]) == (1, 2, 0)
    # the factsToRemove entries are the contradiction stage's: without it, only the empty fact goes
    found = run(rows, "admission")
    assert (found["answerable"], found["lost_rejected"]) == (2, 1)


def test_churn_counts_what_entered_and_left_each_memory_by_any_stage():
    rows = [add(0, "a"), add(0, "b"), add(0, "c"), add(0, "low", 0.6),
            add(1, "a2", supersedes="a"), add(1, "b2", supersedes="b"),
            row(100, "confirm", fact_ids=["c"], reinforcement=False),
            row(101, "ask", fact_id="a"), row(101, "ask", fact_id="low")]
    found = run(rows, "admission,staleness")
    # day 0: a, b, c enter (3); admission rejects low below the 0.7 threshold, so it never enters (0).
    # day 1: a2 and b2 enter (2). day 100, an update with no new fact: staleness shows the reviewer
    # the 5 stored facts (all older than 90 days) and removes the superseded a and b, which leave (2).
    # Churn 3 + 2 + 2 = 7 over 9 events (one per row); counting every added row as entering and no
    # stage removal as leaving gave 4 + 2 + 0 = 6.
    assert (found["lost_stale"], found["lost_rejected"], found["final_size"]) == (1, 1, 3)
    assert (found["churn"], found["churn_per_event"]) == (7, 7 / 9)
    # with the stages off every fact enters and none leaves: 6 entered, 0 left
    assert run(rows, "none")["churn"] == 6


@pytest.mark.parametrize("stages", ["middleware", "none"])
def test_churn_is_the_change_of_each_kept_set_summed_over_writes(stages):
    chunk = generate(WorkloadParams(horizon_days=40, reextraction_rate=1.0, label_failure_rate=0.3,
                                    knowledge_update_rate=1.5), 0)
    specs = [MemorySpec.of(policy, capacity) for policy in POLICIES for capacity in (5, 20)]
    memories = Lockstep(specs)
    kept = [set() for _ in specs]
    changed = np.zeros(len(specs), dtype=np.int64)

    def record(_, found):
        for memory, before in enumerate(kept):
            after = set(found.kept_ids(memory))
            changed[memory] += len(before ^ after)
            kept[memory] = after

    counts = replay([chunk], memories, lifecycle=Lifecycle(parse_stages(stages), memories), on_write=record)
    assert [found.churn for found in counts] == changed.tolist()


def test_stage_losses_sum_to_the_total_loss_on_1000_traces():
    params = WorkloadParams(horizon_days=2, facts_per_day=6, search_rate=4, question_rate=6, question_delay_days=1,
                            correction_rate=1.5, knowledge_update_rate=1.5, reextraction_rate=2,
                            label_failure_rate=0.2, confirmation_rate=3, false_confirmation_rate=0.3)
    specs = [MemorySpec.of(policy, capacity) for policy, capacity in (("confidence", 2), ("hybrid-v1", 4), ("lru", 3))]
    totals = np.zeros(len(LOSSES), dtype=np.int64)
    for seed in range(1000):
        for result in replay_specs([generate(params, seed)], specs, lifecycle=frozenset(MIDDLEWARE)):
            assert result.losses is not None
            assert sum(result.losses) == result.counts.asks - result.counts.answerable
            totals += result.losses
    # the stages these small traces can lose answers to do lose some (injection needs larger memories)
    assert {name for name, total in zip(LOSSES, totals) if total} >= {"rejected", "evicted"}


def test_stage_table_shares_sum_to_one_and_the_figure_draws_them():
    specs = [MemorySpec.of(policy, capacity) for policy in ("confidence", "lru") for capacity in (3, 30)]
    rows = [result.row() for seed in range(2) for result in replay_specs(
        [generate(WorkloadParams(horizon_days=6, label_failure_rate=0.3), seed)], specs,
        lifecycle=frozenset(MIDDLEWARE))]
    table = stage_table(pd.DataFrame(rows))
    assert len(table) == 4 and np.allclose(table.drop(columns=["policy", "capacity"]).sum(axis=1), 1.0)
    assert (table["never admitted"] > 0).all()
    figure = stage_losses(table)
    assert len(figure.axes) == 2 and figure.axes[0].get_ylabel() == "share of questions"


def test_replay_command_names_its_stages_and_refuses_an_unknown_one(tmp_path, capsys):
    tiny = ["--seeds", "1", "--horizon-days", "5", "--policies", "confidence", "--capacities", "5", "--no-progress"]
    assert main(["trace", "replay", *tiny, "--lifecycle", "middleware,-injection", "--output-dir",
                 str(tmp_path / "run")]) == 0
    manifest, tables = load_run(tmp_path / "run", "trace-replay")
    assert manifest["parameters"]["lifecycle"] == sorted(set(MIDDLEWARE) - {"injection"})
    assert manifest["provenance"]["numerics"] == EXACT.route  # which route computed the exact maths
    assert "numerics" not in manifest["parameters"]  # a fact of the machine, not an input
    assert (tables["stages.csv"]["stored but not injected"] == 0).all()
    capsys.readouterr()
    assert main(["trace", "replay", *tiny, "--lifecycle", "cache", "--output-dir", str(tmp_path / "no")]) == 2
    assert "unknown stage 'cache'" in capsys.readouterr().err and not (tmp_path / "no").exists()


def test_middleware_is_the_default_of_the_library_and_the_study():
    from evictlab.analysis.traces.metrics import curve_rows
    from evictlab.analysis.traces.study import run_task, study_tasks

    base = WorkloadParams(horizon_days=4, label_failure_rate=0.3)
    chunk = generate(base, 0)
    traces = [("s0", lambda: [chunk])]
    default = curve_rows(traces, ["confidence"], [3])
    pd.testing.assert_frame_equal(default, curve_rows(traces, ["confidence"], [3], lifecycle=frozenset(MIDDLEWARE)))
    assert not default.equals(curve_rows(traces, ["confidence"], [3], lifecycle=frozenset()))
    (task,) = study_tasks({}, 1, base=base, policies=["confidence"], capacities=[3])
    assert task.lifecycle == frozenset(MIDDLEWARE)
    kept_all = run_task(task).query("policy == 'keep-all'").iloc[0]
    assert kept_all["final_size"] < kept_all["facts_added"]  # the admission gate refused some
    (alone,) = study_tasks({}, 1, base=base, policies=["confidence"], capacities=[3], lifecycle=frozenset())
    kept_all = run_task(alone).query("policy == 'keep-all'").iloc[0]
    assert kept_all["final_size"] == kept_all["facts_added"]
