"""Which request shaping an OpenAI-compatible server honours, asked of the server once per process.

`[model] request_shaping = "auto"` must not send a server what it does not honour: a reply held to
"one call or the Draft" by a `response_format` (the call written as JSON text) is what llama.cpp's
server's grammar enforces, strict functions only servers that constrain them. So "auto" asks before
the first model round of a base URL (docs/contracts.md, "Request shaping"):
- no base URL: OpenAI's own API, which constrains strict functions: "strict";
- `GET {base_url}/models` lists a model `owned_by: "llamacpp"`: llama.cpp's server. If its chat
  template (`GET /props`) marks a call `<tool_call>` … `</tool_call>` (the templates `diagnose demo
  model-server` writes, Qwen 2.5's, Hermes'), "llama.cpp"; with another template it constrains a
  call's arguments only once the model writes one: "strict";
- `owned_by: "vllm"`: vLLM constrains strict functions: "strict";
- anything else: "off"; no answer at all (refused, timed out) is "off" for this run only, and the
  next run asks again.
The probe is two small GETs through the bounded client (tools.outbound_http: each answer at most
4 MiB, each GET within `min(timeout_s, 5 s)`, no redirect); the API key (when its variable is set)
travels only in the Authorization header, as with every model request, and never into the log.
"""

from __future__ import annotations

import logging
import os
from typing import Any, Literal

from agent.settings import ModelSettings

ShapingMode = Literal["llama.cpp", "strict", "off"]

# The markers of a call in the templates the "llama.cpp" shaping is chosen for.
TOOL_CALL_OPEN = "<tool_call>\n"
TOOL_CALL_CLOSE = "</tool_call>"
PROBE_TIMEOUT_S = 5.0
# `/props` carries the chat template and the server's settings: tens of KiB.
PROBE_ANSWER_BYTES = 4 * 1024 * 1024

log = logging.getLogger(__name__)
_resolved: dict[str, ShapingMode] = {}


async def shaping_mode(settings: ModelSettings) -> ShapingMode:
    """The shaping a run sends: the configured one, or for "auto" the one its server honours."""
    if settings.provider != "openai":
        return "off"
    if settings.request_shaping != "auto":
        return settings.request_shaping
    if not settings.base_url:
        return "strict"
    known = _resolved.get(settings.base_url)
    if known is not None:
        return known
    mode = await _probe(settings)
    log.info("request shaping for the configured model server: %s", mode or "off (the server did not answer)")
    if mode is None:
        return "off"
    _resolved[settings.base_url] = mode
    return mode


async def _probe(settings: ModelSettings) -> ShapingMode | None:
    import httpx

    from tools.outbound_http import HttpBounds, bounded_client

    assert settings.base_url is not None  # noqa: S101 - invariant for the type checker
    base = settings.base_url.rstrip("/")
    key = os.environ.get(settings.api_key_env)
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    timeout = min(settings.timeout_s, PROBE_TIMEOUT_S)
    bounds = HttpBounds(PROBE_ANSWER_BYTES, timeout, connect_timeout_s=timeout)
    try:
        async with bounded_client(base, bounds, headers=headers) as client:
            owners = _owners(await _json(client, f"{base}/models"))
            if "llamacpp" in owners:
                root = base.removesuffix("/v1")
                props = await _json(client, f"{root}/props")
                template = props.get("chat_template") if isinstance(props, dict) else None
                marked = isinstance(template, str) and TOOL_CALL_OPEN.strip() in template
                return "llama.cpp" if marked else "strict"
    except (httpx.HTTPStatusError, ValueError):
        return "off"  # it answered, but not as a server we know
    except httpx.HTTPError as exc:  # no answer, or one past the client's bounds
        log.info("asking the model server what it is failed: %s", getattr(exc, "reason", type(exc).__name__))
        return None
    return "strict" if "vllm" in owners else "off"


async def _json(client: Any, url: str) -> Any:
    response = await client.get(url)
    response.raise_for_status()
    return response.json()


def _owners(listing: Any) -> set[str]:
    """The `owned_by` of every model an OpenAI-style `/models` answer lists (any shape: never a crash)."""
    data = listing.get("data") if isinstance(listing, dict) else None
    if not isinstance(data, list):
        return set()
    return {str(model.get("owned_by")) for model in data if isinstance(model, dict)}
