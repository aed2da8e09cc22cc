"""``evictlab data fetch``: the explicit, hash-checked download of the pinned LongMemEval file.

Spec section 0, item 2: evictlab never downloads the dataset on its own and never commits it.
This module runs only when a user asks for it. It fetches the pinned revision from the primary
host (or the same path on a mirror host, or a full URL), streams it into a temporary file in
the destination folder, and makes the file visible under its final name only after its SHA-256
matches the pin. A mismatch deletes the temporary file. An existing file is never replaced:
if it already holds the pinned bytes there is nothing to do, otherwise it is an error.

The default destination is ``$XDG_CACHE_HOME/evictlab/<filename>`` (``~/.cache/evictlab/`` when
the variable is unset), outside the work tree; ``.gitignore`` also ignores
``longmemeval_oracle*.json`` in case a user downloads into the repository.
"""

from __future__ import annotations

import contextlib
import hashlib
import http.client
import os
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

from .. import __version__
from ..errors import ContractError, DatasetError, OutputExistsError
from ..readers import MAX_DATASET_BYTES
from .protocol import DatasetPin, load_config, sha256_file

PRIMARY_HOST = "https://huggingface.co"
CHUNK_BYTES = 1 << 20
DEFAULT_TIMEOUT_SECONDS = 60.0


class FetchError(DatasetError):
    """The download failed, or its bytes do not have the pinned SHA-256."""


@dataclass(frozen=True)
class FetchResult:
    path: Path
    sha256: str
    size: int
    url: str | None  # None when the file was already in place
    downloaded: bool


def pin_from_config(config: str | Path | None = None) -> DatasetPin:
    """The ``dataset`` pin of a protocol config (evictlab's own by default); only that file is read."""
    return load_config(config).dataset


def default_output(pin: DatasetPin) -> Path:
    """Where ``data fetch`` puts the file unless told otherwise: the user's cache folder."""
    cache = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(cache) / "evictlab" / pin.filename


def dataset_url(pin: DatasetPin, host: str = PRIMARY_HOST) -> str:
    """``{host}/datasets/{repository}/resolve/{revision}/{filename}``; ``host`` may be a mirror."""
    base = _checked_url(host, "host")
    path = "/".join(urllib.parse.quote(part) for part in (pin.repository, "resolve", pin.revision, pin.filename))
    return f"{base.rstrip('/')}/datasets/{path}"


def fetch_dataset(
    pin: DatasetPin, output: str | Path | None = None, *, mirror: str | None = None, url: str | None = None,
    progress: bool = True, timeout: float = DEFAULT_TIMEOUT_SECONDS,
) -> FetchResult:
    """Download the file ``pin`` names into ``output`` and check it against ``pin.sha256``.

    ``mirror`` replaces the primary host; ``url`` replaces the whole address (the pin still
    decides which bytes are accepted). Raises :class:`FetchError` for network and HTTP errors and
    for a hash mismatch (nothing is left at ``output``), and :class:`OutputExistsError` if
    ``output`` exists with other content.
    """
    if mirror is not None and url is not None:
        raise ContractError("give either a mirror host or a full URL, not both")
    target = Path(output) if output is not None else default_output(pin)
    if target.exists():
        return _existing(target, pin)
    source = _checked_url(url, "URL", allow_query=True) if url is not None else dataset_url(pin, mirror or PRIMARY_HOST)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".part", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            digest, size = _download(source, handle, target.name, progress=progress, timeout=timeout)
            handle.flush()
            os.fsync(handle.fileno())
        if digest != pin.sha256:
            raise FetchError(
                f"{source}: downloaded {size} bytes with SHA-256 {digest}, expected the pinned"
                f" {pin.sha256} ({pin.repository} {pin.filename}); nothing was written to {target}"
            )
        if not _publish(Path(temporary), target):
            return _existing(target, pin)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temporary)
    return FetchResult(target, digest, size, source, downloaded=True)


def _existing(target: Path, pin: DatasetPin) -> FetchResult:
    if not target.is_file():
        raise OutputExistsError(f"{target} exists and is not a file")
    actual = sha256_file(target)
    if actual != pin.sha256:
        raise OutputExistsError(
            f"{target} already exists with SHA-256 {actual}, not the pinned {pin.sha256};"
            " refusing to overwrite it (move it away or choose another --output)"
        )
    return FetchResult(target, actual, target.stat().st_size, None, downloaded=False)


def _download(source: str, handle: Any, label: str, *, progress: bool, timeout: float) -> tuple[str, int]:
    """Stream ``source`` into ``handle``; return the SHA-256 and the byte count."""
    request = urllib.request.Request(source, headers={"User-Agent": f"evictlab/{__version__}"})
    digest = hashlib.sha256()
    size = 0
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            length = response.headers.get("Content-Length")
            expected = int(length) if length and length.isdigit() else None
            if expected is not None and expected > MAX_DATASET_BYTES:
                raise FetchError(
                    f"{source}: announces {expected} bytes, over evictlab's limit of {MAX_DATASET_BYTES} for a dataset"
                )
            with tqdm(total=expected, unit="B", unit_scale=True, unit_divisor=1024, desc=label,
                      disable=not progress, leave=True) as bar:
                for block in iter(lambda: response.read(CHUNK_BYTES), b""):
                    size += len(block)
                    if size > MAX_DATASET_BYTES:  # an endless body never fills the disk
                        raise FetchError(
                            f"{source}: sent more than evictlab's limit of {MAX_DATASET_BYTES} bytes for a dataset"
                        )
                    handle.write(block)
                    digest.update(block)
                    bar.update(len(block))
    except FetchError:
        raise
    except urllib.error.HTTPError as error:
        raise FetchError(f"{source}: HTTP {error.code} {error.reason}") from None
    except urllib.error.URLError as error:
        raise FetchError(f"{source}: cannot download ({error.reason})") from None
    except (OSError, ValueError, http.client.HTTPException) as error:  # timeouts, resets, short bodies
        raise FetchError(f"{source}: download failed after {size} bytes ({error})") from None
    if expected is not None and size != expected:
        raise FetchError(f"{source}: the server announced {expected} bytes but sent {size}")
    return digest.hexdigest(), size


def _publish(temporary: Path, target: Path) -> bool:
    """Give the verified file its final name without replacing anything; False if ``target`` appeared meanwhile."""
    try:
        # A hard link fails if the name exists, unlike a rename, which would replace it.
        os.link(temporary, target)
    except FileExistsError:
        return False
    except OSError:
        # File systems without hard links: a rename, after checking the name is still free.
        if target.exists():
            return False
        os.replace(temporary, target)
    return True


def _checked_url(value: str, what: str, *, allow_query: bool = False) -> str:
    parts = urllib.parse.urlsplit(value)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.fragment or (parts.query and not allow_query):
        extra = "a fragment" if allow_query else "a query or fragment"
        raise ContractError(f"{what} must be an http(s) address without {extra}, got {value!r}")
    return value
