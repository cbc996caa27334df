"""Issue 20, item 4: every log record `diagnose` writes is one line, without control characters, redacted.

The log holds model text (Haystack logs a malformed tool-call argument string verbatim), backend
messages and tracebacks. Raw, an ESC sequence drives the terminal of whoever reads the file, and a
newline forges a record. Checked through the real handler (`console.commands.main._log_to_file`): records
of our loggers and of libraries (haystack, httpx, openai), of a logger that does not propagate, exception
tracebacks, stack dumps and captured warnings, with generated text as well as the Haystack case end to
end against the OpenAI-compatible stub.
"""

from __future__ import annotations

import logging
import os
import re
import subprocess
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.secrets import redact_logs
from console.commands.main import _log_to_file
from tests.support.openai_server import completion, fake_openai
from tests.support.resilience import EXIT_CODES, QUERY, REPO, no_conclusion_draft, run_cli, write_config
from tools.redaction import Redactor

HEADER = re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} (?:DEBUG|INFO|WARNING|ERROR|CRITICAL) \S+: ")
FORGED = "2026-11-30 02:10:03,000 CRITICAL console.commands.main: FORGED-RECORD all audit rows deleted"
TOKEN = "ghp_" + "a1B2c3D4" * 5
CONFIGURED = "Configured-Pw-5d2a9e"
HOSTILE = f"x\x1b[2J\x1b]0;pwned\x07\x9b31m\u202e\n{FORGED}\r\npassword=Hunter2-Forged {TOKEN} {CONFIGURED}"
SECRETS = ("Hunter2-Forged", TOKEN, CONFIGURED)


@pytest.fixture
def log_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """`diagnose`'s log handler, as `main` installs it; the global logging state is restored after."""
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", list(root.handlers))
    monkeypatch.setattr(root, "level", root.level)
    monkeypatch.setattr(logging, "lastResort", logging.lastResort)
    _log_to_file()
    redact_logs(Redactor([CONFIGURED]))
    try:
        yield tmp_path / "state" / "diagnosis-console" / "diagnose.log"
    finally:
        logging.captureWarnings(False)
        for handler in root.handlers:
            handler.close()


def assert_one_safe_line_per_record(text: str, records: int) -> list[str]:
    """Exactly `records` lines, each starting with a real record header, none with a control or
    invisible character, and no secret anywhere."""
    assert text.endswith("\n")
    lines = text[:-1].split("\n")
    assert len(lines) == records, lines
    for line in lines:
        assert HEADER.match(line), line
        assert not re.search(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e]", line), line
    for secret in SECRETS:
        assert secret not in text
    return lines


