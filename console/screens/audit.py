"""The audit screen: runs and invocations from the browse API, filtered, searched and keyset-paged.

Each tab is a pane widget that owns its filters, its table and the pages it loads: `RunsPane` and
`InvocationsPane` share the paging in `AuditPane`. Pages are fetched in a thread as the cursor nears the
end of what is loaded; nothing ever loads the whole audit. Enter opens a run's timeline in the same
widgets as a live run.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar

from rich.text import Text
from textual import events, getters, on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.geometry import Size
from textual.message import Message
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import DataTable, Input, Select, Static, TabbedContent, TabPane
from textual.widgets.data_table import ColumnKey
from textual.worker import get_current_worker

from agent.vocabulary import INTERRUPTED_RUN, InvocationStatus, Outcome
from console.host import ConsoleHost
from console.messages import EngineStatus
from console.presentation import OUTCOME_STYLE, STATUS_STYLE, counted
from console.safe_text import neutralize
from console.screens.replay import ReplayScreen
from console.widgets.footer import ConsoleFooter
from console.widgets.run_view import NARROW_BELOW
from console.widgets.status_bar import StatusBar
from console.widgets.table_columns import MIN_FLEX_WIDTH, Column, flexible_width, shown_columns
from console.widgets.timeline import clip, input_summary
from console.widgets.too_small import TooSmall, fit_screen
from tools.definitions import TOOL_NAMES
from tools.vocabulary import ErrorCode

if TYPE_CHECKING:
    from audit.browse import AuditBrowser
    from audit.rows import InvocationRow, RunRow

PAGE_SIZE = 50
PREFETCH_ROWS = 10  # fetch the next page when the cursor is this close to the last loaded row
SEARCH_DEBOUNCE_S = 0.3
# A narrow window leaves out the columns with the highest `drop` first (console.widgets.table_columns);
# the line under the table shows them for the highlighted row.
RUN_COLUMNS = (
    Column("started (UTC)", 14, drop=1),
    Column("run", 16, drop=2),
    Column("outcome", 16),
    Column("stop reason", 30, drop=3),
    Column("calls", 5),
    Column("tokens", 7),
    Column("query", 0),  # 0: the flexible column, sized to the rest of the window
)
INVOCATION_COLUMNS = (
    Column("started (UTC)", 14, drop=4),
    Column("run", 16, drop=3),
    Column("call", 8),
    Column("tool", 16),
    Column("status", 11),
    Column("error", 16, drop=1),
    Column("eval", 7, drop=2),
    Column("input", 0),
)
OUTCOMES: tuple[str, ...] = (*Outcome, INTERRUPTED_RUN)  # what the outcome filter offers
# The audit row a table shows, one per line: a run (`audit.rows.RunRow`) or an invocation.
Record = TypeVar("Record", bound=Mapping[str, Any])


def when(stamp: Any) -> str:
    """ISO-8601 UTC as stored -> 'MM-DD HH:MM:SS' (UTC, as the audit records it)."""
    return str(stamp or "")[5:19].replace("T", " ")


def _select(prompt: str, values: tuple[str, ...], id: str) -> Select[str]:
    return Select([(str(v), str(v)) for v in values], prompt=prompt, id=id, allow_blank=True)


def _value(select: Select[str]) -> str | None:
    value = select.value
    return value if isinstance(value, str) else None


class PagedTable(DataTable[Any], Generic[Record]):
    """A DataTable that remembers the keyset cursor of the next page, and shows the columns its width
    allows (`console.widgets.table_columns`)."""

    def __init__(
        self, columns: tuple[Column, ...], cells: Callable[[Record], list[Text]], *, id: str
    ) -> None:
        """`cells`: a record's cells, one per column of `columns` (shown or not)."""
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)
        self.all_columns = columns
        self.cells_of = cells
        self.shown: tuple[int, ...] = ()  # indices into `all_columns` of the columns on screen
        self.next_cursor: str | None = None
        self.loading_page = False
        self.keys: list[Any] = []
        self.records: list[Record] = []  # the loaded rows as read, for the full-text line
        self.flexible: ColumnKey | None = None  # the column sized to the window
        self.generation = 0  # bumped on every restart: pages fetched for an older one are dropped

    def add_record(self, key: Any, record: Record) -> None:
        self.keys.append(key)
        self.records.append(record)
        cells = self.cells_of(record)
        self.add_row(*(cells[i] for i in self.shown))

    def fit_columns(self, width: int) -> None:
        """Show the columns a table `width` cells wide has room for; the flexible one takes the rest.
        (Fixed widths: columns never jump as pages arrive, and nothing waits on measuring cells.)"""
        shown = shown_columns(self.all_columns, width, self.cell_padding)
        if shown != self.shown:
            cursor = self.cursor_row
            self.clear(columns=True)
            self.shown, self.flexible = shown, None
            for i in shown:
                column = self.all_columns[i]
                key = self.add_column(column.label, width=column.width or MIN_FLEX_WIDTH)
                if column.width == 0:
                    self.flexible = key
            for record in self.records:
                cells = self.cells_of(record)
                self.add_row(*(cells[i] for i in shown))
            if self.records:
                self.move_cursor(row=min(max(cursor, 0), len(self.records) - 1))
        self.fit_flexible_column(width)

    def left_out(self, record: Record, named: set[str]) -> Text:
        """The record's cells of the columns not shown (but those in `named`), as `label value` pairs."""
        cells = self.cells_of(record)
        text = Text()
        for i, column in enumerate(self.all_columns):
            if i not in self.shown and column.label not in named:
                text.append(f"{column.label} ", style="dim")
                text.append_text(cells[i])
                text.append("  ")
        return text

    def restart(self) -> None:
        self.clear()
        self.keys = []
        self.records = []
        self.next_cursor = None
        self.loading_page = False
        self.generation += 1

    def fit_flexible_column(self, width: int) -> None:
        """The flexible column takes the width the fixed ones leave (cells are clipped at render time)."""
        if self.flexible is None or not width:
            return
        column = self.columns[self.flexible]
        width = max(flexible_width(self.all_columns, self.shown, width, self.cell_padding), MIN_FLEX_WIDTH)
        if column.width != width:
            column.width = width
            self._require_update_dimensions = True  # DataTable re-measures on its next refresh
            self._clear_caches()
            self.refresh()

    def on_resize(self) -> None:
        if self.size.width:
            self.fit_columns(self.size.width)

    def wants_more(self) -> bool:
        return (
            self.next_cursor is not None
            and not self.loading_page
            and self.cursor_row >= self.row_count - PREFETCH_ROWS
        )


