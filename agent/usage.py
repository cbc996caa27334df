"""RoundUsage: what one model round cost in tokens, as the provider reported it or as estimated.

The token budget is only as good as the usage it is fed, and many OpenAI-compatible servers omit
usage, report only `total_tokens`, or report zeros. A provider's usage is read defensively (any
shape: strings, negatives, bools, nested objects, huge or non-finite numbers — never a crash); every
count that is missing or unusable is estimated from the UTF-8 bytes actually sent and received, and
the round is marked estimated, so the budget never silently stops counting.

The estimate is 1 token per BYTES_PER_TOKEN UTF-8 bytes, rounded up. Current BPE vocabularies
(o200k, Qwen2.5, Llama 3) average about 4 bytes per token on English prose and 3.5 on JSON, so the
estimate over-counts those by 15-35 %; a Han character is 3 UTF-8 bytes and costs about one token
or less on those vocabularies, so Chinese text is counted at roughly its real cost. Over-counting is
the safe side of a budget.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

BYTES_PER_TOKEN = 3
# No model has a context anywhere near this: a larger "count" is garbage, not usage.
MAX_REPORTED_TOKENS = 2**31 - 1
PROMPT_KEYS = ("prompt_tokens", "input_tokens")
COMPLETION_KEYS = ("completion_tokens", "output_tokens")
TOTAL_KEYS = ("total_tokens",)
ESTIMATED_META_KEY = "usage_estimated"


@dataclass(frozen=True)
class RoundUsage:
    prompt_tokens: int
    completion_tokens: int
    estimated: bool

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def to_meta(self) -> dict[str, Any]:
        """The reply meta the rest of the run reads: OpenAI-shaped, always clean integers."""
        return {
            "usage": {
                "prompt_tokens": self.prompt_tokens,
                "completion_tokens": self.completion_tokens,
                "total_tokens": self.total_tokens,
            },
            ESTIMATED_META_KEY: self.estimated,
        }

    @classmethod
    def from_meta(cls, meta: Mapping[str, Any]) -> RoundUsage:
        """Read back what `to_meta` wrote; anything else counts as an estimated round of nothing."""
        usage = meta.get("usage")
        usage = usage if isinstance(usage, Mapping) else {}
        return cls(
            prompt_tokens=_count(usage, PROMPT_KEYS) or 0,
            completion_tokens=_count(usage, COMPLETION_KEYS) or 0,
            estimated=meta.get(ESTIMATED_META_KEY) is not False,
        )


def estimate_tokens(n_bytes: int) -> int:
    return -(-max(n_bytes, 0) // BYTES_PER_TOKEN)


def round_usage(reported: Any, sent_bytes: int, received_bytes: int) -> RoundUsage:
    """The round's usage: reported counts where usable, estimates from bytes where not."""
    usage = reported if isinstance(reported, Mapping) else {}
    prompt = _count(usage, PROMPT_KEYS)
    completion = _count(usage, COMPLETION_KEYS)
    total = _count(usage, TOTAL_KEYS)
    if prompt == 0 or total == 0:
        # Every round sends a non-empty prompt: a report that it cost nothing is not a count at all.
        prompt = completion = total = None
    if total is not None:
        if prompt is None and completion is not None and total >= completion:
            prompt = total - completion
        elif completion is None and prompt is not None and total >= prompt:
            completion = total - prompt
    estimated = prompt is None or completion is None
    if prompt is None and completion is None and total is not None:
        # Only the total is known: keep it (the budget is exact) and estimate how it splits.
        completion = min(estimate_tokens(received_bytes), total)
        prompt = total - completion
    return RoundUsage(
        prompt_tokens=prompt if prompt is not None else estimate_tokens(sent_bytes),
        completion_tokens=completion if completion is not None else estimate_tokens(received_bytes),
        estimated=estimated,
    )


def _count(usage: Mapping[str, Any], keys: tuple[str, ...]) -> int | None:
    """The first usable count under `keys`: a non-negative integral number in range (bools are not)."""
    for key in keys:
        value = usage.get(key)
        if isinstance(value, bool) or not isinstance(value, int | float):
            continue
        if isinstance(value, float):
            if not math.isfinite(value):
                continue
            value = math.ceil(value)
        if 0 <= value <= MAX_REPORTED_TOKENS:
            return int(value)
    return None


def text_bytes(text: str | None) -> int:
    """UTF-8 size that never raises: a lone surrogate still costs what it would take to send."""
    return len(text.encode("utf-8", "surrogatepass")) if text else 0


def message_bytes(message: Any) -> int:
    """What one chat message puts on the wire: its texts, tool calls and tool results."""
    size = sum(text_bytes(t) for t in getattr(message, "texts", None) or [])
    for call in getattr(message, "tool_calls", None) or []:
        size += text_bytes(call.tool_name) + text_bytes(call.id) + text_bytes(_json(call.arguments))
    for result in getattr(message, "tool_call_results", None) or []:
        size += text_bytes(result.result if isinstance(result.result, str) else _json(result.result))
    return size


def tool_bytes(tool: Any) -> int:
    """A tool definition travels with every request and counts as prompt."""
    if not hasattr(tool, "parameters"):
        return 0
    return text_bytes(
        _json({"name": tool.name, "description": tool.description, "parameters": tool.parameters})
    )


class WireSizes:
    """What a round sent, measuring each message and tool definition once per run, in O(new messages).

    Every round resends the whole history, so measuring it afresh each round would cost O(rounds²).
    The Agent appends to one message list, so the history measured last round is a prefix of this
    round's: its total is kept with its length and its first and last message (the objects
    themselves, so a recycled id() can never match), and only the messages after it are measured.
    Any other list (a shorter one, a replaced message at either end) is measured whole, each message
    once by identity. `measured` counts messages measured so far (tests prove the O(round) claim).
    """

    def __init__(self) -> None:
        self._known: dict[int, tuple[Any, int]] = {}
        self._prefix: tuple[int, Any, Any, int] = (0, None, None, 0)  # length, first, last, bytes
        self._tools: tuple[tuple[Any, ...], int] = ((), 0)
        self.measured = 0

    def sent(self, messages: Sequence[Any], tools: Iterable[Any] | None) -> int:
        length, first, last, size = self._prefix
        if 0 < length <= len(messages) and messages[0] is first and messages[length - 1] is last:
            size += sum(self._size(m, message_bytes) for m in messages[length:])
        else:
            size = sum(self._size(m, message_bytes) for m in messages)
        if messages:
            self._prefix = (len(messages), messages[0], messages[-1], size)
        return size + self._tool_bytes(tuple(tools or ()))

    def _tool_bytes(self, tools: tuple[Any, ...]) -> int:
        known, size = self._tools
        if len(known) == len(tools) and all(a is b for a, b in zip(known, tools, strict=True)):
            return size
        size = sum(self._size(t, tool_bytes) for t in tools)
        self._tools = (tools, size)
        return size

    def _size(self, item: Any, measure: Any) -> int:
        known = self._known.get(id(item))
        if known is not None and known[0] is item:
            return known[1]
        size = int(measure(item))
        if measure is message_bytes:
            self.measured += 1
        self._known[id(item)] = (item, size)
        return size


def _json(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    except (TypeError, ValueError, RecursionError):
        return str(value)
