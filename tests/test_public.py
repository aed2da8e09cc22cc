"""The package face: ``import evictlab as el`` gives the spine, imported only when a name is used."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import evictlab as el

HEAVY = ("numpy", "pandas", "matplotlib", "scipy", "pyarrow")


def test_importing_the_package_loads_no_library():
    probe = f"import sys, evictlab; print(*(name for name in {HEAVY!r} if name in sys.modules))"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == ""


def test_all_lists_exactly_the_public_names():
    assert sorted(el.__all__) == sorted(["__version__", *el._PUBLIC])


@pytest.mark.parametrize("name", [name for name in el.__all__ if name != "__version__"])
def test_each_public_name_is_the_object_its_module_defines(name):
    module = importlib.import_module(el._PUBLIC[name])
    expected = module if name == "plots" else getattr(module, name)
    assert getattr(el, name) is expected
    assert name in dir(el)


def test_the_spine_runs_from_the_face_alone():
    pools = el.open_pools(el.parse_spec("pr4810-final"))
    frame = el.decide_grid(pools, [el.resolve_policy("confidence").name, "hybrid-v1"], capacities=[5])
    assert len(frame) == 2 * 45 and set(frame["policy"]) == {"confidence", "hybrid-v1"}
    assert type(el.plots.retention_by_scenario(frame)).__name__ == "Figure"


def test_an_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'open_pool'"):
        el.open_pool  # noqa: B018