class AuditPane(TabPane, Generic[Record]):
    """One tab of the audit: its filters, its keyset-paged table, and the pages it fetches."""

    app = getters.app(ConsoleHost)
    NOUN: ClassVar[str]  # one row of the table: "run", "invocation"
    COLUMNS: ClassVar[tuple[Column, ...]]
    WHOLE: ClassVar[set[str]]  # the columns `full_text` shows whole under the table
    TABLE_ID: ClassVar[str]
    SEARCH_ID: ClassVar[str]
    SEARCH_HINTS: ClassVar[tuple[str, str]]  # the search box's placeholder, wide and narrow

    @dataclass
    class PageLoaded(Message):
        """A page arrived (or the pane restarted): the screen's count line is out of date."""

    def __init__(self, title: str, *, id: str) -> None:
        super().__init__(title, id=id)
        self.matching: int | None = None  # how many rows match the filters, when the pane counts them
        self._debounce: Timer | None = None

    @property
    def table(self) -> PagedTable[Record]:
        return self.query_one(f"#{self.TABLE_ID}", PagedTable)

    def compose(self) -> ComposeResult:
        with Horizontal(classes="filters"):
            yield from self.compose_filters()
        yield PagedTable(self.COLUMNS, self.cells, id=self.TABLE_ID)

    def compose_filters(self) -> ComposeResult:
        raise NotImplementedError

    def on_mount(self) -> None:
        self.table.fit_columns(self.app.size.width)  # the table spans the screen; resizes refit it
        for search in self.query(Input):
            search.cursor_blink = self.app.options.cursor_blink

    # ------------------------------------------------------------------ filters
    def filters(self) -> dict[str, Any]:
        raise NotImplementedError

    @on(Input.Changed)
    def _search_changed(self) -> None:
        if self._debounce is not None:
            self._debounce.stop()
        self._debounce = self.set_timer(SEARCH_DEBOUNCE_S, self.reload)

    @on(Input.Submitted)
    def _search_submitted(self) -> None:
        self.table.focus()

    @on(Select.Changed)
    def _select_changed(self) -> None:
        self.reload()

    def focus_search(self) -> None:
        self.query_one(f"#{self.SEARCH_ID}", Input).focus()

    # ------------------------------------------------------------------ keyset pages
    def reload(self) -> None:
        self.table.restart()
        self._fetch(None, first=True)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if self.table.wants_more():
            self._fetch(self.table.next_cursor, first=False)

    def _fetch(self, cursor: str | None, first: bool) -> None:
        if self.app.env is None:
            return
        self.table.loading_page = True
        self._load_page(self.table.generation, cursor, self.filters(), first)

    @work(thread=True, exit_on_error=False)
    def _load_page(self, generation: int, cursor: str | None, filters: dict[str, Any], first: bool) -> None:
        from audit.browse import AuditBrowser

        env = self.app.env
        if env is None:
            return
        rows, next_cursor, matching = self.fetch_page(AuditBrowser(env.audit), cursor, filters, first)
        if not get_current_worker().is_cancelled:
            self.app.call_from_thread(self._add_page, generation, rows, next_cursor, matching)

    def fetch_page(
        self, browser: AuditBrowser, cursor: str | None, filters: dict[str, Any], first: bool
    ) -> tuple[list[Record], str | None, int | None]:
        """(rows, next page's cursor, how many match or None) for one page. Runs in a thread."""
        raise NotImplementedError

    def _add_page(
        self, generation: int, rows: list[Record], next_cursor: str | None, matching: int | None
    ) -> None:
        table = self.table
        if generation != table.generation:
            return  # a page for filters the operator has since changed
        table.loading_page = False
        for row in rows:
            table.add_record(self.key(row), row)
        table.next_cursor = next_cursor
        if matching is not None:
            self.matching = matching
        self.post_message(self.PageLoaded())

    def key(self, row: Record) -> Any:
        raise NotImplementedError

    def cells(self, row: Record) -> list[Text]:
        raise NotImplementedError

    def full_text(self, row: Record) -> Text:
        """The highlighted row's clipped cells, whole (the line under the table)."""
        raise NotImplementedError

    def row_text(self, row: Record) -> Text:
        """The line under the table: the highlighted row's left-out cells, then its clipped ones whole."""
        return self.table.left_out(row, self.WHOLE) + self.full_text(row)

    def filtered(self) -> bool:
        return any(value is not None for value in self.filters().values())

    def count_text(self) -> str:
        table = self.table
        if not table.row_count and table.next_cursor is None and not table.loading_page:
            if self.filtered():
                return f"no {self.NOUN}s match these filters"
            return f"no {self.NOUN}s in this audit file yet: every run (ctrl+r) is recorded here"
        text = f"{counted(table.row_count, self.NOUN)} loaded"
        if self.matching is not None:
            text += f" of {self.matching} matching"
        text += " · more load as you scroll" if table.next_cursor else " · all loaded"
        return text + " · enter opens the run's timeline"

    def replay_of(self, row_index: int) -> ReplayScreen | None:
        """The replay that enter on a row opens."""
        raise NotImplementedError


