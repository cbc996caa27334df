"""The whole path an operator takes with a team audit: `diagnose run --config` recording into the
`mysql://` URL of a configuration file, then `diagnose audit runs / invocations / show / prune`
reading it, side by side with the same commands on the default SQLite file.

What must hold: the same exit codes, result JSON and run events, the same rows on both stores (apart
from the run and session IDs a run mints, and its times and durations), prune and vacuum doing on the
server what they do on the file, an audit account without DDL grants working once the schema is in
place, and the audit password reaching no output.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from audit.location import MysqlLocation
from audit.sink import AuditSink
from console.commands.main import main
from tests.support.audit_backends import AuditTarget, audit_account
from tests.support.audit_events import KNOWLEDGE_INPUT, Events
from tests.support.expected import EXPECTED
from tests.support.mysql import root_connection

pytestmark = pytest.mark.mysql

_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?Z$")
_TIME_KEYS = frozenset({"at", "started_at", "finished_at"})


class Diagnose:
    """`diagnose ...` in this process, as a shell runs it: exit code, stdout, stderr."""

    def __init__(self, capsys: pytest.CaptureFixture[str]) -> None:
        self.capsys = capsys

    def __call__(self, *argv: str) -> tuple[int, str, str]:
        code = main(list(argv))
        captured = self.capsys.readouterr()
        return code, captured.out, captured.err

    def json(self, *argv: str) -> Any:
        code, out, err = self(*argv)
        assert code == 0, err
        return json.loads(out)


@pytest.fixture
def diagnose(capsys: pytest.CaptureFixture[str]) -> Diagnose:
    return Diagnose(capsys)


def team_config(folder: Path, url: str, password_env: str | None = None) -> Path:
    """A configuration file naming the audit by URL, as an operator writes it."""
    path = folder / f"audit-{abs(hash(url)) % 10**8}.toml"
    lines = ["[audit]", f'url = "{url}"']
    if password_env is not None:
        lines.append(f'password_env = "{password_env}"')
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def comparable(value: Any, ids: dict[str, str]) -> Any:
    """`value` with what differs between two runs of the same scenario by design made equal: the run
    and session IDs each run mints, its timestamps (checked to be ISO-8601 UTC) and its durations."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if key in _TIME_KEYS and isinstance(item, str):
                assert _TIME.match(item), (key, item)
                out[key] = "<time>"
            elif key in {"duration_ms", "elapsed_s"} and isinstance(item, int | float):
                out[key] = "<duration>"
            else:
                out[key] = comparable(item, ids)
        return out
    if isinstance(value, list):
        return [comparable(item, ids) for item in value]
    if isinstance(value, str):
        for minted, placeholder in ids.items():
            value = value.replace(minted, placeholder)
    return value


def recorded(diagnose: Diagnose, scenario: str, audit: list[str], events: Path) -> dict[str, Any]:
    """One `diagnose run --scenario ... --json --events F`, and what `diagnose audit` then shows of it."""
    code, out, err = diagnose("run", "--scenario", scenario, "--json", "--events", str(events), *audit)
    result = json.loads(out)
    run_id, session_id = result["run_id"], result["session_id"]
    ids = {run_id: "<run>", session_id: "<session>"}
    seen = {
        "exit": code,
        "stderr": err,
        "result": result,
        "events": [json.loads(line) for line in events.read_text(encoding="utf-8").splitlines()],
        "runs": diagnose.json("audit", "runs", "--session", session_id, "--json", *audit),
        "invocations": diagnose.json("audit", "invocations", "--run", run_id, "--json", *audit),
        "show": diagnose.json("audit", "show", run_id, "--json", *audit),
        "export": [
            json.loads(line) for line in diagnose("audit", "export", "--per", "run", *audit)[1].splitlines()
        ],
    }
    return {key: comparable(item, ids) for key, item in seen.items()} | {"raw": result}


