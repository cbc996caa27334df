"""Issue 22: every path the tool writes follows one rule, and never destroys what the tool did not create.

A new file is created exclusively (0600, no link followed); an existing file is refused unless
`--force`, and even then only a regular file of ours that is not the audit in use, replaced by a new
file (the old inode is never truncated); only the last missing folder of a path is created; an
existing file that is not an audit is refused before any chmod; prune shows what it deletes and asks.

Every file standing in for something precious (an account file, another program's data) is a copy in
the test's temporary folder. CLI cases run `diagnose` as a process, as an operator does.
"""

from __future__ import annotations

import json
import os
import pty
import re
import stat
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agent.vocabulary import USAGE_ERROR
from audit import AuditSink
from audit.factory import open_audit_store
from audit.files import MissingFolderError, UnsafeFileError, check_last_folder, make_last_folder
from audit.location import SqliteLocation
from audit.output_files import OutputExistsError, OutputFile, write_output
from tests.support.audit_backends import open_sqlite_audit
from tests.support.audit_events import Events
from tests.support.audit_reader import AuditReader
from tests.support.resilience import cli_env, run_cli_process

SCENARIO = "evidence-backed-diagnosis"
ACCOUNTS = "root:x:0:0:root:/root:/bin/bash\noperator:x:1000:1000::/home/operator:/bin/sh\n"


def diagnose(
    tmp_path: Path, *args: str | Path, stdin: int | None = subprocess.DEVNULL
) -> tuple[int, str, str]:
    run = run_cli_process(*args, env=cli_env(tmp_path), cwd=tmp_path, stdin=stdin)
    assert "Traceback" not in run.err, run.err
    return run.code, run.out, run.err


