"""Each format family reads the spellings its writers use: stamps, zones, years, levels, services.

Lines are the documented examples of each format (RFC 5424 §6.5 for syslog) or lines in the shape
the writer's documentation gives; the real samples are in test_logs_real_samples.py.
"""

from __future__ import annotations

from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from tools.logs.file_formats import build_formats, recognise
from tools.logs.line_format import Head
from tools.logs.severity import Severity, severity_of_field, severity_of_word
from tools.logs.timestamps import Clock, epoch_ns

MTIME = int(datetime(2026, 12, 6, 12, tzinfo=UTC).timestamp()) * 1_000_000_000
CLOCK = Clock(ZoneInfo("UTC"), MTIME)
FORMATS = build_formats()


def ns(text: str) -> int:
    return int(datetime.fromisoformat(text).timestamp() * 1_000_000) * 1000


def head(name: str, line: str, clock: Clock = CLOCK) -> Head:
    found = FORMATS[name].head(line, clock)
    assert found is not None, line
    return found


@pytest.mark.parametrize(
    ("line", "instant", "severity", "service"),
    [
        (  # RFC 5424 §6.5, example 1
            "<34>1 2003-10-11T22:14:15.003Z mymachine.example.com su - ID47 - 'su root' failed for lonvick",
            "2003-10-11T22:14:15.003+00:00",
            Severity.FATAL,  # priority 34: facility 4, severity 2 (critical)
            "su",
        ),
        (  # RFC 5424 §6.5, example 2
            "<165>1 2003-08-24T05:14:15.000003-07:00 192.0.2.1 myproc 8710 - - %% It's time to make"
            " the do-nuts.",
            "2003-08-24T12:14:15.000003+00:00",
            Severity.INFO,  # notice
            "myproc",
        ),
        (
            "<13>Dec  6 04:02:01 host CRON[123]: (root) CMD (run-parts)",
            "2026-12-06T04:02:01+00:00",
            Severity.INFO,
            "CRON",
        ),
        ("Dec  6 04:02:01 host kernel: eth0 link up", "2026-12-06T04:02:01+00:00", None, "kernel"),
        (
            "2026-12-06T04:02:01.123456+01:00 host sshd[99]: Accepted publickey for ops",
            "2026-12-06T03:02:01.123456+00:00",
            None,
            "sshd",
        ),
    ],
)
def test_syslog_spellings(line: str, instant: str, severity: Severity | None, service: str) -> None:
    found = head("syslog", line)

    assert (found.instant_ns, found.severity, found.service) == (ns(instant), severity, service)


def test_a_bsd_stamp_after_the_files_modification_is_last_years() -> None:
    """Written on 31 December, the file last touched on 2 January: December is of the year before."""
    january = Clock(ZoneInfo("UTC"), int(datetime(2027, 1, 2, tzinfo=UTC).timestamp()) * 1_000_000_000)

    assert head("syslog", "Dec 31 23:59:59 host app: bye", january).instant_ns == ns(
        "2026-12-31T23:59:59+00:00"
    )
    assert head("syslog", "Jan  1 00:00:01 host app: hi", january).instant_ns == ns(
        "2027-01-01T00:00:01+00:00"
    )


