"""Reading a file the operator names (scenario, previous turn, query, configuration) without trusting it.

Every read is bounded: at most the limit plus one byte, so "too large" is told apart from "exactly at
the limit" without reading a multi-gigabyte file or `/dev/zero` to its end. Only regular files are
read: a FIFO would block until someone writes to it, a device may never end. The file is opened
without blocking and checked through its descriptor, so it cannot be swapped between check and read.
Every failure is one `InputFileError` whose message names the file and the problem; past the limit it
is an `InputTooLarge` holding the bytes read, so a caller can still say what the input began with.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

from agent.errors import DiagnoseError
from tools.unicode_text import unencodable_key_path
from tools.yaml_loader import AliasRefused, alias_free_loader

MIB = 1024 * 1024


class InputFileError(DiagnoseError):
    """An input file cannot be used; the message says which file and why (never a traceback)."""


class InputTooLarge(InputFileError):
    """The input is larger than the limit. `head` is what was read: its first `limit + 1` bytes."""

    def __init__(self, message: str, *, head: bytes, limit: int) -> None:
        super().__init__(message)
        self.head = head
        self.limit = limit


@dataclass(frozen=True)
class OversizedInput:
    """A query or previous turn whose file holds more than `cap` bytes, the most an input file is read.

    The use case rejects it as too large (QUERY_TOO_LARGE, PREVIOUS_TURN_TOO_LARGE) like an inline
    input over its limit, and audits the query's beginning (`head`): the rest of the file is never
    read, so a file of any size costs at most `cap + 1` bytes of memory.
    """

    cap: int
    head: str = ""

    @classmethod
    def of(cls, error: InputTooLarge) -> OversizedInput:
        # Cut anywhere, possibly inside a character, and perhaps not UTF-8 at all: shown, never used.
        return cls(cap=error.limit, head=error.head.decode("utf-8", errors="replace"))


def input_file_cap(limit: int) -> int:
    """How much of a query or previous-turn file is read for an input limited to `limit` bytes.

    Never less than the limit, or a configured `max_query_bytes` above the cap could not be reached
    from a file at all; never less than 1 MiB, so a file just past a small limit is still judged by
    its real size (and a previous turn's JSON may hold more whitespace than its compact form)."""
    return max(limit, MIB)


def read_input_file(path: Path | str, *, what: str, limit: int) -> bytes:
    """The bytes of a regular file of at most `limit` bytes."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise InputFileError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise InputFileError(f"cannot read {what} {path}: not a regular file (a folder, FIFO or device)")
        with os.fdopen(fd, "rb", closefd=False) as stream:
            return read_bounded(stream, what=f"{what} {path}", limit=limit)
    except OSError as exc:
        raise InputFileError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def read_bounded(stream: BinaryIO, *, what: str, limit: int) -> bytes:
    """At most `limit` bytes from a stream (stdin included); more is an error, never a truncation."""
    chunks: list[bytes] = []
    remaining = limit + 1
    while remaining > 0:
        chunk = stream.read(min(remaining, MIB))
        if not chunk:
            break
        chunks.append(chunk)
        remaining -= len(chunk)
    data = b"".join(chunks)
    if len(data) > limit:
        raise InputTooLarge(f"{what} is larger than {_size(limit)}", head=data, limit=limit)
    return data


def decode_text(data: bytes, *, what: str) -> str:
    """UTF-8 text (a leading byte-order mark is dropped); anything else is an `InputFileError`."""
    try:
        return data.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError:
        raise InputFileError(f"{what} is not UTF-8 text") from None


def read_input_text(path: Path | str, *, what: str, limit: int) -> str:
    return decode_text(read_input_file(path, what=what, limit=limit), what=f"{what} {path}")


def parse_yaml_mapping(
    text: str, *, source: str, what: str, free_form: frozenset[str] = frozenset()
) -> dict[str, Any]:
    """One YAML (or JSON) document that must be a mapping: scenario files and eval cases alike.

    Every failure is an `InputFileError` naming `source` and the problem (a line number for a syntax
    error; "nested too deeply" where PyYAML would overflow the stack), never parser internals.
    """
    import yaml  # only the commands that read such files pay for the import

    try:
        raw = yaml.load(text, Loader=alias_free_loader())  # noqa: S506 - a SafeLoader, aliases refused
    except AliasRefused as refused:
        raise InputFileError(
            f"{source}: YAML aliases are not allowed in a {what} (line {refused.line}): write the value out"
        ) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise InputFileError(f"{source}: not valid YAML{where}") from None
    except RecursionError:
        raise InputFileError(f"{source}: nested too deeply to be a {what}") from None
    if not isinstance(raw, dict):
        raise InputFileError(f"{source}: a {what} must be a mapping")
    # A file's strings may hold any text (a scenario scripts what a hostile model sends), but its keys
    # name fields: one that is not text names none, and every message echoing it would fail to encode.
    if (key_path := unencodable_key_path(raw, free_form)) is not None:
        raise InputFileError(f"{source}: a key at {key_path or 'the top'} is not valid Unicode text")
    return raw


def _size(limit: int) -> str:
    if limit >= MIB and limit % MIB == 0:
        return f"{limit // MIB} MiB"
    return f"{limit} bytes"
