"""The bundled runbooks only tell the agent to run statements `query_mysql` accepts: a runbook that
points at a refused statement sends the agent where it cannot look during an incident."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tools.knowledge import bundled_knowledge_path
from tools.mysql.adapter import split_sql_script
from tools.mysql.guard import guard_sql

SQL_BLOCK = re.compile(r"```sql\n(.*?)```", re.DOTALL)
# The business databases the runbooks name; the statements read them unqualified from `payments`.
SCHEMAS = ["payments", "orders", "accounts"]


def runbook_statements() -> list[tuple[str, str]]:
    found = []
    for path in sorted(Path(bundled_knowledge_path()).glob("*.md")):
        for block in SQL_BLOCK.findall(path.read_text(encoding="utf-8")):
            found += [(path.name, statement) for statement in split_sql_script(block)]
    return found


STATEMENTS = runbook_statements()


def test_the_runbooks_hold_diagnostic_statements() -> None:
    names = {name for name, _ in STATEMENTS}
    assert {"mysql-lock-wait-slow-query.md", "payment-timeout-connection-pool.md"} <= names
    assert len(STATEMENTS) == 18  # counted by hand: 1 + 13 + 2 + 2 in four of the six runbooks


@pytest.mark.parametrize(
    ("runbook", "sql"), STATEMENTS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(STATEMENTS)]
)
def test_every_runbook_statement_is_accepted(runbook: str, sql: str) -> None:
    guarded = guard_sql(sql, database="payments", allowed_schemas=SCHEMAS, max_rows=100)
    assert guarded.kind in ("SELECT", "SHOW", "EXPLAIN")
