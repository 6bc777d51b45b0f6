"""The Python producer API: ``from pipeline import enqueue_analysis``.

    handle = enqueue_analysis("AAPL", as_of=date(2012, 6, 29))
    handle.id, handle.status()        # "queued", "researching" … "done" | "failed"
    row = handle.wait(timeout=120)    # the analyses row, report included

:func:`submit` is the one producer path shared by this API and the HTTP gateway: resolve the
session (docs/design.md, "Sessions"), validate and enqueue through ``pipeline.service``,
remember the request in the session. In embedded mode (no broker) the first call starts a
process-wide in-process worker thread, so the API works on a fresh machine too.
"""

from __future__ import annotations

import atexit
import threading
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import date
from typing import Any

from agents.data.routing import get_provider
from core.settings import Settings
from core.tenancy import DEFAULT_TENANT
from core.tickers import JunkInputError, refuse_junk
from pipeline import service, taskqueue
from pipeline.query import resolve_rules
from pipeline.sessions import AnalysisType, resolve_request, session_store

_embedded_lock = threading.Lock()
_embedded_stack: ExitStack | None = None


def ensure_embedded_worker(*, settings: Settings) -> None:
    """Embedded mode: start the in-process worker once per process (stopped at exit).
    Service mode: nothing (separate ``finagent worker`` processes consume)."""
    global _embedded_stack
    if settings.service.mode != "embedded":
        return
    with _embedded_lock:
        if _embedded_stack is not None:
            return
        # the task queue builds its app from the process settings when first asked: the
        # producer reads them at its first call, never at import (callers may set them first)
        stack = ExitStack()
        stack.enter_context(taskqueue.get().embedded_worker())
        atexit.register(stack.close)
        _embedded_stack = stack


def stop_embedded_worker() -> None:
    """Stop the in-process worker started by :func:`ensure_embedded_worker` (waits ~3 s for the
    consumer to drain); a no-op when none runs. Tests call it so later in-process workers start
    cleanly."""
    global _embedded_stack
    with _embedded_lock:
        stack, _embedded_stack = _embedded_stack, None
    if stack is not None:
        stack.close()


def embedded_worker_running() -> bool:
    """Whether this process runs the embedded worker (for ``GET /health`` in embedded mode)."""
    return _embedded_stack is not None


@dataclass(frozen=True)
class Submission:
    """What a producer gets back: the analysis plus the session fields it resolved."""

    analysis_id: str
    symbol: str
    as_of: date
    analysis_type: AnalysisType
    options: dict[str, Any]
    session_id: str | None = None
    inherited: list[str] = field(default_factory=list)


def submit(
    *,
    symbol: str | None = None,
    query: str | None = None,
    as_of: date | None = None,
    analysis_type: AnalysisType | None = None,
    options: dict[str, Any] | None = None,
    session_id: str | None = None,
    analysis_id: str | None = None,
    settings: Settings,
    tenant: str = DEFAULT_TENANT,
    api_key_id: str | None = None,
) -> Submission:
    """Resolve the request against its session, validate it, create the row, enqueue the chain.

    Args:
        symbol / query: a ticker, or free text naming one ("what about MSFT?"); with a
            ``session_id`` both may be omitted to repeat the previous symbol.
        options: ``{"max_iterations": int, "cost_basis": float, "plan": {...}}`` are used by the
            pipeline: ``plan`` holds the options of the type's plan (validated by the plan, e.g.
            ``{"account_value": 250000}``), ``cost_basis`` is the covered call's shorthand for
            ``plan.cost_basis``; every key is remembered in the session.
        analysis_id: a caller-chosen id (the HTTP gateway's idempotency claim).
        tenant / api_key_id: the owner of the analysis and the HTTP key that asked for it.
            Sessions are per tenant: another tenant's ``session_id`` is an unknown session.
    Raises:
        service.InvalidRequestError: no ticker, bad ticker or date, or a ``symbol``/``query``
            with junk (``core.tickers.refuse_junk``, e.g. ``AAPL;DROP TABLE``; the
            message names the characters); nothing is enqueued.
        service.SchemaMissingError: service database not migrated.
    """
    for text in (symbol, query):  # a ticker with junk: refused before any lookup (one rule)
        try:
            refuse_junk(text or "")
        except JunkInputError as exc:
            raise service.InvalidRequestError(str(exc)) from exc
    store = session_store(settings=settings) if session_id else None
    # "/" cannot occur in a tenant name, so two tenants' keys never meet
    session_key = f"{tenant}/{session_id}"
    previous = store.get(session_key) if store and session_id else None
    try:
        resolved = resolve_request(
            symbol=symbol,
            query=query,
            as_of=as_of,
            analysis_type=analysis_type,
            options=options,
            previous=previous,
            find_ticker=lambda text: resolve_rules(text=text, provider=get_provider(settings=settings)),
        )
    except ValueError as exc:
        raise service.InvalidRequestError(str(exc)) from exc
    max_iterations = resolved.options.get("max_iterations")
    valid = isinstance(max_iterations, int) and not isinstance(max_iterations, bool)
    if max_iterations is not None and not (valid and 1 <= max_iterations <= 10):
        raise service.InvalidRequestError(f"options.max_iterations must be 1..10, got {max_iterations!r}")
    plan_options = plan_options_of(resolved.options)
    ensure_embedded_worker(settings=settings)
    request = service.AnalysisRequest(
        symbol=resolved.symbol,
        as_of=resolved.as_of,
        user_query=query,
        max_iterations=max_iterations,
        analysis_id=analysis_id,
        analysis_type=resolved.analysis_type,
        plan_options=plan_options,
        tenant=tenant,
        api_key_id=api_key_id,
    )
    submitted = service.start_analysis(request=request, settings=settings)
    if store and session_id:
        store.put(
            session_key,
            {
                "symbol": submitted.symbol,
                "analysis_type": resolved.analysis_type,
                "options": resolved.options,
                # only a date the user chose travels on; "latest" stays "latest" per symbol
                "as_of": resolved.as_of.isoformat() if resolved.as_of else None,
                "analysis_id": submitted.analysis_id,
            },
        )
    return Submission(
        analysis_id=submitted.analysis_id,
        symbol=submitted.symbol,
        as_of=submitted.as_of,
        analysis_type=resolved.analysis_type,
        options=resolved.options,
        session_id=session_id,
        inherited=resolved.inherited,
    )


