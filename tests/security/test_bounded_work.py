"""Issue 20, items 10 and 11: the work one model reply, one run or one log query can cause is bounded.

query_logs over a big file: memory does not grow with the file (the scan keeps the best `limit`
entries and one chunk of the file, never the lines; a line past the line cap is never held whole), and the
scan stops reading when its call ends, by the tool's time limit or the run's cancellation: it runs in
a thread, which cannot be killed, so it checks a stop flag between blocks. Proved by counting the
lines parsed and by `tracemalloc` peaks, never by timing.

Calls per reply and per run: the harness takes up at most `[budget] max_tool_calls_per_round` calls of
one reply and `max_tool_calls_per_run` over the run. Every later call is answered NOT_EXECUTED with the
control `{"code": "TOO_MANY_CALLS"}` (no count, cap or allowance: the model is never told budgets), and
never reaches an adapter or the audit's invocations; one audited protocol event per reply names the
cap and the refused calls for the operator.
"""

from __future__ import annotations

import asyncio
import json
import threading
import tracemalloc
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.scenarios import ScenarioError, parse_scenario
from agent.settings import ConfigError, load_settings
from audit import AuditSink
from tests.support import RecordingAdapter, harness
from tests.support.audit_backends import AuditTarget
from tests.support.audit_reader import AuditReader
from tests.support.mysql import MysqlTestEnv
from tests.support.resilience import read_events, run_cli, write_scenario
from tests.support.spec_scenarios import (
    DOC_DATA,
    NULL_DRAFT,
    call,
    evaluated,
    found,
    scenario,
    seen,
    text_round,
    tools_round,
)
from tools.adapter import AdapterResult, ToolRequest
from tools.boundary import ToolBoundary
from tools.input_models import QueryLogsInput
from tools.logs.file_source import LogFileAdapter
from tools.logs.json_lines import JsonLines
from tools.mysql.adapter import MysqlAdapter

TOO_MANY_CALLS = {"code": "TOO_MANY_CALLS"}


def refused(tool_call_id: str, tool: str) -> dict[str, Any]:
    """Exactly what the model receives for a call beyond a cap: nothing else, no number anywhere."""
    return {
        "tool_call_id": tool_call_id,
        "tool": tool,
        "evidence_status": "NOT_EXECUTED",
        "control": TOO_MANY_CALLS,
    }


def cap_events(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e for e in events if e["type"] == "protocol_changed" and e["code"] == "TOO_MANY_CALLS"]


@dataclass
class CountingMysql:
    """The real `MysqlAdapter` on the local MariaDB, with a list of the calls that reached it."""

    adapter: MysqlAdapter
    reached: list[str] = field(default_factory=list)

    async def execute(self, request: ToolRequest) -> AdapterResult:
        self.reached.append(request.tool_call_id)
        return await self.adapter.execute(request)


# ------------------------------------------------------------------------------ item 11: calls per reply
@pytest.mark.mysql
async def test_one_reply_of_sixty_statements_runs_only_the_round_cap(
    mysql_env: MysqlTestEnv, audit_target: AuditTarget
) -> None:
    ids = [f"sql-{n:02d}" for n in range(1, 61)]
    sql = "SELECT id, status FROM orders WHERE id = {}"
    statements = [call(i, "query_mysql", {"sql": sql.format(n)}) for n, i in enumerate(ids, 1)]
    mysql_adapter = CountingMysql(mysql_env.adapter())
    store = audit_target.open()
    h = harness(
        scenario(tools_round(*statements), text_round(NULL_DRAFT)),
        adapters={"query_mysql": mysql_adapter},
        sinks=[AuditSink(store)],
    )
    try:
        result = await h.run()
        invocations = AuditReader(store).invocations(result.run_id)
        protocol_rows = AuditReader(store).protocol_events(result.run_id)
    finally:
        store.close()
        await mysql_adapter.adapter.aclose()

    assert (result.outcome, result.stop_reason) == ("DRAFT", "COMPLETED")
    cap = 8  # the default `[budget] max_tool_calls_per_round`
    assert (
        mysql_adapter.reached == ids[:cap]
    )  # the first eight, in the model's order; no other reached MariaDB
    assert h.settings.budget.max_tool_calls_per_round == cap
    assert [(i["tool_call_id"], i["status"]) for i in invocations] == [(i, "FOUND") for i in ids[:cap]]
    observations = seen(h, 1)  # also: no counter, threshold or budget word reaches the model
    assert [o["evidence_status"] for o in observations[:cap]] == ["FOUND"] * cap
    assert observations[cap:] == [refused(i, "query_mysql") for i in ids[cap:]]
    (event,) = cap_events(h.events)
    assert event["tool_call_id"] is None
    assert event["detail"] == {"cap": "ROUND", "limit": cap, "tool_call_ids": ids[cap:]}
    audited = [(r["code"], r["tool_call_id"], json.loads(r["detail_json"])) for r in protocol_rows]
    assert ("TOO_MANY_CALLS", None, event["detail"]) in audited


