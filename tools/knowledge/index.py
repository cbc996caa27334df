"""BM25F over a runbook collection, updated one runbook at a time.

Haystack's in-memory BM25 scores one text field and every document on every query. A runbook's title,
its front matter and its headings say what it is about far better than its body, so this index keeps
the four fields apart and scores them together (BM25F, Robertson and Zaragoza's "simple" form): a
term's frequency is summed over the fields, each weighted and normalised by its own length, before
BM25's saturation. An inverted index visits only the runbooks that hold a query term, and a changed
runbook is removed and added again without touching the others (`put`, `remove`).

A folder's landing page (its README.md or _index.md) and a table of contents (mostly links) mention
every runbook they list, so their score is scaled down: they still answer when nothing else does,
but never crowd out the runbooks they point to.
"""

from __future__ import annotations

import heapq
import math
from array import array
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from tools.knowledge.runbook import Runbook
from tools.knowledge.terms import terms

FIELD_WEIGHTS = (4.0, 3.0, 2.0, 1.0)  # title, front matter (and file name), headings, body
FIELD_B = (0.5, 0.5, 0.5, 0.75)  # how much each field's length normalises its frequencies
K1 = 1.2
LISTING_PAGE_FACTOR = 0.3
_FIELDS = len(FIELD_WEIGHTS)
_MAX_TF = 255  # a field's term frequency is packed in 8 bits; BM25 saturates long before
_TF_BITS = 8


@dataclass(frozen=True)
class IndexedRunbook:
    source: str
    title: str
    version: tuple[int, int]
    lengths: tuple[int, ...]  # terms per field
    vocabulary: tuple[str, ...]  # its distinct terms: what `remove` takes out of the postings
    folder: str  # the folder it lies in (`.` at the top)
    landing_page: bool
    lists_runbooks: bool


def field_terms(runbook: Runbook) -> tuple[list[str], ...]:
    return (
        terms(runbook.title),
        terms("\n".join(runbook.meta)),
        terms("\n".join(runbook.headings)),
        terms(runbook.body),
    )


class RunbookIndex:
    """Not thread-safe: the adapter serialises every call."""

    def __init__(self) -> None:
        self._entries: dict[str, IndexedRunbook] = {}
        self._slot: dict[str, int] = {}
        self._sources: list[str | None] = []
        self._free: list[int] = []
        self._postings: dict[str, tuple[array[int], array[int]]] = {}
        self._total_lengths = [0] * _FIELDS
        self._runbooks_under: Counter[str] = Counter()  # folder -> runbooks at any depth below it
        self._scale: list[array[float]] | None = None  # per field, per slot: weight / length norm

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, source: object) -> bool:
        return source in self._entries

    def get(self, source: str) -> IndexedRunbook | None:
        return self._entries.get(source)

    def sources(self) -> list[str]:
        return list(self._entries)

    def put(self, runbook: Runbook, version: tuple[int, int]) -> None:
        """Index `runbook`, replacing what was indexed under its source."""
        fields = field_terms(runbook)
        packed: dict[str, int] = {}
        for field, found in enumerate(fields):
            shift = _TF_BITS * field
            for term, count in Counter(found).items():
                packed[term] = packed.get(term, 0) | (count if count < _MAX_TF else _MAX_TF) << shift
        self.remove(runbook.source)
        slot = self._free.pop() if self._free else len(self._sources)
        if slot == len(self._sources):
            self._sources.append(runbook.source)
        else:
            self._sources[slot] = runbook.source
        postings = self._postings
        for term, frequency in packed.items():
            posting = postings.get(term)
            if posting is None:
                posting = postings[term] = (array("I"), array("I"))
            posting[0].append(slot)
            posting[1].append(frequency)
        lengths = tuple(len(field) for field in fields)
        for field, length in enumerate(lengths):
            self._total_lengths[field] += length
        self._slot[runbook.source] = slot
        self._entries[runbook.source] = IndexedRunbook(
            source=runbook.source,
            title=runbook.title,
            version=version,
            lengths=lengths,
            vocabulary=tuple(packed),
            folder=_folders(runbook.source)[0],
            landing_page=runbook.is_landing_page,
            lists_runbooks=runbook.lists_runbooks,
        )
        self._runbooks_under.update(_folders(runbook.source))
        self._scale = None

    def remove(self, source: str) -> None:
        entry = self._entries.pop(source, None)
        if entry is None:
            return
        slot = self._slot.pop(source)
        for term in entry.vocabulary:
            slots, frequencies = self._postings[term]
            position = slots.index(slot)
            del slots[position]
            del frequencies[position]
            if not slots:
                del self._postings[term]
        for field, length in enumerate(entry.lengths):
            self._total_lengths[field] -= length
        self._runbooks_under.subtract(_folders(source))
        self._sources[slot] = None
        self._free.append(slot)
        self._scale = None

    def search(self, weighted_terms: Mapping[str, float], top_k: int) -> list[tuple[str, float]]:
        """The `top_k` best runbooks for the query's terms (each with its weight), best first, each with
        a positive score; ties in source order."""
        if not self._entries:
            return []
        scale = self._field_scale()
        count = len(self._entries)
        scores: dict[int, float] = {}
        mask = (1 << _TF_BITS) - 1
        title, meta, headings, body = scale
        for term, weight in weighted_terms.items():
            posting = self._postings.get(term)
            if posting is None:
                continue
            slots, frequencies = posting
            idf = weight * math.log(1 + (count - len(slots) + 0.5) / (len(slots) + 0.5))
            for slot, packed in zip(slots, frequencies, strict=True):
                tf = (
                    title[slot] * (packed & mask)
                    + meta[slot] * ((packed >> 8) & mask)
                    + headings[slot] * ((packed >> 16) & mask)
                    + body[slot] * (packed >> 24)
                )
                scores[slot] = scores.get(slot, 0.0) + idf * tf / (K1 + tf)
        ranked: list[tuple[float, str]] = []
        for slot, score in scores.items():
            source = self._sources[slot]
            assert source is not None  # noqa: S101 - invariant for the type checker
            if self._lists_others(self._entries[source]):
                score *= LISTING_PAGE_FACTOR
            ranked.append((score, source))
        best = heapq.nsmallest(top_k, ranked, key=lambda item: (-item[0], item[1]))
        return [(source, score) for score, source in best if score > 0]

    def _lists_others(self, entry: IndexedRunbook) -> bool:
        if entry.lists_runbooks:
            return True
        return entry.landing_page and self._runbooks_under[entry.folder] > 1

    def _field_scale(self) -> list[array[float]]:
        """Per field and slot, the field's weight over its BM25 length norm (recomputed after a change)."""
        if self._scale is not None:
            return self._scale
        count = max(1, len(self._entries))
        averages = [max(total / count, 1.0) for total in self._total_lengths]
        scale = [array("d", bytes(8 * len(self._sources))) for _ in range(_FIELDS)]
        for source, entry in self._entries.items():
            slot = self._slot[source]
            for field in range(_FIELDS):
                b = FIELD_B[field]
                norm = 1 - b + b * entry.lengths[field] / averages[field]
                scale[field][slot] = FIELD_WEIGHTS[field] / norm
        self._scale = scale
        return scale


def _folders(source: str) -> list[str]:
    """Every folder `source` (a `/`-separated path) lies in, its own first, up to the root (`.`).

    String work, not `PurePosixPath.parents`: it runs for every runbook indexed."""
    parts = source.split("/")[:-1]
    return [*("/".join(parts[:end]) for end in range(len(parts), 0, -1)), "."]
