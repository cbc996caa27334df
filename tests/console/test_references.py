"""Every document the project cites is in the repository, and every section it cites exists.

A newcomer with only this repository must be able to follow every reference: code and docs point to
`docs/architecture.md, "Section"` (the map) or `docs/contracts.md, "Section"` (the contracts spelled
out), never to a design document, a requirements file or a machine path that lives somewhere else.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
SCANNED = ("agent", "tools", "audit", "console", "tests", "docs", ".ci")
TOP_LEVEL = ("README.md", "CONTRIBUTING.md", "CHANGELOG.md", "pyproject.toml")
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
# The documents code and docs cite by section: a citation names one of them, then its quoted headings.
SECTIONED = ("architecture.md", "contracts.md")
CITATION = re.compile(r'docs/(architecture\.md|contracts\.md),?\s+\(?((?:"[^"\n]+"(?:,\s*)?)+)')
DOCUMENT = re.compile(r"\bdocs/([\w-]+\.md)\b")
QUOTED = re.compile(r'"([^"\n]+)"')


# Content copied unchanged from other projects (its origin in the SOURCES.md beside it): its links are
# theirs, not ours.
THIRD_PARTY = (REPO / "tests" / "data" / "knowledge" / "runbooks",)


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
            and not any(p.is_relative_to(folder) for folder in THIRD_PARTY)
        ]
    return [p for p in files if p.resolve() != Path(__file__).resolve()]


def headings(document: str) -> set[str]:
    return {
        line.lstrip("#").strip()
        for line in (DOCS / document).read_text(encoding="utf-8").splitlines()
        if line.startswith("#")
    }


def cited_sections(text: str) -> list[tuple[str, str]]:
    """Every (document, section) the text cites, a citation broken across lines included."""
    return [
        (citation.group(1), name)
        for citation in CITATION.finditer(" ".join(text.split()))
        for name in QUOTED.findall(citation.group(2))
    ]


def unresolved(citations: list[tuple[str, str]]) -> list[str]:
    sections = {document: headings(document) for document in SECTIONED}
    return [f"docs/{document}, {name!r}" for document, name in citations if name not in sections[document]]


def test_nothing_cites_a_document_the_repository_does_not_hold() -> None:
    found = []
    for path in project_files():
        text = path.read_text(encoding="utf-8", errors="replace")
        for what, pattern in FOREIGN.items():
            for match in pattern.finditer(text):
                line = text.count("\n", 0, match.start()) + 1
                found.append(f"{path.relative_to(REPO)}:{line}: {what}: {match.group()!r}")
    assert found == []


def test_every_cited_document_is_in_the_repository() -> None:
    missing = []
    for path in project_files():
        for name in DOCUMENT.findall(path.read_text(encoding="utf-8", errors="replace")):
            if not (DOCS / name).is_file():
                missing.append(f"{path.relative_to(REPO)}: docs/{name}")
    assert missing == []


def test_every_cited_section_exists_in_the_document_it_names() -> None:
    missing = []
    cited = {document: 0 for document in SECTIONED}
    for path in project_files():
        citations = cited_sections(path.read_text(encoding="utf-8", errors="replace"))
        for document, _ in citations:
            cited[document] += 1
        missing += [f"{path.relative_to(REPO)}: {line}" for line in unresolved(citations)]
    assert missing == []
    assert cited["architecture.md"] >= 5
    assert cited["contracts.md"] >= 20


def test_the_checks_catch_what_they_are_for() -> None:
    assert FOREIGN["a design document outside the repository"].search("the contract of DESIGN 3.1")
    assert FOREIGN["a requirements file outside the repository"].search("spec/000_650979927b54eb69.txt")
    assert not any(p.search("shared with other test runs; docs/architecture.md") for p in FOREIGN.values())
    assert cited_sections('see docs/contracts.md, "Audit", "Run events".') == [
        ("contracts.md", "Audit"),
        ("contracts.md", "Run events"),
    ]
    assert (
        unresolved(cited_sections('docs/contracts.md ("Run events") and docs/architecture.md, "Layers"'))
        == []
    )
    # A section cited in the wrong document, or one that does not exist, is caught.
    assert unresolved(cited_sections('docs/architecture.md, "Run events"')) == [
        "docs/architecture.md, 'Run events'"
    ]
    assert unresolved(cited_sections('docs/contracts.md, "Layers", "Nowhere"')) == [
        "docs/contracts.md, 'Layers'",
        "docs/contracts.md, 'Nowhere'",
    ]
