"""The SQL corpus against the real server.

Every hostile or write statement is answered POLICY_REJECTED with its stable reason before a connection
exists, and the server shows no trace: canary tables, checksums, routines, globals and files unchanged.
Legitimate statements answer FOUND/EMPTY with bounded projections. The corpus is written for `shop` /
`ops`; `MysqlTestEnv.rewrite` points it at this module's throwaway databases.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import Any

import pytest

from tests.support.mysql import MysqlTestEnv, mysql_request
from tests.support.sql_corpus import HOSTILE, LEGIT
from tools.adapter import ToolError

pytestmark = pytest.mark.mysql

HOSTILE_IDS = [f"hostile-{index:03d}" for index in range(len(HOSTILE))]
LEGIT_IDS = [f"legit-{index:02d}" for index in range(len(LEGIT))]


def assert_bounded(data: dict[str, Any], *, max_rows: int, max_columns: int, cell_chars: int) -> None:
    assert set(data) == {"columns", "rows", "row_count", "truncated"}
    assert 0 < len(data["columns"]) <= max_columns
    assert data["row_count"] == len(data["rows"]) <= max_rows
    for row in data["rows"]:
        assert len(row) == len(data["columns"])
        for cell in row:
            assert cell is None or isinstance(cell, int | float | str)
            assert not isinstance(cell, str) or len(cell) <= cell_chars


def missing(paths: set[str]) -> set[str]:
    return {path for path in paths if not Path(path).exists()}


def test_the_corpus_holds_at_least_sixty_hostile_statements() -> None:
    assert len(HOSTILE) >= 60


@pytest.mark.parametrize(("sql", "reason"), HOSTILE, ids=HOSTILE_IDS)
async def test_a_hostile_statement_is_rejected_before_any_connection(
    mysql_env: MysqlTestEnv, sql: str, reason: str
) -> None:
    adapter = mysql_env.adapter()
    try:
        with pytest.raises(ToolError) as err:
            await adapter.execute(mysql_request(mysql_env.rewrite(sql)))
        assert (err.value.code, err.value.reason) == ("POLICY_REJECTED", reason)
        assert adapter.pool_stats()["opened"] == 0
    finally:
        await adapter.aclose()


async def test_the_whole_corpus_leaves_no_trace_on_the_server(mysql_env: MysqlTestEnv) -> None:
    corpus = [(mysql_env.rewrite(sql), reason) for sql, reason in HOSTILE]
    named_files = {path for sql, _ in corpus for path in re.findall(r"'(/[^']+)'", sql)}
    absent_files = await asyncio.to_thread(missing, named_files)
    assert absent_files, "the corpus names files it could write"
    before = await asyncio.to_thread(mysql_env.fingerprint)
    files_before = await asyncio.to_thread(mysql_env.server_files)

    adapter = mysql_env.adapter()
    try:
        answers = []
        for sql, _ in corpus:
            with pytest.raises(ToolError) as err:
                await adapter.execute(mysql_request(sql))
            answers.append((err.value.code, err.value.reason))
        assert answers == [("POLICY_REJECTED", reason) for _, reason in corpus]
        assert adapter.pool_stats()["opened"] == 0, "a hostile statement reached the point of connecting"

        assert await asyncio.to_thread(mysql_env.fingerprint) == before
        assert await asyncio.to_thread(mysql_env.server_files) == files_before
        assert await asyncio.to_thread(missing, absent_files) == absent_files

        # Control: the same adapter does reach the server, so `opened == 0` above means something.
        result = await adapter.execute(mysql_request("SELECT COUNT(*) AS n FROM canary"))
        assert result.data["rows"] == [[2]]
        assert adapter.pool_stats()["opened"] == 1
    finally:
        await adapter.aclose()


@pytest.mark.parametrize("sql", LEGIT, ids=LEGIT_IDS)
async def test_a_legitimate_statement_answers_with_a_bounded_projection(
    mysql_env: MysqlTestEnv, sql: str
) -> None:
    adapter = mysql_env.adapter(max_rows=20, max_columns=8, cell_chars=40, max_result_bytes=16_000)
    try:
        result = await adapter.execute(mysql_request(mysql_env.rewrite(sql)))
        assert result.status == ("FOUND" if result.data["rows"] else "EMPTY")
        assert_bounded(result.data, max_rows=20, max_columns=8, cell_chars=40)
    finally:
        await adapter.aclose()


async def test_rows_beyond_max_rows_are_cut_and_flagged(mysql_env: MysqlTestEnv) -> None:
    adapter = mysql_env.adapter(max_rows=5)
    try:
        cut = await adapter.execute(mysql_request("SELECT order_no FROM orders ORDER BY id"))
        assert (cut.data["row_count"], cut.data["truncated"]) == (5, True)
        assert cut.data["rows"][0] == ["ord_318402276"]
        exact = await adapter.execute(mysql_request("SELECT order_no FROM orders ORDER BY id LIMIT 5"))
        assert (exact.data["row_count"], exact.data["truncated"]) == (5, False)
        shown = await adapter.execute(mysql_request("SHOW COLUMNS FROM orders"))
        assert (shown.data["row_count"], shown.data["truncated"]) == (5, True)
    finally:
        await adapter.aclose()


async def test_columns_beyond_max_columns_are_cut_and_flagged(mysql_env: MysqlTestEnv) -> None:
    adapter = mysql_env.adapter(max_columns=3)
    try:
        result = await adapter.execute(mysql_request("SELECT * FROM deploys ORDER BY id"))
        assert result.data["columns"] == ["id", "deploy_id", "service"]
        assert all(len(row) == 3 for row in result.data["rows"])
        assert result.data["truncated"] is True
    finally:
        await adapter.aclose()


async def test_long_cells_are_cut_and_flagged(mysql_env: MysqlTestEnv) -> None:
    adapter = mysql_env.adapter(cell_chars=12)
    try:
        result = await adapter.execute(
            mysql_request("SELECT change_summary FROM deploys WHERE deploy_id = 'dep-20261130-0205-7f3a'")
        )
        assert result.data["rows"] == [["新增 payment-r"]]
        assert result.data["truncated"] is True
    finally:
        await adapter.aclose()


async def test_cells_are_json_values_and_binary_data_is_never_shown(mysql_env: MysqlTestEnv) -> None:
    adapter = mysql_env.adapter()
    try:
        order = await adapter.execute(
            mysql_request(
                "SELECT amount, created_at, enterprise_id, note FROM orders "
                "WHERE order_no IN ('ord_930052524', 'ord_318977105') ORDER BY id"
            )
        )
        assert order.data["rows"] == [
            [7250.5, "2026-11-30T01:05:44", "ent-20931", None],
            [15800, "2026-11-30T02:11:17", "ent-20931", None],
        ]
        binary = await adapter.execute(mysql_request("SELECT digest, LENGTH(note) AS n FROM artifacts"))
        assert binary.data == {
            "columns": ["digest", "n"],
            "rows": [["<16 bytes>", 5000]],
            "row_count": 1,
            "truncated": False,
        }
    finally:
        await adapter.aclose()


async def test_an_oversized_projection_is_result_too_large(mysql_env: MysqlTestEnv) -> None:
    adapter = mysql_env.adapter(max_result_bytes=2_000)
    try:
        with pytest.raises(ToolError) as err:
            await adapter.execute(mysql_request("SELECT * FROM orders"))
        assert (err.value.code, err.value.reason) == ("RESULT_TOO_LARGE", "NARROW_THE_QUERY")
        assert adapter.pool_stats()["in_use"] == 0
    finally:
        await adapter.aclose()


async def test_no_rows_is_empty_with_the_same_shape(mysql_env: MysqlTestEnv) -> None:
    adapter = mysql_env.adapter()
    try:
        result = await adapter.execute(
            mysql_request("SELECT order_no FROM orders WHERE enterprise_id = 'ent-00000'")
        )
        assert result.status == "EMPTY"
        assert result.data == {"columns": ["order_no"], "rows": [], "row_count": 0, "truncated": False}
    finally:
        await adapter.aclose()


async def test_the_input_database_chooses_among_allowed_schemas_only(mysql_env: MysqlTestEnv) -> None:
    adapter = mysql_env.adapter()
    try:
        ops = await adapter.execute(
            mysql_request("SELECT COUNT(*) AS n FROM deploys", database=mysql_env.ops)
        )
        assert ops.data["columns"] == ["n"]
        for database, reason in (("mysql", "SYSTEM_SCHEMA"), ("billing", "SCHEMA_NOT_ALLOWED")):
            with pytest.raises(ToolError) as err:
                await adapter.execute(mysql_request("SELECT 1", database=database))
            assert (err.value.code, err.value.reason) == ("POLICY_REJECTED", reason)
        assert adapter.pool_stats()["opened"] == 1
    finally:
        await adapter.aclose()
