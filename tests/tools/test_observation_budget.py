"""Each FOUND projection is held to `[budget] max_observation_bytes`: cut visibly, never silently."""

from __future__ import annotations

from typing import Any

import pytest

from agent.evidence import build_adapters, build_boundary
from agent.settings import load_settings
from tools.adapter import AdapterResult, ToolError, ToolRequest
from tools.boundary import ToolBoundary
from tools.input_models import LookupKnowledgeInput, QueryLogsInput
from tools.observation_budget import fit_projection, projection_bytes
from tools.vocabulary import EvidenceStatus

START, END = "2026-11-30T02:00:00Z", "2026-11-30T03:00:00Z"


def logs_request(limit: int) -> ToolRequest:
    params = QueryLogsInput(service="payment-service", limit=limit, start=START, end=END)
    return ToolRequest("run-1", "s-1", "call-1", "query_logs", params)


async def test_a_long_log_answer_is_cut_to_the_budget_and_says_so() -> None:
    settings = load_settings(None, overrides={"budget": {"max_observation_bytes": 2048}})
    outcome = await build_boundary(settings).invoke(logs_request(50))
    assert outcome.status == "FOUND"
    assert outcome.data is not None
    assert projection_bytes(outcome.data) <= 2048
    assert outcome.data["truncated"] is True
    assert 0 < outcome.data["returned"] == len(outcome.data["entries"]) < 50
    # The entries kept are the first ones of the full answer, unchanged.
    full = await ToolBoundary(build_adapters(load_settings(None))).invoke(logs_request(50))
    assert full.data is not None
    assert outcome.data["entries"] == full.data["entries"][: outcome.data["returned"]]


async def test_an_answer_within_the_budget_is_untouched() -> None:
    settings = load_settings(None, overrides={"budget": {"max_observation_bytes": 1_000_000}})
    outcome = await build_boundary(settings).invoke(logs_request(50))
    unbounded = await ToolBoundary(build_adapters(settings)).invoke(logs_request(50))
    assert outcome.data == unbounded.data


def test_the_default_budget_holds_the_default_log_limit_uncut() -> None:
    assert QueryLogsInput(service="s", start=START, end=END).limit == 10
    assert load_settings(None).budget.max_observation_bytes == 4096


def test_counts_are_corrected_per_tool() -> None:
    rows = {"columns": ["a"], "rows": [["x" * 100]] * 10, "row_count": 10, "truncated": False}
    cut = fit_projection("query_mysql", rows, 400)
    assert cut["row_count"] == len(cut["rows"]) < 10
    assert cut["truncated"] is True
    docs = {"documents": [{"title": "t", "snippet": "y" * 200}] * 5, "returned": 5}
    cut = fit_projection("lookup_knowledge", docs, 600)
    assert cut["returned"] == len(cut["documents"]) < 5
    assert cut["truncated"] is True
    assert projection_bytes(cut) <= 600


def test_an_answer_that_cannot_fit_one_item_is_result_too_large() -> None:
    with pytest.raises(ToolError) as info:
        fit_projection("query_logs", {"entries": [{"message": "z" * 5000}], "returned": 1}, 1024)
    assert info.value.code == "RESULT_TOO_LARGE"


class _Huge:
    async def execute(self, request: ToolRequest) -> AdapterResult:
        return AdapterResult(EvidenceStatus.FOUND, {"documents": [{"snippet": "w" * 10_000}], "returned": 1})


async def test_boundary_reports_result_too_large_as_a_stable_error() -> None:
    boundary = ToolBoundary({"lookup_knowledge": _Huge()}, max_observation_bytes=1024)
    params: Any = LookupKnowledgeInput(query="x")
    outcome = await boundary.invoke(ToolRequest("r", "s", "c", "lookup_knowledge", params))
    assert (outcome.status, outcome.error_code, outcome.data) == ("ERROR", "RESULT_TOO_LARGE", None)
