"""Redaction: configured secrets, credential-shaped values and secret-named fields never leave the process,
while ordinary SRE text (runbooks, logs, token counters, prose about passwords) passes through untouched."""

from __future__ import annotations

import copy
import json
import logging
import sys
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import tools
from tools.redaction import NOOP, REDACTED, Redactor

DATA_DIR = Path(tools.__file__).resolve().parent / "data"

JWT = (
    "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"
    ".eyJzdWIiOiIxMjM0NTY3ODkwIn0"
    ".dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
)
PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\n"
    "MIIEowIBAAKCAQEA0Z3VS5JJcds3xfn/ygWyF8PbnGy0AHB7MhgHcTz6sE2I2yPB\n"
    "aWtbRk0cTEeUXmEDCOqSMgzDg0d8JAs3GZ4dSnVlR3uMdPMgCFz3IFm3vjdOPw==\n"
    "-----END RSA PRIVATE KEY-----"
)


# --- exact configured secrets --------------------------------------------------------------------------


def test_exact_secret_is_replaced_inside_longer_text() -> None:
    redactor = Redactor(["Pa55-w0rd!"])
    assert redactor.text("login with Pa55-w0rd! failed") == f"login with {REDACTED} failed"
    assert redactor.text("xPa55-w0rd!Pa55-w0rd!y") == f"x{REDACTED}{REDACTED}y"


def test_exact_secret_inside_json_url_encoded_and_with_trailing_newline() -> None:
    redactor = Redactor(['p@ss/"word"\n'])
    as_json = json.dumps({"detail": 'connect failed: p@ss/"word"'})
    assert 'p@ss/\\"word\\"' in as_json
    assert "word" not in redactor.text(as_json)
    assert redactor.text("mysql://app:p%40ss%2F%22word%22@db/x") == f"mysql://app:{REDACTED}@db/x"
    assert redactor.text('key p@ss/"word" end') == f"key {REDACTED} end"


def test_longest_secret_wins_and_short_or_empty_values_are_ignored() -> None:
    redactor = Redactor(["abcd", "abcdefgh", "", "ab", "   "])
    assert redactor.text("abcdefgh abcd ab a") == f"{REDACTED} {REDACTED} ab a"
    assert Redactor(["abc"], min_secret_len=3).text("xabcx") == f"x{REDACTED}x"


def test_with_secrets_returns_a_new_redactor() -> None:
    base = Redactor(["first-secret"])
    more = base.with_secrets("second-secret")
    assert more.text("first-secret second-secret") == f"{REDACTED} {REDACTED}"
    assert base.text("second-secret") == "second-secret"


# --- value patterns ------------------------------------------------------------------------------------

