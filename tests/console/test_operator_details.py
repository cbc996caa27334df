"""Smaller things an operator notices (issue 22, item 12): ctrl+c cancels a run, a dimmed key says
why, no stale pending observation after the run, counts that read as English, a paste that does not
freeze the console, and an export that does not land in the folder the console started in.

Driven like an operator through the pilot, with the real engine; what is asserted is what the screen
paints or what the console did. The paste is measured as work done (edits of the query box), never
as time.
"""

from __future__ import annotations

import asyncio
import string
from pathlib import Path
from typing import Any, ClassVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from textual import events
from textual.app import App, ComposeResult
from textual.widgets import Input, TextArea

import console.screens.investigate as investigate_module
from console.app import DiagnoseApp
from console.host import ConsoleOptions
from console.screens.audit import AuditScreen
from console.screens.export_dialog import ExportDialog
from console.widgets.protocol import ProtocolPanel
from tests.support.console import (
    FIXED_NOW,
    a_slow_run,
    engine_ready,
    long_draft_scenario,
    make_app,
    painted_text,
    pinned_ids,
    run_to_end,
    settled,
    slow_app,
    wait_until,
)

SMALL = (80, 24)


def status_text(app: DiagnoseApp) -> str:
    """The status bar as painted (one to three lines), as one line of words."""
    return " ".join(" ".join(painted_text(app).splitlines()[:3]).split())


# ------------------------------------------------------------------ ctrl+c
async def test_ctrl_c_cancels_the_run_from_any_screen(tmp_path: Path) -> None:
    app = slow_app(tmp_path)
    async with app.run_test(size=SMALL) as pilot:
        for where in ("investigate", "audit"):
            await a_slow_run(pilot)
            if where == "audit":
                await pilot.press("f3")
                await wait_until(lambda: isinstance(app.screen, AuditScreen), pilot, what="the audit")
            ended = app.investigate.runs_ended
            await pilot.press("ctrl+c")
            await wait_until(lambda: app.investigate.runs_ended > ended, pilot, what="the run to end")  # noqa: B023
            assert app.investigate.state.outcome == "CANCELLED", where
            # Cancelled, not quit.
            assert app.is_running
            assert app.return_code is None
            await pilot.press("f2")
            await pilot.pause()

        await pilot.press("ctrl+c")  # no run: Textual's meaning (copy in the query box), never quit
        await pilot.pause()
        assert app.is_running
        assert app.investigate.state.outcome == "CANCELLED"


# ------------------------------------------------------------------ a dimmed key says why
@pytest.mark.parametrize(
    ("key", "said"),
    [
        ("ctrl+f", "no Draft to follow up"),
        ("ctrl+g", "no Draft to copy"),
        ("ctrl+s", "nothing to export: no run has finished"),
    ],
)
async def test_a_dimmed_key_says_why_in_the_status_bar(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, key: str, said: str
) -> None:
    monkeypatch.setattr(investigate_module, "WHY_SHOWN_S", 0.3, raising=False)  # (absent before)
    app = make_app(tmp_path, "evidence-backed-diagnosis")
    async with app.run_test(size=SMALL) as pilot:
        await engine_ready(pilot)
        await pilot.press(key)
        await pilot.pause()
        assert said in status_text(app)
        first_line = painted_text(app).splitlines()[0]
        assert "scripted: evidence-backed-diagnosis" in first_line  # the model stays beside the reason
        await wait_until(lambda: "idle" in status_text(app), pilot, what="the reason to go")


async def test_after_a_stop_the_reason_names_the_outcome_and_in_a_run_says_wait(tmp_path: Path) -> None:
    app = make_app(tmp_path, "stop-required-ignored")
    async with app.run_test(size=SMALL) as pilot:
        await run_to_end(pilot)
        await pilot.press("ctrl+f")
        await pilot.pause()
        assert "CONTROLLED_STOP: no Draft to follow up" in status_text(app)
        said = [n.message for n in app._notifications]
        assert any("a follow-up carries a draft's conclusion and limitations" in m.lower() for m in said)

    (tmp_path / "slow").mkdir()  # an audit of its own: the pinned run IDs start again at run-0001
    app = slow_app(tmp_path / "slow")
    async with app.run_test(size=SMALL) as pilot:
        await a_slow_run(pilot)
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert "run in progress" in status_text(app)
        await pilot.press("escape")
        await wait_until(lambda: not app.investigate.running, pilot, what="the cancel")
        assert "finished: CANCELLED (exit 12)" in status_text(app)  # the end of the run wins


