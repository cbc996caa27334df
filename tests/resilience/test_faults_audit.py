"""The audit file unusable or held by someone else.

A run must not go ahead without its audit: an unusable file is refused before any model call with exit 3
and a message naming the file. A write lock held by another connection (a `sqlite3` shell, a prune, a
backup) delays the run's writes (SQLite's busy timeout of 2 s per attempt, retried for up to 60 s) and
the run completes; a lock held past that retry deadline must still end in a clear message, never a
traceback. Past-the-deadline variants scale both down tenfold; the `long` variant uses the shipped values.
"""

from __future__ import annotations

import hashlib
import sqlite3
import subprocess
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

import audit.common
import audit.sqlite.store
from tests.support.audit_backends import open_sqlite_audit
from tests.support.audit_reader import AuditReader
from tests.support.resilience import (
    CliRun,
    assert_audit_consistent,
    no_conclusion_draft,
    run_cli,
    run_cli_process,
    scenario,
    tool_call,
    write_scenario,
)


def _slow_scenario(tmp_path: Path) -> Path:
    """Two tool rounds, the second model round 1.5 s long: time for another process to grab the lock."""
    rounds: list[dict[str, Any]] = [
        {"tool_calls": [tool_call("call-1", "lookup_knowledge", {"query": "连接池 耗尽"})]},
        {
            "tool_calls": [
                tool_call("call-2", "lookup_knowledge", {"query": "回滚 步骤"}, evaluates="call-1")
            ],
            "delay_ms": 1500,
        },
        {"text": no_conclusion_draft()},
    ]
    return write_scenario(tmp_path, scenario(rounds))


@contextmanager
def _immutable(path: Path) -> Iterator[None]:
    """Read-only even for root (the tests run as root, who ignores file modes)."""
    if subprocess.run(["chattr", "+i", str(path)], capture_output=True, check=False).returncode != 0:
        pytest.skip("chattr +i is not supported on this file system")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


class LockHolder(threading.Thread):
    """Another connection's write transaction (BEGIN IMMEDIATE) on the audit, held for `hold_s`.

    With `after_run_row`, it waits until the run under test has written its runs row, so the lock lands
    mid-run rather than at open.
    """

    def __init__(self, db: Path, hold_s: float, after_run_row: bool = False) -> None:
        super().__init__(daemon=True)
        self.db, self.hold_s, self.after_run_row = db, hold_s, after_run_row
        self.locked = threading.Event()
        self.released_at: str | None = None  # audit timestamp format, so it orders against the run's

    def run(self) -> None:
        if self.after_run_row:
            while not self._run_row_exists():
                time.sleep(0.02)
            time.sleep(0.3)
        conn = sqlite3.connect(self.db, timeout=30, isolation_level=None)
        try:
            conn.execute("BEGIN IMMEDIATE")
            self.locked.set()
            time.sleep(self.hold_s)
            conn.execute("ROLLBACK")
            self.released_at = audit.common.audit_timestamp(datetime.now(UTC))
        finally:
            conn.close()

    def _run_row_exists(self) -> bool:
        try:
            conn = sqlite3.connect(self.db, timeout=0.1)
            try:
                return bool(conn.execute("SELECT count(*) FROM runs").fetchone()[0])
            finally:
                conn.close()
        except sqlite3.Error:
            return False


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _existing_audit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    db = tmp_path / "audit.db"
    assert (
        run_cli(capsys, "run", "--scenario", "missing-context-zero-tools", "--json", "--audit-db", db).code
        == 0
    )
    return db


def test_a_read_only_audit_file_is_refused_before_the_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = _existing_audit(tmp_path, capsys)
    before = _digest(db)
    with _immutable(db):
        run = run_cli(capsys, "run", "--scenario", "evidence-backed-diagnosis", "--json", "--audit-db", db)
    assert (run.code, run.out) == (3, "")
    assert run.err.startswith("diagnose: audit unavailable:")
    assert "not writable" in run.err
    assert _digest(db) == before


def test_an_audit_folder_that_cannot_take_new_files_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "audit"
    folder.mkdir()
    with _immutable(folder):
        run = run_cli(
            capsys, "run", "--scenario", "evidence-backed-diagnosis", "--json", "--audit-db", folder / "a.db"
        )
    assert (run.code, run.out) == (3, "")
    assert "audit unavailable" in run.err
    assert str(folder / "a.db") in run.err


def test_an_audit_path_that_is_a_folder_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = run_cli(capsys, "run", "--scenario", "evidence-backed-diagnosis", "--json", "--audit-db", tmp_path)
    assert (run.code, run.out) == (3, "")
    assert "not a regular file" in run.err


def test_a_corrupt_audit_file_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = tmp_path / "audit.db"
    db.write_bytes(b"SQLite format 3\x00" + b"\xde\xad" * 4096)
    run = run_cli(capsys, "run", "--scenario", "evidence-backed-diagnosis", "--json", "--audit-db", db)
    assert (run.code, run.out) == (3, "")
    assert "audit unavailable" in run.err


