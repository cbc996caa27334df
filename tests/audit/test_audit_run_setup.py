"""Audit schema v4: a run records its model label and limits, and a rejected run keeps its query.
(docs/contracts.md, "Audit")

The migration tests build the SQLite store directly, not through audit.factory: the store's own
migration is under test.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest
import sqlite_utils

from audit.common import RUN_SETUP_COLUMNS
from audit.sink import AuditSink
from audit.sqlite import store as store_module
from audit.sqlite.store import SqliteAuditStore
from console.commands.main import main
from tests.support import harness
from tests.support.audit_events import Events
from tests.support.audit_reader import AuditReader
from tests.support.audit_rows import run_row
from tools.redaction import Redactor


def setup_of(run: dict[str, Any]) -> tuple[Any, ...]:
    """The model and limits a run row records, in the order of `RUN_SETUP_COLUMNS`."""
    return tuple(run[column] for column in RUN_SETUP_COLUMNS)


def make_old_file(path: Path, version: int = 3) -> None:
    """A file exactly as an older release left it: migrations 1..version and one finished run."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.touch(mode=0o600)
    db = sqlite_utils.Database(sqlite3.connect(path))
    db.execute("PRAGMA journal_mode=WAL")
    for step, migration in enumerate(store_module.MIGRATIONS[:version], start=1):
        migration(db)
        db.execute(f"PRAGMA user_version = {step}")
    db.execute(
        "INSERT INTO runs (run_id, session_id, query, outcome, stop_reason, started_at, finished_at)"
        " VALUES ('old', 'sess', 'gateway 504', 'DRAFT', 'COMPLETED', '2026-01-01T00:00:00.000000Z',"
        " '2026-01-01T00:00:01.000000Z')"
    )
    db.conn.commit()
    db.close()


@pytest.mark.parametrize("version", [2, 3])
def test_an_older_file_migrates_in_place_and_reopening_changes_nothing(tmp_path: Path, version: int) -> None:
    path = tmp_path / "audit.db"
    make_old_file(path, version)
    with SqliteAuditStore(path) as store:
        assert store.schema_version == len(store_module.MIGRATIONS)
        old = AuditReader(store).run("old")
        assert old is not None
        assert old["query"] == "gateway 504"
        # Nobody knows what an old run used: NULL, not a guess.
        assert setup_of(old) == (None,) * len(RUN_SETUP_COLUMNS)
    with SqliteAuditStore(path) as again:
        assert again.schema_version == len(store_module.MIGRATIONS)
        assert [r["run_id"] for r in AuditReader(again).runs()] == ["old"]


def test_the_v4_step_is_idempotent_on_a_half_migrated_file(tmp_path: Path) -> None:
    path = tmp_path / "audit.db"
    make_old_file(path)
    with sqlite3.connect(path) as conn:  # another version added one column, then stopped
        conn.execute("ALTER TABLE runs ADD COLUMN model TEXT")
    db = sqlite_utils.Database(sqlite3.connect(path))
    store_module.MIGRATIONS[3](db)
    store_module.MIGRATIONS[3](db)  # and once more: nothing left to add, nothing fails
    columns = [row[1] for row in db.execute("PRAGMA table_info(runs)").fetchall()]
    db.close()
    assert [c for c in columns if c in RUN_SETUP_COLUMNS] == list(RUN_SETUP_COLUMNS)


def test_a_started_run_records_its_model_and_limits(audit_store: SqliteAuditStore, tmp_path: Path) -> None:
    ev = Events()
    sink = AuditSink(audit_store)
    sink(ev.run_started())
    sink(ev("run_finished", outcome="CANCELLED", stop_reason="CANCELLED", result={}))
    runs = AuditReader(tmp_path / "audit.db").runs()
    assert [setup_of(run) for run in runs] == [("scripted:demo", 6, 20000, 60.0, 1000, 2, 2)]


def test_a_headless_run_records_the_label_and_limits_it_ran_with(tmp_path: Path) -> None:
    path = tmp_path / "audit.db"
    assert main(["run", "--scenario", "model-call-budget-exhausted", "--audit-db", str(path)]) == 11
    (run,) = AuditReader(path).runs()
    assert run["model"] == "scripted: model-call-budget-exhausted"
    assert run["max_model_calls"] == 3  # the scenario's own settings, not the defaults