# ------------------------------------------------------------------ pending observation
async def test_no_pending_observation_is_shown_once_the_draft_completed(tmp_path: Path) -> None:
    app = make_app(tmp_path, "evidence-backed-diagnosis")
    async with app.run_test(size=(120, 40)) as pilot:
        await run_to_end(pilot)
        panel = " ".join(app.investigate.query_one(ProtocolPanel).render().plain.split())
        assert "pending observation none: the run ended (call-3 never evaluated)" in panel
        assert "pending observation none: the run ended" in " ".join(painted_text(app).split())


# ------------------------------------------------------------------ counts
@given(st.integers(min_value=0, max_value=10**7), st.sampled_from(["run", "model call", "token", "round"]))
def test_a_count_takes_the_singular_only_for_one(count: int, noun: str) -> None:
    from console.presentation import counted

    text = counted(count, noun)
    assert text == f"{count} {noun}" if count == 1 else text == f"{count} {noun}s"
    assert counted(count, noun, thousands=True).split(" ")[0] == f"{count:,}"
    assert counted(str(count), noun) == text  # a count already made printable reads the same
    assert counted("—", noun).endswith(f"{noun}s")


async def test_one_run_and_one_model_call_read_as_english(tmp_path: Path) -> None:
    app = make_app(tmp_path, str(long_draft_scenario(tmp_path)))  # one model round
    async with app.run_test(size=(120, 40)) as pilot:
        await run_to_end(pilot)
        screen = painted_text(app)
        assert "1 model call ·" in screen
        assert "1 model calls" not in screen
        await pilot.press("f3")
        await wait_until(lambda: "loaded" in painted_text(app), pilot, what="the count")
        assert "1 run loaded · all loaded" in painted_text(app)


# ------------------------------------------------------------------ a paste without bracketed paste
PASTE = ("payment-service 2026-11-30 02:00 UTC 支付超时 HikariPool-1 connection timeout; " * 90)[:5000]


def key_of(character: str) -> events.Key:
    """The key event a terminal sends for one pasted character when it does not bracket pastes."""
    if character == "\n":
        return events.Key("enter", "\r")
    return events.Key("space" if character == " " else character, character)


def count_edits(area: TextArea) -> list[int]:
    """Count the edits the box applies (each one re-wraps and re-measures the text)."""
    edits = [0]
    edit = area.edit

    def counting(*args: Any, **kwargs: Any) -> Any:
        edits[0] += 1
        return edit(*args, **kwargs)

    area.edit = counting  # type: ignore[method-assign]
    return edits


async def test_a_5kb_paste_as_keys_is_a_few_edits_not_one_per_character(tmp_path: Path) -> None:
    """5,000 key events at once (a terminal without bracketed paste) used to cost 5,000 edits of an
    ever longer line: seconds of a frozen console, quadratic in the paste. Now: one edit per burst."""
    app = make_app(tmp_path)
    async with app.run_test(size=SMALL) as pilot:
        await engine_ready(pilot)
        area = app.investigate.query_one("#query", TextArea)
        area.text = ""
        await pilot.pause()
        edits = count_edits(area)
        for half in (PASTE[:2500], PASTE[2500:]):  # as two reads of the terminal
            for character in half:
                app.post_message(key_of(character))
            await pilot.pause()
        await wait_until(lambda: len(area.text) >= len(PASTE), pilot, what="the paste")
        assert area.text == PASTE
        assert edits[0] <= 3, edits[0]
        await pilot.pause()
        assert PASTE[-12:] in painted_text(app)  # the box shows where the cursor is: the paste's end

        area.text = ""
        edits[0] = 0
        app.post_message(events.Paste(PASTE))  # a bracketed paste: one edit, as before
        await wait_until(lambda: len(area.text) >= len(PASTE), pilot, what="the bracketed paste")
        assert area.text == PASTE
        assert edits[0] == 1


async def test_ctrl_r_right_after_a_burst_sends_every_character(tmp_path: Path) -> None:
    """ctrl+r is a priority key: it can overtake keys still queued for the box. The query sent is the
    whole burst, held-back characters included."""
    app = make_app(tmp_path, "tool-finds-no-evidence")
    async with app.run_test(size=SMALL) as pilot:
        await engine_ready(pilot)
        area = app.investigate.query_one("#query", TextArea)
        area.text = ""
        await pilot.pause()
        typed = PASTE[:400]
        ended = app.investigate.runs_ended
        for character in typed:
            app.post_message(key_of(character))
        app.post_message(events.Key("ctrl+r", None))
        await wait_until(lambda: app.investigate.runs_ended > ended, pilot, 60, "the run to end")
        assert app.investigate.state.query == typed


