"""A separate writer process for the team-audit tests: `python -m tests.support.audit_writer ...`.

`--runs N`: records N complete runs (two tool calls each) through the real sink, then exits.
`--hold`: records one run up to a STARTED invocation, prints `ready`, and keeps the run open (its
lease renewed) until killed, like a process stuck in a tool call.
"""

from __future__ import annotations

import argparse
import sys
import time

from audit.location import MysqlLocation, parse_audit_url
from audit.mysql.store import MysqlAuditStore
from audit.sink import AuditSink
from tests.support.audit_events import KNOWLEDGE_INPUT, LOGS_INPUT, Events


def record_run(sink: AuditSink, run_id: str) -> None:
    ev = Events(run_id, session_id=f"session-{run_id}")
    sink(ev.run_started(f"{run_id}: 支付回调超时"))
    sink(ev.round_started(1))
    sink(ev.round_finished(1, ["call-1", "call-2"]))
    sink(ev.tool_started("call-1", "lookup_knowledge", KNOWLEDGE_INPUT))
    sink(ev.tool_finished("call-1", "lookup_knowledge", "FOUND", projection={"hits": [{"title": "连接池"}]}))
    sink(ev.tool_started("call-2", "query_logs", LOGS_INPUT))
    sink(ev.tool_finished("call-2", "query_logs", "EMPTY"))
    sink(ev.protocol("STOP_REQUIRED"))
    sink(ev.run_finished("DRAFT", "COMPLETED"))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--url", required=True)
    parser.add_argument("--prefix", required=True)
    parser.add_argument("--runs", type=int, default=1)
    parser.add_argument("--hold", action="store_true")
    parser.add_argument("--heartbeat-s", type=float, default=5.0)
    parser.add_argument("--lease-s", type=float, default=30.0)
    args = parser.parse_args()
    location = parse_audit_url(args.url)
    if not isinstance(location, MysqlLocation):
        parser.error("--url must name a server audit (mysql://...)")
    store = MysqlAuditStore(location, heartbeat_s=args.heartbeat_s, lease_s=args.lease_s)
    sink = AuditSink(store)
    if not args.hold:
        for n in range(args.runs):
            record_run(sink, f"{args.prefix}-{n}")
        store.close()
        return 0
    ev = Events(f"{args.prefix}-held", session_id="held")
    sink(ev.run_started("held open"))
    sink(ev.tool_started("call-1", "query_logs", LOGS_INPUT))
    print("ready", flush=True)
    while True:
        time.sleep(1)


if __name__ == "__main__":
    sys.exit(main())
