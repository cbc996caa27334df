"""The chat generator factory: the scripted replay model or any OpenAI-compatible server.

No retry anywhere: the OpenAI client is built with `max_retries=0`, because a retried model call is
a second model call the budget did not authorize. Its HTTP client is the bounded one
(`tools.outbound_http`): the server's answer is capped, the whole call has `timeout_s` as its deadline,
and no redirect carries the prompt and evidence to another server.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from agent.scenarios import Scenario, resolve_scenario
from agent.settings import ConfigError, ModelSettings

DEFAULT_SCENARIO = "evidence-backed-diagnosis"
OPENAI_BASE_URL = "https://api.openai.com/v1"
# One chat completion: a reply of `max_tokens` tokens in JSON, with room for any server's extras
# (timings, logprobs). Far above any real answer, far below what would hurt the console.
MAX_MODEL_ANSWER_BYTES = 16 * 1024 * 1024


@dataclass(frozen=True)
class ModelChoice:
    generator: Any
    label: str


@dataclass(frozen=True)
class ModelLabelParts:
    """A model label (`build_model`'s `label`) read back: who answers, which model, and where."""

    provider: str | None  # "scripted" or "openai"; None: a label of no known shape
    name: str
    server: str | None  # an OpenAI-compatible server's base URL or host


def parse_model_label(label: str) -> ModelLabelParts:
    """The parts of a label `build_model` wrote (`openai: NAME @ WHERE`, `scripted: SCENARIO`), so the
    trace export can name the model and server of live and audited runs alike; any other label (an
    older audit's, an edited file's) is all name."""
    provider, sep, rest = label.partition(": ")
    if not sep or provider not in ("scripted", "openai"):
        return ModelLabelParts(None, label, None)
    name, at, server = rest.partition(" @ ")
    return ModelLabelParts(provider, name, server if at and server else None)


def generation_kwargs(settings: ModelSettings) -> dict[str, Any]:
    """What every model request carries: a token limit always, temperature and seed when set."""
    kwargs: dict[str, Any] = {"max_tokens": settings.max_tokens}
    if settings.temperature is not None:
        kwargs["temperature"] = settings.temperature
    if settings.seed is not None:
        kwargs["seed"] = settings.seed
    return kwargs


def server_enforces_draft_schema(settings: ModelSettings) -> bool:
    """Whether the final no-tool round sends the run's Draft schema as `response_format`.

    Only an OpenAI-compatible server can enforce it; the scripted model replays its script.
    """
    return settings.provider == "openai" and settings.structured_output == "auto"


def build_model(settings: ModelSettings, scenario: Scenario | None) -> ModelChoice:
    if settings.provider == "scripted":
        from agent.model.scripted import ScriptedChatGenerator

        chosen = scenario or resolve_scenario(settings.scenario or DEFAULT_SCENARIO)
        return ModelChoice(ScriptedChatGenerator(chosen.rounds), f"scripted: {chosen.name}")
    return _openai(settings)


def check_model_settings(settings: ModelSettings) -> None:
    """What `build_model` would refuse, found without importing the client (the console checks it
    before its first frame)."""
    if settings.provider == "openai" and not os.environ.get(settings.api_key_env) and not settings.base_url:
        raise ConfigError(f"model.provider is openai but env var {settings.api_key_env} is not set")


def _openai(settings: ModelSettings) -> ModelChoice:
    from haystack.components.generators.chat import OpenAIChatGenerator
    from haystack.utils import Secret

    from tools.outbound_http import HttpBounds, client_options

    check_model_settings(settings)
    if os.environ.get(settings.api_key_env):
        api_key = Secret.from_env_var(settings.api_key_env)
    else:
        # Local OpenAI-compatible servers (llama.cpp, vLLM, Ollama) accept any key.
        api_key = Secret.from_token("not-needed")
    generator = OpenAIChatGenerator(
        api_key=api_key,
        model=settings.name,
        api_base_url=settings.base_url,
        timeout=settings.timeout_s,
        max_retries=0,
        generation_kwargs=generation_kwargs(settings),
        tools_strict=settings.strict_tools,
        http_client_kwargs=client_options(
            settings.base_url or OPENAI_BASE_URL, HttpBounds(MAX_MODEL_ANSWER_BYTES, settings.timeout_s)
        ),
    )
    where = settings.base_url or "api.openai.com"
    return ModelChoice(generator, f"openai: {settings.name} @ {where}")
