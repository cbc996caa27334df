"""The standard streams of a `diagnose` command: closed at start, full, or left by their reader.

- A descriptor 0, 1 or 2 closed at start (`<&-`, `>&-`) would be handed to the next file the command
  opens (its log, the audit file), and a later print would write into that file. Each closed one gets
  the null device first; the command then knows which were closed (Python leaves `sys.stdin`,
  `sys.stdout` or `sys.stderr` as None for them).
- Standard output that cannot be written (a full disk, an I/O error) raises `OutputFailed` from any
  write or flush of any command: `main` prints one line on stderr and exits `OUTPUT_ERROR`. A reader
  that left (`| head`) still raises `BrokenPipeError`: that is not a failure, and the command ends with
  its own exit code, quietly.
"""

from __future__ import annotations

import os
import sys
from typing import Any, TextIO


class OutputFailed(Exception):
    """Standard output refused a write for another reason than its reader leaving."""

    def __init__(self, cause: OSError) -> None:
        super().__init__(cause.strerror or str(cause))
        self.cause = cause
        self.strerror = cause.strerror


def occupy_closed_descriptors() -> frozenset[int]:
    """Put the null device on every standard descriptor that is closed; the closed ones."""
    closed = set()
    for fd in (0, 1, 2):
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
            closed.add(fd)
    if 2 in closed and sys.stderr is None:
        sys.stderr = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 - lives as long as the process
    return frozenset(closed)


def silence_stdout() -> None:
    """Point stdout at the null device so the interpreter's final flush cannot fail again."""
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
        os.close(null)
    except (OSError, ValueError, AttributeError):
        pass


class GuardedStdout:
    """`sys.stdout` for the length of a command: a failed write or flush is `OutputFailed` (or
    `BrokenPipeError` when the reader left), never an OSError some handler reads as its own file's."""

    def __init__(self, inner: TextIO) -> None:
        self.inner = inner

    def write(self, text: str) -> int:
        try:
            return self.inner.write(text)
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise OutputFailed(exc) from None

    def flush(self) -> None:
        try:
            self.inner.flush()
        except BrokenPipeError:
            raise
        except OSError as exc:
            raise OutputFailed(exc) from None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)