def mode(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def fingerprint(path: Path) -> tuple[bytes, int, int, int]:
    """Content, mode, inode and modification time: what "left as it was" means."""
    info = path.lstat()
    return path.read_bytes(), stat.S_IMODE(info.st_mode), info.st_ino, info.st_mtime_ns


def accounts_copy(folder: Path, name: str = "passwd") -> Path:
    """A stand-in for the system account file (0644, like the real one)."""
    path = folder / name
    path.write_text(ACCOUNTS)
    os.chmod(path, 0o644)
    return path


@pytest.fixture
def audit_db(tmp_path: Path) -> Path:
    """An audit holding one finished run."""
    path = tmp_path / "audit.db"
    with open_audit_store(SqliteLocation(path)) as store:
        events = Events("run-1")
        sink = AuditSink(store)
        sink(events.run_started("订单服务 5xx 升高"))
        sink(events.run_finished("DRAFT", "COMPLETED"))
    return path


# --- the module every writer uses ----------------------------------------------------------------


def test_a_new_file_is_created_exclusively_owner_only(tmp_path: Path) -> None:
    old_umask = os.umask(0o022)
    try:
        write_output(tmp_path / "new.txt", "hello")
    finally:
        os.umask(old_umask)
    assert (tmp_path / "new.txt").read_text() == "hello"
    assert mode(tmp_path / "new.txt") == 0o600
    precious = accounts_copy(tmp_path)
    before = fingerprint(precious)
    with pytest.raises(OutputExistsError):
        write_output(precious, "overwritten")
    assert fingerprint(precious) == before


def test_force_writes_a_new_file_and_never_truncates_the_old_one(tmp_path: Path) -> None:
    """The old file's inode is left whole: a hard link to it (another name for the same data) keeps
    the old content. Truncating in place would empty both names."""
    old = accounts_copy(tmp_path, "report.md")
    other_name = tmp_path / "same-data.md"
    os.link(old, other_name)
    write_output(old, "new report", force=True)
    assert old.read_text() == "new report"
    assert mode(old) == 0o600
    assert other_name.read_text() == ACCOUNTS
    assert [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")] == []


def test_force_never_follows_or_replaces_a_link_nor_a_file_that_is_not_regular(tmp_path: Path) -> None:
    target = accounts_copy(tmp_path)
    link = tmp_path / "export.jsonl"
    link.symlink_to(target)
    before = fingerprint(target)
    for force in (False, True):
        with pytest.raises((OutputExistsError, UnsafeFileError)):
            write_output(link, "x", force=force)
    assert fingerprint(target) == before
    assert link.is_symlink()
    folder = tmp_path / "a-folder"
    folder.mkdir()
    with pytest.raises(UnsafeFileError, match="not a regular file"):
        write_output(folder, "x", force=True)


def test_force_never_replaces_the_audit_whatever_name_reaches_it(audit_db: Path, tmp_path: Path) -> None:
    """Compared by device and inode: a hard link to the audit is the audit too."""
    alias = tmp_path / "export.jsonl"
    os.link(audit_db, alias)
    before = fingerprint(audit_db)
    from audit.location import SqliteLocation, local_files

    for name in (audit_db, alias):
        with pytest.raises(UnsafeFileError, match="audit database"):
            write_output(name, "x", force=True, protected=local_files(SqliteLocation(audit_db)))
    assert fingerprint(audit_db) == before


def _write_half_then_fail(path: Path, force: bool) -> None:
    with OutputFile(path, force=force) as stream:
        stream.write("half of it")
        raise RuntimeError("the export failed midway")


def test_a_failed_write_leaves_no_partial_file_and_the_old_one_whole(tmp_path: Path) -> None:
    folder = tmp_path / "out"
    folder.mkdir()
    old = accounts_copy(folder, "report.json")
    for path, force in ((folder / "fresh.json", False), (old, True)):
        with pytest.raises(RuntimeError, match="the export failed midway"):  # the export's error, unchanged
            _write_half_then_fail(path, force)
    assert old.read_text() == ACCOUNTS
    assert sorted(p.name for p in folder.iterdir()) == ["report.json"]


def test_only_the_last_missing_folder_is_created(tmp_path: Path) -> None:
    assert make_last_folder(tmp_path / "reports") is True
    assert mode(tmp_path / "reports") == 0o700
    with pytest.raises(MissingFolderError, match=f"folder {tmp_path / 'typo'} does not exist"):
        make_last_folder(tmp_path / "typo" / "2026" / "eval")
    with pytest.raises(MissingFolderError):
        write_output(tmp_path / "typo" / "deeper" / "x.json", "x")
    assert not (tmp_path / "typo").exists()


# Each level of a path below the test's folder: a folder, a plain file, or nothing yet.
LEVELS = st.lists(st.sampled_from(["folder", "file", "missing"]), min_size=1, max_size=4)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(levels=LEVELS)
def test_the_folder_rule_names_what_is_in_the_way_and_creates_nothing_while_checking(
    tmp_path_factory: pytest.TempPathFactory, levels: list[str]
) -> None:
    """Whatever stands on the way to a folder, `check_last_folder` creates nothing; it admits a path
    whose only missing level is the last, else names the first file, or the highest missing folder."""
    root = tmp_path_factory.mktemp("levels")
    path = root
    for depth, kind in enumerate(levels):
        path = path / f"level-{depth}"
        if kind == "folder" and path.parent.is_dir():
            path.mkdir()
        elif kind == "file" and path.parent.is_dir():
            path.write_text("mine\n", encoding="utf-8")
    before = sorted(root.rglob("*"))
    chain = [root / "/".join(f"level-{d}" for d in range(depth + 1)) for depth in range(len(levels))]
    first_file = next((p for p in chain if p.is_file()), None)
    missing = [p for p in chain if not os.path.lexists(p)]
    if first_file is not None:
        with pytest.raises(UnsafeFileError, match=f"^{re.escape(str(first_file))} is a file, not a folder$"):
            check_last_folder(path)
    elif len(missing) > 1:
        with pytest.raises(MissingFolderError, match=f"^folder {re.escape(str(missing[0]))} does not exist"):
            check_last_folder(path)
    else:
        assert check_last_folder(path) is bool(missing)
    assert sorted(root.rglob("*")) == before


# --- diagnose audit export --output ---------------------------------------------------------------


def test_export_output_refuses_an_existing_file_and_the_audit_itself(
    audit_db: Path, tmp_path: Path, in_folder: Callable[..., tuple[int, str, str]]
) -> None:
    precious = accounts_copy(tmp_path)
    before = fingerprint(precious)
    code, out, err = diagnose(tmp_path, "audit", "export", "--audit-db", audit_db, "--output", precious)
    assert code == USAGE_ERROR
    assert "already exists; --force replaces it" in err
    assert fingerprint(precious) == before

    audit_before = fingerprint(audit_db)
    code, _, err = diagnose(
        tmp_path, "audit", "export", "--audit-db", audit_db, "--output", audit_db, "--force"
    )
    assert code == 3
    assert "is the audit database in use; it is never replaced" in err
    code, _, err = in_folder("audit", "export", "--audit-db", audit_db, "--output", audit_db)
    assert code == USAGE_ERROR
    assert "already exists" in err
    assert fingerprint(audit_db)[0] == audit_before[0]  # not one byte of the audit lost
    code, out, _ = in_folder("audit", "runs", "--audit-db", audit_db)
    assert code == 0
    assert "run-1" in out


def test_export_output_with_force_replaces_a_file_of_ours_with_a_new_private_one(
    audit_db: Path, tmp_path: Path, in_folder: Callable[..., tuple[int, str, str]]
) -> None:
    earlier = tmp_path / "export.jsonl"
    earlier.write_text("an earlier export\n")
    os.chmod(earlier, 0o644)
    code, _, err = in_folder(
        "audit", "export", "--audit-db", audit_db, "--per", "run", "--output", earlier, "--force"
    )
    assert code == 0, err
    assert [json.loads(line)["run"]["run_id"] for line in earlier.read_text().splitlines()] == ["run-1"]
    assert mode(earlier) == 0o600


def test_export_output_never_writes_through_a_link(
    audit_db: Path, tmp_path: Path, in_folder: Callable[..., tuple[int, str, str]]
) -> None:
    target = accounts_copy(tmp_path)
    link = tmp_path / "export.jsonl"
    link.symlink_to(target)
    before = fingerprint(target)
    assert in_folder("audit", "export", "--audit-db", audit_db, "--output", link)[0] == USAGE_ERROR
    code, _, err = in_folder("audit", "export", "--audit-db", audit_db, "--output", link, "--force")
    assert code == 3
    assert "symbolic link" in err
    assert fingerprint(target) == before
    assert link.is_symlink()


# --- diagnose run --events --------------------------------------------------------------------------


def test_events_never_overwrite_follow_a_link_or_come_out_world_readable(
    tmp_path: Path, in_folder: Callable[..., tuple[int, str, str]]
) -> None:
    audit = tmp_path / "a.db"
    run = ("run", "--scenario", SCENARIO, "--audit-db", audit)
    precious = accounts_copy(tmp_path)
    link = tmp_path / "linked.ndjson"
    link.symlink_to(precious)
    before = fingerprint(precious)
    code, out, err = diagnose(tmp_path, *run, "--events", precious)
    assert code == 3
    assert "already exists; --force replaces it" in err
    assert out == ""
    code, out, err = in_folder(*run, "--events", link)
    assert code == 3
    assert "already exists" in err
    code, _, err = in_folder(*run, "--events", link, "--force")
    assert code == 3
    assert "symbolic link" in err
    assert link.is_symlink()
    assert fingerprint(precious) == before

    fresh = tmp_path / "events.ndjson"
    code, _, _ = diagnose(tmp_path, *run, "--events", fresh)
    assert code == 0
    assert mode(fresh) == 0o600  # the process's umask is 022
    first = fresh.read_text()
    assert json.loads(first.splitlines()[0])["type"] == "run_started"
    code, _, _ = in_folder(*run, "--events", fresh, "--force")
    assert code == 0
    assert fresh.read_text() != first
    assert mode(fresh) == 0o600


def test_events_never_replace_the_audit_of_the_run(
    audit_db: Path, in_folder: Callable[..., tuple[int, str, str]]
) -> None:
    before = fingerprint(audit_db)[0]
    code, _, err = in_folder(
        "run", "--scenario", SCENARIO, "--audit-db", audit_db, "--events", audit_db, "--force"
    )
    assert code == 3
    assert "audit database" in err
    assert AuditReader(audit_db).run("run-1") is not None
    assert len(audit_db.read_bytes()) >= len(before)


# --- --audit-db on a file that is not an audit ----------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [["run", "--scenario", SCENARIO], ["audit", "runs"], ["audit", "prune", "--older-than", "1d", "--yes"]],
)
def test_a_file_that_is_not_an_audit_is_refused_without_being_touched(
    tmp_path: Path, command: list[str]
) -> None:
    precious = accounts_copy(tmp_path)
    before = fingerprint(precious)
    code, _, err = diagnose(tmp_path, *command, "--audit-db", precious)
    assert fingerprint(precious) == before  # mode 0644 kept: nothing was chmodded first
    assert code == 3
    assert "not a SQLite file" in err
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("passwd")) == ["passwd"]


