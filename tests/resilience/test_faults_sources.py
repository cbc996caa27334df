"""Evidence folders that are missing, are not folders, or hold junk.

Tests run as root, so `chmod 000` would not make anything unreadable; the unusable cases are a path that
does not exist and a path that is a file where a folder is expected. Both must answer a typed
ERROR / UNAVAILABLE for that one tool and let the run finish; junk inside a folder must be skipped.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.audit_reader import AuditReader
from tests.support.resilience import (
    WINDOW,
    assert_audit_consistent,
    one_call_then_draft,
    run_cli,
    run_cli_process,
    tool_call,
    write_config,
    write_scenario,
)

KNOWLEDGE_CALL = tool_call("call-1", "lookup_knowledge", {"query": "连接池 耗尽"})
LOGS_CALL = tool_call("call-1", "query_logs", {"service": "payment-service", **WINDOW, "limit": 20})


def _run(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    sections: dict[str, dict[str, object]],
    call: dict[str, object],
) -> dict[str, Any]:
    audit = tmp_path / "audit.db"
    run = run_cli(
        capsys,
        "run", "--scenario", write_scenario(tmp_path, one_call_then_draft(call)),
        "--config", write_config(tmp_path / "config.toml", sections), "--json", "--audit-db", audit,
    )  # fmt: skip
    result = run.result
    assert (run.code, result["outcome"], result["stop_reason"]) == (0, "DRAFT", "COMPLETED")
    assert_audit_consistent(audit, [result["run_id"]])
    (invocation,) = AuditReader(audit).invocations(result["run_id"])
    return invocation


def _file(tmp_path: Path) -> Path:
    path = tmp_path / "runbooks.md"
    path.write_text("# not a folder\n", encoding="utf-8")
    return path


@pytest.mark.parametrize(
    "make_path",
    [lambda tmp: tmp / "no-such-folder", _file, lambda tmp: Path("/proc/self/status/x")],
    ids=["missing", "a-file", "below-a-file"],
)
def test_an_unusable_runbook_folder_is_unavailable(
    make_path: Callable[[Path], Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = make_path(tmp_path)
    invocation = _run(capsys, tmp_path, {"knowledge": {"path": path}}, KNOWLEDGE_CALL)
    assert (invocation["status"], invocation["error_code"]) == ("ERROR", "UNAVAILABLE")


def test_junk_in_the_runbook_folder_is_skipped(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A dangling link, a folder and a FIFO named *.md, and binary bytes must not hide the good runbook."""
    folder = tmp_path / "runbooks"
    (folder / "dir.md").mkdir(parents=True)
    (folder / "dangling.md").symlink_to(tmp_path / "nowhere.md")
    os.mkfifo(folder / "pipe.md")  # reading it would block forever
    (folder / "binary.md").write_bytes(b"\xff\xfe\x00\x80 connection \x00 pool" * 100)
    (folder / "pool.md").write_text("# 连接池耗尽\n\n连接池 耗尽时先看锁等待。\n", encoding="utf-8")
    invocation = _run(capsys, tmp_path, {"knowledge": {"path": folder}}, KNOWLEDGE_CALL)
    assert invocation["status"] == "FOUND"
    assert "pool.md" in invocation["projection_json"]


@pytest.mark.parametrize(
    "make_path", [lambda tmp: tmp / "no-such.ndjson", lambda tmp: tmp], ids=["missing", "empty-folder"]
)
def test_an_unusable_log_path_is_typed(
    make_path: Callable[[Path], Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = make_path(tmp_path)
    invocation = _run(capsys, tmp_path, {"logs": {"source": "file", "path": path}}, LOGS_CALL)
    assert (invocation["status"], invocation["error_code"]) in {("ERROR", "UNAVAILABLE"), ("EMPTY", None)}
    if path.is_dir():
        assert invocation["status"] == "EMPTY"  # a folder with no log files has no matching lines
    else:
        assert invocation["error_code"] == "UNAVAILABLE"


def _write(name: str, data: bytes) -> Callable[[Path], Path]:
    def make(tmp: Path) -> Path:
        path = tmp / name
        path.write_bytes(data)
        return path

    return make


@pytest.mark.parametrize(
    ("make_path", "message"),
    [
        (lambda tmp: tmp / "missing.yaml", "cannot read scenario file"),
        (lambda tmp: tmp, "cannot read scenario file"),
        (_write("bad.yaml", b"name: 'unterminated\n"), "not valid YAML"),
        (_write("list.yaml", b"- a\n- b\n"), "must be a mapping"),
        (_write("big.yaml", b"name: x\nrounds: [{text: hi}]\n#" + b"x" * 1_000_001), "larger than"),
    ],
    ids=["missing", "a-folder", "bad-yaml", "not-a-mapping", "over-1MB"],
)
def test_an_unusable_scenario_file_is_exit_3(
    make_path: Callable[[Path], Path], message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = run_cli(capsys, "run", "--scenario", make_path(tmp_path), "--json", "--audit-db", tmp_path / "a.db")
    assert (run.code, run.out) == (3, "")
    assert run.err.startswith("diagnose: ")
    assert message in run.err


@pytest.mark.parametrize(
    "make_path",
    [
        _write("latin1.yaml", 'name: x\nrounds: [{text: "caf\xe9"}]\n'.encode("latin-1")),
        _write("deep.yaml", b"[" * 1000),
    ],
    ids=["not-utf8", "deeply-nested"],
)
def test_a_scenario_file_the_loader_chokes_on_is_exit_3(
    make_path: Callable[[Path], Path], tmp_path: Path
) -> None:
    run = run_cli_process("run", "--scenario", make_path(tmp_path), "--json", "--audit-db", tmp_path / "a.db")
    assert "Traceback" not in run.err, run.err
    assert (run.code, run.out) == (3, "")
