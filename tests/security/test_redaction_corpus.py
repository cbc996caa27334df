"""Issue 20, item 2 and issue 22, item 10: every credential shape is redacted in every place redaction
applies, and ordinary log lines (and the tool's own messages) pass unchanged.

The corpus (tests/support/redaction_corpus.py) holds 73 credential shapes — each one issue 20 names,
and the usual issuer tokens, also inside punctuation and after a newline or a tab — and 272 ordinary lines.
The places: plain text, the text JSON-escaped in a JSON document (a structured log line), a dict value
(a field, a label, a table cell, a field holding JSON), a run event as `--events` writes it, and a log
record as `diagnose.log` holds it. Generated
input checks the classes behind the examples: any key ending in a secret's name, with any separator and
any credential-like value (tails after `&` and `,` included); any status word after such a key; any
path ending in such a name.

Measured on the code before this change (docs/RELIABILITY.md has the figures): 40 of the 73 shapes were
redacted in plain text, and 33 of the 272 ordinary lines were changed.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.events.emitter import RunEventEmitter
from agent.events.run_events import ToolFinished
from agent.vocabulary import InvocationStatus
from console.commands.main import _log_to_file
from tests.support.redaction_corpus import SHAPES, Shape, ordinary_lines
from tools.redaction import NOOP, REDACTED

ISSUE_SHAPES = {
    "pgp-private-key-block", "twilio-api-key", "vault-service-token", "webhook-signing-secret",
    "dsn-password-with-slash", "auth-key", "db-pass", "secret-key-base", "creds", "docker-config-auth",
    "curl-u", "password-tail-after-ampersand", "password-tail-after-comma", "traditional-chinese-label",
    "korean-label",
}  # fmt: skip
ORDINARY = ordinary_lines()


def test_the_corpus_covers_the_issue() -> None:
    names = [shape.name for shape in SHAPES]
    assert len(names) == len(set(names)) >= 40
    assert set(names) >= ISSUE_SHAPES
    assert len(ORDINARY) >= 200
    for needed in (
        "(using password: YES)",
        "password: incorrect",
        "token: expired",
        "password rotation is due",
    ):
        assert any(needed in line for line in ORDINARY), needed
    assert all(secret for shape in SHAPES for secret in shape.secrets)


# --- the places redaction applies ------------------------------------------------------------------------


def _document(text: str) -> dict[str, object]:
    """The text as a field, and inside a field that holds JSON (a log line that is itself JSON)."""
    return {"detail": text, "line": json.dumps({"message": text}, ensure_ascii=False)}


def in_text(text: str) -> tuple[str, str]:
    return NOOP.text(text), text


def in_json(text: str) -> tuple[str, str]:
    """Text that is JSON: a structured log line, a backend's response body."""
    serialised = json.dumps({"ts": "2026-11-30T02:10:03Z", "message": text}, ensure_ascii=False)
    return NOOP.text(serialised), serialised


def in_value(text: str) -> tuple[str, str]:
    value = {
        "message": text,
        "labels": {"note": text},
        "columns": ["note"],
        "rows": [[text]],
        **_document(text),
    }
    return json.dumps(NOOP.value(value), ensure_ascii=False), json.dumps(value, ensure_ascii=False)


def in_event(text: str) -> tuple[str, str]:
    """A `tool_finished` as the emitter redacts it and `--events` writes it."""
    projection = {"entries": [{"message": text, "labels": {"pod": text}}], **_document(text)}
    emitter = RunEventEmitter("run-1", "session-1", clock=lambda: "2026-11-30T02:10:03Z", redactor=NOOP)
    event = emitter.emit(
        ToolFinished,
        round=1,
        tool_call_id="call-1",
        tool="query_logs",
        status=InvocationStatus.FOUND,
        error_code=None,
        reason=None,
        projection=projection,
        duration_ms=3,
        observation={"tool_call_id": "call-1", "data": projection},
    )
    wire = json.dumps(event.to_wire(), ensure_ascii=False, separators=(",", ":"))
    expected = json.dumps(
        {
            **event.to_wire(),
            "projection": projection,
            "observation": {"tool_call_id": "call-1", "data": projection},
        },
        ensure_ascii=False,
        separators=(",", ":"),
    )
    return wire, expected


