"""query_logs over the systemd journal (`[logs] source = "journald"`), on real journal files.

No mock: the journals are written by systemd's own `systemd-journal-remote` from export-format
fixtures of real machines (tests/data/logs/SOURCES.md) and read by the real `journalctl`.
Every expected record was counted by hand from the fixture text. The tests of the process bounds
(output cap, cancellation, an over-long entry, the environment) run a stand-in `journalctl` script
instead, because no real journal can be made endless or slow on demand.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from agent.evidence import build_adapters
from agent.settings import ConfigError, load_settings
from tests.support.journald import journalctl, write_journal
from tests.support.waiting import wait_until
from tools.adapter import AdapterResult, ToolError, ToolRequest
from tools.definitions import ToolName
from tools.input_models import QueryLogsInput
from tools.logs.journald_source import JournaldLogAdapter, line_cannot_hold, raw_needle
from tools.vocabulary import EvidenceStatus

# The sddm crash on a Raspberry Pi 4, 2021-03-13: 86 entries between these two instants.
CRASH_START = "2021-03-13T15:36:56Z"
CRASH_END = "2021-03-13T15:36:57Z"


@pytest.fixture(scope="module")
def crash_journal(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_journal(tmp_path_factory.mktemp("journal"), "raspberrypi4-sddm-crash.export")


@pytest.fixture(scope="module")
def examples_journal(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_journal(
        tmp_path_factory.mktemp("examples"), "kjournald-example.export", "kjournald-binary-example.export"
    )


async def query(adapter: JournaldLogAdapter, **fields: Any) -> AdapterResult:
    fields.setdefault("start", CRASH_START)
    fields.setdefault("end", CRASH_END)
    return await adapter.execute(
        ToolRequest("run-1", "session-1", "call-1", "query_logs", QueryLogsInput(**fields))
    )


def messages(result: AdapterResult) -> list[str]:
    return [entry["message"] for entry in result.data["entries"]]


async def test_a_service_is_its_unit_the_managers_lines_about_it_and_its_identifier(
    crash_journal: Path,
) -> None:
    """sddm: 14 entries of sddm.service's own process, 4 of systemd (PID 1) about sddm.service."""
    adapter = JournaldLogAdapter(journalctl(), crash_journal)

    by_name = await query(adapter, service="sddm", limit=200)
    by_unit = await query(adapter, service="sddm.service", limit=200)

    assert (by_name.data["matched"], by_name.data["returned"], by_name.data["truncated"]) == (18, 18, False)
    assert messages(by_unit) == messages(by_name)
    newest = by_name.data["entries"][0]
    assert newest["ts"] == "2021-03-13T15:36:56.477933Z"
    assert newest["message"] == "Stopped Simple Desktop Display Manager."
    assert newest["labels"] == {
        "SYSLOG_IDENTIFIER": "systemd",
        "_SYSTEMD_UNIT": "init.scope",
        "UNIT": "sddm.service",
        "_PID": "1",
        "_COMM": "systemd",
        "_HOSTNAME": "raspberrypi4",
    }
    oldest = by_name.data["entries"][-1]
    assert (oldest["ts"], oldest["level"], oldest["message"]) == (
        "2021-03-13T15:36:56.246179Z",
        "WARN",
        'Authentication error: "Process crashed"',
    )
    assert all(entry["service"] == "sddm" for entry in by_name.data["entries"])


async def test_level_means_this_severity_or_worse(crash_journal: Path) -> None:
    """PRIORITY 2 (crit) and 1 (alert) are FATAL, 4 is WARN: ERROR finds the two, WARN eight."""
    adapter = JournaldLogAdapter(journalctl(), crash_journal)

    errors = await query(adapter, service="sddm", level="ERROR")
    warnings = await query(adapter, service="sddm", level="WARN", limit=200)

    assert [(entry["level"], entry["message"]) for entry in errors.data["entries"]] == [
        ("FATAL", "Display server failed to start. Exiting"),
        ("FATAL", "Failed to read display number from pipe"),
    ]
    assert (errors.data["matched"], errors.data["without_level"]) == (2, 0)
    assert warnings.data["matched"] == 8
    assert {entry["level"] for entry in warnings.data["entries"]} == {"FATAL", "WARN"}


