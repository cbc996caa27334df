"""Which configured values are secrets, so the redaction step can replace them exactly.

Configuration only names env vars; their values (the model API key, the MySQL password) and any
password written into a DSN are collected here, once, for the Redactor.
"""

from __future__ import annotations

import logging
import os
from urllib.parse import unquote, urlsplit

from agent.settings import Settings
from tools.redaction import Redactor


def configured_secrets(settings: Settings) -> list[str]:
    names = [settings.model.api_key_env, settings.mysql.password_env, settings.audit.password_env]
    values = [os.environ.get(name, "") for name in names if name]
    if settings.mysql.dsn:
        password = urlsplit(settings.mysql.dsn).password
        if password:
            values.extend({password, unquote(password)})
    return [v for v in values if v]


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
