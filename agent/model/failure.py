"""What a failed model call may say about itself: a stable cause and the endpoint, never provider text.

`APIConnectionError` alone does not tell an operator on call whether nothing listens there, the name
does not resolve, the certificate is wrong or the server is too slow. The client's exception wraps
the real one (`raise APIConnectionError(...) from err`, down to the socket's error), so the chain is
read, outermost first, and the first link with a known meaning names the cause. Only the cause (a
word of `agent.vocabulary.ModelFailureCause`) and the exception's type name leave this module: the
provider's message and body may carry anything.

The endpoint is the configured base URL without what may be secret in a URL: user and password,
query and fragment.
"""

from __future__ import annotations

import errno
import json
import socket
import ssl
from urllib.parse import urlsplit, urlunsplit

from agent.settings import ModelSettings
from agent.vocabulary import ModelFailureCause, http_cause

OPENAI_DEFAULT_ENDPOINT = "https://api.openai.com/v1"
_MAX_CHAIN = 16  # links followed; a chain is a handful long, a cycle is cut by identity anyway


_CLOSED = (ConnectionResetError, ConnectionAbortedError, BrokenPipeError)
_UNREACHABLE = frozenset({errno.ENETUNREACH, errno.EHOSTUNREACH})


def _cause_of_link(link: BaseException) -> str | None:
    name = type(link).__name__
    if isinstance(link, TimeoutError) or name.endswith(("Timeout", "TimeoutError")):
        return ModelFailureCause.TIMEOUT
    if isinstance(link, ssl.SSLError):
        return ModelFailureCause.TLS
    if isinstance(link, socket.gaierror):
        return ModelFailureCause.DNS
    if isinstance(link, ConnectionRefusedError):
        return ModelFailureCause.REFUSED
    if isinstance(link, OSError) and link.errno in _UNREACHABLE:
        return ModelFailureCause.UNREACHABLE
    if isinstance(link, _CLOSED) or name == "RemoteProtocolError":
        return ModelFailureCause.CONNECTION_CLOSED
    status = getattr(link, "status_code", None)
    if isinstance(status, int) and not isinstance(status, bool) and 100 <= status <= 599:
        return http_cause(status)
    if isinstance(link, json.JSONDecodeError) or name == "APIResponseValidationError":
        return ModelFailureCause.INVALID_RESPONSE
    return None


def failure_cause(exc: BaseException) -> str | None:
    """The cause of a failed model call, read from its exception chain; None if no link says."""
    seen: set[int] = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen and len(seen) < _MAX_CHAIN:
        seen.add(id(link))
        cause = _cause_of_link(link)
        if cause is not None:
            return cause
        link = link.__cause__ or link.__context__
    return None


def model_endpoint(settings: ModelSettings) -> str | None:
    """Where the model calls go, safe to show and log; None for the scripted model (no endpoint)."""
    if settings.provider != "openai":
        return None
    if not settings.base_url:
        return OPENAI_DEFAULT_ENDPOINT
    try:
        parts = urlsplit(settings.base_url)
        host = parts.hostname or ""
        port = parts.port
    except ValueError:
        return "(base_url is not a URL)"
    if ":" in host:  # an IPv6 literal keeps its brackets
        host = f"[{host}]"
    netloc = f"{host}:{port}" if port is not None else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))
