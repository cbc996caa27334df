"""A sparse index of one NDJSON log file, and line reading whose memory does not grow with the file.

`query_logs` over a file must not keep the file's lines: a 1 GiB log would cost gigabytes. The
index keeps, per block of whole lines (about `BLOCK_BYTES` each), the block's byte range, the
earliest and latest instant of its parseable lines and, when they are few and short, the set of
their services: about 40 bytes per 256 KiB of log. A query reads only the blocks whose instants
meet its window and whose services may include its service. A file written in time order is then
mostly skipped; an unsorted file still gets the exact answer, only with more blocks read, because a
block is skipped only when none of its lines can match.

The index belongs to one version of the file (`FileIdentity`: device, inode, size, mtime), and covers
its bytes `[0, indexed_to)`. It grows one complete block at a time while a query reads the rest of
the file, so a query stopped by a timeout leaves every block it finished for the next one.
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import BinaryIO

BLOCK_BYTES = 256 * 1024
# Lines longer than this are skipped (counted as unparseable) without ever being held whole.
MAX_LINE_BYTES = 16 * 1024 * 1024
# A block remembers its services only when they are this few and this short; otherwise "any".
MAX_BLOCK_SERVICES = 16
MAX_INDEXED_SERVICE_CHARS = 128
# How much of an over-long line is read at a time while skipping it.
_SKIP_CHUNK = 1024 * 1024
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ONE_US = timedelta(microseconds=1)
# A block without a parseable line has an empty time range: no window meets it.
_NO_INSTANT_EARLIEST = 2**63 - 1
_NO_INSTANT_LATEST = -(2**63)


def instant_us(moment: datetime) -> int:
    """Exact microseconds since the epoch of an aware datetime (all a parsed log time carries)."""
    return (moment - _EPOCH) // _ONE_US


@dataclass(frozen=True)
class FileIdentity:
    """One version of a file: any change to it (a rewrite, an append, a rotation) gives a new one."""

    device: int
    inode: int
    size: int
    mtime_ns: int

    @classmethod
    def of(cls, stat: os.stat_result) -> FileIdentity:
        return cls(stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns)


@dataclass(frozen=True)
class Block:
    start: int
    end: int


@dataclass
class BlockBuilder:
    """Collects one block's summary while its lines are read; `skipped` counts its unusable lines."""

    start: int
    earliest: int = _NO_INSTANT_EARLIEST
    latest: int = _NO_INSTANT_LATEST
    services: set[str] | None = field(default_factory=set)
    skipped: int = 0

    def add(self, at_us: int, service: str) -> None:
        if at_us < self.earliest:
            self.earliest = at_us
        if at_us > self.latest:
            self.latest = at_us
        services = self.services
        if services is not None and service not in services:
            if len(services) >= MAX_BLOCK_SERVICES or len(service) > MAX_INDEXED_SERVICE_CHARS:
                self.services = None
            else:
                services.add(service)


@dataclass
class FileIndex:
    """The blocks of one file version, in file order, as parallel compact arrays."""

    identity: FileIdentity
    block_bytes: int = BLOCK_BYTES
    starts: array[int] = field(default_factory=lambda: array("q"))
    ends: array[int] = field(default_factory=lambda: array("q"))
    earliest: array[int] = field(default_factory=lambda: array("q"))
    latest: array[int] = field(default_factory=lambda: array("q"))
    services: list[frozenset[str] | None] = field(default_factory=list)
    skipped: int = 0
    indexed_to: int = 0
    complete: bool = False
    # Equal service sets are stored once: a log's blocks mostly repeat the same few services.
    _interned: dict[frozenset[str], frozenset[str]] = field(default_factory=dict, init=False, repr=False)

    def candidates(self, start_us: int, end_us: int, service: str) -> Iterator[Block]:
        """The indexed blocks that may hold a line of `service` at an instant in [start_us, end_us]."""
        for number, (earliest, latest) in enumerate(zip(self.earliest, self.latest, strict=True)):
            if latest < start_us or earliest > end_us:
                continue
            services = self.services[number]
            if services is not None and service not in services:
                continue
            yield Block(self.starts[number], self.ends[number])

    def add(self, builder: BlockBuilder, end: int) -> None:
        """Append a finished block; the index then covers the file up to `end`."""
        if end > builder.start:
            self.starts.append(builder.start)
            self.ends.append(end)
            self.earliest.append(builder.earliest)
            self.latest.append(builder.latest)
            services = None if builder.services is None else frozenset(builder.services)
            if services is not None:
                services = self._interned.setdefault(services, services)
            self.services.append(services)
            self.skipped += builder.skipped
        self.indexed_to = end


def read_lines(
    handle: BinaryIO, start: int, end: int, max_line_bytes: int = MAX_LINE_BYTES
) -> Iterator[tuple[int, bytes | None]]:
    """(offset, line) for each line starting in [start, end), reading no byte at or past `end`.

    A line longer than `max_line_bytes` comes as (offset, None): it is read and dropped in chunks,
    so memory stays bounded by the cap, not by the line. The last line may lack its newline.
    """
    handle.seek(start)
    readline = handle.readline
    position = start
    while position < end:
        raw = readline(min(max_line_bytes + 1, end - position))
        if not raw:
            return  # the file shrank under us: its new version gets a new index
        next_position = position + len(raw)
        if len(raw) > max_line_bytes and not raw.endswith(b"\n"):
            del raw
            while next_position < end:
                rest = readline(min(_SKIP_CHUNK, end - next_position))
                if not rest:
                    break
                next_position += len(rest)
                if rest.endswith(b"\n"):
                    break
            yield position, None
        else:
            yield position, raw
        position = next_position