@pytest.fixture
def in_log(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[str], tuple[str, str]]]:
    """A record through `diagnose`'s log handler: what its line holds after the logger's name."""
    from console.log_records import one_line

    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", list(root.handlers))
    monkeypatch.setattr(root, "level", root.level)
    monkeypatch.setattr(logging, "lastResort", logging.lastResort)
    _log_to_file()
    path = tmp_path / "state" / "diagnosis-console" / "diagnose.log"
    logger = logging.getLogger("tools.logs.loki_source")

    def place(text: str) -> tuple[str, str]:
        start = path.stat().st_size if path.exists() else 0
        logger.warning("backend said: %s", text)
        with path.open("rb") as stream:
            stream.seek(start)
            line = stream.read().decode("utf-8")
        assert line.count("\n") == 1
        return line.split(" tools.logs.loki_source: ", 1)[1][:-1], one_line("backend said: " + text)

    try:
        yield place
    finally:
        logging.captureWarnings(False)
        for handler in root.handlers:
            handler.close()


PLACES = {"text": in_text, "json": in_json, "value": in_value, "event": in_event}


def _spellings(secret: str) -> set[str]:
    """The secret as text, JSON-escaped once and twice (a JSON string inside a JSON string)."""
    once = json.dumps(secret, ensure_ascii=False)[1:-1]
    return {secret, once, json.dumps(once, ensure_ascii=False)[1:-1]}


def _leaks(place: Callable[[str], tuple[str, str]], shapes: list[Shape]) -> list[str]:
    leaks = []
    for shape in shapes:
        output, _ = place(shape.text)
        found = [s for secret in shape.secrets for s in _spellings(secret) if s in output]
        if found:
            leaks.append(f"{shape.name}: {output[:200]!r}")
    return leaks


def _mangled(place: Callable[[str], tuple[str, str]], lines: list[str]) -> list[str]:
    return [output for output, expected in map(place, lines) if output != expected]


@pytest.mark.parametrize("place", PLACES)
def test_every_shape_is_redacted(place: str) -> None:
    assert _leaks(PLACES[place], SHAPES) == []


def test_every_shape_is_redacted_in_a_log_record(in_log: Callable[[str], tuple[str, str]]) -> None:
    assert _leaks(in_log, SHAPES) == []


@pytest.mark.parametrize("place", PLACES)
def test_ordinary_lines_pass_unchanged(place: str) -> None:
    assert _mangled(PLACES[place], ORDINARY) == []


def test_ordinary_lines_pass_unchanged_in_a_log_record(in_log: Callable[[str], tuple[str, str]]) -> None:
    assert _mangled(in_log, ORDINARY) == []


def test_the_corpus_is_redacted_idempotently() -> None:
    for text in [shape.text for shape in SHAPES] + ORDINARY:
        once = NOOP.text(text)
        assert NOOP.text(once) == once, text


# --- the classes behind the examples ---------------------------------------------------------------------

SECRET_KEYS = [
    "password", "passwd", "passphrase", "pwd", "secret", "token", "creds", "credentials", "api_key", "apikey",
    "auth_key", "access_key", "secret_key", "private_key", "client_key", "service_key", "db_key",
    "session_key", "master_key", "license_key", "Passwort", "contraseña", "пароль", "密码", "密碼", "口令",
    "密钥", "密鑰", "令牌", "憑證", "パスワード", "비밀번호", "암호", "패스워드",
]  # fmt: skip
KEY_PREFIXES = ["", "db_", "DB_", "app.", "spring.datasource.", "X-", "mysql_", "登录", "smtp-"]
KEY_SUFFIXES = ["", "_hash", "_value", "_base", "2", ".enc"]
SEPARATORS = ["=", ": ", " = ", ":", "=>", " => ", "：", "＝", '": "', "='", '="']
VALUE_CHARS = st.sampled_from("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789!#*+-./?@^_|~&,")


