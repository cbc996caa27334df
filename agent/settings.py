"""Configuration: a TOML file, overridden by `DIAGNOSE_<SECTION>__<KEY>` env vars.
(docs/contracts.md, "Configuration")

With no file and no env, everything runs on embedded defaults: the scripted model, the bundled demo
runbooks and log file, MySQL unconfigured and the audit in the user state dir. Secrets are never
values here, only the *names* of env vars that hold them.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any, ClassVar, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_settings import (
    BaseSettings,
    InitSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

from agent.closest_name import did_you_mean
from agent.errors import DiagnoseError
from agent.input_files import MIB, InputFileError, read_input_text
from tools.logs.custom_format import compile_pattern
from tools.logs.file_formats import format_names
from tools.logs.json_lines import ROLE_NAMES, ROLES
from tools.logs.timestamps import timezone_named

CONFIG_ENV = "DIAGNOSE_CONFIG"
MAX_CONFIG_BYTES = MIB


class Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ModelSettings(Section):
    provider: Literal["scripted", "openai"] = "scripted"
    scenario: str | None = None
    base_url: str | None = None
    name: str = "gpt-4o-mini"
    api_key_env: str = "OPENAI_API_KEY"
    timeout_s: float = Field(default=60.0, gt=0)
    # Generation settings, sent with every model request. The default token limit leaves room for a
    # Draft of the default `max_draft_bytes` (16 KiB at about 4 bytes per token); a reply cut by it
    # fails the run as MODEL_ERROR with cause MAX_TOKENS instead of running a round until the
    # server's context is full.
    max_tokens: int = Field(default=4096, ge=16, le=131_072)
    temperature: float | None = Field(default=0.0, ge=0.0, le=2.0)
    seed: int | None = Field(default=None, ge=0, le=2**31 - 1)
    # "auto": an OpenAI-compatible server enforces the run's Draft schema (`response_format`) on the
    # round where no tool may be called; "off": it never does. Either way the prompt carries the
    # Draft's compact schema, since the model may answer on any round (agent/prompt.py).
    structured_output: Literal["auto", "off"] = "auto"
    # OpenAI-style strict function calling: every tool property becomes required (optional ones
    # nullable) and the provider guarantees schema-valid arguments. Off by default because not every
    # OpenAI-compatible server accepts it; llama.cpp's server constrains arguments either way.
    strict_tools: bool = False
    # How a round where a tool may be called is asked of the server (agent.model.request_shaping): "llama.cpp"
    # forces one tool call the server's grammar constrains to this round's narrowed schemas; "strict"
    # sends those schemas as strict functions and leaves the choice to the model (OpenAI, vLLM);
    # "off" sends the frozen schemas only; "auto" asks the server what it is, once per process.
    request_shaping: Literal["auto", "llama.cpp", "strict", "off"] = "auto"


class BudgetSettings(Section):
    max_model_calls: int = Field(default=8, ge=1)
    max_total_tokens: int = Field(default=64_000, ge=1)
    deadline_s: float = Field(default=300.0, gt=0)
    max_query_bytes: int = Field(default=4_096, ge=1)
    max_previous_turn_bytes: int = Field(default=8_192, ge=1)
    max_input_bytes: int = Field(default=12_288, ge=1)
    max_draft_bytes: int = Field(default=16_384, ge=1)
    max_run_bytes: int = Field(default=262_144, ge=1)
    # One tool observation's projection, in UTF-8 bytes of its JSON: longer result lists are cut
    # (marked `truncated`), so a three-tool run fits the context of a small local model.
    max_observation_bytes: int = Field(default=4_096, ge=512)
    # Tool calls the harness takes up: from one model reply, and over the whole run. Later calls are
    # answered TOO_MANY_CALLS and never run, so one reply asking for sixty slow statements cannot keep a
    # backend busy until the deadline. Every built-in scenario asks for one call per reply, three per run.
    max_tool_calls_per_round: int = Field(default=8, ge=1)
    max_tool_calls_per_run: int = Field(default=40, ge=1)


class ProtocolSettings(Section):
    max_consecutive_no_gain: int = Field(default=3, ge=1)
    max_protocol_violations: int = Field(default=3, ge=1)


class KnowledgeSettings(Section):
    path: Path | None = None
    # Runbooks larger than this are skipped (and reported), so one huge file cannot stall every lookup.
    max_file_bytes: int = Field(default=2 * 1024 * 1024, ge=1)


class LogFormatSettings(Section):
    """`[logs.formats.NAME]`: a log format none of the built-in ones covers, as one regex."""

    pattern: str
    time_format: str | None = None  # strptime; without it ISO stamps and epoch numbers are read
    multiline: bool = True  # lines the pattern does not match continue the record above


class LogsSettings(Section):
    source: Literal["file", "loki", "elasticsearch", "journald"] = "file"
    path: Path | None = None
    url: str | None = None
    max_window_minutes: int = Field(default=360, ge=1)
    max_lines: int = Field(default=200, ge=1, le=5000)
    # Loki only: the model picks a service name; each maps to a fixed stream selector written here.
    services: dict[str, str] = Field(default_factory=dict)
    tenant: str | None = None
    # Loki: unset, a line's severity is its `level` label, else Loki 3's `detected_level`.
    level_label: str | None = None
    # Loki and Elasticsearch/OpenSearch: credentials only from the variables named here, one scheme:
    # basic auth (`username` + `password_env`), a bearer token, or an Elasticsearch API key.
    username: str | None = None
    password_env: str | None = None
    token_env: str | None = None
    api_key_env: str | None = None
    # Elasticsearch/OpenSearch: the index, alias, data stream or pattern searched.
    index: str = "logs-*"
    # Files (docs/contracts.md, "Configuration"): each file's format ("auto": recognised per file),
    # the zone of stamps without an offset, JSON field names by role, services by file glob, and
    # formats written as one regex each.
    format: str = "auto"
    timezone: str = "UTC"
    fields: dict[str, str] = Field(default_factory=dict)
    file_services: dict[str, str] = Field(default_factory=dict)
    formats: dict[str, LogFormatSettings] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _readable_files(self) -> LogsSettings:
        timezone_named(self.timezone)
        for name, custom in self.formats.items():
            compile_pattern(name, custom.pattern)
        if self.format not in format_names(self.formats):
            raise ValueError(
                f"[logs] format {self.format!r} is neither a built-in format nor in [logs.formats]"
            )
        unknown = sorted(set(self.fields) - set(ROLE_NAMES))
        if unknown:
            raise ValueError(f"[logs.fields] knows {', '.join(ROLES)}, not {', '.join(unknown)}")
        return self

    @model_validator(mode="after")
    def _one_credential(self) -> LogsSettings:
        named = [key for key in ("password_env", "token_env", "api_key_env") if getattr(self, key)]
        if len(named) > 1:
            raise ValueError(f"[logs] takes one credential, not {' and '.join(named)}")
        if (self.username is None) != (self.password_env is None):
            raise ValueError("[logs] basic auth needs both username and password_env")
        if self.api_key_env and self.source != "elasticsearch":
            raise ValueError('[logs] api_key_env is for source = "elasticsearch"; Loki takes token_env')
        return self


class MysqlSettings(Section):
    dsn: str | None = None
    password_env: str | None = None
    statement_timeout_ms: int = Field(default=5_000, ge=1)
    max_rows: int = Field(default=100, ge=1)
    allowed_schemas: list[str] = Field(default_factory=list)


class AuditSettings(Section):
    """Where the audit lives (docs/contracts.md, "Configuration"): `path`, a SQLite file (kept for
    existing configurations), or `url`, `sqlite:///PATH` or `mysql://user@host:port/db` with the
    password's variable in `password_env`. audit.location parses the URL when the audit is opened."""

    path: Path | None = None
    url: str | None = None
    password_env: str | None = None
    # A team audit's running runs renew a lease this often; recovery closes a run whose lease is
    # older than `lease_s` (a crashed writer on any host), never one still renewed.
    heartbeat_s: float = Field(default=5.0, gt=0)
    lease_s: float = Field(default=30.0, gt=0)

    @model_validator(mode="after")
    def _one_location(self) -> AuditSettings:
        if self.path is not None and self.url is not None:
            raise ValueError("give [audit] url or [audit] path, not both")
        if self.lease_s <= 2 * self.heartbeat_s:
            raise ValueError("[audit] lease_s must exceed twice heartbeat_s, so one late beat is no crash")
        return self


