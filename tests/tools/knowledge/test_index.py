"""The index: field weights, landing pages that do not crowd out what they list, and a changed runbook
re-indexed alone."""

from __future__ import annotations

from pathlib import Path

import pytest

import tools.knowledge.adapter as knowledge_adapter
import tools.knowledge.index as knowledge_index
from tests.support.retrieval import search
from tools.boundary import ToolBoundary
from tools.knowledge import KnowledgeAdapter
from tools.knowledge.runbook import Runbook, parse_runbook


async def test_a_term_in_the_title_outweighs_the_same_term_in_a_body(tmp_path: Path) -> None:
    (tmp_path / "mentions.md").write_text("# Gateway notes\n\n" + "The replica was fine. " * 5 + "\n")
    (tmp_path / "lag.md").write_text("# Replica lag\n\nCheck the IO thread and the relay log.\n")
    assert (await search(KnowledgeAdapter(tmp_path), "r", "replica"))[0] == "lag.md"


async def test_a_folders_landing_page_ranks_below_the_runbooks_it_lists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "etcd").mkdir()
    (tmp_path / "etcd" / "_index.md").write_text("---\ntitle: etcd quorum and leader\n---\n")
    (tmp_path / "etcd" / "README.md").write_text(
        "# etcd: quorum lost, no leader\n\n"
        "- [etcdInsufficientMembers](etcdInsufficientMembers.md): quorum lost\n"
        "- [etcdNoLeader](etcdNoLeader.md): no leader elected\n"
    )
    (tmp_path / "etcd" / "etcdInsufficientMembers.md").write_text(
        "# etcdInsufficientMembers\n\nToo few members are up: the cluster lost quorum.\n\n"
        "## Mitigation\n\nBring members back.\n"
    )
    (tmp_path / "etcd" / "etcdNoLeader.md").write_text("# etcdNoLeader\n\nNo member is leader.\n")
    expected = ["etcd/etcdInsufficientMembers.md", "etcd/README.md", "etcd/_index.md"]
    assert await search(KnowledgeAdapter(tmp_path), "r", "quorum lost") == expected

    monkeypatch.setattr(knowledge_index, "LISTING_PAGE_FACTOR", 1.0)  # without the scaling it would lead
    assert (await search(KnowledgeAdapter(tmp_path), "r", "quorum lost"))[0] == "etcd/README.md"


async def test_a_readme_alone_in_its_folder_is_a_runbook(tmp_path: Path) -> None:
    (tmp_path / "dns").mkdir()
    (tmp_path / "dns" / "README.md").write_text("# DNS resolution failures\n\nCheck CoreDNS.\n")
    (tmp_path / "gateway.md").write_text("# Gateway\n\nDNS is mentioned here once.\n")
    assert (await search(KnowledgeAdapter(tmp_path), "r", "dns resolution"))[0] == "dns/README.md"


async def test_a_table_of_contents_ranks_below_the_runbooks_it_lists(tmp_path: Path) -> None:
    links = "".join(f"- [Disk {n}](disk-{n}.md) disk full\n" for n in range(6))
    (tmp_path / "contents.md").write_text(f"# Disk runbooks\n\n{links}")
    (tmp_path / "disk-0.md").write_text("# Disk full\n\nClean the logs.\n")
    assert (await search(KnowledgeAdapter(tmp_path), "r", "disk full"))[0] == "disk-0.md"


async def test_one_changed_runbook_is_reindexed_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for n in range(20):
        (tmp_path / f"rb-{n}.md").write_text(f"# Runbook {n}\n\nservice-{n} checks.\n")
    parsed: list[str] = []

    def counting(source: str, text: str) -> Runbook:
        parsed.append(source)
        return parse_runbook(source, text)

    monkeypatch.setattr(knowledge_adapter, "parse_runbook", counting)
    adapter = KnowledgeAdapter(tmp_path)
    assert await search(adapter, "r", "certificate") == []
    assert len(parsed) == 20
    parsed.clear()

    (tmp_path / "rb-3.md").write_text("# Runbook 3\n\nRotate the certificate of service-3.\n")
    (tmp_path / "rb-7.md").unlink()
    assert await search(adapter, "r", "certificate") == ["rb-3.md"]
    assert parsed == ["rb-3.md", "rb-3.md"]  # indexed, then read again for its snippet
    assert "rb-7.md" not in await search(adapter, "r", "service-7 checks")


async def test_prepare_indexes_ahead_and_reports_progress_of_a_large_folder(tmp_path: Path) -> None:
    total = knowledge_adapter.PROGRESS_STEP + 20
    for n in range(total):
        (tmp_path / f"rb-{n}.md").write_text(f"# Runbook {n}\n")
    heard: list[tuple[int, int]] = []
    assert await KnowledgeAdapter(tmp_path).prepare(lambda done, of: heard.append((done, of))) == total
    assert heard == [(knowledge_adapter.PROGRESS_STEP, total), (total, total)]


async def test_the_boundary_prepares_the_index_and_leaves_a_missing_folder_to_the_run(tmp_path: Path) -> None:
    (tmp_path / "rb.md").write_text("# Runbook\n")
    ready = KnowledgeAdapter(tmp_path)
    await ToolBoundary({"lookup_knowledge": ready}).prepare()
    assert await ready.prepare() == 1
    await ToolBoundary({"lookup_knowledge": KnowledgeAdapter(tmp_path / "missing")}).prepare()  # no raise
