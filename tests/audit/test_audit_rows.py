"""The typed rows (audit.rows) name the tables' columns: what the browser returns on either store has
exactly the keys of its row type, in the table's order, so a reader the type checker passed finds
every column it reads."""

from __future__ import annotations

from audit.browse import AuditBrowser
from audit.copy import COPIED_COLUMNS
from audit.rows import ROW_TYPES, InvocationRow, RunRow
from audit.sink import AuditSink
from tests.support.audit_backends import AuditTarget
from tests.support.audit_events import LOGS_INPUT, Events

_TABLE_OF_ENTRY = {
    "model_round": "model_rounds",
    "invocation": "invocations",
    "protocol_event": "protocol_events",
}


def _columns(row_type: type) -> list[str]:
    return list(row_type.__annotations__)


def test_every_row_the_browser_returns_has_its_tables_columns(audit_target: AuditTarget) -> None:
    ev = Events()
    with audit_target.open() as store:
        sink = AuditSink(store)
        for event in (
            ev.run_started(),
            ev.round_started(1),
            ev.round_finished(1, ["call-1"]),
            ev.tool_started("call-1", "query_logs", LOGS_INPUT),
            ev.tool_finished("call-1", "query_logs", "FOUND", projection={"lines": []}),
            ev.protocol("STOP_REQUIRED"),
            ev.run_finished("CONTROLLED_STOP", "INFORMATION_SATURATED"),
        ):
            sink(event)
        browser = AuditBrowser(store)
        runs = browser.runs().rows
        invocations = browser.invocations().rows
        timeline = browser.timeline(ev.run_id)

    assert timeline is not None
    assert [list(row) for row in runs] == [_columns(RunRow)]
    assert list(timeline.run) == _columns(RunRow)
    assert [list(row) for row in invocations] == [_columns(InvocationRow)]
    assert sorted({entry.kind for entry in timeline.entries}) == sorted(_TABLE_OF_ENTRY)
    for entry in timeline.entries:
        assert list(entry.data) == _columns(ROW_TYPES[_TABLE_OF_ENTRY[entry.kind]]), entry.kind


def test_a_copy_writes_every_column_but_the_stores_own() -> None:
    """`audit copy` names the columns it carries over; the row types name them too, so they cannot drift:
    only the text index's mark and protocol events' own ids stay with the store that wrote them."""
    own = {"runs": {"fts_pending"}, "protocol_events": {"id"}}
    assert set(COPIED_COLUMNS) == set(ROW_TYPES)
    for table, row_type in ROW_TYPES.items():
        kept = [column for column in _columns(row_type) if column not in own.get(table, set())]
        assert list(COPIED_COLUMNS[table]) == kept, table
