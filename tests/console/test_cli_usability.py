"""The `diagnose` command as a new user meets it: one format on stdout, console options without the
`console` word, scenario names from a trainer's folder, filter typos refused with the valid values,
every option documented. (docs/contracts.md, "CLI")
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from agent.scenarios import builtin_scenarios
from agent.vocabulary import USAGE_ERROR, EventType
from console.app import DiagnoseApp
from console.commands import main as cli
from console.commands import open_console
from console.commands.audit import add_audit_parser, run_audit_command
from console.commands.main import main
from console.export import run_markdown
from tests.support.audit_events import Events

REPO = Path(__file__).resolve().parents[2]
LESSON = """name: my-lesson
title: A trainer's own lesson
description: one round, a Draft without a conclusion
query: "gateway 504 since 02:10Z"
rounds:
  - text: '{"conclusion": null, "analysis": [], "action_plan": [], "recommendations": [],
      "limitations": {"checked_scope": [], "missing_info": ["everything"]}}'
"""


def diagnose(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "console", *argv], capture_output=True, text=True, timeout=120, check=False
    )


@pytest.mark.parametrize("as_json", [True, False], ids=["json", "human"])
def test_events_to_stdout_leave_stdout_pure_ndjson(tmp_path: Path, as_json: bool) -> None:
    """`diagnose run --events - | jq .`: every stdout line is one run event; the result is on stderr."""
    argv = [
        "run",
        "--scenario",
        "evidence-backed-diagnosis",
        "--events",
        "-",
        "--audit-db",
        str(tmp_path / "a.db"),
    ]
    done = diagnose(*argv, *(["--json"] if as_json else []))
    assert done.returncode == 0, done.stderr

    events = [json.loads(line) for line in done.stdout.splitlines()]  # what `| jq` does to each line
    assert events
    assert all(e["type"] in set(EventType) for e in events)
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    assert events[0]["type"] == "run_started"
    assert events[-1]["type"] == "run_finished"
    if as_json:
        assert json.loads(done.stderr) == events[-1]["result"]
    else:
        assert "outcome: DRAFT / COMPLETED" in done.stderr


def test_console_options_without_the_console_word(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    opened: list[DiagnoseApp] = []
    monkeypatch.setattr(DiagnoseApp, "run", lambda self, *a, **k: opened.append(self))
    monkeypatch.setattr(open_console, "console_terminal_problem", lambda: None)  # it draws nothing here
    assert main(["--scenario", "stop-required-ignored"]) == 0
    assert opened[-1].scenario_arg == "stop-required-ignored"
    # A bad scenario file is refused before the console starts, as with `diagnose console`.
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nrounds: 3\n", encoding="utf-8")
    assert main(["--scenario", str(bad)]) == 3
    assert len(opened) == 1


def test_scenario_names_come_from_the_scenario_dir(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = tmp_path / "lessons"
    folder.mkdir()
    (folder / "lesson-1.yaml").write_text(LESSON, encoding="utf-8")
    audit = str(tmp_path / "audit.db")

    code = main(
        ["run", "--scenario", "my-lesson", "--scenario-dir", str(folder), "--json", "--audit-db", audit]
    )
    assert code == 0
    result = json.loads(capsys.readouterr().out)
    assert result["draft"]["limitations"]["missing_info"] == ["everything"]

    opened: list[DiagnoseApp] = []
    monkeypatch.setattr(DiagnoseApp, "run", lambda self, *a, **k: opened.append(self))
    monkeypatch.setattr(open_console, "console_terminal_problem", lambda: None)  # it draws nothing here
    assert main(["--scenario", "my-lesson", "--scenario-dir", str(folder)]) == 0
    assert opened[-1].scenario_arg == str(folder / "lesson-1.yaml")
    # The file name works too, and a built-in name still means the built-in.
    assert main(["console", "--scenario", "lesson-1", "--scenario-dir", str(folder)]) == 0
    assert opened[-1].scenario_arg == str(folder / "lesson-1.yaml")
    assert main(["--scenario", "unknown-tool", "--scenario-dir", str(folder)]) == 0
    assert opened[-1].scenario_arg == "unknown-tool"


def test_a_headless_run_from_a_scenario_dir_never_loads_the_console_screens(tmp_path: Path) -> None:
    """`diagnose run` is for scripts: finding a trainer's scenario by name must not import Textual."""
    folder = tmp_path / "lessons"
    folder.mkdir()
    (folder / "lesson-1.yaml").write_text(LESSON, encoding="utf-8")
    argv = ["run", "--scenario", "my-lesson", "--scenario-dir", str(folder), "--json"]
    argv += ["--audit-db", str(tmp_path / "audit.db")]
    probe = (
        "import sys; from console.commands.main import main; code = main(sys.argv[1:]); "
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] == 'textual')[:3]; "
        "print('LOADED', loaded, file=sys.stderr); "
        "raise SystemExit(code)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, *argv], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["draft"]["limitations"]["missing_info"] == ["everything"]
    assert "LOADED []" in done.stderr