async def test_the_run_cap_holds_across_replies() -> None:
    knowledge = RecordingAdapter(answer=found(DOC_DATA))

    def lookup(call_id: str, previous: Any = None) -> dict[str, Any]:
        return call(call_id, "lookup_knowledge", {"query": f"runbook {call_id}"}, previous)

    h = harness(
        scenario(
            tools_round(lookup("a1"), lookup("a2"), lookup("a3")),
            tools_round(lookup("b1", evaluated("a1")), lookup("b2"), lookup("b3")),
            tools_round(lookup("c1", evaluated("b1")), lookup("c2")),
            text_round(NULL_DRAFT),
            settings={"budget": {"max_tool_calls_per_round": 3, "max_tool_calls_per_run": 5}},
        ),
        adapters={"lookup_knowledge": knowledge},
    )

    result = await h.run()

    assert (result.outcome, result.stop_reason) == ("DRAFT", "COMPLETED")
    assert [r.tool_call_id for r in knowledge.requests] == ["a1", "a2", "a3", "b1", "b2"]
    answered = seen(h, 3)  # every observation of the run, in order
    assert answered[5] == refused("b3", "lookup_knowledge")
    assert answered[6:] == [refused("c1", "lookup_knowledge"), refused("c2", "lookup_knowledge")]
    assert [e["detail"] for e in cap_events(h.events)] == [
        {"cap": "RUN", "limit": 5, "tool_call_ids": ["b3"]},
        {"cap": "RUN", "limit": 5, "tool_call_ids": ["c1", "c2"]},
    ]
    # A refused call is not read: c1's evaluation of b1 was never taken, so b1 is still unevaluated.
    assert [(c.tool_call_id, c.evaluation) for c in result.progress.checks][3:] == [  # type: ignore[union-attr]
        ("b1", None),
        ("b2", None),
    ]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    per_round=st.integers(1, 6),
    per_run=st.integers(1, 15),
    replies=st.lists(st.integers(1, 12), min_size=1, max_size=4),
)
async def test_exactly_the_calls_within_both_caps_run(
    per_round: int, per_run: int, replies: list[int]
) -> None:
    """Whatever the caps and however many calls each reply asks for, the calls taken up are the first
    `per_round` of each reply while the run has fewer than `per_run`; every other one is refused."""
    knowledge = RecordingAdapter(answer=found(DOC_DATA))
    rounds: list[dict[str, Any]] = []
    expected_run: list[str] = []
    expected_refused: list[str] = []
    pending: str | None = None
    for r, size in enumerate(replies, 1):
        ids = [f"r{r}-{n}" for n in range(1, size + 1)]
        calls = [call(ids[0], "lookup_knowledge", {"query": ids[0]}, evaluated(pending) if pending else None)]
        calls += [call(i, "lookup_knowledge", {"query": i}) for i in ids[1:]]
        rounds.append(tools_round(*calls))
        taken = ids[: max(0, min(per_round, per_run - len(expected_run)))]
        expected_run += taken
        expected_refused += ids[len(taken) :]
        pending = taken[0] if taken else pending
    h = harness(
        scenario(
            *rounds,
            text_round(NULL_DRAFT),
            settings={
                "budget": {
                    "max_model_calls": len(replies) + 2,
                    "max_tool_calls_per_round": per_round,
                    "max_tool_calls_per_run": per_run,
                }
            },
        ),
        adapters={"lookup_knowledge": knowledge},
    )

    result = await h.run()

    assert (result.outcome, result.stop_reason) == ("DRAFT", "COMPLETED")
    assert [r.tool_call_id for r in knowledge.requests] == expected_run
    answered = seen(h, len(replies))  # every observation of the run, in order
    assert [o["tool_call_id"] for o in answered if o["control"] == TOO_MANY_CALLS] == expected_refused
    assert all(o == refused(o["tool_call_id"], "lookup_knowledge") for o in answered if o["control"])
    in_events = [i for e in cap_events(h.events) for i in e["detail"]["tool_call_ids"]]
    assert in_events == expected_refused


