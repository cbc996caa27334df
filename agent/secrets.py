"""Which configured values are secrets, so the redaction step can replace them exactly.

Configuration only names env vars; their values (the model API key, the MySQL password) and any
password written into a DSN are collected here, once, for the Redactor.

A value is a secret because of what it IS, not because of where it was configured. The trace
exporter's header variable (`[telemetry.traces] headers_env`) holds credentials and plain routing
words side by side (`authorization=Bearer …,x-scope-orgid=payment`): only a header that carries a
credential contributes its value (`credential_header`). Hiding a tenant ID as well hid every
word it is part of (`payment-service` read `[REDACTED]-service` in every event).
"""

from __future__ import annotations

import logging
import os
import re
from urllib.parse import unquote, urlsplit

from agent.settings import Settings
from tools.redaction import Redactor, names_secret


def configured_secrets(settings: Settings) -> list[str]:
    names = [settings.model.api_key_env, settings.mysql.password_env, settings.audit.password_env]
    values = [os.environ.get(name, "") for name in names if name]
    if settings.mysql.dsn:
        password = urlsplit(settings.mysql.dsn).password
        if password:
            values.extend({password, unquote(password)})
    if settings.telemetry.traces.headers_env:
        values.extend(header_values(os.environ.get(settings.telemetry.traces.headers_env, "")))
    return [v for v in values if v]


# An HTTP header name (RFC 9110 token) and a value that cannot end the header line.
_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")
_HEADER_VALUE_BREAK = re.compile(r"[\x00\r\n]")


def parse_headers(text: str) -> dict[str, str]:
    """`name=value[,name=value]`, the form of `OTEL_EXPORTER_OTLP_HEADERS` (values URL-encoded or not),
    as the trace exporter's headers. A pair that is no usable header is left out."""
    headers: dict[str, str] = {}
    for pair in text.split(","):
        name, sep, value = pair.partition("=")
        name, value = unquote(name).strip().lower(), unquote(value).strip()
        if sep and _HEADER_NAME.fullmatch(name) and not _HEADER_VALUE_BREAK.search(value):
            headers[name] = value
    return headers


# Headers that carry a credential under a name the secret-name rule does not read as one: vendors'
# ingest keys (Honeycomb's team key, SigNoz's and Uptrace's), and the cookie a proxy session rides on.
_CREDENTIAL_HEADERS = frozenset(
    {"x-honeycomb-team", "signoz-ingestion-key", "uptrace-dsn", "cookie", "x-amz-security-token"}
)
# `Scheme token`: whatever the header is called, such a value is a credential (RFC 9110 auth schemes).
_AUTH_SCHEME = re.compile(r"(?i)(?:basic|bearer|digest|negotiate|token|apikey|api-key|splunk|dsn)\s+\S")


def credential_header(name: str, value: str) -> bool:
    """Whether a configured header carries a credential: its name says so (the secret-name rule:
    `authorization`, `x-api-key`, `dd-api-key`, `lightstep-access-token`), it is a known vendor key
    header, or its value is an auth scheme and token. A tenant, an org, a dataset is not."""
    return names_secret(name) or name.lower() in _CREDENTIAL_HEADERS or bool(_AUTH_SCHEME.match(value))


def header_values(text: str) -> set[str]:
    """Every credential value of a header list, as written and URL-decoded, and the token of a scheme
    and token (`Bearer%20abc`): a token that reached a log or the audit would be as bad as the whole line."""
    values: set[str] = set()
    for pair in text.split(","):
        name, _, written = pair.partition("=")
        written = written.strip()
        decoded = unquote(written).strip()
        if not credential_header(unquote(name).strip(), decoded):
            continue
        values.update({written, decoded})
        words = decoded.split()
        if len(words) > 1:
            values.add(words[-1])
    return values


def build_redactor(settings: Settings) -> Redactor:
    return Redactor(configured_secrets(settings))


class _ConfiguredSecrets(logging.Filter):
    """The configured secret values on a log handler; one per handler, replaced on a reload."""

    def __init__(self, redactor: Redactor) -> None:
        super().__init__()
        self._filter = redactor.logging_filter()

    def filter(self, record: logging.LogRecord) -> bool:
        return bool(self._filter.filter(record))


def redact_logs(redactor: Redactor) -> None:
    """Every log handler also replaces the configured secret values exactly (the built-in rules are
    on them from the start, console.cli): once the configuration is read, before anything logs. A
    console that reloads its configuration swaps the previous values out rather than piling up."""
    for handler in logging.getLogger().handlers:
        for old in [f for f in handler.filters if isinstance(f, _ConfiguredSecrets)]:
            handler.removeFilter(old)
        handler.addFilter(_ConfiguredSecrets(redactor))