def audit_parser() -> argparse.ArgumentParser:
    root = cli.CommandLineParser(prog="diagnose")  # the product's: usage errors exit USAGE_ERROR
    add_audit_parser(root.add_subparsers(dest="command"))
    return root


@pytest.mark.parametrize(
    ("argv", "valid"),
    [
        (["invocations", "--tool", "query_log"], "lookup_knowledge, query_logs, query_mysql"),
        (["invocations", "--status", "DONE"], "STARTED, FOUND, EMPTY, ERROR, CANCELLED, INTERRUPTED"),
        (["invocations", "--error-code", "TIMEOUTS"], "TIMEOUT, UNAVAILABLE, INVALID_INPUT, POLICY_REJECTED"),
        (
            ["runs", "--outcome", "OK"],
            "DRAFT, CONTROLLED_STOP, BUDGET_EXHAUSTED, CANCELLED, FAILED, REJECTED",
        ),
    ],
)
def test_an_unknown_filter_value_is_a_usage_error_listing_the_valid_ones(
    argv: list[str], valid: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        audit_parser().parse_args(["audit", *argv])
    assert exited.value.code == USAGE_ERROR
    err = capsys.readouterr().err
    assert f"unknown {argv[-2].removeprefix('--').replace('-', ' ')} {argv[-1]!r}; valid: {valid}" in err


def test_a_filter_value_in_another_case_is_accepted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from audit.factory import open_audit_store
    from audit.location import SqliteLocation
    from audit.sink import AuditSink

    db = tmp_path / "audit.db"
    ev = Events()
    with open_audit_store(SqliteLocation(db)) as store:
        sink = AuditSink(store)
        sink(ev.run_started())
        sink(ev.tool_started("call-1", "lookup_knowledge", {"query": "x", "top_k": 1}))
    args = audit_parser().parse_args(
        [
            "audit",
            "invocations",
            "--status",
            "started",
            "--tool",
            "LOOKUP_KNOWLEDGE",
            "--audit-db",
            str(db),
            "--json",
        ]
    )
    assert run_audit_command(args) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    assert [(r["tool_call_id"], r["status"]) for r in rows] == [("call-1", "STARTED")]


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    found: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                found[f"{parser.prog.removeprefix('diagnose').strip()} {name}".strip()] = child
                found.update(_subparsers(child))
    return found


def test_every_option_of_every_command_is_documented() -> None:
    commands = _subparsers(cli._parser())
    assert {"run", "console", "scenarios", "serve", "audit invocations", "audit show"} <= set(commands)
    undocumented = [
        f"{name} {action.option_strings[-1]}"
        for name, parser in commands.items()
        for action in parser._actions
        if action.option_strings and not isinstance(action, argparse._HelpAction) and not action.help
    ]
    assert undocumented == []


def test_markdown_export_says_yes_or_no_not_python_booleans(tmp_path: Path) -> None:
    from tests.console.test_export import record_of

    for scenario in ("stop-required-ignored", "fenced-json-fails-closed", "model-call-budget-exhausted"):
        markdown = run_markdown(record_of(scenario), "2026-11-30T03:00:00+00:00")
        assert not re.search(r"\b(True|False|None)\b", markdown), scenario
        assert re.search(r"stop_required: (yes|no)\b", markdown), scenario


def test_the_scenario_table_lists_every_builtin() -> None:
    page = (REPO / "docs" / "scenarios.md").read_text(encoding="utf-8")
    section = page.split("## Built-in scenarios", 1)[1].split("\n### ", 1)[0]
    listed = re.findall(r"^\| `([a-z0-9-]+)` \|", section, flags=re.MULTILINE)
    assert sorted(listed) == sorted(s.name for s in builtin_scenarios())


def test_json_result_of_a_run_is_unchanged_without_events_on_stdout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With `--events FILE` the result stays on stdout, as before."""
    events = tmp_path / "events.ndjson"
    argv = [
        "run",
        "--scenario",
        "unknown-tool",
        "--json",
        "--events",
        str(events),
        "--audit-db",
        str(tmp_path / "a.db"),
    ]
    assert main(argv) == 0
    out: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert out["outcome"] == "DRAFT"
    assert json.loads(events.read_text(encoding="utf-8").splitlines()[-1])["result"] == out
