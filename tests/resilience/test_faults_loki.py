"""Loki misbehaving under a real run (`[logs] source = "loki"`), through `diagnose run`.

The tool call must end as one typed observation (ERROR with a stable code, or CANCELLED at the run's
deadline) and the run must go on to its Draft: a broken log backend is a finding, not a crash. Backend
text (which echoes queries and internal addresses) must reach neither the model, the events nor the audit.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.loki import LokiServer
from tests.support.resilience import WINDOW, run_one_logs_call, tool_call

BACKEND_TEXT = "parse error at 10.42.0.7:3100 tenant=acme-internal"
LOGS_CALL = tool_call(
    "call-1", "query_logs", {"service": "payment-service", **WINDOW, "level": "ERROR", "limit": 50}
)


def _run(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, loki: LokiServer, deadline_s: float = 60.0
) -> tuple[int, dict[str, Any], dict[str, Any], float]:
    logs = {"source": "loki", "url": loki.url, "services": {"payment-service": '{app="payment-service"}'}}
    run = run_one_logs_call(capsys, tmp_path, logs, LOGS_CALL, BACKEND_TEXT, deadline_s)
    return run.code, run.result, run.invocation, run.seconds


def _huge(chunked: bool) -> Callable[[LokiServer], None]:
    return lambda loki: loki.reply_huge(50_000_000, chunked=chunked)


@pytest.mark.parametrize(
    ("misbehave", "code", "reason"),
    [
        (lambda loki: loki.reply_status(500, BACKEND_TEXT.encode()), "UNAVAILABLE", None),
        (lambda loki: loki.reply_status(503, BACKEND_TEXT.encode()), "UNAVAILABLE", None),
        (lambda loki: loki.reply_status(429, BACKEND_TEXT.encode()), "UNAVAILABLE", "RATE_LIMITED"),
        (
            lambda loki: loki.reply_raw(b'{"status": "success", "data": {"resultType": "streams", "res'),
            "BACKEND_ERROR",
            None,
        ),
        (lambda loki: loki.reply_raw(BACKEND_TEXT.encode()), "BACKEND_ERROR", None),
        (_huge(chunked=True), "RESULT_TOO_LARGE", None),
        (_huge(chunked=False), "RESULT_TOO_LARGE", None),
    ],
    ids=["500", "503", "429", "truncated-json", "not-json", "50MB-chunked", "50MB-content-length"],
)
def test_a_misbehaving_loki_is_one_typed_error(
    misbehave: Callable[[LokiServer], None],
    code: str,
    reason: str | None,
    loki: LokiServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    misbehave(loki)
    exit_code, result, invocation, _ = _run(capsys, tmp_path, loki)
    assert (exit_code, result["outcome"], result["stop_reason"]) == (0, "DRAFT", "COMPLETED")
    assert (invocation["status"], invocation["error_code"], invocation["reason"]) == ("ERROR", code, reason)
    assert len(loki.requests) == 1, "no retry"
    assert loki.bytes_sent < 20_000_000  # a 50 MB body is not read to its end


def test_a_hanging_loki_is_cancelled_at_the_run_deadline(
    loki: LokiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    loki.reply_hang(60)
    exit_code, result, invocation, _ = _run(capsys, tmp_path, loki, deadline_s=1.5)
    assert (exit_code, result["outcome"], result["stop_reason"]) == (
        11,
        "BUDGET_EXHAUSTED",
        "DEADLINE_EXCEEDED",
    )
    assert invocation["status"] == "CANCELLED"
    assert loki.hangs_ended == 0  # the deadline ended it while the server still hung


@pytest.mark.long
def test_a_hanging_loki_times_out_on_the_adapters_read_timeout(
    loki: LokiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The socket stays open and silent: the read timeout (10 s, not configurable) answers TIMEOUT.

    `long` only because it waits the full 10 s; the deadline variant above covers the default suite."""
    loki.reply_hang(60)
    exit_code, result, invocation, seconds = _run(capsys, tmp_path, loki)
    assert (exit_code, result["outcome"]) == (0, "DRAFT")
    assert (invocation["status"], invocation["error_code"]) == ("ERROR", "TIMEOUT")
    assert 9 < seconds < 15
