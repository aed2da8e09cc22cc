"""Import direction: every module sits in a layer and imports only from its own layer or below.

The folder tree is the layering. From the bottom up: the ground (the modules at the package
root: errors, run records, locks, file readers, packaged files, the palette, task plumbing),
``policies/`` (their parameters are part of the protocol files, so they sit below the core),
``core/`` (protocol, dataset, pools, run specs), ``selection/``, ``analysis/``, ``workbench/``
(figures, widgets, report, viewer) and ``cli/``. A new module at the package root, or a new
sub-package, must be given a layer here. And no module is over 500 lines (issue #22).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "evictlab"

LAYERS: list[tuple[str, tuple[str, ...]]] = [
    ("ground", ("evictlab", "errors", "results", "locks", "resources", "readers", "writers", "distributed", "palette",
                "times", "intervals", "numerics")),
    ("policies", ("policies",)),
    ("core", ("core",)),
    ("selection", ("selection",)),
    ("analysis", ("analysis",)),
    ("workbench", ("workbench",)),
    ("cli", ("cli", "__main__")),
]


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


#: The package's face (``evictlab/__init__.py``) hands on names of every layer, so it sits above
#: them all; what it defines itself (``__version__``) imports nothing, so lower layers may import that.
FACE = "evictlab"


def layer_of(module: str) -> int | None:
    """The layer index of ``evictlab[.top[...]]``, by its first component below the package."""
    top = module.split(".")[1] if "." in module else "evictlab"
    for index, (_, members) in enumerate(LAYERS):
        if top in members:
            return index
    return None


def imported_modules(path: Path) -> list[tuple[int, str]]:
    """``(line, module)`` for every evictlab module ``path`` imports, at any depth of the file."""
    module = module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names if alias.name.split(".")[0] == "evictlab"]
        elif isinstance(node, ast.ImportFrom):
            if node.level == 0:
                if node.module and node.module.split(".")[0] == "evictlab":
                    found.append((node.lineno, node.module))
                continue
            base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
            if node.module:
                found.append((node.lineno, ".".join([*base, node.module])))
            else:  # "from . import x": x may be a module or a name of the package
                found += [(node.lineno, ".".join([*base, alias.name])) for alias in node.names]
    return found


MODULES = sorted(PACKAGE.rglob("*.py"))


def test_every_module_has_a_layer():
    unplaced = [module_name(path) for path in MODULES if layer_of(module_name(path)) is None]
    assert not unplaced, f"give these modules a layer in {Path(__file__).name}: {unplaced}"


@pytest.mark.parametrize("path", MODULES, ids=lambda path: module_name(path))
def test_no_module_imports_from_a_higher_layer(path):
    own = len(LAYERS) if module_name(path) == FACE else layer_of(module_name(path))
    upward = []
    for line, target in imported_modules(path):
        other = layer_of(target)
        if other is not None and own is not None and other > own:
            upward.append(f"{path.relative_to(PACKAGE.parent)}:{line} imports {target} ({LAYERS[other][0]})")
    assert not upward, f"{module_name(path)} is in layer {LAYERS[own][0]!r}; " + "; ".join(upward)


def test_below_the_face_only_the_version_is_imported_from_the_package_itself():
    taken = []
    for path in MODULES:
        if module_name(path) == FACE:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and imported_package(path, node) == FACE:
                names = [alias.name for alias in node.names if alias.name != "__version__"]
                taken += [(module_name(path), name) for name in names if not is_module(name)]
    assert not taken, f"import these from their own modules, not from the package face: {taken}"


def is_module(name: str) -> bool:
    return (PACKAGE / f"{name}.py").is_file() or (PACKAGE / name).is_dir()


def imported_package(path: Path, node: ast.ImportFrom) -> str:
    if node.level == 0:
        return node.module or ""
    module = module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    base = package.split(".")[: len(package.split(".")) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def test_the_check_sees_an_upward_import(tmp_path, monkeypatch):
    """The checker itself: a core module importing the grader is reported."""
    fake = tmp_path / "evictlab"
    (fake / "core").mkdir(parents=True)
    (fake / "core" / "protocol.py").write_text(
        "from ..analysis.qa.grading import GRADER_VERSION\nimport evictlab.cli\n"
    )
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", fake)
    targets = [target for _, target in imported_modules(fake / "core" / "protocol.py")]
    assert targets == ["evictlab.analysis.qa.grading", "evictlab.cli"]
    assert [layer_of(target) for target in targets] == [4, 6] and layer_of("evictlab.core.protocol") == 2


#: Issue #22's module size: a module past it is a room doing two jobs; split it by job.
MAX_MODULE_LINES = 500


def test_no_module_is_over_the_module_size():
    sizes = {str(path.relative_to(PACKAGE)): len(path.read_text(encoding="utf-8").splitlines())
             for path in sorted(PACKAGE.rglob("*.py"))}
    assert len(sizes) > 100  # the whole package was read
    assert {name: size for name, size in sizes.items() if size > MAX_MODULE_LINES} == {}
