"""Text that UTF-8 cannot carry: what a model, a scenario or a previous-turn file can hand the engine.

A Python `str` may hold lone surrogates (U+D800–U+DFFF): a JSON `"\\ud800"` escape decodes to one,
and a model reply, a scenario file or a previous-turn file is JSON. Such a string is not Unicode
text: encoding it as UTF-8 raises, and the run encodes its strings everywhere (the request to the
model provider, the audit's SQL parameters, `--events`, the log). So every model or file string is
checked where it enters, and its fate is decided there: an input that holds one is rejected, a tool
call that holds one is answered with a control observation, a Draft that holds one is refused. Only
the transcript sent back to the provider is repaired (`encodable`), because the model's own reply
must travel again for the run to go on, and a call is judged on what the model sent, never on the
repaired copy. Evidence a source returns is repaired too (the tool boundary), since it is data to
show, not a statement anyone made.
"""

from __future__ import annotations

import re
from typing import Any

REPLACEMENT = "\ufffd"
_SURROGATE = re.compile("[\ud800-\udfff]")


def is_encodable(text: str) -> bool:
    """True when `text` can be encoded as UTF-8 (it holds no lone surrogate)."""
    return _SURROGATE.search(text) is None


def unencodable_path(value: Any, path: str = "") -> str | None:
    """Where the first string that cannot be encoded sits in a JSON-like value (dict keys included),
    as `key.key[index]`, "" for the value itself; None when every string can be encoded.

    A key that cannot be encoded is named by its position (`{3}`), never by itself."""
    if isinstance(value, str):
        return None if is_encodable(value) else path
    if isinstance(value, dict):
        for position, (key, item) in enumerate(value.items()):
            if isinstance(key, str) and not is_encodable(key):
                return f"{path}{{{position}}}"
            found = unencodable_path(item, f"{path}.{key}" if path else str(key))
            if found is not None:
                return found
        return None
    if isinstance(value, list | tuple):
        for index, item in enumerate(value):
            found = unencodable_path(item, f"{path}[{index}]")
            if found is not None:
                return found
    return None


def unencodable_key_path(value: Any, free_form: frozenset[str] = frozenset()) -> str | None:
    """Where the first mapping key that cannot be encoded sits in a JSON-like value, as `key[index]`
    ("" for the top level); None when every key can be. Values are not judged, and neither are the
    keys under a `free_form` key (data, such as a scripted call's `arguments`, not field names).

    A walk with its own stack: a file nested thousands deep must not overflow Python's."""
    pending: list[tuple[Any, str]] = [(value, "")]
    while pending:
        item, path = pending.pop()
        if isinstance(item, dict):
            for key, child in item.items():
                if isinstance(key, str) and not is_encodable(key):
                    return path
                if key not in free_form:
                    pending.append((child, f"{path}.{key}" if path else str(key)))
        elif isinstance(item, list):
            pending.extend((child, f"{path}[{index}]") for index, child in enumerate(item))
    return None


def holds_unencodable(value: Any) -> bool:
    """True when a string of a JSON-like value (dict keys included) cannot be encoded.

    Runs on every projection: one pass that builds no paths (`unencodable_path` says where)."""
    if isinstance(value, str):
        return _SURROGATE.search(value) is not None
    if isinstance(value, dict):
        return any(
            (isinstance(key, str) and _SURROGATE.search(key) is not None) or holds_unencodable(item)
            for key, item in value.items()
        )
    if isinstance(value, list | tuple):
        return any(holds_unencodable(item) for item in value)
    return False


def encodable(text: str) -> str:
    """`text` with every lone surrogate replaced by U+FFFD; the same object when there is none."""
    if is_encodable(text):
        return text
    return _SURROGATE.sub(REPLACEMENT, text)


def encodable_value(value: Any) -> Any:
    """`encodable` applied to every string (keys included) of a JSON-like value, into new objects."""
    if isinstance(value, str):
        return encodable(value)
    if isinstance(value, dict):
        return {encodable_value(key): encodable_value(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [encodable_value(item) for item in value]
    return value