class RunsPane(AuditPane["RunRow"]):
    NOUN = "run"
    COLUMNS = RUN_COLUMNS
    WHOLE: ClassVar[set[str]] = {"stop reason", "query"}
    TABLE_ID = "runs"
    SEARCH_ID = "runs-text"

    SEARCH_HINTS = ("search query and evidence text", "search query and evidence text")  # fits at 80

    def compose_filters(self) -> ComposeResult:
        yield Input(placeholder=self.SEARCH_HINTS[0], id="runs-text")
        yield _select("outcome", OUTCOMES, "runs-outcome")

    def filters(self) -> dict[str, Any]:
        return {
            "text": self.query_one("#runs-text", Input).value.strip() or None,
            "outcome": _value(self.query_one("#runs-outcome", Select)),
        }

    def fetch_page(
        self, browser: AuditBrowser, cursor: str | None, filters: dict[str, Any], first: bool
    ) -> tuple[list[RunRow], str | None, int | None]:
        page = browser.runs(limit=PAGE_SIZE, cursor=cursor, outcome=filters["outcome"], text=filters["text"])
        return page.rows, page.next_cursor, None

    def key(self, row: RunRow) -> Any:
        return row["run_id"]

    def cells(self, row: RunRow) -> list[Text]:
        return run_cells(row)

    def replay_of(self, row_index: int) -> ReplayScreen | None:
        return ReplayScreen(self.table.keys[row_index])

    def full_text(self, row: RunRow) -> Text:
        text = Text.assemble(("stop reason ", "dim"), neutralize(str(row["stop_reason"] or "—")))
        text.append("  query ", style="dim")
        text.append(neutralize(str(row["query"] or "—")))
        return text


