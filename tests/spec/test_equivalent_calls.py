"""Spec rule: the Agent SHALL NOT make equivalent Tool calls merely to show activity.

Equivalence is judged on each tool's canonical business input, not on the text the model wrote: the
same instant in another offset, a knowledge query that differs only in spacing, or the same SELECT
in other keyword case and layout is the same call, refused with DUPLICATE_CALL. What the adapter
would answer differently (another service, another substring, another identifier or literal) is not.
The audit keys every invocation by the same canonical form (`invocations.input_key`).
"""

from __future__ import annotations

from typing import Any

import pytest

from audit import AuditSink, SqliteAuditStore
from tests.support import RecordingAdapter, harness
from tests.support.audit_reader import AuditReader
from tests.support.spec_scenarios import (
    NULL_DRAFT,
    call,
    empty,
    protocol_codes,
    scenario,
    seen,
    text_round,
    tools_round,
)
from tools.adapter import AdapterResult
from tools.vocabulary import EvidenceStatus

ROWS = {"columns": ["id"], "rows": [[1]], "returned": 1, "truncated": False}


def logs(service: str = "payment-service", **fields: Any) -> dict[str, Any]:
    return {"service": service, "start": "2026-11-30T02:00:00Z", "end": "2026-11-30T03:00:00Z", **fields}


def sql(text: str, database: str | None = "shop") -> dict[str, Any]:
    return {"sql": text, "database": database}


EQUIVALENT = [
    pytest.param(
        "query_logs",
        logs(),
        logs(start="2026-11-30T10:00:00+08:00", end="2026-11-30T03:00:00.000+00:00"),
        id="logs-same-instants-other-offsets",
    ),
    pytest.param(
        "query_logs", logs(), logs(level=None, contains=None, limit=10), id="logs-defaults-made-explicit"
    ),
    pytest.param(
        "lookup_knowledge",
        {"query": "支付超时 连接池 HikariPool"},
        {"query": "  支付超时\u3000 连接池   HikariPool ", "top_k": 3},
        id="knowledge-whitespace-and-default",
    ),
    pytest.param(
        "lookup_knowledge",
        {"source": "etcd/etcdNoLeader.md"},
        {"source": "etcd/etcdNoLeader.md", "part": 1},
        id="knowledge-read-default-part",
    ),
    pytest.param(
        "query_mysql",
        sql("SELECT id FROM orders WHERE status = 'PAYING' LIMIT 5"),
        sql("select id\n  from orders\n where status='PAYING'\nlimit 5;"),
        id="sql-keyword-case-layout-semicolon",
    ),
]

DIFFERENT = [
    pytest.param("query_logs", logs(), logs("api-gateway"), id="logs-other-service"),
    pytest.param("query_logs", logs(), logs(start="2026-11-30T02:00:01Z"), id="logs-other-instant"),
    pytest.param(
        "query_logs", logs(contains="pool exhausted"), logs(contains="pool  exhausted"), id="logs-substring"
    ),
    pytest.param(
        "lookup_knowledge", {"query": "连接池 耗尽"}, {"query": "连接池耗尽"}, id="knowledge-no-space"
    ),
    pytest.param(
        "lookup_knowledge", {"query": "连接池"}, {"query": "连接池", "top_k": 5}, id="knowledge-top-k"
    ),
    pytest.param(
        "lookup_knowledge",
        {"source": "etcd/etcdNoLeader.md"},
        {"source": "etcd/etcdNoLeader.md", "part": 2},
        id="knowledge-read-other-part",
    ),
    pytest.param(
        "lookup_knowledge",
        {"source": "etcd/etcdNoLeader.md"},
        {"source": "etcd/etcdNoLeader.md "},
        id="knowledge-read-source-exact",
    ),
    pytest.param(
        "lookup_knowledge",
        {"query": "etcd/etcdNoLeader.md"},
        {"source": "etcd/etcdNoLeader.md"},
        id="knowledge-search-is-no-read",
    ),
    pytest.param(
        "query_mysql",
        sql("SELECT id FROM orders WHERE status = 'PAYING'"),
        sql("SELECT id FROM orders WHERE status = 'paying'"),
        id="sql-literal-case",
    ),
    pytest.param(
        "query_mysql", sql("SELECT id FROM orders"), sql("SELECT id FROM ORDERS"), id="sql-identifier-case"
    ),
    pytest.param(
        "query_mysql", sql("SELECT id FROM orders"), sql("SELECT id FROM orders", None), id="sql-db"
    ),
]


def _adapter() -> RecordingAdapter:
    return RecordingAdapter(answer=empty())


def _run(tool: str, first: dict[str, Any], second: dict[str, Any]) -> Any:
    adapter = _adapter()
    h = harness(
        scenario(
            tools_round(call("c-1", tool, first)),
            tools_round(call("c-2", tool, second)),
            text_round(NULL_DRAFT),
        ),
        adapters={tool: adapter},
    )
    return h, adapter


@pytest.mark.parametrize(("tool", "first", "second"), EQUIVALENT)
async def test_an_equivalent_call_is_refused_as_a_duplicate(
    tool: str, first: dict[str, Any], second: dict[str, Any]
) -> None:
    h, adapter = _run(tool, first, second)

    result = await h.run()

    assert [r.tool_call_id for r in adapter.requests] == ["c-1"]
    assert seen(h, 2)[1] == {
        "tool_call_id": "c-2",
        "tool": tool,
        "evidence_status": "NOT_EXECUTED",
        "control": {"code": "DUPLICATE_CALL"},
    }
    assert ("DUPLICATE_CALL", "c-2") in protocol_codes(h)
    assert result.outcome == "DRAFT"


@pytest.mark.parametrize(("tool", "first", "second"), DIFFERENT)
async def test_a_call_the_adapter_answers_differently_is_not_a_duplicate(
    tool: str, first: dict[str, Any], second: dict[str, Any]
) -> None:
    h, adapter = _run(tool, first, second)

    result = await h.run()

    assert [r.tool_call_id for r in adapter.requests] == ["c-1", "c-2"]
    assert "DUPLICATE_CALL" not in [code for code, _ in protocol_codes(h)]
    assert result.outcome == "DRAFT"


async def test_the_audit_keys_invocations_by_their_canonical_input(audit_store: SqliteAuditStore) -> None:
    """Two runs spell the same window differently: one input key, each run's own input kept as written."""
    adapter = RecordingAdapter(
        answer=lambda _r: AdapterResult(EvidenceStatus.EMPTY, {"entries": [], "returned": 0})
    )
    h = harness(
        scenario(
            tools_round(call("a-1", "query_logs", logs())),
            text_round(NULL_DRAFT),
            tools_round(call("b-1", "query_logs", logs(start="2026-11-30T10:00:00+08:00", limit=10))),
            text_round(NULL_DRAFT),
        ),
        adapters={"query_logs": adapter},
        sinks=[AuditSink(audit_store)],
    )

    first = await h.run()
    second = await h.run()
    rows = AuditReader(audit_store).invocations(first.run_id) + AuditReader(audit_store).invocations(
        second.run_id
    )

    assert (first.outcome, second.outcome) == ("DRAFT", "DRAFT")
    assert len({r["input_key"] for r in rows}) == 1
    assert '"start": "2026-11-30T10:00:00+08:00"' in rows[1]["input_json"]
    assert [e["input_key"] for e in h.of_type("tool_started")] == [rows[0]["input_key"]] * 2
    assert '"start":"2026-11-30T02:00:00Z"' in rows[0]["input_key"]