async def test_entries_without_priority_are_counted_not_hidden(crash_journal: Path) -> None:
    """The two kernel-audit ANOM_ABEND entries carry no PRIORITY field at all."""
    adapter = JournaldLogAdapter(journalctl(), crash_journal)

    filtered = await query(adapter, service="audit", level="ERROR")
    unfiltered = await query(adapter, service="audit")

    assert filtered.status == EvidenceStatus.EMPTY
    assert (filtered.data["matched"], filtered.data["without_level"]) == (0, 2)
    assert [entry["level"] for entry in unfiltered.data["entries"]] == [None, None]
    assert messages(unfiltered)[0].startswith(
        'ANOM_ABEND auid=1000 uid=1000 gid=1000 ses=1 pid=327 comm="QDBus'
    )


@pytest.mark.parametrize("contains", ["display", "DISPLAY", "Display"])
async def test_contains_is_a_case_insensitive_literal(crash_journal: Path, contains: str) -> None:
    """11 of sddm's 18 entries say display in some case, one of them only inside `-displayfd`."""
    result = await query(
        JournaldLogAdapter(journalctl(), crash_journal), service="sddm", contains=contains, limit=50
    )

    assert result.data["matched"] == 11
    assert any("-displayfd 18" in message for message in messages(result))


async def test_narrowing_the_window_reaches_every_record(crash_journal: Path) -> None:
    result = await query(
        JournaldLogAdapter(journalctl(), crash_journal),
        service="sddm",
        start="2021-03-13T15:36:56.391959Z",
        end="2021-03-13T15:36:56.441483Z",
    )

    assert [entry["ts"] for entry in result.data["entries"]] == [
        "2021-03-13T15:36:56.441483Z",
        "2021-03-13T15:36:56.394284Z",
        "2021-03-13T15:36:56.391959Z",
    ]
    assert result.data["window"] == {
        "start": "2021-03-13T15:36:56.391959Z",
        "end": "2021-03-13T15:36:56.441483Z",
    }


async def test_an_end_on_a_whole_second_covers_that_second(crash_journal: Path) -> None:
    """All 86 entries were written during 15:36:56; `end=15:36:56Z` takes them, as the file source does."""
    result = await query(
        JournaldLogAdapter(journalctl(), crash_journal),
        service="sddm",
        start="2021-03-13T15:36:55Z",
        end="2021-03-13T15:36:56Z",
    )

    assert result.data["matched"] == 18
    assert result.data["window"] == {"start": "2021-03-13T15:36:55Z", "end": "2021-03-13T15:36:56Z"}


async def test_a_misspelt_service_is_told_which_services_wrote_in_the_window(crash_journal: Path) -> None:
    result = await query(JournaldLogAdapter(journalctl(), crash_journal), service="sddmm")

    assert result.status == EvidenceStatus.EMPTY
    assert result.data["services_in_window"] == [
        "audit",
        "busybox-klogd.service",
        "init.scope",
        "kernel",
        "sddm",
        "sddm.service",
        "systemd",
        "systemd-logind",
        "systemd-logind.service",
        "user@1000.service",
    ]


async def test_a_multi_line_message_is_one_record_found_by_its_second_line(examples_journal: Path) -> None:
    result = await query(
        JournaldLogAdapter(journalctl(), examples_journal),
        service="python3",
        contains="BAR",
        start="2021-07-31T08:59:24Z",
        end="2021-07-31T08:59:25Z",
    )

    assert messages(result) == ["foo\nbar"]
    assert result.data["entries"][0]["labels"]["_SYSTEMD_USER_UNIT"].startswith("app-org.kde.yakuake-")


