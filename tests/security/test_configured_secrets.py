"""Which configured values are secrets (docs/RELIABILITY.md, "Configured secrets").

A value is a secret for what it is: of the trace exporter's header variable, only the headers that
carry a credential (by name, a known vendor key header, or an `auth-scheme token` value) give their
values to the Redactor. A tenant ID is a routing word that also names services, and hiding it hid
every service name it is part of.
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import quote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.secrets import configured_secrets, header_values
from agent.settings import load_settings
from tests.support.otlp import OtlpReceiver
from tests.support.resilience import run_cli, write_config
from tools.redaction import Redactor

TOKEN = "otlp-tok-7f3a9c41d2"


def test_a_tenant_header_no_longer_hides_the_service_names_it_is_part_of(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRACE_HEADERS", f"x-scope-orgid=payment,authorization=Bearer%20{TOKEN}")
    config = write_config(tmp_path / "diagnose.toml", {"telemetry.traces": {"headers_env": "TRACE_HEADERS"}})
    events = tmp_path / "events.ndjson"
    with OtlpReceiver() as receiver:
        run = run_cli(
            capsys,
            *("run", "--json", "--config", config, "--audit-db", tmp_path / "audit.db"),
            *("--trace-endpoint", receiver.endpoint, "--events", events),
            *("--scenario", "evidence-backed-diagnosis", "--query", f"payment-service 支付超时 {TOKEN}"),
        )
    assert run.code == 0
    text = events.read_text(encoding="utf-8")
    assert "[REDACTED]-service" not in text
    assert sum("payment-service" in line for line in text.splitlines()) > 5
    # The credential beside it is still one, wherever it turns up.
    assert TOKEN not in text
    assert TOKEN not in json.dumps(run.result, ensure_ascii=False)
    assert TOKEN not in (tmp_path / "audit.db").read_bytes().decode("utf-8", "replace")


# Names a header carrying a credential goes by; a name made of plain words is a routing header.
CREDENTIAL_NAMES = st.one_of(
    st.sampled_from(
        ["Authorization", "proxy-authorization", "x-honeycomb-team", "signoz-ingestion-key", "uptrace-dsn"]
    ),
    st.builds(
        lambda prefix, noun: f"{prefix}{noun}",
        st.sampled_from(["", "x-", "dd-", "x-goog-", "lightstep-", "x-sf-", "my-vendor-"]),
        st.sampled_from(["api-key", "apikey", "token", "access-token", "secret", "password", "auth"]),
    ),
)
PLAIN_NAMES = st.builds(
    lambda prefix, noun: f"{prefix}{noun}",
    st.sampled_from(["", "x-", "x-scope-", "x-honeycomb-", "x-sumo-"]),
    st.sampled_from(["orgid", "tenant", "dataset", "team-name", "region", "environment", "category"]),
)
VALUES = st.text("abcdefghijklmnopqrstuvwxyz0123456789-_", min_size=6, max_size=24)


@settings(max_examples=200, deadline=None)
@given(
    credentials=st.lists(st.tuples(CREDENTIAL_NAMES, VALUES), min_size=1, max_size=3),
    plain=st.lists(st.tuples(PLAIN_NAMES, VALUES), min_size=1, max_size=3),
    scheme=st.sampled_from(["", "Bearer ", "Basic ", "ApiKey "]),
    encoded=st.booleans(),
)
def test_credential_headers_give_their_values_and_routing_headers_do_not(
    credentials: list[tuple[str, str]], plain: list[tuple[str, str]], scheme: str, encoded: bool
) -> None:
    plain = [(n, v) for n, v in plain if all(v not in c and c not in v for _, c in credentials)]
    pairs = [(name, scheme + value) for name, value in credentials] + plain
    line = ",".join(f"{name}={quote(value) if encoded else value}" for name, value in pairs)
    secrets = header_values(line)
    redactor = Redactor(sorted(secrets))
    for _, value in credentials:
        assert value in secrets
        assert value not in redactor.text(f"seen {scheme}{value} in a log")
    for _, value in plain:
        assert value not in secrets
        assert redactor.text(f"{value}-service") == f"{value}-service"


@settings(max_examples=100, deadline=None)
@given(plain=PLAIN_NAMES, value=VALUES, scheme=st.sampled_from(["Bearer", "Basic", "Token", "Splunk"]))
def test_an_auth_scheme_and_token_is_a_credential_whatever_its_header_is_called(
    plain: str, value: str, scheme: str
) -> None:
    assert value in header_values(f"{plain}={scheme}%20{value}")


def test_the_configured_secrets_are_the_credentials_not_the_whole_header_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TRACE_HEADERS", "x-scope-orgid=payment,x-api-key=k-5521")
    config = write_config(tmp_path / "diagnose.toml", {"telemetry.traces": {"headers_env": "TRACE_HEADERS"}})
    assert sorted(configured_secrets(load_settings(config))) == ["k-5521"]