def test_haystack_logs_a_malformed_tool_call_on_one_safe_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A model answers with an unparseable arguments string carrying ESC, BEL, CSI, a bidi override,
    newlines with a forged record and secrets: Haystack logs it as it is; the file gets one line."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", list(root.handlers))
    monkeypatch.setattr(root, "level", root.level)
    monkeypatch.setattr(logging, "lastResort", logging.lastResort)
    reply = completion(tool_calls=[{"id": "call-1", "name": "lookup_knowledge", "arguments": {}}])
    malformed = '{"previous_observation": null, "input": {"query": "' + HOSTILE
    reply["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = malformed
    try:
        with fake_openai([reply, completion(text=no_conclusion_draft())]) as stub:
            config = write_config(
                tmp_path / "config.toml",
                {
                    "model": {"provider": "openai", "base_url": stub.url, "name": "m", "timeout_s": 5},
                    "mysql": {"password_env": "MYSQL_PW_FOR_LOG_TEST"},
                },
            )
            monkeypatch.setenv("MYSQL_PW_FOR_LOG_TEST", CONFIGURED)
            audit = tmp_path / "audit.db"
            run = run_cli(capsys, "run", "--query", QUERY, "--config", config, "--audit-db", audit)
    finally:
        logging.captureWarnings(False)
        for handler in root.handlers:
            handler.close()
    assert run.code in EXIT_CODES
    log = (tmp_path / "state" / "diagnosis-console" / "diagnose.log").read_text(encoding="utf-8")
    lines = log[:-1].split("\n")
    assert_one_safe_line_per_record(log, len(lines))
    [carrier] = [line for line in lines if "FORGED-RECORD" in line]
    assert " WARNING haystack.components.generators.chat.openai: OpenAI returned a malformed JSON" in carrier
    # Shown, not acted on.
    assert "\\x1b[2J" in carrier
    assert "\\x07" in carrier
    assert "\\n" + FORGED in carrier
    assert not any(line.startswith(FORGED) for line in lines)
    for secret in SECRETS:
        assert secret not in run.out + run.err


@pytest.mark.parametrize("name", ["diagnose", "haystack.core.pipeline", "httpx", "openai._base_client"])
def test_every_logger_writes_one_redacted_line(log_file: Path, name: str) -> None:
    logging.getLogger(name).warning("seen: %s", HOSTILE)
    assert_one_safe_line_per_record(log_file.read_text(encoding="utf-8"), 1)


def test_a_traceback_and_a_stack_dump_stay_on_their_record_line(log_file: Path) -> None:
    try:
        raise RuntimeError(HOSTILE)
    except RuntimeError:
        logging.getLogger("tools.mysql.adapter").exception("query failed")
    logging.getLogger("agent.use_case").warning("where: %s", HOSTILE, stack_info=True)
    lines = assert_one_safe_line_per_record(log_file.read_text(encoding="utf-8"), 2)
    assert "\\nTraceback (most recent call last):\\n" in lines[0]
    assert "RuntimeError: x\\x1b[2J" in lines[0]
    assert "\\nStack (most recent call last):\\n" in lines[1]


def test_a_logger_that_does_not_propagate_writes_to_the_log_not_stderr(
    log_file: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """Python's last resort would print the record raw to stderr, over the console's screen."""
    isolated = logging.getLogger("some_library.isolated")
    monkeypatch.setattr(isolated, "propagate", False)
    isolated.warning("seen: %s", HOSTILE)
    assert capfd.readouterr().err == ""
    assert_one_safe_line_per_record(log_file.read_text(encoding="utf-8"), 1)


def test_a_warning_is_captured_into_the_log(log_file: Path, capfd: pytest.CaptureFixture[str]) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.warn(HOSTILE, RuntimeWarning, stacklevel=1)
    assert capfd.readouterr().err == ""
    assert_one_safe_line_per_record(log_file.read_text(encoding="utf-8"), 1)


def test_generated_text_never_breaks_the_one_line_rule(log_file: Path) -> None:
    """Any text (controls, separators, surrogate-free Unicode) in the message, an argument and an
    exception: each record is one line with nothing a terminal would act on."""
    written = 0

    @settings(max_examples=150, deadline=None)
    @given(st.text(max_size=80), st.text(max_size=40))
    def check(message: str, argument: str) -> None:
        nonlocal written
        before = log_file.stat().st_size if log_file.exists() else 0
        logger = logging.getLogger("httpx")
        logger.warning(message + " %s", argument)
        try:
            raise ValueError(argument + message)
        except ValueError:
            logger.error("failed: %r", message, exc_info=True)
        written += 2
        with log_file.open("rb") as stream:
            stream.seek(before)
            chunk = stream.read().decode("utf-8")
        assert_one_safe_line_per_record(chunk, 2)

    check()
    assert written >= 150


def test_importing_the_console_keeps_haystack_from_adding_its_own_handler() -> None:
    """With structlog installed, Haystack attaches a stderr handler to its loggers at import unless
    HAYSTACK_LOGGING_IGNORE_STRUCTLOG is set; `console` sets it before anything imports Haystack."""
    env = {key: value for key, value in os.environ.items() if key != "HAYSTACK_LOGGING_IGNORE_STRUCTLOG"}
    code = "import os, console; print(os.environ.get('HAYSTACK_LOGGING_IGNORE_STRUCTLOG'))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=REPO)
    assert done.stdout.strip() == "true", done.stderr
