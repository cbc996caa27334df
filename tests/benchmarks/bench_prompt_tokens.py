"""What the first model round costs, part by part, in tokens of a real tokenizer.

    python -m tests.benchmarks.bench_prompt_tokens --url http://127.0.0.1:8080 [--url ...]

Each `--url` is a llama.cpp `llama-server` (its `/apply-template` renders the exact prompt the model
sees, tools included; `/tokenize` counts it with the model's own tokenizer). Reported per server:
- the system prompt's rules, and the Draft JSON Schema text it carries only when no server
  enforces the run's schema (`structured_output = "off"`);
- each tool's schema as sent, and the whole tool block as the chat template renders it;
- the user message of a demo query;
- the first round in total, with structured output on and off (target: at most 1,500 tokens on);
- one `query_logs` observation of the demo incident at the default limit (10) and at 50, each after
  the `max_observation_bytes` budget, and a three-tool run's context (first round, three calls and
  observations, a final Draft) against an 8,192-token context.
Exit 1 if the first round with structured output on exceeds the target on any server.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

import httpx

from agent.prompt import system_prompt
from agent.settings import load_settings
from agent.use_case import agent_input_text, frozen_tools
from tests.benchmarks.machine import hardware
from tools.adapter import ToolRequest
from tools.boundary import ToolBoundary
from tools.definitions import QueryLogsInput
from tools.logs_file import LogFileAdapter, bundled_logs_path
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
    user = {"role": "user", "content": agent_input_text(QUERY, None)}
    on = [{"role": "system", "content": system_prompt(schema_enforced=True)}, user]
    off = [{"role": "system", "content": system_prompt(schema_enforced=False)}, user]
    first_on = server.tokens(server.rendered(on, tools))
    first_off = server.tokens(server.rendered(off, tools))
    without_tools = server.tokens(server.rendered(on, None))
    rules = server.tokens(system_prompt(schema_enforced=True))
    observations = {
        limit: server.tokens(logs_observation(limit, max_observation_bytes)) for limit in (10, 50)
    }
    call_tokens, draft_tokens = 80, 400  # a tool call's arguments; a modest Draft
    three_tool_run = first_on + 3 * (call_tokens + observations[10]) + draft_tokens
    return {
        "model": server.model(),
        "rules": rules,
        "schema_text": server.tokens(system_prompt(schema_enforced=False)) - rules,
        "tools_each": {
            t["function"]["name"]: server.tokens(json.dumps(t, ensure_ascii=False)) for t in tools
        },
        "tool_block": first_on - without_tools,
        "user_message": server.tokens(user["content"]),
        "first_round_structured_on": first_on,
        "first_round_structured_off": first_off,
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
        first, run = figures["first_round_structured_on"], figures["three_tool_run"]
        print(
            f"{figures['model']}: first round {first} tokens (target <= {TARGET_FIRST_ROUND}: "
            f"{'met' if first <= TARGET_FIRST_ROUND else 'MISSED'}); three-tool run ~{run}"
            f" of {CONTEXT} ({'fits' if run <= CONTEXT else 'does NOT fit'})"
        )
        ok = ok and first <= TARGET_FIRST_ROUND
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
