"""The first frame is painted before Haystack is imported, and nothing is printed while the app runs.

Nor does the first frame pay for what it does not show: pydantic (the tool input models, the result
contracts), the screens other than investigate, the export, the audit screen's table widget, the
redaction rules and the run-event types (with the first event) load later, on first use; a bare
`diagnose` builds no command-line parser, so the other commands' modules are not imported either.
OpenTelemetry (an optional extra) is imported only when traces are on: never by the first frame,
never by a run without an endpoint.

Runs in a fresh interpreter: the test process has long imported Haystack.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

PROBE = r"""
import asyncio, json, sys
from pathlib import Path
from console.app import DiagnoseApp
from console.host import ConsoleOptions

seen = {"after_import": "haystack" in sys.modules}
LATER = (
    "pydantic",
    "console.screens.audit",
    "console.screens.replay",
    "console.screens.scenarios",
    "console.export",
    "console.screens.export_dialog",
    "textual.widgets._data_table",
    "tools.redaction",
    "agent.events.run_events",
)

def first_paint() -> None:
    seen.setdefault("first_paint", "haystack" in sys.modules)
    seen.setdefault("loaded_at_first_paint", [name for name in LATER if name in sys.modules])

class Probe(DiagnoseApp):
    def on_mount(self) -> None:
        self.call_after_refresh(first_paint)

async def main() -> None:
    app = Probe(audit_db=Path(sys.argv[1]), options=ConsoleOptions(show_timings=False, cursor_blink=False))
    async with app.run_test(size=(120, 40)) as pilot:
        seen["status_at_first_paint"] = app.engine_status.label
        for _ in range(1500):
            if app.engine_status.state != "loading":
                break
            await pilot.pause(0.02)
        else:
            raise AssertionError("timed out after 30 s waiting for the engine to load")
        await pilot.press("ctrl+r")
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        seen["after_run"] = "haystack" in sys.modules
        seen["traces_after_run"] = [n for n in ("opentelemetry", "console.traces") if n in sys.modules]
        seen["outcome"] = app.investigate.state.outcome

asyncio.run(main())
sys.__stdout__.write(json.dumps(seen))
"""


# `diagnose` itself, to the first frame Textual paints (the hook the startup benchmark uses).
CLI_PROBE = r"""
import json, sys
from textual.app import App

LATER = (
    "haystack", "pydantic", "agent.events.emitter", "tools.redaction", "tomllib", "console.commands.audit",
    "console.commands.eval", "console.commands.demo", "console.commands.run", "console.export",
    "textual.widgets._data_table",
    "agent.events.run_events", "opentelemetry", "console.traces",
)
seen = {}
_display = App._display

def first_frame(self, screen, renderable):
    _display(self, screen, renderable)
    if renderable is not None and screen.children and not seen:
        seen["loaded_at_first_frame"] = [name for name in LATER if name in sys.modules]
        self.call_later(self.exit)

App._display = first_frame
_run = App.run
App.run = lambda self, *a, **kw: _run(self, *a, **{**kw, "headless": True})

import console.commands.open_console
from console.cli import main

# It paints headless: no terminal is needed.
console.commands.open_console.console_terminal_problem = lambda: None
seen["exit_code"] = main([])
sys.__stdout__.write(json.dumps(seen))
"""


def run_probe(tmp_path: Path, source: str, *args: str) -> dict[str, object]:
    probe = tmp_path / "probe.py"
    probe.write_text(source, encoding="utf-8")
    done = subprocess.run(
        [sys.executable, str(probe), *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=Path(__file__).parents[2],
        env={
            "PATH": "/usr/bin:/bin",
            "HOME": str(tmp_path),
            "XDG_STATE_HOME": str(tmp_path / "state"),
            "PYTHONPATH": str(Path(__file__).parents[2]),
        },
    )
    assert done.stderr == "", done.stderr  # headless Textual forwards stray prints: there must be none
    seen: dict[str, object] = json.loads(done.stdout)
    return seen


def test_first_frame_before_haystack_and_a_silent_run(tmp_path: Path) -> None:
    seen = run_probe(tmp_path, PROBE, str(tmp_path / "audit.db"))
    assert seen == {
        "after_import": False,
        "first_paint": False,
        "loaded_at_first_paint": [],
        "status_at_first_paint": "loading engine…",
        "after_run": True,
        "traces_after_run": [],
        "outcome": "DRAFT",
    }


def test_bare_diagnose_paints_before_loading_other_commands_or_the_redaction_rules(tmp_path: Path) -> None:
    assert run_probe(tmp_path, CLI_PROBE) == {"loaded_at_first_frame": [], "exit_code": 0}


# `diagnose run` in a fresh interpreter, with or without a trace endpoint (nothing listens on it: the
# run is the same either way).
RUN_PROBE = r"""
import json, sys
from console.commands.main import main

code = main(["run", "--scenario", "unknown-tool", "--audit-db", sys.argv[1], *sys.argv[2:]])
loaded = [name for name in ("opentelemetry", "console.traces") if name in sys.modules]
sys.__stderr__.write(json.dumps({"exit_code": code, "loaded": loaded}))
"""


def test_opentelemetry_is_imported_only_by_a_run_that_is_traced(tmp_path: Path) -> None:
    def run(*args: str) -> dict[str, object]:
        probe = tmp_path / "run_probe.py"
        probe.write_text(RUN_PROBE, encoding="utf-8")
        done = subprocess.run(
            [sys.executable, str(probe), str(tmp_path / "audit.db"), *args],
            capture_output=True,
            text=True,
            timeout=120,
            cwd=Path(__file__).parents[2],
            env={
                "PATH": "/usr/bin:/bin",
                "HOME": str(tmp_path),
                "PYTHONPATH": str(Path(__file__).parents[2]),
            },
        )
        seen: dict[str, object] = json.loads(done.stderr)
        return seen

    assert run() == {"exit_code": 0, "loaded": []}
    traced = run("--trace-endpoint", "http://127.0.0.1:9/v1/traces")
    assert traced == {"exit_code": 0, "loaded": ["opentelemetry", "console.traces"]}