class ServeSettings(Section):
    """`diagnose serve`: every browser tab is a console process holding the operator's credentials."""

    max_consoles: int = Field(default=4, ge=1, le=64)


def check_trace_endpoint(url: str) -> str:
    """An OTLP/HTTP traces URL (`http://localhost:4318/v1/traces`), or `ValueError` saying why not.

    Credentials never go into it: a URL is written into configuration files, shell history and logs,
    so a user, password, query or fragment is refused and the auth header is read from the variable
    `[telemetry.traces] headers_env` names. Messages never repeat the URL."""
    try:
        parts = urlsplit(url.strip())
        parts.port  # noqa: B018 - raises ValueError on a port that is not a number
    except ValueError:
        raise ValueError("the trace endpoint must be an http:// or https:// URL") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("the trace endpoint must be an http:// or https:// URL with a host")
    if parts.username is not None or parts.password is not None or parts.query or parts.fragment:
        raise ValueError(
            "the trace endpoint must hold no user, password, query or fragment: "
            "put the auth header in the variable [telemetry.traces] headers_env names"
        )
    return url.strip()


class TraceSettings(Section):
    """`[telemetry.traces]`: every run as an OpenTelemetry trace over OTLP/HTTP (docs/contracts.md,
    "Traces"). Off while `endpoint` is unset, which is the default: nothing leaves the machine unless
    the operator names where it goes. The auth header is only ever read from the variable
    `headers_env` names (`name=value[,name=value]`, as `OTEL_EXPORTER_OTLP_HEADERS`)."""

    endpoint: str | None = None
    headers_env: str | None = None
    service_name: str = Field(default="diagnosis-console", min_length=1, max_length=255)
    # Off: no query, tool input, observation or Draft text leaves the process. On: that text, redacted,
    # neutralised and cut to `max_content_bytes` per attribute.
    capture_content: bool = False
    max_content_bytes: int = Field(default=4096, ge=64, le=1_048_576)
    # The share of runs traced (a run is traced whole or not at all, decided by its trace ID).
    sample_ratio: float = Field(default=1.0, ge=0.0, le=1.0)
    # One export request, retries included; and how long the end of a run may wait for its spans to
    # leave (`diagnose run` prints its result first). Past either the spans are dropped, never the run.
    export_timeout_s: float = Field(default=5.0, gt=0, le=60)
    flush_timeout_s: float = Field(default=1.0, ge=0, le=60)

    @field_validator("endpoint")
    @classmethod
    def _endpoint(cls, value: str | None) -> str | None:
        return None if value is None else check_trace_endpoint(value)


