"""query_logs over real logs as their systems wrote them (tests/data/logs/SOURCES.md): 17 formats from
14 systems, each searched as-is by service, window, level and `contains`, with no configuration but
a time zone where the writer left it out. Every expected count was counted by hand from the files.

Year-less stamps (syslog, glog) take their year from the file's modification time, so those samples
are copied and given a fixed one.
"""

from __future__ import annotations

import os
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tools.adapter import AdapterResult, ToolRequest
from tools.input_models import QueryLogsInput
from tools.logs.file_source import LogFileAdapter

SAMPLES = Path(__file__).parents[1] / "data" / "logs"
WHOLE = {"start": "2000-01-01T00:00:00Z", "end": "2030-01-01T00:00:00Z"}


async def ask(path: Path, *, timezone: str = "UTC", **fields: Any) -> AdapterResult:
    for key, value in WHOLE.items():
        fields.setdefault(key, value)
    fields.setdefault("limit", 200)
    adapter = LogFileAdapter(path, max_window_minutes=40 * 365 * 24 * 60, timezone=timezone)
    request = ToolRequest("run-1", "session-1", "call-1", "query_logs", QueryLogsInput(**fields))
    return await adapter.execute(request)


def with_mtime(tmp_path: Path, sample: str, moment: datetime) -> Path:
    """A copy of a sample modified at `moment`: what a year-less stamp is read against."""
    copy = tmp_path / Path(sample).name
    shutil.copyfile(SAMPLES / sample, copy)
    stamp = moment.timestamp()
    os.utime(copy, (stamp, stamp))
    return copy


def messages(result: AdapterResult) -> list[str]:
    return [entry["message"] for entry in result.data["entries"]]


# ------------------------------------------------------------------ syslog RFC 3164 (automount, sshd)
async def test_bsd_syslog_tags_are_services_and_a_misspelt_one_lists_them(tmp_path: Path) -> None:
    path = with_mtime(tmp_path, "syslog/automount.log", datetime(2026, 11, 4, tzinfo=UTC))
    window = {"start": "2026-11-03T09:00:00Z", "end": "2026-11-03T10:00:00Z"}

    automount = await ask(path, service="automount", **window)
    failed = await ask(path, service="automount", contains="FAILED", **window)
    errors = await ask(path, service="automount", level="ERROR", contains="failed", **window)
    misspelt = await ask(path, service="automounter", **window)

    assert automount.data["matched"] == 3
    assert (await ask(path, service="sudo", **window)).data["matched"] == 1
    assert messages(failed) == [
        "lookup(file): lookup for opt failed",
        "lookup(file): lookup for foobar failed",
    ]
    # No severity in a BSD syslog file: a level filter says so instead of answering "no errors".
    assert errors.status == "EMPTY"
    assert errors.data["without_level"] == 2
    assert misspelt.status == "EMPTY"
    assert misspelt.data["services_in_window"] == ["automount", "sudo"]


async def test_a_bsd_stamp_takes_the_latest_year_not_after_the_files_modification(tmp_path: Path) -> None:
    """Written in November, read in January: the records are of the year before."""
    path = with_mtime(tmp_path, "syslog/automount.log", datetime(2027, 1, 2, 0, 30, tzinfo=UTC))

    result = await ask(path, service="sudo")

    assert [entry["ts"] for entry in result.data["entries"]] == ["2026-11-03T09:47:02Z"]


async def test_openssh_failed_logins_are_found_in_any_case(tmp_path: Path) -> None:
    path = with_mtime(tmp_path, "openssh/secure", datetime(2026, 3, 1, tzinfo=UTC))
    window = {"start": "2026-02-22T16:45:00Z", "end": "2026-02-22T16:45:30Z"}

    failed = await ask(path, service="sshd", contains="failed PASSWORD", **window)
    fatal = await ask(path, service="sshd", contains="fatal")
    leveled = await ask(path, service="sshd", level="WARN")

    assert failed.data["matched"] == 3  # 16:45:20, :22 and :26 of the 8 in the file
    assert fatal.data["matched"] == 2
    assert leveled.data["matched"] == 0
    assert leveled.data["without_level"] == 20


