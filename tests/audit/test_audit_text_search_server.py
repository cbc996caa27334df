"""Text search over the server's trigram words (audit.mysql.text_search) gives the file's answers:
for a run still going (found by LIKE over pending runs), after its finish indexed it, and after a
migration indexed the runs an older schema left without words."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from audit import browse as browse_module
from audit.browse import AuditBrowser, InvocationFilter
from audit.location import MysqlLocation
from audit.mysql import text_search as mysql_text_search
from audit.mysql.text_search import indexable, match_all, term_words
from audit.port import AuditStore
from audit.sink import AuditSink
from tests.support.audit_backends import AuditTarget
from tests.support.audit_events import Events
from tests.support.mysql import root_connection

RARE_INPUT = {"service": "稀有服务-QZX+(1)", "contains": "Timeout"}


@pytest.fixture
def target(audit_target: AuditTarget) -> AuditTarget:
    """Each store in turn (tests/conftest.py)."""
    return audit_target


@pytest.fixture(autouse=True)
def index_plan(monkeypatch: pytest.MonkeyPatch) -> None:
    """A walk of one row: every search below is answered by the index (plus the pending runs)."""
    monkeypatch.setattr(browse_module, "_WALK_LIMIT", {"invocations": 1, "runs": 1})


def record_run(store: AuditStore, run_id: str, query: str, service: str, *, finish: bool) -> None:
    ev, sink = Events(run_id=run_id), AuditSink(store)
    sink(ev.run_started(query))
    sink(ev.tool_started("call-1", "query_logs", {"service": service, "contains": "504"}))
    sink(
        ev.tool_finished(
            "call-1", "query_logs", "FOUND", projection={"lines": [{"message": f"{service} 504"}]}
        )
    )
    if finish:
        sink(ev.run_finished("DRAFT", "COMPLETED"))


def found(store: AuditStore, text: str) -> tuple[list[str], list[str]]:
    browser = AuditBrowser(store)
    invocations = browser.invocations(InvocationFilter(text=text), limit=2).rows
    runs = browser.runs(text=text, limit=2).rows
    assert browser.count_invocations(InvocationFilter(text=text)) == len(invocations)
    return [row["run_id"] for row in invocations], [row["run_id"] for row in runs]


def test_a_running_run_is_found_before_and_after_its_finish(target: AuditTarget) -> None:
    with target.open() as store:
        for n in range(4):
            record_run(store, f"old-{n}", f"支付回调失败 {n}", f"payment-service-{n}", finish=True)
        record_run(store, "live", "订单服务 Mixed-Case 查询", "稀有服务-QZX+(1)", finish=False)

        for term in ("稀有服务", "qzx+(1)", "MIXED-case", "稀有服务-QZX+(1) 订单服务"):
            assert found(store, term) == (["live"], ["live"]), term
        assert found(store, "payment-service-2") == (["old-2"], ["old-2"])

        ev = Events(run_id="live")
        ev.seq = 10
        AuditSink(store)(ev.run_finished("DRAFT", "COMPLETED"))
        for term in ("稀有服务", "qzx+(1)", "MIXED-case", "稀有服务-QZX+(1) 订单服务"):
            assert found(store, term) == (["live"], ["live"]), term
        assert found(store, "稀有服务-QZX+(2)") == ([], [])
        assert found(store, "qzx-") == ([], [])  # "-" is text here, not FULLTEXT's exclusion
        assert found(store, "-qzx") == (["live"], ["live"])


@pytest.mark.mysql
def test_the_migration_indexes_runs_an_older_server_schema_left_without_words(
    mariadb_audit: AuditTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = mariadb_audit
    monkeypatch.setattr(mysql_text_search, "BACKFILL_BATCH_RUNS", 2)  # three batches, keyset-bounded
    with target.open() as store:
        for n in range(5):
            record_run(store, f"run-{n}", f"连接池耗尽第{n}号", f"服务-{n}-ZQX", finish=True)
    # The database as schema version 1 left it: no trigram tables, every finished run unmarked.
    assert isinstance(target.location, MysqlLocation)
    with root_connection(target.location.database) as conn, conn.cursor() as cursor:
        cursor.execute("DROP TABLE invocation_trigrams, run_trigrams")
        cursor.execute("UPDATE audit_schema_version SET version = 1")
    with target.open() as store:
        for n in range(5):
            assert found(store, f"服务-{n}-zqx") == ([f"run-{n}"], [f"run-{n}"])
            assert found(store, f"连接池耗尽第{n}号") == ([f"run-{n}"], [f"run-{n}"])


def test_a_terms_words_are_hex_trigrams_of_its_lower_case_text() -> None:
    assert term_words("连接池") == ["连接池".encode().hex().upper()]
    assert term_words("ABCd") == term_words("abcd") == ["616263", "626364"]
    assert term_words("ab") == []
    # Two characters: a prefix, every trigram they start (the end mark makes one at the very end).
    assert match_all("AB") == "+6162*"
    assert match_all("无此") == "+" + "无此".encode().hex().upper() + "*"
    with pytest.raises(ValueError, match="a term of 1 character has no index query"):
        match_all("a")
    # An invocation indexed before the end mark ends its text in "}": such a term keeps the walk.
    assert [indexable(t) for t in ("超时", "ab", "1}", "a", "abc}")] == [True, True, False, False, True]
    # FULLTEXT's operator characters end up as hex digits: the query holds only required words.
    query = match_all('+a-b"c*(d)~<e>@')
    assert all(word[0] == "+" and set(word[1:]) <= set("0123456789ABCDEF") for word in query.split())


@pytest.mark.mysql
def test_recovery_indexes_the_runs_it_closes(mariadb_audit: AuditTarget) -> None:
    """A crashed writer's run leaves the pending set (which every search reads) and stays findable."""
    target = mariadb_audit
    with target.open() as store:
        record_run(store, "crashed", "锁等待超时 Crash", "孤儿服务-WQX", finish=False)
        assert isinstance(target.location, MysqlLocation)
        with root_connection(target.location.database) as conn, conn.cursor() as cursor:
            cursor.execute("DELETE FROM run_leases")  # its writer is gone
        assert store.recover() == ["crashed"]
        assert store.query("SELECT run_id FROM runs WHERE fts_pending IS NOT NULL") == []
        for term in ("孤儿服务-wqx", "锁等待超时 crash"):
            assert found(store, term) == (["crashed"], ["crashed"]), term


