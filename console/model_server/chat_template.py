"""The chat template the local server is started with: one of our own, for both shipped models.

Neither model's own template describes tools, and llama.cpp's server then drops the tools silently.
This template lists the tools in the system turn and writes a call as one JSON object between
`<tool_call>` and `</tool_call>` (results come back between `<tool_response>` tags in a user turn):
the layout llama.cpp's server recognises as a tool-call format, builds a grammar for from the request's
tool schemas, and parses back into native tool calls. The "llama.cpp" request shaping is chosen for
these markers (agent.model.server_kind) and holds a reply to that same call object or the Draft
(agent.call_or_draft), so the history the model reads shows its calls as it wrote them. The models differ only in their turn tokens, which
are filled in when the file is written.

llama.cpp tokenizes the rendered prompt with special tokens parsed, so a message holding the model's
turn tokens or the tool tags would end its turn and open another. The harness already writes what
the model reads from outside without them (tools.model_text); the template escapes them once more in
every message it renders but the system prompt (`\u003c` for `<`: within JSON the same text), so a
model's own reply, its call arguments, or another client's messages cannot do it either.
"""

from __future__ import annotations

from console.model_server.catalog import TurnTokens

_TEMPLATE = """\
{#- Written by `diagnose demo model-server`. Tools are listed in the system turn; a call is one JSON
    object between <tool_call> and </tool_call>; results return in <tool_response> in a user turn. -#}
{%- if messages[0].role == 'system' %}
    {%- set system = messages[0].content %}
    {%- set rest = messages[1:] %}
{%- else %}
    {%- set system = '' %}
    {%- set rest = messages %}
{%- endif %}
{%- if tools %}
    {{- '@START@system\\n' + system + '\\n\\n# Tools\\n\\nTo call a tool, answer with one JSON object {"name": <tool name>, "arguments": <arguments object>} between <tool_call> and </tool_call>. The tools are:\\n<tools>' }}
    {%- for tool in tools %}
        {{- '\\n' + (tool | tojson) }}
    {%- endfor %}
    {{- '\\n</tools>@END@\\n' }}
{%- elif system %}
    {{- '@START@system\\n' + system + '@END@\\n' }}
{%- endif %}
{%- for message in rest %}
    {%- if message.role == 'assistant' %}
        {{- '@START@@ASSISTANT@' }}
        {%- if message.content %}
            {{- '\\n' + (message.content@PLAIN@) }}
        {%- endif %}
        {%- if message.tool_calls %}
            {%- for call in message.tool_calls %}
                {%- if call.function is defined %}
                    {%- set call = call.function %}
                {%- endif %}
                {{- '\\n<tool_call>\\n{"name": "' + (call.name@PLAIN@) + '", "arguments": ' + (call.arguments | tojson@PLAIN@) + '}\\n</tool_call>' }}
            {%- endfor %}
        {%- endif %}
        {{- '@END@\\n' }}
    {%- elif message.role == 'tool' %}
        {%- if loop.first or rest[loop.index0 - 1].role != 'tool' %}
            {{- '@START@user' }}
        {%- endif %}
        {{- '\\n<tool_response>\\n' + (message.content@PLAIN@) + '\\n</tool_response>' }}
        {%- if loop.last or rest[loop.index0 + 1].role != 'tool' %}
            {{- '@END@\\n' }}
        {%- endif %}
    {%- else %}
        {{- '@START@' + message.role + '\\n' + (message.content@PLAIN@) + '@END@\\n' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '@START@@ASSISTANT@\\n' }}
{%- endif %}
"""


_TOOL_TAGS = ("<tool_call>", "</tool_call>", "<tool_response>", "</tool_response>")


def _plain_filters(turns: TurnTokens) -> str:
    """Jinja filters that write each of the model's markup tokens with its `<` escaped."""
    tokens = (turns.start, turns.end, *_TOOL_TAGS)
    return "".join(f" | replace('{token}', '\\\\u003c{token[1:]}')" for token in tokens)


def chat_template(turns: TurnTokens) -> str:
    """The template text for a model whose turns are marked by `turns`."""
    return (
        _TEMPLATE.replace("@PLAIN@", _plain_filters(turns))
        .replace("@START@", turns.start)
        .replace("@END@", turns.end)
        .replace("@ASSISTANT@", turns.assistant)
    )
