"""Every statement the sink and the browser spell in SQLite's dialect, as MariaDB/MySQL reads it
(audit.mysql.dialect). No server needed: the server-side behaviour is in test_audit_mysql.py and the
browse tests' MariaDB variants."""

from __future__ import annotations

import re

import pytest

from audit import browse, sink
from audit.mysql.dialect import to_mysql

SINK_STATEMENTS = {
    name: value for name, value in vars(sink).items() if name.startswith("_") and name.isupper()
}


@pytest.mark.parametrize("name", sorted(n for n, v in SINK_STATEMENTS.items() if isinstance(v, str)))
def test_sink_statements_keep_their_parameters_and_lose_sqlite_syntax(name: str) -> None:
    sql = SINK_STATEMENTS[name]
    translated = to_mysql(sql)
    assert translated.count("%s") == sql.count("?")
    assert "?" not in translated
    assert "ON CONFLICT" not in translated
    assert "excluded." not in translated


def test_the_upsert_updates_the_same_columns() -> None:
    assert to_mysql(sink._ROUND_STARTED).endswith(
        "ON DUPLICATE KEY UPDATE started_at = VALUES(started_at), seq = VALUES(seq)"
    )


def test_literal_percent_signs_survive_pymysql_formatting() -> None:
    assert to_mysql("SELECT '100%' WHERE a = ?") == "SELECT '100%%' WHERE a = %s"


def test_index_hints_run_order_and_case_folding() -> None:
    sql = (
        "SELECT * FROM runs WHERE +session_id = ? AND (+outcome = ?) AND query LIKE ? ESCAPE '\\'"
        " ORDER BY COALESCE(started_at, finished_at) DESC, run_id DESC"
    )
    assert to_mysql(sql) == (
        "SELECT * FROM runs WHERE session_id = %s AND (outcome = %s) AND LOWER(query) LIKE LOWER(%s)"
        " ESCAPE '\\' ORDER BY listed_at DESC, run_id DESC"
    )


def test_every_browse_text_clause_lowers_both_sides() -> None:
    for clause in browse._TEXT_LIKE.values():
        translated = to_mysql(clause)
        assert len(re.findall(r"LOWER\(%s\)", translated)) == clause.count("LIKE ?")