def test_several_terms_read_the_candidates_of_the_rarest_not_the_longest(
    target: AuditTarget, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`payment-service-common 7q9` at scale: the long term is in every run, the short one in one.
    The answer is the file's on both stores; on the server the candidates read are the short term's
    (reading the common term's candidates is what cost seconds at 200,000 rows). The walk, 5 rows
    here, holds the one match only: a partial page, so the index plan runs, choosing by the walk's
    rows (the common term is in all 5, the short one in 1)."""
    monkeypatch.setattr(browse_module, "_WALK_LIMIT", {"invocations": 5, "runs": 5})
    with target.open() as store:
        for n in range(6):
            record_run(store, f"run-{n}", "支付回调失败", f"payment-service-common {n}", finish=True)
        record_run(store, "needle", "支付回调失败", "payment-service-common 7q9", finish=True)
        sources: list[Any] = []
        real_query = store.query

        def spy(sql: str, params: Sequence[Any] = ()) -> list[dict[str, Any]]:
            if "AS candidates" in sql:
                sources.append(params[0])
            return real_query(sql, params)

        monkeypatch.setattr(store, "query", spy)
        assert found(store, "payment-service-common 7q9") == (["needle"], ["needle"])
        assert found(store, "7Q9 payment-service-common") == (["needle"], ["needle"])
    if target.backend == "mariadb":
        assert sources
        assert set(sources) == {match_all("7q9")}


def test_two_characters_are_found_anywhere_even_at_the_very_end_of_a_text(target: AuditTarget) -> None:
    """`超时` at the end of a query, `无此` inside a projection, `ab` ending a run's query: on the
    server the index answers (the walk is one row here), and the rows are the file's."""
    with target.open() as store:
        record_run(store, "end-of-query", "支付回调超时", "payment-service", finish=True)
        record_run(store, "in-body", "订单查询", "无此服务-x", finish=True)
        record_run(store, "ascii-end", "cache miss then AB", "ledger}", finish=True)
        record_run(store, "other", "库存同步", "inventory", finish=False)
        assert found(store, "超时") == (["end-of-query"], ["end-of-query"])
        assert found(store, "无此") == (["in-body"], ["in-body"])
        assert found(store, "ab") == (["ascii-end"], ["ascii-end"])
        assert found(store, "同步") == (["other"], ["other"])  # still going: the pending rows
        assert found(store, "时超") == ([], [])
        assert found(store, "R}") == (["ascii-end"], ["ascii-end"])  # not indexable: the walk


COUNT_RUN_MATCHES = "SELECT COUNT(*) FROM run_trigrams WHERE MATCH (words) AGAINST (%s IN BOOLEAN MODE)"


@pytest.mark.mysql
@pytest.mark.parametrize("earlier", ["step 2 words", "words already marked"])
def test_migration_step_3_indexes_earlier_words_again_with_the_end_mark(
    mariadb_audit: AuditTarget, monkeypatch: pytest.MonkeyPatch, earlier: str
) -> None:
    """A database indexed by step 2 (no end mark) cannot answer a term ending a query from the
    index; opening it with this version rewrites every finished run's query words, batch by batch.
    Words that were already right (runs finished by this version) survive the rewrite."""
    target = mariadb_audit
    monkeypatch.setattr(mysql_text_search, "_MARKED_BATCH_RUNS", 2)  # three batches, keyset-bounded
    with target.open() as store:
        for n in range(5):
            record_run(store, f"run-{n}", f"第{n}次支付回调超时", f"服务-{n}", finish=True)
    assert isinstance(target.location, MysqlLocation)
    tail = "+" + "超时".encode().hex().upper() + "*"
    with root_connection(target.location.database) as conn, conn.cursor() as cursor:
        if earlier == "step 2 words":  # the same trigrams without the end mark's (ending "01")
            cursor.execute("SELECT run_id, words FROM run_trigrams")
            for run_id, words in cursor.fetchall():
                kept = " ".join(word for word in words.split() if not word.endswith("01"))
                cursor.execute("UPDATE run_trigrams SET words = %s WHERE run_id = %s", (kept, run_id))
        cursor.execute("UPDATE audit_schema_version SET version = 2")
        cursor.execute(COUNT_RUN_MATCHES, (tail,))
        assert cursor.fetchone() == ((0,) if earlier == "step 2 words" else (5,))
    with target.open() as store:
        assert store.query("SELECT version FROM audit_schema_version") == [{"version": 3}]
        for term in ("超时", "支付回调"):
            runs = AuditBrowser(store).runs(text=term, limit=10).rows
            assert sorted(row["run_id"] for row in runs) == [f"run-{n}" for n in range(5)], term
    with root_connection(target.location.database) as conn, conn.cursor() as cursor:
        cursor.execute(COUNT_RUN_MATCHES, (tail,))
        assert cursor.fetchone() == (5,)


@pytest.mark.mysql
def test_the_pending_runs_every_index_search_reads_are_found_by_an_index(mariadb_audit: AuditTarget) -> None:
    """Without it each index-plan search scanned every run: 1.3 s at 357,000 runs."""
    assert isinstance(mariadb_audit.location, MysqlLocation)
    mariadb_audit.open().close()
    with root_connection(mariadb_audit.location.database) as conn, conn.cursor() as cursor:
        cursor.execute(
            "SELECT COLUMN_NAME FROM information_schema.STATISTICS WHERE TABLE_SCHEMA = DATABASE()"
            " AND TABLE_NAME = 'runs' AND INDEX_NAME = 'idx_runs_fts_pending'"
        )
        assert cursor.fetchall() == (("fts_pending",),)
