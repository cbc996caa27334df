"""The console's runs are traced like `diagnose run`'s (docs/contracts.md, "Traces").

`[telemetry.traces] endpoint` traces every run the console makes; the spans leave when the run
environment closes at the latest (the app's exit). A trace that cannot be set up is a warning the
operator sees, and the console runs on without it.
"""

from __future__ import annotations

from pathlib import Path

from tests.support.console import SIZE, engine_ready, make_app, run_to_end
from tests.support.otlp import OtlpReceiver
from tests.support.resilience import write_config


async def test_a_console_run_is_sent_as_a_trace(tmp_path: Path) -> None:
    with OtlpReceiver() as receiver:
        config = write_config(
            tmp_path / "diagnose.toml", {"telemetry.traces": {"endpoint": receiver.endpoint}}
        )
        app = make_app(tmp_path, "evidence-backed-diagnosis", config=config)
        async with app.run_test(size=SIZE) as pilot:
            await run_to_end(pilot)
            assert app.investigate.state.outcome == "DRAFT"
        spans = receiver.spans()
    (root,) = [s for s in spans if not s.parent_id]
    assert root.attributes["diagnose.run.id"] == "run-0001"
    assert root.attributes["gen_ai.conversation.id"] == "session-test"
    assert root.attributes["diagnose.outcome"] == "DRAFT"
    assert sorted(s.name for s in spans if s.parent_id) == [
        *["chat evidence-backed-diagnosis"] * 4,
        "execute_tool lookup_knowledge",
        "execute_tool query_logs",
        "execute_tool query_logs",
    ]


async def test_traces_that_cannot_be_set_up_are_a_warning_and_the_console_runs_on(tmp_path: Path) -> None:
    config = write_config(
        tmp_path / "diagnose.toml",
        {"telemetry.traces": {"endpoint": "http://127.0.0.1:9/v1/traces", "headers_env": "UNSET_OTLP_AUTH"}},
    )
    app = make_app(tmp_path, "unknown-tool", config=config)
    async with app.run_test(size=SIZE) as pilot:
        await engine_ready(pilot)
        said = [(n.title, n.message) for n in app._notifications]
        await run_to_end(pilot)
        assert app.investigate.state.outcome == "DRAFT"
    assert said == [
        (
            "Warning",
            "traces are off: the variable UNSET_OTLP_AUTH that [telemetry.traces] headers_env names"
            " is not set",
        )
    ]