# ------------------------------------------------------------------ web servers
async def test_access_log_status_is_an_inferred_level() -> None:
    path = SAMPLES / "access" / "access.log"
    window = {"start": "2009-07-20T22:59:00Z", "end": "2009-07-20T23:00:00Z"}

    everything = await ask(path, service="access", **window)
    warned = await ask(path, service="access", level="WARN", **window)
    kernel = await ask(path, service="access", contains="VMKERNEL", **window)

    assert everything.data["matched"] == 3
    assert [entry["labels"]["status"] for entry in warned.data["entries"]] == ["404"]
    assert warned.data["entries"][0]["level_inferred"] is True
    assert kernel.data["matched"] == 1


async def test_nginx_error_log_continuation_lines_belong_to_their_record() -> None:
    path = SAMPLES / "nginx" / "error.log"

    in_2019 = await ask(path, service="error", start="2019-01-01T00:00:00Z", end="2019-12-31T00:00:00Z")
    third_line = await ask(path, service="error", contains="FEE_Field_Category")
    errors = await ask(path, service="error", level="ERROR")

    assert in_2019.data["matched"] == 2
    [record] = third_line.data["entries"]
    assert record["ts"] == "2019-10-30T23:26:34Z"
    assert record["level"] == "ERROR"
    assert record["message"].startswith('*180289 FastCGI sent in stderr: "PHP message: PHP Warning')
    assert record["cut"] is True  # three lines, longer than an entry shows
    assert errors.data["matched"] == 4
    assert errors.data["without_level"] == 0


async def test_apache_error_levels_2_2_and_2_4() -> None:
    path = SAMPLES / "apache" / "error_log"

    errors = await ask(path, service="error_log", level="ERROR")
    info = await ask(path, service="error_log", level="INFO")

    assert [entry["ts"] for entry in errors.data["entries"]] == [
        "2016-12-26T16:22:08Z",
        "2011-09-09T10:42:29.902022Z",
    ]
    assert info.data["matched"] == 3  # notice is INFO


# ------------------------------------------------------------------ JSON loggers
async def test_bunyan_numeric_levels() -> None:
    path = SAMPLES / "bunyan" / "renovate.log"

    info = await ask(path, service="renovate", level="INFO")
    debug = await ask(path, service="renovate", level="DEBUG")
    pending = await ask(path, service="renovate", contains="Pending", end="2023-03-24T14:26:17.999Z")
    # An end on a whole second covers that second: 14:26:18.330 and .331 too.
    through_18 = await ask(path, service="renovate", contains="Pending", end="2023-03-24T14:26:18Z")

    assert messages(info) == ["Dependency extraction complete"]
    assert debug.data["matched"] == 10
    assert pending.data["matched"] == 3
    assert through_18.data["matched"] == 5


async def test_pino_epoch_milliseconds_and_ecs_service_name() -> None:
    result = await ask(SAMPLES / "pino" / "payment.log", service="payment", level="INFO")

    [entry] = result.data["entries"]
    assert entry["ts"] == "2025-04-24T22:08:37.537Z"
    assert entry["message"] == "Charge request received."


async def test_ecs_log_level_with_critical_as_fatal() -> None:
    path = SAMPLES / "ecs" / "app.json"

    errors = await ask(path, service="app", level="ERROR")
    fatal = await ask(path, service="app", level="FATAL")

    assert messages(errors) == ["this is a critical message num=52", "this is a error message num=15"]
    assert messages(fatal) == ["this is a critical message num=52"]


async def test_journald_priority_and_identifier() -> None:
    path = SAMPLES / "journald" / "journal.json"

    alert = await ask(path, service="python", level="ERROR")
    both = await ask(path, service="python", start="2018-08-21T14:04:21Z", end="2018-08-21T14:04:22Z")

    assert messages(alert) == ["GPS Reference longitude: 7.358143333"]
    assert alert.data["entries"][0]["level"] == "FATAL"  # priority 1, alert
    # One instant, two records: the later written is the newer, one microsecond apart.
    assert [entry["ts"] for entry in both.data["entries"]] == [
        "2018-08-21T14:04:21.221374Z",
        "2018-08-21T14:04:21.221373Z",
    ]


