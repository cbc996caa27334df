"""`diagnose audit ...` through the parser the CLI mounts: runs, show, invocations, export (streaming,
constant memory), prune, path resolution and errors (exit 3). (docs/contracts.md, "CLI")
"""

from __future__ import annotations

import argparse
import json
import stat
import tracemalloc
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agent.vocabulary import USAGE_ERROR
from audit.common import audit_timestamp
from audit.factory import open_audit_store
from audit.location import SqliteLocation
from audit.sink import AuditSink
from console.commands.audit import add_audit_parser, run_audit_command
from console.commands.main import CommandLineParser
from console.safe_text import neutralize
from tests.support.audit_data import populate_audit
from tests.support.audit_events import KNOWLEDGE_INPUT, LOGS_INPUT, Events
from tests.support.audit_rows import run_row


def parser() -> argparse.ArgumentParser:
    root = CommandLineParser(prog="diagnose")  # the product's: usage errors exit USAGE_ERROR
    add_audit_parser(root.add_subparsers(dest="command"))
    return root


class Cli:
    def __init__(self, capsys: pytest.CaptureFixture[str], db: Path) -> None:
        self.capsys = capsys
        self.db = db

    def __call__(self, *argv: str, db: bool = True) -> tuple[int, str, str]:
        args = ["audit", *argv, *(["--audit-db", str(self.db)] if db else [])]
        code = run_audit_command(parser().parse_args(args))
        captured = self.capsys.readouterr()
        return code, captured.out, captured.err

    def json(self, *argv: str) -> Any:
        code, out, err = self(*argv, "--json")
        assert code == 0, err
        return json.loads(out)


NOW = datetime.now(UTC)


def at(minutes_ago: float) -> str:
    return audit_timestamp(NOW - timedelta(minutes=minutes_ago))


def record_run(sink: AuditSink, run_id: str, minutes_ago: float, session: str = "sess-a") -> None:
    """A run with a FOUND, an ERROR invocation, an evaluation and protocol events."""
    ev = Events(run_id, session)
    t = at(minutes_ago)
    sink(ev.run_started(f"{run_id}: 支付回调超时") | {"at": t})
    sink(ev.round_started(1) | {"at": t})
    sink(ev.round_finished(1, ["call-1", "call-2"]) | {"at": t})
    sink(ev.tool_started("call-1", "lookup_knowledge", KNOWLEDGE_INPUT) | {"at": t})
    sink(
        ev.tool_finished("call-1", "lookup_knowledge", "FOUND", projection={"hits": [{"title": "连接池"}]})
        | {"at": t}
    )
    sink(ev.tool_started("call-2", "query_mysql", {"sql": "DELETE FROM t", "database": None}) | {"at": t})
    sink(
        ev.tool_finished(
            "call-2", "query_mysql", "ERROR", error_code="POLICY_REJECTED", reason="WRITE_STATEMENT"
        )
        | {"at": t}
    )
    sink(ev.round_started(2) | {"at": t})
    sink(ev.round_finished(2, ["call-3"]) | {"at": t})
    sink(ev.protocol("EVALUATION_RECORDED", "call-3", evaluated_tool_call_id="call-1", evaluation="GAINED"))
    sink(ev.tool_started("call-3", "query_logs", LOGS_INPUT) | {"at": t})
    sink(ev.tool_finished("call-3", "query_logs", "EMPTY") | {"at": t})
    sink(ev.protocol("DUPLICATE_CALL", "call-4", tool="query_logs") | {"at": t})
    sink(ev.protocol("STOP_REQUIRED") | {"at": t})
    sink(ev.run_finished("DRAFT", "COMPLETED") | {"at": t})


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "audit.db"
    with open_audit_store(SqliteLocation(path)) as store:
        sink = AuditSink(store)
        record_run(sink, "run-old", 60 * 24 * 45)  # 45 days ago
        record_run(sink, "run-mid", 120, session="sess-b")
        record_run(sink, "run-new", 5)
    return path


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str], db: Path) -> Cli:
    return Cli(capsys, db)


