"""Optional: the harness against a real OpenAI-compatible model server (never in the default suite).

Small local models (e.g. SmolLM2-135M or Gemma 3 270M behind llama.cpp's `llama-server`, see the
README's "Try it with a local model") emit weak and often malformed tool calls. Whatever they do:
- every run ends with a typed outcome, and the audit is consistent (a finished run row, no
  invocation left STARTED);
- no round generates more than `[model] max_tokens` (a cut reply is MODEL_ERROR / MAX_TOKENS);
- an accepted conclusion cites FOUND evidence of the run;
- `diagnose eval` completes over a demo incident and writes its reports.
Run with:

    DIAGNOSE_TEST_LLM_URL=http://127.0.0.1:8080/v1 pytest -m llm tests/console/test_real_model_server.py
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from console.commands.main import main
from tests.support.audit_reader import AuditReader

pytestmark = [
    pytest.mark.llm,
    pytest.mark.skipif(
        os.environ.get("DIAGNOSE_TEST_LLM_URL") is None,
        reason="set DIAGNOSE_TEST_LLM_URL to an OpenAI-compatible server",
    ),
]

URL = os.environ.get("DIAGNOSE_TEST_LLM_URL")
MODEL = os.environ.get("DIAGNOSE_TEST_LLM_MODEL", "local-model")
MAX_TOKENS = 384
QUERIES = [
    "2026-11-30 02:00-03:00 UTC payment-service 支付大量超时，请诊断。",
    "线上好像有点问题，帮忙看一下。",
    "企业客户 ent-40215 在 2026-11-30 02:00-03:00 UTC 登录失败，请排查 account-service。",
]
OUTCOMES = {"DRAFT", "CONTROLLED_STOP", "BUDGET_EXHAUSTED", "FAILED"}


def config_file(tmp_path: Path) -> Path:
    config = tmp_path / "diagnose.toml"
    config.write_text(
        f'[model]\nprovider = "openai"\nbase_url = "{URL}"\nname = "{MODEL}"\ntimeout_s = 300\n'
        f"max_tokens = {MAX_TOKENS}\ntemperature = 0.0\nseed = 1\n"
        "[budget]\nmax_model_calls = 3\ndeadline_s = 900\nmax_draft_bytes = 2048\n",
        encoding="utf-8",
    )
    return config


@pytest.mark.parametrize("query", QUERIES)
def test_real_model_runs_end_typed_with_a_consistent_audit(
    query: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    audit_db, events = tmp_path / "audit.db", tmp_path / "events.ndjson"
    args = ["run", "--config", str(config_file(tmp_path)), "--query", query, "--json"]
    code = main([*args, "--audit-db", str(audit_db), "--events", str(events)])
    out, err = capsys.readouterr()
    assert "Traceback" not in err
    result = json.loads(out)
    assert result["outcome"] in OUTCOMES, result
    assert code in {0, 1, 10, 11}
    rounds = [
        e
        for e in map(json.loads, events.read_text("utf-8").splitlines())
        if e["type"] == "model_round_finished"
    ]
    assert all(e["completion_tokens"] <= MAX_TOKENS for e in rounds)
    if result["stop_reason"] == "MODEL_ERROR" and result["failure"].get("cause") == "MAX_TOKENS":
        assert rounds
        assert rounds[-1]["completion_tokens"] == MAX_TOKENS
    if result["outcome"] == "DRAFT" and result["draft"]["conclusion"] is not None:
        # A conclusion is only ever accepted with a FINDING citing FOUND evidence of this run.
        found = {c["tool_call_id"] for c in result["progress"]["checks"] if c["evidence_status"] == "FOUND"}
        cited = {
            i for item in result["draft"]["analysis"] if item["kind"] == "FINDING" for i in item["evidence"]
        }
        assert cited & found
    audit = AuditReader(audit_db)
    run = audit.run(result["run_id"])
    assert run is not None
    assert run["outcome"] == result["outcome"]
    assert audit.query("SELECT run_id, tool_call_id FROM invocations WHERE status = 'STARTED'") == []


def test_eval_over_a_demo_incident_completes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out_dir = tmp_path / "eval"
    code = main(
        ["eval", "--config", str(config_file(tmp_path)), "--case", "vague-query", "--out", str(out_dir)]
    )
    out, err = capsys.readouterr()
    assert code == 0
    assert "Traceback" not in err
    report = json.loads((out_dir / "report.json").read_text("utf-8"))
    assert report["overall"]["runs"] == 1
    assert report["overall"]["max_round_completion_tokens"] <= MAX_TOKENS
    assert "vague-query" in out