def test_the_caps_are_budget_settings_a_scenario_or_the_environment_may_set(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("DIAGNOSE_BUDGET__MAX_TOOL_CALLS_PER_ROUND", "2")
    monkeypatch.setenv("DIAGNOSE_BUDGET__MAX_TOOL_CALLS_PER_RUN", "3")
    budget = load_settings(None).budget
    assert (budget.max_tool_calls_per_round, budget.max_tool_calls_per_run) == (2, 3)

    monkeypatch.setenv("DIAGNOSE_BUDGET__MAX_TOOL_CALLS_PER_ROUND", "0")
    with pytest.raises(ConfigError, match="max_tool_calls_per_round"):
        load_settings(None)

    body = {"name": "x", "rounds": [{"text": NULL_DRAFT}]}
    limits = parse_scenario(json.dumps({**body, "settings": {"budget": {"max_tool_calls_per_run": 1}}}))
    assert limits.settings == {"budget": {"max_tool_calls_per_run": 1}}
    with pytest.raises(ScenarioError, match="max_tool_calls_per_run"):
        parse_scenario(json.dumps({**body, "settings": {"budget": {"max_tool_calls_per_run": 0}}}))


def test_diagnose_run_applies_a_scenario_files_cap_and_audits_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The whole path an operator takes: a scenario file's cap, the demo sources, the audit file."""
    services = ["payment-service", "order-service", "api-gateway", "account-service", "inventory-service"]
    window = {"start": "2026-11-30T02:00:00Z", "end": "2026-11-30T03:00:00Z"}
    calls = [call(f"logs-{n}", "query_logs", {"service": s, **window}) for n, s in enumerate(services, 1)]
    path = write_scenario(
        tmp_path,
        scenario(
            tools_round(*calls), text_round(NULL_DRAFT), settings={"budget": {"max_tool_calls_per_round": 2}}
        ),
    )
    audit, events = tmp_path / "audit.db", tmp_path / "events.ndjson"

    run = run_cli(capsys, "run", "--scenario", path, "--json", "--audit-db", audit, "--events", events)

    assert run.code == 0, run.err
    emitted = read_events(events)
    assert [e["tool_call_id"] for e in emitted if e["type"] == "tool_started"] == ["logs-1", "logs-2"]
    assert [e["detail"] for e in cap_events(emitted)] == [
        {"cap": "ROUND", "limit": 2, "tool_call_ids": ["logs-3", "logs-4", "logs-5"]}
    ]
    run_id, on_file = run.result["run_id"], AuditReader(audit)
    assert [i["tool_call_id"] for i in on_file.invocations(run_id)] == ["logs-1", "logs-2"]
    assert [r["code"] for r in on_file.protocol_events(run_id)].count("TOO_MANY_CALLS") == 1


# ------------------------------------------------------------------ item 10: query_logs over a big file
LOG_REQUEST = {"service": "payment-service", "start": "2026-11-30T00:00:00Z", "end": "2026-11-30T06:00:00Z"}


def write_log(path: Path, lines: int, *, message_bytes: int = 40, tail_service: str | None = None) -> Path:
    """`lines` time-sorted lines of two services (the last ten of `tail_service`, if given)."""
    pad = "m" * message_bytes
    with path.open("w", encoding="utf-8") as handle:
        for start in range(0, lines, 10_000):
            chunk = []
            for n in range(start, min(start + 10_000, lines)):
                second = n * 21_600 // lines  # spread over the six hours of LOG_REQUEST
                hms = f"{second // 3600:02d}:{second // 60 % 60:02d}:{second % 60:02d}"
                ts = f"2026-11-30T{hms}.{n % 1000:03d}Z"
                service = (
                    tail_service
                    if tail_service and n >= lines - 10
                    else ("payment-service", "api-gateway")[n % 2]
                )
                level = "ERROR" if n % 7 == 0 else "INFO"
                chunk.append(
                    f'{{"ts":"{ts}","service":"{service}","level":"{level}","message":"{pad} {n}"}}\n'
                )
            handle.write("".join(chunk))
    return path


def logs_request(**fields: Any) -> ToolRequest:
    return ToolRequest(
        "run-1", "session-1", "call-1", "query_logs", QueryLogsInput(**{**LOG_REQUEST, **fields})
    )


@dataclass
class ParseCount:
    """How many log lines have been parsed so far, by any thread (the adapter's line parser, counted)."""

    lines: int = 0


@pytest.fixture
def parsed(monkeypatch: pytest.MonkeyPatch) -> ParseCount:
    count = ParseCount()
    parse = JsonLines.head

    def counting(self: JsonLines, line: str, clock: Any) -> Any:
        count.lines += 1
        return parse(self, line, clock)

    monkeypatch.setattr(JsonLines, "head", counting)
    return count


async def until(condition: Any) -> None:
    """Yield to the loop until `condition()` holds (a bounded number of times, never a time limit)."""
    for _ in range(100_000):
        if condition():
            return
        await asyncio.sleep(0.001)
    raise AssertionError("the condition never held")


async def still_after_a_while(count: ParseCount) -> int:
    """The count now, checked again after half a second, ample time for a scan still running to show."""
    now = count.lines
    await asyncio.sleep(0.5)
    assert count.lines == now, "the scan kept reading after its call had ended"
    return now


BIG_LOG_LINES = 300_000  # a few seconds of parsing: far more than a scan gets before it is stopped


@pytest.fixture(scope="module")
def big_log(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_log(tmp_path_factory.mktemp("logs") / "big.ndjson", BIG_LOG_LINES)


async def test_a_scan_stops_reading_when_the_tool_times_out(big_log: Path, parsed: ParseCount) -> None:
    boundary = ToolBoundary({"query_logs": LogFileAdapter(big_log)}, timeout_s=0.05)

    outcome = await boundary.invoke(logs_request())

    assert (outcome.status, outcome.error_code) == ("ERROR", "TIMEOUT")
    assert await still_after_a_while(parsed) < BIG_LOG_LINES


async def test_a_scan_stops_reading_when_the_run_is_cancelled(big_log: Path, parsed: ParseCount) -> None:
    call = asyncio.create_task(LogFileAdapter(big_log).execute(logs_request()))
    await until(lambda: parsed.lines >= 5_000)

    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call

    assert await still_after_a_while(parsed) < BIG_LOG_LINES


async def test_a_stopped_scan_leaves_the_adapter_to_answer_the_next_call_exactly(
    tmp_path: Path, parsed: ParseCount, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A scan stopped halfway keeps nothing half-read: the next call's answer is a fresh adapter's."""
    lines = 60_000
    path = write_log(tmp_path / "big.ndjson", lines, tail_service="rare-service")
    adapter = LogFileAdapter(path, block_bytes=16 * 1024)
    # The scan waits at line 10,000 until the call has been cancelled: on a busy machine it would
    # otherwise finish the whole file before the cancellation arrives.
    reached, go_on = threading.Event(), threading.Event()
    count_line = JsonLines.head

    def held_at_10_000(self: JsonLines, line: str, clock: Any) -> Any:
        if parsed.lines == 10_000 and not go_on.is_set():
            reached.set()
            go_on.wait(30)
        return count_line(self, line, clock)

    monkeypatch.setattr(JsonLines, "head", held_at_10_000)
    first = asyncio.create_task(adapter.execute(logs_request(service="rare-service")))
    await until(reached.is_set)
    first.cancel()
    for _ in range(3):  # the cancellation reaches the call, which sets its scan's stop flag
        await asyncio.sleep(0)
    go_on.set()
    with pytest.raises(asyncio.CancelledError):
        await first
    assert await still_after_a_while(parsed) < lines

    result = await adapter.execute(logs_request(service="rare-service", limit=200))

    assert result == await LogFileAdapter(path).execute(logs_request(service="rare-service", limit=200))
    assert result.data["returned"] == 10


@pytest.mark.parametrize("mib", [20, pytest.param(200, marks=pytest.mark.long)], ids=lambda mib: f"{mib}MiB")
async def test_memory_does_not_grow_with_the_log_file(tmp_path: Path, mib: int) -> None:
    """The whole file is scanned (a window over all of it, every level), yet the adapter holds only
    the best `limit` entries and one chunk of the file: before, every line was parsed and kept."""
    message_bytes = 1000
    path = write_log(
        tmp_path / "big.ndjson", mib * 1024 * 1024 // (message_bytes + 90), message_bytes=message_bytes
    )
    adapter = LogFileAdapter(path)
    tracemalloc.start()
    try:
        result = await adapter.execute(logs_request(limit=200))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()

    assert result.data["returned"] == 200
    assert result.data["truncated"] is True
    assert peak < 4 * 1024 * 1024, f"{peak / 1024 / 1024:.1f} MiB"


async def test_a_huge_line_is_never_held_whole(tmp_path: Path) -> None:
    """A 64 MiB line (past the 16 MiB line cap) is counted as unparseable and never read whole: the peak
    stays near twice the cap (the reader joins the capped line's chunks), not the line's size."""
    path = tmp_path / "app.ndjson"
    good = '{"ts":"2026-11-30T02:00:00Z","service":"payment-service","level":"ERROR","message":"before"}\n'
    huge = '{"ts":"2026-11-30T02:01:00Z","service":"payment-service","level":"ERROR","message":"'
    with path.open("w", encoding="utf-8") as handle:
        handle.write(good + huge)
        for _ in range(64):
            handle.write("x" * 1024 * 1024)
        handle.write('"}\n' + good.replace("before", "after"))
    adapter = LogFileAdapter(path)
    tracemalloc.start()
    try:
        result = await adapter.execute(logs_request())
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()

    assert [entry["message"] for entry in result.data["entries"]] == ["after", "before"]
    assert adapter.skipped_lines == 1
    assert peak < 40 * 1024 * 1024, f"{peak / 1024 / 1024:.1f} MiB"
