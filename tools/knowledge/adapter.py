"""lookup_knowledge: search the runbook folder, or read a runbook a search of this run returned.

A search (`{"query", "top_k"}`) answers with a bounded projection per runbook: title, source, the
snippet that matched and a score. A read (`{"source", "part"}`) answers with part N of M of the
runbook's text (tools.knowledge.parts), so the model can follow the whole procedure; it may read only
a source a search of the same run returned (anything else is INVALID_INPUT), so a read never becomes
a way to list or guess the folder's files.

Everything runs off the event loop: the first lookup reads and indexes the folder, and a folder of
10,000 runbooks takes seconds (docs/PERFORMANCE.md, "Runbook search at scale"). Each lookup lists the
folder again and re-indexes only the runbooks whose size or modification time changed. If the
awaiting task is cancelled the worker thread still finishes its update under the lock, so the index
is never left half-updated.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tools.adapter import AdapterResult, ToolError, ToolRequest
from tools.input_models import LookupKnowledgeInput
from tools.knowledge.folder import (
    DEFAULT_MAX_FILE_BYTES,
    ListedFile,
    SkippedFile,
    list_runbooks,
    read_runbook_text,
)
from tools.knowledge.glossary import Glossary, bundled_glossary
from tools.knowledge.index import RunbookIndex
from tools.knowledge.parts import read_projection, split_parts, text_room
from tools.knowledge.runbook import Runbook, parse_runbook, passages
from tools.knowledge.snippet import snippet
from tools.knowledge.terms import terms
from tools.redaction import NOOP, Redactor
from tools.vocabulary import ErrorCode, EvidenceStatus

log = logging.getLogger("tools.knowledge")

# The default `[budget] max_observation_bytes`: the room of one part when none is configured.
DEFAULT_MAX_OBSERVATION_BYTES = 4_096
# A glossary expansion is another way to say what the query says, so it counts less than the query; a
# synonym in the query's own language less still (the operator chose their words).
TRANSLATION_WEIGHT = 0.6
SYNONYM_WEIGHT = 0.3
# Runs whose returned sources are remembered (a run reads what its own searches returned).
MAX_REMEMBERED_RUNS = 256
# Indexing reports progress every this many runbooks, once the folder has this many to (re)index.
PROGRESS_STEP = 500

IndexProgress = Callable[[int, int], None]  # (runbooks indexed so far, runbooks to index)


class KnowledgeAdapter:
    """Answers lookup_knowledge from the markdown runbooks under `path` (searched recursively)."""

    def __init__(
        self,
        path: Path,
        snippet_chars: int = 300,
        max_file_bytes: int = DEFAULT_MAX_FILE_BYTES,
        max_observation_bytes: int = DEFAULT_MAX_OBSERVATION_BYTES,
        glossary: Glossary | None = None,
        redactor: Redactor = NOOP,
    ) -> None:
        self._path = path
        self._redactor = redactor  # a snippet is redacted before it is cut (`Redactor.prefix`)
        self._snippet_chars = snippet_chars
        self._max_file_bytes = max_file_bytes
        self._max_observation_bytes = max_observation_bytes
        self._glossary = glossary
        self._index = RunbookIndex()
        self._listed: dict[str, ListedFile] = {}
        self._skipped: tuple[SkippedFile, ...] | None = None
        self._lock = threading.Lock()
        self._given: OrderedDict[str, set[str]] = OrderedDict()
        self._given_lock = threading.Lock()

    @property
    def skipped(self) -> tuple[SkippedFile, ...]:
        """Files left out of the index at the last lookup: links leading outside, oversized files."""
        return self._skipped or ()

    async def execute(self, request: ToolRequest) -> AdapterResult:
        params = request.input
        assert isinstance(params, LookupKnowledgeInput)  # noqa: S101 - invariant for the type checker
        if params.source is not None:
            if not self._was_given(request.run_id, params.source):
                raise ToolError(ErrorCode.INVALID_INPUT)
            return await asyncio.to_thread(self._read, params.source, params.part)
        assert params.query is not None  # noqa: S101 - invariant for the type checker
        documents = await asyncio.to_thread(self._search, params.query, params.top_k)
        if not documents:
            return AdapterResult(EvidenceStatus.EMPTY, {"documents": [], "returned": 0})
        self._give(request.run_id, [document["source"] for document in documents])
        return AdapterResult(EvidenceStatus.FOUND, {"documents": documents, "returned": len(documents)})

    async def prepare(self, progress: IndexProgress | None = None) -> int:
        """Index the folder now (off the event loop), so the first lookup of a run does not wait for
        it; returns the number of runbooks indexed. A folder that cannot be read raises ToolError."""
        return await asyncio.to_thread(self._refresh, progress)

    # ------------------------------------------------------------------------------------ search
    def _search(self, query: str, top_k: int) -> list[dict[str, Any]]:
        weighted = dict.fromkeys(terms(query), 1.0)
        glossary = self._glossary or bundled_glossary()
        expansions = glossary.expansions(query)
        for term in expansions.translations:
            weighted.setdefault(term, TRANSLATION_WEIGHT)
        for term in expansions.synonyms:
            weighted.setdefault(term, SYNONYM_WEIGHT)
        with self._lock:
            self._refresh_locked(None)
            hits = self._index.search(weighted, top_k)
            found = [(source, score, self._listed[source]) for source, score in hits]
        documents = []
        for source, score, listed in found:
            runbook = self._runbook(listed)
            if runbook is None:
                continue  # vanished or grew past the cap since it was listed
            documents.append(
                {
                    "title": runbook.title,
                    "source": source,
                    "snippet": snippet(passages(runbook), set(weighted), self._snippet_chars, self._redactor),
                    "score": round(score, 3),
                }
            )
        return documents

    # ------------------------------------------------------------------------------------ read
    def _read(self, source: str, part: int) -> AdapterResult:
        with self._lock:
            self._refresh_locked(None)
            listed = self._listed.get(source)
        text = read_runbook_text(listed.path, self._max_file_bytes) if listed is not None else None
        if text is None:
            return AdapterResult(EvidenceStatus.EMPTY, {"source": source, "part": part, "parts": 0})
        # Redacted whole before it is cut into parts: a credential across a part's end keeps the
        # context its rule needs (each part alone would show half of it).
        text = self._redactor.text(text)
        room = text_room(source, self._max_observation_bytes, len(text))
        try:
            parts = split_parts(text, room)
        except ValueError:
            raise ToolError(ErrorCode.RESULT_TOO_LARGE) from None
        if part > len(parts):
            raise ToolError(ErrorCode.INVALID_INPUT)
        return AdapterResult(EvidenceStatus.FOUND, read_projection(source, part, len(parts), parts[part - 1]))

    # ------------------------------------------------------------------------------------ index
    def _refresh(self, progress: IndexProgress | None) -> int:
        with self._lock:
            self._refresh_locked(progress)
            return len(self._index)

    def _refresh_locked(self, progress: IndexProgress | None) -> None:
        listing = list_runbooks(self._path, self._max_file_bytes)
        if listing.skipped != self._skipped:
            if listing.skipped:
                log.warning(
                    "knowledge folder %s: skipped %d file(s): %s",
                    self._path,
                    len(listing.skipped),
                    ", ".join(f"{item.source} ({item.reason})" for item in listing.skipped),
                )
            self._skipped = listing.skipped
        self._listed = {listed.source: listed for listed in listing.files}
        for source in self._index.sources():
            if source not in self._listed:
                self._index.remove(source)
        stale = [
            listed
            for listed in listing.files
            if (entry := self._index.get(listed.source)) is None or entry.version != listed.version
        ]
        report = progress if progress is not None and len(stale) >= PROGRESS_STEP else None
        for done, listed in enumerate(stale, start=1):
            runbook = self._runbook(listed)
            if runbook is None:
                self._index.remove(listed.source)  # one unreadable runbook must not take the rest down
            else:
                self._index.put(runbook, listed.version)
            if report is not None and (done % PROGRESS_STEP == 0 or done == len(stale)):
                report(done, len(stale))

    def _runbook(self, listed: ListedFile) -> Runbook | None:
        text = read_runbook_text(listed.path, self._max_file_bytes)
        return None if text is None else parse_runbook(listed.source, text)

    # ------------------------------------------------------------------------------------ runs
    def _give(self, run_id: str, sources: list[str]) -> None:
        with self._given_lock:
            given = self._given.setdefault(run_id, set())
            given.update(sources)
            self._given.move_to_end(run_id)
            while len(self._given) > MAX_REMEMBERED_RUNS:
                self._given.popitem(last=False)

    def _was_given(self, run_id: str, source: str) -> bool:
        with self._given_lock:
            return source in self._given.get(run_id, ())
