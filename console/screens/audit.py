"""The audit screen: runs and invocations from the browse API, filtered, searched and keyset-paged.

Pages are fetched in a thread as the cursor nears the end of what is loaded; nothing ever loads the
whole audit. Enter opens a run's timeline in the same widgets as a live run.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Input, Select, Static, TabbedContent, TabPane
from textual.worker import get_current_worker

from console.messages import EngineStatus
from console.safe_text import neutralize
from console.screens.replay import ReplayScreen
from console.widgets.status_bar import StatusBar
from console.widgets.timeline import OUTCOME_STYLE, STATUS_STYLE, clip, input_summary
from tools.definitions import TOOL_NAMES
from tools.observation import ERROR_CODES

PAGE_SIZE = 50
PREFETCH_ROWS = 10  # fetch the next page when the cursor is this close to the last loaded row
SEARCH_DEBOUNCE_S = 0.3
TOOLS = TOOL_NAMES
STATUSES = ("STARTED", "FOUND", "EMPTY", "ERROR", "CANCELLED", "INTERRUPTED")
RUN_COLUMNS = (
    ("started (UTC)", 14),
    ("run", 16),
    ("outcome", 16),
    ("stop reason", 22),
    ("calls", 5),
    ("tokens", 7),
    ("query", 22),
)
INVOCATION_COLUMNS = (
    ("started (UTC)", 14),
    ("run", 16),
    ("call", 8),
    ("tool", 16),
    ("status", 11),
    ("error", 16),
    ("eval", 7),
    ("input", 36),
)
OUTCOMES = ("DRAFT", "CONTROLLED_STOP", "BUDGET_EXHAUSTED", "CANCELLED", "FAILED", "REJECTED", "INTERRUPTED")


def when(stamp: Any) -> str:
    """ISO-8601 UTC as stored -> 'MM-DD HH:MM:SS' (UTC, as the audit records it)."""
    return str(stamp or "")[5:19].replace("T", " ")


def _select(prompt: str, values: tuple[str, ...], id: str) -> Select[str]:
    return Select([(v, v) for v in values], prompt=prompt, id=id, allow_blank=True)


def _value(select: Select[str]) -> str | None:
    value = select.value
    return value if isinstance(value, str) else None


class PagedTable(DataTable[Any]):
    """A DataTable that remembers the keyset cursor of the next page."""

    def __init__(self, *, id: str) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)
        self.next_cursor: str | None = None
        self.loading_page = False
        self.keys: list[Any] = []
        self.generation = 0  # bumped on every restart: pages fetched for an older one are dropped

    def restart(self) -> None:
        self.clear()
        self.keys = []
        self.next_cursor = None
        self.loading_page = False
        self.generation += 1

    def wants_more(self) -> bool:
        return (
            self.next_cursor is not None
            and not self.loading_page
            and self.cursor_row >= self.row_count - PREFETCH_ROWS
        )


class AuditScreen(Screen[None]):
    CSS_PATH = Path(__file__).with_name("audit.tcss")
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.investigate", "Back", tooltip="Back to the investigate screen"),
        Binding("slash", "focus_search", "Search", tooltip="Search runs or invocations by text"),
        Binding("ctrl+o", "switch_tab", "Runs/Invocations", tooltip="Switch between runs and invocations"),
    ]

    def compose(self) -> ComposeResult:
        yield StatusBar("Audit", id="status")
        with TabbedContent(initial="runs-tab", id="audit-tabs"):
            with TabPane("Runs", id="runs-tab"):
                with Horizontal(classes="filters"):
                    yield Input(placeholder="search query and evidence text", id="runs-text")
                    yield _select("outcome", OUTCOMES, "runs-outcome")
                yield PagedTable(id="runs")
            with TabPane("Invocations", id="invocations-tab"):
                with Horizontal(classes="filters"):
                    yield Input(placeholder="search inputs, projections, queries", id="inv-text")
                    yield _select("tool", TOOLS, "inv-tool")
                    yield _select("status", STATUSES, "inv-status")
                    yield _select("error code", ERROR_CODES, "inv-error")
                yield PagedTable(id="invocations")
        yield Static(id="audit-count")
        yield Footer()

    def on_mount(self) -> None:
        # Fixed widths: columns never jump as pages arrive, and nothing waits on measuring cells.
        runs = self.query_one("#runs", PagedTable)
        for label, width in RUN_COLUMNS:
            runs.add_column(label, width=width)
        invocations = self.query_one("#invocations", PagedTable)
        for label, width in INVOCATION_COLUMNS:
            invocations.add_column(label, width=width)
        for search in self.query(Input):
            search.cursor_blink = self.app.cursor_blink  # type: ignore[attr-defined]
        self._debounce: Any = None
        self.watch(self.app, "engine_status", self._engine_changed, init=False)
        runs.focus()

    def _engine_changed(self, status: EngineStatus) -> None:
        if status.state == "ready":
            self.reload("runs")
            self.reload("invocations")
        else:
            self.query_one("#audit-count", Static).update(
                Text("waiting for the engine to open the audit…", "dim")
            )

    def on_screen_resume(self) -> None:
        """Load on first display; coming back from a replay keeps the rows and the cursor where they were."""
        if getattr(self.app, "env", None) is not None and self.query_one("#runs", PagedTable).generation == 0:
            self.reload("runs")
            self.reload("invocations")

    # ------------------------------------------------------------------ filters
    def filters(self) -> dict[str, Any]:
        return {
            "runs_text": self.query_one("#runs-text", Input).value.strip() or None,
            "outcome": _value(self.query_one("#runs-outcome", Select)),
            "inv_text": self.query_one("#inv-text", Input).value.strip() or None,
            "tool": _value(self.query_one("#inv-tool", Select)),
            "status": _value(self.query_one("#inv-status", Select)),
            "error_code": _value(self.query_one("#inv-error", Select)),
        }

    @on(Input.Changed)
    def _search_changed(self, event: Input.Changed) -> None:
        which = "runs" if event.input.id == "runs-text" else "invocations"
        if self._debounce is not None:
            self._debounce.stop()
        self._debounce = self.set_timer(SEARCH_DEBOUNCE_S, lambda: self.reload(which))

    @on(Input.Submitted)
    def _search_submitted(self, event: Input.Submitted) -> None:
        self.query_one("#runs" if event.input.id == "runs-text" else "#invocations", PagedTable).focus()

    @on(Select.Changed)
    def _select_changed(self, event: Select.Changed) -> None:
        self.reload("runs" if event.select.id == "runs-outcome" else "invocations")

    def action_focus_search(self) -> None:
        tabs = self.query_one(TabbedContent)
        self.query_one("#runs-text" if tabs.active == "runs-tab" else "#inv-text", Input).focus()

    def action_switch_tab(self) -> None:
        tabs = self.query_one(TabbedContent)
        tabs.active = "invocations-tab" if tabs.active == "runs-tab" else "runs-tab"
        self.query_one("#runs" if tabs.active == "runs-tab" else "#invocations", PagedTable).focus()
        self._show_count()

    @on(TabbedContent.TabActivated)
    def _tab_activated(self) -> None:
        self._show_count()

    # ------------------------------------------------------------------ keyset pages
    def reload(self, which: str) -> None:
        table = self.query_one(f"#{which}", PagedTable)
        table.restart()
        self._fetch(which, None, self.filters(), first=True)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        table = event.data_table
        if isinstance(table, PagedTable) and table.wants_more():
            self._fetch(str(table.id), table.next_cursor, self.filters(), first=False)

    def _fetch(self, which: str, cursor: str | None, filters: dict[str, Any], first: bool) -> None:
        if getattr(self.app, "env", None) is None:
            return
        table = self.query_one(f"#{which}", PagedTable)
        table.loading_page = True
        self._load_page(which, table.generation, cursor, filters, first)

    @work(thread=True, exit_on_error=False)
    def _load_page(
        self, which: str, generation: int, cursor: str | None, filters: dict[str, Any], first: bool
    ) -> None:
        from audit.browse import AuditBrowser, InvocationFilter

        browser = AuditBrowser(self.app.env.audit)  # type: ignore[attr-defined]
        count = None
        if which == "runs":
            page = browser.runs(
                limit=PAGE_SIZE, cursor=cursor, outcome=filters["outcome"], text=filters["runs_text"]
            )
        else:
            flt = InvocationFilter(
                tool=filters["tool"],
                status=filters["status"],
                error_code=filters["error_code"],
                text=filters["inv_text"],
            )
            page = browser.invocations(flt, limit=PAGE_SIZE, cursor=cursor)
            count = browser.count_invocations(flt) if first else None
        if not get_current_worker().is_cancelled:
            self.app.call_from_thread(self._add_page, which, generation, page.rows, page.next_cursor, count)

    def _add_page(
        self,
        which: str,
        generation: int,
        rows: list[dict[str, Any]],
        next_cursor: str | None,
        count: int | None,
    ) -> None:
        table = self.query_one(f"#{which}", PagedTable)
        if generation != table.generation:
            return  # a page for filters the operator has since changed
        table.loading_page = False
        for row in rows:
            key = row["run_id"] if which == "runs" else (row["run_id"], row["tool_call_id"])
            table.keys.append(key)
            table.add_row(*(run_cells(row) if which == "runs" else invocation_cells(row)))
        table.next_cursor = next_cursor
        if count is not None:
            self._invocation_count = count
        self._show_count()

    def _show_count(self) -> None:
        tabs = self.query_one(TabbedContent)
        table = self.query_one("#runs" if tabs.active == "runs-tab" else "#invocations", PagedTable)
        noun = "runs" if table.id == "runs" else "invocations"
        text = f"{table.row_count} {noun} loaded"
        if table.id == "invocations" and getattr(self, "_invocation_count", None) is not None:
            text += f" of {self._invocation_count} matching"
        text += " · more load as you scroll" if table.next_cursor else " · all loaded"
        text += " · enter opens the run's timeline"
        self.query_one("#audit-count", Static).update(Text(text, style="dim"))

    # ------------------------------------------------------------------ open a run
    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        table = event.data_table
        if not isinstance(table, PagedTable) or not 0 <= event.cursor_row < len(table.keys):
            return
        key = table.keys[event.cursor_row]
        if table.id == "runs":
            self.app.push_screen(ReplayScreen(key))
        else:
            self.app.push_screen(ReplayScreen(key[0], focus_call=key[1]))


def cell(value: Any, style: str = "", justify: Any = None) -> Text:
    """One table cell from an audit row, which anyone able to write the file may have tampered with."""
    return Text(
        neutralize("—" if value is None else str(value), newlines=False), style=style, justify=justify
    )


def run_cells(row: dict[str, Any]) -> list[Text]:
    outcome = str(row.get("outcome") or ("INTERRUPTED" if row.get("interrupted") else "—"))
    return [
        cell(when(row.get("started_at") or row.get("finished_at"))),
        cell(row.get("run_id")),
        cell(outcome, style=OUTCOME_STYLE.get(outcome, "")),
        cell(row.get("stop_reason")),
        cell(row.get("model_calls"), justify="right"),
        cell(row.get("total_tokens"), justify="right"),
        Text(clip(str(row.get("query") or ""), 22)),
    ]


def invocation_cells(row: dict[str, Any]) -> list[Text]:
    status = str(row.get("status"))
    try:
        business = json.loads(row.get("input_json") or "null")
    except ValueError:
        business = None
    return [
        cell(when(row.get("started_at"))),
        cell(row.get("run_id")),
        cell(row.get("tool_call_id")),
        cell(row.get("tool"), style="cyan"),
        cell(status, style=STATUS_STYLE.get(status, "")),
        cell(row.get("error_code")),
        cell(row.get("evaluation")),
        Text(input_summary(row.get("tool"), business, 36), style="dim"),
    ]
