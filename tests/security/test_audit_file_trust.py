"""Hole 6: a pre-existing audit file, and every file we write, is checked rather than trusted.

Planted triggers and views, unknown tables and indexes, a symlinked path (or symlinked WAL/SHM files),
a file owned by another user: refused with a clear message and exit 3, before anything in the file can
run. Our own files are owner-only: folders 0700; the audit, its WAL/SHM, `diagnose.log` and exports
0600; a too-open mode on our own file is tightened. The SQLite store's checks at open are what is
under test, so these tests build the store directly, not through audit.factory.
"""

from __future__ import annotations

import os
import sqlite3
import stat
from pathlib import Path

import pytest

from audit import AuditStoreError, SqliteAuditStore
from tests.support.resilience import run_cli, run_cli_process


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


@pytest.fixture
def audit_db(tmp_path: Path) -> Path:
    path = tmp_path / "audit.db"
    SqliteAuditStore(path).close()
    return path


def plant(path: Path, *statements: str) -> None:
    conn = sqlite3.connect(path)
    try:
        for statement in statements:
            conn.execute(statement)
        conn.commit()
    finally:
        conn.close()


PLANTED = {
    "a trigger copying projections": (
        "CREATE TABLE loot (v TEXT)",
        "CREATE TRIGGER steal AFTER UPDATE ON invocations BEGIN "
        "INSERT INTO loot VALUES (new.projection_json); END",
    ),
    "a trigger that never ends": (
        "CREATE TRIGGER hang AFTER INSERT ON runs BEGIN "
        "SELECT count(*) FROM (WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) "
        "SELECT x FROM c); END",
    ),
    "one of our trigger names with another body": (
        "DROP TRIGGER runs_ad",
        "CREATE TABLE loot (v TEXT)",
        "CREATE TRIGGER runs_ad AFTER DELETE ON runs BEGIN INSERT INTO loot VALUES (old.query); END",
    ),
    # Schema v5 dropped the insert triggers (text is indexed when a run finishes): one planted back,
    # even with the body an older version shipped, is not part of a current file.
    "an insert trigger of an older schema": (
        "CREATE TRIGGER invocations_ai AFTER INSERT ON invocations BEGIN INSERT INTO invocations_fts"
        " (rowid, input_json, projection_json) VALUES (new.rowid, new.input_json, new.projection_json); END",
    ),
    "a view": ("CREATE VIEW everything AS SELECT * FROM invocations",),
    "an unknown index": ("CREATE INDEX idx_attacker ON runs (query)",),
}


@pytest.mark.parametrize("planted", sorted(PLANTED))
def test_schema_objects_we_did_not_create_are_refused_before_anything_runs(
    audit_db: Path, planted: str
) -> None:
    plant(audit_db, *PLANTED[planted])
    before = audit_db.read_bytes()
    with pytest.raises(AuditStoreError, match="did not create"):
        SqliteAuditStore(audit_db)
    assert audit_db.read_bytes() == before  # nothing was written, so no planted trigger fired


def test_the_cli_refuses_such_a_file_with_exit_3_and_no_hang(audit_db: Path, tmp_path: Path) -> None:
    plant(audit_db, *PLANTED["a trigger that never ends"])
    run = run_cli_process(
        "run", "--scenario", "evidence-backed-diagnosis", "--audit-db", audit_db, timeout_s=60
    )
    assert run.code == 3
    assert run.err.startswith("diagnose: audit unavailable:")
    assert "did not create" in run.err
    assert "Traceback" not in run.err


def test_statistics_from_analyze_are_not_a_reason_to_refuse(audit_db: Path) -> None:
    plant(audit_db, "ANALYZE")
    with sqlite3.connect(audit_db) as conn:
        assert conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'sqlite_stat1'").fetchone()
    SqliteAuditStore(audit_db).close()


def test_a_file_of_another_application_is_not_ours_to_write(tmp_path: Path) -> None:
    other = tmp_path / "other.db"
    plant(other, "CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT)")
    with pytest.raises(AuditStoreError, match="did not create"):
        SqliteAuditStore(other)