def _locks_held_on(path: Path) -> list[str]:
    """This process's POSIX locks on `path` (Linux /proc/locks: `... PID MAJOR:MINOR:INODE ...`)."""
    inode, pid = path.stat().st_ino, str(os.getpid())
    return [
        line
        for line in Path("/proc/locks").read_text().splitlines()
        if pid in line.split() and line.split()[5].rsplit(":", 1)[1] == str(inode)
    ]


def test_checking_an_existing_audit_keeps_sqlites_locks(audit_db: Path) -> None:
    """The files are checked, then tightened, through descriptors held until the store closes: closing
    any descriptor of a file drops every POSIX lock the process holds on it, and without its shared
    lock on the -shm file another process may reset the WAL index under a live connection (runs
    were lost that way when 8 processes shared one file)."""
    os.chmod(audit_db, 0o644)  # too open: there is tightening to do after the schema check
    with open_sqlite_audit(audit_db) as store:
        store.recover()
        assert mode(audit_db) == 0o600
        assert _locks_held_on(Path(f"{audit_db}-shm")), "the connection lost its lock on the WAL index"


def test_a_new_audit_is_created_in_at_most_one_new_folder(
    tmp_path: Path, in_folder: Callable[..., tuple[int, str, str]]
) -> None:
    deep = tmp_path / "srv" / "diagnose" / "audit.db"
    code, _, err = diagnose(tmp_path, "run", "--scenario", SCENARIO, "--audit-db", deep)
    assert code == 3
    assert f"folder {tmp_path / 'srv'} does not exist" in err
    assert not (tmp_path / "srv").exists()
    code, _, err = in_folder("run", "--scenario", SCENARIO, "--audit-db", tmp_path / "audits" / "a.db")
    assert code == 0, err
    assert mode(tmp_path / "audits") == 0o700
    assert mode(tmp_path / "audits" / "a.db") == 0o600


