"""Is the process that wrote an unfinished run still running?

Crash recovery must close the runs of dead processes and never touch a run another process is still
writing. A pid alone is not enough: pids are reused, so a run also records a start marker (boot id and
process start time from /proc) and a live pid only counts when its marker still matches. Where /proc
does not exist the check falls back to the pid alone. Pids are per host and per pid namespace: one
audit file is meant for the processes of one machine (SQLite over a network share is unsafe anyway);
a team audit on a database server tells live runs by their leases instead (audit.mysql.leases).
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

_PROC = Path("/proc")


@functools.cache
def _boot_id() -> str:
    try:
        return (_PROC / "sys/kernel/random/boot_id").read_text(encoding="ascii").strip()
    except OSError:
        return "unknown-boot"


def _stat_fields(pid: int) -> list[str] | None:
    """Fields 3.. of /proc/<pid>/stat (the command name may contain spaces and parentheses)."""
    try:
        text = (_PROC / str(pid) / "stat").read_text(encoding="utf-8", errors="replace")
    except (FileNotFoundError, ProcessLookupError):
        return None
    return text[text.rindex(")") + 2 :].split()


def process_start_marker(pid: int) -> str | None:
    """`<boot id>/<start time in clock ticks>`: unique for a process across pid reuse and reboots."""
    if not _PROC.is_dir():
        return None
    try:
        fields = _stat_fields(pid)
    except (OSError, ValueError):
        return None
    if fields is None or len(fields) < 20:
        return None
    return f"{_boot_id()}/{fields[19]}"  # field 22 of stat: starttime


@functools.cache
def own_start_marker() -> str | None:
    return process_start_marker(os.getpid())


def _pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: it exists
        return True
    except OSError:
        return False
    return True


def is_process_live(pid: int | None, marker: str | None) -> bool:
    """True when `pid` runs and is the same process that recorded `marker` (if one was recorded)."""
    if pid is None or pid <= 0:
        return False
    if not _PROC.is_dir():
        return _pid_exists(pid)
    try:
        fields = _stat_fields(pid)
    except (OSError, ValueError):
        return _pid_exists(pid)
    if fields is None or fields[0] in ("Z", "X", "x"):  # gone, or a zombie that will never write again
        return False
    if marker is None:  # written before markers existed (schema 1): the pid is all we know
        return True
    return process_start_marker(pid) == marker
