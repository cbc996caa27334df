"""Reading a runbook through lookup_knowledge: part N of M, each part within the observation budget,
the parts together the file's text, and only what a search of the same run returned."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.support import harness
from tests.support.retrieval import RUNBOOKS, request, search
from tests.support.spec_scenarios import (
    as_text,
    call,
    draft,
    evaluated,
    finding,
    scenario,
    text_round,
    tools_round,
)
from tools.adapter import AdapterResult, ToolError
from tools.boundary import ToolBoundary
from tools.knowledge import KnowledgeAdapter, bundled_knowledge_path
from tools.knowledge.folder import read_runbook_text
from tools.knowledge.parts import json_bytes, read_projection, split_parts, text_room
from tools.knowledge.runbook import is_markdown, parse_runbook
from tools.observation_budget import projection_bytes
from tools.redaction import NOOP, Redactor
from tools.vocabulary import EvidenceStatus


async def read_whole(adapter: KnowledgeAdapter, run_id: str, source: str) -> tuple[str, list[str]]:
    first = await adapter.execute(request(run_id, {"source": source}))
    assert first.status == "FOUND"
    assert first.data["part"] == 1
    texts = [first.data["text"]]
    for part in range(2, first.data["parts"] + 1):
        result = await adapter.execute(request(run_id, {"source": source, "part": part}))
        assert set(result.data) == {"source", "part", "parts", "text"}
        assert (result.data["part"], result.data["parts"]) == (part, first.data["parts"])
        texts.append(result.data["text"])
    return "".join(texts), texts


def runbook_files(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if is_markdown(p.name))


@pytest.mark.parametrize(
    ("folder", "budget"),
    [
        pytest.param(RUNBOOKS, 4096, id="public-4096"),
        pytest.param(RUNBOOKS, 1024, id="public-1024", marks=pytest.mark.long),  # the same at 4x the parts
        pytest.param(bundled_knowledge_path(), 4096, id="demo-4096"),
        pytest.param(bundled_knowledge_path(), 700, id="demo-700"),
    ],
)
async def test_every_runbook_is_readable_whole_part_by_part(
    folder: Path, budget: int, tmp_path: Path
) -> None:
    """Each runbook is found by a search for its title (a read needs that), then read part by part:
    the parts are the file's text exactly as redaction leaves it (the whole text is redacted before it
    is cut), and each part's projection fits the budget. A folder's
    landing page ranks below the pages it lists by design, so it is searched for alone."""
    adapter = KnowledgeAdapter(folder, max_observation_bytes=budget)
    multipart = 0
    for source in runbook_files(folder):
        text = read_runbook_text(folder / source, 1 << 22)
        assert text is not None
        runbook = parse_runbook(source, text)
        query = f"{runbook.title} {Path(source).stem}"
        reader = adapter
        if runbook.is_landing_page:
            (tmp_path / source).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / source).write_text(text, encoding="utf-8")
            reader = KnowledgeAdapter(tmp_path, max_observation_bytes=budget)
        assert source in await search(reader, source, query), source
        whole, parts = await read_whole(reader, source, source)
        if runbook.is_landing_page:
            (tmp_path / source).unlink()
        assert whole == NOOP.text(text)
        multipart += len(parts) > 1
        for number, part in enumerate(parts, 1):
            assert json_bytes(read_projection(source, number, len(parts), part)) <= budget
    assert multipart > 0  # the budget made some runbook span parts


async def test_a_part_begins_at_a_heading_where_one_is_near() -> None:
    text = "# Runbook\n\n" + "".join(f"## Step {n}\n\n" + "word " * 60 + "\n\n" for n in range(1, 8))
    parts = split_parts(text, 700)
    assert len(parts) > 2
    assert "".join(parts) == text
    assert all(part.startswith("## Step") for part in parts[1:])


@settings(max_examples=60, deadline=None)
@given(
    text=st.text(st.characters(codec="utf-8"), max_size=3000),
    room=st.integers(64, 900),
)
def test_any_text_splits_into_fitting_parts_that_join_back(text: str, room: int) -> None:
    """Quotes, backslashes and control characters cost more than a byte in JSON: parts still fit."""
    parts = split_parts(text, room)
    assert "".join(parts) == text
    assert all(json_bytes(part) - 2 <= room for part in parts)
    assert all(parts) or parts == [""]


def test_the_room_of_a_part_leaves_the_frame_and_redaction_their_bytes() -> None:
    room = text_room("team/db/replica-lag.md", 4096, 10_000)
    frame = json_bytes(read_projection("team/db/replica-lag.md", 99_999, 99_999, ""))
    assert room == 4096 - 4096 // 16 - frame


async def test_a_source_this_run_was_not_given_is_invalid_input(tmp_path: Path) -> None:
    (tmp_path / "db").mkdir()
    (tmp_path / "db" / "replica-lag.md").write_text("# 主从延迟\n\n检查 Seconds_Behind_Master。\n")
    (tmp_path / "dns.md").write_text("# DNS\n\n解析失败时检查 CoreDNS。\n")
    adapter = KnowledgeAdapter(tmp_path)
    assert await search(adapter, "run-1", "主从延迟") == ["db/replica-lag.md"]

    for run_id, source in [
        ("run-1", "dns.md"),  # in the folder, but no search of this run returned it
        ("run-2", "db/replica-lag.md"),  # another run's search returned it
        ("run-1", "../../etc/passwd"),
        ("run-1", "/etc/passwd"),
        ("run-1", "db/../dns.md"),
    ]:
        with pytest.raises(ToolError) as raised:
            await adapter.execute(request(run_id, {"source": source}))
        assert raised.value.code == "INVALID_INPUT", source
    with pytest.raises(ToolError) as raised:
        await adapter.execute(request("run-1", {"source": "db/replica-lag.md", "part": 2}))
    assert raised.value.code == "INVALID_INPUT"  # part 2 of 1
    result = await adapter.execute(request("run-1", {"source": "db/replica-lag.md"}))
    assert result == AdapterResult(
        EvidenceStatus.FOUND,
        {
            "source": "db/replica-lag.md",
            "part": 1,
            "parts": 1,
            "text": "# 主从延迟\n\n检查 Seconds_Behind_Master。\n",
        },
    )


async def test_a_runbook_removed_after_the_search_reads_empty(tmp_path: Path) -> None:
    (tmp_path / "dns.md").write_text("# DNS\n\n解析失败时检查 CoreDNS。\n")
    adapter = KnowledgeAdapter(tmp_path)
    assert await search(adapter, "run-1", "CoreDNS") == ["dns.md"]
    (tmp_path / "dns.md").unlink()
    result = await adapter.execute(request("run-1", {"source": "dns.md"}))
    assert result.status == "EMPTY"


async def test_redaction_never_pushes_a_part_past_the_budget(tmp_path: Path) -> None:
    """Redaction may lengthen a short secret to `[REDACTED]`; the runbook is redacted whole before it is
    cut into parts (so no credential is split across two), and the boundary holds every part to the
    budget."""
    (tmp_path / "creds.md").write_text("# Creds\n\n" + "password: ab\n" * 400)
    adapter = KnowledgeAdapter(tmp_path, max_observation_bytes=1024)
    boundary = ToolBoundary({"lookup_knowledge": adapter}, redactor=Redactor(), max_observation_bytes=1024)
    assert (await boundary.invoke(request("r", {"query": "creds"}))).status == "FOUND"
    outcome = await boundary.invoke(request("r", {"source": "creds.md", "part": 2}))
    assert outcome.status == "FOUND"
    assert outcome.data is not None
    assert projection_bytes(outcome.data) <= 1024
    assert "ab\n" not in outcome.data["text"]


async def test_a_draft_cites_a_read_like_any_found_call() -> None:
    """Search, read the runbook it returned, and conclude citing the read."""
    conclusion = draft(
        "连接池耗尽导致支付超时",
        [finding("runbook 第 1 部分给出连接池耗尽的处置步骤", "kb-2")],
        checked=["payment-service runbook"],
    )
    h = harness(
        scenario(
            tools_round(call("kb-1", "lookup_knowledge", {"query": "支付超时 连接池"})),
            tools_round(
                call(
                    "kb-2",
                    "lookup_knowledge",
                    {"source": "payment-timeout-connection-pool.md", "part": 1},
                    evaluated("kb-1"),
                )
            ),
            text_round(as_text(conclusion)),
        )
    )
    result = await h.run()
    assert result.outcome == "DRAFT", result.failure
    finished = [e for e in h.events if e["type"] == "tool_finished"]
    assert [(e["tool_call_id"], e["status"]) for e in finished] == [("kb-1", "FOUND"), ("kb-2", "FOUND")]
    observation = json.loads(json.dumps(finished[1]["observation"]))
    assert observation["data"]["source"] == "payment-timeout-connection-pool.md"
    assert observation["data"]["part"] == 1
    assert observation["data"]["text"].startswith("# 支付服务超时")
