"""Every document the project cites is in the repository, and every section it cites exists.

A newcomer with only this repository must be able to follow every reference: code and docs point to
`docs/architecture.md, "Section"`, never to a design document, a requirements file or a machine path
that lives somewhere else.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ARCHITECTURE = REPO / "docs" / "architecture.md"
SCANNED = ("agent", "tools", "audit", "console", "tests", "docs", ".ci")
TOP_LEVEL = ("README.md", "pyproject.toml")
SUFFIXES = {".py", ".md", ".toml", ".tcss", ".yaml", ".yml", ".json", ".txt", ""}

# Documents that are not in the repository: a design document numbered like "DESIGN 3.5", a
# requirements file named by number and hash, a folder shared outside the repository, a machine path.
FOREIGN = {
    "a design document outside the repository": re.compile(r"\bDESIGN(?:\.md|\s+\d)"),
    "a requirements file outside the repository": re.compile(r"\b\d{3}_[0-9a-f]{16}\.txt\b"),
    "a folder outside the repository": re.compile(
        r"(?<![\w.])\.\./shared\b|(?<![\w/])shared/(?:spec|DESIGN)"
    ),
    "a path on one machine": re.compile(r"(?<![\w.])/work/"),
}
CITATION = re.compile(r'docs/architecture\.md,?\s+((?:"[^"\n]+"(?:,\s*)?)+)')
QUOTED = re.compile(r'"([^"\n]+)"')


def project_files() -> list[Path]:
    files = [REPO / name for name in TOP_LEVEL]
    for folder in SCANNED:
        files += [
            p
            for p in (REPO / folder).rglob("*")
            if p.is_file()
            and p.suffix in SUFFIXES
            and "__pycache__" not in p.parts
            and "__snapshots__" not in p.parts
        ]
    return [p for p in files if p.resolve() != Path(__file__).resolve()]


def headings() -> set[str]:
    return {
        line.lstrip("#").strip()
        for line in ARCHITECTURE.read_text(encoding="utf-8").splitlines()
        if line.startswith("#")
    }


def test_nothing_cites_a_document_the_repository_does_not_hold() -> None:
    found = []
    for path in project_files():
        text = path.read_text(encoding="utf-8", errors="replace")
        for what, pattern in FOREIGN.items():
            for match in pattern.finditer(text):
                line = text.count("\n", 0, match.start()) + 1
                found.append(f"{path.relative_to(REPO)}:{line}: {what}: {match.group()!r}")
    assert found == []


def test_every_cited_section_of_the_architecture_exists() -> None:
    sections = headings()
    missing = []
    cited = 0
    for path in project_files():
        text = path.read_text(encoding="utf-8", errors="replace")
        for citation in CITATION.finditer(" ".join(text.split())):
            for name in QUOTED.findall(citation.group(1)):
                cited += 1
                if name not in sections:
                    missing.append(f"{path.relative_to(REPO)}: {name!r}")
    assert missing == [] and cited >= 20


def test_the_checks_catch_what_they_are_for() -> None:
    assert FOREIGN["a design document outside the repository"].search("the contract of DESIGN 3.1")
    assert FOREIGN["a requirements file outside the repository"].search("spec/000_650979927b54eb69.txt")
    assert not any(p.search("shared with other test runs; docs/architecture.md") for p in FOREIGN.values())
    citation = CITATION.search('see docs/architecture.md, "Audit", "Run events".')
    assert citation is not None and QUOTED.findall(citation.group(1)) == ["Audit", "Run events"]
