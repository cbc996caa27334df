"""The runbook retrieval test set (tests/data/knowledge) and its scores: hit@1, hit@3, MRR.

One lookup per question with `top_k = 5` (the most a call may ask for), through the adapter as a run
makes it. A question is hit at k when one of its expected runbooks is among the first k results; its
reciprocal rank is 1/rank of the first expected runbook (0 when none is among the five), so the mean
reciprocal rank is MRR@5.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from tools.adapter import ToolRequest
from tools.input_models import LookupKnowledgeInput
from tools.knowledge import KnowledgeAdapter
from tools.knowledge.terms import is_cjk

DATA = Path(__file__).resolve().parents[1] / "data" / "knowledge"
RUNBOOKS = DATA / "runbooks"
_PREFIXES = {
    "PO/": "prometheus-operator/",
    "OS/": "openshift/alerts/cluster-monitoring-operator/",
    "OE/": "openshift/alerts/cluster-etcd-operator/",
}


@dataclass(frozen=True)
class Question:
    text: str
    expected: frozenset[str]  # sources under RUNBOOKS

    @property
    def chinese(self) -> bool:
        return is_cjk(self.text)


@dataclass(frozen=True)
class Scores:
    questions: int
    hit_at_1: float
    hit_at_3: float
    mrr: float

    def row(self) -> str:
        return f"{self.questions} | {self.hit_at_1:.1%} | {self.hit_at_3:.1%} | {self.mrr:.3f}"


def request(run_id: str, business: dict[str, Any], call_id: str = "c") -> ToolRequest:
    """A lookup_knowledge request of run `run_id` (a read names a source one of its searches returned)."""
    business_input = LookupKnowledgeInput.model_validate(business)
    return ToolRequest(run_id, "s", call_id, "lookup_knowledge", business_input)


async def search(adapter: KnowledgeAdapter, run_id: str, query: str) -> list[str]:
    """The sources a five-result search returns, best first."""
    result = await adapter.execute(request(run_id, {"query": query, "top_k": 5}))
    return [document["source"] for document in result.data["documents"]]


def load_questions() -> list[Question]:
    raw: dict[str, Any] = yaml.safe_load((DATA / "questions.yaml").read_text(encoding="utf-8"))
    return [
        Question(item["q"], frozenset(_PREFIXES[e[:3]] + e[3:] for e in item["expect"]))
        for item in raw["questions"]
    ]


async def ranks(adapter: KnowledgeAdapter, questions: list[Question]) -> list[int | None]:
    """The rank (1-5) of each question's first expected runbook, None when it is not in the five."""
    found: list[int | None] = []
    for question in questions:
        sources = await search(adapter, "eval", question.text)
        found.append(next((rank for rank, s in enumerate(sources, 1) if s in question.expected), None))
    return found


def scores(found: list[int | None]) -> Scores:
    count = len(found)
    return Scores(
        questions=count,
        hit_at_1=sum(rank == 1 for rank in found) / count,
        hit_at_3=sum(rank is not None and rank <= 3 for rank in found) / count,
        mrr=sum(1 / rank for rank in found if rank is not None) / count,
    )


def evaluate(adapter: KnowledgeAdapter) -> dict[str, Scores]:
    """Scores of all questions, the English ones and the Chinese ones."""
    questions = load_questions()
    found = asyncio.run(ranks(adapter, questions))
    return {
        "all": scores(found),
        "English": scores([rank for rank, q in zip(found, questions, strict=True) if not q.chinese]),
        "Chinese": scores([rank for rank, q in zip(found, questions, strict=True) if q.chinese]),
    }
