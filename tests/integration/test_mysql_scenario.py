"""The built-in MySQL scenario against the demo database loaded into the local MariaDB."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from console.commands.main import main
from tests.support.audit_reader import AuditReader
from tests.support.mysql import MysqlTestEnv

pytestmark = pytest.mark.mysql


def test_mysql_scenario_cites_found_rows(
    mysql_env: MysqlTestEnv,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("DIAGNOSE_MYSQL__DSN", mysql_env.dsn(mysql_env.shop))
    audit_db = tmp_path / "audit.db"
    code = main(["run", "--scenario", "mysql-stuck-enterprise-orders", "--json", "--audit-db", str(audit_db)])
    result = json.loads(capsys.readouterr().out)
    assert code == 0
    assert (result["outcome"], result["stop_reason"]) == ("DRAFT", "COMPLETED")
    assert result["draft"]["conclusion"] is not None
    invocations = [
        (r["tool_call_id"], r["status"], json.loads(r["projection_json"]))
        for r in AuditReader(audit_db).invocations(result["run_id"])
    ]
    assert [(i, s) for i, s, _ in invocations] == [("call-1", "FOUND"), ("call-2", "FOUND")]
    by_status = {row[0]: row[1] for row in invocations[0][2]["rows"]}
    assert by_status["PAYING"] == 22
    assert [row[0] for row in invocations[1][2]["rows"]] == [
        "dep-20261130-0205-7f3a",
        "dep-20261130-0252-c41e",
    ]


def test_demo_loader_refuses_without_its_admin_account(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DIAGNOSE_MYSQL__DSN", raising=False)
    assert main(["demo", "load-mysql"]) == 3
    assert "--admin-dsn" in capsys.readouterr().err  # tests/integration/test_demo_load_mysql.py
