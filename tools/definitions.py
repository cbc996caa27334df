"""The three frozen evidence tools: names, business inputs and the envelope the model fills.

These definitions are the whole tool surface the model ever sees. Business inputs are bounded and
strict so an adapter never has to defend against shapes it did not ask for. The names and limits are
defined here; the pydantic models are `tools.input_models`, so a module that only needs a tool's name
(the console's first frame) does not import pydantic.
"""

from __future__ import annotations

from enum import StrEnum


class ToolName(StrEnum):
    """The three frozen tools' names: the `tool` of every call, invocation, citation and eval case."""

    LOOKUP_KNOWLEDGE = "lookup_knowledge"
    QUERY_LOGS = "query_logs"
    QUERY_MYSQL = "query_mysql"


TOOL_NAMES: tuple[ToolName, ...] = tuple(ToolName)

MAX_SQL_BYTES = 4000
# A runbook's source is its path under the knowledge folder; a read names one a search returned.
MAX_KNOWLEDGE_SOURCE_CHARS = 1000
# Parts of one runbook a read may ask for: a file at the size cap read in the smallest observations.
MAX_KNOWLEDGE_PART = 100_000
# Tool call IDs are model output. Provider IDs are far shorter (OpenAI `call_` + 24 characters, vLLM 46);
# a longer one is answered with a control observation before anything runs, so no unbounded ID
# reaches an observation, an event or the audit.
MAX_TOOL_CALL_ID_CHARS = 128
# A tool name outside the three is echoed in its call's observation cut to this many characters (and
# `…`): the model learns which call was refused without a name of any size being sent back again.
MAX_ECHOED_TOOL_NAME_CHARS = 64

DESCRIPTIONS: dict[ToolName, str] = {
    ToolName.LOOKUP_KNOWLEDGE: "检索运维知识库（runbook、故障手册）。",
    ToolName.QUERY_LOGS: "按服务、时间窗口、级别和关键字查询应用日志。",
    ToolName.QUERY_MYSQL: (
        "对 MySQL 执行一条只读 SQL（SELECT/SHOW/DESCRIBE/EXPLAIN）："
        "业务表，或会话、锁、语句、状态、复制的诊断视图。"
    ),
}

# `previous_observation` is optional (absent = null); `input` is required.
ENVELOPE_KEYS = frozenset({"previous_observation", "input"})
