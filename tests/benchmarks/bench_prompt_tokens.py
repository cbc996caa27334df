"""What the first model round costs, part by part, in tokens of a real tokenizer.

    python -m tests.benchmarks.bench_prompt_tokens --url http://127.0.0.1:8080 [--url ...]

Each `--url` is a llama.cpp `llama-server` (its `/apply-template` renders the exact prompt the model
sees, tools included; `/tokenize` counts it with the model's own tokenizer). Reported per server:
- the system prompt's protocol rules, and its Draft section: the compact Draft schema with the
  run's limits and the citation rules, which every round carries (the model may answer on any
  round), with or without `structured_output`;
- each tool's schema as sent, and the whole tool block as the chat template renders it;
- the user message of a demo query;
- the first round in total, for an OpenAI-compatible run with the default settings (target: at
  most 1,500 tokens);
- one `query_logs` observation of the demo incident at the default limit (10) and at 50, each after
  the `max_observation_bytes` budget, and a three-tool run's context (first round, three calls and
  observations, a final Draft) against an 8,192-token context.
Exit 1 if the first round exceeds the target on any server.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

import httpx

from agent.draft.rules import run_bounds
from agent.haystack_tools import frozen_tools
from agent.prompt import PROTOCOL_RULES, draft_section, system_prompt
from agent.settings import load_settings
from agent.use_case import agent_input_text
from tests.benchmarks.machine import hardware
from tools.adapter import ToolRequest
from tools.boundary import ToolBoundary
from tools.input_models import QueryLogsInput
from tools.logs.file_source import LogFileAdapter, bundled_logs_path
from tools.observation import Observation

TARGET_FIRST_ROUND = 1_500
CONTEXT = 8_192
QUERY = (
    "2026-11-30 02:00-03:00 UTC 企业客户 ent-20931 支付大量超时（POST /api/v1/payments 504），请诊断原因。"
)


class Server:
    def __init__(self, url: str) -> None:
        self.url = url.rstrip("/")
        self.client = httpx.Client(timeout=120)

    def tokens(self, text: str) -> int:
        reply = self.client.post(f"{self.url}/tokenize", json={"content": text})
        reply.raise_for_status()
        return len(reply.json()["tokens"])

    def rendered(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> str:
        body: dict[str, Any] = {"messages": messages}
        if tools:
            body["tools"] = tools
        reply = self.client.post(f"{self.url}/apply-template", json=body)
        reply.raise_for_status()
        return str(reply.json()["prompt"])

    def model(self) -> str:
        try:
            data = self.client.get(f"{self.url}/v1/models").json()["data"]
            return str(data[0]["id"]).rsplit("/", 1)[-1]
        except (httpx.HTTPError, KeyError, IndexError, ValueError):
            return "unknown model"


def tool_specs() -> list[dict[str, Any]]:
    return [{"type": "function", "function": tool.tool_spec} for tool in frozen_tools()]


def logs_observation(limit: int, max_bytes: int) -> str:
    """A real `query_logs` observation of the demo incident, through the boundary's byte budget."""
    adapter = LogFileAdapter(bundled_logs_path())
    boundary = ToolBoundary({"query_logs": adapter}, max_observation_bytes=max_bytes)
    params = QueryLogsInput(
        service="payment-service", start="2026-11-30T02:00:00Z", end="2026-11-30T03:00:00Z", limit=limit
    )
    outcome = asyncio.run(boundary.invoke(ToolRequest("run", "s", "call-1", "query_logs", params)))
    obs = Observation(
        tool_call_id="call-1", tool="query_logs", evidence_status=outcome.status, data=outcome.data
    )
    return obs.to_model_text()


def measure(server: Server, max_observation_bytes: int) -> dict[str, Any]:
    tools = tool_specs()
    settings = load_settings(None)
    # The bounds the prompt of an OpenAI-compatible run states with the default settings.
    bounds = run_bounds(settings.budget.max_draft_bytes, max_tokens=settings.model.max_tokens)
    user = {"role": "user", "content": agent_input_text(QUERY, None)}
    messages = [{"role": "system", "content": system_prompt(bounds)}, user]
    first = server.tokens(server.rendered(messages, tools))
    without_tools = server.tokens(server.rendered(messages, None))
    observations = {
        limit: server.tokens(logs_observation(limit, max_observation_bytes)) for limit in (10, 50)
    }
    call_tokens, draft_tokens = 80, 400  # a tool call's arguments; a modest Draft
    three_tool_run = first + 3 * (call_tokens + observations[10]) + draft_tokens
    return {
        "model": server.model(),
        "rules": server.tokens(PROTOCOL_RULES),
        "draft_section": server.tokens(draft_section(bounds)),
        "tools_each": {
            t["function"]["name"]: server.tokens(json.dumps(t, ensure_ascii=False)) for t in tools
        },
        "tool_block": first - without_tools,
        "user_message": server.tokens(user["content"]),
        "first_round": first,
        "logs_observation_limit_10": observations[10],
        "logs_observation_limit_50": observations[50],
        "three_tool_run": three_tool_run,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", action="append", required=True, help="a llama-server base URL (repeatable)")
    args = parser.parse_args()
    max_bytes = load_settings(None).budget.max_observation_bytes
    print(f"machine: {hardware()}; max_observation_bytes {max_bytes}")
    ok = True
    for url in args.url:
        figures = measure(Server(url), max_bytes)
        print(json.dumps(figures, ensure_ascii=False, indent=2))
        first, run = figures["first_round"], figures["three_tool_run"]
        print(
            f"{figures['model']}: first round {first} tokens (target <= {TARGET_FIRST_ROUND}: "
            f"{'met' if first <= TARGET_FIRST_ROUND else 'MISSED'}); three-tool run ~{run}"
            f" of {CONTEXT} ({'fits' if run <= CONTEXT else 'does NOT fit'})"
        )
        ok = ok and first <= TARGET_FIRST_ROUND
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