class TelemetrySettings(Section):
    """Library usage telemetry (Haystack's): off unless the operator opts in. `traces` is this
    console's own OpenTelemetry export, off until an endpoint is configured; neither turns on the other."""

    enabled: bool = False
    traces: TraceSettings = Field(default_factory=TraceSettings)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="DIAGNOSE_", env_nested_delimiter="__", extra="forbid")

    model: ModelSettings = Field(default_factory=ModelSettings)
    budget: BudgetSettings = Field(default_factory=BudgetSettings)
    protocol: ProtocolSettings = Field(default_factory=ProtocolSettings)
    knowledge: KnowledgeSettings = Field(default_factory=KnowledgeSettings)
    logs: LogsSettings = Field(default_factory=LogsSettings)
    mysql: MysqlSettings = Field(default_factory=MysqlSettings)
    audit: AuditSettings = Field(default_factory=AuditSettings)
    serve: ServeSettings = Field(default_factory=ServeSettings)
    telemetry: TelemetrySettings = Field(default_factory=TelemetrySettings)

    # The parsed configuration file of a per-load subclass (see `load_settings`); None: no file.
    config_document: ClassVar[dict[str, Any] | None] = None

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        sources: list[PydanticBaseSettingsSource] = [init_settings, env_settings]
        document = getattr(settings_cls, "config_document", None)
        if document is not None:
            sources.append(InitSettingsSource(settings_cls, init_kwargs=document))
        return tuple(sources)


