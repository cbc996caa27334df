"""`diagnose` when what surrounds it fails: Ctrl-C at any moment, a full or closed standard output, a
closed standard input, a command line that does not parse, a reader of the events that leaves. Each
ends with a documented exit code and at most one line on stderr, never a traceback.
(docs/contracts.md, "CLI"; docs/command-line.md, "Headless use: `diagnose run`")

Every test runs a real process: signals, descriptors and the interpreter's last flush only exist there.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agent.vocabulary import EXIT_CODE_OF, INTERRUPTED, OUTPUT_ERROR, SETUP_ERROR, USAGE_ERROR, Outcome
from console.commands.main import main
from tests.support.audit_reader import AuditReader
from tests.support.resilience import no_conclusion_draft, scenario, tool_call, write_scenario

REPO = Path(__file__).resolve().parents[2]
DRAFTING = "evidence-backed-diagnosis"  # a built-in scenario that ends DRAFT at once
SLOW_DRAFT = (
    "name: slow\nquery: 'payment-service 超时'\nrounds:\n"
    '  - text: \'{"conclusion": null, "analysis": [], "action_plan": [], "recommendations": [],'
    ' "limitations": {"checked_scope": ["x"], "missing_info": ["y"]}}\'\n'
    "    delay_ms: 30000\n"
)


def child(*argv: str | Path, prelude: str = "", stdin: int | None = None) -> subprocess.Popen[str]:
    """`diagnose ...` in its own process, `prelude` first (it marks the moment a test waits for)."""
    code = f"import sys\n{prelude}\nfrom console.commands.main import main\nsys.exit(main(sys.argv[1:]))"
    return subprocess.Popen(
        [sys.executable, "-c", code, *map(str, argv)],
        cwd=REPO,
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for(marker: Path, proc: subprocess.Popen[str], timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while not marker.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            pytest.fail(f"the moment never came: {proc.communicate()}")
        time.sleep(0.02)


def no_traceback(err: str) -> None:
    assert "Traceback" not in err, err
    assert "Exception ignored" not in err, err


# ------------------------------------------------------------------ Ctrl-C at every moment of a run
# Each prelude marks a moment (a file appears) and holds the process there, so the signal lands in it.
MOMENTS = {
    # Haystack's import: the longest part of a start, before anything else of the run.
    "importing the engine": """
