"""Which configured values are secrets, so the redaction step can replace them exactly.

Configuration only names env vars; their values (the model API key, the MySQL password) and any
password written into a DSN are collected here, once, for the Redactor.
"""

from __future__ import annotations

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
