"""Run events written by hand for audit tests: numbered, timestamped, one run, shaped like the engine's.

They are the events' JSON objects (as `--events` writes them), so the audit sink is exercised on the
same path an NDJSON file or another writer would take.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

RUN = "run-1"
SESSION = "session-1"


class Events:
    """Builds events shaped like agent/events/emitter.py: numbered, timestamped, one run."""

    def __init__(self, run_id: str = RUN, session_id: str = SESSION) -> None:
        self.run_id = run_id
        self.session_id = session_id
        self.seq = 0

    def __call__(self, type_: str, **fields: Any) -> dict[str, Any]:
        self.seq += 1
        return {
            "type": type_,
            "run_id": self.run_id,
            "session_id": self.session_id,
            "seq": self.seq,
            "at": f"2025-01-01T00:00:{self.seq:02d}.000000Z",
            **fields,
        }

    def run_started(self, query: str = "订单服务 5xx 升高") -> dict[str, Any]:
        return self(
            "run_started",
            query=query,
            previous_turn=None,
            model="scripted:demo",
            limits={"max_model_calls": 6, "max_total_tokens": 20000, "deadline_s": 60, "max_run_bytes": 1000},
            protocol={"max_consecutive_no_gain": 2, "max_protocol_violations": 2},
        )

    def round_started(self, round_: int) -> dict[str, Any]:
        return self("model_round_started", round=round_)

    def round_finished(self, round_: int, tool_call_ids: list[str], has_text: bool = False) -> dict[str, Any]:
        return self(
            "model_round_finished",
            round=round_,
            duration_ms=12,
            prompt_tokens=800,
            completion_tokens=60,
            tool_call_ids=tool_call_ids,
            has_text=has_text,
        )

    def tool_started(
        self, call_id: str, tool: str, input_: dict[str, Any], round_: int = 1
    ) -> dict[str, Any]:
        return self("tool_started", round=round_, tool_call_id=call_id, tool=tool, input=input_)

    def tool_finished(
        self,
        call_id: str,
        tool: str,
        status: str,
        projection: dict[str, Any] | None = None,
        error_code: str | None = None,
        reason: str | None = None,
        round_: int = 1,
    ) -> dict[str, Any]:
        return self(
            "tool_finished",
            round=round_,
            tool_call_id=call_id,
            tool=tool,
            status=status,
            error_code=error_code,
            reason=reason,
            projection=projection,
            duration_ms=34,
            observation={"tool_call_id": call_id, "tool": tool, "evidence_status": status},
        )

    def protocol(self, code: str, tool_call_id: str | None = None, **detail: Any) -> dict[str, Any]:
        return self(
            "protocol_changed",
            code=code,
            tool_call_id=tool_call_id,
            detail=detail,
            observation=None,
            state={
                "pending_tool_call_id": None,
                "consecutive_no_gain": 0,
                "max_consecutive_no_gain": 2,
                "protocol_violations": 0,
                "max_protocol_violations": 2,
                "stop_required": False,
                "final_opportunity": False,
                "saturation": None,
            },
        )

    def budget(self) -> dict[str, Any]:
        return self(
            "budget_changed",
            model_calls={"used": 1, "limit": 6},
            tokens={"used": 860, "limit": 20000},
            run_bytes={"used": 10, "limit": 1000},
            deadline={"elapsed_s": 0.1, "limit_s": 60},
            exhausted=None,
        )

    def run_finished(
        self, outcome: str, stop_reason: str, failure: dict[str, Any] | None = None, model_calls: int = 2
    ) -> dict[str, Any]:
        result = {
            "run_id": self.run_id,
            "session_id": self.session_id,
            "outcome": outcome,
            "stop_reason": stop_reason,
            "draft": None,
            "progress": None,
            "usage": {
                "model_calls": model_calls,
                "prompt_tokens": 1600,
                "completion_tokens": 120,
                "total_tokens": 1720,
            },
            "failure": failure,
        }
        return self("run_finished", outcome=outcome, stop_reason=stop_reason, result=result)


def on_disk(path: Path, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """The file itself through a separate connection, as another process (or a post-crash reader) sees
    it: PRAGMAs, the schema, the text index, raw statements. Rows for assertions: `AuditReader(path)`."""
    conn = sqlite3.connect(path)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


KNOWLEDGE_INPUT = {"query": "连接池 耗尽", "top_k": 3}
LOGS_INPUT = {
    "service": "orders",
    "start": "2025-01-01T00:00:00Z",
    "end": "2025-01-01T01:00:00Z",
    "limit": 50,
}
