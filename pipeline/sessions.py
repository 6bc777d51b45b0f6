"""Conversation sessions (docs/design.md, "Sessions"): a follow-up such as "what about MSFT?"
inherits the previous request's analysis type, options and ``as_of``.

State per ``session_id`` is a small JSON object ``{symbol, analysis_type, options, as_of,
analysis_id}``. Service mode keeps it in Redis (``SET … EX ttl``; every request refreshes the
TTL) so every API process and producer sees the same session; embedded mode keeps it in this
process's memory with the same TTL. Free text is resolved by the caller's ``find_ticker``
(``pipeline.query.resolve_rules``: the same deterministic parser as ``finagent analyze``).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date
from typing import Any, Final, Protocol

from core.plans import ANALYSIS_TYPES, DEFAULT_ANALYSIS_TYPE
from core.settings import Settings
from db.redis_store import new_client
from pipeline.query import AnalysisType, named_analysis_type

SESSION_KEY_PREFIX: Final = "finagent:session:"


class SessionStore(Protocol):
    """Where session state lives; ``get`` returns ``None`` for an unknown or expired session."""

    def get(self, session_id: str) -> dict[str, Any] | None:
        """The stored state, or ``None``."""
        ...

    def put(self, session_id: str, data: dict[str, Any]) -> None:
        """Store ``data`` (JSON-safe) and restart the TTL."""
        ...


class MemorySessionStore:
    """In-process store with a TTL (embedded mode). Thread-safe; expired entries are dropped on
    access and the dict is pruned on every write."""

    def __init__(self, *, ttl: float) -> None:
        self._ttl = ttl
        self._data: dict[str, tuple[float, dict[str, Any]]] = {}
        self._lock = threading.Lock()

    def get(self, session_id: str) -> dict[str, Any] | None:
        """The state of ``session_id`` if it has not expired."""
        with self._lock:
            entry = self._data.get(session_id)
            if entry is None or entry[0] < time.monotonic():
                self._data.pop(session_id, None)
                return None
            return dict(entry[1])

    def put(self, session_id: str, data: dict[str, Any]) -> None:
        """Store a copy of ``data`` for ``ttl`` seconds."""
        now = time.monotonic()
        with self._lock:
            for key in [k for k, (expires, _) in self._data.items() if expires < now]:
                del self._data[key]
            self._data[session_id] = (now + self._ttl, dict(data))


class RedisSessionStore:
    """Redis store (service mode): key ``finagent:session:<id>``, JSON value, ``EX ttl``."""

    def __init__(self, *, url: str, ttl: int) -> None:
        # redis is imported here: only service mode stores sessions in Redis (cold start)
        self._client = new_client(url, socket_timeout=5, socket_connect_timeout=5)
        self._ttl = ttl

    def get(self, session_id: str) -> dict[str, Any] | None:
        """The state of ``session_id``, or ``None`` (unknown or expired)."""
        raw = self._client.get(SESSION_KEY_PREFIX + session_id)
        return json.loads(raw) if raw else None

    def put(self, session_id: str, data: dict[str, Any]) -> None:
        """Store ``data`` with a fresh TTL."""
        self._client.set(SESSION_KEY_PREFIX + session_id, json.dumps(data, default=str), ex=self._ttl)


_memory_store: MemorySessionStore | None = None
_memory_lock = threading.Lock()


def session_store(*, settings: Settings) -> SessionStore:
    """The store for ``settings``: Redis (``session_redis_url``, else a Redis broker) in service
    mode, else the process-wide in-memory store."""
    url = settings.api.session_redis_url
    if (
        url is None
        and settings.service.broker_url
        and settings.service.broker_url.startswith(("redis://", "rediss://"))
    ):
        url = settings.service.broker_url
    if url is not None:
        return RedisSessionStore(url=url, ttl=settings.api.session_ttl)
    global _memory_store
    with _memory_lock:
        if _memory_store is None:
            _memory_store = MemorySessionStore(ttl=settings.api.session_ttl)
        return _memory_store


@dataclass(frozen=True)
class ResolvedRequest:
    """A request after session inheritance: what to analyse and which fields were inherited."""

    symbol: str
    analysis_type: AnalysisType
    options: dict[str, Any]
    as_of: date | None
    inherited: list[str] = field(default_factory=list)


def resolve_request(
    *,
    symbol: str | None,
    query: str | None,
    as_of: date | None,
    analysis_type: AnalysisType | None,
    options: dict[str, Any] | None,
    previous: dict[str, Any] | None,
    find_ticker: Callable[[str], str | None],
) -> ResolvedRequest:
    """Fill a request's gaps from the text and from the previous request of its session.

    Precedence for each field: explicit argument > found in ``query`` (``find_ticker``, and
    ``pipeline.query.named_analysis_type``) > ``previous`` > default. The symbol has no
    default; options merge (explicit keys win). ``as_of`` is inherited too, so "what about
    MSFT?" compares at the same date.

    ``find_ticker`` returns ``None`` only when the text names no ticker or company; it raises
    (``pipeline.query.UnresolvedQueryError``, a ``ValueError``) when the text names one the data
    source cannot serve, or several. Only the first case inherits the previous symbol.

    Raises:
        ValueError: no symbol given, none in the text and no previous request to inherit from
            (the message says so), or ``find_ticker``'s refusal of the text; callers map it to
            InvalidRequestError / 422, and nothing is stored.
    """
    previous = previous or {}
    inherited: list[str] = []
    chosen = symbol or (find_ticker(query) if query else None)
    if chosen is None:
        chosen = previous.get("symbol")
        if chosen is None:
            raise ValueError(
                "no ticker in the request: pass `symbol`, or name it in `query` (e.g. 'what about MSFT?')"
            )
        inherited.append("symbol")
    kind = analysis_type or (named_analysis_type(query) if query else None)
    if kind is None and previous.get("analysis_type") in ANALYSIS_TYPES:
        kind = previous["analysis_type"]
        inherited.append("analysis_type")
    merged: dict[str, Any] = {}
    if previous.get("options"):
        merged.update(previous["options"])
        if not options or set(previous["options"]) - set(options):
            inherited.append("options")
    merged.update(options or {})
    when = as_of
    if when is None and previous.get("as_of"):
        when = date.fromisoformat(previous["as_of"])
        inherited.append("as_of")
    return ResolvedRequest(
        symbol=chosen,
        analysis_type=kind or DEFAULT_ANALYSIS_TYPE,
        options=merged,
        as_of=when,
        inherited=inherited,
    )