POSITIVE = [
    ("key AKIAIOSFODNN7EXAMPLE used", f"key {REDACTED} used"),
    ("ASIAY34FZKBOKMUTVV7A", REDACTED),
    ("aws_secret_access_key=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", f"aws_secret_access_key={REDACTED}"),
    ("key=AIzaSyA1234567890abcdefghijklmnopqrstuv", f"key={REDACTED}"),
    ("ghp_" + "a1B2" * 9, REDACTED),
    ("clone with gho_" + "Z" * 36 + " now", f"clone with {REDACTED} now"),
    ("github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz", REDACTED),
    ("slack xoxb-1234567890-abcdefghij", f"slack {REDACTED}"),
    (
        "post to https://hooks.slack.com/services/T000/B000/XXXXXXXXXXXX",
        f"post to https://hooks.slack.com/services/{REDACTED}",
    ),
    ("stripe sk_live_4eC39HqLyjWDarjtT1zdp7dc", f"stripe {REDACTED}"),
    ("rk_live_abcdefghij1234", REDACTED),
    ("OPENAI sk-abcdefghijklmnopqrstuvwxyz123456", f"OPENAI {REDACTED}"),
    ("sk-proj-abcdefghijklmnopqrstuvwxyz_-0123", REDACTED),
    (f"jwt {JWT}.", f"jwt {REDACTED}."),
    (
        f"before\n{PEM}\nafter",
        f"before\n-----BEGIN RSA PRIVATE KEY-----{REDACTED}-----END RSA PRIVATE KEY-----\nafter",
    ),
    ("-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkq (truncated)", f"-----BEGIN PRIVATE KEY-----{REDACTED}"),
    ("mysql://app:s3cr3t@db.internal:3306/orders", f"mysql://app:{REDACTED}@db.internal:3306/orders"),
    ("redis://:hunter2@cache:6379/0", f"redis://:{REDACTED}@cache:6379/0"),
    ("postgres://u:p@ss@h/db", f"postgres://u:{REDACTED}@h/db"),
    ("Authorization: Bearer abc.def-ghi_jkl", f"Authorization: Bearer {REDACTED}"),
    ('{"Authorization": "Basic dXNlcjpwYXNz"}', f'{{"Authorization": "Basic {REDACTED}"}}'),
    ("proxy-authorization=Token abcdef", f"proxy-authorization=Token {REDACTED}"),
    ("curl -H 'authorization: xyz123'", f"curl -H 'authorization: {REDACTED}'"),
    ("sent Bearer abcdefghijklmnop1234 upstream", f"sent Bearer {REDACTED} upstream"),
    ("password=hunter2 user=app", f"password={REDACTED} user=app"),
    ("DB_PASSWORD: hunter2", f"DB_PASSWORD: {REDACTED}"),
    ("passwd: 'x y z'", f"passwd: '{REDACTED}'"),
    ("pwd=abc&user=x", f"pwd={REDACTED}&user=x"),
    ("client_secret=abc;next", f"client_secret={REDACTED};next"),
    ("?access_token=abc123&x=1", f"?access_token={REDACTED}&x=1"),
    ('{"api_key": "abc\\"def", "n": 1}', f'{{"api_key": "{REDACTED}", "n": 1}}'),
    ('{"refresh_token": 12345}', f'{{"refresh_token": {REDACTED}}}'),
    ('detail: {\\"password\\": \\"abc\\"}', f'detail: {{\\"password\\": \\"{REDACTED}\\"}}'),
    ("X-Api-Key: abc123", f"X-Api-Key: {REDACTED}"),
    ("secret => 'v'", f"secret => '{REDACTED}'"),
    ('password="unterminated', f'password="{REDACTED}'),
]

NEGATIVE = [
    "AKIAIOSFODNN7EXAMPL",  # 15 characters after the prefix
    "XAKIAIOSFODNN7EXAMPLEX",
    "AIzaShort",
    "ghp_tooShort123",
    "xoxb-123",
    "sk_live_short",
    "sk-worker-5d6f7c8b9-p2z6h",  # a pod name
    "task-abcdefghijklmnopqrstuvwxyz123456",
    "eyJhbGciOiJIUzI1NiJ9",  # a lone JWT header is not a credential
    "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----",
    "http://gateway:8080/api/v1/orders",
    "http://[::1]:8080/health",
    "user@example.com wrote: hello",
    "Authorization failed for user u_1",
    "bearer token missing",
    "password rotation is due",
    "检查 password 是否过期",
    "password login succeeded",
    "OIDC token exchange failed: invalid_client",
    "客户轮换了 client secret 但未同步",
    "prompt_tokens: 812, completion_tokens=64, total_tokens: 876, max_total_tokens=9000",
    "tokens_used=5 token_count: 3 token_type: Bearer",
    "password_expired: N, secret_name: db-creds",
    'password: ""',
    "author: alice, keyboard: us, monkey: 1",
]


@pytest.mark.parametrize(("raw", "expected"), POSITIVE)
def test_value_pattern_redacts_and_keeps_the_prefix(raw: str, expected: str) -> None:
    assert NOOP.text(raw) == expected


@pytest.mark.parametrize("raw", NEGATIVE)
def test_near_misses_and_prose_are_left_alone(raw: str) -> None:
    assert NOOP.text(raw) == raw


@pytest.mark.parametrize("raw", [raw for raw, _ in POSITIVE] + NEGATIVE)
def test_text_is_idempotent(raw: str) -> None:
    once = NOOP.text(raw)
    assert NOOP.text(once) == once


ADVERSARIAL_UNITS = [
    "a",
    "password=",
    'password="',
    'token: \\"',
    "://a:",
    "://",
    "-----BEGIN PRIVATE KEY-----",
    "-----BEGIN ",
    "eyJ",
    "eyJaaaaaaaaaaa.",
    "sk-",
    "AKIA",
    "ghp_",
    "xoxb-",
    "Authorization: ",
    "Bearer ",
    "\\",
    "@",
    ":",
    "x" * 300 + "@",
]


def _best_seconds(*texts: str, rounds: int = 3) -> list[float]:
    """Best of `rounds` per text, measured in turns, so a busy machine slows every size alike. CPU time of
    this process (`process_time`), not wall time: waiting for a core on a loaded machine does not count."""
    redactor = Redactor(["some-configured-secret"])
    best = [float("inf")] * len(texts)
    for _ in range(rounds):
        for i, text in enumerate(texts):
            started = time.process_time()
            redactor.text(text)
            best[i] = min(best[i], time.process_time() - started)
    return best


