"""The three frozen evidence tools: names, business inputs and the envelope the model fills.

These definitions are the whole tool surface the model ever sees. Business inputs are bounded and
strict so an adapter never has to defend against shapes it did not ask for. The names and limits are
defined here; the pydantic models (`tools.input_models`) load on first use of one of their names, so
a module that only needs a tool's name (the console's first frame) does not import pydantic.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

LOOKUP_KNOWLEDGE = "lookup_knowledge"
QUERY_LOGS = "query_logs"
QUERY_MYSQL = "query_mysql"
TOOL_NAMES: tuple[str, ...] = (LOOKUP_KNOWLEDGE, QUERY_LOGS, QUERY_MYSQL)

MAX_SQL_BYTES = 4000
# Tool call IDs are model output. Provider IDs are far shorter (OpenAI `call_` + 24 characters, vLLM 46);
# a longer one is answered with a control observation before anything runs, so no unbounded ID
# reaches an observation, an event or the audit.
MAX_TOOL_CALL_ID_CHARS = 128
# A tool name outside the three is echoed in its call's observation cut to this many characters (and
# `…`): the model learns which call was refused without a name of any size being sent back again.
MAX_ECHOED_TOOL_NAME_CHARS = 64

DESCRIPTIONS: dict[str, str] = {
    LOOKUP_KNOWLEDGE: "检索运维知识库（runbook、故障手册）。",
    QUERY_LOGS: "按服务、时间窗口、级别和关键字查询应用日志。",
    QUERY_MYSQL: "对业务 MySQL 执行一条只读 SQL（SELECT/SHOW/DESCRIBE/EXPLAIN）。",
}

# `previous_observation` is optional (absent = null); `input` is required.
ENVELOPE_KEYS = frozenset({"previous_observation", "input"})

if TYPE_CHECKING:  # what `__getattr__` loads on first use, typed for the modules that import it
    from tools.input_models import (  # noqa: F401 (re-exported through __getattr__)
        BUSINESS_INPUTS,
        EARLIEST_INSTANT,
        LATEST_INSTANT,
        LookupKnowledgeInput,
        PreviousObservation,
        QueryLogsInput,
        QueryMysqlInput,
        Rfc3339,
        StrictModel,
        envelope_schema,
    )

_MODEL_NAMES = frozenset(
    {
        "BUSINESS_INPUTS",
        "EARLIEST_INSTANT",
        "LATEST_INSTANT",
        "LookupKnowledgeInput",
        "PreviousObservation",
        "QueryLogsInput",
        "QueryMysqlInput",
        "Rfc3339",
        "StrictModel",
        "envelope_schema",
    }
)


def __getattr__(name: str) -> Any:
    """The models and their schema, imported on first use (PEP 562)."""
    if name in _MODEL_NAMES:
        from tools import input_models

        return getattr(input_models, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