@pytest.mark.parametrize("mid_run", [False, True], ids=["at-open", "mid-run"])
def test_a_lock_held_longer_than_the_busy_timeout_delays_the_run(
    mid_run: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = _existing_audit(tmp_path, capsys)
    holder = LockHolder(db, hold_s=2.5, after_run_row=mid_run)  # busy_timeout is 2 s
    holder.start()
    if not mid_run:
        assert holder.locked.wait(5)
    run = run_cli(capsys, "run", "--scenario", _slow_scenario(tmp_path), "--json", "--audit-db", db)
    holder.join()
    assert (run.code, run.result["outcome"]) == (0, "DRAFT")
    # The run waited for the lock rather than failing or skipping a write: it finished after the release.
    finished = (
        sqlite3.connect(db)
        .execute("SELECT finished_at FROM runs WHERE run_id = ?", (run.result["run_id"],))
        .fetchone()[0]
    )
    assert holder.released_at is not None
    assert finished > holder.released_at
    assert_audit_consistent(db)


def test_a_lock_held_past_the_retry_deadline_at_open_is_exit_3(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    db = _existing_audit(tmp_path, capsys)
    monkeypatch.setattr(audit.sqlite.store, "_BUSY_TIMEOUT_MS", 200)
    monkeypatch.setattr(audit.sqlite.store, "_BUSY_DEADLINE_S", 0.3)
    holder = LockHolder(db, hold_s=1.5)
    holder.start()
    assert holder.locked.wait(5)
    run = run_cli(capsys, "run", "--scenario", "evidence-backed-diagnosis", "--json", "--audit-db", db)
    holder.join()
    assert (run.code, run.out) == (3, "")
    assert run.err.startswith("diagnose: audit unavailable:")
    assert "locked" in run.err
    assert_audit_consistent(db)


# Scaled down 10x (busy timeout 200 ms, retry deadline 0.3 s) so the default variants stay short.
SHORT_RETRY = (
    "import audit.sqlite.store\n"
    "audit.sqlite.store._BUSY_TIMEOUT_MS = 200\n"
    "audit.sqlite.store._BUSY_DEADLINE_S = 0.3"
)


def _run_with_lock_mid_run(tmp_path: Path, hold_s: float, prelude: str) -> tuple[Path, CliRun]:
    db = tmp_path / "audit.db"
    holder = LockHolder(db, hold_s=hold_s, after_run_row=True)
    holder.start()
    run = run_cli_process(
        "run",
        "--scenario",
        _slow_scenario(tmp_path),
        "--json",
        "--audit-db",
        db,
        prelude=prelude,
        timeout_s=hold_s + 60,
    )
    holder.join()
    return db, run


def test_after_a_lock_past_the_retry_deadline_mid_run_the_audit_recovers(tmp_path: Path) -> None:
    """Whatever the CLI prints, the next open of the audit closes the run: nothing stays STARTED."""
    db, _ = _run_with_lock_mid_run(tmp_path, hold_s=4.0, prelude=SHORT_RETRY)
    with open_sqlite_audit(db) as store:
        (row,) = AuditReader(store).runs()
        assert row["finished_at"] is not None
        assert row["outcome"] is not None or row["interrupted"] == 1
        assert store.query("SELECT * FROM invocations WHERE status = 'STARTED'") == []


def _ended_by_the_audit(run: CliRun) -> None:
    """A typed end (FAILED / AGENT_ERROR, cause AUDIT_WRITE_FAILED, exit 1), its result printed, and
    one line saying the audit stopped it; no traceback."""
    assert "Traceback" not in run.err, run.err
    assert run.code == 1
    assert (run.result["outcome"], run.result["stop_reason"]) == ("FAILED", "AGENT_ERROR")
    assert run.result["failure"]["cause"] == "AUDIT_WRITE_FAILED"
    assert run.result["draft"] is None
    (line,) = [line for line in run.err.splitlines() if "audit" in line]
    assert line.startswith("diagnose: the audit could not be written, so the run was stopped:")


def test_a_lock_held_past_the_retry_deadline_mid_run_ends_with_a_message(tmp_path: Path) -> None:
    _db, run = _run_with_lock_mid_run(tmp_path, hold_s=4.0, prelude=SHORT_RETRY)
    _ended_by_the_audit(run)


@pytest.mark.long
def test_a_lock_held_past_the_real_retry_deadline_mid_run_ends_with_a_message(tmp_path: Path) -> None:
    """The same with the shipped 60 s retry deadline: a `sqlite3` shell left in BEGIN IMMEDIATE."""
    _db, run = _run_with_lock_mid_run(tmp_path, hold_s=70.0, prelude="")
    _ended_by_the_audit(run)
