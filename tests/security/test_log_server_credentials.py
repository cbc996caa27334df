"""A log server's credentials (Loki, Elasticsearch/OpenSearch): read only from the variables the
configuration names, sent only to that server, hidden wherever they could be written.

`diagnose run` end to end against local HTTP servers on 127.0.0.1 that answer like Loki's
`query_range` and Elasticsearch's `_search` (tests/support/loki.py, tests/support/elasticsearch.py;
no real server can be installed here). The servers are hostile: their log records carry the very
credential the console sent them, in every written form, and none of it may reach the model, the
events, the audit, the printed result or the log file.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.secrets import build_redactor
from agent.settings import load_settings
from tests.support.audit_reader import AuditReader
from tests.support.elasticsearch import ElasticsearchServer
from tests.support.http_stub import running
from tests.support.loki import LokiServer
from tests.support.resilience import (
    WINDOW,
    one_call_then_draft,
    run_cli,
    tool_call,
    write_config,
    write_scenario,
)

API_KEY_ID, API_KEY_SECRET = "VuaCfGcBCdbkQm-e5aOx", "ui2lp2axTNmsyakw9tvNnw"
ENCODED_API_KEY = base64.b64encode(f"{API_KEY_ID}:{API_KEY_SECRET}".encode()).decode()
LOKI_USER, LOKI_PASSWORD = "123456", "Tr0ub4dor-planted-77"
BASIC_PAIR = base64.b64encode(f"{LOKI_USER}:{LOKI_PASSWORD}".encode()).decode()
LOGS_CALL = tool_call("call-1", "query_logs", {"service": "checkout", **WINDOW, "limit": 5})


@pytest.fixture
def elasticsearch() -> Iterator[ElasticsearchServer]:
    with running(ElasticsearchServer()) as server:
        yield server


@pytest.fixture
def loki() -> Iterator[LokiServer]:
    with running(LokiServer()) as server:
        yield server


def _run(capsys: pytest.CaptureFixture[str], tmp_path: Path, logs: dict[str, Any]) -> tuple[int, str]:
    """One run with one query_logs call; everything it printed or wrote, as one text."""
    config = write_config(tmp_path / "config.toml", {"logs": logs})
    audit, events = tmp_path / "audit.db", tmp_path / "events.ndjson"
    scenario = write_scenario(tmp_path, one_call_then_draft(LOGS_CALL))
    run = run_cli(
        capsys,
        "run",
        "--scenario",
        scenario,
        "--config",
        config,
        "--json",
        "--audit-db",
        audit,
        "--events",
        events,
    )
    written = [path.read_bytes().decode("utf-8", "replace") for path in tmp_path.rglob("*") if path.is_file()]
    return run.code, "\n".join([run.out, run.err, *written])


def _logs_call_status(tmp_path: Path) -> str:
    (invocation,) = AuditReader(tmp_path / "audit.db").query("SELECT status FROM invocations")
    return str(invocation["status"])


def test_an_elasticsearch_api_key_is_sent_and_then_hidden_everywhere(
    elasticsearch: ElasticsearchServer,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DIAGNOSE_TEST_ES_KEY", ENCODED_API_KEY)
    elasticsearch.authorization = f"ApiKey {ENCODED_API_KEY}"
    echoed = f"client {API_KEY_ID} sent {ENCODED_API_KEY} and {API_KEY_SECRET}"
    elasticsearch.add(
        "logs-checkout",
        [
            {
                "@timestamp": "2026-11-30T02:30:00Z",
                "service": {"name": "checkout"},
                "log": {"level": "error"},
                "message": echoed,
            }
        ],
    )

    code, everything = _run(
        capsys,
        tmp_path,
        {"source": "elasticsearch", "url": elasticsearch.url, "api_key_env": "DIAGNOSE_TEST_ES_KEY"},
    )

    assert code == 0
    assert _logs_call_status(tmp_path) == "FOUND"
    assert ENCODED_API_KEY not in everything
    assert API_KEY_SECRET not in everything
    assert API_KEY_ID in everything  # the key's id is no secret: the record stays readable around it


def test_a_hosted_lokis_basic_auth_is_sent_and_then_hidden_everywhere(
    loki: LokiServer, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DIAGNOSE_TEST_LOKI_PASSWORD", LOKI_PASSWORD)
    loki.streams = [
        {
            "stream": {"service_name": "checkout", "detected_level": "error"},
            "values": [["1795919400000000000", f"session {BASIC_PAIR} reused by {LOKI_PASSWORD}"]],
        }
    ]

    code, everything = _run(
        capsys,
        tmp_path,
        {
            "source": "loki",
            "url": loki.url,
            "username": LOKI_USER,
            "password_env": "DIAGNOSE_TEST_LOKI_PASSWORD",
            "services": {"checkout": '{service_name="checkout"}'},
        },
    )

    assert code == 0
    assert _logs_call_status(tmp_path) == "FOUND"
    assert loki.requests[0].headers["authorization"] == f"Basic {BASIC_PAIR}"
    assert BASIC_PAIR not in everything
    assert LOKI_PASSWORD not in everything


@pytest.mark.parametrize(
    ("logs", "environment", "says"),
    [
        ({"token_env": "DIAGNOSE_TEST_UNSET"}, {}, "DIAGNOSE_TEST_UNSET is not set"),
        (
            {"token_env": "DIAGNOSE_TEST_TOKEN"},
            {"DIAGNOSE_TEST_TOKEN": "glc_abc\r\nX-Injected: yes"},
            "DIAGNOSE_TEST_TOKEN holds characters an HTTP header cannot carry",
        ),
        ({"token_env": "A", "password_env": "B", "username": "u"}, {}, "one credential"),
        ({"password_env": "B"}, {}, "needs both username and password_env"),
        ({"api_key_env": "A"}, {}, 'api_key_env is for source = "elasticsearch"'),
    ],
)
def test_a_credential_that_cannot_be_used_is_a_configuration_error_naming_the_variable(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    logs: dict[str, str],
    environment: dict[str, str],
    says: str,
) -> None:
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    settings = {"source": "loki", "url": "http://127.0.0.1:9", "services": {"checkout": '{app="checkout"}'}}

    code, everything = _run(capsys, tmp_path, {**settings, **logs})

    assert code == 3
    assert says in everything
    assert "glc_abc" not in everything
    assert "X-Injected" not in everything


_SECRET_TEXT = st.text(st.characters(min_codepoint=33, max_codepoint=126), min_size=12, max_size=40)


@settings(max_examples=25, deadline=None)
@given(username=st.from_regex(r"[a-z0-9]{1,12}", fullmatch=True), password=_SECRET_TEXT, key=_SECRET_TEXT)
def test_every_written_form_of_a_generated_credential_is_a_configured_secret(
    username: str, password: str, key: str
) -> None:
    """The value, the Basic pair as sent, the API key as encoded and its secret half are all hidden
    from a record that carries them, whatever characters they hold."""
    encoded_key = base64.b64encode(f"id-1:{key}".encode()).decode()
    basic_pair = base64.b64encode(f"{username}:{password}".encode()).decode()
    os.environ.update({"DIAGNOSE_TEST_PW": password, "DIAGNOSE_TEST_KEY": encoded_key})
    try:
        basic = build_redactor(
            load_settings(
                overrides={
                    "logs": {"source": "loki", "username": username, "password_env": "DIAGNOSE_TEST_PW"}
                }
            )
        )
        api_key = build_redactor(
            load_settings(overrides={"logs": {"source": "elasticsearch", "api_key_env": "DIAGNOSE_TEST_KEY"}})
        )
    finally:
        del os.environ["DIAGNOSE_TEST_PW"], os.environ["DIAGNOSE_TEST_KEY"]

    shown_basic = basic.value({"message": f"seen {basic_pair} and {password} here"})["message"]
    shown_key = api_key.value({"message": f"seen {encoded_key} and {key} here"})["message"]

    assert basic_pair not in shown_basic
    assert password not in shown_basic
    assert encoded_key not in shown_key
    assert key not in shown_key
