"""lookup_knowledge over a folder of markdown runbooks, ranked by Haystack's in-memory BM25.

The index is built lazily (haystack is imported only then, so the console paints first) and rebuilt
only when the set of files, their sizes or mtimes change. The model gets a bounded projection: title,
source, one short snippet and a score per document, never a whole runbook.

The folder is someone's content, not the operator's machine: a symbolic link (to a file or a folder)
that resolves outside the configured folder is never followed, so `/etc/passwd` or
`/proc/self/environ` linked in as `notes.md` never reaches the index, the model or the audit. A file
over the size cap (`[knowledge] max_file_bytes`) is skipped, so one huge file cannot stall every
lookup. Skipped files are listed in `skipped` and logged, never shown to the model.
"""

from __future__ import annotations

import asyncio
import importlib.resources
import logging
import os
import re
import stat
import threading
import unicodedata
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tools.adapter import AdapterResult, ToolRequest
from tools.folder_walk import FolderListing, SkippedFile, list_folder
from tools.input_models import LookupKnowledgeInput
from tools.vocabulary import EvidenceStatus

if TYPE_CHECKING:
    from haystack.components.retrievers.in_memory import InMemoryBM25Retriever

# Same CJK ranges as Haystack's default tokenizer (Hangul, kana, CJK ideographs).
_CJK = (
    "\u1100-\u11ff\ua960-\ua97f\ud7b0-\ud7ff\u3130-\u318f\uac00-\ud7af\u3041-\u3096\u30a1-\u30fa"
    "\u30fc\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f\uffa0-\uffdc"
)
_CJK_CHAR = f"[{_CJK}]"
_WORD = rf"[^\W{_CJK}]+"
# Words stay whole; CJK runs become overlapping bigrams (a lone CJK character stays a unigram), the
# scheme of Lucene's CJKBigramFilter. Haystack's default splits CJK into single characters, which makes
# "连接池" match every text containing "接". The lookahead captures the token so findall() can overlap.
BM25_TOKENIZATION_REGEX = (
    rf"(?=((?<!{_CJK_CHAR}){_CJK_CHAR}(?!{_CJK_CHAR})|{_CJK_CHAR}{{2}}|{_WORD}))(?:{_CJK_CHAR}|{_WORD})"
)
_TOKENIZER = re.compile(BM25_TOKENIZATION_REGEX)
_HEADING = re.compile(r"^#{1,6}\s")
MAX_TITLE_CHARS = 200
DEFAULT_MAX_FILE_BYTES = 2 * 1024 * 1024
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)

log = logging.getLogger(__name__)


def bundled_knowledge_path() -> Path:
    """The demo runbooks shipped with the package, used when no `[knowledge] path` is configured."""
    return Path(str(importlib.resources.files("tools") / "data" / "knowledge"))


def tokenize(text: str) -> list[str]:
    """The exact tokens BM25 sees (lowercased, NFC), reused to pick the snippet that matched."""
    return _TOKENIZER.findall(unicodedata.normalize("NFC", text.lower()))


@dataclass(frozen=True)
class _Runbook:
    source: str
    title: str
    passages: tuple[str, ...]


@dataclass(frozen=True)
class _Index:
    fingerprint: frozenset[tuple[str, int, int]]
    retriever: InMemoryBM25Retriever
    runbooks: dict[str, _Runbook]


class KnowledgeAdapter:
    """Answers lookup_knowledge from markdown files under `path` (searched recursively)."""

    def __init__(
        self, path: Path, snippet_chars: int = 300, max_file_bytes: int = DEFAULT_MAX_FILE_BYTES
    ) -> None:
        self._path = path
        self._snippet_chars = snippet_chars
        self._max_file_bytes = max_file_bytes
        self._index: _Index | None = None
        self._skipped: tuple[SkippedFile, ...] = ()
        self._lock = threading.Lock()

    @property
    def skipped(self) -> tuple[SkippedFile, ...]:
        """Files left out of the index at the last lookup: links leading outside, oversized files."""
        return self._skipped

    async def execute(self, request: ToolRequest) -> AdapterResult:
        """Search off the event loop: the first call imports haystack and reads files.

        If the awaiting task is cancelled the worker thread still finishes, but its only side effect is
        replacing the cached index in one assignment under a lock, so no state is ever half-updated.
        """
        params = request.input
        assert isinstance(params, LookupKnowledgeInput)
        documents = await asyncio.to_thread(self._search, params.query, params.top_k)
        if not documents:
            return AdapterResult(EvidenceStatus.EMPTY, {"documents": [], "returned": 0})
        return AdapterResult(EvidenceStatus.FOUND, {"documents": documents, "returned": len(documents)})

    def _search(self, query: str, top_k: int) -> list[dict[str, Any]]:
        index = self._current_index()
        hits = index.retriever.run(query=query, top_k=top_k)["documents"]
        query_tokens = set(tokenize(query))
        documents = []
        for hit in hits:
            if hit.score is None or hit.score <= 0:
                continue
            runbook = index.runbooks[hit.id]
            documents.append(
                {
                    "title": runbook.title,
                    "source": runbook.source,
                    "snippet": _snippet(runbook.passages, query_tokens, self._snippet_chars),
                    "score": round(float(hit.score), 3),
                }
            )
        return documents

    def _current_index(self) -> _Index:
        with self._lock:
            listing = self._list_files()
            fingerprint = frozenset(
                (source, info.st_mtime_ns, info.st_size) for source, _, info in listing.files
            )
            if (
                self._index is None
                or self._index.fingerprint != fingerprint
                or listing.skipped != self._skipped
            ):
                if listing.skipped:
                    log.warning(
                        "knowledge folder %s: skipped %d file(s): %s",
                        self._path,
                        len(listing.skipped),
                        ", ".join(f"{item.source} ({item.reason})" for item in listing.skipped),
                    )
                index = _build_index(fingerprint, [(s, p) for s, p, _ in listing.files], self._max_file_bytes)
                self._index, self._skipped = index, listing.skipped
            return self._index

    def _list_files(self) -> FolderListing:
        """Every `*.md` regular file under the folder, reached only through links that stay inside it."""
        return list_folder(self._path, lambda name: name.endswith(".md"), self._max_file_bytes)