# --- diagnose eval --out ----------------------------------------------------------------------------


def test_eval_keeps_a_previous_report_unless_forced(
    tmp_path: Path, in_folder: Callable[..., tuple[int, str, str]]
) -> None:
    out = tmp_path / "eval"
    eval_args = ("eval", "--case", "payment-timeout", "--out", out)
    code, _, err = in_folder(*eval_args)
    assert code == 0, err
    report = out / "report.json"
    assert mode(report) == 0o600
    assert mode(out / "report.md") == 0o600
    before = fingerprint(report)
    code, _, err = diagnose(tmp_path, *eval_args)
    assert code == 3
    assert "report.json already exists" in err
    assert "--force" in err
    assert fingerprint(report) == before
    code, _, err = in_folder(*eval_args, "--force")
    assert code == 0, err
    assert report.stat().st_ino != before[2]
    assert mode(report) == 0o600

    code, _, err = in_folder("eval", "--case", "payment-timeout", "--out", tmp_path / "a" / "b")
    assert code == 3
    assert f"folder {tmp_path / 'a'} does not exist" in err
    assert not (tmp_path / "a").exists()


# --- diagnose audit prune ---------------------------------------------------------------------------


def test_prune_durations_read_one_way_only(tmp_path: Path) -> None:
    from console.commands.audit import parse_age

    assert parse_age("90s").total_seconds() == 90
    assert parse_age("45min").total_seconds() == 45 * 60
    assert parse_age("12h").total_seconds() == 12 * 3600
    assert parse_age("30d").days == 30
    assert parse_age("2w").days == 14
    assert parse_age("6mo").days == 180
    assert parse_age("1y").days == 365
    code, _, err = diagnose(tmp_path, "audit", "prune", "--older-than", "1m", "--audit-db", tmp_path / "x.db")
    assert code == USAGE_ERROR
    assert "'1m' is ambiguous: write 1min for minutes or 1mo for months" in err


def test_prune_dry_run_counts_and_deletes_nothing(audit_db: Path, tmp_path: Path) -> None:
    code, out, err = diagnose(
        tmp_path, "audit", "prune", "--older-than", "0s", "--dry-run", "--audit-db", audit_db
    )
    assert code == 0, err
    assert out.startswith("would prune 1 run finished before ")
    assert "invocations" in out
    assert str(audit_db) in out
    assert AuditReader(audit_db).run("run-1") is not None


def test_prune_off_a_terminal_needs_yes(audit_db: Path, tmp_path: Path) -> None:
    code, out, err = diagnose(tmp_path, "audit", "prune", "--older-than", "0s", "--audit-db", audit_db)
    assert code == USAGE_ERROR
    assert out == ""
    assert "prune would delete 1 run " in err
    assert "pass --yes to confirm" in err
    assert AuditReader(audit_db).run("run-1") is not None
    code, out, _ = diagnose(tmp_path, "audit", "prune", "--older-than", "0s", "--yes", "--audit-db", audit_db)
    assert code == 0
    assert out.startswith("pruned 1 run ")


@pytest.mark.parametrize(("answer", "pruned"), [("n\n", False), ("\n", False), ("y\n", True)])
def test_prune_on_a_terminal_asks_first(audit_db: Path, tmp_path: Path, answer: str, pruned: bool) -> None:
    controller, terminal = pty.openpty()
    try:
        os.write(controller, answer.encode())
        code, out, err = diagnose(
            tmp_path, "audit", "prune", "--older-than", "0s", "--audit-db", audit_db, stdin=terminal
        )
    finally:
        os.close(terminal)
        os.close(controller)
    assert code == 0, err
    assert "delete 1 run finished before " in err
    assert err.rstrip().endswith("[y/N]")
    assert out.startswith("pruned 1 run " if pruned else "nothing pruned")
    assert (AuditReader(audit_db).run("run-1") is None) is pruned