@pytest.mark.parametrize(
    ("service", "message"),
    [
        ("gdm-password]", "AccountsService-DEBUG(+): ActUserManager: ignoring unspecified session '8'"),
        ("/USR/SBIN/CROND", "(root) CMD (run-parts /etc/cron.hourly)"),
    ],
)
async def test_identifiers_as_syslog_wrote_them_are_services(
    examples_journal: Path, service: str, message: str
) -> None:
    result = await query(
        JournaldLogAdapter(journalctl(), examples_journal),
        service=service,
        start="2012-07-17T16:00:00Z",
        end="2012-07-17T16:01:02Z",
    )

    assert result.data["matched"] == 1
    assert messages(result)[0].startswith(message)


@pytest.mark.parametrize(
    "service", ["sddm*", "*", "s?dm", "[s]ddm", "+", "--file=/etc/passwd", "_PID=1", "sddm + _PID=1", "-"]
)
async def test_a_service_text_is_only_ever_a_value_compared_for_equality(
    crash_journal: Path, service: str
) -> None:
    """No glob, no option, no extra match: journalctl gets `FIELD=<text>` after `--`."""
    result = await query(JournaldLogAdapter(journalctl(), crash_journal), service=service)

    assert result.status == EvidenceStatus.EMPTY
    assert result.data["matched"] == 0


# Any text the input model accepts: no C0 control or DEL; surrogates cannot be sent as JSON text.
_TEXT = st.characters(min_codepoint=32, exclude_characters="\x7f", exclude_categories=["Cs"])


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    service=st.text(_TEXT, min_size=1, max_size=40),
    contains=st.none() | st.text(_TEXT, min_size=1, max_size=20),
)
async def test_any_service_and_contains_text_is_an_answer_never_a_failure(
    crash_journal: Path, service: str, contains: str | None
) -> None:
    result = await query(JournaldLogAdapter(journalctl(), crash_journal), service=service, contains=contains)

    for entry in result.data["entries"]:
        labels = entry["labels"]
        assert service in (
            labels.get("SYSLOG_IDENTIFIER"),
            labels.get("_SYSTEMD_UNIT"),
            labels.get("UNIT"),
        ) or (f"{service}.service" in (labels.get("_SYSTEMD_UNIT"), labels.get("UNIT")))
        assert contains is None or contains.lower() in entry["message"].lower()


async def test_a_missing_journal_folder_is_unavailable(tmp_path: Path) -> None:
    with pytest.raises(ToolError) as caught:
        await query(JournaldLogAdapter(journalctl(), tmp_path / "gone"), service="sddm")

    assert caught.value.code == "UNAVAILABLE"


async def test_reading_stops_at_the_output_cap_and_says_more_may_match(crash_journal: Path) -> None:
    result = await query(
        JournaldLogAdapter(journalctl(), crash_journal, max_output_bytes=4096), service="systemd"
    )

    assert result.data["truncated"] is True
    assert 0 < result.data["matched"] < 66  # systemd (PID 1 and the user manager) wrote 66 in all


# --- the process bounds, with a stand-in journalctl ----------------------------------------------


def stand_in(tmp_path: Path, body: str) -> str:
    """An executable `journalctl` that records its PID and environment, then runs `body` (Python)."""
    script = tmp_path / "journalctl"
    script.write_text(
        f"#!{sys.executable}\n"
        "import json, os, sys, time\n"
        f"open({str(tmp_path / 'pid')!r}, 'w').write(str(os.getpid()))\n"
        f"open({str(tmp_path / 'env')!r}, 'w').write(json.dumps(dict(os.environ)))\n"
        "def line(us, message):\n"
        "    entry = {'__REALTIME_TIMESTAMP': str(us), 'MESSAGE': message, 'PRIORITY': '3'}\n"
        "    sys.stdout.write(json.dumps({**entry, 'SYSLOG_IDENTIFIER': 'app'}) + '\\n')\n"
        "T = 1615649816500000\n" + body,
        encoding="utf-8",
    )
    script.chmod(0o755)
    return str(script)


