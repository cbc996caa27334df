"""The model endpoint failing every way a network service can, through `diagnose run`.

Each run must end FAILED / MODEL_ERROR (exit 1) or at its deadline, fast (the client's own timeout, no
retry), with the audit closed and only the exception's type name as detail: provider text stays out.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.support.mysql import closed_port
from tests.support.openai_server import Drop, Hang, Reply, completion, fake_openai
from tests.support.resilience import (
    QUERY,
    assert_audit_consistent,
    invocations,
    read_events,
    run_cli,
    write_config,
)

LEAKY_BODY = '{"error": {"message": "upstream 10.0.0.7 said: secret-internal-detail"}}'


def _config(tmp_path: Path, base_url: str, timeout_s: float = 1.0, deadline_s: float = 30.0) -> Path:
    return write_config(
        tmp_path / "config.toml",
        {
            "model": {
                "provider": "openai",
                "base_url": base_url,
                "name": "test-model",
                "timeout_s": timeout_s,
            },
            "budget": {"deadline_s": deadline_s},
        },
    )


def _run(capsys: pytest.CaptureFixture[str], tmp_path: Path, config: Path) -> tuple[Any, dict[str, Any]]:
    audit = tmp_path / "audit.db"
    run = run_cli(
        capsys,
        "run", "--query", QUERY, "--config", config, "--json",
        "--audit-db", audit, "--events", tmp_path / "events.ndjson",
    )  # fmt: skip
    result = run.result
    assert_audit_consistent(audit, [result["run_id"]])
    assert "secret-internal-detail" not in run.out + run.err
    assert "secret-internal-detail" not in (tmp_path / "events.ndjson").read_text(encoding="utf-8")
    return run, result


@pytest.mark.parametrize(
    ("reply", "detail"),
    [
        ((500, LEAKY_BODY), "InternalServerError"),
        ((200, '{"id": "chatcmpl-x", "choices": [{"message": '), "JSONDecodeError"),
        ((200, "<html>502 Bad Gateway</html>"), "JSONDecodeError"),
        (Drop(), "APIConnectionError"),
        (Hang(30), "APITimeoutError"),
    ],
    ids=["http-500", "truncated-json", "html-body", "dropped-connection", "hangs-past-timeout"],
)
def test_a_failing_model_call_fails_the_run_closed(
    reply: Reply, detail: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with fake_openai([reply]) as stub:
        run, result = _run(capsys, tmp_path, _config(tmp_path, stub.url, timeout_s=1.0))
    assert run.code == 1
    assert (result["outcome"], result["stop_reason"]) == ("FAILED", "MODEL_ERROR")
    assert result["failure"] == {"code": "MODEL_ERROR", "detail": detail}
    assert len(stub.requests) == 1, "a failed model call must not be retried"


def test_a_model_endpoint_refusing_connections_fails_fast(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run, result = _run(capsys, tmp_path, _config(tmp_path, f"http://127.0.0.1:{closed_port()}/v1"))
    assert run.code == 1
    assert result["failure"] == {"code": "MODEL_ERROR", "detail": "APIConnectionError"}


def test_a_model_failing_after_evidence_keeps_the_progress_and_the_audit(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    call = {
        "id": "call-1",
        "name": "lookup_knowledge",
        "arguments": {"previous_observation": None, "input": {"query": "连接池 耗尽"}},
    }
    with fake_openai([completion(tool_calls=[call]), (500, LEAKY_BODY)]) as stub:
        run, result = _run(capsys, tmp_path, _config(tmp_path, stub.url))
    assert run.code == 1
    assert result["failure"] == {"code": "MODEL_ERROR", "detail": "InternalServerError"}
    assert [c["tool_call_id"] for c in result["progress"]["checks"]] == ["call-1"]
    assert [
        (i["tool_call_id"], i["status"]) for i in invocations(tmp_path / "audit.db", result["run_id"])
    ] == [("call-1", "FOUND")]
    events = read_events(tmp_path / "events.ndjson")
    assert events[-1]["type"] == "run_finished"
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))


def test_a_model_hanging_past_the_run_deadline_ends_at_the_deadline(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with fake_openai([Hang(30)]) as stub:
        run, result = _run(capsys, tmp_path, _config(tmp_path, stub.url, timeout_s=60, deadline_s=1.0))
    assert run.code == 11
    assert (result["outcome"], result["stop_reason"]) == ("BUDGET_EXHAUSTED", "DEADLINE_EXCEEDED")
    assert result["failure"] is None  # the deadline (1 s) ended it, not the 30 s hang nor the 60 s timeout