@pytest.mark.parametrize(
    "scenario",
    [
        "evidence-backed-diagnosis",
        "tool-finds-no-evidence",  # ends with no evidence: conclusion null
        "token-budget-exhausted",  # a budget stop before the round's call runs
        "model-call-budget-exhausted",
        "stop-required-ignored",
        "fenced-json-fails-closed",
        "oversized-query-rejected",  # rejected before it starts: no run_started
    ],
)
def test_a_run_recorded_on_the_server_is_the_run_recorded_in_the_file(
    scenario: str, diagnose: Diagnose, mariadb_audit: AuditTarget, tmp_path: Path
) -> None:
    config = team_config(tmp_path, mariadb_audit.url)
    on_server = recorded(diagnose, scenario, ["--config", str(config)], tmp_path / "server.ndjson")
    on_file = recorded(
        diagnose, scenario, ["--audit-db", str(tmp_path / "audit.db")], tmp_path / "file.ndjson"
    )

    outcome, stop_reason, exit_code, invoked = EXPECTED[scenario]
    assert on_server["exit"] == exit_code, on_server["stderr"]
    assert (on_server["raw"]["outcome"], on_server["raw"]["stop_reason"]) == (outcome, stop_reason)
    for part in ("exit", "result", "events", "runs", "invocations", "show", "export"):
        assert on_server[part] == on_file[part], part
    assert len(on_server["export"]) == 1
    # What the server holds is the run that was printed, not just the same as the file.
    (run,) = on_server["runs"]["rows"]
    assert (run["outcome"], run["stop_reason"], run["result"]) == (outcome, stop_reason, on_server["result"])
    assert sorted(row["tool_call_id"] for row in on_server["invocations"]["rows"]) == sorted(invoked)
    assert all(row["status"] != "STARTED" for row in on_server["invocations"]["rows"])
    if scenario == "tool-finds-no-evidence":
        assert on_server["raw"]["draft"]["conclusion"] is None
        assert {row["status"] for row in on_server["invocations"]["rows"]} == {"EMPTY"}


def test_prune_and_vacuum_delete_finished_runs_and_leave_a_running_one(
    diagnose: Diagnose, audit_target: AuditTarget, tmp_path: Path
) -> None:
    """The same on the file and on the server: finished runs go with all their rows, a run still
    going (on the server: holding its lease) is untouched, and neither command reports an error."""
    audit = ["--config", str(team_config(tmp_path, audit_target.url))]
    finished = [
        diagnose.json("run", "--scenario", name, "--json", *audit)["run_id"]
        for name in ("evidence-backed-diagnosis", "tool-finds-no-evidence")
    ]
    writer = audit_target.open()  # another process's run, still going
    sink = AuditSink(writer)
    live = Events("run-live", "session-live")
    sink(live.run_started("支付回调超时，仍在调查"))
    sink(live.tool_started("call-1", "lookup_knowledge", KNOWLEDGE_INPUT))
    try:
        pruned = diagnose("audit", "prune", "--older-than", "1d", "--yes", *audit)[1]
        assert pruned.startswith("pruned 0 runs")
        assert len(diagnose.json("audit", "runs", "--json", *audit)["rows"]) == 3

        code, out, err = diagnose("audit", "prune", "--older-than", "0s", "--vacuum", "--yes", *audit)
        assert (code, err) == (0, "")
        assert out.startswith("pruned 2 runs finished before ")
        assert "(7 model rounds, 5 invocations, 0 protocol events)" in out
        for run_id in finished:
            assert diagnose("audit", "show", run_id, *audit)[0] == 1  # gone, rows and all
            assert diagnose.json("audit", "invocations", "--run", run_id, "--json", *audit)["rows"] == []

        (still,) = diagnose.json("audit", "runs", "--json", *audit)["rows"]
        assert (still["run_id"], still["finished_at"], still["interrupted"]) == ("run-live", None, 0)
        (call,) = diagnose.json("audit", "invocations", "--run", "run-live", "--json", *audit)["rows"]
        assert call["status"] == "STARTED"

        sink(live.tool_finished("call-1", "lookup_knowledge", "FOUND", projection={"hits": []}))
        sink(live.run_finished("DRAFT", "COMPLETED"))
    finally:
        writer.close()
    (done,) = diagnose.json("audit", "runs", "--json", *audit)["rows"]
    assert (done["run_id"], done["outcome"], done["interrupted"]) == ("run-live", "DRAFT", 0)