import importlib.abc, pathlib, time
class Hold(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name == "haystack":
            pathlib.Path(MARKER).touch()
            time.sleep(60)
        return None
sys.meta_path.insert(0, Hold())
MARKER = sys.argv.pop()
""",
    "opening the audit": """
import pathlib, time
import audit.factory as factory
opened = factory.open_audit_store
def held(*args, **kwargs):
    pathlib.Path(MARKER).touch()
    time.sleep(60)
    return opened(*args, **kwargs)
factory.open_audit_store = held
MARKER = sys.argv.pop()
""",
    # `--query-file -` from a pipe that never sends anything: a real wait of a real start.
    "reading the query from standard input": """
import pathlib
import agent.input_files as files
bounded = files.read_bounded
def marked(stream, *args, **kwargs):
    if stream is sys.stdin.buffer:
        pathlib.Path(MARKER).touch()
    return bounded(stream, *args, **kwargs)
files.read_bounded = marked
MARKER = sys.argv.pop()
""",
}


@pytest.mark.parametrize(
    "moment",
    # Opening the audit is one more moment of the same setup phase: a `long` variant.
    [pytest.param(m, marks=pytest.mark.long) if m == "opening the audit" else m for m in MOMENTS],
)
def test_ctrl_c_before_the_run_exists_is_one_line_and_the_cancel_code(moment: str, tmp_path: Path) -> None:
    marker = tmp_path / "moment"
    audit = tmp_path / "audit.db"
    argv: list[str | Path] = ["run", "--audit-db", audit, "--json"]
    argv += (
        ["--query-file", "-"] if "standard input" in moment else ["--scenario", "evidence-backed-diagnosis"]
    )
    proc = child(*argv, marker, prelude=MOMENTS[moment], stdin=subprocess.PIPE)
    wait_for(marker, proc)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)

    no_traceback(err)
    assert proc.returncode == INTERRUPTED == EXIT_CODE_OF[Outcome.CANCELLED]
    assert err.splitlines() == ["diagnose: interrupted before a run started: nothing was run"]
    assert out == ""
    if audit.exists():  # opened before the moment: no run was recorded, none is left open
        assert AuditReader(audit).runs() == []


def test_ctrl_c_while_the_run_closes_leaves_its_result_standing(tmp_path: Path) -> None:
    """The run has ended DRAFT and is audited: a Ctrl-C while it closes does not make it something else."""
    marker = tmp_path / "closing"
    prelude = """
import asyncio, pathlib
import console.wiring as wiring
close = wiring.RunEnvironment.aclose
async def held(self, **kwargs):
    pathlib.Path(MARKER).touch()
    await asyncio.sleep(1.0)
    await close(self, **kwargs)
wiring.RunEnvironment.aclose = held
MARKER = sys.argv.pop()
"""
    audit = tmp_path / "audit.db"
    proc = child(
        "run",
        "--scenario",
        "evidence-backed-diagnosis",
        "--json",
        "--audit-db",
        audit,
        marker,
        prelude=prelude,
    )
    wait_for(marker, proc)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)

    no_traceback(err)
    assert proc.returncode == 0, err
    assert json.loads(out)["outcome"] == "DRAFT"
    assert [r["outcome"] for r in AuditReader(audit).runs()] == ["DRAFT"]


def test_ctrl_c_in_another_command_is_one_line(tmp_path: Path) -> None:
    marker = tmp_path / "listing"
    prelude = """
import pathlib, time
import agent.scenarios as scenarios
listed = scenarios.builtin_scenarios
def held():
    pathlib.Path(MARKER).touch()
    time.sleep(60)
    return listed()
scenarios.builtin_scenarios = held
MARKER = sys.argv.pop()
"""
    proc = child("scenarios", marker, prelude=prelude)
    wait_for(marker, proc)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    no_traceback(err)
    assert (proc.returncode, err, out) == (INTERRUPTED, "diagnose: interrupted\n", "")


# ------------------------------------------------------------------ standard streams
def shell(command: str, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    """`command` with `diagnose` meaning this interpreter's `-m console`, as a shell runs it."""
    script = command.replace("diagnose", f"{sys.executable} -m console", 1)
    return subprocess.run(
        ["sh", "-c", script], capture_output=True, text=True, timeout=120, cwd=REPO, check=False
    )


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full (Linux)")
@pytest.mark.parametrize(
    "command",
    [
        "diagnose run --scenario evidence-backed-diagnosis --audit-db {audit} --json > /dev/full",
        "diagnose run --scenario evidence-backed-diagnosis --audit-db {audit} --events - > /dev/full",
        "diagnose scenarios > /dev/full",
        "diagnose audit runs --audit-db {audit} > /dev/full",
        "diagnose run --help > /dev/full",
    ],
    ids=["run", "run-events", "scenarios", "audit-runs", "help"],
)
def test_a_full_disk_on_stdout_is_one_line_and_the_output_code(command: str, tmp_path: Path) -> None:
    audit = tmp_path / "audit.db"
    if "audit runs" in command:
        assert main(["run", "--scenario", "evidence-backed-diagnosis", "--audit-db", str(audit)]) == 0
    done = shell(command.format(audit=audit), tmp_path)
    no_traceback(done.stderr)
    assert done.returncode == OUTPUT_ERROR
    assert done.stderr.splitlines()[-1] == "diagnose: cannot write standard output: No space left on device"


def test_a_closed_stdout_is_refused_before_anything_runs(tmp_path: Path) -> None:
    audit = tmp_path / "audit.db"
    done = shell(f"diagnose run --scenario evidence-backed-diagnosis --audit-db {audit} >&-", tmp_path)
    no_traceback(done.stderr)
    assert done.returncode == OUTPUT_ERROR
    assert done.stderr == (
        "diagnose: standard output is closed: nothing could be shown (redirect it to a file or /dev/null)\n"
    )
    assert not audit.exists()  # nothing ran: no descriptor 1 was handed to the audit file either


def test_a_closed_stdin_is_a_setup_error_naming_it(tmp_path: Path) -> None:
    audit = tmp_path / "audit.db"
    done = shell(f"diagnose run --query-file - --audit-db {audit} <&-", tmp_path)
    no_traceback(done.stderr)
    assert done.returncode == SETUP_ERROR
    assert done.stderr == "diagnose: standard input is closed: there is no query to read (--query-file -)\n"


def test_a_closed_stdin_or_stderr_changes_nothing_else(tmp_path: Path) -> None:
    """A run that needs neither still runs and prints its result; the audit never takes their numbers."""
    audit = tmp_path / "audit.db"
    done = shell(
        f"diagnose run --scenario evidence-backed-diagnosis --audit-db {audit} --json <&- 2>&-", tmp_path
    )
    assert done.returncode == 0
    assert json.loads(done.stdout)["outcome"] == "DRAFT"


# ------------------------------------------------------------------ usage errors and the exit-code list
def test_usage_errors_have_their_own_code_apart_from_every_outcome(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert USAGE_ERROR not in {*EXIT_CODE_OF.values(), SETUP_ERROR, OUTPUT_ERROR}
    for argv in (
        ["run", "--no-such-option"],
        ["run", "--query"],  # a missing value
        ["--scenario"],  # the console's options
        ["audit", "runs", "--limit", "0"],
        ["audit", "invocations", "--tool", "query_log"],
        ["eval", "--repeat", "0"],
        ["no-such-command"],
    ):
        with pytest.raises(SystemExit) as exited:
            main(argv)
        assert exited.value.code == USAGE_ERROR, argv
        err = capsys.readouterr().err
        assert "error:" in err
        assert "Traceback" not in err


def test_a_usage_error_never_echoes_terminal_control_characters(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["run", "--\x1b[2Jbogus"])
    assert exited.value.code == USAGE_ERROR
    err = capsys.readouterr().err
    assert "\x1b" not in err
    assert "\\x1b[2Jbogus" in err


def documented_codes(text: str) -> set[int]:
    return {int(code) for code in re.findall(r"^\s*\|?\s*(\d+)\s", text, flags=re.MULTILINE)}


def test_run_help_and_the_command_line_page_list_every_exit_code(capsys: pytest.CaptureFixture[str]) -> None:
    every = {*EXIT_CODE_OF.values(), SETUP_ERROR, USAGE_ERROR, OUTPUT_ERROR}
    with pytest.raises(SystemExit) as exited:
        main(["run", "--help"])
    assert exited.value.code == 0
    help_text = capsys.readouterr().out
    listed = help_text[help_text.index("exit codes:") :]
    assert documented_codes(listed) == every
    page = (REPO / "docs" / "command-line.md").read_text(encoding="utf-8")
    table = page[page.index("| exit | outcome |") :]
    table = table[: table.index("\n\n")]
    assert documented_codes(table) == every


# ------------------------------------------------------------------ a reader of --events - that leaves
def test_a_reader_leaving_events_on_stdout_cancels_the_run(tmp_path: Path) -> None:
    """`diagnose run --events - | head -1`: once the reader has gone, the run stops as a cancel
    instead of spending every remaining model round (and its budget) on nobody."""
    rounds: list[dict[str, object]] = [
        {
            "tool_calls": [
                tool_call(
                    f"call-{n}",
                    "lookup_knowledge",
                    {"query": f"连接池 {n}"},
                    evaluates=f"call-{n - 1}" if n > 1 else None,
                )
            ],
            "delay_ms": 400,
        }
        for n in range(1, 7)
    ]
    rounds.append({"text": no_conclusion_draft(), "delay_ms": 400})
    script = write_scenario(tmp_path, scenario(rounds, settings={"budget": {"max_model_calls": 8}}))
    audit = tmp_path / "audit.db"
    proc = child("run", "--scenario", script, "--events", "-", "--json", "--audit-db", audit)
    assert proc.stdout is not None
    first = json.loads(proc.stdout.readline())  # what `head -1` reads before it exits
    proc.stdout.close()
    _, err = proc.communicate(timeout=120)

    assert first["type"] == "run_started"
    assert proc.returncode == EXIT_CODE_OF[Outcome.CANCELLED], err
    assert err == ""  # the reader left: as with `| head`, the command ends quietly, with its code
    audited = AuditReader(audit)
    runs = audited.runs()
    assert [(r["outcome"], r["stop_reason"]) for r in runs] == [("CANCELLED", "CANCELLED")]
    rounds_run = len(audited.model_rounds(runs[0]["run_id"]))
    assert rounds_run < len(rounds)  # the script had more: they were never asked for
