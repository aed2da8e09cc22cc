"""Adding a policy takes one module and one registration; nothing else changes."""

from __future__ import annotations

import pkgutil
from collections import Counter

import pytest
from test_zoo import CLOCK

import evictlab.policies as policies
from evictlab.errors import UnknownPolicyError
from evictlab.policies import Policy, Score, get_policy, known_policies, register, registry, select
from evictlab.policies.modifiers import resolve_policy

NOT_POLICY_MODULES = {"arrays", "base", "registry", "signals", "modifiers", "ties"}


@pytest.fixture
def scratch_registry(monkeypatch):
    """Registrations made in a test vanish after it."""
    monkeypatch.setattr(registry, "_POLICIES", dict(registry._POLICIES))


def test_a_policy_defined_anywhere_is_usable_once_registered(scratch_registry):
    @register
    class ShortestFirst(Policy):
        name = "test-shortest-first"
        summary = "Keep the facts with the shortest content."
        component_names = ("length",)

        def score(self, facts, context):
            return [
                Score(-len(fact["content"]), {"length": len(fact["content"])}) for fact in facts
            ]

    assert "test-shortest-first" in known_policies()
    facts = [
        {"id": "a", "content": "long text"},
        {"id": "b", "content": "short"},
        {"id": "c", "content": "x"},
    ]
    decision = select("test-shortest-first", facts, 2, now=CLOCK)
    assert decision.kept_ids == ["c", "b"]
    assert [item.fact_id for item in decision.evicted] == ["a"]
    assert (
        resolve_policy("test-shortest-first+reserve(context,0.5,1)").name
        == "test-shortest-first+reserve(context,0.5,1)"
    )


def test_the_scratch_registration_did_not_leak():
    with pytest.raises(UnknownPolicyError):
        get_policy("test-shortest-first")


def test_a_name_cannot_be_registered_twice(scratch_registry):
    class Impostor(Policy):
        name = "lru"

    with pytest.raises(TypeError, match="registered twice"):
        register(Impostor)


@pytest.mark.parametrize("trait", ["role", "admission", "default_tie_break"])
def test_a_misspelt_trait_fails_at_registration(scratch_registry, trait):
    misspelt = type("Misspelt", (Policy,), {"name": "test-misspelt", trait: "admitt"})
    with pytest.raises(TypeError, match=f"{trait} is 'admitt', not one of"):
        register(misspelt)


def test_every_policy_module_registers_one_or_two_policies():
    per_module = Counter(type(get_policy(name)).__module__ for name in known_policies())
    modules = [
        f"{policies.__name__}.{module.name}"
        for module in pkgutil.iter_modules(policies.__path__)
        if module.name not in NOT_POLICY_MODULES and not module.name.startswith("_")
    ]
    assert modules, "no policy modules found"
    assert set(per_module) == set(modules)
    assert all(1 <= per_module[module] <= 2 for module in modules), per_module
