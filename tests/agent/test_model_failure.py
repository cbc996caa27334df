"""A failed model call names its endpoint and cause, safely; a model round that waits shows it.
(docs/contracts.md, "Execution result"; the faults themselves: tests/resilience/test_faults_model.py)
"""

from __future__ import annotations

import json
import socket
import string
from pathlib import Path
from urllib.parse import quote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from textual.widgets import Static

from agent.model.failure import failure_cause, model_endpoint
from agent.settings import ModelSettings
from console.app import DiagnoseApp
from tests.support.console import SIZE, plain, run_to_end
from tests.support.mysql import closed_port
from tests.support.resilience import write_config
from tests.support.terminal import in_terminal

SECRET_TEXT = st.text(
    alphabet=string.ascii_letters + string.digits + "-._~!$&'()*+,;=%", min_size=6, max_size=30
)


@settings(max_examples=200, deadline=None)
@given(
    user=SECRET_TEXT,
    password=SECRET_TEXT,
    query=SECRET_TEXT,
    fragment=SECRET_TEXT,
    port=st.integers(min_value=1, max_value=65535),
    path=st.sampled_from(["", "/", "/v1", "/openai/v1/"]),
)
def test_the_endpoint_keeps_scheme_host_port_and_path_and_nothing_else(
    user: str, password: str, query: str, fragment: str, port: int, path: str
) -> None:
    secrets = [quote(user, safe=""), quote(password, safe=""), query, fragment]
    base_url = f"https://{secrets[0]}:{secrets[1]}@llm.internal:{port}{path}?{query}#{fragment}"
    endpoint = model_endpoint(ModelSettings(provider="openai", base_url=base_url))
    assert endpoint == f"https://llm.internal:{port}{path}"


def test_no_endpoint_for_the_scripted_model_and_the_public_one_by_default() -> None:
    assert model_endpoint(ModelSettings()) is None
    assert model_endpoint(ModelSettings(provider="openai")) == "https://api.openai.com/v1"
    assert (
        model_endpoint(ModelSettings(provider="openai", base_url="http://[::1]:8080/v1"))
        == "http://[::1]:8080/v1"
    )


def _connect_to_a_closed_port() -> None:
    try:
        socket.create_connection(("127.0.0.1", closed_port()), timeout=2)
    except OSError as low:
        raise RuntimeError("wrapped") from low


def test_the_cause_is_read_through_the_chain_and_a_cycle_ends() -> None:
    with pytest.raises(RuntimeError, match="wrapped") as wrapped:
        _connect_to_a_closed_port()
    assert failure_cause(wrapped.value) == "REFUSED"
    looped = ValueError("a")
    looped.__context__ = KeyError("b")
    looped.__context__.__context__ = looped
    assert failure_cause(looped) is None  # no known link, and no endless walk


# ------------------------------------------------------------------ a model round that waits, on a terminal
def test_a_waiting_model_round_shows_a_status_line_on_the_terminal(tmp_path: Path) -> None:
    scenario = tmp_path / "slow.yaml"
    scenario.write_text(
        "name: slow\nquery: 'payment-service 超时'\nrounds:\n"
        '  - text: \'{"conclusion": null, "analysis": [], "action_plan": [], "recommendations": [],'
        ' "limitations": {"checked_scope": ["x"], "missing_info": ["y"]}}\'\n'
        "    delay_ms: 2600\n",
        encoding="utf-8",
    )
    ran = in_terminal(
        "run", "--scenario", scenario, "--json", "--audit-db", tmp_path / "audit.db", streams=("stderr",)
    )
    assert ran.code == 0
    assert "model round 1: waiting 2 s for scripted: slow · Ctrl-C cancels" in ran.screen
    assert json.loads(ran.stdout)["outcome"] == "DRAFT"  # stdout carries the result alone
    assert "\x1b" not in ran.stdout


# ------------------------------------------------------------------ the console says it too
async def test_the_console_names_the_cause_and_the_endpoint(tmp_path: Path) -> None:
    from tests.support.console import make_app

    url = f"http://127.0.0.1:{closed_port()}/v1"
    config = write_config(
        tmp_path / "config.toml",
        {"model": {"provider": "openai", "base_url": url, "name": "m", "timeout_s": 2}},
    )
    app: DiagnoseApp = make_app(tmp_path, config=config)
    async with app.run_test(size=SIZE) as pilot:
        await run_to_end(pilot, "q")
        assert app.investigate.activity == "finished: FAILED · REFUSED (exit 1)"
        shown = plain(app.investigate.run_view.query_one("#result-summary", Static).content, width=300)
        assert "the model endpoint refused the connection: nothing listens there" in shown
        assert f"endpoint: {url}" in shown
        assert "cause: REFUSED" in shown


async def test_the_console_shows_the_round_it_waits_for(tmp_path: Path) -> None:
    """The console's half of the same promise (it held before the CLI line was added): while a model
    round waits, the status bar names it, and escape still cancels."""
    from tests.support.console import make_app, settled, wait_until

    scenario = tmp_path / "slow.yaml"
    scenario.write_text(
        "name: slow\nquery: 'payment-service 超时'\nrounds:\n  - text: '{}'\n    delay_ms: 30000\n",
        encoding="utf-8",
    )
    app: DiagnoseApp = make_app(tmp_path, str(scenario))
    async with app.run_test(size=SIZE) as pilot:
        await settled(pilot)
        await pilot.press("ctrl+r")
        screen = app.investigate
        await wait_until(lambda: screen.activity.startswith("running: model round 1"), pilot, 30, "round 1")
        assert screen.activity == "running: model round 1 · escape cancels"
        await pilot.press("escape")
        await wait_until(lambda: screen.state.outcome == "CANCELLED", pilot, 30, "the cancel")
