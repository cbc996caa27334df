"""Redact first, then cut (issue 32, item 10).

Before, values were cut to their display size before the redaction step saw them, so a credential
straddling the cut lost the context its rule needs and its first half was shown (`mysql://app:Sup3rS3c`
has no `@`; `password=Sup3` cut inside the value; the first characters of a configured secret). Every
place that cuts a value of the outside world to a display size now goes through one building block,
`Redactor.prefix` (redacted whole, then cut): log messages and labels (file and Loki), runbook snippets,
MySQL cells and column names, and a tool name the harness echoes. Generated: the credential's shape, a
configured secret or a pattern one, and where the cut falls inside it.
"""

from __future__ import annotations

import json
import secrets
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support import harness, tool_messages_seen_by_model
from tests.support.spec_scenarios import as_text, draft, scenario, text_round, tools_round
from tools.adapter import ToolRequest
from tools.definitions import MAX_ECHOED_TOOL_NAME_CHARS
from tools.input_models import LookupKnowledgeInput, QueryLogsInput
from tools.knowledge import KnowledgeAdapter
from tools.knowledge.parts import text_room
from tools.knowledge.snippet import snippet
from tools.logs.file_source import LogFileAdapter
from tools.logs.loki_source import LokiLogAdapter
from tools.logs.projection import MAX_LABEL_CHARS
from tools.mysql.adapter import MysqlAdapter, _Cut, _Rows
from tools.mysql.guard import guard_sql
from tools.redaction import NOOP, REDACTED, Redactor

# How a credential reaches a value: `{s}` is the secret; each shape is one the redaction rules know.
SHAPES = [
    "mysql://app:{s}@db.internal:3306/payments",
    "postgres://svc:{s}@10.0.0.7/orders",
    "password={s}",
    "db_pw: {s}",
    '"api_key": "{s}"',
    "Authorization: Bearer {s}",
    "configured {s}",  # a configured secret: only the exact layer knows it
]
SETTINGS = settings(max_examples=60, deadline=None, database=None, suppress_health_check=list(HealthCheck))


def new_secret() -> str:
    return "Zq9" + secrets.token_hex(8)


def shows_part_of(secret: str, text: str) -> bool:
    """True when any 4 consecutive characters of the secret are in the text (half a secret is a leak)."""
    return any(secret[i : i + 4] in text for i in range(len(secret) - 3))


