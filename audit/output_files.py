"""Every file the program writes for the operator (exports, `--events`, eval reports, screenshots) is
created here, by one rule: never destroy what the program did not create.

- A new file is created exclusively (`O_CREAT | O_EXCL | O_NOFOLLOW`, mode 0600): an existing file,
  or a symbolic link planted at the path, is never opened, truncated or chmodded.
- An existing file is replaced only when the operator says so (`force`), and only if it is a regular
  file of the operator's own that is not one the program is using (the audit database and its side
  files, compared by device and inode, not by spelling). The new content goes to a new temporary file
  beside it, which `os.replace` puts in place once complete: the old file is never truncated, and a
  link at the path is replaced itself, never followed.
- Only the last folder of the path is created (0700): a mistyped path names the missing folder
  instead of growing a tree of folders somewhere unexpected.
- An existing named pipe (a FIFO a log shipper reads) is written to as a stream: nothing is in it to
  destroy. Devices and other special files are refused like any existing file.
"""

from __future__ import annotations

import contextlib
import io
import os
import secrets
import stat
from collections.abc import Iterable
from pathlib import Path
from types import TracebackType
from typing import TextIO

from audit.files import PRIVATE_FILE, UnsafeFileError, make_last_folder
from tools.file_trust import CLOEXEC as _CLOEXEC
from tools.file_trust import CREATE_NEW as _CREATE_NEW
from tools.file_trust import NOFOLLOW as _NOFOLLOW
from tools.file_trust import is_mine


class OutputExistsError(FileExistsError):
    """The path holds a file already and replacing it was not asked for; the caller says how to."""

    def __init__(self, path: Path) -> None:
        super().__init__(f"{path} already exists")
        self.path = path


def _identity(info: os.stat_result) -> tuple[int, int]:
    return info.st_dev, info.st_ino


def _identities(paths: Iterable[Path]) -> set[tuple[int, int]]:
    found = set()
    for path in paths:
        try:
            found.add(_identity(os.stat(path)))
        except OSError:
            continue  # a protected file that does not exist cannot be overwritten
    return found


def check_replaceable(path: Path, *, force: bool, protected: Iterable[Path] = ()) -> os.stat_result | None:
    """Whether `path` may be written: None when nothing is there, the existing file's status when it
    may be replaced. `OutputExistsError` for a file that is there without `force`, `UnsafeFileError`
    for one that must never be replaced (not a regular file, someone else's, one the program uses)."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    if not force:
        raise OutputExistsError(path)
    if stat.S_ISLNK(info.st_mode):
        raise UnsafeFileError(f"{path} is a symbolic link; it is not replaced")
    if not stat.S_ISREG(info.st_mode):
        raise UnsafeFileError(f"{path} is not a regular file; it is not replaced")
    if not is_mine(info):
        raise UnsafeFileError(f"{path} is owned by another user (uid {info.st_uid}); it is not replaced")
    if _identity(info) in _identities(protected):
        raise UnsafeFileError(f"{path} is the audit database in use; it is never replaced")
    return info


def _is_pipe(path: Path) -> bool:
    try:
        return stat.S_ISFIFO(os.lstat(path).st_mode)
    except OSError:
        return False


def _open_pipe(path: Path) -> int:
    """Open an existing named pipe for writing (waiting for its reader), never through a link."""
    fd = os.open(path, os.O_WRONLY | _NOFOLLOW | _CLOEXEC)
    if not stat.S_ISFIFO(os.fstat(fd).st_mode):  # replaced by something else since the check
        os.close(fd)
        raise UnsafeFileError(f"{path} is no longer a named pipe")
    return fd


class OutputFile:
    """A file being written. `commit()` makes it the file at `path`; `discard()` removes what was written.

    As a context manager it commits on success and discards on an exception.
    """

    def __init__(self, path: Path, *, force: bool = False, protected: Iterable[Path] = ()) -> None:
        self.path = Path(path)
        self._protected = tuple(protected)
        self._replacing = False
        self._pipe = _is_pipe(self.path)
        if self._pipe:
            # A named pipe someone reads (a log shipper): written to as a stream, nothing in it to destroy.
            fd = _open_pipe(self.path)
        else:
            make_last_folder(self.path.parent)
            self._replacing = check_replaceable(self.path, force=force, protected=self._protected) is not None
        # Replacing: write beside the old file, which stays whole until the new one is complete.
        self._written = self._temporary_name() if self._replacing else self.path
        if not self._pipe:
            try:
                fd = os.open(self._written, _CREATE_NEW, PRIVATE_FILE)
            except FileExistsError:
                raise OutputExistsError(self.path) from None  # created by someone else since the check
        self._identity = _identity(os.fstat(fd))
        self.stream: TextIO = io.TextIOWrapper(io.FileIO(fd, "w"), encoding="utf-8")
        self._open = True

    def _temporary_name(self) -> Path:
        return self.path.with_name(f".{self.path.name}.{secrets.token_hex(6)}.tmp")

    def commit(self) -> None:
        if not self._open:
            return
        self._open = False
        try:
            self.stream.close()
            if self._replacing:
                # Again just before the swap: the path may have changed since the first check.
                check_replaceable(self.path, force=True, protected=self._protected)
                os.replace(self._written, self.path)
        except BaseException:
            self._remove_ours()
            raise

    def discard(self) -> None:
        if not self._open:
            return
        self._open = False
        with contextlib.suppress(OSError):  # what could not be flushed is being thrown away anyway
            self.stream.close()
        self._remove_ours()

    def _remove_ours(self) -> None:
        """Remove what this object created, and only that (the same inode at the same name)."""
        if self._pipe:
            return
        try:
            if _identity(os.lstat(self._written)) == self._identity:
                os.unlink(self._written)
        except OSError:
            pass

    def __enter__(self) -> TextIO:
        return self.stream

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        if kind is None:
            self.commit()
        else:
            self.discard()


def write_output(path: Path, text: str, *, force: bool = False, protected: Iterable[Path] = ()) -> None:
    """A whole file written by the rule above."""
    with OutputFile(path, force=force, protected=protected) as stream:
        stream.write(text)
