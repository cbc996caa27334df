"""Elasticsearch / OpenSearch misbehaving under a real run (`[logs] source = "elasticsearch"`), through
`diagnose run`.

No server can be installed here: a local HTTP server on 127.0.0.1 answers `_search` as the
Elasticsearch reference documents it (tests/support/elasticsearch.py) and is told to misbehave. The
tool call must end as one typed observation (ERROR with a stable code, or CANCELLED at the run's
deadline) and the run must go on to its Draft; the server's text reaches neither the model, the
events nor the audit.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.elasticsearch import ElasticsearchServer
from tests.support.http_stub import running
from tests.support.resilience import WINDOW, run_one_logs_call, tool_call

BACKEND_TEXT = "search_phase_execution_exception at 10.42.0.9:9300 index=acme-internal"
LOGS_CALL = tool_call(
    "call-1", "query_logs", {"service": "checkout", **WINDOW, "level": "ERROR", "limit": 20}
)


@pytest.fixture
def elasticsearch() -> Iterator[ElasticsearchServer]:
    with running(ElasticsearchServer()) as server:
        yield server


def _run(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, server: ElasticsearchServer, deadline_s: float = 60.0
) -> tuple[int, dict[str, Any], dict[str, Any]]:
    logs = {"source": "elasticsearch", "url": server.url}
    run = run_one_logs_call(capsys, tmp_path, logs, LOGS_CALL, BACKEND_TEXT, deadline_s)
    return run.code, run.result, run.invocation


@pytest.mark.parametrize(
    ("misbehave", "code", "reason"),
    [
        (lambda es: es.reply_status(503, BACKEND_TEXT.encode()), "UNAVAILABLE", None),
        (lambda es: es.reply_status(400, BACKEND_TEXT.encode()), "BACKEND_ERROR", "BACKEND_REJECTED_QUERY"),
        (lambda es: es.reply_raw(BACKEND_TEXT.encode()), "BACKEND_ERROR", None),
        (lambda es: es.reply_endless(), "RESULT_TOO_LARGE", None),
        (lambda es: es.reply_redirect("http://127.0.0.1:9/_search", 301), "BACKEND_ERROR", None),
    ],
    ids=["503", "400", "not-json", "endless-body", "redirect"],
)
def test_a_misbehaving_search_server_is_one_typed_error(
    misbehave: Callable[[ElasticsearchServer], None],
    code: str,
    reason: str | None,
    elasticsearch: ElasticsearchServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    misbehave(elasticsearch)

    exit_code, result, invocation = _run(capsys, tmp_path, elasticsearch)

    assert (exit_code, result["outcome"], result["stop_reason"]) == (0, "DRAFT", "COMPLETED")
    assert (invocation["status"], invocation["error_code"], invocation["reason"]) == ("ERROR", code, reason)
    assert len(elasticsearch.requests) == 1, "no retry"


def test_a_hanging_search_server_is_cancelled_at_the_run_deadline(
    elasticsearch: ElasticsearchServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    elasticsearch.reply_hang(60)

    exit_code, result, invocation = _run(capsys, tmp_path, elasticsearch, deadline_s=1.5)

    assert (exit_code, result["outcome"], result["stop_reason"]) == (
        11,
        "BUDGET_EXHAUSTED",
        "DEADLINE_EXCEEDED",
    )
    assert invocation["status"] == "CANCELLED"
    assert elasticsearch.hangs_ended == 0  # the deadline ended it while the server still hung
