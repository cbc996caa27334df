"""The words BM25 compares: written as operators and alert rules write them, reduced to one form.

An alert is named `KubePodCrashLooping`, a metric `kube_pod_not_ready`, a service `payment-service`,
a setting `net.netfilter.nf_conntrack_max`; an operator types "pod crash looping" or "pods keep
restarting". So a compound (words joined by case changes or by `_`, `-`, `.`) yields each of its words
and also the whole compound without its separators, so `KubePodNotReady` and `kube_pod_not_ready` meet
as one term, and "pod not ready" meets both word by word. Words are lower-cased (NFKC, so full-width
`ＡＰＩ` is `api`) and reduced to their English stem by the Snowball stemmer ("pods" -> "pod",
"restarting" -> "restart"); a handful of function words are dropped. Chinese, Japanese and Korean runs
become overlapping bigrams, a lone character a unigram (the scheme of Lucene's CJKBigramFilter), since
those scripts do not separate words with spaces and a single shared character (接 in 连接池 and 接口)
means nothing.
"""

from __future__ import annotations

import re
import threading
import unicodedata

# Hangul, kana, CJK ideographs (the ranges of Haystack's default BM25 tokenizer).
CJK_RANGES = (
    "\u1100-\u11ff\ua960-\ua97f\ud7b0-\ud7ff\u3130-\u318f\uac00-\ud7af\u3041-\u3096\u30a1-\u30fa"
    "\u30fc\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uff66-\uff9f\uffa0-\uffdc"
)
# A CJK run, or a compound: letters and digits, joined by `_`, `-` or `.` (never two in a row).
_CHUNK = re.compile(rf"[{CJK_RANGES}]+|[^\W_{CJK_RANGES}]+(?:[._\-][^\W_{CJK_RANGES}]+)*")
_SEPARATORS = re.compile(r"[._\-]")
# The words of a camel-cased piece: `GRPC` in `etcdGRPCRequests`, `Kube`, `8s` in `K8s`.
_CAMEL_WORD = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z0-9]+")
_IS_CJK = re.compile(rf"[{CJK_RANGES}]")
# Words that carry no meaning in a runbook search; "not", "no", "up", "down" and "off" do, so they stay.
STOP_WORDS = frozenset({
    "a", "an", "and", "are", "as", "at", "be", "been", "but", "by", "for", "from", "has", "have", "i", "if",
    "in", "into", "is", "it", "its", "me", "my", "of", "on", "or", "our", "so", "than", "that", "the",
    "their", "then", "there", "these", "this", "those", "to", "was", "we", "were", "what", "when", "which",
    "while", "who", "will", "with", "you", "your",
})  # fmt: skip
_MAX_STEM_CACHE = 200_000


class _Stemmer:
    """Snowball's English stemmer with a cache: stemming is ~30 µs a word, a lookup ~0.1 µs, and a
    runbook collection repeats its words endlessly. The Snowball stemmer object is not thread-safe."""

    def __init__(self) -> None:
        import snowballstemmer

        self._stemmer = snowballstemmer.stemmer("english")
        self._cache: dict[str, str] = {}
        self._lock = threading.Lock()

    def stem(self, word: str) -> str:
        stemmed = self._cache.get(word)
        if stemmed is not None:
            return stemmed
        if not word.isascii() or not word.isalpha():
            return word  # numbers, versions, non-English words: as written
        with self._lock:
            stemmed = str(self._stemmer.stemWord(word))
            if len(self._cache) < _MAX_STEM_CACHE:
                self._cache[word] = stemmed
        return stemmed


_stemmer: _Stemmer | None = None
_stemmer_lock = threading.Lock()


def _stem(word: str) -> str:
    global _stemmer
    if _stemmer is None:
        with _stemmer_lock:
            if _stemmer is None:
                _stemmer = _Stemmer()
    return _stemmer.stem(word)


def normalize(text: str) -> str:
    """The form every comparison uses: NFKC (full-width letters and digits folded), lower case."""
    return unicodedata.normalize("NFKC", text).lower()


def terms(text: str) -> list[str]:
    """Every term of `text`, in order, repeats kept (BM25 counts them)."""
    found: list[str] = []
    cache = _chunk_cache
    for chunk in _CHUNK.findall(unicodedata.normalize("NFKC", text)):
        chunk_terms = cache.get(chunk)
        if chunk_terms is None:
            chunk_terms = _chunk_terms(chunk)
            if len(cache) < _MAX_CHUNK_CACHE and len(chunk) <= _MAX_CACHED_CHUNK_CHARS:
                cache[chunk] = chunk_terms
        found += chunk_terms
    return found


def word_stems(text: str) -> list[str]:
    """The stems of `text`'s words, in order, without whole compounds or CJK: what a phrase of the
    glossary is matched against."""
    found: list[str] = []
    for chunk in _CHUNK.findall(unicodedata.normalize("NFKC", text)):
        if not _IS_CJK.match(chunk):
            found += [word for word in _words(chunk) if word not in STOP_WORDS]
    return found


def is_cjk(text: str) -> bool:
    return _IS_CJK.search(text) is not None


# Runbooks repeat their words: a chunk's terms are worked out once (indexing 10,000 runbooks ~3x faster).
_MAX_CHUNK_CACHE = 200_000
_MAX_CACHED_CHUNK_CHARS = 64  # a longer chunk is rare and unique: caching it would only hold memory
_chunk_cache: dict[str, tuple[str, ...]] = {}


def _chunk_terms(chunk: str) -> tuple[str, ...]:
    if _IS_CJK.match(chunk):
        return tuple(cjk_bigrams(chunk))
    words = _words(chunk)
    found = [word for word in words if word not in STOP_WORDS]
    if len(words) > 1:
        found.append(_SEPARATORS.sub("", chunk).lower())
    return tuple(found)


def _words(chunk: str) -> list[str]:
    """The stemmed, lower-cased words of one compound."""
    words: list[str] = []
    for piece in _SEPARATORS.split(chunk):
        split = _CAMEL_WORD.findall(piece) if piece.isascii() and not piece.islower() else [piece]
        words += [_stem(word.lower()) for word in split or [piece]]
    return words


def cjk_bigrams(run: str) -> list[str]:
    if len(run) == 1:
        return [run]
    return [run[i : i + 2] for i in range(len(run) - 1)]
