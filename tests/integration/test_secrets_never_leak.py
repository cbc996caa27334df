"""Planted secrets (in table rows, log lines, runbooks, the DSN password, the model API key) appear in
no model-facing observation, run event, audit row, printed result, log file or error text.

Runs the real engine end to end against the local MariaDB, a runbook folder and an NDJSON log file
that all carry secrets, then greps every output for every secret value.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from console.commands.main import main
from tests.support.mysql import MysqlTestEnv

pytestmark = pytest.mark.mysql

DB_PASSWORD = "Dsn-Pa55-7b1f0c9e"
API_KEY = "sk-plantedModelKey0123456789abcdef"
ROW_TOKEN = "ghp_" + "R0wT0kenAbCdEfGhIjKlMnOpQrStUvWxYz12"
ROW_PASSWORD = "row-password-9f8e7d"
AWS_KEY = "AKIA" + "ABCDEFGHIJKLMNOP"
LOG_JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJvcHMifQ.c2lnbmF0dXJlLXBsYW50ZWQ"
LOG_URL_PASSWORD = "urlPw-41c2"
RUNBOOK_SECRET = "runbook-db-pass-55aa"
SECRETS = [DB_PASSWORD, API_KEY, ROW_TOKEN, ROW_PASSWORD, AWS_KEY, LOG_JWT, LOG_URL_PASSWORD, RUNBOOK_SECRET]


def _scenario(shop: str, other: str) -> dict[str, Any]:
    logs_input = {
        "service": "payment-service",
        "start": "2026-11-30T02:00:00Z",
        "end": "2026-11-30T03:00:00Z",
    }
    return {
        "name": "leak-check",
        "query": "payment-service 支付超时，请排查",
        "rounds": [
            {
                "tool_calls": [
                    {
                        "id": "k1",
                        "name": "lookup_knowledge",
                        "arguments": {"previous_observation": None, "input": {"query": "数据库 密码 连接"}},
                    }
                ]
            },
            {
                "tool_calls": [
                    {
                        "id": "l1",
                        "name": "query_logs",
                        "arguments": {
                            "previous_observation": {"tool_call_id": "k1", "evaluation": "GAINED"},
                            "input": logs_input,
                        },
                    }
                ]
            },
            {
                "tool_calls": [
                    {
                        "id": "m1",
                        "name": "query_mysql",
                        "arguments": {
                            "previous_observation": {"tool_call_id": "l1", "evaluation": "GAINED"},
                            "input": {
                                "sql": "SELECT * FROM credentials_demo",
                                "database": shop,
                            },
                        },
                    }
                ]
            },
            {
                "tool_calls": [
                    {
                        "id": "m2",
                        "name": "query_mysql",
                        "arguments": {
                            "previous_observation": {"tool_call_id": "m1", "evaluation": "NO_GAIN"},
                            "input": {"sql": f"SELECT * FROM {other}.canary", "database": None},
                        },
                    }
                ]
            },
            {
                "text": json.dumps(
                    {
                        "conclusion": None,
                        "analysis": [
                            {
                                "kind": "NEGATIVE_OBSERVATION",
                                "statement": f"key {API_KEY} seen",
                                "scope": "all sources",
                                "evidence": ["k1", "l1", "m1"],
                            }
                        ],
                        "action_plan": [],
                        "recommendations": [],
                        "limitations": {
                            "checked_scope": ["runbooks", "logs", "db"],
                            "missing_info": ["who can rotate the key"],
                        },
                    }
                )
            },
        ],
    }


@pytest.fixture
def leaky_world(mysql_env: MysqlTestEnv, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    mysql_env.admin(f"DROP TABLE IF EXISTS `{mysql_env.shop}`.credentials_demo")
    mysql_env.admin(
        f"CREATE TABLE `{mysql_env.shop}`.credentials_demo"
        " (name VARCHAR(32), password VARCHAR(64), note TEXT)"
    )
    mysql_env.admin(
        f"INSERT INTO `{mysql_env.shop}`.credentials_demo VALUES (%s, %s, %s), (%s, %s, %s)",
        ("svc", ROW_PASSWORD, f"deploy token {ROW_TOKEN}", "aws", "x", f"aws_access_key_id={AWS_KEY}"),
    )
    user = mysql_env.create_user(DB_PASSWORD, [f"GRANT SELECT ON `{mysql_env.shop}`.* TO {{user}}"])
    runbooks = tmp_path / "runbooks"
    runbooks.mkdir()
    (runbooks / "db.md").write_text(
        f"# 数据库连接排障\n\n连接串示例 mysql://app:{RUNBOOK_SECRET}@db:3306/shop ，"
        "数据库 密码 存放在 vault。\n"
        f"password={RUNBOOK_SECRET}\n",
        encoding="utf-8",
    )
    logs = tmp_path / "app.ndjson"
    lines = [
        {
            "ts": "2026-11-30T02:10:00Z",
            "service": "payment-service",
            "level": "ERROR",
            "message": f"upstream call failed Authorization: Bearer {LOG_JWT}",
            "token": LOG_JWT,
        },
        {
            "ts": "2026-11-30T02:11:00Z",
            "service": "payment-service",
            "level": "ERROR",
            "message": f"cannot connect to mysql://app:{LOG_URL_PASSWORD}@db:3306/shop (pw {DB_PASSWORD})",
        },
    ]
    logs.write_text("\n".join(json.dumps(line) for line in lines) + "\n", encoding="utf-8")
    scenario = tmp_path / "leak.yaml"
    scenario.write_text(json.dumps(_scenario(mysql_env.shop, mysql_env.ops)), encoding="utf-8")
    config = tmp_path / "diagnose.toml"
    config.write_text(
        f'[knowledge]\npath = "{runbooks}"\n[logs]\npath = "{logs}"\n'
        f'[mysql]\ndsn = "mysql://{user}@127.0.0.1:3306/{mysql_env.shop}"\npassword_env = "LEAK_TEST_DB_PW"\n'
        f'allowed_schemas = ["{mysql_env.shop}", "{mysql_env.ops}"]\n',
        encoding="utf-8",
    )
    monkeypatch.setenv("LEAK_TEST_DB_PW", DB_PASSWORD)
    monkeypatch.setenv("OPENAI_API_KEY", API_KEY)
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    return {"config": config, "scenario": scenario, "tmp": tmp_path}


def test_planted_secrets_reach_no_output(
    leaky_world: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    tmp = leaky_world["tmp"]
    audit_db = tmp / "audit.db"
    events = tmp / "events.ndjson"
    code = main(
        [
            "run",
            "--config",
            str(leaky_world["config"]),
            "--scenario",
            str(leaky_world["scenario"]),
            "--audit-db",
            str(audit_db),
            "--events",
            str(events),
            "--json",
        ]
    )
    out, err = capsys.readouterr()
    result = json.loads(out)
    assert code == 0, err
    assert result["outcome"] == "DRAFT"

    event_list = [json.loads(line) for line in events.read_text(encoding="utf-8").splitlines()]
    finished = {e["tool_call_id"]: e for e in event_list if e["type"] == "tool_finished"}
    # The evidence really was read (so the grep below is meaningful) ...
    assert finished["k1"]["status"] == "FOUND"
    assert finished["l1"]["status"] == "FOUND"
    assert finished["m1"]["status"] == "FOUND"
    assert finished["m1"]["projection"]["row_count"] == 2
    # ... and the foreign schema was refused by the server's grants, with no server text.
    assert (finished["m2"]["error_code"], finished["m2"]["reason"]) == ("POLICY_REJECTED", "ACCESS_DENIED")

    with sqlite3.connect(audit_db) as db:
        audit_dump = "\n".join(db.iterdump())
    log_files = list((tmp / "state").rglob("*.log"))
    outputs = {
        "stdout": out,
        "stderr": err,
        "events": events.read_text(encoding="utf-8"),
        "audit": audit_dump,
        "logs": "\n".join(p.read_text(encoding="utf-8") for p in log_files),
    }
    for where, text in outputs.items():
        for secret in SECRETS:
            assert secret not in text, f"{secret!r} leaked into {where}"
    assert "[REDACTED]" in outputs["events"]
    assert "[REDACTED]" in outputs["audit"]


async def test_model_facing_observations_carry_no_secret(leaky_world: dict[str, Path]) -> None:
    from console.wiring import open_run_environment

    env = open_run_environment(
        config=leaky_world["config"],
        scenario=str(leaky_world["scenario"]),
        audit_db=leaky_world["tmp"] / "audit.db",
    )
    try:
        use_case = env.use_case()
        await use_case.execute(env.scenario.query if env.scenario else "q")
        seen = use_case.chat_generator.received
    finally:
        await env.aclose()
    tool_texts = [m.tool_call_result.result for round_ in seen for m in round_ if m.tool_call_result]
    observations = {json.loads(t)["tool_call_id"]: json.loads(t) for t in tool_texts}
    assert observations["m1"]["evidence_status"] == "FOUND"  # the rows were read, redacted
    model_text = json.dumps([[m.to_dict() for m in round_] for round_ in seen], ensure_ascii=False)
    for secret in SECRETS:
        if secret == API_KEY:
            continue  # the scripted model's own final text is not an observation
        assert secret not in model_text