class InvocationsPane(AuditPane["InvocationRow"]):
    NOUN = "invocation"
    COLUMNS = INVOCATION_COLUMNS
    WHOLE: ClassVar[set[str]] = {"input"}
    TABLE_ID = "invocations"
    SEARCH_ID = "inv-text"

    SEARCH_HINTS = ("search inputs, projections, queries", "search text")

    def compose_filters(self) -> ComposeResult:
        yield Input(placeholder=self.SEARCH_HINTS[0], id="inv-text")
        yield _select("tool", TOOL_NAMES, "inv-tool")
        yield _select("status", tuple(InvocationStatus), "inv-status")
        yield _select("error code", tuple(ErrorCode), "inv-error")

    def filters(self) -> dict[str, Any]:
        return {
            "text": self.query_one("#inv-text", Input).value.strip() or None,
            "tool": _value(self.query_one("#inv-tool", Select)),
            "status": _value(self.query_one("#inv-status", Select)),
            "error_code": _value(self.query_one("#inv-error", Select)),
        }

    def fetch_page(
        self, browser: AuditBrowser, cursor: str | None, filters: dict[str, Any], first: bool
    ) -> tuple[list[InvocationRow], str | None, int | None]:
        from audit.browse import InvocationFilter

        flt = InvocationFilter(
            tool=filters["tool"],
            status=filters["status"],
            error_code=filters["error_code"],
            text=filters["text"],
        )
        page = browser.invocations(flt, limit=PAGE_SIZE, cursor=cursor)
        return page.rows, page.next_cursor, browser.count_invocations(flt) if first else None

    def key(self, row: InvocationRow) -> Any:
        return (row["run_id"], row["tool_call_id"])

    def cells(self, row: InvocationRow) -> list[Text]:
        return invocation_cells(row)

    def replay_of(self, row_index: int) -> ReplayScreen | None:
        run_id, tool_call_id = self.table.keys[row_index]
        return ReplayScreen(run_id, focus_call=tool_call_id)

    def full_text(self, row: InvocationRow) -> Text:
        text = Text.assemble(("input ", "dim"), neutralize(str(row["input_json"] or "—"), form="json"))
        if row["reason"]:
            text.append("  reason ", style="dim")
            text.append(neutralize(str(row["reason"])))
        return text