@st.composite
def straddling(draw: st.DrawFn, limit: int) -> tuple[str, str, Redactor]:
    """(value, secret, redactor): a credential placed so that a cut at `limit` falls inside its secret."""
    secret = new_secret()
    credential = draw(st.sampled_from(SHAPES)).replace("{s}", secret)
    start = credential.index(secret)
    inside = draw(st.integers(1, len(secret) - 1))  # characters of the secret before the cut
    filler = draw(st.sampled_from(["x", "日志 ", "- ", "a=b "]))
    room = limit - start - inside
    head = (filler * (room // len(filler) + 1))[:room]
    value = head + credential + " tail of the record"
    assert len(value) > limit
    assert value[limit - inside : limit] == secret[:inside]
    return value, secret, Redactor([secret])


@SETTINGS
@given(straddling(limit=200))
def test_the_building_block_redacts_before_it_cuts(case: tuple[str, str, Redactor]) -> None:
    value, secret, redactor = case
    shown = redactor.prefix(value, 200)
    assert len(shown) <= 200
    assert not shows_part_of(secret, shown), shown[-80:]


def test_a_value_that_fits_is_returned_as_it_is() -> None:
    assert NOOP.prefix("password=x", 200) == "password=x"  # the boundary's redaction sees it whole


# --- log files: the message and the labels ------------------------------------------------------------


async def _logs(path: Path, redactor: Redactor) -> dict[str, Any]:
    request = ToolRequest(
        run_id="run-1",
        session_id="session-1",
        tool_call_id="call-1",
        tool="query_logs",
        input=QueryLogsInput(service="svc", start="2026-11-30T01:00:00Z", end="2026-11-30T03:00:00Z"),
    )
    result = await LogFileAdapter(path, message_chars=200, redactor=redactor).execute(request)
    return result.data


@SETTINGS
@given(case=straddling(limit=200))
async def test_a_log_message_is_redacted_before_it_is_cut(
    case: tuple[str, str, Redactor], tmp_path_factory: pytest.TempPathFactory
) -> None:
    value, secret, redactor = case
    path = tmp_path_factory.mktemp("logs") / "svc.ndjson"
    record = {"ts": "2026-11-30T02:00:00Z", "service": "svc", "level": "ERROR", "message": value}
    path.write_text(json.dumps(record, ensure_ascii=False) + "\n", encoding="utf-8")
    data = await _logs(path, redactor)
    (entry,) = data["entries"]
    assert len(entry["message"]) <= 200
    assert not shows_part_of(secret, json.dumps(data, ensure_ascii=False))


async def test_a_label_named_like_a_secret_is_judged_before_its_name_is_cut(tmp_path: Path) -> None:
    """A key cut to `..._db_p` no longer names the password its value is: judge the whole key first."""
    secret = new_secret()
    key = "x" * (MAX_LABEL_CHARS - 5) + "_db_password"
    record = {
        "ts": "2026-11-30T02:00:00Z",
        "service": "svc",
        "level": "INFO",
        "message": "login",
        key: secret,
    }
    path = tmp_path / "svc.ndjson"
    path.write_text(json.dumps(record) + "\n", encoding="utf-8")
    data = await _logs(path, NOOP)
    (entry,) = data["entries"]
    assert list(entry["labels"].values()) == [REDACTED]
    assert all(len(name) <= MAX_LABEL_CHARS for name in entry["labels"])
    assert secret not in json.dumps(data)


@settings(max_examples=15, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(straddling(limit=500))  # fewer: each example builds an adapter and its HTTP client
def test_a_loki_line_and_label_are_redacted_before_they_are_cut(case: tuple[str, str, Redactor]) -> None:
    value, secret, redactor = case
    adapter = LokiLogAdapter("http://127.0.0.1:9/", {"svc": '{app="svc"}'}, redactor=redactor)
    record = adapter._record("svc", 1_764_468_000_000_000_000, {"app": value[-MAX_LABEL_CHARS - 20 :]}, value)
    entry = adapter._projection.entry(record)
    assert not shows_part_of(secret, json.dumps(entry, ensure_ascii=False))


# --- runbook snippets -------------------------------------------------------------------------------------


@SETTINGS
@given(straddling(limit=300))
def test_a_runbook_snippet_is_redacted_before_either_end_is_cut(case: tuple[str, str, Redactor]) -> None:
    value, secret, redactor = case
    for passages in ((value,), ("failover " * 60, value)):  # the start cut, then the end cut
        shown = snippet(passages, {"failover", "tail"}, 300, redactor)
        assert not shows_part_of(secret, shown), shown


async def test_a_runbook_snippet_end_to_end(tmp_path: Path) -> None:
    secret = new_secret()
    passage = "failover " + "x" * 270 + f"mysql://app:{secret}@db:3306/pay"
    (tmp_path / "runbook.md").write_text(f"# Failover\n\n{passage}\n", encoding="utf-8")
    request = ToolRequest(
        run_id="run-1",
        session_id="session-1",
        tool_call_id="call-1",
        tool="lookup_knowledge",
        input=LookupKnowledgeInput(query="failover"),
    )
    result = await KnowledgeAdapter(tmp_path).execute(request)
    assert not shows_part_of(secret, json.dumps(result.data))


@SETTINGS
@given(straddling(limit=text_room("runbook.md", 512, 500)))
async def test_a_runbook_read_is_redacted_before_it_is_cut_into_parts(
    case: tuple[str, str, Redactor],
) -> None:
    """A credential in a long unbroken line, where a part must end mid-line: each part, as the boundary
    then redacts it, shows no piece of the secret."""
    value, secret, redactor = case
    with tempfile.TemporaryDirectory() as folder:
        # One unbroken line, so the cut lands where the part's room ends, inside the credential.
        (Path(folder) / "runbook.md").write_text(value.replace(" ", "_"), encoding="utf-8")
        adapter = KnowledgeAdapter(Path(folder), max_observation_bytes=512, redactor=redactor)
        found = await adapter.execute(knowledge_request({"query": "runbook"}))
        assert [document["source"] for document in found.data["documents"]] == ["runbook.md"]
        parts: list[str] = []
        total = 1
        while len(parts) < total:
            read = await adapter.execute(knowledge_request({"source": "runbook.md", "part": len(parts) + 1}))
            total = read.data["parts"]
            parts.append(redactor.text(read.data["text"]))  # what the boundary does to each observation
    assert not any(shows_part_of(secret, part) for part in parts), parts


def knowledge_request(business: dict[str, Any]) -> ToolRequest:
    return ToolRequest("run-1", "session-1", "call-1", "lookup_knowledge", LookupKnowledgeInput(**business))


# --- MySQL cells and column names ------------------------------------------------------------------------


@SETTINGS
@given(straddling(limit=200), st.booleans())
def test_a_mysql_cell_is_redacted_before_it_is_cut(
    case: tuple[str, str, Redactor], fetched_cut: bool
) -> None:
    """Whole or as the prefix the server sent for a long value: the prefix reaches past the cut."""
    value, secret, redactor = case
    adapter = MysqlAdapter(
        "mysql://u@127.0.0.1:3306/shop", password=None, allowed_schemas=["shop"], redactor=redactor
    )
    cell: Any = _Cut(value) if fetched_cut else value
    guarded = guard_sql("SELECT note FROM orders", database="shop", allowed_schemas=["shop"], max_rows=10)
    result = adapter._project(_Rows([value], [(cell,)]), guarded)
    assert result.data["truncated"] is True
    assert not shows_part_of(secret, json.dumps(result.data, ensure_ascii=False))


# --- a tool name the harness echoes ----------------------------------------------------------------------


@pytest.mark.parametrize("inside", [1, 6, 12])
async def test_an_echoed_tool_name_is_redacted_before_it_is_cut(inside: int) -> None:
    secret = new_secret()
    credential = f"mysql://app:{secret}@db"  # cut inside the password, no `@` is left for the URL rule
    room = MAX_ECHOED_TOOL_NAME_CHARS - credential.index(secret) - inside
    name = "x" * room + credential
    call = {"id": "c-1", "name": name, "arguments": {"previous_observation": None, "input": {}}}
    h = harness(scenario(tools_round(call), text_round(as_text(draft(missing=["证据"])))))
    result = await h.run()
    assert result.outcome == "DRAFT"
    (observation,) = [m.tool_call_result.result for m in tool_messages_seen_by_model(h.generator, 1)]
    assert json.loads(observation)["tool"].endswith("…")
    assert not shows_part_of(secret, json.dumps(h.events, ensure_ascii=False) + observation)
