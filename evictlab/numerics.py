"""Which route gives Python's doubles for numpy's transcendental functions on this machine.

At the ground, so that every run record's provenance names the route
(:func:`evictlab.results.provenance`) and :class:`evictlab.policies.arrays.Numerics` takes it.
"""

from __future__ import annotations

from collections.abc import Mapping

from numpy._core._multiarray_umath import __cpu_features__  # type: ignore[import-not-found]

#: numpy's CPU features under which it computes float64 exp/log/log1p/power with its own SIMD
#: kernels (numpy 2.4 dispatches them to X86_V4; earlier versions to AVX512F and AVX512_SKX).
OWN_KERNELS = ("AVX512F", "AVX512_SKX", "X86_V4")


def vector_maths(features: Mapping[str, bool]) -> bool:
    """Whether numpy's float64 ``exp``, ``log``, ``log1p`` and ``power`` give Python's doubles here.

    Why: on x86 without the kernels of :data:`OWN_KERNELS`, numpy's float64 loops call the C
    library's ``exp``, ``log``, ``log1p`` and ``pow`` element by element, the very functions
    ``math`` and float ``**`` call (the same doubles on 10^6 samples each; tests/test_rank_keys.py
    compares the routes). Otherwise the scalar route. ``features``: numpy's ``__cpu_features__``.
    """
    return bool(features.get("SSE2")) and not any(features.get(name) for name in OWN_KERNELS)


#: Whether numpy's functions are Python's here (:func:`vector_maths` of this machine's features).
VECTOR_MATHS = vector_maths(__cpu_features__)


def route_name(vector: bool) -> str:
    """A route's name in run records: ``vector`` or ``scalar`` (the same doubles either way)."""
    return "vector" if vector else "scalar"


#: This machine's route (:func:`vector_maths`), by name.
ROUTE = route_name(VECTOR_MATHS)
