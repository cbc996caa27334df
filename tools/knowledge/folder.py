"""The runbook folder: which files are runbooks, and reading one without leaving the folder.

The folder is someone's content, not the operator's machine: it is walked by the file-trust rule
(`tools.file_trust.walk_folder`), so a symbolic link (to a file or a folder) that resolves outside the
configured folder is never followed (`/etc/passwd` or `/proc/self/environ` linked in as `notes.md`
never reaches the index, the model or the audit), a file another user planted is left out, and a file
over the size cap (`[knowledge] max_file_bytes`) is skipped, so one huge file cannot stall every
lookup. Skipped files are listed (`SkippedFile`) and logged, never shown to the model.

The folder is listed again at every lookup (a changed runbook is searched as it is now); the walk asks
the kernel only what it must.
"""

from __future__ import annotations

import importlib.resources
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from tools.adapter import ToolError
from tools.file_trust import SkippedFile as SkippedFile  # part of this module's answer (`RunbookListing`)
from tools.file_trust import read_bounded_file, walk_folder
from tools.knowledge.runbook import is_markdown
from tools.vocabulary import ErrorCode

DEFAULT_MAX_FILE_BYTES = 2 * 1024 * 1024


def bundled_knowledge_path() -> Path:
    """The demo runbooks shipped with the package, used when no `[knowledge] path` is configured."""
    return Path(str(importlib.resources.files("tools") / "data" / "knowledge"))


class ListedFile(NamedTuple):  # a tuple: every lookup lists every runbook, so it is made cheaply
    source: str  # the path under the folder, `/`-separated: what the model sees and reads back
    path: str  # where it is read from (a link inside the folder already resolved)
    version: tuple[int, int]  # mtime in ns and size: a changed pair means a changed runbook


@dataclass(frozen=True)
class Listing:
    files: tuple[ListedFile, ...]
    skipped: tuple[SkippedFile, ...]


def list_runbooks(folder: Path, max_file_bytes: int) -> Listing:
    """Every `*.md`/`*.markdown` file under `folder` that the file-trust rule lets in, and the ones it
    leaves out (`tools.file_trust.walk_folder`)."""
    if not folder.is_dir():
        raise ToolError(ErrorCode.UNAVAILABLE)
    found: list[ListedFile] = []
    skipped: list[SkippedFile] = []
    try:
        for item in walk_folder(folder, wanted=is_markdown, max_file_bytes=max_file_bytes):
            if isinstance(item, SkippedFile):
                skipped.append(item)
            else:
                found.append(ListedFile(item.source, item.path, (item.info.st_mtime_ns, item.info.st_size)))
    except OSError as exc:  # the folder itself cannot be read: UNAVAILABLE, not an empty one
        raise ToolError(ErrorCode.UNAVAILABLE) from exc
    found.sort(key=lambda item: item.source)
    skipped.sort(key=lambda item: item.source)
    return Listing(tuple(found), tuple(skipped))


def read_runbook_text(path: Path | str, max_bytes: int) -> str | None:
    """The file's text, or None when it cannot be read or has grown past the cap since it was listed
    (read by the file-trust rule: no link followed, a FIFO swapped in refused, never waited on)."""
    try:
        data = read_bounded_file(Path(path), max_bytes)
    except OSError:
        return None
    return data.decode("utf-8", errors="replace")