async def test_logfmt_levels_and_fields() -> None:
    path = SAMPLES / "logfmt" / "virtual-kubelet.log"

    errors = await ask(path, service="virtual-kubelet", level="ERROR")
    warned = await ask(path, service="virtual-kubelet", level="WARN")
    missing = await ask(path, service="virtual-kubelet", contains="podnotfound")

    assert errors.data["matched"] == 2
    assert warned.data["matched"] == 3
    assert missing.data["matched"] == 3
    assert warned.data["entries"][1]["labels"]["error"].endswith("PodNotFound")


async def test_elasticsearch_json_stack_trace_found_by_a_word_on_its_40th_line() -> None:
    """Elasticsearch 7 prints an error's stack trace over 41 lines of one JSON object; the record is
    one, found by a word on its 40th line, shown by its first lines and marked as cut."""
    path = SAMPLES / "elasticsearch" / "es_json_logs_tests.log"
    window = {"start": "2019-01-10T10:18:00Z", "end": "2019-01-10T10:19:00Z"}

    cause = await ask(path, service="es_json_logs_tests", contains="RuntimeException", **window)
    errors = await ask(path, service="es_json_logs_tests", level="ERROR", **window)
    everything = await ask(path, service="es_json_logs_tests", timezone="Europe/Berlin", **window)

    [record] = cause.data["entries"]
    assert record["ts"] == "2019-01-10T10:18:58.560Z"
    assert record["level"] == "ERROR"
    assert record["message"].startswith("error message\njava.lang.Exception: exception message\nat org.")
    assert record["cut"] is True
    assert "RuntimeException" not in record["message"]
    assert messages(errors)[1] == "This is an error message"
    # The plain text line among the JSON has no zone: read in the configured one (Berlin, +01:00).
    assert everything.data["matched"] == 9
    assert "[testStacktrace] before test" in everything.data["entries"][2]["message"]


async def test_docker_json_file_lines_carry_their_containers_levels() -> None:
    path = SAMPLES / "docker" / "nginx-json.log"

    errors = await ask(path, service="nginx-json", level="ERROR")
    warned = await ask(path, service="nginx-json", level="WARN")
    favicon = await ask(path, service="nginx-json", contains="favicon")

    assert errors.data["matched"] == 4
    assert warned.data["matched"] == 6
    assert favicon.data["entries"][0]["ts"] == "2016-10-25T14:49:34Z"


# ------------------------------------------------------------------ text logs
async def test_log4j_text_zookeeper_lines() -> None:
    path = SAMPLES / "java" / "farm.log"

    zookeeper = await ask(path, service="farm", contains="zookeeper")
    errors = await ask(path, service="farm", level="ERROR")
    last_minute = await ask(path, service="farm", start="2025-01-24T07:05:00Z", end="2025-01-24T07:06:00Z")

    assert zookeeper.data["matched"] == 3
    assert errors.status == "EMPTY"
    assert errors.data["without_level"] == 0
    assert last_minute.data["matched"] == 1


async def test_cri_partial_pieces_are_joined_into_their_line() -> None:
    path = SAMPLES / "cri" / "farm" / "0.log"
    original = (SAMPLES / "java" / "farm.log").read_text().splitlines()[1]

    starting = await ask(path, service="farm", contains="Starting FarmApplication")
    everything = await ask(path, service="farm")

    assert messages(starting) == [original]  # the service is the container's folder
    assert everything.data["matched"] == 20


async def test_spark_two_digit_years_within_a_window() -> None:
    path = SAMPLES / "spark" / "executor.log"
    window = {"start": "2017-06-09T20:10:50Z", "end": "2017-06-09T20:10:52Z"}

    result = await ask(path, service="executor", contains="memorystore", **window)
    window_only = await ask(path, service="executor", **window)

    assert result.data["matched"] == 4
    assert window_only.data["matched"] == 58
    assert window_only.data["truncated"] is False


