"""Policy files hold their traits and parameters; one spec grammar names a policy everywhere."""

from __future__ import annotations

import argparse
import io
from contextlib import redirect_stdout

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_zoo import CLOCK, days_before

from evictlab import cli, palette
from evictlab.analysis import zoo
from evictlab.cli._common import parse_csv, with_policy_parameters
from evictlab.errors import ContractError, UnknownPolicyError
from evictlab.policies import (
    ROLES,
    get_policy,
    known_policies,
    policy_class,
    resolve_policy,
    select,
    split_list,
)

# --------------------------------------------------------------------------- the list grammar


def test_a_list_splits_at_commas_outside_parentheses_only():
    assert split_list("lru+reserve(correction,0.1,10), fifo,,confidence+mmr(0.5)") == [
        "lru+reserve(correction,0.1,10)",
        "fifo",
        "confidence+mmr(0.5)",
    ]
    assert split_list("lfu-aging(half_life_days=7)+reserve(correction,0.1,10)", "+") == [
        "lfu-aging(half_life_days=7)",
        "reserve(correction,0.1,10)",
    ]
    assert split_list(" 5, 7 ,9 ") == ["5", "7", "9"]
    assert split_list("") == []


@pytest.mark.parametrize("text", ["lru+reserve(correction,0.1", "lru)", "a(b(c)"])
def test_unbalanced_parentheses_are_refused(text):
    with pytest.raises(ContractError, match=r"not closed|closes nothing"):
        split_list(text)


def test_the_command_line_lists_use_the_same_grammar():
    assert parse_csv("lru+reserve(correction,0.1,10),fifo") == ["lru+reserve(correction,0.1,10)", "fifo"]
    assert parse_csv("5,7,9", int) == [5, 7, 9]
    with pytest.raises(argparse.ArgumentTypeError, match="not closed"):
        parse_csv("lru+reserve(correction,0.1")


# --------------------------------------------------------------------------- specs


@pytest.mark.parametrize(
    "spec",
    [
        "lru",
        "lfu-aging(half_life_days=7)",
        "lfu-aging(half_life_days=7.5)+reserve(correction,0.1,10)",
        "lru+reserve(correction,0.1,10)",
        "confidence+mmr(0.5)",
        "dory(recency_rate_per_day=0.1,archive_threshold=0.2)+mmr(0.25)",
    ],
)
def test_a_policy_is_named_by_its_canonical_spec_which_reads_back(spec):
    policy = resolve_policy(spec)
    assert policy.name == spec
    assert resolve_policy(policy.name).name == spec


def test_spaces_and_parameter_order_are_normalised():
    policy = resolve_policy(" dory( archive_threshold = 0.2 , recency_rate_per_day=0.1 ) + mmr(0.25)")
    assert policy.name == "dory(recency_rate_per_day=0.1,archive_threshold=0.2)+mmr(0.25)"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("lfu-aging(half_life_days)", "expected PARAMETER=VALUE"),
        ("lfu-aging(half_life=3)", "has no parameter half_life; its parameters: half_life_days"),
        ("lru(x=1)", "has no parameter x; its parameters: none"),
        ("lfu-aging(half_life_days=abc)", "'abc' is not a number"),
        ("lfu-aging(half_life_days=0)", r"must be in \[0.01, 36500\], got 0"),
        ("lfu-aging(half_life_days=nan)", "must be a finite number"),
        ("lfu-aging(half_life_days=1,half_life_days=2)", "given twice"),
        ("lru+mmr(1,2)", "mmr\\(\\) takes at most one argument"),
    ],
)
def test_a_spec_it_cannot_read_is_refused_naming_it(spec, message):
    with pytest.raises(ContractError, match=message):
        resolve_policy(spec)


def test_an_unknown_name_lists_the_known_ones():
    with pytest.raises(UnknownPolicyError, match="known policies: confidence"):
        resolve_policy("nope+mmr(0.5)")


# --------------------------------------------------------------------------- parameters


def aging_pool():
    """Fact a: searched 8 times, last 60 days ago; fact b: searched once, today."""
    facts = [
        {"id": "a", "content": "old favourite", "category": "context", "confidence": 0.7, "createdAt": days_before(90)},
        {"id": "b", "content": "new thing", "category": "context", "confidence": 0.7, "createdAt": days_before(90)},
    ]
    usage = {
        "a": {"accessCount": 8, "lastAccessedAt": days_before(60)},
        "b": {"accessCount": 1, "lastAccessedAt": days_before(0)},
    }
    return facts, usage


def test_a_declared_parameter_changes_the_decision():
    facts, usage = aging_pool()
    # 8 * 2^(-60/30) = 2 beats 1; 8 * 2^(-60/7) = 0.02 does not.
    assert select("lfu-aging", facts, 1, usage=usage, now=CLOCK).kept_ids == ["a"]
    assert select("lfu-aging(half_life_days=7)", facts, 1, usage=usage, now=CLOCK).kept_ids == ["b"]
    seven = get_policy("lfu-aging", half_life_days=7)
    assert seven.name == "lfu-aging(half_life_days=7)" and seven.values == {"half_life_days": 7}
    assert get_policy("lfu-aging").values == {"half_life_days": 30}


