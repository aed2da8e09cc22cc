"""Each policy's ``rank_keys`` orders and ties facts exactly as its scalar ``score`` does.

On random snapshots (tests/strategies.py: every fallback of spec 1.2, small value pools so
exact ties are frequent) and random parameters, for every registered policy and a few
modified specs: the vectorised keys of each fact equal the scalar rank keys of its
``Decision`` (so the ties are the same), ``-keys[value_key]`` is its score, and the keys
sorted with the input position last give the scalar ranking.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from strategies import clocks, policy_params, snapshots

from evictlab.policies import known_policies, resolve_policy, select
from evictlab.policies.arrays import Params, Signals
from evictlab.policies.signals import fact_key

SPECS = (*known_policies(), "lru+reserve(correction,0.1,10)", "lfu-aging(half_life_days=0.5)",
         "dory(recency_rate_per_day=2,archive_threshold=0.5)", "memorybank(expiry_days=0)",
         "generative-agents(decay_per_hour=0.5)", "memoryos-heat(time_constant_hours=0.1)")  # fmt: skip


def same(first: float, second: float) -> bool:
    """The same double, the sign of a zero included (NaN equals NaN)."""
    return repr(float(first)) == repr(float(second))


def vector_keys(policy, facts, usage, now, params, seed, support):
    signals = Signals.of_facts(facts, now, usage, support)
    keys = [np.broadcast_to(key, signals.shape) for key in policy.rank_keys(signals, Params.of(params, seed))]
    return [tuple(float(key[index]) for key in keys) for index in range(len(facts))]


@pytest.mark.parametrize("spec", SPECS)
@settings(max_examples=50, deadline=None)  # per policy: 50 x every registered one
@given(snapshots(unique_ids=True), clocks(), policy_params(), st.integers(0, 3), st.data())
def test_rank_keys_equal_the_scalar_order_ties_included(spec, snapshot, now, params, seed, data):
    facts, usage = snapshot
    ids = [fact_key(fact, index) for index, fact in enumerate(facts)]
    support = data.draw(st.sets(st.sampled_from(ids), max_size=2)) if ids else set()
    policy = resolve_policy(spec)
    decision = select(spec, facts, len(facts) + 1, usage=usage, now=now, params=params,
                      support_fact_ids=support, seed=seed)  # fmt: skip
    keys = vector_keys(policy, facts, usage, now, params, seed, support)
    for index, key in enumerate(ids):
        assert len(keys[index]) == len(decision.rank_keys[index])
        assert all(map(same, keys[index], decision.rank_keys[index])), (index, keys[index], decision.rank_keys[index])
        assert same(-keys[index][policy.value_key], decision.scores[key].value)
    ranked = sorted(range(len(facts)), key=lambda index: (*keys[index], index))
    assert tuple(ranked) == decision.ranking


@given(snapshots(unique_ids=True), clocks(), policy_params())
@settings(max_examples=60, deadline=None)
def test_keys_over_settings_equal_the_keys_of_each_setting(snapshot, now, params):
    facts, usage = snapshot
    signals = Signals.of_facts(facts, now, usage)
    other = params.replace(confirmation_half_life_days=7.5, access_half_life_days=1)
    columns = {name: np.array([getattr(params, name), getattr(other, name)]) for name in params.as_dict()}
    (both,) = resolve_policy("hybrid-v1").rank_keys(signals, Params.columns(columns))
    for row, setting in enumerate((params, other)):
        (one,) = resolve_policy("hybrid-v1").rank_keys(signals, Params.of(setting))
        assert np.array_equal(np.broadcast_to(both, (2, 1, len(facts)))[row, 0], one)


def test_mmr_says_it_has_no_rank_keys():
    policy = resolve_policy("confidence+mmr(0.5)")
    assert not policy.vectorised
    with pytest.raises(NotImplementedError, match="greedy"):
        policy.rank_keys(Signals.of_facts([], _clock()), Params.of())


def _clock():
    import datetime as _dt

    return _dt.datetime(2026, 8, 13, tzinfo=_dt.UTC)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.floats(-1e3, 1e5) | st.sampled_from([0.0, -0.0, math.inf]), min_size=1, max_size=40),
    st.lists(st.sampled_from([0.5, 1, 7.5, 30, 90, 0.0]), min_size=1, max_size=5),
)
def test_numerics_apply_the_scalar_function_to_every_element(days, half_lives):
    from evictlab.policies import arrays
    from evictlab.policies.signals import decay

    grid = np.array(days)[None, :]
    lives = np.array(half_lives, dtype=float)[:, None]
    tabled = arrays.Numerics(vector=False).decay(grid, lives)
    expected = np.array([[decay(d, h) for d in days] for h in half_lives])
    assert tabled.tobytes() == expected.tobytes()


def test_the_vector_route_only_without_numpys_own_kernels():
    from numpy._core._multiarray_umath import __cpu_dispatch__, __cpu_features__

    from evictlab.numerics import OWN_KERNELS, ROUTE, vector_maths
    from evictlab.policies.arrays import EXACT

    assert vector_maths({"SSE2": True, "AVX2": True, "X86_V3": True})
    for name in OWN_KERNELS:
        assert not vector_maths({"SSE2": True, "X86_V3": True, name: True})
    assert not vector_maths({"ASIMD": True})  # off x86: the scalar route
    # numpy 2.4 dispatches by level: AVX512F present but X86_V4 turned off leaves no kernel of its own.
    levels = ["X86_V3", "X86_V4", "AVX512_ICL"]
    assert vector_maths({"SSE2": True, "AVX512F": True, "AVX512_SKX": False, "X86_V4": False}, levels)
    assert not vector_maths({"SSE2": True, "AVX512F": True, "X86_V4": True}, levels)
    assert EXACT.vector <= vector_maths(__cpu_features__, __cpu_dispatch__)  # and the samples agree
    assert EXACT.route == ROUTE == ("vector" if EXACT.vector else "scalar")


def test_the_vector_route_gives_the_scalar_doubles_and_errors():
    """Bit for bit on random and edge arguments where the vector route is taken (the machine has
    no numpy kernels of its own). Where it is not, numpy's kernels may differ in the last bits,
    but the rules the route restates (decay's clamps, the heat's cap, the non-finite fallback)
    must still agree: within 4 units in the last place, the same non-finite values and errors."""
    from evictlab.policies.arrays import EXACT, Numerics

    vector, scalar = Numerics(vector=True), Numerics(vector=False)
    rng = np.random.default_rng(7)
    edges = np.array([0.0, -0.0, 1.0, -1.0, 1e-320, -1e-320, 0.5, 2.0, 1e300, -1e300, math.inf, -math.inf, math.nan])
    days = np.concatenate([rng.uniform(-5, 5000, 20_000), np.exp(rng.uniform(-30, 10, 5_000)), edges])
    lives = np.concatenate([rng.uniform(0.1, 400, 20_000), np.exp(rng.uniform(-10, 8, 5_000)), edges])
    heats = np.concatenate([rng.uniform(0, 12, 20_000), np.exp(rng.uniform(-40, 5, 5_000)), np.abs(edges)])
    positive = np.concatenate([np.exp(rng.uniform(-700, 700, 25_000)), np.abs(edges[2:])])  # log(0) raises
    with np.errstate(invalid="ignore"):  # the edges divide inf by inf and 0 by 0: NaN arguments on purpose
        ratios = -np.abs(days) / lives
    cases = [
        ("decay", (days, lives)), ("decay", (days[:, None][:40], edges)), ("heat", (heats, days, lives)),
        ("heat", (heats, days, 30.0)), ("exp", (ratios,)), ("exp", (rng.uniform(-745, 709, 25_000),)),
        ("log", (positive,)), ("log", (positive + 1,)), ("power", (rng.uniform(0, 1, 25_000), days[:-13])),
        ("power", (0.995, np.abs(days))),
        ("power", (np.array([[0.5], [1.0], [math.inf], [math.nan]]), edges[[0, 1, 2, 4, 6, 7, 10, 11, 12]])),
    ]
    for name, args in cases:
        fast, slow = getattr(vector, name)(*args), getattr(scalar, name)(*args)
        assert fast.shape == slow.shape, name
        if EXACT.vector:
            assert fast.tobytes() == slow.tobytes(), name
        else:
            finite = np.isfinite(slow)
            assert np.array_equal(np.isfinite(fast), finite), name
            assert fast[~finite].tobytes() == slow[~finite].tobytes(), name
            ulps = np.abs(fast[finite] - slow[finite]) / np.spacing(np.abs(slow[finite]))
            assert ulps.max(initial=0) <= 4, name
    for name, args, error in (("exp", (np.array([1.0, 1000.0]),), OverflowError),
                              ("log", (np.array([1.0, -1.0]),), ValueError),
                              ("log", (np.array([0.0]),), ValueError),
                              ("power", (np.array([0.0]), -1.0), ZeroDivisionError)):
        for route in (vector, scalar):
            with pytest.raises(error):
                getattr(route, name)(*args)


def test_the_scalar_route_gives_pythons_doubles_element_by_element():
    """The scalar route takes exact array forms for powers and exp where the machine confirmed
    them (float_power; complex exp up to 709): each method must still give, bit for bit, the
    scalar function called on every element, across the range and at the edges (exp just under
    and over 709, where the C library's complex exp starts to scale; overflow; tiny arguments)."""
    from evictlab.numerics import COMPLEX_EXP_LIMIT
    from evictlab.policies.arrays import Numerics
    from evictlab.policies.signals import decay, heat_component

    route = Numerics(vector=False)
    rng = np.random.default_rng(11)
    near = np.nextafter(COMPLEX_EXP_LIMIT, [-math.inf, math.inf])
    exponents = np.concatenate([rng.uniform(-745, 709.78, 40_000), rng.uniform(708.5, 709.78, 2_000),
                                -np.exp(rng.uniform(-40, 6, 5_000)), near, [COMPLEX_EXP_LIMIT, 0.0, -0.0, -math.inf]])
    days = np.concatenate([rng.uniform(-5, 5000, 20_000), np.exp(rng.uniform(-30, 10, 5_000)), [0.0, -0.0, math.nan]])
    lives = rng.uniform(0.01, 400, len(days))
    heats = np.exp(rng.uniform(-40, 5, len(days)))
    cases = [
        ("exp", math.exp, (exponents,)), ("decay", decay, (days, lives)), ("decay", decay, (days, 30.0)),
        ("power", pow, (rng.uniform(0, 1, len(days)), np.abs(days))), ("power", pow, (2.0, -np.abs(days) / lives)),
        ("heat", heat_component, (heats, days, lives)), ("heat", heat_component, (heats, days, 1.0)),
        ("log", math.log, (np.exp(rng.uniform(-700, 700, 20_000)),)),
    ]
    for name, function, args in cases:
        arrays = np.broadcast_arrays(*(np.asarray(arg, dtype=np.float64) for arg in args))
        expected = np.array([function(*values) for values in zip(*(array.tolist() for array in arrays))])
        assert getattr(route, name)(*args).tobytes() == expected.tobytes(), name
    with pytest.raises(OverflowError):
        route.exp(np.array([709.0, 709.79]))


def test_numerics_keep_negative_zero_apart():
    from evictlab.policies.arrays import EXACT

    assert [math.copysign(1, value) for value in EXACT.apply(math.log1p, np.array([0.0, -0.0]))] == [1.0, -1.0]