def plan_options_of(options: dict[str, Any]) -> dict[str, Any] | None:
    """The plan options of a request's ``options``: its ``plan`` dict, with ``cost_basis`` (the
    covered call's shorthand) added. The plan validates them (``service.prepare_analysis``).

    Raises ``service.InvalidRequestError`` when ``plan`` is not an object or the cost basis is
    given twice or not a positive number."""
    plan = options.get("plan")
    if plan is not None and not isinstance(plan, dict):
        raise service.InvalidRequestError(f"options.plan must be an object, got {plan!r}")
    out = dict(plan or {})
    cost_basis = options.get("cost_basis")
    if cost_basis is not None:
        if isinstance(cost_basis, bool) or not isinstance(cost_basis, int | float) or not cost_basis > 0:
            raise service.InvalidRequestError(
                f"options.cost_basis must be a positive number, got {cost_basis!r}"
            )
        if "cost_basis" in out and out["cost_basis"] != cost_basis:
            raise service.InvalidRequestError("cost_basis given twice (options.cost_basis and options.plan)")
        out["cost_basis"] = float(cost_basis)
    return out or None


@dataclass(frozen=True)
class AnalysisHandle:
    """A submitted analysis: ``id``, ``status()`` and ``wait(timeout)``."""

    id: str
    symbol: str
    as_of: date
    analysis_type: AnalysisType
    settings: Settings = field(repr=False)

    def status(self) -> str:
        """The current status (``queued``, ``researching`` … ``done`` | ``failed``), read from the database.

        Raises ``KeyError`` if the row vanished (the database was reset)."""
        row = service.get_analysis(analysis_id=self.id, settings=self.settings)
        if row is None:
            raise KeyError(f"no analysis {self.id}")
        return str(row["status"])

    def wait(self, timeout: float | None = None) -> dict[str, Any]:
        """Block until done or failed (polling the database); return the ``analyses`` row
        (``report`` Markdown, ``report_json``, ``signal``, ``confidence``, ``error``…).

        Raises ``service.WaitTimeoutError`` after ``timeout`` seconds (default
        ``FINAGENT_SERVICE_WAIT_TIMEOUT``); the analysis may still finish later."""
        return service.wait_for(analysis_id=self.id, timeout=timeout, settings=self.settings)


def enqueue_analysis(
    symbol: str | None = None,
    *,
    query: str | None = None,
    as_of: date | None = None,
    analysis_type: AnalysisType | None = None,
    options: dict[str, Any] | None = None,
    session_id: str | None = None,
    settings: Settings,
) -> AnalysisHandle:
    """Enqueue one analysis and return its handle (see :func:`submit` for the arguments and
    errors). Works in service mode (a broker and separate workers) and embedded mode."""
    sub = submit(
        symbol=symbol,
        query=query,
        as_of=as_of,
        analysis_type=analysis_type,
        options=options,
        session_id=session_id,
        settings=settings,
    )
    return AnalysisHandle(
        id=sub.analysis_id,
        symbol=sub.symbol,
        as_of=sub.as_of,
        analysis_type=sub.analysis_type,
        settings=settings,
    )
