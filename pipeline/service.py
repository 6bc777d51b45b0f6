"""Producer-side services: validate, create the analysis row, enqueue the chain, wait.

Keyword-only functions used by the CLI (and later the HTTP gateway and the Python API).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any

from sqlalchemy import inspect

from agents.data.market.base import MarketDataProvider, ProviderError
from agents.data.routing import get_provider
from core.dates import DateRuleError, check_date
from core.plans import AnalysisType
from core.settings import Settings, get_settings
from core.stages import TERMINAL_STATUSES
from core.state import FinancialAgentState
from core.tenancy import DEFAULT_TENANT
from core.tickers import name_once, normalize_ticker
from db import repo
from db.engine import get_engine
from db.migrate import ensure_schema
from pipeline.plan_hooks import plan_for

if TYPE_CHECKING:
    from celery.canvas import Signature


class InvalidRequestError(ValueError):
    """A request that must be refused before anything is enqueued (bad ticker, bad date,
    unknown symbol). The message names the offending value."""


class SchemaMissingError(RuntimeError):
    """The service database has no schema: run ``finagent db upgrade``."""


class WaitTimeoutError(TimeoutError):
    """The analysis did not finish within the wait timeout (it may still finish later)."""


@dataclass(frozen=True)
class Submitted:
    """An enqueued analysis: its id, the normalised symbol and the resolved ``as_of``."""

    analysis_id: str
    symbol: str
    as_of: date


#: Service databases already seen with a schema (per process): a producer enqueuing many
#: analyses checks once, not once per request (one round trip each, docs/benchmarks.md).
_schema_seen: set[str] = set()


def prepare_database(*, settings: Settings) -> None:
    """Embedded mode: create/upgrade the SQLite schema. Service mode: check it exists (once
    per process and URL).

    Raises:
        SchemaMissingError: service database without the ``analyses`` table.
    """
    url = settings.service.effective_database_url
    if settings.service.mode == "embedded":
        ensure_schema(url=url)
        return
    if url in _schema_seen:
        return
    if not inspect(get_engine(url)).has_table("analyses"):
        raise SchemaMissingError("the database has no finagent schema: run `finagent db upgrade`")
    _schema_seen.add(url)


def resolve_as_of(*, provider: MarketDataProvider, symbol: str, as_of: date | None) -> date:
    """Check ``symbol`` and ``as_of`` against the provider before enqueuing.

    Returns ``as_of``, or the provider's latest date for ``symbol`` when ``None``.
    Raises:
        InvalidRequestError: unknown symbol, a date in the future or before
            ``core.dates.EARLIEST_DATE``, or a date outside the data.
    """
    if as_of is not None:
        try:
            check_date(as_of, field="as_of", today=datetime.now(UTC).date(), where="UTC")
        except DateRuleError as exc:
            raise InvalidRequestError(str(exc)) from exc
    try:
        latest = provider.latest_date(symbol=symbol)
        if as_of is None:
            return latest
        # A short window is enough to prove there is a bar at or shortly before as_of.
        provider.bars(symbol=symbol, start=as_of - timedelta(days=14), end=as_of)
    except ProviderError as exc:
        if exc.transient:
            raise
        raise InvalidRequestError(name_once(symbol, str(exc))) from exc  # providers name it already
    return as_of


def start_analysis(
    *,
    symbol: str,
    as_of: date | None = None,
    user_query: str | None = None,
    max_iterations: int | None = None,
    analysis_id: str | None = None,
    settings: Settings | None = None,
    llm_model: str | None = None,
    llm_rows: list[dict[str, Any]] | None = None,
    analysis_type: AnalysisType | None = None,
    tenant: str = DEFAULT_TENANT,
    api_key_id: str | None = None,
) -> Submitted:
    """Validate the request, write the ``analyses`` row and enqueue the chain.

    Args:
        symbol: ticker as typed by the user (normalised per docs/design.md, "Tickers").
        as_of: analysis date; default the provider's latest date for the symbol.
        user_query: free text kept in the state (default "Analyze SYMBOL").
        max_iterations: most passes (default from settings).
        analysis_id: id to use (default a new UUID4); a caller with an idempotency key passes
            its claimed id. If a row with this id exists already, nothing is enqueued again.
        llm_model: a LiteLLM model string for every agent of this analysis (``--llm``); it
            travels in the state, so workers in other processes use it.
        llm_rows: ``llm_calls`` rows made before the analysis existed (``parse_query``),
            stored under its id.
        analysis_type: the parsed or requested type (``parse_query``, ``--type``, the API), kept in
            the state; it selects the plan (``core.plans``); None: the default type.
        tenant / api_key_id: the owner of the analysis (``core.tenancy``) and the
            HTTP API key that asked for it (``None`` for the CLI, the Python API and beat).
    Returns:
        ``Submitted`` with the analysis id.
    Raises:
        InvalidRequestError: bad ticker or date (nothing is enqueued).
        SchemaMissingError: service database not migrated.
    """
    submitted, signature = prepare_analysis(
        symbol=symbol,
        as_of=as_of,
        user_query=user_query,
        max_iterations=max_iterations,
        analysis_id=analysis_id,
        settings=settings,
        llm_model=llm_model,
        llm_rows=llm_rows,
        analysis_type=analysis_type,
        tenant=tenant,
        api_key_id=api_key_id,
    )
    if signature is not None:
        signature.apply_async()
    return submitted


def prepare_analysis(
    *,
    symbol: str,
    as_of: date | None = None,
    user_query: str | None = None,
    max_iterations: int | None = None,
    analysis_id: str | None = None,
    settings: Settings | None = None,
    llm_model: str | None = None,
    llm_rows: list[dict[str, Any]] | None = None,
    analysis_type: AnalysisType | None = None,
    tenant: str = DEFAULT_TENANT,
    api_key_id: str | None = None,
) -> tuple[Submitted, Signature | None]:
    """Validate and write the ``analyses`` row like :func:`start_analysis`, but return the
    chain signature instead of sending it (a watchlist run sends many as one group).

    Returns ``(submitted, chain)``; ``chain`` is ``None`` when ``analysis_id`` named an existing
    analysis (its pass 0 was claimed already: a repeated producer must not fork it).
    Raises the errors of :func:`start_analysis`.
    """
    settings = settings or get_settings()
    try:
        ticker = normalize_ticker(symbol)
    except ValueError as exc:
        raise InvalidRequestError(str(exc)) from exc
    provider = get_provider(settings=settings)
    try:
        resolved = resolve_as_of(provider=provider, symbol=ticker, as_of=as_of)
    except InvalidRequestError:
        if (
            as_of is None
            or as_of > datetime.now(UTC).date()
            or not plan_for(analysis_type).answers_without_history(
                settings=settings, symbol=ticker, as_of=as_of
            )
        ):
            raise
        # a plan may answer a request without price history (it rejects with a cited reason),
        # so the user learns why instead of getting a bare "unknown symbol"
        resolved = as_of
    prepare_database(settings=settings)

    # lazy: Celery (the chain) only when enqueuing, not for `show`/`db` commands (cold start)
    from pipeline.chain import build_chain

    analysis_id = analysis_id or str(uuid.uuid4())
    query = user_query or f"Analyze {ticker}"
    state = initial_state(
        analysis_id=analysis_id,
        symbol=ticker,
        user_query=query,
        as_of=resolved,
        max_iterations=max_iterations or settings.analysis.max_iterations,
        llm_model=llm_model or None,
        analysis_type=analysis_type,
    )
    engine = get_engine(settings.service.effective_database_url)
    claimed = repo.create_and_claim(  # row, llm rows and the pass-0 claim: one transaction
        engine=engine,
        analysis_id=analysis_id,
        symbol=ticker,
        as_of=resolved,
        user_query=query,
        max_iterations=state.max_iterations,
        state=state.to_message(),
        llm_calls=llm_rows or (),
        lease_seconds=settings.durability.lease_seconds,
        tenant=tenant,
        api_key_id=api_key_id,
    )
    submitted = Submitted(analysis_id=analysis_id, symbol=ticker, as_of=resolved)
    if not claimed:
        return submitted, None
    return submitted, build_chain(state)


def initial_state(
    *,
    analysis_id: str,
    symbol: str,
    user_query: str,
    as_of: date,
    max_iterations: int,
    llm_model: str | None,
    analysis_type: AnalysisType | None = None,
) -> FinancialAgentState:
    """The state an analysis starts from (the first stage's message), built from what its
    ``analyses`` row keeps (``id``, ``symbol``, ``user_query``, ``as_of``, ``max_iterations``),
    the LiteLLM model chosen for it and its ``analysis_type`` (which selects the plan, ``core.plans``):
    the producer and ``pipeline.replay`` both build it here, so a replay starts from exactly
    the state the analysis started from."""
    return FinancialAgentState(
        analysis_id=analysis_id,
        stock_symbol=symbol,
        user_query=user_query,
        as_of=as_of,
        max_iterations=max_iterations,
        messages=[{"role": "user", "content": user_query}],
        llm_model=llm_model,
        analysis_type=analysis_type,
    )


def wait_for(
    *,
    analysis_id: str,
    timeout: float | None = None,
    on_progress: Callable[[str, int], None] | None = None,
    settings: Settings | None = None,
) -> dict[str, Any]:
    """Poll the ``analyses`` row until it is done or failed and finalised; return the row.

    ``on_progress(status, iteration)`` is called on every change. Polling the database (not a
    result backend) covers re-enqueued passes and works in both modes.

    Raises:
        KeyError: no such analysis.
        WaitTimeoutError: not finished within ``timeout`` seconds (default from settings).
    """
    settings = settings or get_settings()
    engine = get_engine(settings.service.effective_database_url)
    deadline = time.monotonic() + (timeout if timeout is not None else settings.service.wait_timeout)
    last: tuple[str, int] | None = None
    while True:
        current = repo.status_of(engine=engine, analysis_id=analysis_id)
        if current is None:
            raise KeyError(f"no analysis {analysis_id}")
        if current != last:
            last = current
            if on_progress:
                on_progress(*current)
        if current[0] in TERMINAL_STATUSES:
            # Terminal *and* finalised (should_continue and chain_failed write the terminal
            # status with finished_at; the check stays for rows written by older workers).
            row = repo.get_analysis(engine=engine, analysis_id=analysis_id)
            if row is not None and row["finished_at"] is not None:
                return row
        if time.monotonic() > deadline:
            raise WaitTimeoutError(f"analysis {analysis_id} still {current[0]} after the wait timeout")
        time.sleep(settings.service.wait_poll_interval)


def get_analysis(*, analysis_id: str, settings: Settings | None = None) -> dict[str, Any] | None:
    """The ``analyses`` row of ``analysis_id`` (``None`` when unknown)."""
    settings = settings or get_settings()
    return repo.get_analysis(
        engine=get_engine(settings.service.effective_database_url), analysis_id=analysis_id
    )
