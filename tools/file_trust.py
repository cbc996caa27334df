"""One trust rule for every path the program reads or writes (docs/RELIABILITY.md, "File trust").

Audit files, exports and reports (`audit.files`, `audit.output_files`), the runbook folder
(`tools.knowledge`), the model server's cache and downloads (`console.model_server`) and the log
folder all follow it:

- **Created new, never through a link.** A file the program makes is created with
  `O_CREAT | O_EXCL | O_NOFOLLOW` (0600): a file or a link already at the path is never opened,
  truncated or followed (`create_new`).
- **No link out of a configured folder.** Walking a folder the operator named, a link is followed
  only when it resolves inside that folder (`walk_folder`).
- **Nobody else's entries.** An entry owned by another user than the operator, root, or the owner
  of the configured folder itself is refused: whoever owns it can change it under us
  (`trusted_owner`). A folder the program keeps for itself (a cache) must be the operator's own,
  entry by entry (`private_folder`, `check_own_tree`).
- **Bounded.** A file is read up to a stated limit, never further (`read_bounded_file`); a walk
  skips files over the limit.
- **Hash before use.** A pinned download is hashed as it is written to a new file and put in place
  only when its digest is the pinned one (`HashedFile`): nothing from it is unpacked or run before.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
CLOEXEC = getattr(os, "O_CLOEXEC", 0)
CREATE_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW | CLOEXEC
PRIVATE_FILE = 0o600
PRIVATE_DIR = 0o700
_READ = os.O_RDONLY | os.O_NONBLOCK | NOFOLLOW | CLOEXEC
_CHUNK = 1024 * 1024


class UnsafeFileError(OSError):
    """A path that fails the trust rule; the message says which path and why."""


def _uid() -> int | None:
    return os.geteuid() if hasattr(os, "geteuid") else None


def is_mine(info: os.stat_result) -> bool:
    uid = _uid()
    return uid is None or info.st_uid == uid


def trusted_owner(info: os.stat_result, folder_owner: int | None = None) -> bool:
    """Owned by the operator, by root (who can change anything anyway), or by the owner of the
    configured folder the entry lies in (a team's runbook folder may belong to a shared account)."""
    return is_mine(info) or info.st_uid == 0 or info.st_uid == folder_owner


def create_new(path: Path, mode: int = PRIVATE_FILE) -> int:
    """A new file's descriptor: `FileExistsError` if anything (a link included) is at `path`."""
    return os.open(path, CREATE_NEW, mode)


def read_bounded_file(path: Path, limit: int) -> bytes:
    """The bytes of a regular file of at most `limit` bytes, opened without following a link;
    `UnsafeFileError` for anything else (a link, a FIFO, a device, a larger file)."""
    try:
        fd = os.open(path, _READ)
    except OSError as exc:
        raise UnsafeFileError(f"cannot read {path}: {exc.strerror or exc}") from None
    with os.fdopen(fd, "rb") as stream:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UnsafeFileError(f"{path} is not a regular file")
        data = stream.read(limit + 1)
    if len(data) > limit:
        raise UnsafeFileError(f"{path} is larger than {limit} bytes")
    return data


def private_folder(path: Path) -> Path:
    """`path` as a folder of the program's own: created 0700 (with its missing parents) when absent;
    refused when it is a link, not a folder, or another user's."""
    for folder in reversed([path, *path.parents]):
        if not os.path.lexists(folder):
            with contextlib.suppress(FileExistsError):
                folder.mkdir(mode=PRIVATE_DIR)
    _check_own(path, os.lstat(path), folder=True)
    return path


def check_own_tree(root: Path) -> None:
    """Every entry under `root` is the operator's own and no link leads out of it: a tree someone
    else could have changed is never used as it is (a source tree is configured and built)."""
    private_folder(root)
    real_root = root.resolve()
    for folder, folders, files in os.walk(root):
        for name in (*folders, *files):
            entry = Path(folder) / name
            info = os.lstat(entry)
            if not is_mine(info):
                raise UnsafeFileError(f"{entry} is owned by another user (uid {info.st_uid})")
            if stat.S_ISLNK(info.st_mode) and not entry.resolve().is_relative_to(real_root):
                raise UnsafeFileError(f"{entry} is a link out of {root}")


def existing_own_file(path: Path) -> os.stat_result | None:
    """The status of a regular file of ours at `path`, None when nothing is there; `UnsafeFileError`
    for a link, a special file or another user's file."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return None
    _check_own(path, info, folder=False)
    return info


def _check_own(path: Path, info: os.stat_result, *, folder: bool) -> None:
    """The entry (its `lstat`) is no link, a folder or a regular file as asked, and the operator's."""
    if stat.S_ISLNK(info.st_mode):
        raise UnsafeFileError(f"{path} is a symbolic link; it is neither followed nor replaced")
    if not (stat.S_ISDIR(info.st_mode) if folder else stat.S_ISREG(info.st_mode)):
        raise UnsafeFileError(f"{path} is not a {'folder' if folder else 'regular file'}")
    if not is_mine(info):
        raise UnsafeFileError(f"{path} is owned by another user (uid {info.st_uid})")


def fresh_file(path: Path) -> int:
    """A new empty file at `path` (its descriptor): a regular file of ours there (a log, a partial
    download from an interrupted run) is removed first; a link or another user's file is refused."""
    if existing_own_file(path) is not None:
        os.unlink(path)
    return create_new(path)


def sha256_of(path: Path) -> str:
    """The SHA-256 of a regular file of ours, read without following a link."""
    existing_own_file(path)
    digest = hashlib.sha256()
    fd = os.open(path, _READ)
    with os.fdopen(fd, "rb") as stream:
        while block := stream.read(_CHUNK):
            digest.update(block)
    return digest.hexdigest()


class DigestMismatch(UnsafeFileError):
    def __init__(self, path: Path, actual: str, pinned: str) -> None:
        super().__init__(f"{path.name} has SHA-256 {actual}, not the pinned {pinned}: refused")
        self.actual = actual


class HashedFile:
    """A pinned file being written: bytes go to a new `NAME.partial` beside `target` (created
    exclusively, never through a link) and are hashed on the way; `commit()` puts it at `target` only
    if its SHA-256 is `sha256`, else removes it. As a context manager it removes it on an exception.

    A `.partial` of ours left by an interrupted run is removed first; a link or another user's file
    there is refused, never followed or removed."""

    def __init__(self, target: Path, sha256: str) -> None:
        self.target = target
        self._sha256 = sha256
        self._partial = target.with_name(target.name + ".partial")
        existing_own_file(target)  # a link or someone else's file at the target is not replaced
        self._fd = fresh_file(self._partial)
        self._digest = hashlib.sha256()
        self.size = 0

    def write(self, data: bytes) -> None:
        self._digest.update(data)
        self.size += len(data)
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]

    def commit(self) -> Path:
        os.close(self._fd)
        self._fd = -1
        actual = self._digest.hexdigest()
        if actual != self._sha256:
            os.unlink(self._partial)
            raise DigestMismatch(self.target, actual, self._sha256)
        os.replace(self._partial, self.target)
        return self.target

    def discard(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
            os.unlink(self._partial)

    def __enter__(self) -> HashedFile:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.discard()


@dataclass(frozen=True)
class TrustedFile:
    source: str  # its path under the folder, `/`-separated
    path: str  # where it really is (inside the folder; a link inside it already resolved)
    info: os.stat_result


@dataclass(frozen=True, order=True)
class SkippedFile:
    source: str
    reason: str  # OUTSIDE_FOLDER, OWNED_BY_OTHER, UNREADABLE, NOT_A_FILE, TOO_LARGE


def walk_folder(
    root: Path, *, wanted: Callable[[str], bool], max_file_bytes: int
) -> Iterator[TrustedFile | SkippedFile]:
    """The regular files under a configured folder whose names `wanted` accepts, reached only through
    links that stay inside it and owned by a trusted owner (`trusted_owner`); every other such entry
    is a `SkippedFile` with its reason. Folders are visited once each (a link back up the tree is no
    loop). `root` must exist and be readable (`OSError` otherwise).

    A folder may be walked at every lookup, so the walk asks the kernel only what it must: one
    `lstat` per entry it may use, and a `realpath` and `stat` only for symbolic links."""
    real_root = os.path.realpath(root)
    with os.scandir(real_root):
        pass
    folder_owner = os.stat(real_root).st_uid
    inside = os.path.join(real_root, "")  # "/srv/runbooks/": a prefix no sibling folder shares
    visited = {real_root}
    pending = [(real_root, "")]
    while pending:
        folder, prefix = pending.pop()
        try:
            with os.scandir(folder) as scan:
                entries = sorted(scan, key=lambda entry: entry.name)
        except OSError:
            yield SkippedFile(prefix or ".", "UNREADABLE")
            continue
        for entry in entries:
            source = f"{prefix}{entry.name}"
            is_wanted = wanted(entry.name)
            real = entry.path
            try:
                if entry.is_symlink():
                    real = os.path.realpath(entry.path)
                    if not real.startswith(inside):
                        if is_wanted or os.path.isdir(real):
                            yield SkippedFile(source, "OUTSIDE_FOLDER")
                        continue
                    link_info = entry.stat(follow_symlinks=False)
                    info = os.stat(real)
                elif not is_wanted and not entry.is_dir(follow_symlinks=False):
                    continue  # neither a wanted file nor a folder: not worth a stat
                else:
                    info = link_info = entry.stat(follow_symlinks=False)
            except OSError:
                if is_wanted:
                    yield SkippedFile(source, "UNREADABLE")
                continue
            if stat.S_ISDIR(info.st_mode):
                if not trusted_owner(info, folder_owner):
                    yield SkippedFile(source, "OWNED_BY_OTHER")
                elif real not in visited:
                    visited.add(real)
                    pending.append((real, f"{source}/"))
            elif is_wanted:
                yield _wanted_file(source, real, info, link_info, folder_owner, max_file_bytes)


def _wanted_file(
    source: str,
    real: str,
    info: os.stat_result,
    link_info: os.stat_result,
    folder_owner: int,
    max_file_bytes: int,
) -> TrustedFile | SkippedFile:
    """A wanted name's entry (`info`; `link_info` the link reaching it, or its own again): a
    `TrustedFile` when both have a trusted owner and it is a regular file within the size cap."""
    if not (trusted_owner(info, folder_owner) and trusted_owner(link_info, folder_owner)):
        return SkippedFile(source, "OWNED_BY_OTHER")
    if not stat.S_ISREG(info.st_mode):
        return SkippedFile(source, "NOT_A_FILE")
    if info.st_size > max_file_bytes:
        return SkippedFile(source, "TOO_LARGE")
    return TrustedFile(source, real, info)
