"""Issue 20, item 6: `--audit-db` takes a URL exactly as `[audit] url` does, and never echoes a password.

Before, `--audit-db mysql://user:PW@host/db` was a file path: one command printed the password back in
its error, another created a SQLite file under `./mysql:/...`. Now every command that takes
`--audit-db` (run, eval and each `audit` subcommand; `audit copy`'s `--from`/`--to` likewise) parses
a URL with `[audit] url`'s own rules: a password inside it is refused without being repeated, the
evidence account is refused, and nothing is created on disk.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.audit_backends import AuditTarget
from tests.support.resilience import cli_env, run_cli_process, write_config

PASSWORD = "Hunter2-audit-PW"
SCENARIO = "evidence-backed-diagnosis"
WITH_PASSWORD = [
    f"mysql://auditor:{PASSWORD}@127.0.0.1:3306/team_audit",
    f"mariadb://auditor:{PASSWORD}@db.example/team_audit",
    f"mysql:/auditor:{PASSWORD}@127.0.0.1/team_audit",  # one slash: still a URL, not ./mysql:/...
    f"MySQL://auditor:{PASSWORD}@127.0.0.1/team_audit",
]
COMMANDS = {
    "run": ["run", "--scenario", SCENARIO],
    "eval": ["eval", "--case", "payment-timeout", "--out", "eval-out"],
    "audit runs": ["audit", "runs"],
    "audit show": ["audit", "show", "run-1"],
    "audit invocations": ["audit", "invocations"],
    "audit export": ["audit", "export"],
    "audit prune": ["audit", "prune", "--older-than", "30d", "--yes"],
}


def files_under(folder: Path) -> set[Path]:
    """Everything a command could have created, apart from its own state folder (the log)."""
    return {p for p in folder.rglob("*") if "state" not in p.relative_to(folder).parts}


def no_trace_of_the_password(tmp_path: Path, *outputs: str) -> None:
    for text in outputs:
        assert PASSWORD not in text
    log = tmp_path / "state" / "diagnosis-console" / "diagnose.log"
    assert not log.exists() or PASSWORD not in log.read_text(encoding="utf-8")


@pytest.mark.parametrize("command", list(COMMANDS))
def test_a_url_with_a_password_is_refused_by_every_command_without_echo_or_file(
    tmp_path: Path, command: str
) -> None:
    before = files_under(tmp_path)
    run = run_cli_process(
        *COMMANDS[command],
        "--audit-db",
        WITH_PASSWORD[0],
        env=cli_env(tmp_path, home=tmp_path / "home"),
        cwd=tmp_path,
    )
    assert run.code == 3, run.err
    assert run.err.count("\n") == 1
    assert "--audit-db must not carry a password" in run.err
    no_trace_of_the_password(tmp_path, run.out, run.err)
    assert files_under(tmp_path) == before


@pytest.mark.parametrize("url", WITH_PASSWORD[1:])
def test_every_spelling_of_such_a_url_is_refused_alike(
    tmp_path: Path, url: str, in_folder: Callable[..., tuple[int, str, str]]
) -> None:
    before = files_under(tmp_path)
    for command in ("run", "audit runs"):
        code, out, err = in_folder(*COMMANDS[command], "--audit-db", url)
        assert code == 3
        assert err.startswith(f"diagnose{' audit' if command != 'run' else ''}: ")
        assert "--audit-db must " in err  # not carry a password, or look like mysql://user@host/db
        no_trace_of_the_password(tmp_path, out, err)
    assert files_under(tmp_path) == before


def test_audit_copy_refuses_such_urls_on_either_side_without_echo(
    tmp_path: Path, in_folder: Callable[..., tuple[int, str, str]]
) -> None:
    before = files_under(tmp_path)
    for url in WITH_PASSWORD:
        for option, other in (("--from", "--to"), ("--to", "--from")):
            code, out, err = in_folder("audit", "copy", option, url, other, tmp_path / "elsewhere.db")
            assert code == 3
            assert f"{option} must " in err
            no_trace_of_the_password(tmp_path, out, err)
    assert files_under(tmp_path) == before


def test_a_url_naming_the_evidence_account_is_refused_as_in_the_configuration(
    tmp_path: Path, in_folder: Callable[..., tuple[int, str, str]]
) -> None:
    config = write_config(tmp_path / "c.toml", {"mysql": {"dsn": "mysql://reader@127.0.0.1:3306/shop"}})
    before = files_under(tmp_path)
    for command in ("run", "audit runs"):
        code, _, err = in_folder(
            *COMMANDS[command], "--config", config, "--audit-db", "mysql://reader@127.0.0.1:3306/audit"
        )
        assert code == 3
        assert "names the evidence account" in err
    assert files_under(tmp_path) == before


def test_sqlite_urls_name_the_file_as_in_the_configuration(
    tmp_path: Path, in_folder: Callable[..., tuple[int, str, str]]
) -> None:
    code, _, err = in_folder(*COMMANDS["run"], "--json", "--audit-db", "sqlite:///runs.db")
    assert code == 0, err
    assert (tmp_path / "runs.db").is_file()
    assert not (tmp_path / "sqlite:").exists()
    code, out, _ = in_folder("audit", "runs", "--audit-db", "sqlite:///runs.db")
    assert code == 0
    assert "DRAFT / COMPLETED" in out
    code, out, _ = in_folder("audit", "runs", "--audit-db", f"sqlite:///{tmp_path / 'runs.db'}")
    assert code == 0
    assert "DRAFT / COMPLETED" in out


@pytest.mark.mysql
def test_a_server_url_opens_the_team_audit(
    tmp_path: Path, mariadb_audit: AuditTarget, in_folder: Callable[..., tuple[int, str, str]]
) -> None:
    """The password (none for the test server's root) comes from `[audit] password_env`, as for
    `[audit] url`; the run and the `audit` commands reach the same database."""
    url = mariadb_audit.url
    code, _, err = in_folder(*COMMANDS["run"], "--json", "--audit-db", url)
    assert code == 0, err
    code, out, _ = in_folder("audit", "runs", "--audit-db", url)
    assert code == 0
    assert "DRAFT / COMPLETED" in out
    code, out, _ = in_folder("audit", "prune", "--older-than", "30d", "--dry-run", "--audit-db", url)
    assert code == 0
    assert out.startswith("would prune 0 runs")
    assert url in out
    assert not any(p.name.startswith("mysql:") for p in tmp_path.iterdir())
