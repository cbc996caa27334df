"""A round on which the model may call one tool OR answer the Draft, for a grammar-constrained server.

The spec lets the Agent stop at any time: zero tool calls and a no-conclusion Draft are an honest
answer to a query without context, and a call made only to show activity is not. A server that holds
a small model's reply to a grammar must therefore be given one that admits both. llama.cpp's server
builds its grammar from a request's tools (any text, then calls) or from its `response_format` (one
JSON value), never from both: with a format it neither parses calls nor lets a tool grammar in. So
such a round sends `tool_choice: "none"` (the tools are still listed in the prompt, and the server's
cached prompt prefix stays valid) and a `response_format` whose schema is one of:
- a call `{"name": <tool>, "arguments": <its narrowed parameters>}`, one branch per tool: the object a
  call is written as between the template's `<tool_call>` tags (agent.model.tool_round_schema);
- the run's Draft (agent.draft.schema).
The reply comes back as text; `call_from_reply` turns a reply that is exactly one call object into
that tool call (with no ID: the harness assigns `call-r<round>-<n>`), so the Agent, the harness, the
audit and the transcript see an ordinary call. Anything else stays text, and the strict Draft parser
judges it. A call object and a Draft cannot be confused: they share no key.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from agent.draft.schema import draft_response_format

CALL_KEYS = frozenset({"name", "arguments"})


def call_or_draft_kwargs(tools: Iterable[Any], draft_schema: dict[str, Any]) -> dict[str, Any]:
    """The generation kwargs of a round that admits one call of `tools` or a Draft of `draft_schema`."""
    calls = [
        {
            "type": "object",
            "properties": {"name": {"const": tool.name}, "arguments": tool.parameters},
            "required": ["name", "arguments"],
            "additionalProperties": False,
        }
        for tool in tools
    ]
    schema = {"anyOf": [*calls, draft_schema]}
    return {"tool_choice": "none", "extra_body": {"response_format": draft_response_format(schema)}}


def call_from_reply(reply: Any) -> Any:
    """`reply` with its text read as one tool call when it is exactly a call object, else unchanged."""
    from haystack.dataclasses import ChatMessage, ToolCall

    text = getattr(reply, "text", None)
    if not isinstance(text, str) or getattr(reply, "tool_calls", None):
        return reply
    try:
        value = json.loads(text)
    except (ValueError, RecursionError):
        return reply
    if not (
        isinstance(value, dict)
        and set(value) == CALL_KEYS
        and isinstance(value["name"], str)
        and isinstance(value["arguments"], dict)
    ):
        return reply
    call = ToolCall(tool_name=value["name"], arguments=value["arguments"], id=None)
    return ChatMessage.from_assistant(tool_calls=[call], meta=reply.meta)
