"""What text of a run leaves the process in its trace (docs/contracts.md, "Traces", content capture).

Capture off (the default): a planted secret and every text of the run (query, tool input, evidence,
Draft) are absent from every byte the receiver got. Capture on: the text goes, redacted, neutralised
and cut to the byte cap, and the secret still does not: also when the audit holds it and only the
exporting process knows it is one. The capture rule itself is checked on generated text.
"""

from __future__ import annotations

import json
import string
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from console.safe_text import neutralize
from console.traces.content import ContentCapture, cut_utf8
from tests.support.otlp import OtlpReceiver, ReceivedSpan
from tests.support.resilience import run_cli, write_config, write_scenario
from tools.redaction import REDACTED, Redactor

SECRET = "sk-planted-91c2e7d4"
PHRASES = ("PLANTED-QUERY", "PLANTED-INPUT", "PLANTED-EVIDENCE", "PLANTED-DRAFT", "zebrafrost")
QUERY = f"PLANTED-QUERY zebrafrost outage since 02:10 \x1b[31mred\x1b[0m \u202eevil key {SECRET}"
CAPTURED = (
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
    "diagnose.failure.detail",
)


def planted(tmp_path: Path) -> tuple[Path, Path]:
    """A runbook and a scenario that carry the planted texts through every part of a run."""
    runbooks = tmp_path / "runbooks"
    runbooks.mkdir()
    (runbooks / "zebrafrost.md").write_text(
        f"# Zebrafrost runbook\n\nzebrafrost outage: PLANTED-EVIDENCE rotate the credential {SECRET}, "
        "then restart the zebrafrost workers.\n",
        encoding="utf-8",
    )
    draft = {
        "conclusion": "PLANTED-DRAFT zebrafrost workers need a restart",
        "analysis": [
            {"kind": "FINDING", "statement": "PLANTED-DRAFT the runbook applies", "evidence": ["call-1"]}
        ],
        "action_plan": ["restart"],
        "recommendations": [],
        "limitations": {"checked_scope": ["runbooks"], "missing_info": []},
    }
    lookup = {"query": "PLANTED-INPUT zebrafrost outage", "top_k": 1}
    rounds: list[dict[str, Any]] = [
        {
            "tool_calls": [
                {
                    "id": "call-1",
                    "name": "lookup_knowledge",
                    "arguments": {"previous_observation": None, "input": lookup},
                }
            ]
        },
        {"text": json.dumps(draft)},
    ]
    scenario = write_scenario(tmp_path, {"name": "planted", "query": QUERY, "rounds": rounds})
    return runbooks, scenario


def run_traced(
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    receiver: OtlpReceiver,
    monkeypatch: pytest.MonkeyPatch,
    **traces: Any,
) -> dict[str, Any]:
    runbooks, scenario = planted(tmp_path)
    monkeypatch.setenv("PLANTED_KEY", SECRET)
    config = write_config(
        tmp_path / "diagnose.toml",
        {
            "model": {"api_key_env": "PLANTED_KEY"},
            "knowledge": {"path": runbooks},
            "telemetry.traces": traces,
        },
    )
    run = run_cli(
        capsys,
        "run",
        "--json",
        "--config",
        config,
        "--scenario",
        scenario,
        "--audit-db",
        tmp_path / "audit.db",
        "--query",
        QUERY,
        "--trace-endpoint",
        receiver.endpoint,
    )
    assert run.code == 0, run.err
    assert run.result["progress"]["checks"][0]["evidence_status"] == "FOUND"
    return run.result


