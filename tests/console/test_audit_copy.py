"""`diagnose audit copy --from --to`: a machine's file into another audit (the team's MariaDB
database), idempotent and resumable; and every `diagnose audit` command answering alike on both
stores (docs/contracts.md, "CLI", "Audit")."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from audit.factory import open_audit_store
from audit.location import SqliteLocation
from audit.sink import AuditSink
from console.commands.audit import add_audit_parser, run_audit_command
from tests.support.audit_backends import AuditTarget, open_sqlite_audit
from tests.support.audit_events import LOGS_INPUT, Events
from tests.support.audit_reader import AuditReader
from tests.support.audit_writer import record_run


def parser() -> argparse.ArgumentParser:
    root = argparse.ArgumentParser(prog="diagnose")
    add_audit_parser(root.add_subparsers(dest="command"))
    return root


def audit(*argv: str) -> int:
    return run_audit_command(parser().parse_args(["audit", *argv]))


@pytest.fixture
def source(tmp_path: Path) -> Path:
    """A machine's audit: five finished runs and one still going."""
    path = tmp_path / "laptop.db"
    with open_audit_store(SqliteLocation(path)) as store:
        sink = AuditSink(store)
        for n in range(5):
            record_run(sink, f"run-{n}")
        going = Events("run-going")
        sink(going.run_started("still going"))
        sink(going.tool_started("call-1", "query_logs", LOGS_INPUT))
    return path


def test_copy_is_idempotent_and_resumes_with_runs_that_finished_since(
    source: Path, audit_target: AuditTarget, capsys: pytest.CaptureFixture[str]
) -> None:
    assert audit("copy", "--from", str(source), "--to", audit_target.url) == 0
    captured = capsys.readouterr()
    assert "copied 5 runs (0 already there, 1 still running)" in captured.out
    assert "[6/6] runs" in captured.err  # progress, one plain line at a time off a terminal

    assert audit("copy", "--from", f"sqlite:///{source}", "--to", audit_target.url) == 0
    assert "copied 0 runs (5 already there, 1 still running)" in capsys.readouterr().out

    # The run that was going finishes; the next copy takes it.
    with open_audit_store(SqliteLocation(source)) as store:
        going = Events("run-going")
        going.seq = 2
        AuditSink(store)(going.run_finished("DRAFT", "COMPLETED"))
    assert audit("copy", "--from", str(source), "--to", audit_target.url) == 0
    assert "copied 1 run (5 already there, 0 still running)" in capsys.readouterr().out

    with audit_target.open() as copied_store, open_audit_store(SqliteLocation(source)) as original_store:
        copied, original = AuditReader(copied_store), AuditReader(original_store)
        for run_id in [f"run-{n}" for n in range(5)] + ["run-going"]:
            assert copied.run(run_id) == original.run(run_id)
            assert copied.invocations(run_id) == original.invocations(run_id)
            assert copied.model_rounds(run_id) == original.model_rounds(run_id)
            strip = [{k: v for k, v in e.items() if k != "id"} for e in original.protocol_events(run_id)]
            assert [
                {k: v for k, v in e.items() if k != "id"} for e in copied.protocol_events(run_id)
            ] == strip


def test_every_audit_command_answers_alike_on_both_stores(
    source: Path, audit_target: AuditTarget, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert audit("copy", "--from", str(source), "--to", audit_target.url) == 0
    capsys.readouterr()
    copied_config = tmp_path / "team.toml"
    copied_config.write_text(f'[audit]\nurl = "{audit_target.url}"\n', encoding="utf-8")
    finished_only = tmp_path / "finished.db"  # the file, less the run the copy left behind
    assert audit("copy", "--from", str(source), "--to", str(finished_only)) == 0
    capsys.readouterr()

    commands = [
        ["runs", "--json", "--limit", "2"],
        ["runs", "--json", "--search", "连接池"],
        ["invocations", "--json", "--limit", "3"],
        ["invocations", "--json", "--status", "found", "--search", "HIKARIPOOL"],
        ["show", "run-3", "--json"],
        ["show", "run-3"],
        ["export", "--per", "run"],
    ]
    for command in commands:
        assert audit(*command, "--audit-db", str(finished_only)) == 0
        on_file = capsys.readouterr().out
        assert audit(*command, "--config", str(copied_config)) == 0
        assert capsys.readouterr().out == on_file, command
    assert json.loads(on_file.splitlines()[0])["run"]["run_id"] == "run-4"


def test_copy_refuses_a_missing_source_and_the_evidence_account(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nope.db"
    assert audit("copy", "--from", str(missing), "--to", str(tmp_path / "to.db")) == 3
    assert f"no audit database at {missing}" in capsys.readouterr().err
    assert not missing.exists()

    config = tmp_path / "diagnose.toml"
    config.write_text('[mysql]\ndsn = "mysql://reader@127.0.0.1:1/shop"\n', encoding="utf-8")
    code = audit(
        "copy",
        "--from",
        str(tmp_path / "a.db"),
        "--to",
        "mysql://reader@127.0.0.1:1/team",
        "--config",
        str(config),
    )
    assert code == 3
    assert "evidence account" in capsys.readouterr().err


def test_copied_runs_enter_the_target_files_text_index(source: Path, tmp_path: Path) -> None:
    """A file has no insert triggers on its text index: copied runs must be indexed by the copy itself,
    or a search that asks the index would never find them."""
    target = tmp_path / "copy.db"
    assert audit("copy", "--from", str(source), "--to", str(target)) == 0
    with open_sqlite_audit(target) as store:
        assert store.has_fts
        pending = store.query("SELECT run_id FROM runs WHERE fts_pending IS NOT NULL")
        assert pending == []
        hits = store.query(
            "SELECT DISTINCT i.run_id FROM invocations i"
            " WHERE i.rowid IN (SELECT rowid FROM invocations_fts WHERE invocations_fts MATCH ?)"
            " ORDER BY i.run_id",
            ('"连接池"',),
        )
        assert [row["run_id"] for row in hits] == [f"run-{n}" for n in range(5)]
        queries = store.query("SELECT rowid FROM runs_fts WHERE runs_fts MATCH ?", ('"支付回调超时"',))
        assert len(queries) == 5
        with store.write() as db:  # FTS5 raises if the index and the table disagree
            db.conn.execute("INSERT INTO invocations_fts (invocations_fts) VALUES ('integrity-check')", ())
