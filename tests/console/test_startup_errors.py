"""A console that cannot start says so, as `diagnose run` does: one line, exit 3; and a console with no
terminal to draw on refuses at once. It never looks ready when no run can start.
(docs/contracts.md, "CLI"; README, "Console")

- Whatever is known without the engine (configuration, scenario, model settings, where the audit is)
  is refused before the first frame, in exactly the words `diagnose run` uses for the same input.
- What only opening the environment finds (here: an audit file that is not one) blocks the console
  with the same message; quitting it exits 3 and leaves the same line on the terminal.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from textual.widgets import TextArea

from agent.vocabulary import SETUP_ERROR, USAGE_ERROR
from console.app import DiagnoseApp
from console.commands.main import main
from console.screens.startup_failed import StartupFailed
from tests.support.console import SIZE, painted_text, settled
from tests.support.terminal import REPO, in_terminal

AppFactory = Callable[..., DiagnoseApp]
ESC = "\x1b"


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


# Each bad start: the configuration file's text (None: no file), more arguments, the environment.
BAD_STARTS: dict[str, tuple[str | None, list[str], dict[str, str]]] = {
    "invalid TOML": ("[model\nname = 1\n", [], {}),
    "unknown key": ('[model]\nnmae = "x"\n', [], {}),
    "value out of range": ("[budget]\nmax_model_calls = 0\n", [], {}),
    "bad override variable": (None, [], {"DIAGNOSE_BUDGET__MAX_MODEL_CALLS": "zero"}),
    "unknown built-in scenario": (None, ["--scenario", "no-such-scenario"], {}),
    "configured unknown scenario": ('[model]\nscenario = "nope"\n', [], {}),
    "openai without a key": ('[model]\nprovider = "openai"\napi_key_env = "NO_KEY"\n', [], {}),
    "password in the audit URL": ('[audit]\nurl = "mysql://u:pw@127.0.0.1:3306/a"\n', [], {}),
}
CASES = list(BAD_STARTS)


@pytest.mark.parametrize("case", CASES)
def test_a_bad_start_is_refused_before_the_first_frame_with_the_line_run_prints(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    text, args, variables = BAD_STARTS[case]
    if text is not None:
        args = ["--config", str(write(tmp_path / "diagnose.toml", text)), *args]
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    assert main(["run", "--query", "payment-service 超时", *args]) == SETUP_ERROR
    run_line = capsys.readouterr().err
    assert run_line.startswith("diagnose: ")
    assert run_line.count("\n") == 1

    # The console, as an operator starts it (no `console` word), in its own process.
    done = subprocess.run(
        [sys.executable, "-m", "console", *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=REPO,
        env=os.environ,
        check=False,
    )
    assert (done.returncode, done.stderr) == (SETUP_ERROR, run_line)
    # No frame was painted, no terminal was taken.
    assert done.stdout == ""
    assert ESC not in done.stderr


def test_a_console_without_a_terminal_refuses_at_once(tmp_path: Path) -> None:
    """`diagnose > file`, in cron, in a pipe: without a terminal Textual would write escape codes forever."""
    for argv in ([], ["console", "--scenario", "evidence-backed-diagnosis"]):
        done = subprocess.run(
            [sys.executable, "-m", "console", *argv],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=REPO,
            stdin=subprocess.DEVNULL,
            check=False,
        )
        assert done.returncode == USAGE_ERROR
        assert done.stdout == ""
        assert ESC not in done.stderr
        assert done.stderr == (
            "diagnose: the console needs a terminal, and standard input is not one; "
            "for a run without a terminal use diagnose run (diagnose run --help)\n"
        )


def test_a_console_whose_output_is_piped_refuses_even_on_a_terminal() -> None:
    """`diagnose | tee log` typed on a terminal: keys and the screen are there, the output is not."""
    ran = in_terminal(streams=("stdin", "stderr"), timeout_s=60)
    assert ran.code == USAGE_ERROR
    assert ran.stdout == ""
    assert "standard output is not one; for a run without a terminal use diagnose run" in ran.screen


def test_an_audit_that_cannot_open_blocks_the_console_and_exits_3_with_the_run_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corrupt = tmp_path / "audit.db"
    corrupt.write_bytes(os.urandom(4096))
    config = write(tmp_path / "diagnose.toml", f'[audit]\npath = "{corrupt}"\n')
    assert main(["run", "--query", "payment-service 超时", "--config", str(config)]) == SETUP_ERROR
    run_line = capsys.readouterr().err.strip()
    assert run_line.startswith("diagnose: audit unavailable:")

    # On a terminal: the first frame, the engine failing in the background, the blocking screen; enter
    # (typed until the process ends) quits it.
    ran = in_terminal("--config", config, keys=b"\r", env={**os.environ, "TERM": "xterm-256color"})
    assert ran.code == SETUP_ERROR
    assert "The console could not start." in ran.screen
    assert ran.screen.rstrip().endswith(run_line)  # the last thing written: it stays on the terminal


# ------------------------------------------------------------------ the blocking screen, driven by a pilot
async def test_the_start_up_screen_blocks_every_key_but_quitting(app_factory: AppFactory) -> None:
    def unusable(scenario: str | None) -> object:
        from console.errors import SetupError

        raise SetupError("audit unavailable: the audit file is not a database")

    app = app_factory(env_factory=unusable)
    async with app.run_test(size=SIZE) as pilot:
        await settled(pilot)
        assert isinstance(app.screen, StartupFailed)
        assert app.startup_error == "audit unavailable: the audit file is not a database"
        shown = painted_text(app)
        assert "The console could not start." in shown
        assert "the audit file is not a database" in shown
        for key in ("ctrl+r", "f3", "f4", "f1", "ctrl+p", "x"):
            await pilot.press(key)
            await pilot.pause()
            assert isinstance(app.screen, StartupFailed), key
        assert app.investigate.use_case is None
        assert app.investigate.query_one("#query", TextArea).text == ""
        await pilot.press("enter")
        await pilot.pause()
    assert app.return_code == SETUP_ERROR


async def test_a_later_failed_reload_does_not_block_and_the_status_says_why(app_factory: AppFactory) -> None:
    from tests.support.console import engine_ready, fail_reloads

    app = app_factory()
    fail_reloads(app, "audit unavailable: the disk is gone")
    async with app.run_test(size=SIZE) as pilot:
        await engine_ready(pilot)
        assert app.investigate.activity == "idle · ctrl+r runs the query"
        app.load_engine("stop-required-ignored")
        await settled(pilot)
        assert not isinstance(app.screen, StartupFailed)
        assert app.startup_error is None
        assert app.investigate.activity == "no engine: nothing can run · f4 picks another scenario"
        assert app.engine_status.message == "audit unavailable: the disk is gone"  # the status bar's end
        assert "no engine: nothing can run" in painted_text(app)