def test_runs_lists_newest_first_and_pages(cli: Cli) -> None:
    code, out, _ = cli("runs")
    assert code == 0
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["STARTED", "RUN", "OUTCOME"]
    assert [line.split()[1] for line in lines[1:]] == ["run-new", "run-mid", "run-old"]
    assert "DRAFT / COMPLETED" in lines[1]
    assert "支付回调超时" in lines[1]

    first = cli.json("runs", "--limit", "2")
    assert [r["run_id"] for r in first["rows"]] == ["run-new", "run-mid"]
    assert first["rows"][0]["result"]["outcome"] == "DRAFT"  # JSON columns come decoded
    rest = cli.json("runs", "--limit", "2", "--cursor", first["next_cursor"])
    assert [r["run_id"] for r in rest["rows"]] == ["run-old"]
    assert rest["next_cursor"] is None
    assert [r["run_id"] for r in cli.json("runs", "--session", "sess-b")["rows"]] == ["run-mid"]
    assert cli.json("runs", "--outcome", "FAILED")["rows"] == []
    assert [r["run_id"] for r in cli.json("runs", "--search", "run-mid:")["rows"]] == ["run-mid"]

    code, out, err = cli("runs", "--limit", "1")
    # The hint is for the reader, not a row: `| wc -l` counts the header and the one run.
    assert len(out.splitlines()) == 2
    assert "-- more" not in out
    assert err.startswith("-- more: --cursor ")
    rest = cli.json("runs", "--limit", "2", "--cursor", err.split()[-1])
    assert [r["run_id"] for r in rest["rows"]] == ["run-mid", "run-old"]


def test_show_renders_the_timeline(cli: Cli) -> None:
    code, out, _ = cli("show", "run-mid")
    assert code == 0
    assert "run-mid" in out
    assert "session sess-b" in out
    assert "DRAFT / COMPLETED" in out
    assert "2 model calls, 1720 tokens (1600 prompt + 120 completion)" in out
    assert "\nmodel     scripted:demo\n" in out
    assert "\nlimits    6 model calls, 20000 tokens, 60 s, 1000 run bytes" in out
    body = out.split("\n\n", 2)[2].splitlines()  # after the header and the result
    kinds = [line[14:].split()[0] for line in body if not line.startswith(" ")]
    assert kinds == ["round", "call-1", "call-2", "round", "call-3", "protocol", "protocol"]
    assert any(
        "round 1" in line and "800+60 tokens" in line and "calls call-1, call-2" in line for line in body
    )
    assert any("call-1" in line and "FOUND" in line and "evaluation GAINED" in line for line in body)
    assert any("ERROR POLICY_REJECTED (WRITE_STATEMENT)" in line for line in body)
    assert any("DUPLICATE_CALL call-4" in line and '"tool": "query_logs"' in line for line in body)
    assert any("input" in line and "连接池 耗尽" in line for line in body)

    timeline = cli.json("show", "run-mid")
    assert timeline["run"]["run_id"] == "run-mid"
    assert [e["kind"] for e in timeline["entries"]] == [
        "model_round",
        "invocation",
        "invocation",
        "model_round",
        "invocation",
        "protocol_event",
        "protocol_event",
    ]
    first_call = timeline["entries"][1]["data"]
    assert first_call["input"] == KNOWLEDGE_INPUT
    assert first_call["projection"] == {"hits": [{"title": "连接池"}]}
    assert timeline["entries"][0]["data"]["tool_call_ids"] == ["call-1", "call-2"]


def draft_section(summary: str) -> list[str]:
    """The Draft lines of `diagnose run`'s summary: from `conclusion:` to the end."""
    lines = summary.splitlines()
    return lines[next(i for i, line in enumerate(lines) if line.startswith("conclusion: ")) :]


