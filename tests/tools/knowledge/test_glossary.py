"""Both languages: the bundled glossary expands a query into the other language, so a Chinese question
finds an English runbook and an English question a Chinese one."""

from __future__ import annotations

from pathlib import Path

from tests.support.retrieval import search
from tools.knowledge import KnowledgeAdapter
from tools.knowledge.glossary import Glossary, bundled_glossary, bundled_glossary_path
from tools.knowledge.terms import is_cjk


def test_the_bundled_glossary_pairs_at_least_300_chinese_and_english_terms() -> None:
    glossary = bundled_glossary()
    bilingual = [
        entry for entry in glossary.entries if any(map(is_cjk, entry)) and not all(map(is_cjk, entry))
    ]
    assert len(bilingual) >= 300
    assert len(bilingual) == len(glossary.entries)  # every entry crosses the languages


def test_expansion_goes_both_ways_and_keeps_languages_apart() -> None:
    glossary = bundled_glossary()
    chinese = glossary.expansions("节点磁盘快满了")
    assert {"node", "disk", "full"} <= set(chinese.translations)
    english = glossary.expansions("disk full on a node")
    assert {"磁盘", "节点"} <= set(english.translations)
    assert "host" in english.synonyms  # "node, host": same language, a synonym


def test_an_english_phrase_matches_only_as_a_whole() -> None:
    glossary = Glossary.parse("持久卷, persistent volume\n")
    assert glossary.expansions("persistent volumes filling up").translations == ("持久", "久卷")
    assert glossary.expansions("volume filling up").translations == ()


def test_comments_and_single_terms_are_not_entries() -> None:
    glossary = Glossary.parse("# a comment\n磁盘\n磁盘, disk  # disk\n\n")
    assert glossary.entries == (("磁盘", "disk"),)
    assert bundled_glossary_path().is_file()


async def test_an_english_question_finds_a_chinese_runbook(tmp_path: Path) -> None:
    (tmp_path / "disk-full.md").write_text("# 磁盘写满处理\n\n先清理 /var/log 下的旧日志，再扩容数据盘。\n")
    (tmp_path / "pool.md").write_text("# 数据库连接池耗尽\n\n应用报错获取连接超时，检查慢查询与连接数。\n")
    (tmp_path / "cert.md").write_text("# 证书轮换\n\n证书到期前 30 天续签。\n")
    adapter = KnowledgeAdapter(tmp_path)
    assert (await search(adapter, "r", "disk is full on the db host"))[0] == "disk-full.md"
    assert (await search(adapter, "r", "connection pool exhausted"))[0] == "pool.md"
    assert (await search(adapter, "r", "certificate expiring soon"))[0] == "cert.md"


async def test_a_chinese_question_finds_an_english_runbook(tmp_path: Path) -> None:
    (tmp_path / "disk.md").write_text("# Disk almost full\n\nClean old logs, then grow the volume.\n")
    (tmp_path / "lag.md").write_text("# Replication lag\n\nCheck the replica's IO thread.\n")
    (tmp_path / "cert.md").write_text("# Certificate expiration\n\nRotate the certificate.\n")
    adapter = KnowledgeAdapter(tmp_path)
    assert (await search(adapter, "r", "磁盘快满了"))[0] == "disk.md"
    assert (await search(adapter, "r", "主从延迟很高"))[0] == "lag.md"
    assert (await search(adapter, "r", "证书快过期"))[0] == "cert.md"


async def test_without_the_glossary_the_languages_do_not_meet(tmp_path: Path) -> None:
    (tmp_path / "disk.md").write_text("# Disk almost full\n\nClean old logs.\n")
    adapter = KnowledgeAdapter(tmp_path, glossary=Glossary.parse(""))
    assert await search(adapter, "r", "磁盘快满了") == []
