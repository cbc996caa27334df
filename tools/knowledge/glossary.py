"""Query expansion from the bilingual SRE glossary (`tools/data/glossary/sre-zh-en.txt`).

A Chinese question shares no token with an English runbook ("节点磁盘快满了" against
"NodeFilesystemSpaceFillingUp"), and an English one none with a Chinese runbook. The glossary lists
terms an on-call engineer uses for the same thing in either language, one entry a line, so a query
holding any term of an entry also searches for the others. It was chosen over a multilingual
embedding model because it ships as a 15 KB text file, loads in milliseconds, needs no numerical
library, and a reviewer can read and correct every pair (docs/EVALUATION.md, "Runbook retrieval",
measures both what it buys and the alternative).

Matching: an English term (one or more words) matches the same words in the query after stemming,
so "disks" finds "disk"; a term holding Chinese matches where its text occurs in the query, spaces
ignored (Chinese is written without them).
"""

from __future__ import annotations

import importlib.resources
import re
from dataclasses import dataclass
from functools import cache
from pathlib import Path

from tools.knowledge.terms import is_cjk, normalize, terms, word_stems

_WHITESPACE = re.compile(r"\s+")


def bundled_glossary_path() -> Path:
    return Path(str(importlib.resources.files("tools") / "data" / "glossary" / "sre-zh-en.txt"))


@dataclass(frozen=True)
class Glossary:
    entries: tuple[tuple[str, ...], ...]
    # Chinese (or mixed) term, without spaces -> the entries holding it.
    _by_text: dict[str, tuple[int, ...]]
    # First stem of an English term -> (the term's stems, its entry).
    _by_stem: dict[str, tuple[tuple[tuple[str, ...], int], ...]]

    @classmethod
    def parse(cls, text: str) -> Glossary:
        """Entries from the synonyms format: comma-separated terms a line, `#` comments."""
        entries: list[tuple[str, ...]] = []
        by_text: dict[str, list[int]] = {}
        by_stem: dict[str, list[tuple[tuple[str, ...], int]]] = {}
        for line in text.splitlines():
            members = tuple(term.strip() for term in line.split("#", 1)[0].split(",") if term.strip())
            if len(members) < 2:
                continue
            number = len(entries)
            entries.append(members)
            for member in members:
                if is_cjk(member):
                    by_text.setdefault(_WHITESPACE.sub("", normalize(member)), []).append(number)
                elif stems := tuple(word_stems(member)):
                    by_stem.setdefault(stems[0], []).append((stems, number))
        return cls(
            tuple(entries),
            {key: tuple(value) for key, value in by_text.items()},
            {key: tuple(value) for key, value in by_stem.items()},
        )

    def expansions(self, query: str) -> Expansions:
        """The terms of every glossary entry the query touches, except the query's own terms: those of
        the other language (translations) apart from those of the matched term's own (synonyms)."""
        matched: dict[int, set[bool]] = {}  # entry -> the languages it was matched in (True: CJK)
        compact = _WHITESPACE.sub("", normalize(query))
        for text, numbers in self._by_text.items():
            if text in compact:
                for number in numbers:
                    matched.setdefault(number, set()).add(True)
        stems = word_stems(query)
        for position, stem in enumerate(stems):
            for phrase, number in self._by_stem.get(stem, ()):
                if tuple(stems[position : position + len(phrase)]) == phrase:
                    matched.setdefault(number, set()).add(False)
        seen = set(terms(query))
        translations: list[str] = []
        synonyms: list[str] = []
        for number in sorted(matched):
            for member in self.entries[number]:
                found = [term for term in terms(member) if term not in seen]
                seen.update(found)
                (synonyms if is_cjk(member) in matched[number] else translations).extend(found)
        return Expansions(tuple(translations), tuple(synonyms))


@dataclass(frozen=True)
class Expansions:
    translations: tuple[str, ...]  # terms of the other language than the words that matched
    synonyms: tuple[str, ...]  # other terms of the same language


@cache
def bundled_glossary() -> Glossary:
    return Glossary.parse(bundled_glossary_path().read_text(encoding="utf-8"))