async def test_glog_letters_and_year_less_stamps(tmp_path: Path) -> None:
    path = with_mtime(tmp_path, "glog/logging_unittest.log", datetime(2026, 6, 1, tzinfo=UTC))

    errors = await ask(path, service="logging_unittest", level="ERROR")
    warned = await ask(path, service="logging_unittest", level="WARN")

    assert messages(errors) == ["foo 1000 0000001000 3e8", "Log every 3, iteration 19"]
    assert errors.data["entries"][1]["ts"] == "2026-05-17T15:04:22.619632Z"
    assert warned.data["matched"] == 3


async def test_a_continuation_line_is_searched_with_its_record() -> None:
    path = SAMPLES / "python" / "multiline.log"

    result = await ask(path, service="multiline", contains="HOW ARE YOU")
    errors = await ask(path, service="multiline", level="ERROR")

    assert messages(result) == ["2009-07-20 22:59:27,672:DEBUG:Hello, World!\n  How are you today?"]
    assert messages(errors) == ["2009-07-20 22:59:30,221:ERROR:Goodbye, World!"]


@pytest.mark.parametrize(
    ("sample", "service"),
    [
        ("syslog/automount.log", "automount"),
        ("access/access.log", "access"),
        ("java/farm.log", "farm"),
        ("bunyan/renovate.log", "renovate"),
        ("pino/payment.log", "payment"),
        ("ecs/app.json", "app"),
        ("journald/journal.json", "python"),
        ("logfmt/virtual-kubelet.log", "virtual-kubelet"),
        ("glog/logging_unittest.log", "logging_unittest"),
        ("spark/executor.log", "executor"),
        ("python/multiline.log", "multiline"),
        ("elasticsearch/es_json_logs_tests.log", "es_json_logs_tests"),
        ("nginx/error.log", "error"),
        ("apache/error_log", "error_log"),
        ("openssh/secure", "sshd"),
        ("docker/nginx-json.log", "nginx-json"),
        ("cri/farm/0.log", "farm"),
    ],
)
async def test_every_sample_is_read_whole_without_configuration(sample: str, service: str) -> None:
    """No line of any sample is left unread: each is a record or part of one."""
    adapter = LogFileAdapter(SAMPLES / sample, max_window_minutes=60 * 24 * 365 * 100)
    request = ToolRequest(
        "r",
        "s",
        "c",
        "query_logs",
        QueryLogsInput(service=service, start="1971-01-01T00:00:00Z", end="2099-01-01T00:00:00Z", limit=1),
    )

    result = await adapter.execute(request)

    assert result.status == "FOUND"
    assert adapter.skipped_lines == 0


