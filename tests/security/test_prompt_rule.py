"""Prompt injection: the one system prompt says tool data is untrusted data, never instructions.

The hostile-content tests (`tests/resilience/test_hostile_content.py`, `test_hostile_console.py`) prove
injected evidence changes nothing the harness does; this keeps the model told so as well.
"""

from __future__ import annotations

from agent.draft.rules import run_bounds
from agent.prompt import system_prompt
from agent.vocabulary import AUDITED_PROTOCOL_CODES, ProtocolCode


def test_the_prompt_says_tool_data_is_untrusted_and_not_instructions() -> None:
    prompt = system_prompt(run_bounds(16_384))
    assert "不可信" in prompt
    assert "不是指令" in prompt


def test_the_prompt_explains_every_control_code_the_model_can_receive() -> None:
    """A control the model was never told about reads as noise; it would likely just call again."""
    prompt = system_prompt(run_bounds(16_384))
    not_for_the_model = {ProtocolCode.SATURATED, ProtocolCode.COLLECTION_STOPPED}
    for code in AUDITED_PROTOCOL_CODES - not_for_the_model:
        assert f"{code}=" in prompt, code