def captured(spans: list[ReceivedSpan]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for span in spans:
        for key in CAPTURED:
            if key in span.attributes:
                found.setdefault(key, []).append(span.attributes[key])
    return found


def test_with_capture_off_no_text_of_the_run_leaves(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with OtlpReceiver() as receiver:
        run_traced(capsys, tmp_path, receiver, monkeypatch)
        sent = receiver.all_bytes()
        spans = receiver.spans()
    assert len(spans) == 4  # root, two rounds, one tool: the run was traced
    assert captured(spans) == {}
    for text in (SECRET, *PHRASES, "\u202eevil", "\x1b[31m"):
        assert text.encode() not in sent, text
    assert b"[REDACTED]" not in sent  # not even what the redaction left of the text


def test_with_capture_on_the_text_goes_redacted_neutralised_and_bounded(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with OtlpReceiver() as receiver:
        run_traced(capsys, tmp_path, receiver, monkeypatch, capture_content=True)
        sent = receiver.all_bytes()
        spans = receiver.spans()
    assert SECRET.encode() not in sent
    assert b"\x1b[31m" not in sent
    assert "\u202eevil".encode() not in sent
    found = captured(spans)
    assert set(found) == {
        "gen_ai.input.messages",
        "gen_ai.output.messages",
        "gen_ai.tool.call.arguments",
        "gen_ai.tool.call.result",
    }
    (messages,) = found["gen_ai.input.messages"]
    (query,) = [part["content"] for message in json.loads(messages) for part in message["parts"]]
    assert query == QUERY.replace("\x1b", "\\x1b").replace("\u202e", "\\u202e").replace(SECRET, REDACTED)
    (output,) = found["gen_ai.output.messages"]
    assert "PLANTED-DRAFT" in output
    assert json.loads(output)[0]["role"] == "assistant"
    (arguments,) = found["gen_ai.tool.call.arguments"]
    assert json.loads(arguments) == {"query": "PLANTED-INPUT zebrafrost outage", "top_k": 1}
    (result,) = found["gen_ai.tool.call.result"]
    assert "PLANTED-EVIDENCE" in result
    assert REDACTED in result


def test_captured_text_is_cut_at_the_byte_cap(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with OtlpReceiver() as receiver:
        run_traced(capsys, tmp_path, receiver, monkeypatch, capture_content=True, max_content_bytes=64)
        found = captured(receiver.spans())
    texts = [
        *(
            p["content"]
            for key in ("gen_ai.input.messages", "gen_ai.output.messages")
            for m in json.loads(found[key][0])
            for p in m["parts"]
        ),
        *found["gen_ai.tool.call.arguments"],
        *found["gen_ai.tool.call.result"],
    ]
    assert all(len(text.encode()) <= 64 for text in texts)
    # The query, the Draft and the evidence are longer than the cap, the tool input is not.
    assert [text.endswith("…") for text in texts] == [True, True, False, True]


def test_a_backfill_hides_a_secret_only_the_exporting_process_knows(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The run did not know the value was a secret, so the audit holds it; the export knows, and hides it."""
    runbooks, scenario = planted(tmp_path)
    audit_db = tmp_path / "audit.db"
    config = write_config(tmp_path / "run.toml", {"knowledge": {"path": runbooks}})
    run = run_cli(
        capsys,
        "run",
        "--json",
        "--config",
        config,
        "--scenario",
        scenario,
        "--audit-db",
        audit_db,
        "--query",
        QUERY,
    )
    assert run.code == 0
    assert SECRET in audit_db.read_bytes().decode("utf-8", "replace")
    monkeypatch.setenv("PLANTED_KEY", SECRET)
    export_config = write_config(
        tmp_path / "export.toml",
        {"model": {"api_key_env": "PLANTED_KEY"}, "telemetry.traces": {"capture_content": True}},
    )
    with OtlpReceiver() as receiver:
        sent = run_cli(
            capsys,
            "audit",
            "export",
            "--config",
            export_config,
            "--audit-db",
            audit_db,
            "--otlp",
            receiver.endpoint,
            "--run",
            run.result["run_id"],
        )
        assert sent.code == 0, sent.err
        found = captured(receiver.spans())
        assert SECRET.encode() not in receiver.all_bytes()
    assert "PLANTED-EVIDENCE" in found["gen_ai.tool.call.result"][0]
    assert "PLANTED-QUERY" in found["gen_ai.input.messages"][0]


# --- the rule itself, on generated text ----------------------------------------------------------------

# Any text, lone surrogates and every control, bidi and invisible character included.
_TEXT = st.text(st.characters(blacklist_categories=()), max_size=200)
# Secrets as credentials look: printable, no spaces; not a piece of the redaction marker itself.
_SECRET = st.text(alphabet=string.ascii_letters + string.digits + "-_.~+/=:", min_size=8, max_size=40).filter(
    lambda s: s not in REDACTED
)


@settings(max_examples=300, deadline=None)
@given(before=_TEXT, after=_TEXT, secret=_SECRET, cap=st.integers(64, 512))
def test_captured_text_never_holds_a_secret_an_unsafe_character_or_more_than_the_cap(
    before: str, after: str, secret: str, cap: int
) -> None:
    capture = ContentCapture(True, Redactor([secret]), cap)
    for value in (before + secret + after, {"sql": before + secret + after, "rows": [[after, secret]]}):
        text = capture.text(value)
        assert text is not None
        assert secret not in text
        assert neutralize(text) == text  # nothing a viewer would draw as a control or hide
        assert len(text.encode("utf-8")) <= cap
    assert ContentCapture(False, Redactor([secret]), cap).text(before + secret) is None


@given(text=_TEXT, cap=st.integers(3, 64))
def test_cut_utf8_keeps_whole_characters_within_the_cap(text: str, cap: int) -> None:
    safe = neutralize(text)  # what the capture cuts: encodable text
    cut = cut_utf8(safe, cap)
    assert len(cut.encode("utf-8")) <= cap
    assert cut == safe or (cut.endswith("…") and safe.startswith(cut[:-1]))