class AuditScreen(Screen[None]):
    CSS_PATH = Path(__file__).with_name("audit.tcss")
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.investigate", "Back", tooltip="Back to the investigate screen"),
        Binding("slash", "focus_search", "Search", tooltip="Search runs or invocations by text"),
        Binding("ctrl+o", "switch_tab", "Runs/Invocations", tooltip="Switch between runs and invocations"),
    ]

    app = getters.app(ConsoleHost)

    def compose(self) -> ComposeResult:
        yield StatusBar("Audit", id="status")
        yield Static(id="audit-file")
        with TabbedContent(initial="runs-tab", id="audit-tabs"):
            yield RunsPane("Runs", id="runs-tab")
            yield InvocationsPane("Invocations", id="invocations-tab")
        yield Static(id="audit-row")
        yield Static(id="audit-count")
        yield ConsoleFooter(self.app.size.width)
        yield TooSmall()

    def on_resize(self, event: events.Resize) -> None:
        self.fit(event.size)

    def fit(self, size: Size) -> None:
        """Below NARROW_BELOW columns the filters go compact (one line, no frame): at 80×24 the table
        keeps the rows a framed filter bar would take."""
        fit_screen(self, size)
        narrow = size.width < NARROW_BELOW
        self.set_class(narrow, "-narrow")
        for widget in self.query(".filters > *"):
            if isinstance(widget, Input | Select):
                widget.compact = narrow
        for pane in self.query(AuditPane):  # the hint fits the narrow search box whole
            pane.query_one(f"#{pane.SEARCH_ID}", Input).placeholder = pane.SEARCH_HINTS[narrow]

    @property
    def panes(self) -> tuple[AuditPane[Any], ...]:
        return tuple(self.query(AuditPane))

    @property
    def active_pane(self) -> AuditPane[Any]:
        return self.query_one(f"#{self.query_one(TabbedContent).active}", AuditPane)

    def on_mount(self) -> None:
        self.fit(self.app.size)
        self.watch(self.app, "engine_status", self._engine_changed, init=False)
        self.query_one("#runs", PagedTable).focus()

    def _show_file(self) -> None:
        env = self.app.env
        where = getattr(getattr(env, "audit", None), "location", None)
        label = "audit " if where and "://" in str(where) else "audit file "  # a server, or the file
        line = Text.assemble((label, "dim"), neutralize(str(where), newlines=False) if where else "—")
        self.query_one("#audit-file", Static).update(line)

    def _engine_changed(self, status: EngineStatus) -> None:
        self._show_file()
        if status.state == "ready":
            for pane in self.panes:
                pane.reload()
        else:
            self.query_one("#audit-count", Static).update(
                Text("waiting for the engine to open the audit…", "dim")
            )

    def on_screen_resume(self) -> None:
        """Load on first display; coming back from a replay keeps the rows and the cursor where they were."""
        self._show_file()
        if self.app.env is not None and self.query_one("#runs", PagedTable).generation == 0:
            for pane in self.panes:
                pane.reload()

    def action_focus_search(self) -> None:
        self.active_pane.focus_search()

    def action_switch_tab(self) -> None:
        tabs = self.query_one(TabbedContent)
        tabs.active = "invocations-tab" if tabs.active == "runs-tab" else "runs-tab"
        self.active_pane.table.focus()
        self._show_count()

    @on(TabbedContent.TabActivated)
    @on(AuditPane.PageLoaded)
    def _show_count(self) -> None:
        self.query_one("#audit-count", Static).update(Text(self.active_pane.count_text(), style="dim"))
        self._show_row()

    @on(DataTable.RowHighlighted)
    def _show_row(self) -> None:
        pane = self.active_pane
        table = pane.table
        row = table.records[table.cursor_row] if 0 <= table.cursor_row < len(table.records) else None
        line = self.query_one("#audit-row", Static)
        line.display = row is not None
        line.update(pane.row_text(row) if row is not None else "")

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        table = event.data_table
        if not isinstance(table, PagedTable) or not 0 <= event.cursor_row < len(table.keys):
            return
        pane = next(pane for pane in self.panes if pane.table is table)
        replay = pane.replay_of(event.cursor_row)
        if replay is not None:
            self.app.push_screen(replay)


def cell(value: Any, style: str = "", justify: Any = None) -> Text:
    """One table cell from an audit row, which anyone able to write the file may have tampered with."""
    return Text(
        neutralize("—" if value is None else str(value), newlines=False), style=style, justify=justify
    )


def run_cells(row: RunRow) -> list[Text]:
    outcome = row["outcome"] or (INTERRUPTED_RUN if row["interrupted"] else "—")
    return [
        cell(when(row["started_at"] or row["finished_at"])),
        cell(row["run_id"]),
        cell(outcome, style=OUTCOME_STYLE.get(outcome, "")),
        cell(row["stop_reason"]),
        cell(row["model_calls"], justify="right"),
        cell(row["total_tokens"], justify="right"),
        Text(clip(str(row["query"] or ""), 400), no_wrap=True, overflow="ellipsis"),
    ]


def invocation_cells(row: InvocationRow) -> list[Text]:
    status = str(row["status"])
    try:
        business = json.loads(row["input_json"] or "null")
    except ValueError:
        business = None
    return [
        cell(when(row["started_at"])),
        cell(row["run_id"]),
        cell(row["tool_call_id"]),
        cell(row["tool"], style="cyan"),
        cell(status, style=STATUS_STYLE.get(status, "")),
        cell(row["error_code"]),
        cell(row["evaluation"]),
        Text(input_summary(row["tool"], business, 400), style="dim", no_wrap=True, overflow="ellipsis"),
    ]