def _read_runbook(path: Path, max_bytes: int) -> str | None:
    """The file's text, or None when it cannot be read or has grown past the cap since it was listed."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | _NOFOLLOW)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as stream:
        if not stat.S_ISREG(os.fstat(stream.fileno()).st_mode):
            return None
        data = stream.read(max_bytes + 1)
    if len(data) > max_bytes:
        return None
    return data.decode("utf-8", errors="replace")


def _build_index(
    fingerprint: frozenset[tuple[str, int, int]], files: list[tuple[str, Path]], max_bytes: int
) -> _Index:
    from haystack import Document
    from haystack.components.retrievers.in_memory import InMemoryBM25Retriever
    from haystack.document_stores.in_memory import InMemoryDocumentStore

    runbooks: dict[str, _Runbook] = {}
    documents = []
    for source, path in files:
        text = _read_runbook(path, max_bytes)
        if text is None:
            continue  # one unreadable runbook must not take the whole knowledge base down
        runbook = _parse_runbook(source, path, text)
        runbooks[source] = runbook
        # The title counts three times: a runbook named after the symptom should outrank one that
        # merely mentions it in passing.
        content = f"{runbook.title}\n{runbook.title}\n{text}"
        documents.append(Document(id=source, content=content, meta={"title": runbook.title}))
    store = InMemoryDocumentStore(bm25_tokenization_regex=BM25_TOKENIZATION_REGEX, shared=False)
    store.write_documents(documents)
    return _Index(fingerprint=fingerprint, retriever=InMemoryBM25Retriever(store), runbooks=runbooks)


def _parse_runbook(source: str, path: Path, text: str) -> _Runbook:
    """Title = first `# ` heading outside code fences (a shell comment is not a title), else file name."""
    in_fence = False
    offset = 0
    for line in text.splitlines(keepends=True):
        stripped = line.strip()
        if stripped.startswith(("```", "~~~")):
            in_fence = not in_fence
        elif not in_fence and line.startswith("# ") and stripped[2:].strip():
            title = stripped[2:].strip().rstrip("#").strip()[:MAX_TITLE_CHARS]
            body = text[:offset] + text[offset + len(line) :]
            return _Runbook(source=source, title=title, passages=_passages(body))
        offset += len(line)
    return _Runbook(source=source, title=path.name[:MAX_TITLE_CHARS], passages=_passages(text))


def _passages(body: str) -> tuple[str, ...]:
    """Blank-line separated paragraphs; a heading is glued to the paragraph it introduces."""
    passages: list[str] = []
    pending_heading = ""
    for raw in re.split(r"\n\s*\n", body):
        block = " ".join(raw.split())
        if not block:
            continue
        if _HEADING.match(block) and "\n" not in raw.strip() and not pending_heading:
            pending_heading = block
            continue
        passages.append(f"{pending_heading} {block}" if pending_heading else block)
        pending_heading = ""
    if pending_heading:
        passages.append(pending_heading)
    return tuple(passages)


def _snippet(passages: tuple[str, ...], query_tokens: set[str], limit: int) -> str:
    """From the passage sharing the most query tokens (first wins a tie), else from the body's start.

    Following passages fill the remaining room, so a short lead-in line still shows what comes next.
    """
    start, best_score = 0, (0, 0)
    for position, passage in enumerate(passages):
        tokens = tokenize(passage)
        score = (len(query_tokens.intersection(tokens)), sum(1 for token in tokens if token in query_tokens))
        if score > best_score:
            start, best_score = position, score
    text = ""
    for passage in passages[start:]:
        text = f"{text} {passage}" if text else passage
        if len(text) > 2 * limit:
            break
    return _cut(_around_first_match(text, query_tokens, limit), limit)


def _around_first_match(passage: str, query_tokens: set[str], limit: int) -> str:
    """Start the snippet shortly before the first match when the match lies past the cut."""
    lowered = passage.lower()
    positions = [lowered.find(token) for token in query_tokens if token in lowered]
    first = min(positions, default=0)
    if first < limit * 2 // 3:
        return passage
    return "…" + passage[max(0, first - limit // 4) :]


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[: max(0, limit - 1)] + "…"
