"""Optional: the harness against a real OpenAI-compatible model server (never in the default suite).

Small local models (e.g. SmolLM2-135M behind llama.cpp's server with
`--chat_format chatml-function-calling`) emit weak and often malformed tool calls. Whatever they do,
every run must end with a typed outcome, and the audit must be consistent: a finished run row and no
invocation left STARTED. Run with:

    DIAGNOSE_TEST_LLM_URL=http://127.0.0.1:8080/v1 pytest -m llm tests/test_real_model_server.py
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

from console.cli import main

pytestmark = pytest.mark.llm

URL = os.environ.get("DIAGNOSE_TEST_LLM_URL")
QUERIES = [
    "2026-11-30 02:00-03:00 UTC payment-service 支付大量超时，请诊断。",
    "线上好像有点问题，帮忙看一下。",
    "企业客户 ent-40215 在 2026-11-30 02:00-03:00 UTC 登录失败，请排查 account-service。",
]
OUTCOMES = {"DRAFT", "CONTROLLED_STOP", "BUDGET_EXHAUSTED", "FAILED"}


@pytest.mark.skipif(URL is None, reason="set DIAGNOSE_TEST_LLM_URL to an OpenAI-compatible server")
@pytest.mark.parametrize("query", QUERIES)
def test_real_model_runs_end_typed_with_a_consistent_audit(
    query: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "diagnose.toml"
    config.write_text(
        f'[model]\nprovider = "openai"\nbase_url = "{URL}"\nname = "smollm2"\ntimeout_s = 120\n'
        "[budget]\nmax_model_calls = 4\ndeadline_s = 300\n",
        encoding="utf-8",
    )
    audit_db = tmp_path / "audit.db"
    code = main(["run", "--config", str(config), "--query", query, "--json", "--audit-db", str(audit_db)])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    result = json.loads(out)
    assert result["outcome"] in OUTCOMES, result
    assert code in {0, 1, 10, 11}
    if result["outcome"] == "DRAFT" and result["draft"]["conclusion"] is not None:
        # A conclusion is only ever accepted with a FINDING citing FOUND evidence of this run.
        found = {c["tool_call_id"] for c in result["progress"]["checks"] if c["evidence_status"] == "FOUND"}
        cited = {
            i for item in result["draft"]["analysis"] if item["kind"] == "FINDING" for i in item["evidence"]
        }
        assert cited & found
    with sqlite3.connect(audit_db) as db:
        assert db.execute("SELECT outcome FROM runs").fetchone() == (result["outcome"],)
        assert db.execute("SELECT count(*) FROM invocations WHERE status = 'STARTED'").fetchone() == (0,)
