"""The embedded demo dataset: a deterministic, LongMemEval-shaped file that evictlab generates.

Every command and notebook runs on a fresh machine against this file (spec section 0, item 3),
with the demo's own official manifest, derived from the file by the protocol's selection rule
(spec 2.3). This module opens it; :mod:`evictlab.core.demo_generator` writes it.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from ..resources import DATA_DIR
from .dataset import Dataset, check_selection, load_dataset, select_official
from .protocol import DatasetPin, Protocol, sha256_file

GENERATOR_VERSION = "evictlab-demo-generator-v1"
DEMO_DIR = DATA_DIR / "demo"
DEMO_FILENAME = "longmemeval-demo.json"
DEMO_DATASET = DEMO_DIR / DEMO_FILENAME
DEMO_MANIFEST = DEMO_DIR / "manifest.json"
STORIES_FILE = DEMO_DIR / "stories.json"  # the text the generator fills in
DEMO_REPOSITORY = "evictlab/demo"
# A stand-in for a git revision: 40 hex characters that change with the generator version.
DEMO_REVISION = hashlib.sha256(GENERATOR_VERSION.encode("utf-8")).hexdigest()[:40]
DEMO_SHA256 = "145cc9337f80410d38467c57a79c90279e52fb7eda3dc20b69a874d0112af137"
DEMO_PIN = DatasetPin(DEMO_REPOSITORY, DEMO_REVISION, DEMO_FILENAME, DEMO_SHA256)


def demo_protocol(protocol: Protocol) -> Protocol:
    """``protocol`` with the demo's committed official manifest in place of its own."""
    return protocol.with_official_manifest(DEMO_MANIFEST)


def load_demo(protocol: Protocol | None = None, *, path: str | os.PathLike | None = None) -> Dataset:
    """Load the committed demo file, checking its SHA-256 against :data:`DEMO_PIN`.

    With ``protocol`` (normally from :func:`demo_protocol`), the recomputed selection is also
    checked against that protocol's official manifest.
    """
    dataset = load_dataset(Path(path or DEMO_DATASET), DEMO_PIN)
    if protocol is not None:
        selection = select_official(dataset, protocol.official, "session")
        check_selection(selection, protocol.official, protocol.files.official_manifest)
    return dataset


def open_dataset(
    protocol: Protocol, path: str | os.PathLike | None = None, *, allow_unpinned: bool = False,
    keep_official_manifest: bool = False,
) -> tuple[Protocol, Dataset]:
    """The dataset a command or notebook works on, and the protocol that goes with it.

    With ``path``, the file checked against the config's pin (an unpinned file only with
    ``allow_unpinned``; the returned dataset then says ``pinned = False`` and callers warn).
    Without it, or with a file whose SHA-256 is the demo's (a copy of it, or the embedded file
    itself), the demo, with the demo's own official manifest unless ``keep_official_manifest``
    (the user named a manifest explicitly).
    """
    if path is not None and not is_demo_file(path):
        return protocol, load_dataset(Path(path), protocol.config.dataset, allow_unpinned=allow_unpinned)
    if not keep_official_manifest:
        protocol = demo_protocol(protocol)
    return protocol, load_demo(protocol, path=path)


def is_demo_file(path: str | os.PathLike) -> bool:
    """Whether ``path`` is a readable file with the demo's SHA-256 (identified by content, not name)."""
    path = Path(path)
    return path.is_file() and sha256_file(path) == DEMO_SHA256
