"""Policy registry: a policy module registers its class with :func:`register`."""

from __future__ import annotations

from typing import Any

from ..errors import UnknownPolicyError
from .base import ADMISSIONS, ROLES, Policy
from .ties import TIE_BREAKS

_POLICIES: dict[str, type[Policy]] = {}


#: The traits a policy class declares as one of a few words: trait -> the words it may be.
_WORDS = {"role": ROLES, "admission": ADMISSIONS, "default_tie_break": TIE_BREAKS}


def register(cls: type[Policy]) -> type[Policy]:
    """Class decorator adding a policy under its ``name``; a misspelt trait fails at import."""
    if not cls.name:
        raise TypeError(f"{cls.__name__} has no policy name")
    for trait, words in _WORDS.items():
        if getattr(cls, trait) not in words:
            raise TypeError(f"policy {cls.name!r}: {trait} is {getattr(cls, trait)!r}, not one of {', '.join(words)}")
    if cls.name in _POLICIES and _POLICIES[cls.name] is not cls:
        raise TypeError(f"policy name {cls.name!r} registered twice")
    _POLICIES[cls.name] = cls
    return cls


def known_policies() -> list[str]:
    return sorted(_POLICIES)


def policy_class(name: str) -> type[Policy]:
    """The registered class of the policy called ``name``: its rule and its traits."""
    try:
        return _POLICIES[name]
    except KeyError:
        raise UnknownPolicyError(
            f"unknown policy {name!r}; known policies: {', '.join(known_policies())}"
        ) from None


def get_policy(name: str, **params: Any) -> Policy:
    """A fresh instance of the policy called ``name``, with any of its declared parameters.

    ``get_policy("lfu-aging", half_life_days=7)``; an undeclared or out-of-range parameter is
    a :class:`~evictlab.errors.ContractError`.
    """
    return policy_class(name)(**params)