def assert_gone(tmp_path: Path) -> None:
    """The stand-in's process no longer exists (killed and reaped, not left a zombie)."""
    pid = int((tmp_path / "pid").read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


async def test_an_endless_journalctl_is_killed_at_the_output_cap(tmp_path: Path) -> None:
    endless = stand_in(tmp_path, "while True:\n    line(T, 'x' * 200)\n    sys.stdout.flush()\n")

    result = await query(JournaldLogAdapter(endless, max_output_bytes=1_000_000), service="app")

    assert result.data["truncated"] is True
    assert result.data["matched"] > 1000
    assert_gone(tmp_path)


async def test_a_cancelled_call_kills_journalctl(tmp_path: Path) -> None:
    silent = stand_in(tmp_path, "time.sleep(60)\n")
    call = asyncio.ensure_future(query(JournaldLogAdapter(silent), service="app"))
    await wait_until((tmp_path / "pid").exists, "journalctl to start")

    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    assert_gone(tmp_path)


async def test_an_over_long_entry_is_skipped_and_its_neighbours_kept(tmp_path: Path) -> None:
    script = stand_in(
        tmp_path,
        "line(T + 2, 'after')\nline(T + 1, 'y' * 3_000_000)\nline(T, 'before')\n",
    )

    result = await query(JournaldLogAdapter(script, max_entry_bytes=1_000_000), service="app")

    assert messages(result) == ["after", "before"]


async def test_journalctl_never_sees_the_consoles_secrets(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-never-handed-to-journalctl")
    monkeypatch.setenv("DIAGNOSE_DB_PASSWORD", "never-handed-either")
    script = stand_in(tmp_path, "line(T, 'ok')\n")

    await query(JournaldLogAdapter(script), service="app")

    environment = (tmp_path / "env").read_text()
    assert "never-handed" not in environment
    assert "sk-never" not in environment


async def test_a_failing_journalctl_is_unavailable_and_its_text_stays_in_the_log(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    script = stand_in(
        tmp_path,
        "sys.stderr.write('No journal files were opened due to insufficient permissions.\\n')\nsys.exit(1)\n",
    )

    with pytest.raises(ToolError) as caught:
        await query(JournaldLogAdapter(script), service="app")

    assert (caught.value.code, caught.value.reason) == ("UNAVAILABLE", None)
    assert "insufficient permissions" not in str(caught.value)
    assert "insufficient permissions" in caplog.text


# --- the configuration ---------------------------------------------------------------------------


async def test_the_configuration_reads_a_journal_folder(crash_journal: Path) -> None:
    settings = load_settings(overrides={"logs": {"source": "journald", "path": str(crash_journal)}})

    adapter = build_adapters(settings)[ToolName.QUERY_LOGS]

    assert isinstance(adapter, JournaldLogAdapter)
    assert (await query(adapter, service="sddm", level="ERROR")).data["matched"] == 2


def test_without_journalctl_the_configuration_says_what_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))

    with pytest.raises(ConfigError, match=r"needs journalctl \(systemd\)"):
        build_adapters(load_settings(overrides={"logs": {"source": "journald"}}))


@settings(max_examples=300, deadline=None)
@given(message=st.text(), contains=st.text(_TEXT, min_size=1, max_size=12))
@example(message="\u212a Kelvin", contains="k k")
@example(message="\u0130STANBUL", contains="istanbul")
@example(message='said "hi"\nthen \\ left', contains="then \\ left")
def test_an_entry_is_passed_over_unparsed_only_when_its_message_cannot_hold_contains(
    message: str, contains: str
) -> None:
    """The shortcut that skips JSON parsing never hides a match: whatever the message holds (the
    Kelvin sign lower-cases to `k`, escapes, non-ASCII), an entry whose message contains the text
    in any case is parsed."""
    needle = raw_needle(contains.lower())
    entry = {"__REALTIME_TIMESTAMP": "1", "MESSAGE": message}
    # As journalctl writes it (UTF-8 as it is), and as a writer escaping all non-ASCII text would.
    lines = [json.dumps(entry, separators=(",", ":"), ensure_ascii=ascii).encode() for ascii in (False, True)]

    if needle is not None and contains.lower() in message.lower():
        assert not any(line_cannot_hold(line, needle) for line in lines)