@pytest.mark.parametrize("scenario", ["evidence-backed-diagnosis", "tool-finds-no-evidence"])
def test_show_prints_the_draft_in_the_words_run_printed_it(
    scenario: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from console.commands.main import main

    db = tmp_path / "audit.db"
    assert main(["run", "--scenario", scenario, "--audit-db", str(db)]) == 0
    printed = capsys.readouterr().out
    run_id = printed.split()[1]
    code, out, _ = Cli(capsys, db)("show", run_id)
    assert code == 0
    shown = out.splitlines()
    start = shown.index("Draft:")
    assert shown[start + 1 : start + 1 + len(draft_section(printed))] == [
        f"  {line}" for line in draft_section(printed)
    ]
    draft = Cli(capsys, db).json("show", run_id)["run"]["result"]["draft"]
    for item in draft["analysis"]:  # each finding with its evidence, each negative observation's scope
        cited = item["evidence"] if isinstance(item["evidence"], str) else ", ".join(item["evidence"])
        scope = f" [scope: {item['scope']}]" if item.get("scope") else ""
        assert f"    - {item['kind']}: {item['statement']} <- {cited}{scope}" in shown
    for entry in (*draft["action_plan"], *draft["recommendations"], *draft["limitations"]["missing_info"]):
        assert f"    - {entry}" in shown


def test_show_says_why_a_run_has_no_draft(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from console.commands.main import main

    db = tmp_path / "audit.db"
    assert main(["run", "--scenario", "fenced-json-fails-closed", "--audit-db", str(db)]) == 1
    run_id = capsys.readouterr().out.split()[1]
    _, out, _ = Cli(capsys, db)("show", run_id)
    assert "\nDraft: none (FAILED / INVALID_DRAFT)\nfailure: INVALID_DRAFT (" in out
    assert "\nwhy: starts with a Markdown code fence" in out


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=5),
    max_leaves=25,
)
HOSTILE = st.lists(st.sampled_from(["a", "\n", "\x1b[2J", "\x9b", "\u202e", "\u2028", "\r", "中"])).map(
    "".join
)
DRAFT_SHAPED = st.fixed_dictionaries(
    {
        "conclusion": st.none() | HOSTILE | JSON_VALUES,
        "analysis": st.lists(
            st.fixed_dictionaries(
                {"kind": HOSTILE, "statement": HOSTILE, "evidence": st.lists(HOSTILE) | HOSTILE},
                optional={"scope": HOSTILE | JSON_VALUES},
            )
            | JSON_VALUES,
            max_size=3,
        )
        | JSON_VALUES,
        "action_plan": st.lists(HOSTILE, max_size=3) | JSON_VALUES,
        "limitations": st.fixed_dictionaries({"missing_info": st.lists(HOSTILE, max_size=2)}) | JSON_VALUES,
    }
)


@settings(max_examples=100, deadline=None)
@given(
    result=st.fixed_dictionaries(
        {
            "draft": DRAFT_SHAPED | JSON_VALUES,
            "failure": st.dictionaries(st.text(max_size=10), HOSTILE) | JSON_VALUES,
        }
    )
    | JSON_VALUES
)
def test_an_edited_stored_result_is_shown_without_failing_or_driving_the_terminal(result: Any) -> None:
    """The audit file may have been edited by anyone able to write it: any JSON, any text in it."""
    from console.commands.audit import _result_lines

    lines = _result_lines(run_row(result_json=json.dumps(result), finished_at="2026-11-30T03:00:00Z"))
    for line in lines:
        assert neutralize(line, newlines=False) == line  # no control, bidi or line-breaking character


def test_show_unknown_run(cli: Cli) -> None:
    code, out, err = cli("show", "no-such-run")
    assert (code, out) == (1, "")
    assert "no run 'no-such-run'" in err


ALL_RUNS = ("run-new", "run-mid", "run-old")


def calls(
    runs: tuple[str, ...] = ALL_RUNS, ids: tuple[str, ...] = ("call-3", "call-2", "call-1")
) -> list[str]:
    return [f"{run}/{call}" for run in runs for call in ids]


