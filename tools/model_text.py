"""What the model reads of the outside world, written so that no string in it can end its turn
(docs/RELIABILITY.md, "Turn tokens").

A model server renders the conversation with a chat template and tokenizes the result. llama.cpp's
server does so with `parse_special` on (its completion path tokenizes the rendered prompt with
`add_special` and `parse_special` both true), so a log line, runbook or row holding `<|im_end|>` or
`<end_of_turn>` becomes the real control token: the evidence closes its turn and opens one of its own,
a `system` turn included. Other servers differ; none is trusted to tell text from markup.

Everything the model is sent from outside (the user message, every observation) is JSON, and in JSON
a `<` or `[` inside a string may be written as `\\u003c` / `\\u005b`. So each model's turn and tool
markup found in the JSON text gets its first character written that way: the text decodes to
exactly the same strings (nothing is lost, call IDs stay exact), but no server sees the token.
"""

from __future__ import annotations

import json
import re
from typing import Any

# The markup of the chat formats in use: ChatML and its relatives (`<|im_start|>`, `<|eot_id|>`,
# `<|start_header_id|>`, DeepSeek's full-width `<｜…｜>`), Gemma's turns, the tool tags of Hermes/Qwen
# style templates (ours among them), sentence markers, and Mistral's and Llama 2's bracketed tags.
TURN_MARKUP = re.compile(
    r"<\|[^|<>\s]{1,64}\|>"
    r"|<｜[^｜<>\s]{1,64}｜>"
    r"|</?(?:start_of_turn|end_of_turn|tool_call|tool_response|tools|think|s|bos|eos)>"
    r"|\[/?(?:INST|TOOL_CALLS|TOOL_RESULTS|AVAILABLE_TOOLS|SYSTEM_PROMPT)\]"
    r"|<</?SYS>>"
)
_ESCAPED = {"<": "\\u003c", "[": "\\u005b"}


def neutralise_markup(json_text: str) -> str:
    """JSON text with every turn or tool markup inside its strings escaped (markup never occurs
    outside a JSON string: neither `<` nor a bracket followed by a bare word is JSON syntax)."""
    return TURN_MARKUP.sub(lambda found: _ESCAPED[found[0][0]] + found[0][1:], json_text)


def model_json(value: Any) -> str:
    """`value` as the compact JSON a model is sent, its markup neutralised."""
    return neutralise_markup(json.dumps(value, ensure_ascii=False, separators=(",", ":")))
