"""`[logs]` for files, end to end from a TOML file: a format none of the built-ins covers written as
one regex, JSON field names of one's own, services by file glob, the time zone of offset-less
stamps; and every bad value refused at start with the key named (docs/contracts.md, "Configuration").
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from agent.evidence import build_adapters
from agent.settings import ConfigError, load_settings
from tools.adapter import AdapterResult, ToolRequest
from tools.input_models import QueryLogsInput
from tools.logs.file_source import LogFileAdapter

SAMPLES = Path(__file__).parents[1] / "data" / "logs"
PATTERN = (
    r"^\[pid: (?P<pid>\d+)\|app: \d+\|req: [\d/]+\] \S+ \(\S*\) \{[^}]*\} \[(?P<time>[^\]]+)\] "
    r"(?P<message>.* \(HTTP/[\d.]+ (?P<status>\d{3})\).*)"
)
UWSGI = f"[logs.formats.uwsgi]\npattern = '{PATTERN}'\ntime_format = \"%a %b %d %H:%M:%S %Y\"\n"
DAY = {"start": "2016-03-13T00:00:00Z", "end": "2016-03-13T23:59:59Z"}


def configured(tmp_path: Path, text: str) -> LogFileAdapter:
    config = tmp_path / "diagnose.toml"
    config.write_text(text, encoding="utf-8")
    adapter = build_adapters(load_settings(config))["query_logs"]
    assert isinstance(adapter, LogFileAdapter)
    return adapter


async def ask(adapter: LogFileAdapter, **fields: Any) -> AdapterResult:
    fields.setdefault("limit", 200)
    return await adapter.execute(ToolRequest("r", "s", "c", "query_logs", QueryLogsInput(**fields)))


async def test_a_format_none_covers_is_one_regex_in_the_configuration(tmp_path: Path) -> None:
    """uWSGI's request log (tests/data/logs/SOURCES.md): skipped as an unknown format without the
    configuration, read with it, its named groups becoming labels."""
    path = SAMPLES / "uwsgi" / "uwsgi.log"
    window = {"start": "2016-03-13T22:50:00Z", "end": "2016-03-13T22:54:59Z"}
    bare = LogFileAdapter(path.parent)
    adapter = configured(tmp_path, f'[logs]\npath = "{path}"\n{UWSGI}')

    unknown = await ask(bare, service="uwsgi", **window)
    minutes = await ask(adapter, service="uwsgi", **window)
    endpoint = await ask(
        adapter,
        service="uwsgi",
        contains="/ENDPOINT2",
        start="2016-03-13T00:00:00Z",
        end="2016-03-13T23:59:59Z",
    )

    assert unknown.status == "EMPTY"
    assert [(f.source, f.reason) for f in bare.skipped_files] == [("uwsgi.log", "UNKNOWN_FORMAT")]
    assert minutes.data["matched"] == 11
    assert endpoint.data["matched"] == 3
    assert endpoint.data["entries"][0]["labels"] == {"pid": "88186", "status": "200"}
    assert endpoint.data["entries"][0]["message"].startswith("POST /endpoint2 => generated 215 bytes")


async def test_json_field_names_of_ones_own_and_services_by_glob(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    record = {"when": "2026-11-30T02:00:00Z", "sev": "crit", "text": "ledger stuck", "component": "ledger"}
    (logs / "ledger.json").write_text(json.dumps(record) + "\n")
    shutil.copyfile(SAMPLES / "java" / "farm.log", logs / "farm-7f9c.log")
    adapter = configured(
        tmp_path,
        f'[logs]\npath = "{logs}"\n[logs.fields]\nts = "when"\nlevel = "sev"\nmsg = "text"\n'
        'service = "component"\n[logs.file_services]\n"farm-*.log" = "farm"\n',
    )

    ledger = await ask(
        adapter, service="ledger", level="FATAL", start="2026-11-30T01:00:00Z", end="2026-11-30T03:00:00Z"
    )
    farm = await ask(adapter, service="farm", start="2025-01-24T07:00:00Z", end="2025-01-24T08:00:00Z")

    assert [(entry["message"], entry["level"]) for entry in ledger.data["entries"]] == [
        ("ledger stuck", "FATAL")
    ]
    assert farm.data["matched"] == 20


async def test_offset_less_stamps_take_the_configured_time_zone(tmp_path: Path) -> None:
    """The Spring Boot log writes no offset: read in Shanghai, its 07:00 is 23:00 UTC the day before."""
    adapter = configured(
        tmp_path, f'[logs]\npath = "{SAMPLES / "java" / "farm.log"}"\ntimezone = "Asia/Shanghai"\n'
    )

    result = await ask(adapter, service="farm", start="2025-01-23T23:05:00Z", end="2025-01-23T23:06:00Z")

    assert [entry["ts"] for entry in result.data["entries"]] == ["2025-01-23T23:05:38.884Z"]


@pytest.mark.parametrize(
    ("toml", "named"),
    [
        ('[logs]\ntimezone = "Mars/Olympus"\n', "Mars/Olympus"),
        ('[logs]\nformat = "xml"\n', "[logs] format"),
        ("[logs.formats.broken]\npattern = '(?P<time>['\n", "[logs.formats.broken]"),
        ("[logs.formats.timeless]\npattern = '(?P<ts>\\S+)'\n", "(?P<time>"),
        ('[logs.fields]\nlvl = "sev"\n', "[logs.fields]"),
    ],
)
def test_a_bad_logs_setting_is_refused_at_start_naming_it(tmp_path: Path, toml: str, named: str) -> None:
    config = tmp_path / "diagnose.toml"
    config.write_text(toml, encoding="utf-8")

    with pytest.raises(ConfigError) as refused:
        load_settings(config)

    assert named in str(refused.value)