@pytest.mark.parametrize(
    ("flags", "expected"),
    [
        ([], calls()),
        (["--run", "run-mid"], calls(("run-mid",))),
        (["--session", "sess-b"], calls(("run-mid",))),
        (["--tool", "query_logs"], calls(ids=("call-3",))),
        (["--status", "ERROR"], calls(ids=("call-2",))),
        (["--error-code", "POLICY_REJECTED"], calls(ids=("call-2",))),
        (["--tool", "query_mysql", "--status", "ERROR", "--error-code", "POLICY_REJECTED", "--run",
          "run-new"], calls(("run-new",), ("call-2",))),
        (["--since", "3h"], calls(("run-new", "run-mid"))),
        (["--until", "1h"], calls(("run-mid", "run-old"))),
        (["--since", at(60 * 24 * 50), "--until", at(60 * 24 * 40)], calls(("run-old",))),
        (["--search", "连接池 耗尽"], calls(ids=("call-1",))),
        (["--search", "run-old: 支付回调"], calls(("run-old",))),  # the run's query counts
        (["--search", "WRITE_STATEMENT"], []),  # the reason is neither input nor projection
        (["--status", "FOUND", "--search", "orders"], []),
    ],
)  # fmt: skip
def test_invocations_filters(cli: Cli, flags: list[str], expected: list[str]) -> None:
    rows = cli.json("invocations", *flags)["rows"]
    assert [f"{r['run_id']}/{r['tool_call_id']}" for r in rows] == expected
    assert all(isinstance(r["input"], dict) for r in rows)


def test_invocations_table_and_limit(cli: Cli) -> None:
    code, out, err = cli("invocations", "--limit", "2", "--status", "ERROR")
    lines = out.splitlines()
    assert code == 0
    assert lines[0].split()[:4] == ["STARTED", "RUN", "CALL", "TOOL"]
    assert len(lines) == 3
    assert err.startswith("-- more: --cursor")
    assert "POLICY_REJECTED" in lines[1]
    assert "query_mysql" in lines[1]
    code, out, _ = cli("invocations", "--run", "no-such-run")  # a valid filter matching nothing
    assert (code, out) == (0, "(none)\n")