class ConfigError(DiagnoseError):
    """The configuration cannot be used; the message says which file/key and why (no secret values)."""


def read_config_file(path: Path) -> dict[str, Any]:
    """The TOML document, read with a size cap from a regular file only (never a FIFO or a device)."""
    try:
        text = read_input_text(path, what="config file", limit=MAX_CONFIG_BYTES)
    except InputFileError as exc:
        raise ConfigError(str(exc)) from None
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc}") from None
    except RecursionError:
        raise ConfigError(f"cannot read config file {path}: nested too deeply") from None


def load_settings(config_file: Path | str | None = None, overrides: dict[str, Any] | None = None) -> Settings:
    """Load settings: defaults < TOML file < env vars < `overrides` (a scenario's own settings)."""
    path = config_file or os.environ.get(CONFIG_ENV) or None
    toml_path = Path(path) if path else None
    settings_cls: type[Settings] = Settings
    if toml_path is not None:
        # A per-call subclass carries the document, so concurrent loads never share a global.
        settings_cls = type("FileSettings", (Settings,), {"config_document": read_config_file(toml_path)})
    try:
        return settings_cls(**(overrides or {}))
    except ValidationError as exc:
        document = settings_cls.config_document or {}
        problems = "; ".join(
            _problem(err["loc"], err["type"], err["msg"], document, toml_path)
            for err in exc.errors(include_input=False)
        )
        raise ConfigError(f"invalid configuration: {problems}") from None
    except ValueError as exc:  # TOML syntax errors surface as ValueError subclasses
        raise ConfigError(f"cannot read config file {toml_path}: {exc}") from None


def _problem(
    loc: tuple[int | str, ...], kind: str, message: str, document: dict[str, Any], path: Path | None
) -> str:
    """One configuration problem, where it was written (the file, or the `DIAGNOSE_*` variable) and
    what is wrong; an unknown key is named with the closest valid one, since a typo is the usual cause."""
    keys = [str(part) for part in loc]
    origin = _origin(keys, document, path)
    where = f"{origin}: " if origin else ""
    if kind == "extra_forbidden":
        valid = _keys_of(keys[:-1])
        hint = did_you_mean(keys[-1], valid)
        if len(keys) == 1:
            return f"{where}unknown section [{keys[0]}]{hint}"
        return f"{where}unknown key {keys[-1]!r} in [{'.'.join(keys[:-1])}]{hint}"
    return f"{where}{'.'.join(keys)}: {message}"


def _origin(keys: list[str], document: dict[str, Any], path: Path | None) -> str | None:
    """The configuration file when it holds the key, else the environment variable that set it."""
    node: Any = document
    for key in keys:
        if not isinstance(node, dict) or key not in node:
            break
        node = node[key]
    else:
        return str(path) if path is not None else None
    variable = "DIAGNOSE_" + "__".join(keys)
    return next((name for name in os.environ if name.upper() == variable.upper()), None)


def _keys_of(section: list[str]) -> list[str]:
    """The valid keys of the configuration section at `section` ([] when it is not a section)."""
    model: type[BaseModel] = Settings
    for key in section:
        field = model.model_fields.get(key)
        annotation = field.annotation if field is not None else None
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            return []
        model = annotation
    return list(model.model_fields)
