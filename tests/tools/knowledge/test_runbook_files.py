"""Real collections: YAML front matter read (title, alert name, severity, tags), `.md` and `.markdown`,
nested folders; what a runbook's title is."""

from __future__ import annotations

from pathlib import Path

from tests.support.retrieval import request, search
from tools.knowledge import KnowledgeAdapter
from tools.knowledge.runbook import parse_runbook

HUGO = """---
title: Kube Pod Crash Looping
alert: KubePodCrashLooping
severity: warning
tags: [kubernetes, workload]
weight: 20
---

# KubePodCrashLooping

## Meaning

The container keeps dying and the kubelet restarts it.
"""


def test_front_matter_gives_title_and_meta_and_is_not_body() -> None:
    runbook = parse_runbook("kubernetes/KubePodCrashLooping.md", HUGO)
    assert runbook.title == "Kube Pod Crash Looping"
    assert runbook.meta == ("KubePodCrashLooping", "warning", "kubernetes", "workload", "KubePodCrashLooping")
    assert runbook.headings == ("KubePodCrashLooping", "Meaning")
    assert runbook.body.startswith("\n# KubePodCrashLooping")
    assert "weight" not in runbook.body


def test_title_falls_back_to_the_first_heading_then_the_file_name() -> None:
    assert parse_runbook("a.md", "---\ntitle: 42\n---\n# Real title\n").title == "Real title"
    assert (
        parse_runbook("a.md", "intro\n\n```sh\n# not a title\n```\n\n# 磁盘写满处理\n").title
        == "磁盘写满处理"
    )
    assert parse_runbook("db/replica-lag.md", "## only a section\n").title == "replica-lag.md"
    assert parse_runbook("a.md", "---\ntitle: '  Spaced\n  out  '\n---\n").title == "Spaced out"


def test_front_matter_that_is_not_a_yaml_mapping_is_text() -> None:
    for block in ("- a list\n- of items\n", "title: [unclosed\n", "title: *alias\n"):
        text = f"---\n{block}---\n# Heading\n"
        runbook = parse_runbook("a.md", text)
        assert runbook.title == "Heading"
        assert runbook.body == text


async def test_tags_and_alert_names_in_front_matter_are_searched(tmp_path: Path) -> None:
    (tmp_path / "kubernetes").mkdir()
    (tmp_path / "kubernetes" / "KubePodCrashLooping.md").write_text(HUGO)
    (tmp_path / "other.md").write_text("# Other\n\nThe workload moved once.\n")
    adapter = KnowledgeAdapter(tmp_path)
    assert (await search(adapter, "r", "workload"))[0] == "kubernetes/KubePodCrashLooping.md"
    result = await adapter.execute(request("r", {"query": "pod crash looping"}))
    assert result.data["documents"][0]["title"] == "Kube Pod Crash Looping"


async def test_markdown_suffixes_and_nested_folders_are_indexed(tmp_path: Path) -> None:
    (tmp_path / "team" / "db").mkdir(parents=True)
    (tmp_path / "team" / "db" / "replica-lag.markdown").write_text("# Replica lag\n\nCheck the IO thread.\n")
    (tmp_path / "UPPER.MD").write_text("# Replica notes\n\nlag of the replica\n")
    (tmp_path / "notes.txt").write_text("replica lag, but not markdown\n")
    adapter = KnowledgeAdapter(tmp_path)
    assert sorted(await search(adapter, "r", "replica lag")) == ["UPPER.MD", "team/db/replica-lag.markdown"]