@pytest.mark.parametrize(
    ("line", "instant", "severity"),
    [
        (
            "2026-12-06 04:02:01,123 ERROR [main] c.e.Pay - declined",
            "2026-12-06T04:02:01.123+00:00",
            Severity.ERROR,
        ),
        (
            "2026-12-06 04:02:01.123 [main] WARN  c.e.Pay - slow",
            "2026-12-06T04:02:01.123+00:00",
            Severity.WARN,
        ),
        (
            "2026-12-06 04:02:01,123 - pay.api - CRITICAL - down",
            "2026-12-06T04:02:01.123+00:00",
            Severity.FATAL,
        ),
        ("2026-12-06T04:02:01.5Z SEVERE: pool exhausted", "2026-12-06T04:02:01.5+00:00", Severity.ERROR),
        ("[2026-12-06 04:02:01] production.INFO: queued", "2026-12-06T04:02:01+00:00", Severity.INFO),
        ("2026/12/06 04:02:01 [error] upstream timed out", "2026-12-06T04:02:01+00:00", Severity.ERROR),
        ("26/12/06 04:02:01 INFO executor.Executor: ok", "2026-12-06T04:02:01+00:00", Severity.INFO),
        ("261206 040201 148 INFO dfs.DataNode: ok", "2026-12-06T04:02:01+00:00", Severity.INFO),
        (
            "06-Dec-2026 04:02:01.123 FINE [main] org.apache.catalina",
            "2026-12-06T04:02:01.123+00:00",
            Severity.DEBUG,
        ),
        (
            "2026-12-06 04:02:01, Info    CBS  Loaded Servicing Stack",
            "2026-12-06T04:02:01+00:00",
            Severity.INFO,
        ),
        ("2026-12-06 04:02:01 no level word here at all", "2026-12-06T04:02:01+00:00", None),
    ],
)
def test_text_stamps_and_level_words(line: str, instant: str, severity: Severity | None) -> None:
    found = head("text", line)

    assert (found.instant_ns, found.severity) == (ns(instant), severity)


def test_text_stamps_without_an_offset_take_the_configured_zone() -> None:
    shanghai = Clock(ZoneInfo("Asia/Shanghai"), MTIME)

    assert head("text", "2026-12-06 12:00:00 ERROR x", shanghai).instant_ns == ns("2026-12-06T04:00:00+00:00")


@pytest.mark.parametrize(
    ("line", "format_name", "severity", "labels"),
    [
        (
            '203.0.113.7 - - [06/Dec/2026:04:02:01 +0800] "GET /pay HTTP/1.1" 502 157 "-" "curl/8"',
            "access-log",
            Severity.ERROR,
            (("status", "502"),),
        ),
        (
            '203.0.113.7 - ops [06/Dec/2026:04:02:01 +0000] "POST /login HTTP/2.0" 401 0',
            "access-log",
            Severity.WARN,
            (("status", "401"),),
        ),
        (
            "[Sun Dec 06 04:02:01.123456 2026] [proxy:error] [pid 9] AH00940: failed",
            "apache-error",
            Severity.ERROR,
            (("module", "proxy"),),
        ),
        (
            "2026/12/06 04:02:01 [crit] 12#12: *3 SSL_do_handshake() failed",
            "nginx-error",
            Severity.FATAL,
            (("pid", "12"),),
        ),
        ("12-06 04:02:01.123  1702  2395 E ActivityManager: ANR in com.pay", "logcat", Severity.ERROR, None),
        ("W1206 04:02:01.123456    7 reflector.go:138] watch closed", "glog", Severity.WARN, None),
    ],
)
def test_web_server_and_mobile_formats(
    line: str, format_name: str, severity: Severity, labels: tuple[tuple[str, str], ...] | None
) -> None:
    found = head(format_name, line)

    assert found.severity == severity
    if labels is not None:
        assert found.labels == labels
    assert found.severity_inferred is (format_name == "access-log")


@pytest.mark.parametrize(
    ("line", "severity", "service", "message"),
    [
        (
            '{"level":"info","ts":1796443321.5,"caller":"pay/main.go:42","msg":"charged"}',
            Severity.INFO,
            None,
            "charged",
        ),
        (
            '{"level":"error","time":"2026-12-06T04:02:01Z","message":"declined","service":"pay"}',
            Severity.ERROR,
            "pay",
            "declined",
        ),
        (
            '{"name":"pay","level":60,"time":"2026-12-06T04:02:01.000Z","msg":"fatal"}',
            Severity.FATAL,
            "pay",
            "fatal",
        ),
        (
            '{"@timestamp":"2026-12-06T04:02:01Z","log":{"level":"WARNING"},"message":"slow","service":{"name":"pay"}}',
            Severity.WARN,
            "pay",
            "slow",
        ),
        (
            '{"__REALTIME_TIMESTAMP":"1796529721000000","PRIORITY":"3","MESSAGE":"oom","_SYSTEMD_UNIT":"pay.service"}',
            Severity.ERROR,
            "pay.service",
            "oom",
        ),
        (
            '{"log":"E1206 04:02:01 boom\\n","stream":"stderr","time":"2026-12-06T04:02:01.1Z"}',
            None,
            None,
            "E1206 04:02:01 boom",
        ),
        (
            '{"log":"2026-12-06 WARN slow\\n","stream":"stdout","time":"2026-12-06T04:02:01.1Z"}',
            Severity.WARN,
            None,
            "2026-12-06 WARN slow",
        ),
        (
            '{"ts":"2026-12-06T04:02:01Z","msg":"boom","exception":"Traceback\\n  File x\\nValueError"}',
            None,
            None,
            "boom\nTraceback\n  File x\nValueError",
        ),
    ],
)
def test_json_loggers_field_names(
    line: str, severity: Severity | None, service: str | None, message: str
) -> None:
    found = head("json", line)

    assert (found.severity, found.service, found.message) == (severity, service, message)