# (sample, modified, time zone, service, window start, window end, level, contains, matched, without_level)
EVERY_FILTER = [
    (
        "syslog/automount.log",
        "2026-11-04",
        "UTC",
        "automount",
        "2026-11-03T09:00:00Z",
        "2026-11-03T10:00:00Z",
        "ERROR",
        "lookup",
        0,
        2,
    ),
    (
        "access/access.log",
        None,
        "UTC",
        "access",
        "2009-07-20T22:59:00Z",
        "2009-07-20T23:00:00Z",
        "WARN",
        "vmkboot",
        1,
        0,
    ),
    (
        "java/farm.log",
        None,
        "UTC",
        "farm",
        "2025-01-24T07:00:00Z",
        "2025-01-24T07:01:00Z",
        "INFO",
        "zookeeper",
        3,
        0,
    ),
    (
        "bunyan/renovate.log",
        None,
        "UTC",
        "renovate",
        "2023-03-24T14:26:17Z",
        "2023-03-24T14:26:18Z",
        "DEBUG",
        "pending",
        5,
        0,
    ),
    (
        "pino/payment.log",
        None,
        "UTC",
        "payment",
        "2025-04-24T22:08:00Z",
        "2025-04-24T22:09:00Z",
        "INFO",
        "charge",
        1,
        0,
    ),
    (
        "ecs/app.json",
        None,
        "UTC",
        "app",
        "2025-01-13T09:58:13Z",
        "2025-01-13T09:58:13Z",
        "WARN",
        "message",
        3,
        0,
    ),
    (
        "journald/journal.json",
        None,
        "UTC",
        "python",
        "2018-08-21T14:04:21Z",
        "2018-08-21T14:04:21Z",
        "ERROR",
        "longitude",
        1,
        0,
    ),
    (
        "logfmt/virtual-kubelet.log",
        None,
        "UTC",
        "virtual-kubelet",
        "2021-09-15T21:17:00Z",
        "2021-09-15T21:18:00Z",
        "WARN",
        "pod",
        2,
        0,
    ),
    (
        "glog/logging_unittest.log",
        "2026-06-01",
        "UTC",
        "logging_unittest",
        "2026-05-17T15:04:22Z",
        "2026-05-17T15:04:22Z",
        "WARN",
        "iteration",
        1,
        0,
    ),
    (
        "spark/executor.log",
        None,
        "UTC",
        "executor",
        "2017-06-09T20:10:50Z",
        "2017-06-09T20:10:52Z",
        "INFO",
        "memorystore",
        4,
        0,
    ),
    (
        "python/multiline.log",
        None,
        "UTC",
        "multiline",
        "2009-07-20T22:59:00Z",
        "2009-07-20T23:00:00Z",
        "DEBUG",
        "today",
        1,
        0,
    ),
    (
        "elasticsearch/es_json_logs_tests.log",
        None,
        "Europe/Berlin",
        "es_json_logs_tests",
        "2019-01-10T10:18:58Z",
        "2019-01-10T10:18:58Z",
        "ERROR",
        "exception",
        1,
        0,
    ),
    (
        "nginx/error.log",
        None,
        "UTC",
        "error",
        "2019-10-30T23:00:00Z",
        "2019-10-31T00:00:00Z",
        "ERROR",
        "php warning",
        1,
        0,
    ),
    (
        "apache/error_log",
        None,
        "UTC",
        "error_log",
        "2016-12-26T16:00:00Z",
        "2016-12-26T17:00:00Z",
        "ERROR",
        "favicon",
        1,
        0,
    ),
    (
        "openssh/secure",
        "2026-03-01",
        "UTC",
        "sshd",
        "2026-02-22T16:45:00Z",
        "2026-02-22T16:45:30Z",
        "ERROR",
        "failed password",
        0,
        3,
    ),
    (
        "docker/nginx-json.log",
        None,
        "UTC",
        "nginx-json",
        "2019-10-30T23:26:34Z",
        "2019-10-30T23:26:34Z",
        "WARN",
        "FEE_Field",
        3,
        0,
    ),
    (
        "cri/farm/0.log",
        None,
        "UTC",
        "farm",
        "2025-01-24T07:00:30Z",
        "2025-01-24T07:00:30Z",
        "INFO",
        "farmapplication",
        2,
        0,
    ),
]


@pytest.mark.parametrize(
    (
        "sample",
        "modified",
        "zone",
        "service",
        "start",
        "end",
        "level",
        "contains",
        "matched",
        "without_level",
    ),
    EVERY_FILTER,
    ids=[row[0] for row in EVERY_FILTER],
)
async def test_every_sample_searched_by_service_window_level_and_contains(
    tmp_path: Path,
    sample: str,
    modified: str | None,
    zone: str,
    service: str,
    start: str,
    end: str,
    level: str,
    contains: str,
    matched: int,
    without_level: int,
) -> None:
    """All four filters at once on every sample, counts by hand (a level filter on a format without
    severities finds nothing and says how many records it could not judge)."""
    path = SAMPLES / sample
    if modified is not None:
        path = with_mtime(tmp_path, sample, datetime.fromisoformat(modified).replace(tzinfo=UTC))

    result = await ask(
        path, timezone=zone, service=service, start=start, end=end, level=level, contains=contains
    )

    assert (result.data["matched"], result.data["without_level"]) == (matched, without_level)
    assert all(contains.lower() in entry["message"].lower() for entry in result.data["entries"])