def test_a_symlinked_audit_path_is_refused_and_its_target_untouched(tmp_path: Path) -> None:
    target = tmp_path / "precious.txt"
    target.write_text("do not overwrite")
    link = tmp_path / "audit.db"
    link.symlink_to(target)
    with pytest.raises(AuditStoreError, match="symbolic link"):
        SqliteAuditStore(link)
    assert target.read_text() == "do not overwrite"


def test_symlinked_wal_or_shm_files_are_refused(audit_db: Path, tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.write_text("x")
    for suffix in ("-wal", "-shm"):
        side = Path(f"{audit_db}{suffix}")
        if side.exists():
            side.unlink()
        side.symlink_to(target)
        with pytest.raises(AuditStoreError, match="symbolic link"):
            SqliteAuditStore(audit_db)
        side.unlink()
    assert target.read_text() == "x"


def test_a_file_owned_by_another_user_is_refused(audit_db: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("only root can give a file to another user")
    os.chown(audit_db, 12345, 12345)
    with pytest.raises(AuditStoreError, match="owned by another user"):
        SqliteAuditStore(audit_db)


def test_a_too_open_audit_file_and_its_wal_are_tightened(audit_db: Path) -> None:
    os.chmod(audit_db, 0o644)
    wal = Path(f"{audit_db}-wal")
    wal.write_bytes(b"")
    os.chmod(wal, 0o666)  # noqa: S103 - the loose mode the program must tighten
    with SqliteAuditStore(audit_db) as store:
        store.recover()
        assert mode(audit_db) == 0o600
        assert mode(wal) == 0o600  # SQLite removes the WAL when the last connection closes


def test_state_folder_log_and_exports_are_owner_only(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("DIAGNOSE_AUDIT__PATH", raising=False)
    old_umask = os.umask(0o022)
    try:
        run = run_cli(capsys, "run", "--scenario", "evidence-backed-diagnosis", "--json")
        assert run.code == 0
        state = tmp_path / "state" / "diagnosis-console"
        assert mode(state) == 0o700
        assert mode(state / "diagnose.log") == 0o600
        assert mode(state / "audit.db") == 0o600
        for side in ("audit.db-wal", "audit.db-shm"):
            if (state / side).exists():
                assert mode(state / side) == 0o600
        export = tmp_path / "export.jsonl"
        assert run_cli(capsys, "audit", "export", "--output", export).code == 0
        assert mode(export) == 0o600
    finally:
        os.umask(old_umask)


def test_an_existing_too_open_log_is_tightened(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    state = tmp_path / "state" / "diagnosis-console"
    state.mkdir(parents=True, mode=0o755)
    os.chmod(state, 0o755)  # noqa: S103 - the loose mode the program must tighten
    (state / "diagnose.log").write_text("old line\n")
    os.chmod(state / "diagnose.log", 0o644)
    run_cli(capsys, "scenarios")
    assert mode(state) == 0o700
    assert mode(state / "diagnose.log") == 0o600


def test_console_exports_are_owner_only_and_never_through_a_link(tmp_path: Path) -> None:
    from console.export import RunRecord, write_run

    record = RunRecord(query="q", previous_turn=None, model="m", result={"run_id": "run-1", "draft": None})
    old_umask = os.umask(0o022)
    try:
        markdown, json_file = write_run(record, tmp_path, "2026-11-30T02:10:00Z")
    finally:
        os.umask(old_umask)
    assert mode(markdown) == 0o600
    assert mode(json_file) == 0o600
    other = tmp_path / "other"
    other.mkdir()
    (other / "target").write_text("keep")
    (other / "diagnosis-run-2.md").symlink_to(other / "target")
    with pytest.raises(FileExistsError):
        write_run(RunRecord("q", None, "m", {"run_id": "run-2"}), other, "now")
    assert (other / "target").read_text() == "keep"