def test_bad_arguments(cli: Cli, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli("invocations", "--cursor", "garbage")
    assert code == USAGE_ERROR
    assert "invalid invocation cursor" in err
    for argv in (
        ["prune", "--older-than", "30 days"],
        ["invocations", "--since", "last week"],
        ["runs", "--limit", "0"],
    ):
        with pytest.raises(SystemExit) as exit_info:
            parser().parse_args(["audit", *argv])
        assert exit_info.value.code == USAGE_ERROR
    capsys.readouterr()


def test_export_jsonl_per_invocation_and_per_run(cli: Cli, tmp_path: Path) -> None:
    code, out, _ = cli("export")
    lines = [json.loads(line) for line in out.splitlines()]
    assert code == 0
    assert len(lines) == 9
    assert lines[0]["run_id"] == "run-new"
    assert lines[-1]["run_id"] == "run-old"
    assert {"input", "projection", "status", "evaluation"} <= set(lines[0])

    target = tmp_path / "out" / "runs.jsonl"
    target.parent.mkdir()
    code, out, err = cli("export", "--format", "jsonl", "--per", "run", "--output", str(target))
    assert (code, out) == (0, "")
    assert "exported 3 runs" in err
    assert stat.S_IMODE(target.stat().st_mode) == 0o600
    runs = [json.loads(line) for line in target.read_text(encoding="utf-8").splitlines()]
    assert [r["run"]["run_id"] for r in runs] == ["run-new", "run-mid", "run-old"]
    assert len(runs[0]["entries"]) == 7


def _export_peak(db: Path, target: Path) -> int:
    args = parser().parse_args(["audit", "export", "--audit-db", str(db), "--output", str(target)])
    tracemalloc.start()
    try:
        assert run_audit_command(args) == 0
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak


def test_export_memory_does_not_grow_with_the_export(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Streaming, shown by a ratio: four times the runs must not need four times the memory."""
    peaks = []
    for runs in (1_000, 4_000):
        db, target = tmp_path / f"audit-{runs}.db", tmp_path / f"export-{runs}.jsonl"
        populate_audit(db, runs, seed=3)
        peaks.append(_export_peak(db, target))
        with target.open(encoding="utf-8") as lines:
            assert sum(1 for _ in lines) == runs
    small, large = peaks
    assert large < 1.5 * small + 200_000, f"peak {small:,} -> {large:,} bytes for 4x the runs: not streaming"
    capsys.readouterr()


@pytest.mark.long
def test_export_streams_in_constant_memory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The 20,000-run version (`long`): the ratio test above covers the default suite."""
    db = tmp_path / "big.db"
    populate_audit(db, 20_000, seed=3)
    target = tmp_path / "export.jsonl"
    peak = _export_peak(db, target)
    size = target.stat().st_size
    with target.open(encoding="utf-8") as lines:
        assert sum(1 for _ in lines) == 20_000
    assert size > 8_000_000
    assert peak < 3_000_000, f"peak {peak:,} bytes for a {size:,}-byte export: not streaming"
    capsys.readouterr()


def test_prune(cli: Cli) -> None:
    code, out, _ = cli("prune", "--older-than", "30d", "--yes")
    assert code == 0
    assert out.startswith("pruned 1 run finished before ")
    assert "(2 model rounds, 3 invocations, 2 protocol events)" in out
    assert [r["run_id"] for r in cli.json("runs")["rows"]] == ["run-new", "run-mid"]
    code, out, _ = cli("prune", "--older-than", "90min", "--vacuum", "--yes")
    assert code == 0
    assert out.startswith("pruned 1 run ")
    assert [r["run_id"] for r in cli.json("runs")["rows"]] == ["run-new"]
    assert [r["run_id"] for r in cli.json("invocations", "--search", "连接池")["rows"]] == ["run-new"]


def test_missing_and_corrupt_files_exit_3(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope" / "audit.db"
    for command in (["runs"], ["show", "r"], ["invocations"], ["export"], ["prune", "--older-than", "1d"]):
        code = run_audit_command(parser().parse_args(["audit", *command, "--audit-db", str(missing)]))
        assert code == 3
        assert f"no audit database at {missing}" in capsys.readouterr().err
    assert not missing.parent.exists()  # reading never creates a file

    corrupt = tmp_path / "corrupt.db"
    corrupt.write_bytes(b"definitely not sqlite" * 500)
    assert run_audit_command(parser().parse_args(["audit", "runs", "--audit-db", str(corrupt)])) == 3
    assert "unusable" in capsys.readouterr().err


def test_path_comes_from_config_then_default(
    tmp_path: Path, db: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("DIAGNOSE_CONFIG", raising=False)
    monkeypatch.delenv("DIAGNOSE_AUDIT__PATH", raising=False)
    config = tmp_path / "diagnose.toml"
    config.write_text(f'[audit]\npath = "{db}"\n', encoding="utf-8")
    assert run_audit_command(parser().parse_args(["audit", "runs", "--config", str(config), "--json"])) == 0
    assert len(json.loads(capsys.readouterr().out)["rows"]) == 3

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    code = run_audit_command(parser().parse_args(["audit", "runs"]))
    assert code == 3
    assert str(tmp_path / "state" / "diagnosis-console" / "audit.db") in capsys.readouterr().err

    bad = tmp_path / "bad.toml"
    bad.write_text("[audit\n", encoding="utf-8")
    assert run_audit_command(parser().parse_args(["audit", "runs", "--config", str(bad)])) == 3
    assert "config" in capsys.readouterr().err


def test_terminal_output_escapes_control_characters(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "audit.db"
    with open_audit_store(SqliteLocation(path)) as store:
        ev = Events("run-esc")
        AuditSink(store)(ev.run_started("\x1b[2J\x1b]0;owned\x07 支付"))
    cli = Cli(capsys, path)
    for argv in (["runs"], ["show", "run-esc"]):
        code, out, _ = cli(*argv)
        assert code == 0
        assert "\x1b" not in out
        assert "\x07" not in out
        assert "\\x1b[2J" in out
        assert "支付" in out
