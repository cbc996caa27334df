"""The one file-trust rule (tools.file_trust; docs/RELIABILITY.md, "File trust"), on generated cases.

A configured folder holding any mix of files, links in and out, folders, files of another user, pipes
and oversized files is walked to exactly the trusted files, every other entry reported with its reason
(expected reasons derived here from how each entry was made, not from the walk); a new file is created
only where nothing is, never through a link; a pinned file is put in place only when its digest
matches, whatever chunks it arrives in.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tools.file_trust import (
    DigestMismatch,
    HashedFile,
    SkippedFile,
    TrustedFile,
    UnsafeFileError,
    create_new,
    walk_folder,
)

OTHER_UID = 4242
CAP = 64
KINDS = [
    "file",
    "too large",
    "link to a file inside",
    "link to a file outside",
    "link to a folder outside",
    "folder with a file",
    "someone else's file",
    "someone else's folder",
    "link to someone else's file inside",
    "named pipe",
    "not markdown",
]
EXPECTED = {  # kind -> (trusted sources, skipped (source suffix, reason))
    "file": ({""}, set()),
    "too large": (set(), {("", "TOO_LARGE")}),
    "link to a file inside": ({""}, set()),
    "link to a file outside": (set(), {("", "OUTSIDE_FOLDER")}),
    "link to a folder outside": (set(), {("", "OUTSIDE_FOLDER")}),
    "folder with a file": ({"/inner.md"}, set()),
    "someone else's file": (set(), {("", "OWNED_BY_OTHER")}),
    "someone else's folder": (set(), {("", "OWNED_BY_OTHER")}),
    "link to someone else's file inside": (set(), {("", "OWNED_BY_OTHER")}),
    "named pipe": (set(), {("", "NOT_A_FILE")}),
    "not markdown": (set(), set()),
}


def foreign(path: Path) -> None:
    os.chown(path, OTHER_UID, OTHER_UID, follow_symlinks=False)


def make(root: Path, outside: Path, name: str, kind: str) -> str:
    """Create entry `name` of `kind` under `root`; its source name (the suffix `.md` for files)."""
    path = root / (f"{name}.txt" if kind == "not markdown" else f"{name}.md")
    if kind in ("folder with a file", "someone else's folder", "link to a folder outside"):
        path = root / name
    if kind in ("file", "not markdown"):
        path.write_text("# ok\n")
    elif kind == "too large":
        path.write_text("x" * (CAP + 1))
    elif kind == "link to a file inside":
        target = root / ".hidden-target"
        target.mkdir(exist_ok=True)
        (target / f"{name}.txt").write_text("# inside\n")
        path.symlink_to(target / f"{name}.txt")
    elif kind == "link to a file outside":
        path.symlink_to(outside / "secret.md")
    elif kind == "link to a folder outside":
        path.symlink_to(outside)
    elif kind == "folder with a file":
        path.mkdir()
        (path / "inner.md").write_text("# inner\n")
    elif kind == "someone else's file":
        path.write_text("# planted\n")
        foreign(path)
    elif kind == "someone else's folder":
        path.mkdir()
        (path / "inner.md").write_text("# planted\n")
        foreign(path)
    elif kind == "link to someone else's file inside":
        target = root / ".hidden-target"
        target.mkdir(exist_ok=True)
        (target / f"{name}.txt").write_text("# planted\n")
        foreign(target / f"{name}.txt")
        path.symlink_to(target / f"{name}.txt")
    elif kind == "named pipe":
        os.mkfifo(path)
    return path.name


@pytest.fixture(autouse=True)
def as_root() -> None:
    if os.geteuid() != 0:
        pytest.skip("planting another user's files needs root")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kinds=st.lists(st.sampled_from(KINDS), min_size=1, max_size=8))
def test_a_walk_yields_exactly_the_trusted_files_and_says_why_it_left_out_each_other(
    tmp_path_factory: pytest.TempPathFactory, kinds: list[str]
) -> None:
    base = tmp_path_factory.mktemp("walk")
    root, outside = base / "runbooks", base / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "secret.md").write_text("# outside\n")
    expected_files: set[str] = set()
    expected_skips: set[tuple[str, str]] = set()
    for i, kind in enumerate(kinds):
        source = make(root, outside, f"e{i}", kind)
        files, skips = EXPECTED[kind]
        expected_files |= {source + suffix for suffix in files}
        expected_skips |= {(source + suffix, reason) for suffix, reason in skips}
    found = list(walk_folder(root, wanted=lambda name: name.endswith(".md"), max_file_bytes=CAP))
    assert {item.source for item in found if isinstance(item, TrustedFile)} == expected_files
    assert {(item.source, item.reason) for item in found if isinstance(item, SkippedFile)} == expected_skips
    for item in found:
        if isinstance(item, TrustedFile):
            assert Path(item.path).resolve().is_relative_to(root.resolve())


@pytest.mark.parametrize("there", ["a file", "a link to a file", "a dangling link", "a folder"])
def test_a_new_file_is_created_only_where_nothing_is(tmp_path: Path, there: str) -> None:
    target = tmp_path / "victim"
    target.write_bytes(b"keep")
    path = tmp_path / "new"
    if there == "a file":
        path.write_bytes(b"keep")
    elif there == "a link to a file":
        path.symlink_to(target)
    elif there == "a dangling link":
        path.symlink_to(tmp_path / "nowhere")
    else:
        path.mkdir()
    with pytest.raises(FileExistsError):
        create_new(path)
    assert target.read_bytes() == b"keep"
    assert not (tmp_path / "nowhere").exists()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(data=st.binary(max_size=4000), chunk=st.integers(1, 500), right=st.booleans())
def test_a_pinned_file_is_in_place_only_when_its_digest_matches(
    tmp_path_factory: pytest.TempPathFactory, data: bytes, chunk: int, right: bool
) -> None:
    folder = tmp_path_factory.mktemp("pinned")
    target = folder / "model.gguf"
    pinned = hashlib.sha256(data if right else data + b"!").hexdigest()
    with HashedFile(target, pinned) as out:
        for i in range(0, len(data), chunk):
            out.write(data[i : i + chunk])
        if right:
            out.commit()
        else:
            with pytest.raises(DigestMismatch):
                out.commit()
    assert [p.name for p in folder.iterdir()] == (["model.gguf"] if right else [])
    if right:
        assert target.read_bytes() == data


@pytest.mark.parametrize("planted", ["model.gguf.partial", "model.gguf"])
def test_a_link_at_a_pinned_file_or_its_partial_is_refused_not_followed(tmp_path: Path, planted: str) -> None:
    victim = tmp_path / "victim"
    victim.write_bytes(b"keep")
    (tmp_path / planted).symlink_to(victim)
    with pytest.raises(UnsafeFileError, match="symbolic link"):
        HashedFile(tmp_path / "model.gguf", "0" * 64)
    assert victim.read_bytes() == b"keep"
