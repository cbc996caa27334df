"""Real journal files for the journald source's tests, written by systemd's own tools.

`systemd-journal-remote` (Debian package `systemd-journal-remote`) reads journal export format and
writes a journal file exactly as a journald receiving those entries would; `journalctl` then reads
it as it reads any journal. The fixtures are export-format files of real journals
(tests/data/logs/SOURCES.md). Where either program is missing the tests skip saying which,
unless DIAGNOSE_TEST_REQUIRE_JOURNALD=1 (as in CI), where they fail.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import NoReturn

import pytest

FIXTURES = Path(__file__).resolve().parents[1] / "data" / "logs" / "journald"
_REMOTE_CANDIDATES = ("/usr/lib/systemd/systemd-journal-remote", "/lib/systemd/systemd-journal-remote")


def journalctl() -> str:
    """journalctl's path, or the test is skipped (failed when journald tests are required)."""
    found = shutil.which("journalctl")
    if found is None:
        _missing("journalctl (Debian package systemd)")
    return found


def journal_remote() -> str:
    for candidate in _REMOTE_CANDIDATES:
        if os.access(candidate, os.X_OK):
            return candidate
    _missing("systemd-journal-remote (Debian package systemd-journal-remote)")


def write_journal(folder: Path, *exports: str) -> Path:
    """A folder holding one journal file made from the named export-format fixtures."""
    folder.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            journal_remote(),
            f"--output={folder / 'remote.journal'}",
            *(str(FIXTURES / name) for name in exports),
        ],
        check=True,
        capture_output=True,
        timeout=60,
    )
    return folder


def _missing(what: str) -> NoReturn:
    message = f"the journald source's tests need {what}"
    if os.environ.get("DIAGNOSE_TEST_REQUIRE_JOURNALD") == "1":
        pytest.fail(message)
    pytest.skip(message)