class BoxApp(App[None]):
    """Just the query box, to drive it with many generated bursts quickly."""

    CSS: ClassVar[str] = "#query { height: 5; }"

    def compose(self) -> ComposeResult:
        from console.widgets.query_box import QueryBox

        yield QueryBox(id="query")


TYPED = st.text(string.ascii_letters + string.digits + " .,:;-_/()" + "支付超时é\n", min_size=1, max_size=300)
BEFORE = "existing text, 20 ch"


async def type_bursts(bursts: list[str], cursor: int) -> tuple[str, int]:
    """The box's text and edit count after `bursts` arrive, each at once, the cursor at `cursor`."""
    app = BoxApp()
    async with app.run_test(size=(60, 10)) as pilot:
        box = app.query_one("#query", TextArea)
        box.text = BEFORE
        box.focus()
        box.move_cursor((0, cursor))
        await pilot.pause()
        edits = count_edits(box)
        expected = len(BEFORE)
        for burst in bursts:
            for character in burst:
                app.post_message(key_of(character))
            expected += len(burst)
            await wait_until(lambda: len(box.document.text) == expected, pilot, what="a burst")  # noqa: B023
        return box.text, edits[0]


@settings(max_examples=15, deadline=None)
@given(bursts=st.lists(TYPED, min_size=1, max_size=5), cursor=st.integers(min_value=0, max_value=20))
def test_bursts_of_typed_keys_insert_exactly_what_was_typed(bursts: list[str], cursor: int) -> None:
    """Any text (letters, CJK, newlines) typed in bursts, the cursor anywhere in existing text: the box
    holds exactly what a key-per-edit box would, at one edit per burst."""
    text, edits = asyncio.run(type_bursts(bursts, cursor))
    assert text == BEFORE[:cursor] + "".join(bursts) + BEFORE[cursor:]
    assert edits <= len(bursts)


async def test_keys_a_paste_and_keys_again_keep_their_order() -> None:
    """Characters held back are inserted before a bracketed paste that follows them."""
    app = BoxApp()
    async with app.run_test(size=(60, 10)) as pilot:
        box = app.query_one("#query", TextArea)
        box.focus()
        for character in "abc":
            app.post_message(key_of(character))
        app.post_message(events.Paste("XYZ"))
        for character in "def":
            app.post_message(key_of(character))
        await wait_until(lambda: box.document.text == "abcXYZdef", pilot, 10, "the text in order")


# ------------------------------------------------------------------ where an export goes
async def test_the_export_starts_in_the_documents_folder_then_where_the_last_one_went(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home, checkout = tmp_path / "home", tmp_path / "checkout"
    (home / "Documents").mkdir(parents=True)
    checkout.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.delenv("XDG_DOCUMENTS_DIR", raising=False)
    monkeypatch.chdir(checkout)  # the console started in a source checkout
    options = ConsoleOptions(
        session_id="session-test",
        run_id_factory=pinned_ids(),
        clock=lambda: FIXED_NOW,
        show_timings=False,
        cursor_blink=False,
        export_dir=None,  # what operators run with
    )
    app = make_app(tmp_path, "evidence-backed-diagnosis", options=options)
    async with app.run_test(size=SMALL) as pilot:
        await run_to_end(pilot)
        await pilot.press("ctrl+s")
        await wait_until(lambda: isinstance(app.screen, ExportDialog), pilot, what="the dialog")
        folder = app.screen.query_one(Input)
        assert folder.value == str(home / "Documents")
        elsewhere = tmp_path / "incident-42"
        elsewhere.mkdir()
        folder.value = str(elsewhere)
        await pilot.press("enter")
        await wait_until(lambda: any(elsewhere.iterdir()), pilot, what="the export")
        assert not any(checkout.iterdir())
        await pilot.press("ctrl+s")
        await wait_until(lambda: isinstance(app.screen, ExportDialog), pilot, what="the dialog again")
        assert app.screen.query_one(Input).value == str(elsewhere)  # where the last export went
        await pilot.press("escape")
        await settled(pilot)