@pytest.mark.parametrize("name", known_policies())
def test_every_declared_parameter_default_lies_in_its_range(name):
    cls = policy_class(name)
    default = get_policy(name)
    assert default.name == name  # no parameter given: the registered name
    for parameter in cls.parameters:
        assert parameter.low <= parameter.default <= parameter.high, parameter
        assert get_policy(name, **{parameter.name: parameter.default}).values == default.values


def test_seeded_draws_do_not_depend_on_parameters():
    facts, usage = aging_pool()
    plain = select("memorybank-seeded", facts, 1, usage=usage, now=CLOCK, seed=3)
    tuned = select("memorybank-seeded(expiry_days=30)", facts, 1, usage=usage, now=CLOCK, seed=3)
    assert plain.kept_ids == tuned.kept_ids
    assert {k: s.components["survived"] for k, s in plain.scores.items()} == {
        k: s.components["survived"] for k, s in tuned.scores.items()
    }


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(max_size=6) | st.sampled_from(['a"b', "c\\d", "e\nf", "\x00", "日本", ""]), max_size=30),
       st.integers(0, 2**40))
def test_seeded_draws_are_the_documented_generator_s(keys, seed):
    """SHA-256 of the JSON [namespace, seed, sorted ids], then random.random() in sorted-id order,
    a repeated id keeping its last draw (the rule of _zoo.seeded_draws), written out here."""
    import hashlib
    import json
    import random

    from evictlab.policies._zoo import draws_for_keys

    ordered = sorted(keys)
    digest = hashlib.sha256(json.dumps(["random", seed, ordered], ensure_ascii=False).encode("utf-8")).digest()
    draw = random.Random(int.from_bytes(digest[:8], "big")).random
    by_key = dict(zip(ordered, [draw() for _ in ordered]))
    assert draws_for_keys("random", keys, seed).tolist() == [by_key[key] for key in keys]


# --------------------------------------------------------------------------- traits


def test_every_policy_file_declares_its_role_and_colour():
    colours = {name: policy_class(name).color for name in known_policies()}
    palette_colours = {*palette.OKABE_ITO.values(), *palette.OKABE_ITO_SHADES.values()}
    assert set(colours.values()) <= palette_colours, colours
    assert len(set(colours.values())) == len(colours), colours
    assert {policy_class(name).role for name in known_policies()} <= set(ROLES)


def test_the_zoo_reads_its_lists_from_the_policy_traits():
    assert sorted(zoo.SEEDED_POLICIES) == ["memorybank-seeded", "random"]
    assert zoo.BOUND_POLICIES == ("oracle", "keep-all")  # the capacity-respecting bound first
    assert zoo.UNLIMITED_POLICIES == ("keep-all",)
    assert zoo.BASELINE_POLICIES == ("random",)
    assert [zoo.policy_role(p) for p in ("hybrid-v1", "lru", "random", "oracle")] == [
        "deermem", "zoo", "baseline", "bound",
    ]


# --------------------------------------------------------------------------- the commands


def test_param_assignments_expand_a_named_policy_into_one_spec_per_value():
    specs = with_policy_parameters(
        ["lfu-aging+reserve(correction,0.1,10)", "hybrid-v1", "dory"],
        ["confidence_weight=0.5", "lfu-aging.half_life_days=7,30", "dory.archive_threshold=0.1"],
    )
    assert specs == [
        "lfu-aging(half_life_days=7)+reserve(correction,0.1,10)",
        "lfu-aging(half_life_days=30)+reserve(correction,0.1,10)",
        "hybrid-v1",
        "dory(archive_threshold=0.1)",
    ]
    with pytest.raises(ContractError, match="lru is not among the policies"):
        with_policy_parameters(["fifo"], ["lru.x=1"])
    with pytest.raises(ContractError, match="has no parameter x"):
        with_policy_parameters(["lru"], ["lru.x=1"])


def test_run_policy_takes_modifier_specs_and_policy_parameters(tmp_path):
    printed = io.StringIO()
    argv = [
        "run-policy", "--output-dir", str(tmp_path / "run"), "--capacities", "5",
        "--policies", "lru+reserve(correction,0.1,10),lfu-aging",
        "--param", "lfu-aging.half_life_days=7,30",
    ]  # fmt: skip
    with redirect_stdout(printed):
        assert cli.main(argv) == 0
    rows = pd.read_json(tmp_path / "run" / "policy.raw.jsonl", lines=True)
    assert list(dict.fromkeys(rows["policy"])) == [
        "lru+reserve(correction,0.1,10)", "lfu-aging(half_life_days=7)", "lfu-aging(half_life_days=30)",
    ]  # fmt: skip
    # The reservation keeps every correction support (lfu-aging, without it, keeps none).
    rows["retained"] = [set(s) <= set(k) for s, k in zip(rows["support_fact_ids"], rows["kept_fact_ids"])]
    corrections = rows[rows["scenario"] == "correction_reserve"].groupby("policy", sort=False)["retained"].sum()
    assert corrections.to_dict() == {
        "lru+reserve(correction,0.1,10)": 5, "lfu-aging(half_life_days=7)": 0, "lfu-aging(half_life_days=30)": 0,
    }  # fmt: skip
    assert "lru+reserve(correction,0.1,10)" in printed.getvalue()


def test_sweep_refuses_a_protocol_parameter_in_param(tmp_path, capsys):
    assert cli.main(["sweep", "--output-dir", str(tmp_path / "out"), "--param", "confidence_weight=0.5"]) != 0
    assert "sweep takes POLICY.NAME=V,V" in capsys.readouterr().err
