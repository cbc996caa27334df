"""Spec rule: the current Query SHALL retain its original text and SHALL NOT be rewritten.

`diagnose run --query-file F` (and `--query-file -` for standard input) reads the bytes, decodes them
as UTF-8 strictly and passes them on exactly: CRLF, a lone CR and a final newline are part of the
query. Bytes that are not UTF-8 cannot be passed on without rewriting them, so the run is refused
before it starts (exit 3, a message, no traceback).
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import yaml

from console.commands.main import main
from tests.support.audit_reader import AuditReader
from tests.support.spec_scenarios import NULL_DRAFT, scenario, text_round

QUERIES = [
    pytest.param("payment-service 超时\r\n02:10Z 起\r\n", id="crlf-and-final-newline"),
    pytest.param("第一行\r第二行\n\n", id="lone-cr-and-blank-line"),
    pytest.param("no newline at the end  ", id="trailing-spaces"),
    pytest.param("\ufeffBOM 开头\u2028行分隔", id="bom-and-line-separator"),
]


def _scenario_file(tmp_path: Path) -> Path:
    path = tmp_path / "inline.yaml"
    path.write_text(yaml.safe_dump(scenario(text_round(NULL_DRAFT)), allow_unicode=True), encoding="utf-8")
    return path


def _run(tmp_path: Path, query_file: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    events = tmp_path / "events.ndjson"
    code = main(
        [
            "run",
            "--query-file",
            query_file,
            "--scenario",
            str(_scenario_file(tmp_path)),
            "--audit-db",
            str(tmp_path / "audit.db"),
            "--events",
            str(events),
            "--json",
        ]
    )
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _audited_queries(tmp_path: Path) -> list[str]:
    return [run["query"] for run in AuditReader(tmp_path / "audit.db").query("SELECT query FROM runs")]


def _started_query(tmp_path: Path) -> str:
    events = [
        json.loads(line) for line in (tmp_path / "events.ndjson").read_text(encoding="utf-8").split("\n")[:-1]
    ]
    return str(next(e["query"] for e in events if e["type"] == "run_started"))


@pytest.mark.parametrize("query", QUERIES)
def test_a_query_file_is_the_query_byte_for_byte(
    query: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "query.txt"
    path.write_bytes(query.encode("utf-8"))

    code, out, _ = _run(tmp_path, str(path), capsys)

    assert code == 0
    assert json.loads(out)["outcome"] == "DRAFT"
    assert _started_query(tmp_path) == query
    assert _audited_queries(tmp_path) == [query]


@pytest.mark.parametrize("query", QUERIES)
def test_a_query_on_standard_input_is_the_query_byte_for_byte(
    query: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # A text-mode stdin, as the interpreter makes it: its own newline translation must not apply.
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(query.encode("utf-8")), encoding="utf-8"))

    code, out, _ = _run(tmp_path, "-", capsys)

    assert code == 0
    assert json.loads(out)["outcome"] == "DRAFT"
    assert _started_query(tmp_path) == query
    assert _audited_queries(tmp_path) == [query]


@pytest.mark.parametrize(
    "raw",
    [b"payment-service \xff\xfe timeout", "支付超时".encode("gb18030"), b"\xed\xa0\x80 surrogate"],
    ids=["invalid-byte", "gb18030", "encoded-surrogate"],
)
def test_a_query_that_is_not_utf8_is_refused_before_the_run(
    raw: bytes, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "query.txt"
    path.write_bytes(raw)

    code, out, err = _run(tmp_path, str(path), capsys)

    assert (code, out) == (3, "")
    assert "not UTF-8" in err
    assert str(path) in err
    assert "Traceback" not in err
    assert _audited_queries(tmp_path) == []  # refused before anything ran

    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(raw), encoding="utf-8"))
    code, out, err = _run(tmp_path, "-", capsys)
    assert (code, out) == (3, "")
    assert "standard input" in err
    assert "not UTF-8" in err
    assert "Traceback" not in err
