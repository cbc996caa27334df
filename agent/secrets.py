"""Which configured values are secrets, so the redaction step can replace them exactly.

Configuration only names env vars; their values (the model API key, the MySQL password, a log
server's password, token or API key) and any password written into a DSN are collected here, once,
for the Redactor. The Authorization header a log server gets is built here too, from the same
variables, so every form of the credential that could be written somewhere (the value, the header,
the encoded pair) is one the Redactor knows.

A value is a secret because of what it IS, not because of where it was configured. The trace
exporter's header variable (`[telemetry.traces] headers_env`) holds credentials and plain routing
words side by side (`authorization=Bearer …,x-scope-orgid=payment`): only a header that carries a
credential contributes its value (`credential_header`). Hiding a tenant ID as well hid every
word it is part of (`payment-service` read `[REDACTED]-service` in every event).
"""

from __future__ import annotations

import base64
import binascii
import logging
import os
import re
from urllib.parse import unquote, urlsplit

from agent.settings import ConfigError, LogsSettings, Settings
from tools.redaction import Redactor
from tools.secret_names import names_secret


def configured_secrets(settings: Settings) -> list[str]:
    names = [settings.model.api_key_env, settings.mysql.password_env, settings.audit.password_env]
    values = [os.environ.get(name, "") for name in names if name]
    if settings.mysql.dsn:
        password = urlsplit(settings.mysql.dsn).password
        if password:
            values.extend({password, unquote(password)})
    if settings.telemetry.traces.headers_env:
        values.extend(header_values(os.environ.get(settings.telemetry.traces.headers_env, "")))
    values.extend(_log_server_secrets(settings.logs))
    return [v for v in values if v]


def log_server_authorization(logs: LogsSettings) -> str | None:
    """The `Authorization` header for Loki or Elasticsearch/OpenSearch, from the variable `[logs]`
    names (`Basic`, `Bearer` or `ApiKey`), or None without credentials. A named variable that is
    unset, or holds what a header cannot carry, is a ConfigError naming the variable, never its value."""
    if logs.password_env and logs.username is not None:
        pair = f"{logs.username}:{_variable(logs.password_env)}"
        return "Basic " + base64.b64encode(pair.encode("utf-8")).decode("ascii")
    if logs.token_env:
        return "Bearer " + _header_safe(logs.token_env, _variable(logs.token_env))
    if logs.api_key_env:
        return "ApiKey " + _header_safe(logs.api_key_env, _variable(logs.api_key_env))
    return None


def _variable(name: str) -> str:
    value = os.environ.get(name, "")
    if not value:
        raise ConfigError(f"[logs] names the variable {name} for its credential, but {name} is not set")
    return value


def _header_safe(name: str, value: str) -> str:
    """A token or API key goes into the header as written: printable ASCII only (no line break that
    could end the header and start another)."""
    if not (value.isascii() and value.isprintable()):
        raise ConfigError(f"the variable {name} holds characters an HTTP header cannot carry")
    return value


def _log_server_secrets(logs: LogsSettings) -> list[str]:
    """Every written form of the log server's credential: the values, the Basic pair as encoded, and
    the secret half of an API key (Elasticsearch's encoded key is base64 of `id:api_key`)."""
    names = [name for name in (logs.password_env, logs.token_env, logs.api_key_env) if name]
    values = [os.environ.get(name, "") for name in names]
    password = os.environ.get(logs.password_env, "") if logs.password_env else ""
    if password and logs.username is not None:
        values.append(base64.b64encode(f"{logs.username}:{password}".encode()).decode("ascii"))
    api_key = os.environ.get(logs.api_key_env, "") if logs.api_key_env else ""
    if api_key:
        try:
            decoded = base64.b64decode(api_key, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            decoded = ""
        values.append(decoded.partition(":")[2])
    return values


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
