"""What a control observation tells the model (`observation.control`, docs/contracts.md "Observation").

A call that is not executed is answered with a protocol code and, for INVALID_PROGRESS_PROTOCOL, the
field that is wrong and the call the protocol expected. Never a count, a cap or a remaining allowance:
the observation contract keeps budgets away from the model.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from agent.vocabulary import ProtocolCode


@dataclass(frozen=True)
class Control:
    """One control: its code, then its detail keys in the order the model reads them."""

    code: ProtocolCode
    detail: Mapping[str, str | None] = field(default_factory=lambda: MappingProxyType({}))

    def to_json(self) -> dict[str, Any]:
        return {"code": self.code, **self.detail}


STOP_REQUIRED = Control(ProtocolCode.STOP_REQUIRED)
TOO_MANY_CALLS = Control(ProtocolCode.TOO_MANY_CALLS)
DUPLICATE_CALL = Control(ProtocolCode.DUPLICATE_CALL)
UNKNOWN_TOOL = Control(ProtocolCode.UNKNOWN_TOOL)


def invalid_progress(detail: Mapping[str, str | None]) -> Control:
    """INVALID_PROGRESS_PROTOCOL with what is wrong (`missing_field` or `invalid_field`) and, where the
    protocol expected one, `expected_tool_call_id` (null: no observation awaits evaluation)."""
    return Control(ProtocolCode.INVALID_PROGRESS_PROTOCOL, MappingProxyType(dict(detail)))
