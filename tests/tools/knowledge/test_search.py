"""lookup_knowledge searches: the bundled runbooks are found in Chinese and English, answers stay bounded."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tools.adapter import AdapterResult, ToolError, ToolRequest
from tools.input_models import LookupKnowledgeInput
from tools.knowledge import KnowledgeAdapter, bundled_knowledge_path
from tools.vocabulary import EvidenceStatus

PROJECT_ROOT = Path(__file__).resolve().parents[3]


async def lookup(adapter: KnowledgeAdapter, query: str, top_k: int = 3) -> AdapterResult:
    request = ToolRequest(
        run_id="run-1",
        session_id="session-1",
        tool_call_id="call-1",
        tool="lookup_knowledge",
        input=LookupKnowledgeInput(query=query, top_k=top_k),
    )
    return await adapter.execute(request)


def sources(result: AdapterResult) -> list[str]:
    return [document["source"] for document in result.data["documents"]]


@pytest.fixture(scope="module")
def bundled() -> KnowledgeAdapter:
    return KnowledgeAdapter(bundled_knowledge_path())


def test_bundled_runbooks_are_packaged() -> None:
    runbooks = sorted(path.name for path in bundled_knowledge_path().glob("*.md"))
    assert len(runbooks) == 6
    for path in bundled_knowledge_path().glob("*.md"):
        lines = path.read_text(encoding="utf-8").splitlines()
        assert lines[0].startswith("# ")
        assert 40 <= len(lines) <= 120


@pytest.mark.parametrize(
    ("query", "expected_first"),
    [
        ("支付 超时", "payment-timeout-connection-pool.md"),
        ("连接池", "payment-timeout-connection-pool.md"),
        ("企业账户 登录失败", "enterprise-account-login-sso.md"),
        ("回滚", "deploy-rollback.md"),
        ("消息队列积压", "order-queue-backlog.md"),
        ("慢查询 锁等待", "mysql-lock-wait-slow-query.md"),
        ("HikariPool Connection is not available", "payment-timeout-connection-pool.md"),
        ("lock wait timeout slow query", "mysql-lock-wait-slow-query.md"),
        ("deploy rollback", "deploy-rollback.md"),
        ("gateway 504 upstream", "gateway-502-504.md"),
    ],
)
async def test_bundled_runbook_is_found_for_chinese_and_english_queries(
    bundled: KnowledgeAdapter, query: str, expected_first: str
) -> None:
    result = await lookup(bundled, query)

    assert result.status == "FOUND"
    assert sources(result)[0] == expected_first


async def test_projection_is_a_bounded_whitelist(bundled: KnowledgeAdapter) -> None:
    adapter = KnowledgeAdapter(bundled_knowledge_path(), snippet_chars=80)

    result = await lookup(adapter, "payment-service 支付 超时 连接池 504 回滚", top_k=2)

    assert result.status == "FOUND"
    assert result.data["returned"] == len(result.data["documents"]) == 2
    scores = [document["score"] for document in result.data["documents"]]
    assert scores == sorted(scores, reverse=True)
    for document in result.data["documents"]:
        assert set(document) == {"title", "source", "snippet", "score"}
        assert 0 < len(document["snippet"]) <= 80
        assert isinstance(document["score"], float)
        assert document["score"] > 0
        assert document["score"] == round(document["score"], 3)
        assert not document["source"].startswith("/")


async def test_snippet_is_the_passage_that_matched(tmp_path: Path) -> None:
    (tmp_path / "runbook.md").write_text(
        "# 缓存故障\n\n## 背景\n\nRedis 集群承载会话数据。\n\n"
        "## 处理\n\n执行 failover 切换到备用集群 session-redis-b。\n",
        encoding="utf-8",
    )

    result = await lookup(KnowledgeAdapter(tmp_path), "failover")

    assert result.data["documents"][0]["snippet"].startswith("## 处理 执行 failover")


async def test_nonsense_query_is_empty(bundled: KnowledgeAdapter) -> None:
    result = await lookup(bundled, "xyzzy qwertyuiop")

    assert result == AdapterResult(EvidenceStatus.EMPTY, {"documents": [], "returned": 0})


async def test_missing_folder_is_unavailable(tmp_path: Path) -> None:
    with pytest.raises(ToolError) as raised:
        await lookup(KnowledgeAdapter(tmp_path / "missing"), "支付")
    assert raised.value.code == "UNAVAILABLE"


async def test_a_file_instead_of_a_folder_is_unavailable(tmp_path: Path) -> None:
    path = tmp_path / "single.md"
    path.write_text("# 标题\n", encoding="utf-8")

    with pytest.raises(ToolError) as raised:
        await lookup(KnowledgeAdapter(path), "标题")
    assert raised.value.code == "UNAVAILABLE"


async def test_title_falls_back_to_file_name_and_folders_are_searched_recursively(tmp_path: Path) -> None:
    (tmp_path / "team" / "db").mkdir(parents=True)
    (tmp_path / "team" / "db" / "replica-lag.md").write_text(
        "## 主从延迟\n\n从库延迟超过 60 秒时，先检查 Seconds_Behind_Master。\n", encoding="utf-8"
    )
    (tmp_path / "notes.txt").write_text("主从延迟 不是 markdown", encoding="utf-8")

    result = await lookup(KnowledgeAdapter(tmp_path), "主从延迟")

    assert result.data["documents"] == [
        {
            "title": "replica-lag.md",
            "source": "team/db/replica-lag.md",
            "snippet": "## 主从延迟 从库延迟超过 60 秒时，先检查 Seconds_Behind_Master。",
            "score": result.data["documents"][0]["score"],
        }
    ]


async def test_title_is_the_first_top_level_heading(tmp_path: Path) -> None:
    (tmp_path / "x.md").write_text(
        "intro\n\n```sh\n# 清理磁盘\ndf -h\n```\n\n# 磁盘写满处理\n\n清理旧日志。\n", encoding="utf-8"
    )

    result = await lookup(KnowledgeAdapter(tmp_path), "磁盘")

    assert result.data["documents"][0]["title"] == "磁盘写满处理"


async def test_chinese_bigrams_do_not_match_on_a_shared_character(tmp_path: Path) -> None:
    (tmp_path / "pool.md").write_text("# 连接池耗尽\n\n数据库连接池被占满。\n", encoding="utf-8")
    (tmp_path / "api.md").write_text("# 接口变更\n\n新增接口需要评审。\n", encoding="utf-8")

    result = await lookup(KnowledgeAdapter(tmp_path), "连接池")

    assert sources(result) == ["pool.md"]


async def test_index_is_rebuilt_when_a_file_changes(tmp_path: Path) -> None:
    runbook = tmp_path / "dns.md"
    runbook.write_text("# DNS\n\n解析失败时检查 CoreDNS。\n", encoding="utf-8")
    adapter = KnowledgeAdapter(tmp_path)
    assert (await lookup(adapter, "证书过期")).status == "EMPTY"

    runbook.write_text("# DNS\n\n解析失败时检查 CoreDNS。证书过期时更新 TLS 证书。\n", encoding="utf-8")
    (tmp_path / "new.md").write_text("# 证书轮换\n\n证书过期前 30 天轮换。\n", encoding="utf-8")

    assert sorted(sources(await lookup(adapter, "证书过期"))) == ["dns.md", "new.md"]


def test_importing_the_adapter_does_not_import_haystack() -> None:
    """The console must paint before haystack's slow import; only the first lookup pays for it."""
    code = "import sys, tools.knowledge; sys.exit('haystack' in sys.modules)"
    env = {**os.environ, "PYTHONPATH": str(PROJECT_ROOT)}
    completed = subprocess.run([sys.executable, "-c", code], cwd=PROJECT_ROOT, env=env, check=False)
    assert completed.returncode == 0
