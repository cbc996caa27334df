"""The query box: a TextArea that takes a burst of typed characters as one edit.

A terminal that does not use bracketed paste (some terminals, tmux's `paste-buffer` without `-p`, a
serial console) delivers a paste as one key event per character. A TextArea applies each as an edit
of its own, and every edit re-wraps the whole line and moves the cursor over it, so 5 KB cost 5,000
edits of a line up to 5,000 characters long: seconds of a frozen console, growing with the square of
the paste. Here a printable key (or enter) is held back, and the characters that arrive with it are
inserted together once the keys already queued have been read: a paste costs one edit per read of
the terminal (a few dozen at most, not one per character), and a person typing sees every key at
once.

Anything that moves or replaces the text first inserts what is held back: another key, a bracketed
paste, a click, losing the focus, setting `text`; what is sent reads `current_text()`, which does too
(`text` itself does not: the TextArea reads it while it paints).
"""

from __future__ import annotations

from textual import events
from textual.widgets import TextArea

TYPED_INSERTS = {"enter": "\n"}  # keys that insert a character other than their own


class QueryBox(TextArea):
    """Textual calls an event's handler of every class in the MRO, this one first: the handlers here
    insert what is held back and leave the event to TextArea's own (they never call it again)."""

    def __init__(self, *, id: str) -> None:
        """A soft-wrapped box without line numbers, where tab moves the focus on."""
        super().__init__(id=id, soft_wrap=True, tab_behavior="focus", show_line_numbers=False)
        self._typed: list[str] = []  # characters held back, in the order they were typed
        self.typed_edits = 0  # how many edits the held-back characters cost (tests count them)

    async def _on_key(self, event: events.Key) -> None:
        insert = TYPED_INSERTS.get(event.key, event.character if event.is_printable else None)
        if self.read_only or insert is None:
            self.insert_typed()  # then TextArea's handler and the bindings see the text as typed
            return
        event.stop()
        event.prevent_default()  # TextArea's handler would insert it now
        self._restart_blink()
        if not self._typed:
            self.call_later(self.insert_typed)  # behind the keys already queued for this box
        self._typed.append(insert)

    def insert_typed(self) -> None:
        """Insert the characters held back, as one edit replacing the selection (as typing does)."""
        if not self._typed:
            return
        typed, self._typed = "".join(self._typed), []
        self.typed_edits += 1
        self._replace_via_keyboard(typed, *self.selection)
        # The edit scrolls to the cursor before the box has measured the longer text (the scroll is
        # clamped to the old size): once it has, bring the cursor into view for real.
        self.call_after_refresh(self.scroll_cursor_visible)

    async def _on_paste(self, event: events.Paste) -> None:
        self.insert_typed()

    async def _on_mouse_down(self, event: events.MouseDown) -> None:
        self.insert_typed()

    def _on_blur(self, event: events.Blur) -> None:
        self.insert_typed()

    def current_text(self) -> str:
        """The text with every character typed so far (ctrl+r can overtake keys queued for the box)."""
        self.insert_typed()
        return self.document.text

    def load_text(self, text: str) -> None:
        """Replace the text (and `text = ...`): what was typed before is replaced too, not appended after."""
        self.insert_typed()
        super().load_text(text)
