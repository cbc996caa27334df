"""The runbook folder: which files are runbooks, and reading one without leaving the folder.

The folder is someone's content, not the operator's machine: a symbolic link (to a file or a folder)
that resolves outside the configured folder is never followed, so `/etc/passwd` or
`/proc/self/environ` linked in as `notes.md` never reaches the index, the model or the audit. A file
over the size cap (`[knowledge] max_file_bytes`) is skipped, so one huge file cannot stall every
lookup. Skipped files are listed (`SkippedFile`) and logged, never shown to the model.

The folder is listed again at every lookup (a changed runbook is searched as it is now), so the walk
asks the kernel only what it must: one `stat` per entry, a `realpath` only for symbolic links.
"""

from __future__ import annotations

import importlib.resources
import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from tools.adapter import ToolError
from tools.knowledge.runbook import is_markdown
from tools.vocabulary import ErrorCode

DEFAULT_MAX_FILE_BYTES = 2 * 1024 * 1024
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def bundled_knowledge_path() -> Path:
    """The demo runbooks shipped with the package, used when no `[knowledge] path` is configured."""
    return Path(str(importlib.resources.files("tools") / "data" / "knowledge"))


@dataclass(frozen=True)
class SkippedFile:
    """A runbook entry of the folder that is not indexed, and why (for operators and the log only)."""

    source: str
    reason: str  # OUTSIDE_FOLDER, TOO_LARGE, NOT_A_FILE, UNREADABLE


class ListedFile(NamedTuple):  # a tuple: every lookup lists every runbook, so it is made cheaply
    source: str  # the path under the folder, `/`-separated: what the model sees and reads back
    path: str  # where it is read from (a link inside the folder already resolved)
    version: tuple[int, int]  # mtime in ns and size: a changed pair means a changed runbook


@dataclass(frozen=True)
class Listing:
    files: tuple[ListedFile, ...]
    skipped: tuple[SkippedFile, ...]


def list_runbooks(folder: Path, max_file_bytes: int) -> Listing:
    """Every `*.md`/`*.markdown` regular file under `folder`, reached only through links inside it."""
    if not folder.is_dir():
        raise ToolError(ErrorCode.UNAVAILABLE)
    try:
        root = folder.resolve(strict=True)
        with os.scandir(root):  # an unreadable folder is UNAVAILABLE, not an empty one
            pass
    except OSError as exc:
        raise ToolError(ErrorCode.UNAVAILABLE) from exc
    found: list[ListedFile] = []
    skipped: list[SkippedFile] = []
    inside = os.path.join(str(root), "")  # "/srv/runbooks/": a prefix no sibling folder shares
    visited = {str(root)}
    pending = [(str(root), "")]
    while pending:
        folder_path, prefix = pending.pop()
        try:
            with os.scandir(folder_path) as scan:
                entries = sorted(scan, key=lambda entry: entry.name)
        except OSError:
            skipped.append(SkippedFile(prefix or ".", "UNREADABLE"))
            continue
        for entry in entries:
            source = f"{prefix}{entry.name}"
            markdown = is_markdown(entry.name)
            real = entry.path
            try:
                if entry.is_symlink():
                    real = os.path.realpath(entry.path)
                    if not real.startswith(inside):
                        if markdown or os.path.isdir(real):
                            skipped.append(SkippedFile(source, "OUTSIDE_FOLDER"))
                        continue
                    info = os.stat(real)
                elif not markdown and not entry.is_dir(follow_symlinks=False):
                    continue  # neither a runbook nor a folder: not worth a stat
                else:
                    info = entry.stat(follow_symlinks=False)
            except OSError:
                if markdown:
                    skipped.append(SkippedFile(source, "UNREADABLE"))
                continue
            if stat.S_ISDIR(info.st_mode):
                if real not in visited:  # a link back up the tree is followed once, never in a loop
                    visited.add(real)
                    pending.append((real, f"{source}/"))
            elif not markdown:
                continue
            elif not stat.S_ISREG(info.st_mode):
                skipped.append(SkippedFile(source, "NOT_A_FILE"))
            elif info.st_size > max_file_bytes:
                skipped.append(SkippedFile(source, "TOO_LARGE"))
            else:
                found.append(ListedFile(source, real, (info.st_mtime_ns, info.st_size)))
    found.sort(key=lambda item: item.source)
    skipped.sort(key=lambda item: item.source)
    return Listing(tuple(found), tuple(skipped))


def read_runbook_text(path: Path | str, max_bytes: int) -> str | None:
    """The file's text, or None when it cannot be read or has grown past the cap since it was listed.

    Opened without following a link and without blocking (a FIFO swapped in is refused, not waited on).
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | _NOFOLLOW)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as stream:
        if not stat.S_ISREG(os.fstat(stream.fileno()).st_mode):
            return None
        data = stream.read(max_bytes + 1)
    if len(data) > max_bytes:
        return None
    return data.decode("utf-8", errors="replace")
