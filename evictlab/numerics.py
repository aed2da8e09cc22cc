"""Which route gives Python's doubles for numpy's transcendental functions on this machine.

At the ground, so that every run record's provenance names the route
(:func:`evictlab.results.provenance`) and :class:`evictlab.policies.arrays.Numerics` takes it.

Two functions have an exact array form on every route, each confirmed on this machine at import
(:func:`agrees`): ``x ** y`` is numpy's ``float_power`` (:data:`POWER_IS_EXACT`) and ``exp(x)``
for ``x <= 709`` the real part of numpy's complex ``exp`` (:data:`COMPLEX_EXP_IS_EXACT`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping

import numpy as np
from numpy._core._multiarray_umath import (  # type: ignore[import-not-found]
    __cpu_dispatch__,
    __cpu_features__,
)

#: numpy's CPU features under which it computes float64 exp/log/log1p/power with its own SIMD
#: kernels (numpy 2.4 dispatches them to X86_V4; earlier versions to AVX512F and AVX512_SKX).
OWN_KERNELS = ("AVX512F", "AVX512_SKX", "X86_V4")


def vector_maths(features: Mapping[str, bool], dispatch: Collection[str] = OWN_KERNELS) -> bool:
    """Whether numpy's float64 ``exp``, ``log``, ``log1p`` and ``power`` give Python's doubles here.

    Why: on x86 without the kernels of :data:`OWN_KERNELS`, numpy's float64 loops call the C
    library's ``exp``, ``log``, ``log1p`` and ``pow`` element by element, the very functions
    ``math`` and float ``**`` call (the same doubles on 10^6 samples each; tests/test_rank_keys.py
    compares the routes). Otherwise the scalar route. ``features``: numpy's ``__cpu_features__``
    (a feature turned off by ``NPY_DISABLE_CPU_FEATURES`` reads False); ``dispatch``: the
    targets numpy was built to dispatch to (``__cpu_dispatch__``). A kernel name that is not one
    of them has no kernel in this build: numpy 2.4 reports ``AVX512F`` but dispatches by x86-64
    level (``X86_V4``).
    """
    own = any(features.get(name) for name in OWN_KERNELS if name in dispatch)
    return bool(features.get("SSE2")) and not own


def route_name(vector: bool) -> str:
    """A route's name in run records: ``vector`` or ``scalar`` (the same doubles either way)."""
    return "vector" if vector else "scalar"


#: The largest argument the complex route of ``exp`` takes: above it the C library's complex
#: ``exp`` scales its argument (by 709 = ``int(1023 * ln 2)`` in glibc) and may differ in the
#: last bit; larger arguments take the scalar function.
COMPLEX_EXP_LIMIT = 709.0


def complex_exp(x: np.ndarray) -> np.ndarray:
    """``exp(x)`` as the real part of ``exp(x + 0j)``; NaN above :data:`COMPLEX_EXP_LIMIT`.

    Why: numpy has no SIMD kernel of its own for complex ``exp``; its loop calls the C library's
    complex ``exp``, which for a zero imaginary part returns ``exp(x) * cos(0)``, ``exp`` being
    the very function ``math.exp`` calls, and ``cos(0)`` exactly 1.
    """
    with np.errstate(all="ignore"):
        return np.where(x <= COMPLEX_EXP_LIMIT, np.exp(np.asarray(x, dtype=np.complex128)).real, np.nan)


def agrees(vector: Callable[..., np.ndarray], scalar: Callable[..., float], *args: np.ndarray) -> bool:
    """Whether ``vector`` gives ``scalar``'s doubles, bit for bit, on every element of ``args``."""
    with np.errstate(all="ignore"):
        found = np.asarray(vector(*args), dtype=np.float64)
    expected = np.fromiter(map(scalar, *(arg.tolist() for arg in args)), dtype=np.float64, count=found.size)
    return found.tobytes() == expected.tobytes()


# The samples of the import-time checks: a few thousand doubles over the ranges rank keys use
# (ages of days and hours over half-lives and rates, tiny and large magnitudes), fixed by a seed.
_SAMPLES = np.random.default_rng(20261206)
_EXPONENTS = np.concatenate([-_SAMPLES.exponential(30.0, 2048), _SAMPLES.uniform(-745.0, 709.0, 2048),
                             -np.exp(_SAMPLES.uniform(-40.0, 6.0, 1024)), [0.0, -0.0, 1.0, -1.0, 709.0]])
# Powers: a base in (0, 1] to a non-negative exponent (a per-hour decay), 2 to any exponent.
_BASES = np.concatenate([_SAMPLES.uniform(0.0, 1.0, 2048), np.full(3072, 2.0), [0.5, 1.0, 0.995, 2.0, 2.0]])
_POWERS = np.where(_BASES < 2.0, np.abs(_EXPONENTS), _EXPONENTS)

#: Whether numpy's ``float_power`` is Python's float ``**`` here (both call the C library's ``pow``).
POWER_IS_EXACT = agrees(np.float_power, pow, _BASES, _POWERS)
#: Whether :func:`complex_exp` is ``math.exp`` here (for arguments up to :data:`COMPLEX_EXP_LIMIT`).
COMPLEX_EXP_IS_EXACT = agrees(complex_exp, math.exp, _EXPONENTS)
#: Whether numpy's functions are Python's in this process: :func:`vector_maths` of its features,
#: confirmed on the samples (a numpy build whose loops do not call the C library fails them).
VECTOR_MATHS = (
    vector_maths(__cpu_features__, __cpu_dispatch__)
    and agrees(np.exp, math.exp, _EXPONENTS)
    and agrees(np.power, pow, _BASES, _POWERS)
    and agrees(np.log, math.log, _BASES[_BASES > 0])
    and agrees(np.log1p, math.log1p, np.abs(_EXPONENTS))
)
#: This process's route (:data:`VECTOR_MATHS`), by name.
ROUTE = route_name(VECTOR_MATHS)
del _SAMPLES, _EXPONENTS, _BASES, _POWERS
