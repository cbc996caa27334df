"""`diagnose`'s log file is redacted by the built-in rules, though they are compiled only at the first
record (so a bare `diagnose` paints its first frame without them): the first record is redacted too."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from console.commands.main import _log_to_file

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


AUDIT_PASSWORD = "Team-Audit-Pw-3e9d1c"
COPY_PASSWORD = "Copy-Target-Pw-77a0b2"


@pytest.mark.parametrize("command", ["runs", "copy"])
def test_audit_commands_redact_the_configured_passwords_in_the_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    """`diagnose audit` reads the configuration itself (no run environment): once it has, the log
    hides the audit password and, for `copy`, the one `--to-password-env` names, like `diagnose run`.
    Nothing listens on port 1, so the command fails after reading the configuration; a record logged
    then carries both values and must reach the file without them."""
    from console.commands.main import main

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("AUDIT_PW_FOR_LOG_TEST", AUDIT_PASSWORD)
    monkeypatch.setenv("COPY_PW_FOR_LOG_TEST", COPY_PASSWORD)
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", list(root.handlers))
    monkeypatch.setattr(root, "level", root.level)
    config = tmp_path / "team.toml"
    config.write_text(
        '[audit]\nurl = "mysql://auditor@127.0.0.1:1/team_audit"\npassword_env = "AUDIT_PW_FOR_LOG_TEST"\n',
        encoding="utf-8",
    )
    argv = ["audit", command, "--config", str(config)]
    if command == "copy":
        source = tmp_path / "laptop.db"
        from audit.factory import open_audit_store
        from audit.location import SqliteLocation

        open_audit_store(SqliteLocation(source)).close()
        argv += ["--from", f"sqlite:///{source}", "--to", "mysql://auditor@127.0.0.1:1/other"]
        argv += ["--to-password-env", "COPY_PW_FOR_LOG_TEST"]
    assert main(argv) == 3
    logging.getLogger("audit.mysql.store").warning("sent %s and %s", AUDIT_PASSWORD, COPY_PASSWORD)
    for handler in root.handlers:
        handler.close()
    log = (tmp_path / "state" / "diagnosis-console" / "diagnose.log").read_text(encoding="utf-8")
    assert "sent " in log
    assert AUDIT_PASSWORD not in log
    assert (COPY_PASSWORD not in log) == (command == "copy")
