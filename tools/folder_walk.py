"""The files of a configured folder (runbooks, logs), reached only through links that stay inside it.

A configured folder is someone's content, not the operator's machine: a symbolic link (to a file or
a folder) that resolves outside the folder is never followed, so `/etc/passwd` or
`/proc/self/environ` linked in as `notes.md` or `app.log` never reaches an index, the model or the
audit. A link back up the tree is followed once, never in a loop. What is left out is listed with a
reason, for operators and the log, never for the model.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tools.adapter import ToolError
from tools.vocabulary import ErrorCode


@dataclass(frozen=True)
class SkippedFile:
    """A wanted entry of the folder that is not read, and why (for operators and the log only)."""

    source: str
    reason: str  # OUTSIDE_FOLDER, TOO_LARGE, NOT_A_FILE, UNREADABLE, and the reader's own reasons


@dataclass(frozen=True)
class FolderListing:
    files: list[tuple[str, Path, os.stat_result]]  # (path relative to the folder, real path, stat)
    skipped: tuple[SkippedFile, ...]


def list_folder(
    folder: Path, wanted: Callable[[str], bool], max_file_bytes: int | None = None
) -> FolderListing:
    """Every regular file under `folder` whose name is `wanted`, sorted by relative path.

    An unreadable or missing folder is `UNAVAILABLE`, not an empty one."""
    if not folder.is_dir():
        raise ToolError(ErrorCode.UNAVAILABLE)
    try:
        root = folder.resolve(strict=True)
        with os.scandir(root):
            pass
    except OSError as exc:
        raise ToolError(ErrorCode.UNAVAILABLE) from exc
    found: list[tuple[str, Path, os.stat_result]] = []
    skipped: list[SkippedFile] = []
    visited = {root}
    pending = [(root, "")]
    while pending:
        current, prefix = pending.pop()
        try:
            entries = sorted(os.scandir(current), key=lambda entry: entry.name)
        except OSError:
            skipped.append(SkippedFile(prefix or ".", "UNREADABLE"))
            continue
        for entry in entries:
            source = f"{prefix}{entry.name}"
            real = Path(os.path.realpath(entry.path))
            if entry.is_symlink() and not real.is_relative_to(root):
                if wanted(entry.name) or real.is_dir():
                    skipped.append(SkippedFile(source, "OUTSIDE_FOLDER"))
                continue
            try:
                info = real.stat()
            except OSError:
                if wanted(entry.name):
                    skipped.append(SkippedFile(source, "UNREADABLE"))
                continue
            if stat.S_ISDIR(info.st_mode):
                if real not in visited:
                    visited.add(real)
                    pending.append((real, f"{source}/"))
            elif not wanted(entry.name):
                continue
            elif not stat.S_ISREG(info.st_mode):
                skipped.append(SkippedFile(source, "NOT_A_FILE"))
            elif max_file_bytes is not None and info.st_size > max_file_bytes:
                skipped.append(SkippedFile(source, "TOO_LARGE"))
            else:
                found.append((source, real, info))
    found.sort(key=lambda item: item[0])
    skipped.sort(key=lambda item: item.source)
    return FolderListing(found, tuple(skipped))
