"""`[audit] url`: which audit a run, the console and `diagnose audit` open, and the audits refused
(docs/contracts.md, "Configuration"). The default needs no server: the file in the state folder."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from agent.settings import ConfigError, load_settings
from audit.factory import open_audit_store
from audit.location import (
    AuditLocationError,
    EvidenceAccount,
    MysqlLocation,
    SqliteLocation,
    check_separate_from_evidence,
    parse_audit_url,
)
from audit.sink import AuditSink
from console.audit_target import audit_location
from console.commands.audit import add_audit_parser, run_audit_command
from console.errors import SetupError
from console.wiring import open_run_environment
from tests.support.audit_events import Events
from tests.support.audit_reader import AuditReader


def _config(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "diagnose.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_sqlite_urls_name_relative_and_absolute_files() -> None:
    assert parse_audit_url("sqlite:///audit.db") == SqliteLocation(Path("audit.db"))
    assert parse_audit_url("sqlite:////var/lib/diagnose/audit.db") == SqliteLocation(
        Path("/var/lib/diagnose/audit.db")
    )


def test_mysql_url_keeps_account_database_and_password_variable() -> None:
    location = parse_audit_url("mysql://auditor@db.example:3307/team_audit", password_env="AUDIT_PW")
    assert location == MysqlLocation("db.example", 3307, "auditor", "team_audit", "AUDIT_PW")
    assert location.describe() == "mysql://auditor@db.example:3307/team_audit"
    assert parse_audit_url("mariadb://auditor@db/team_audit") == MysqlLocation(
        "db", 3306, "auditor", "team_audit"
    )


@pytest.mark.parametrize(
    ("url", "says"),
    [
        ("postgres://u@h/db", "must start with sqlite:/// or mysql://"),
        ("sqlite:///", "must name a file"),
        ("mysql://h/db", "must look like"),
        ("mysql://auditor:hunter2@h/db", "must not carry a password"),
        ("mysql://auditor@h/", "plain identifier"),
        ("mysql://auditor@h/db;drop", "plain identifier"),
        ("mysql://auditor@h/db?ssl=1", "query parameters"),
        ("mysql://auditor@h:99999/db", "must look like"),
    ],
)
def test_malformed_urls_are_refused_without_echoing_them(url: str, says: str) -> None:
    with pytest.raises(AuditLocationError) as caught:
        parse_audit_url(url)
    assert says in str(caught.value)
    assert "hunter2" not in str(caught.value)


@pytest.mark.parametrize(
    ("url", "password_env", "evidence", "says"),
    [
        (
            "mysql://reader@db:3306/team_audit",
            "AUDIT_PW",
            EvidenceAccount("mysql://reader@db:3306/shop", "READER_PW"),
            "evidence account",
        ),
        (
            "mysql://auditor@DB/team_audit",
            "READER_PW",
            EvidenceAccount("mysql://reader@db/shop", "READER_PW"),
            "password_env",
        ),
        (
            "mysql://auditor@db/shop",
            "AUDIT_PW",
            EvidenceAccount("mysql://reader@db/shop", "READER_PW"),
            "evidence database",
        ),
        (
            "mysql://auditor@elsewhere/ops",
            "AUDIT_PW",
            EvidenceAccount("mysql://reader@db/shop", "READER_PW", ("shop", "ops")),
            "allowed_schemas",
        ),
    ],
)
def test_the_evidence_account_never_hosts_the_audit(
    url: str, password_env: str, evidence: EvidenceAccount, says: str
) -> None:
    with pytest.raises(AuditLocationError, match=says):
        check_separate_from_evidence(parse_audit_url(url, password_env=password_env), evidence)


def test_a_separate_account_and_database_on_the_evidence_server_is_fine() -> None:
    location = parse_audit_url("mysql://auditor@db/team_audit", password_env="AUDIT_PW")
    check_separate_from_evidence(location, EvidenceAccount("mysql://reader@db/shop", "READER_PW", ("shop",)))


def test_precedence_audit_db_then_url_then_path_then_state_folder(tmp_path: Path) -> None:
    by_url = load_settings(_config(tmp_path, f'[audit]\nurl = "sqlite:///{tmp_path}/u.db"\n'))
    assert audit_location(by_url) == SqliteLocation(tmp_path / "u.db")
    assert audit_location(by_url, tmp_path / "cli.db") == SqliteLocation(tmp_path / "cli.db")
    by_path = load_settings(_config(tmp_path, f'[audit]\npath = "{tmp_path}/p.db"\n'))
    assert audit_location(by_path) == SqliteLocation(tmp_path / "p.db")
    default = audit_location(load_settings())
    assert default == SqliteLocation(tmp_path / "state" / "diagnosis-console" / "audit.db")


def test_url_and_path_together_and_an_unsafe_lease_are_configuration_errors(tmp_path: Path) -> None:
    both = _config(tmp_path, '[audit]\npath = "a.db"\nurl = "sqlite:///b.db"\n')
    with pytest.raises(ConfigError, match="url or \\[audit\\] path, not both"):
        load_settings(both)
    lease = _config(tmp_path, "[audit]\nheartbeat_s = 5\nlease_s = 8\n")
    with pytest.raises(ConfigError, match="lease_s must exceed twice heartbeat_s"):
        load_settings(lease)


def test_a_run_records_into_the_file_the_url_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "team" / "audit.db"
    monkeypatch.setenv("DIAGNOSE_AUDIT__URL", f"sqlite:///{target}")
    env = open_run_environment()
    try:
        assert env.audit.location == str(target)
        AuditSink(env.audit)(Events("run-url").run_started("q"))
    finally:
        env.audit.close()
    assert AuditReader(target).run("run-url") is not None


def test_a_run_on_the_evidence_account_does_not_start(tmp_path: Path) -> None:
    config = _config(
        tmp_path,
        '[mysql]\ndsn = "mysql://reader@127.0.0.1:1/shop"\npassword_env = "READER_PW"\n'
        '[audit]\nurl = "mysql://reader@127.0.0.1:1/team_audit"\npassword_env = "AUDIT_PW"\n',
    )
    with pytest.raises(SetupError, match=r"audit unavailable: .*evidence account"):
        open_run_environment(config)


def test_audit_commands_read_the_store_the_url_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = tmp_path / "audit.db"
    with open_audit_store(SqliteLocation(target)) as store:
        sink = AuditSink(store)
        sink(Events("run-1").run_started("q"))
    config = _config(tmp_path, f'[audit]\nurl = "sqlite:///{target}"\n')
    root = argparse.ArgumentParser(prog="diagnose")
    add_audit_parser(root.add_subparsers(dest="command"))
    assert run_audit_command(root.parse_args(["audit", "runs", "--config", str(config), "--json"])) == 0
    assert [row["run_id"] for row in json.loads(capsys.readouterr().out)["rows"]] == ["run-1"]

    refused = _config(tmp_path, '[audit]\nurl = "mysql://a:secret@h/db"\n')
    assert run_audit_command(root.parse_args(["audit", "runs", "--config", str(refused)])) == 3
    err = capsys.readouterr().err
    assert "must not carry a password" in err
    assert "secret" not in err
