"""Policy registry: a policy module registers its class with :func:`register`."""

from __future__ import annotations

from ..errors import UnknownPolicyError
from .base import Policy

_POLICIES: dict[str, type[Policy]] = {}


def register(cls: type[Policy]) -> type[Policy]:
    """Class decorator adding a policy under its ``name``."""
    if not cls.name:
        raise TypeError(f"{cls.__name__} has no policy name")
    if cls.name in _POLICIES and _POLICIES[cls.name] is not cls:
        raise TypeError(f"policy name {cls.name!r} registered twice")
    _POLICIES[cls.name] = cls
    return cls


def known_policies() -> list[str]:
    return sorted(_POLICIES)


def get_policy(name: str) -> Policy:
    """A fresh instance of the policy called ``name``."""
    try:
        return _POLICIES[name]()
    except KeyError:
        raise UnknownPolicyError(
            f"unknown policy {name!r}; known policies: {', '.join(known_policies())}"
        ) from None
