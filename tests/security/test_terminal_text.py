"""Hole 9: hostile text never reaches the terminal raw.

One function (`console.safe_text.neutralize`) neutralises C0/C1 controls (ESC, CSI, OSC, BEL...), bidi
embeddings, overrides and isolates, line/paragraph separators and zero-width/format characters, on
every path to a terminal: plain and JSON output of `diagnose run`, every column of `diagnose audit`
(also of a tampered audit file), and the console, whose painted lines pass a last filter.
"""

from __future__ import annotations

import json
import sqlite3
import sys
import unicodedata
from pathlib import Path
from typing import Any

import pytest
from rich.segment import Segment
from textual.color import Color

from console.safe_text import neutralize
from tests.support.console import SIZE, make_app, run_to_end
from tests.support.hostile_text import (
    BIDI,
    ESCAPES,
    HOSTILE,
    INVISIBLE,
    SEPARATORS,
    UNSAFE_CATEGORIES,
    hostile_scenario,
    unsafe,
)
from tests.support.resilience import run_cli


def test_one_function_neutralises_every_unsafe_code_point() -> None:
    """Compared with unicodedata over every code point: nothing unsafe passes, nothing safe is touched."""
    for code in range(sys.maxunicode + 1):
        ch = chr(code)
        shown = neutralize(ch, newlines=False)
        if unicodedata.category(ch) in UNSAFE_CATEGORIES:
            assert shown != ch, f"U+{code:04X}"
            assert not unsafe(shown, allow_layout=False), f"U+{code:04X}"
        elif unicodedata.category(ch) != "Cn":  # (format characters of later Unicode versions may be
            assert shown == ch, f"U+{code:04X}"  # neutralised while still unassigned here)
    assert neutralize("a\nb\tc") == "a\nb\tc"
    assert neutralize("a\nb", newlines=False) == "a\\x0ab"


def test_the_json_form_stays_json_with_the_same_values() -> None:
    value = {"k" + BIDI: HOSTILE, "n": [SEPARATORS, "\U000e0041"]}
    text = neutralize(json.dumps(value, ensure_ascii=False), form="json")
    assert not unsafe(text)
    assert json.loads(text) == value


@pytest.mark.parametrize("output", [[], ["--json"], ["--events", "-"]])
def test_run_output_has_no_raw_unsafe_character(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], output: list[str]
) -> None:
    run = run_cli(
        capsys, "run", "--scenario", hostile_scenario(tmp_path), "--audit-db", tmp_path / "a.db", *output
    )
    assert run.code == 0, run.err
    assert unsafe(run.out) == []
    assert unsafe(run.err) == []
    if output == ["--json"]:
        assert run.result["draft"]["conclusion"] == HOSTILE  # the same value once decoded


def tamper(audit: Path) -> None:
    conn = sqlite3.connect(audit)
    try:
        conn.execute(
            "UPDATE runs SET outcome = ?, stop_reason = ?, started_at = ?, model_calls = ?, total_tokens = ?",
            (ESCAPES + "DRAFT", BIDI + "COMPLETED", "2026" + SEPARATORS, "\x1b[5m", "\x1b]0;t\x07"),
        )
        conn.execute(
            "UPDATE invocations SET tool = ?, error_code = ?, evaluation = ?, started_at = ?, "
            "duration_ms = ?, reason = ?, input_json = ?",
            ("\x1b[2J", "\u2028", "\x1b[31m", BIDI + "2026", "\x1b[5m", INVISIBLE, '{"q": "\\u001b[2J"}'),
        )
        conn.execute(
            "UPDATE model_rounds SET prompt_tokens = ?, tool_call_ids = ?", ("\x1b[1m", '["\x1b[2J"]')
        )
        conn.execute("UPDATE protocol_events SET code = ?", (ESCAPES,))
        conn.commit()
    finally:
        conn.close()


def test_the_audit_cli_shows_every_column_of_a_tampered_file_neutralised(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    audit = tmp_path / "a.db"
    first = run_cli(capsys, "run", "--scenario", "unknown-tool", "--audit-db", audit, "--json")
    run_id = first.result["run_id"]
    tamper(audit)
    for command in (
        ["runs"],
        ["runs", "--json"],
        ["invocations"],
        ["invocations", "--json"],
        ["show", run_id],
        ["show", run_id, "--json"],
        ["export"],
    ):
        run = run_cli(capsys, "audit", *command, "--audit-db", audit)
        assert run.code == 0, (command, run.err)
        assert unsafe(run.out) == [], command
        assert unsafe(run.err) == [], command


def painted(app: Any) -> str:
    """Every line the compositor paints (after the line filters): what reaches the terminal."""
    return "".join(strip.text for strip in app.screen._compositor.render_strips())


async def test_nothing_unsafe_is_painted_by_the_console(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    app = make_app(tmp_path, str(hostile_scenario(tmp_path)))
    async with app.run_test(size=SIZE) as pilot:
        await run_to_end(pilot)
        assert app.investigate.state.outcome == "DRAFT"
        assert unsafe(painted(app), allow_layout=False) == []
        app.investigate.run_view.timeline.focus()
        await pilot.press("down")
        await pilot.pause()
        assert unsafe(painted(app), allow_layout=False) == []  # the detail panel of the hostile call
        assert "call\\u202e" in painted(app)  # the model-chosen call ID is shown, escaped visibly
        await pilot.press("f3")  # the audit screen, rows from the audit file
        await pilot.pause(0.5)
        assert unsafe(painted(app), allow_layout=False) == []


def test_the_screen_filter_blanks_what_a_widget_let_through() -> None:
    from console.app import TerminalSafeFilter

    line = [Segment("ok "), Segment(HOSTILE), Segment(" 中文")]
    filtered = TerminalSafeFilter().apply(line, Color(0, 0, 0))
    text = "".join(segment.text for segment in filtered)
    assert unsafe(text, allow_layout=False) == []
    assert text.startswith("ok evil")
    assert text.endswith("end 中文")
    assert TerminalSafeFilter().apply(filtered, Color(0, 0, 0)) is filtered  # clean lines are untouched
