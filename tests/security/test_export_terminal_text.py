"""Issue 20, item 3: exports and the clipboard are terminal output too.

`cat diagnosis-*.md`, or pasting the `ctrl+g` clipboard into another terminal, must not clear the
screen, write the clipboard (OSC 52), show a disguised link (OSC 8) or hide text (bidi, zero-width):
the Markdown shows every such character as a visible escape, keeping only newline and tab; the JSON
export writes them as JSON string escapes and still decodes to exactly the same values.

Draft text is generated (hypothesis) with control, escape, bidi and invisible characters in every
field: conclusion, statements, scopes, cited tool call IDs, action plan, recommendations, both
limitation lists, plus the query, the model label and the progress's call IDs.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from console.export import RunRecord, draft_json, draft_markdown, run_json, run_markdown, write_run
from console.safe_text import neutralize
from tests.support.console import SIZE, make_app, run_to_end
from tests.support.hostile_text import BIDI, ESCAPES, INVISIBLE, SEPARATORS, hostile_scenario, unsafe

# OSC 52 (write the clipboard), OSC 8 (a link whose text lies), a cursor-hiding CSI, C1 CSI, a bidi
# override that reverses what follows, and a zero-width joiner: each must arrive as visible text.
SEQUENCES = [
    "\x1b]52;c;cm0gLXJmIH4=\x07",
    "\x1b]8;;https://evil.example/\x1b\\docs.example.com\x1b]8;;\x1b\\",
    "\x1b[?25l",
    "\x9b2J",
    "\u202eexe.txt",
    "\u2066hidden\u2069",
    ESCAPES,
]
HOSTILE_CHARACTERS = sorted(set(BIDI + INVISIBLE + SEPARATORS + ESCAPES + "\x00\x07\x7f\x85\x9b\ud800"))

pieces = st.one_of(
    st.sampled_from(SEQUENCES),
    st.sampled_from(HOSTILE_CHARACTERS),
    st.text(alphabet=st.characters(codec="utf-8"), max_size=4),
    st.sampled_from(["连接池", "pool exhausted", "\n", "\t", "`", "|", "#"]),
)
text = st.lists(pieces, min_size=1, max_size=6).map("".join)
call_ids = st.lists(text, min_size=1, max_size=3)


@st.composite
def drafts(draw: st.DrawFn) -> dict[str, Any]:
    finding: dict[str, Any] = {"kind": "FINDING", "statement": draw(text), "evidence": draw(call_ids)}
    finding["scope"] = draw(text)
    negative: dict[str, Any] = {"kind": "NEGATIVE_OBSERVATION", "statement": draw(text), "scope": draw(text)}
    negative["evidence"] = draw(st.one_of(st.just("NO_EVIDENCE"), call_ids))
    return {
        "conclusion": draw(st.one_of(st.none(), text)),
        "analysis": [finding, negative],
        "action_plan": draw(st.lists(text, max_size=3)),
        "recommendations": draw(st.lists(text, max_size=3)),
        "limitations": {
            "checked_scope": draw(st.lists(text, max_size=3)),
            "missing_info": draw(st.lists(text, min_size=1, max_size=3)),
        },
    }


@st.composite
def records(draw: st.DrawFn) -> RunRecord:
    draft = draw(drafts())
    cited = [i for item in draft["analysis"] if isinstance(item["evidence"], list) for i in item["evidence"]]
    result = {
        "run_id": "run-1",
        "session_id": "session-1",
        "outcome": "DRAFT",
        "stop_reason": "COMPLETED",
        "draft": draft,
        "progress": {
            "checks": [
                {
                    "tool_call_id": i,
                    "tool": "lookup_knowledge",
                    "evidence_status": "FOUND",
                    "evaluation": None,
                }
                for i in cited
            ],
            "stop_required": False,
            "saturation": None,
        },
        "usage": {"model_calls": 2, "prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
        "failure": None,
    }
    return RunRecord(query=draw(text), previous_turn=None, model=draw(text), result=result)


def strings_of(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for item in value.values() for s in strings_of(item)]
    if isinstance(value, list):
        return [s for item in value for s in strings_of(item)]
    return []


def shown_in_markdown(value: str) -> str:
    """How the Markdown shows a value: whitespace folded to one line, then made visible."""
    return neutralize(" ".join(value.split()))


def assert_markdown_is_safe(markdown: str, draft: dict[str, Any]) -> None:
    assert unsafe(markdown) == []  # only newline and tab reach a terminal raw
    for value in strings_of(draft):
        if value != "NO_EVIDENCE":
            assert shown_in_markdown(value) in markdown  # shown, not dropped


def assert_json_is_safe_and_exact(text: str, expected: Any) -> None:
    assert unsafe(text) == []
    assert json.loads(text) == expected


@settings(max_examples=150, deadline=None)
@given(draft=drafts())
def test_the_clipboard_text_neutralises_every_field(draft: dict[str, Any]) -> None:
    assert_markdown_is_safe(draft_markdown(draft), draft)  # ctrl+g
    assert_json_is_safe_and_exact(draft_json(draft), draft)  # the palette's "Copy Draft as JSON"


@settings(max_examples=100, deadline=None)
@given(record=records())
def test_both_export_documents_neutralise_every_field(record: RunRecord) -> None:
    markdown = run_markdown(record, "2026-11-30T03:00:00+00:00")
    assert_markdown_is_safe(markdown, dict(record.result["draft"]))
    assert neutralize(record.model) in markdown
    assert all(neutralize(line) in markdown for line in record.query.splitlines())  # quoted line by line
    exported = json.loads(run_json(record, "now"))
    assert_json_is_safe_and_exact(run_json(record, "now"), exported)
    assert exported["result"] == record.result
    assert exported["query"] == record.query


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(record=records())
def test_the_written_files_hold_no_raw_control_character(tmp_path: Path, record: RunRecord) -> None:
    """What `cat` reads: the bytes on disk, valid UTF-8 (a lone surrogate cannot even be written raw)."""
    folder = tmp_path / os.urandom(6).hex()
    folder.mkdir()
    markdown, exported = write_run(record, folder, "2026-11-30T03:00:00+00:00")
    assert unsafe(markdown.read_bytes().decode("utf-8")) == []
    text = exported.read_bytes().decode("utf-8")
    assert unsafe(text) == []
    assert json.loads(text)["result"] == record.result


async def test_the_console_copies_and_exports_a_hostile_draft_neutralised(tmp_path: Path) -> None:
    """The real keys: ctrl+g puts terminal-safe Markdown on the clipboard, ctrl+s writes safe files;
    a second ctrl+s asks before replacing them."""
    app = make_app(tmp_path, str(hostile_scenario(tmp_path)))
    async with app.run_test(size=SIZE) as pilot:
        await run_to_end(pilot)
        draft = app.investigate.state.draft
        assert draft is not None
        assert "\x1b" in draft["conclusion"]  # the model's text, kept as data
        await pilot.press("ctrl+g")
        assert unsafe(app.clipboard) == []
        assert "\\x1b]0;pwned\\x07" in app.clipboard
        app.investigate.action_copy_draft_json()
        assert unsafe(app.clipboard) == []
        assert json.loads(app.clipboard) == draft

        await pilot.press("ctrl+s")
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        markdown, exported = tmp_path / "diagnosis-run-0001.md", tmp_path / "diagnosis-run-0001.json"
        assert unsafe(markdown.read_text(encoding="utf-8")) == []
        assert unsafe(exported.read_text(encoding="utf-8")) == []
        assert json.loads(exported.read_text(encoding="utf-8"))["result"]["draft"] == draft
        first = (markdown.stat().st_ino, exported.stat().st_ino)

        await pilot.press("ctrl+s")  # the same folder again: the dialog names the files and waits
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        warning = str(app.screen.query_one("#export-error").render())
        assert "diagnosis-run-0001.md and diagnosis-run-0001.json already exist" in warning
        assert (markdown.stat().st_ino, exported.stat().st_ino) == first
        await pilot.press("enter")  # a second enter replaces them (new files, owner-only)
        await pilot.pause()
        assert markdown.stat().st_ino != first[0]
        assert exported.stat().st_ino != first[1]
        assert oct(markdown.stat().st_mode & 0o777) == "0o600"