AUDIT_PASSWORD = "Team-Audit-Pw-5e1f0a"
WRONG_PASSWORD = "Wrong-Audit-Pw-77c3"


def _account_config(folder: Path, target: AuditTarget, user: str) -> Path:
    assert isinstance(target.location, MysqlLocation)
    where = target.location
    url = f"mysql://{user}@{where.host}:{where.port}/{where.database}"
    return team_config(folder, url, password_env="TEAM_AUDIT_PASSWORD")


def _server_rows(target: AuditTarget) -> str:
    """Every row of every table of the audit database, as text."""
    assert isinstance(target.location, MysqlLocation)
    database = target.location.database
    with root_connection(database) as conn, conn.cursor() as cursor:
        cursor.execute("SHOW TABLES")
        tables = [row[0] for row in cursor.fetchall()]
        dump = []
        for table in tables:
            cursor.execute(f"SELECT * FROM `{table}`")
            dump.append(repr(cursor.fetchall()))
    return "\n".join(dump)


def test_an_account_without_ddl_grants_runs_browses_and_prunes_once_the_schema_is_in_place(
    diagnose: Diagnose, mariadb_audit: AuditTarget, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """docs/audit.md, "Grants": CREATE, ALTER and INDEX may be revoked after the first start."""
    mariadb_audit.open().close()  # the first start, by an administrator: the schema is in place
    with audit_account(mariadb_audit, AUDIT_PASSWORD) as user:
        monkeypatch.setenv("TEAM_AUDIT_PASSWORD", AUDIT_PASSWORD)
        audit = ["--config", str(_account_config(tmp_path, mariadb_audit, user))]
        code, out, err = diagnose("run", "--scenario", "evidence-backed-diagnosis", "--json", *audit)
        assert code == 0, err
        run_id = json.loads(out)["run_id"]
        assert [row["run_id"] for row in diagnose.json("audit", "runs", "--json", *audit)["rows"]] == [run_id]
        code, out, err = diagnose("audit", "prune", "--older-than", "0s", "--vacuum", "--yes", *audit)
        assert (code, err) == (0, "")
        assert out.startswith("pruned 1 run ")


def test_the_audit_password_reaches_no_output(
    diagnose: Diagnose, mariadb_audit: AuditTarget, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pasted into a query, the password is redacted in the result, the events, the log and the rows;
    a wrong one is refused (exit 3) without being repeated."""
    mariadb_audit.open().close()
    events = tmp_path / "events.ndjson"
    with audit_account(mariadb_audit, AUDIT_PASSWORD) as user:
        monkeypatch.setenv("TEAM_AUDIT_PASSWORD", AUDIT_PASSWORD)
        audit = ["--config", str(_account_config(tmp_path, mariadb_audit, user))]
        query = f"account-service SSO 登录失败 02:00-03:00 UTC; the audit login is {AUDIT_PASSWORD}"
        run = ("run", "--scenario", "tool-finds-no-evidence", "--query", query, "--json")
        code, out, err = diagnose(*run, "--events", str(events), *audit)
        assert code == 0, err
        run_id = json.loads(out)["run_id"]
        shown = [diagnose("audit", "runs", *audit), diagnose("audit", "show", run_id, "--json", *audit)]
        monkeypatch.setenv("TEAM_AUDIT_PASSWORD", WRONG_PASSWORD)
        refused = diagnose(*run, *audit)
        rows = _server_rows(mariadb_audit)

    assert refused[0] == 3
    assert "audit unavailable" in refused[2]
    assert "Access denied" in refused[2]
    assert "the audit login is [REDACTED]" in rows  # the run was recorded, its query redacted
    outputs = {
        "stdout": out,
        "stderr": err,
        "events": events.read_text(encoding="utf-8"),
        "audit commands": json.dumps(shown, ensure_ascii=False),
        "refused run": json.dumps(refused, ensure_ascii=False),
        "rows": rows,
        "logs": "\n".join(p.read_text(encoding="utf-8") for p in (tmp_path / "state").rglob("*.log")),
    }
    for where, text in outputs.items():
        for secret in (AUDIT_PASSWORD, WRONG_PASSWORD):
            assert secret not in text, f"the audit password reached {where}"