@st.composite
def credentials(draw: st.DrawFn) -> str:
    """A credential-like value: letters and digits with symbols, `&` and `,` inside, never at the end."""
    body = draw(st.lists(VALUE_CHARS, min_size=4, max_size=30).map("".join))
    return draw(st.sampled_from("abcXYZ")) + body.strip("&,") + draw(st.sampled_from("0123456789"))


@settings(max_examples=400, deadline=None)
@given(
    st.sampled_from(KEY_PREFIXES),
    st.sampled_from(SECRET_KEYS),
    st.sampled_from(KEY_SUFFIXES),
    st.sampled_from(SEPARATORS),
    credentials(),
    st.sampled_from(["", " host=db1", ", retries=3", "&user=app", '"', "'", ";"]),
)
def test_any_secret_key_hides_any_credential_value(
    prefix: str, key: str, suffix: str, separator: str, value: str, after: str
) -> None:
    line = f"connect {prefix}{key}{suffix}{separator}{value}{after}"
    redacted = NOOP.text(line)
    assert value not in redacted, redacted
    assert REDACTED in redacted, redacted
    for part in value.replace("&", ",").split(","):
        assert len(part) < 6 or part not in redacted.replace(f"{prefix}{key}{suffix}", ""), redacted


STATUS_WORDS = ["YES", "NO", "incorrect", "expired", "true", "false", "missing", "required", "not", "invalid"]


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(KEY_PREFIXES),
    st.sampled_from(SECRET_KEYS),
    st.sampled_from([": ", "=", " = ", ":"]),
    st.sampled_from(STATUS_WORDS),
    st.sampled_from([str.lower, str.upper, str.title]),
    st.sampled_from(["", ")", " (attempt 3 of 5)", ", retrying"]),
)
def test_a_status_word_after_a_secret_key_stays_readable(
    prefix: str, key: str, separator: str, word: str, case: Callable[[str], str], after: str
) -> None:
    line = f"login failed ({prefix}{key}{separator}{case(word)}{after}"
    assert NOOP.text(line) == line


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.text("abcdefghijklmnopqrstuvwxyz0123456789_.-", min_size=1, max_size=12), min_size=1, max_size=4
    ),
    st.sampled_from(SECRET_KEYS),
    st.sampled_from(["/", "\\"]),
    st.sampled_from([": No such file or directory", ": [Errno 13] Permission denied", ": is owned by uid 0"]),
)
def test_a_path_ending_in_a_secret_name_stays_readable(
    folders: list[str], key: str, slash: str, message: str
) -> None:
    if slash == "\\" and key[0] in "bfnrtu":
        key = "db_" + key  # `\token` reads as a JSON escape followed by "oken": a key, hidden on purpose
    line = "cannot open " + slash + slash.join([*folders, key]) + message
    assert NOOP.text(line) == line


# --- cost ------------------------------------------------------------------------------------------------

NEW_RULE_UNITS = [
    "\\npassword=",  # a key after a JSON escape: the backslash run is looked at, bounded
    "/srv/passwd: ",  # a key that ends a path
    "password=a&",  # a value's tail after `&`
    "password=a,b",
    "://a:/",  # a URL password with '/'
    "a:b@tcp(",  # Go's DSN
    "curl -u a:",
    '"auth": "',
    "---- BEGIN SSH2 ENCRYPTED PRIVATE KEY ----",
    "-----BEGIN PGP PRIVATE KEY BLOCK-----",
    "SK0123456789abcdef",  # a maintained rule's keyword and a partial token
    "hvs.",
]


@pytest.mark.parametrize("unit", NEW_RULE_UNITS)
def test_the_new_rules_cost_linear_time(unit: str) -> None:
    """10x the input costs ~10x when linear and ~100x when quadratic: the bound sits between, and the
    two sizes are measured side by side in CPU time, so a busy machine slows both alike."""
    small = (unit * (20_000 // len(unit) + 1))[:20_000]
    large = (unit * (200_000 // len(unit) + 1))[:200_000]
    best = [float("inf"), float("inf")]
    for _ in range(3):
        for index, text in enumerate((small, large)):
            started = time.process_time()
            NOOP.text(text)  # longer than the cached length: the rules run every time
            best[index] = min(best[index], time.process_time() - started)
    assert best[1] / max(best[0], 1e-5) < 30, best
