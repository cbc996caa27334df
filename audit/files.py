"""Files this program writes hold operator data (audit rows, SQL text, tracebacks, exported runs).

So they are owner-only: folders we create are 0700, files 0600, whatever the umask. A path is never
followed through a symbolic link (someone who can plant a link next to our file could point our writes
at any file we can write), a file of ours that is group- or world-accessible is tightened, and an
existing file owned by another user is refused: its owner can change it under us. This is the
program-wide file-trust rule (`tools.file_trust`) applied to the audit and the operator's files.
"""

from __future__ import annotations

import io
import os
import stat
from pathlib import Path
from typing import TextIO

from tools.file_trust import CLOEXEC as _CLOEXEC
from tools.file_trust import NOFOLLOW as _NOFOLLOW
from tools.file_trust import PRIVATE_DIR, is_mine
from tools.file_trust import PRIVATE_FILE as PRIVATE_FILE  # the mode our callers' files are made with
from tools.file_trust import UnsafeFileError as UnsafeFileError  # what this module raises


class MissingFolderError(FileNotFoundError):
    """A path whose folder's own folder is missing: only the last level of a path is ever created."""


def check_last_folder(folder: Path) -> bool:
    """Whether `folder` must be created (False: it is a folder already), without creating anything;
    the error says why it cannot be written into: a file in the way, or a missing folder above it.

    A path the operator typed creates at most one folder: a typo (`/srv/audti/2024/audit.db`) is named
    instead of silently growing a tree of folders somewhere unexpected.
    """
    if folder.is_dir():
        return False
    if os.path.lexists(folder):
        raise UnsafeFileError(_not_a_folder(folder))
    for above in folder.parents:
        if above.is_dir():
            return True
        if os.path.lexists(above):
            raise UnsafeFileError(_not_a_folder(above))
        if above.parent.is_dir():  # the highest missing folder: the one the operator must create
            raise MissingFolderError(
                f"folder {above} does not exist (only the last folder of a path is created)"
            )
    return True


def _not_a_folder(path: Path) -> str:
    """What stands where a folder should be, in the words an operator checks with `ls -l`."""
    mode = os.lstat(path).st_mode
    if stat.S_ISLNK(mode):
        return f"{path} is a symbolic link that leads to no folder"
    kind = "a file" if stat.S_ISREG(mode) else "not a folder"
    return f"{path} is {kind}, not a folder" if kind == "a file" else f"{path} is {kind}"


def make_last_folder(folder: Path) -> bool:
    """Create `folder` (0700) when it is missing and its parent exists; True if it was created
    (`check_last_folder` says why it cannot be)."""
    if not check_last_folder(folder):
        return False
    try:
        folder.mkdir(mode=PRIVATE_DIR)
    except FileExistsError:
        return False
    os.chmod(folder, PRIVATE_DIR)  # mkdir's mode is filtered by the umask
    return True


def private_state_dir(path: Path, *, ours: bool = False) -> Path:
    """Create `path` (and missing parents) owner-only.

    An existing folder is used as it is (an operator may share it on purpose), except `ours=True`: the
    program's own state folder, which an older version may have created group- or world-readable.
    """
    missing = [parent for parent in (path, *path.parents) if not parent.exists()]
    for folder in reversed(missing):
        try:
            folder.mkdir(mode=PRIVATE_DIR)
        except FileExistsError:
            continue
        os.chmod(folder, PRIVATE_DIR)  # mkdir's mode is filtered by the umask
    if ours and not missing:
        info = os.stat(path, follow_symlinks=False)
        if stat.S_ISDIR(info.st_mode) and is_mine(info) and stat.S_IMODE(info.st_mode) & 0o077:
            os.chmod(path, PRIVATE_DIR)
    return path


def check_private(fd: int, path: Path | str, *, tighten: bool = True) -> None:
    """The open file is a regular file owned by us; with `tighten`, a mode that lets others read or
    write it is narrowed. Without it nothing is changed: a file not yet known to be ours is left as it is."""
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        raise UnsafeFileError(f"{path} is not a regular file")
    if not is_mine(info):
        raise UnsafeFileError(f"{path} is owned by another user (uid {info.st_uid})")
    if tighten and stat.S_IMODE(info.st_mode) & 0o077:
        os.fchmod(fd, stat.S_IMODE(info.st_mode) & 0o700 | 0o600)


def open_private(path: Path | str, flags: int, *, tighten: bool = True) -> int:
    """`os.open` that never follows a symbolic link, creates files 0600 and checks what it opened
    (`check_private`): someone else's file is refused, not changed."""
    try:
        fd = os.open(path, flags | _NOFOLLOW | _CLOEXEC | os.O_NONBLOCK, PRIVATE_FILE)
    except FileExistsError:
        raise
    except OSError as exc:
        if os.path.islink(path):
            raise UnsafeFileError(f"{path} is a symbolic link; give the real path") from None
        raise UnsafeFileError(f"cannot open {path}: {exc.strerror or exc}") from None
    try:
        check_private(fd, path, tighten=tighten)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_private_append(path: Path) -> TextIO:
    """A log file: appended to (never truncated), created 0600, never through a link.

    A record may quote model text holding a lone surrogate (a library logs a malformed tool call's
    arguments); it is written escaped (`\\ud800`), since a strict encoder would print a traceback."""
    fd = open_private(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
    return io.TextIOWrapper(
        io.FileIO(fd, "w"), encoding="utf-8", errors="backslashreplace", line_buffering=True
    )
