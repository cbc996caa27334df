"""Prompt injection: the one system prompt says tool data is untrusted data, never instructions.

The hostile-content tests (`tests/resilience/test_hostile_content.py`, `test_hostile_console.py`) prove
injected evidence changes nothing the harness does; this keeps the model told so as well.
"""

from __future__ import annotations

from agent.draft_rules import run_bounds
from agent.prompt import system_prompt


def test_the_prompt_says_tool_data_is_untrusted_and_not_instructions() -> None:
    prompt = system_prompt(run_bounds(16_384))
    assert "不可信" in prompt and "不是指令" in prompt
