"""`diagnose`'s log file is redacted by the built-in rules, though they are compiled only at the first
record (so a bare `diagnose` paints its first frame without them): the first record is redacted too."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from console.cli import _log_to_file

TOKEN = "eyJhbGciOiJIUzI1NiJ9abcdefghij0123456789"


def test_the_first_record_and_the_next_are_redacted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", list(root.handlers))  # _log_to_file replaces them: restored after
    monkeypatch.setattr(root, "level", root.level)
    _log_to_file()
    logger = logging.getLogger("adapter")
    logger.warning("calling with Authorization: Bearer %s", TOKEN)
    logger.warning("again: Bearer %s", TOKEN)
    for handler in root.handlers:
        handler.close()
    log = (tmp_path / "state" / "diagnosis-console" / "diagnose.log").read_text(encoding="utf-8")
    assert TOKEN not in log
    assert log.count("Bearer [REDACTED]") == 2