def test_logfmt_pairs() -> None:
    found = head("logfmt", 'time=2026-12-06T04:02:01Z level=warn msg="slow query" service=pay duration=2.5s')

    assert (found.severity, found.service, found.message) == (Severity.WARN, "pay", "slow query")
    assert found.labels == (("duration", "2.5s"),)


@pytest.mark.parametrize(
    ("spelling", "severity"),
    [
        ("EMERG", Severity.FATAL),
        ("alert", Severity.FATAL),
        ("Critical", Severity.FATAL),
        ("PANIC", Severity.FATAL),
        ("SEVERE", Severity.ERROR),
        ("err", Severity.ERROR),
        ("E", Severity.ERROR),
        (3, Severity.ERROR),
        ("warning", Severity.WARN),
        ("W", Severity.WARN),
        (40, Severity.WARN),
        ("4", Severity.WARN),
        ("notice", Severity.INFO),
        ("CONFIG", Severity.INFO),
        ("I", Severity.INFO),
        (30, Severity.INFO),
        ("FINE", Severity.DEBUG),
        ("dbg", Severity.DEBUG),
        ("D", Severity.DEBUG),
        (7, Severity.DEBUG),
        ("FINEST", Severity.TRACE),
        ("verbose", Severity.TRACE),
        ("V", Severity.TRACE),
        (10, Severity.TRACE),
        ("A", Severity.FATAL),
        (60, Severity.FATAL),
        (35, Severity.INFO),
        ("unknown", None),
        (True, None),
        (None, None),
        (-1, None),
        ("", None),
    ],
)
def test_every_common_severity_spelling(spelling: object, severity: Severity | None) -> None:
    assert severity_of_field(spelling) == severity


def test_a_single_letter_is_no_level_word_in_free_text() -> None:
    assert severity_of_word("E") is None
    assert severity_of_word("I") is None


@pytest.mark.parametrize(
    ("value", "instant"),
    [
        (1796529721, "2026-12-06T04:02:01+00:00"),
        (1796529721.25, "2026-12-06T04:02:01.25+00:00"),
        (1796529721250, "2026-12-06T04:02:01.25+00:00"),
        ("1796529721250000", "2026-12-06T04:02:01.25+00:00"),
        (1796529721250000000, "2026-12-06T04:02:01.25+00:00"),
    ],
)
def test_epochs_in_any_unit(value: float | str, instant: str) -> None:
    assert epoch_ns(value) == ns(instant)


@pytest.mark.parametrize(
    ("lines", "expected"),
    [
        (['{"ts":"2026-12-06T04:02:01Z","msg":"a"}'], "json"),
        (["2026-12-06T04:02:01.5Z stdout F hello"], "cri"),
        (["Dec  6 04:02:01 host app: hi"], "syslog"),
        (['1.2.3.4 - - [06/Dec/2026:04:02:01 +0000] "GET / HTTP/1.1" 200 1'], "access-log"),
        (["time=2026-12-06T04:02:01Z level=info msg=hi"], "logfmt"),
        (["2026-12-06 04:02:01,123 INFO hi", "\tat x.y(Z.java:1)"], "text"),
        (["no stamp at all", "still none"], None),
    ],
)
def test_a_files_format_is_recognised_from_its_lines(lines: list[str], expected: str | None) -> None:
    found = recognise(lines, FORMATS, CLOCK)

    assert (None if found is None else found.name) == expected