@pytest.mark.parametrize(
    ("query", "stop_reason", "kept"),
    [
        ("   ", "QUERY_BLANK", "   "),
        ("x" * 5000, "QUERY_TOO_LARGE", "x" * 4096 + "…"),
        ("登录失败 password=hunter2-secret", None, None),
    ],
)
def test_a_rejected_run_keeps_its_redacted_bounded_query(
    tmp_path: Path, query: str, stop_reason: str | None, kept: str | None
) -> None:
    path = tmp_path / "audit.db"
    args = ["run", "--scenario", "evidence-backed-diagnosis", "--audit-db", str(path), "--query", query]
    if stop_reason is None:  # a query that is valid but too large together with the rest of the input
        config = tmp_path / "diagnose.toml"
        config.write_text("[budget]\nmax_input_bytes = 16\n", encoding="utf-8")
        args += ["--config", str(config)]
    assert main(args) == 2
    (run,) = AuditReader(path).runs()
    stored = run["query"]
    assert run["outcome"] == "REJECTED"
    assert run["stop_reason"] == (stop_reason or "INPUT_TOO_LARGE")
    assert run["model"] == "scripted: evidence-backed-diagnosis"
    assert run["max_model_calls"] is not None
    if kept is not None:
        assert stored == kept
    else:
        assert stored.startswith("登录失败")
        assert "hunter2-secret" not in stored


async def test_a_secret_across_the_cut_of_a_rejected_query_is_redacted_whole() -> None:
    secret = "Zq7-prod-db-pass-9931"
    captured: list[Any] = []
    h = harness({"name": "cut", "query": "q", "rounds": [{"text": "{}"}]}, sinks=[captured.append])
    h.use_case.redactor = Redactor([secret])
    limit = h.settings.budget.max_query_bytes
    query = "x" * (limit - 5) + " " + secret  # the cut falls inside the secret
    result = await h.run(query)
    assert result.stop_reason == "QUERY_TOO_LARGE"
    (finished,) = [e for e in captured if e.type == "run_finished"]
    kept = finished.rejected_input["query"]
    assert kept.startswith("x" * 100)
    assert "Zq7" not in kept


def test_a_rejected_query_that_is_not_unicode_is_kept_readable(
    audit_store: SqliteAuditStore, tmp_path: Path
) -> None:
    from agent.use_case import bounded_query

    ev = Events()
    sink = AuditSink(audit_store)
    finished = ev("run_finished", outcome="REJECTED", stop_reason="QUERY_BLANK", result={})
    finished["rejected_input"] = {
        "query": bounded_query("bad \udcff text", 64),
        "model": "m",
        "limits": {"max_model_calls": 1, "max_total_tokens": 2, "deadline_s": 3.0, "max_run_bytes": 4},
        "protocol": {"max_consecutive_no_gain": 5, "max_protocol_violations": 6},
    }
    sink(finished)
    runs = AuditReader(tmp_path / "audit.db").runs()
    assert [(run["query"], *setup_of(run)) for run in runs] == [("bad ? text", "m", 1, 2, 3.0, 4, 5, 6)]


def test_audit_show_names_what_a_rejected_run_was_given(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "audit.db"
    assert main(["run", "--scenario", "oversized-query-rejected", "--audit-db", str(path), "--json"]) == 2
    run_id = json.loads(capsys.readouterr().out)["run_id"]
    assert main(["audit", "show", run_id, "--audit-db", str(path)]) == 0
    out = capsys.readouterr().out
    assert "\nquery     请诊断：payment-service" in out
    assert "…\n" in out  # cut to the 64-byte limit
    assert "\nmodel     scripted: oversized-query-rejected\n" in out
    assert "\nlimits    8 model calls, 64000 tokens, 300 s" in out
    assert "REJECTED / QUERY_TOO_LARGE" in out


def test_large_limits_are_shown_in_full() -> None:
    from console.run_setup import run_setup_text

    run = run_row(model="m", max_model_calls=8, max_total_tokens=1_000_000, deadline_s=2.5)
    run |= {"max_run_bytes": 1_048_576, "max_consecutive_no_gain": 3, "max_protocol_violations": 3}
    model, limits = run_setup_text(run)
    assert model == "m"
    assert limits.startswith("8 model calls, 1000000 tokens, 2.5 s, 1048576 run bytes"), limits