@pytest.mark.parametrize("unit", ADVERSARIAL_UNITS)
def test_adversarial_input_is_linear(unit: str) -> None:
    """Four times the input costs about four times the time (a quadratic pattern would cost 16x)."""
    text = (unit * (500_000 // len(unit) + 1))[:500_000]
    small, large = _best_seconds(text[:125_000], text)
    assert large < 10 * small + 0.05, (small, large)


def test_bundled_runbooks_and_logs_have_no_false_positives() -> None:
    """No bundled file carries a planted secret, so redaction must return every one of them unchanged."""
    files = sorted(path for path in DATA_DIR.rglob("*") if path.is_file())
    assert files
    for path in files:
        text = path.read_text(encoding="utf-8")
        assert NOOP.text(text) == text, path
    for line in (DATA_DIR / "logs" / "demo.ndjson").read_text(encoding="utf-8").splitlines():
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue  # the demo file deliberately carries unparseable lines
        assert NOOP.value(entry) == entry


# --- key-name rules ------------------------------------------------------------------------------------

SENSITIVE_NAMES = [
    "password",
    "PASSWORD",
    "db_password",
    "passwordHash",
    "passwd",
    "MYSQL_PWD",
    "DB_PASS",
    "passphrase",
    "secret",
    "client_secret",
    "secrets",
    "token",
    "access_token",
    "refresh_token",
    "id_token",
    "auth_token",
    "x-csrf-token",
    "accessToken",
    "api_key",
    "apikey",
    "api-key",
    "X-Api-Key",
    "APIKey",
    "private_key",
    "secret_access_key",
    "authorization",
    "Proxy-Authorization",
    "cookie",
    "Set-Cookie",
    "credential",
    "credentials",
    "authentication_string",
    "token_value",
    "password_2",
    "登录密码",
]
HARMLESS_NAMES = [
    "tokens_used",
    "prompt_tokens",
    "completion_tokens",
    "total_tokens",
    "max_total_tokens",
    "token_count",
    "token_type",
    "author",
    "keyboard",
    "monkey",
    "primary_key",
    "cache_key",
    "password_expired",
    "password_last_changed",
    "secret_name",
    "api_key_env",
    "password_env",
    "session_id",
    "private_key_id",
    "dsn",
    "tokenizer",
    "密码过期时间",
    "",
]


@pytest.mark.parametrize("name", SENSITIVE_NAMES)
def test_sensitive_key_names(name: str) -> None:
    assert NOOP.is_sensitive_key(name)


@pytest.mark.parametrize("name", HARMLESS_NAMES)
def test_harmless_key_names(name: str) -> None:
    assert not NOOP.is_sensitive_key(name)


def test_nested_dicts_lists_labels_and_non_string_values() -> None:
    source = {
        "config": {"mysql": {"password": "plain", "host": "db"}, "api_key": 123456},
        "entries": [{"message": "ok", "labels": {"token": ["a", "b"], "pod": "p-1"}}, {"secret": {"k": "v"}}],
        "usage": {"prompt_tokens": 812, "total_tokens": 900},
        "unset": {"api_key": None},
        "tuple": ("password=hunter2", 1.5, True, None),
    }
    assert NOOP.value(source) == {
        "config": {"mysql": {"password": REDACTED, "host": "db"}, "api_key": REDACTED},
        "entries": [{"message": "ok", "labels": {"token": REDACTED, "pod": "p-1"}}, {"secret": REDACTED}],
        "usage": {"prompt_tokens": 812, "total_tokens": 900},
        "unset": {"api_key": None},
        "tuple": (f"password={REDACTED}", 1.5, True, None),
    }


def test_table_columns_shape() -> None:
    table = {
        "columns": ["user", "authentication_string", "password_expired", "note"],
        "rows": [["app", "*2470C0C06DEE42FD", "N", "dsn mysql://a:b@h"], ("root", 42, "Y", None)],
        "row_count": 2,
    }
    assert NOOP.value(table) == {
        "columns": ["user", "authentication_string", "password_expired", "note"],
        "rows": [["app", REDACTED, "N", f"dsn mysql://a:{REDACTED}@h"], ("root", REDACTED, "Y", None)],
        "row_count": 2,
    }
    described = {"columns": [{"name": "api_key", "type": "varchar"}], "rows": [["k-1"]]}
    assert NOOP.value(described)["rows"] == [[REDACTED]]


def test_name_value_pairs_such_as_env_entries() -> None:
    env = [{"name": "DB_PASSWORD", "value": "hunter2"}, {"name": "DB_HOST", "value": "db"}]
    assert NOOP.value(env) == [{"name": "DB_PASSWORD", "value": REDACTED}, {"name": "DB_HOST", "value": "db"}]


def test_value_never_mutates_its_input() -> None:
    source = {"password": "x", "rows": [["a"]], "columns": ["token"], "items": [{"token": "t"}], "t": ("s",)}
    snapshot = copy.deepcopy(source)
    result = NOOP.value(source)
    assert source == snapshot
    assert result is not source
    assert result["items"][0] is not source["items"][0]


def test_value_is_idempotent() -> None:
    source = {"labels": {"api_key": "k", "url": "https://u:p@h"}, "columns": ["pwd"], "rows": [["x"]]}
    once = NOOP.value(source)
    assert NOOP.value(once) == once


# --- logging -------------------------------------------------------------------------------------------


def test_logging_filter_redacts_message_args_exception_and_extra() -> None:
    redactor = Redactor(["dsn-password-123"])
    try:
        raise RuntimeError("connect mysql://app:dsn-password-123@db failed")
    except RuntimeError:
        exc_info = sys.exc_info()
    record = logging.LogRecord(
        "diagnose", logging.ERROR, __file__, 1, "login %s with %r", ("app", "dsn-password-123"), exc_info
    )
    record.__dict__["api_key"] = "sk-abcdefghijklmnopqrstuvwxyz123456"  # as `extra=` would set it
    assert redactor.logging_filter().filter(record)
    formatted = logging.Formatter("%(message)s").format(record)
    assert "dsn-password-123" not in formatted
    assert formatted.startswith(f"login app with '{REDACTED}'")
    assert "RuntimeError: connect mysql://app:" in formatted
    assert record.__dict__["api_key"] == REDACTED


def test_logging_filter_on_a_handler_keeps_secrets_out_of_the_stream() -> None:
    records: list[str] = []

    class ListHandler(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(self.format(record))

    handler = ListHandler()
    handler.addFilter(Redactor(["hunter2-secret"]).logging_filter())
    logger = logging.getLogger("test_redaction.handler")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        logger.warning("password=%s token: %s", "hunter2-secret", "abc")
        logger.warning("bad format %d", "hunter2-secret")  # a broken %-format still must not leak
    finally:
        logger.removeHandler(handler)
    assert records[0] == f"password={REDACTED} token: {REDACTED}"
    assert "hunter2-secret" not in records[1]


# --- properties ----------------------------------------------------------------------------------------

SAFE_SECRET = st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789", min_size=8, max_size=40)
FRAGMENTS = st.sampled_from(
    [
        "password",
        "token",
        "api_key",
        "Authorization",
        "Bearer ",
        "=",
        ": ",
        '"',
        "'",
        "\\",
        '\\"',
        "://",
        "@",
        ":",
        "-----BEGIN PRIVATE KEY-----",
        "-----END PRIVATE KEY-----",
        "eyJ",
        ".",
        "sk-",
        "AKIA",
        "ghp_",
        REDACTED,
        " ",
        "\n",
        "abcdefghijklmnopqrstuvwxyz0123456789",
        "ABCDEFGHIJKLMNOP",
        "x",
        "é密",
    ]
)
KEYS = st.text(max_size=12) | st.sampled_from(["password", "token", "columns", "rows", "name", "value"])
JSON_LIKE = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(KEYS, children),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(prefix=st.text(), secret=SAFE_SECRET, suffix=st.text())
def test_planted_secret_never_survives(prefix: str, secret: str, suffix: str) -> None:
    assert secret not in Redactor([secret]).text(prefix + secret + suffix)


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_arbitrary_unicode_never_raises(text: str) -> None:
    assert isinstance(NOOP.text(text), str)


@settings(max_examples=500, deadline=None)
@given(st.lists(FRAGMENTS, max_size=30).map("".join))
def test_text_is_idempotent_on_credential_shaped_noise(text: str) -> None:
    once = NOOP.text(text)
    assert NOOP.text(once) == once


@settings(max_examples=200, deadline=None)
@given(JSON_LIKE)
def test_value_never_raises_and_is_idempotent(obj: object) -> None:
    once = NOOP.value(obj)
    assert NOOP.value(once) == once
