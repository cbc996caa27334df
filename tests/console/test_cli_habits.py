"""The command line's habits a new user reaches for in the first hour (docs/contracts.md, "CLI"):
`--version`, a mistyped option or scenario or configuration key answered with the name meant, the
usage of the command typed, data alone on stdout, a trainer's folder with one broken lesson, and a
team-audit account that may not create the tables. Each is a real `diagnose` process.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path

import pytest

from agent.scenarios import ScenarioError, resolve_scenario
from agent.settings import ConfigError, load_settings
from agent.vocabulary import SETUP_ERROR, USAGE_ERROR
from audit.location import MysqlLocation
from console.commands.main import main
from console.presentation import SCRIPTED_NOTICE
from tests.support.audit_backends import AuditTarget, audit_account
from tests.support.audit_data import populate_audit
from tests.support.resilience import cli_env, run_cli_process

LESSON = """name: lesson-1
title: Lesson one
description: one round, a Draft without a conclusion
query: "gateway 504 since 02:10Z"
rounds:
  - text: '{"conclusion": null, "analysis": [], "action_plan": [], "recommendations": [],
      "limitations": {"checked_scope": [], "missing_info": ["everything"]}}'
"""


def test_version_prints_the_installed_version(tmp_path: Path) -> None:
    done = run_cli_process("--version", env=cli_env(tmp_path))
    assert (done.code, done.out, done.err) == (0, f"diagnose {version('diagnosis-console')}\n", "")


def test_a_mistyped_option_shows_the_usage_of_the_command_typed_and_the_option_meant(tmp_path: Path) -> None:
    done = run_cli_process("run", "--qeury", "payment timeouts", env=cli_env(tmp_path))
    assert done.code == USAGE_ERROR
    assert done.err.startswith("usage: diagnose run ")  # run's own options, not the list of commands
    assert "--query-file" in done.err
    assert done.err.splitlines()[-1] == (
        "diagnose run: error: unrecognized arguments: --qeury payment timeouts (did you mean '--query'?)"
    )
    command = run_cli_process("rnu", "--query", "x", env=cli_env(tmp_path))
    assert command.code == USAGE_ERROR
    assert command.err.rstrip().endswith("(did you mean 'run'?)")
    nested = run_cli_process("audit", "runs", "--limt=3", env=cli_env(tmp_path))
    assert nested.code == USAGE_ERROR
    assert nested.err.startswith("usage: diagnose audit runs ")
    assert nested.err.splitlines()[-1].endswith("--limt=3 (did you mean '--limit'?)")


def test_an_unknown_scenario_names_the_closest_one(tmp_path: Path) -> None:
    done = run_cli_process("run", "--scenario", "evidence-backed-diagnosi", env=cli_env(tmp_path))
    assert done.code == SETUP_ERROR
    assert done.err.startswith(
        "diagnose: unknown scenario 'evidence-backed-diagnosi' (did you mean 'evidence-backed-diagnosis'?); "
        "built-in scenarios: "
    )
    with pytest.raises(ScenarioError) as unrelated:
        resolve_scenario("zzzz")
    assert "did you mean" not in str(unrelated.value)  # no suggestion beats a wrong one


def test_an_unknown_configuration_key_names_the_file_the_key_and_the_key_meant(tmp_path: Path) -> None:
    config = tmp_path / "diagnose.toml"
    config.write_text('[model]\nprovidr = "openai"\n\n[logz]\npath = "x"\n', encoding="utf-8")
    done = run_cli_process("run", "--config", config, "--scenario", "unknown-tool", env=cli_env(tmp_path))
    assert done.code == SETUP_ERROR
    line = done.err.strip()
    assert f"{config}: unknown key 'providr' in [model] (did you mean 'provider'?)" in line
    assert f"{config}: unknown section [logz] (did you mean 'logs'?)" in line


def test_an_unknown_key_set_by_a_variable_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DIAGNOSE_BUDGET__MAX_MODEL_CALS", "3")
    with pytest.raises(ConfigError) as refused:
        load_settings(None)
    assert (
        "DIAGNOSE_BUDGET__MAX_MODEL_CALS: unknown key 'max_model_cals' in [budget] "
        "(did you mean 'max_model_calls'?)" in str(refused.value)
    )


def test_the_next_page_hint_goes_to_stderr_and_stdout_holds_only_the_table(tmp_path: Path) -> None:
    audit = tmp_path / "audit.db"
    assert populate_audit(audit, 12) >= 3
    done = run_cli_process("audit", "runs", "--limit", "2", "--audit-db", audit, env=cli_env(tmp_path))
    assert done.code == 0, done.err
    lines = done.out.splitlines()
    assert len(lines) == 3  # the header and two runs
    assert lines[0].split()[:2] == ["STARTED", "RUN"]
    assert done.err.startswith("-- more: --cursor ")
    cursor = done.err.split()[-1]
    more = run_cli_process(
        "audit",
        "runs",
        "--limit",
        "1",
        "--cursor",
        cursor,
        "--json",
        "--audit-db",
        audit,
        env=cli_env(tmp_path),
    )
    shown = {line.split()[1] for line in lines[1:]}
    assert json.loads(more.out)["rows"][0]["run_id"] not in shown  # the hint continues the listing


def test_a_scenario_folder_with_a_broken_file_still_opens_the_console(tmp_path: Path) -> None:
    """The setup check passes (the console then needs a terminal: 64, never the 3 of a refused start);
    the picker lists the broken file, dimmed (tests/console/test_first_hour_console.py)."""
    folder = tmp_path / "class"
    folder.mkdir()
    (folder / "lesson-1.yaml").write_text(LESSON, encoding="utf-8")
    (folder / "broken.yaml").write_text("rounds: [", encoding="utf-8")
    done = run_cli_process("--scenario-dir", folder, env=cli_env(tmp_path))
    assert done.code == USAGE_ERROR, done.err
    assert "the console needs a terminal" in done.err
    assert "broken.yaml" not in done.err
    named = run_cli_process("--scenario", "broken", "--scenario-dir", folder, env=cli_env(tmp_path))
    # Asked for by name: refused.
    assert named.code == SETUP_ERROR
    assert "broken.yaml" in named.err


@pytest.mark.mysql
def test_a_team_audit_account_without_create_is_pointed_to_the_grants(
    mariadb_audit: AuditTarget, tmp_path: Path
) -> None:
    with audit_account(mariadb_audit, "First-Start-Pw-33") as user:
        location = mariadb_audit.location
        assert isinstance(location, MysqlLocation)
        url = f"mysql://{user}@{location.host}:{location.port}/{location.database}"
        env = cli_env(tmp_path) | {
            "DIAGNOSE_AUDIT__PASSWORD_ENV": "I33_AUDIT_PW",
            "I33_AUDIT_PW": "First-Start-Pw-33",
        }
        done = run_cli_process("audit", "runs", "--audit-db", url, env=env)
    assert done.code == SETUP_ERROR
    line = done.err.strip()
    assert f"the account '{user}' may not create or migrate the audit's tables" in line
    assert "CREATE command denied" in line  # the server's own words say which statement
    assert 'README "Grants"' in line
    assert "First-Start-Pw-33" not in line


def test_every_file_the_tool_writes_follows_one_folder_rule_with_a_message_per_case(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """`--events`, `eval --out` and `audit export --output`: a new last folder is created; a file in
    the way and a missing folder above it get their own message. (In this process: the engine loads
    once for the nine commands.)"""
    plain_file = tmp_path / "notes.txt"
    plain_file.write_text("mine\n", encoding="utf-8")
    audit = ["--audit-db", str(tmp_path / "audit.db")]
    commands: dict[str, Callable[[Path], list[str]]] = {
        "events": lambda path: [
            "run",
            "--scenario",
            "unknown-tool",
            *audit,
            "--events",
            str(path / "run.ndjson"),
        ],
        "eval": lambda path: ["eval", "--case", "payment-timeout", "--out", str(path)],
        "export": lambda path: ["audit", "export", *audit, "--output", str(path / "rows.jsonl")],
    }
    for name, command in commands.items():
        new = tmp_path / f"new-{name}"
        assert main(command(new)) == 0, (name, capsys.readouterr().err)
        assert new.is_dir(), name
        assert any(new.iterdir()), name
        capsys.readouterr()
        assert main(command(plain_file / "x")) != 0
        said = capsys.readouterr().err
        assert f"{plain_file} is a file, not a folder" in said, (name, said)
        assert main(command(tmp_path / "typo" / "x")) != 0
        said = capsys.readouterr().err
        assert f"folder {tmp_path / 'typo'} does not exist (only the last folder" in said, (name, said)
    assert plain_file.read_text(encoding="utf-8") == "mine\n"
    assert not (tmp_path / "typo").exists()


def test_the_eval_table_fits_80_columns_and_wide_keeps_one_line_per_case(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/eval.md: off a terminal the table folds into bands within `COLUMNS`
    (80 here); each band repeats the case column. `--wide` is the whole table on one line per case."""
    cases = ("--case", "payment-timeout", "--case", "vague-query")
    env = cli_env(tmp_path) | {"COLUMNS": "80"}
    done = run_cli_process("eval", *cases, "--out", tmp_path / "folded", env=env)
    assert done.code == 0, done.err
    table = done.out.split("\n\nreports: ")[0].splitlines()
    assert max(len(line) for line in table) <= 80
    bands = [band.splitlines() for band in "\n".join(table).split("\n\n")][:-1]  # the last: the summary
    assert len(bands) > 1
    assert all(band[0].startswith("case ") for band in bands)
    assert [[line.split()[0] for line in band[1:]] for band in bands] == [
        ["payment-timeout", "vague-query", "ALL"]
    ] * len(bands)
    headers = " ".join(" ".join(band[0].split("  ")[1:]) for band in bands).split()
    assert "fabricated" in headers
    assert "tokens" in headers
    assert headers.count("accepted") == 1
    # Counted by hand from the two scenarios: 4 rounds and 12,346 tokens; 1 round and 1,850 tokens.
    row = {line.split()[0]: line for band in bands for line in band[1:] if "12346" in line or "1850" in line}
    assert set(row) == {"payment-timeout", "vague-query"}

    assert main(["eval", *cases, "--out", str(tmp_path / "wide"), "--wide"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split("  ")[0] == "case"
    assert lines[0].split()[-2:] == ["wall", "s"]
    assert [line.split()[0] for line in lines[1:4]] == ["payment-timeout", "vague-query", "ALL"]
    payment = lines[1].split()
    assert payment[1] == "1"
    assert "12346" in payment
    assert "4.0" in payment
    assert len(lines[1]) > 80


def test_a_headless_run_of_ones_own_query_on_a_script_says_so_on_stderr(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The console's notice, where a headless run's reader looks: stderr (stdout keeps the result)."""
    audit = ["--audit-db", str(tmp_path / "audit.db")]
    assert main(["run", "--scenario", "unknown-tool", *audit, "--json"]) == 0
    assert SCRIPTED_NOTICE not in capsys.readouterr().err  # the scenario's own query: what was scripted
    assert (
        main(["run", "--scenario", "unknown-tool", "--query", "why is checkout slow?", *audit, "--json"]) == 0
    )
    out, err = capsys.readouterr()
    assert json.loads(out)["outcome"] == "DRAFT"
    assert err.startswith(f"diagnose: warning: {SCRIPTED_NOTICE}: ")
    assert "diagnose demo model-server" in err
