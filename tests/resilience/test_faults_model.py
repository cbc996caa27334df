"""The model endpoint failing every way a network service can, through `diagnose run`.

Each run must end FAILED / MODEL_ERROR (exit 1) or at its deadline, fast (the client's own timeout, no
retry), with the audit closed and only the exception's type name as detail: provider text stays out.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from console.presentation import model_cause_text
from tests.support.audit_reader import AuditReader
from tests.support.mysql import closed_port
from tests.support.openai_server import Drop, Hang, Reply, Trickle, completion, fake_openai
from tests.support.resilience import (
    QUERY,
    assert_audit_consistent,
    read_events,
    run_cli,
    write_config,
)


@contextlib.contextmanager
def black_hole() -> Iterator[int]:
    """A port that accepts connections and never answers (a firewall that swallows the traffic)."""
    server = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.1)
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                held.append(server.accept()[0])

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield server.getsockname()[1]
    finally:
        stop.set()
        thread.join()
        for conn in held:
            conn.close()
        server.close()


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
    ("reply", "cause", "detail"),
    [
        ((500, LEAKY_BODY), "HTTP_500", "InternalServerError"),
        ((401, LEAKY_BODY), "HTTP_401", "AuthenticationError"),
        ((200, '{"id": "chatcmpl-x", "choices": [{"message": '), "INVALID_RESPONSE", "JSONDecodeError"),
        ((200, "<html>502 Bad Gateway</html>"), "INVALID_RESPONSE", "JSONDecodeError"),
        (Drop(), "CONNECTION_CLOSED", "APIConnectionError"),
        # The bound on the whole call and the client's read timeout are both 1 s: either may say so.
        (Hang(30), "TIMEOUT", {"APITimeoutError", "TimeoutError"}),
        # Bytes keep coming, so no read of the client times out: only the bound on the whole call does.
        (Trickle(completion(text="{}"), seconds=6), "TIMEOUT", "TimeoutError"),
    ],
    ids=[
        "http-500",
        "http-401",
        "truncated-json",
        "html-body",
        "dropped-connection",
        "hangs-past-timeout",
        "trickles-past-timeout",
    ],
)
def test_a_failing_model_call_fails_the_run_closed(
    reply: Reply, cause: str, detail: str | set[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with fake_openai([reply]) as stub:
        run, result = _run(capsys, tmp_path, _config(tmp_path, stub.url, timeout_s=1.0))
    assert run.code == 1
    assert (result["outcome"], result["stop_reason"]) == ("FAILED", "MODEL_ERROR")
    failure = result["failure"]
    assert failure["detail"] in (detail if isinstance(detail, set) else {detail})
    assert failure == {
        "code": "MODEL_ERROR",
        "cause": cause,
        "detail": failure["detail"],
        "endpoint": stub.url,
    }
    assert len(stub.requests) == 1, "a failed model call must not be retried"


@pytest.mark.parametrize(
    ("where", "cause"),
    [
        ("refused", "REFUSED"),
        ("dns", "DNS"),
        ("tls", "TLS"),
        ("black-hole", "TIMEOUT"),
    ],
)
def test_a_model_endpoint_out_of_reach_is_named_with_its_cause(
    where: str, cause: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The operator reads where the calls went and why they failed: not an exception's name alone."""
    with contextlib.ExitStack() as stack:
        if where == "refused":
            url = f"http://127.0.0.1:{closed_port()}/v1"
        elif where == "dns":
            url = "http://model.does-not-exist.invalid:8080/v1"  # RFC 6761: never resolves
        elif where == "tls":
            url = stack.enter_context(fake_openai([completion(text="{}")])).url.replace("http:", "https:")
        else:
            url = f"http://127.0.0.1:{stack.enter_context(black_hole())}/v1"
        run, result = _run(capsys, tmp_path, _config(tmp_path, url, timeout_s=1.0))
        # The summary says it in words, and the log records it.
        human = run_cli(
            capsys, "run", "--query", QUERY, "--config", tmp_path / "config.toml",
            "--audit-db", tmp_path / "audit.db",
        )  # fmt: skip
    assert run.code == 1
    assert result["failure"]["cause"] == cause
    assert result["failure"]["endpoint"] == url
    assert f"failure: MODEL_ERROR ({cause})" in human.out
    assert f"why: {model_cause_text(cause)}" in human.out
    assert f"endpoint: {url}" in human.out
    log = (tmp_path / "state" / "diagnosis-console" / "diagnose.log").read_text(encoding="utf-8")
    assert f"cause {cause} " in log
    assert f"endpoint {url}" in log


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
    assert result["failure"] == {
        "code": "MODEL_ERROR",
        "cause": "HTTP_500",
        "detail": "InternalServerError",
        "endpoint": stub.url,
    }
    assert [c["tool_call_id"] for c in result["progress"]["checks"]] == ["call-1"]
    assert [
        (i["tool_call_id"], i["status"])
        for i in AuditReader(tmp_path / "audit.db").invocations(result["run_id"])
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


def test_the_endpoint_named_in_a_failure_carries_no_credential(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    port = closed_port()
    base_url = f"http://operator:s3cr3t-pw@127.0.0.1:{port}/v1?api-key=k3y-value#frag"
    run, result = _run(capsys, tmp_path, _config(tmp_path, base_url))
    assert result["failure"]["endpoint"] == f"http://127.0.0.1:{port}/v1"
    human = run_cli(
        capsys,
        "run",
        "--query",
        QUERY,
        "--config",
        tmp_path / "config.toml",
        "--audit-db",
        tmp_path / "audit.db",
    )
    seen = [
        run.out,
        run.err,
        human.out,
        human.err,
        (tmp_path / "events.ndjson").read_text(encoding="utf-8"),
        (tmp_path / "state" / "diagnosis-console" / "diagnose.log").read_text(encoding="utf-8"),
        *(str(row) for row in AuditReader(tmp_path / "audit.db").invocations(result["run_id"])),
    ]
    seen += [str(row) for row in AuditReader(tmp_path / "audit.db").query("SELECT * FROM runs")]
    for text in seen:
        assert "s3cr3t-pw" not in text, text
        assert "k3y-value" not in text, text
