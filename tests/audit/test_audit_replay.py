"""The audit's two directions meet: a real run's events go through the real sink into a real SQLite
audit, and `audit.replay` turns its rows back into the same events, as far as the audit keeps them
(docs/contracts.md, "Audit replay").

What a replay leaves out, by design: `run_started.protocol`, `protocol_changed.state`, the
observation of `tool_finished` (the audit keeps the projection), `tool_started.input_key`, the protocol
events the audit does not record, and every budget change but one summary at the end. Sequence numbers
are the replay's own.
"""

from __future__ import annotations

from typing import Any

from agent.vocabulary import AUDITED_PROTOCOL_CODES
from audit.browse import AuditBrowser
from audit.replay import timeline_events
from audit.sink import AuditSink
from audit.sqlite.store import SqliteAuditStore
from tests.support import RecordingAdapter, harness
from tests.support.spec_scenarios import (
    LOG_DATA,
    as_text,
    call,
    draft,
    finding,
    found,
    logs_input,
    scenario,
    text_round,
    tools_round,
)

# Per event type, the fields a replay does not carry (see the module docstring).
NOT_REPLAYED = {
    "run_started": {"protocol"},
    "protocol_changed": {"state"},
    "tool_finished": {"observation"},
    # Kept in invocations.input_key, but a replayed tool_started leaves it out.
    "tool_started": {"input_key"},
}


def replayable(event: dict[str, Any]) -> bool:
    """A live event the audit keeps: every one but budget changes and unaudited protocol events."""
    if event["type"] == "budget_changed":
        return False
    return event["type"] != "protocol_changed" or event["code"] in AUDITED_PROTOCOL_CODES


def comparable(event: dict[str, Any]) -> dict[str, Any]:
    left_out = {"seq", *NOT_REPLAYED.get(event["type"], ())}
    return {key: value for key, value in event.items() if key not in left_out}


async def test_run_events_through_the_sink_and_back(audit_store: SqliteAuditStore) -> None:
    h = harness(
        scenario(
            tools_round(call("a-1", "query_logs", logs_input(level="ERROR"))),
            # A call without the previous observation: refused, an audited protocol event.
            tools_round(call("a-2", "query_logs", logs_input(level="ERROR"))),
            text_round(as_text(draft("连接池耗尽。", [finding("连接获取超时。", "a-1")]))),
        ),
        adapters={"query_logs": RecordingAdapter(answer=found(LOG_DATA))},
        sinks=[AuditSink(audit_store)],
    )
    result = await h.run()
    timeline = AuditBrowser(audit_store).timeline(result.run_id)
    assert timeline is not None
    live = h.events
    replayed = [event.to_wire() for event in timeline_events(timeline)]

    assert ("protocol_changed", "INVALID_PROGRESS_PROTOCOL") in [(e["type"], e.get("code")) for e in replayed]
    assert [comparable(e) for e in replayed if e["type"] != "budget_changed"] == [
        comparable(e) for e in live if replayable(e)
    ]
    assert [e["seq"] for e in replayed] == list(range(1, len(replayed) + 1))

    budget = [e for e in replayed if e["type"] == "budget_changed"]
    last_live_budget = [e for e in live if e["type"] == "budget_changed"][-1]
    assert len(budget) == 1
    assert [e["type"] for e in replayed[-2:]] == ["budget_changed", "run_finished"]
    assert budget[0]["model_calls"] == last_live_budget["model_calls"]
    assert budget[0]["tokens"]["used"] == last_live_budget["tokens"]["used"]
    assert budget[0]["tokens"]["limit"] == last_live_budget["tokens"]["limit"]
