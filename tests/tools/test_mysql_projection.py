"""query_mysql's projection: the same JSON-safe cells whether a column is uniform or mixed, with the type
dispatch done once per column (no server needed: the adapter's projection of fetched rows)."""

from __future__ import annotations

from dataclasses import replace
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any

import pytest

from tools.mysql.adapter import MysqlAdapter, _Cut, _Rows
from tools.mysql.guard import guard_sql
from tools.mysql.statement_digest import WITHHELD
from tools.redaction import REDACTED

SQL = "SELECT id, name, amount, created_at, note FROM orders"
COLUMNS = ["id", "name", "amount", "created_at", "note"]


def adapter(**kwargs: Any) -> MysqlAdapter:
    return MysqlAdapter("mysql://u@127.0.0.1:3306/shop", password=None, allowed_schemas=["shop"], **kwargs)


def project(rows: list[tuple[Any, ...]], columns: list[str] = COLUMNS, sql: str = SQL, **kwargs: Any) -> Any:
    guarded = guard_sql(sql, database="shop", allowed_schemas=["shop"], max_rows=100)
    return adapter(**kwargs)._project(_Rows(columns, rows), guarded)


def test_uniform_columns_are_converted_without_a_per_cell_dispatch(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Any] = []
    original = MysqlAdapter._cell

    def counting(self: MysqlAdapter, value: Any) -> tuple[Any, bool]:
        calls.append(value)
        return original(self, value)

    monkeypatch.setattr(MysqlAdapter, "_cell", counting)
    rows = [(i, f"名字 {i}", None, datetime(2026, 1, 2, 3, 4, i), None) for i in range(50)]
    result = project(rows)
    assert calls == []  # ints, short text, NULLs and datetimes: one decision per column
    assert result.data["rows"][7] == [7, "名字 7", None, "2026-01-02T03:04:07", None]
    assert result.data["truncated"] is False


def test_mixed_and_special_columns_give_the_same_cells_as_before() -> None:
    long_text = "x" * 250
    rows = [
        (1, long_text, Decimal("12.50"), date(2026, 1, 2), b"\x00\x01"),
        ("2", _Cut("y" * 201), Decimal("12345678901234567.891"), timedelta(hours=1), {"b", "a"}),
        (3.5, None, Decimal("100"), None, True),
    ]
    result = project(rows, cell_chars=200)
    assert result.data["rows"] == [
        [1, "x" * 200, 12.5, "2026-01-02", "<2 bytes>"],
        ["2", "y" * 200, "12345678901234567.891", "1:00:00", "a,b"],
        [3.5, None, 100, None, True],
    ]
    assert result.data["truncated"] is True


def test_decimals_become_numbers_only_when_exact() -> None:
    values = [Decimal("0.1"), Decimal("-0.00"), Decimal("123456789012345"), Decimal("1.0000000000000001")]
    result = project([(v,) for v in values], columns=["amount"], sql="SELECT amount FROM orders")
    cells = [row[0] for row in result.data["rows"]]
    assert cells == [0.1, 0, 123456789012345, "1.0000000000000001"]
    assert [type(c) for c in cells] == [float, int, int, str]


def test_a_column_the_guard_marks_secret_is_hidden_whatever_its_values() -> None:
    """Defence in depth: the guard refuses a statement that reads a secret column (SECRET_COLUMN), and the
    projection still hides any column it marks, by position or by name."""
    guarded = guard_sql("SELECT id, note FROM orders", database="shop", allowed_schemas=["shop"], max_rows=9)
    marked = [replace(guarded, secret_columns=(1,)), replace(guarded, secret_names=frozenset({"p"}))]
    for statement in marked:
        rows = _Rows(["id", "p"], [(1, "hunter2"), (2, None), (3, 42)])
        result = adapter()._project(rows, statement)
        assert result.data["rows"] == [[1, REDACTED], [2, None], [3, REDACTED]]


def test_too_many_columns_and_rows_are_cut_and_flagged() -> None:
    rows = [tuple(range(5)) for _ in range(4)]
    result = project(rows, max_rows=3, max_columns=2)
    assert result.data["columns"] == ["id", "name"]
    assert result.data["rows"] == [[0, 1]] * 3
    assert result.data["truncated"] is True


def test_statement_text_in_a_blob_is_digested_like_text() -> None:
    """MySQL 8 keeps mysql.slow_log.sql_text in a BLOB; a long one arrives as a prefix."""
    guarded = guard_sql(
        "SELECT sql_text FROM mysql.slow_log", database="shop", allowed_schemas=["shop"], max_rows=10
    )
    adapter = MysqlAdapter("mysql://u@127.0.0.1:1/shop", password=None, allowed_schemas=["shop"])
    rows = [
        (b"UPDATE t SET a = 'x' WHERE id = 1",),
        (_Cut("INSERT INTO t VALUES ('é".encode()[:-1]),),  # cut inside a character and a literal
        (_Cut("SELECT 1 FROM t WHERE é = 2 AND b".encode()),),
        (b"\xff\xfe not text",),
        (None,),
    ]
    data = adapter._project(_Rows(["sql_text"], rows), guarded).data
    assert data["rows"] == [
        ["UPDATE t SET a = ? WHERE id = ?"],
        [WITHHELD],
        ["SELECT ? FROM t WHERE ? = ? AND b"],  # a name outside ASCII is shown as ? too
        [WITHHELD],
        [None],
    ]
