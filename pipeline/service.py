"""Producer-side services: validate, create the analysis row, enqueue the chain, wait.

Keyword-only functions used by the CLI (and later the HTTP gateway and the Python API).
"""

from __future__ import annotations

import bisect
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any

from agents.data.market.base import MarketDataProvider, ProviderError
from agents.data.routing import get_provider
from core.dates import DateRuleError, check_date
from core.plans import AnalysisType
from core.settings import Settings
from core.stages import INTERACTIVE, TERMINAL_STATUSES, Lane
from core.state import FinancialAgentState
from core.tenancy import DEFAULT_TENANT
from core.tickers import name_once, normalize_ticker
from db import ledger, repo
from db.engine import get_engine
from pipeline import taskqueue
from pipeline.database import (
    SchemaMissingError as SchemaMissingError,  # re-exported: callers catch service.SchemaMissingError
)
from pipeline.database import prepare_database
from pipeline.plan_hooks import plan_for, validate_plan_options

if TYPE_CHECKING:
    from pipeline.taskqueue import Handoff


class InvalidRequestError(ValueError):
    """A request that must be refused before anything is enqueued (bad ticker, bad date,
    unknown symbol). The message names the offending value."""


class WaitTimeoutError(TimeoutError):
    """The analysis did not finish within the wait timeout (it may still finish later)."""


@dataclass(frozen=True)
class AnalysisRequest:
    """One analysis asked for (the CLI, the HTTP gateway, the Python API, backtests and watchlists
    build one and hand it to :func:`start_analysis` / :func:`prepare_analysis`).

    Attributes:
        symbol: ticker as typed by the user (normalised per docs/design.md, "Tickers").
        as_of: analysis date; ``None``: the provider's latest date for the symbol.
        user_query: free text kept in the state (``None``: "Analyze SYMBOL").
        max_iterations: most passes (``None``: from settings).
        analysis_id: id to use (``None``: a new UUID4); a caller with an idempotency key passes
            its claimed id. If a row with this id exists already, nothing is enqueued again.
        llm_model: a LiteLLM model string for every agent of this analysis (``--llm``); it
            travels in the state, so workers in other processes use it.
        llm_rows: ``llm_calls`` rows made before the analysis existed (``parse_query``), stored
            under its id.
        analysis_type: the parsed or requested type (``core.plans``); ``None``: the default.
        plan_options: options for the type's plan, validated by the plan's own model
            (``pipeline.plan_hooks.validate_plan_options``), e.g. ``{"cost_basis": 600}`` for a
            covered call; ``None``: none.
        tenant / api_key_id: the owner of the analysis (``core.tenancy``) and the HTTP API key
            that asked for it (``None`` for the CLI, the Python API and beat).
        lane: ``interactive`` (a person waits) or ``batch`` (backtests, watchlist runs).
        query_note: why ``parse_query`` rejected the model's ticker, kept in the state and
            printed beside the question; ``None``: nothing rejected.
    """

    symbol: str
    as_of: date | None = None
    user_query: str | None = None
    max_iterations: int | None = None
    analysis_id: str | None = None
    llm_model: str | None = None
    llm_rows: Sequence[dict[str, Any]] = ()
    analysis_type: AnalysisType | None = None
    plan_options: dict[str, Any] | None = None
    tenant: str = DEFAULT_TENANT
    api_key_id: str | None = None
    lane: Lane = INTERACTIVE
    query_note: str | None = None


@dataclass(frozen=True)
class Submitted:
    """An enqueued analysis: its id, the normalised symbol and the resolved ``as_of``."""

    analysis_id: str
    symbol: str
    as_of: date


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


def start_analysis(*, request: AnalysisRequest, settings: Settings) -> Submitted:
    """Validate ``request``, write the ``analyses`` row and enqueue the chain.

    Returns:
        ``Submitted`` with the analysis id.
    Raises:
        InvalidRequestError: bad ticker, date or plan options (nothing is enqueued).
        SchemaMissingError: service database not migrated.
    """
    submitted, signature = prepare_analysis(request=request, settings=settings)
    if signature is not None:
        signature.apply_async()
    return submitted


def check_request(
    *,
    provider: MarketDataProvider,
    ticker: str,
    as_of: date | None,
    settings: Settings,
    analysis_type: AnalysisType | None = None,
) -> date:
    """The ``as_of`` an analysis of ``ticker`` (normalised) runs at: :func:`resolve_as_of`, or
    ``as_of`` itself when the data cannot serve it but the plan answers without price history
    (it rejects with a cited reason, so the user learns why instead of a bare "unknown symbol").

    Raises ``InvalidRequestError`` (the reason) and transient ``ProviderError``."""
    try:
        return resolve_as_of(provider=provider, symbol=ticker, as_of=as_of)
    except InvalidRequestError:
        if (
            as_of is None
            or as_of > datetime.now(UTC).date()
            or not plan_for(analysis_type).answers_without_history(
                settings=settings, symbol=ticker, as_of=as_of
            )
        ):
            raise
        return as_of


def prepare_analysis(*, request: AnalysisRequest, settings: Settings) -> tuple[Submitted, Handoff | None]:
    """Validate and write the ``analyses`` row like :func:`start_analysis`, but return the
    chain signature instead of sending it (a watchlist run sends many at once,
    the task queue's ``send_chains``). The request's ``lane`` is kept in the state (and so in the row),
    and every step of the analysis takes that class's queues.

    Returns ``(submitted, chain)``; ``chain`` is ``None`` when ``analysis_id`` named an existing
    analysis (its pass 0 was claimed already: a repeated producer must not fork it).
    Raises the errors of :func:`start_analysis`.
    """
    symbol, as_of, analysis_type = request.symbol, request.as_of, request.analysis_type
    try:
        plan_options = validate_plan_options(analysis_type, request.plan_options)
    except ValueError as exc:
        raise InvalidRequestError(str(exc)) from exc
    try:
        ticker = normalize_ticker(symbol)
    except ValueError as exc:
        raise InvalidRequestError(str(exc)) from exc
    resolved = check_request(
        provider=get_provider(settings=settings),
        ticker=ticker,
        as_of=as_of,
        settings=settings,
        analysis_type=analysis_type,
    )
    prepare_database(settings=settings)

    # the task queue builds its app when first asked, so only enqueuing pays for it (cold start)
    build_chain = taskqueue.get().chain

    analysis_id = request.analysis_id or str(uuid.uuid4())
    query = request.user_query or f"Analyze {ticker}"
    state = initial_state(
        analysis_id=analysis_id,
        symbol=ticker,
        user_query=query,
        as_of=resolved,
        max_iterations=request.max_iterations or settings.analysis.max_iterations,
        llm_model=request.llm_model or None,
        analysis_type=analysis_type,
        lane=request.lane,
        plan_options=plan_options,
        query_note=request.query_note,
    )
    engine = get_engine(settings.service.effective_database_url)
    claimed = ledger.create_and_claim(  # row, llm rows and the pass-0 claim: one transaction
        engine=engine,
        analysis_id=analysis_id,
        symbol=ticker,
        as_of=resolved,
        user_query=query,
        max_iterations=state.max_iterations,
        state=state.to_message(),
        llm_calls=list(request.llm_rows),
        lease_seconds=settings.durability.lease_seconds,
        tenant=request.tenant,
        api_key_id=request.api_key_id,
    )
    submitted = Submitted(analysis_id=analysis_id, symbol=ticker, as_of=resolved)
    if not claimed:
        return submitted, None
    return submitted, build_chain(state)


@dataclass(frozen=True)
class BatchItem:
    """One analysis of :func:`prepare_batch`: its id, date and query."""

    analysis_id: str
    as_of: date
    user_query: str


@dataclass(frozen=True)
class Prepared:
    """What :func:`prepare_batch` made of a :class:`BatchItem`: ``error`` (why it was refused,
    nothing written) or the chain to send (``None`` when the id was claimed before)."""

    item: BatchItem
    error: str | None = None
    signature: Handoff | None = None


def _check_points(*, provider: MarketDataProvider, symbol: str, items: Sequence[BatchItem]) -> dict[str, str]:
    """:func:`resolve_as_of`'s checks for many dates of one symbol with two provider reads
    (the latest date, and the bars from 14 days before the first date to the last): an item
    is refused when its date breaks the date rule or has no bar in the 14 days up to it.
    Returns ``{analysis_id: reason}`` of the refused. Raises ``ProviderError`` when transient;
    another provider error refuses them all."""
    today = datetime.now(UTC).date()
    refused: dict[str, str] = {}
    dated = []
    for item in items:
        try:
            check_date(item.as_of, field="as_of", today=today, where="UTC")
        except DateRuleError as exc:
            refused[item.analysis_id] = str(exc)
            continue
        dated.append(item)
    if not dated:
        return refused
    try:
        provider.latest_date(symbol=symbol)
        frame = provider.bars(
            symbol=symbol,
            start=min(i.as_of for i in dated) - timedelta(days=14),
            end=max(i.as_of for i in dated),
        )
    except ProviderError as exc:
        if exc.transient:
            raise
        return {**refused, **{i.analysis_id: name_once(symbol, str(exc)) for i in dated}}
    days = sorted(ts.date() for ts in frame.index)
    for item in dated:
        at = bisect.bisect_right(days, item.as_of)
        if at == 0 or days[at - 1] < item.as_of - timedelta(days=14):
            refused[item.analysis_id] = f"{symbol}: no bars in the 14 days up to {item.as_of.isoformat()}"
    return refused


def prepare_batch(
    *,
    symbol: str,
    items: Sequence[BatchItem],
    settings: Settings,
    analysis_type: AnalysisType | None = None,
    lane: Lane = INTERACTIVE,
    tenant: str = DEFAULT_TENANT,
) -> list[Prepared]:
    """:func:`prepare_analysis` of many analyses of ONE symbol, for bulk enqueues (a backtest),
    owned by ``tenant``:
    the ticker is checked once, the dates with two provider reads (:func:`_check_points`), and
    the rows and pass-0 claims written in one transaction (``db.ledger.create_and_claim_many``).
    Returns one :class:`Prepared` per item, in order. Unlike :func:`prepare_analysis`, a date
    without bars is refused even when the plan could answer without history (a backtest's
    dates are trading days of the data already).

    Raises ``InvalidRequestError`` for an invalid ticker (nothing written), ``ProviderError``
    for a transient data-source error, ``SchemaMissingError`` as :func:`prepare_database`.
    """
    try:
        ticker = normalize_ticker(symbol)
    except ValueError as exc:
        raise InvalidRequestError(str(exc)) from exc
    refused = _check_points(provider=get_provider(settings=settings), symbol=ticker, items=items)
    prepare_database(settings=settings)
    build_chain = taskqueue.get().chain  # as in prepare_analysis

    states = {
        i.analysis_id: initial_state(
            analysis_id=i.analysis_id,
            symbol=ticker,
            user_query=i.user_query,
            as_of=i.as_of,
            max_iterations=settings.analysis.max_iterations,
            llm_model=None,
            analysis_type=analysis_type,
            lane=lane,
        )
        for i in items
        if i.analysis_id not in refused
    }
    rows = [
        ledger.NewAnalysis(
            analysis_id=item.analysis_id,
            symbol=ticker,
            as_of=item.as_of,
            user_query=item.user_query,
            max_iterations=settings.analysis.max_iterations,
            state=states[item.analysis_id].to_message(),
        )
        for item in items
        if item.analysis_id in states
    ]
    engine = get_engine(settings.service.effective_database_url)
    claimed = ledger.create_and_claim_many(
        engine=engine, analyses=rows, lease_seconds=settings.durability.lease_seconds, tenant=tenant
    )
    out = []
    for item in items:
        if item.analysis_id in refused:
            out.append(Prepared(item=item, error=refused[item.analysis_id]))
        else:
            chain = build_chain(states[item.analysis_id]) if item.analysis_id in claimed else None
            out.append(Prepared(item=item, signature=chain))
    return out


@dataclass(frozen=True)
class Accepted:
    """One analysis of :func:`prepare_many`, checked already (:func:`check_request`): its id,
    normalised ticker, resolved date and query."""

    analysis_id: str
    symbol: str
    as_of: date
    user_query: str


def prepare_many(
    *,
    items: Sequence[Accepted],
    settings: Settings,
    max_iterations: int | None = None,
    tenant: str = DEFAULT_TENANT,
    api_key_id: str | None = None,
    lane: Lane = INTERACTIVE,
) -> dict[str, Handoff | None]:
    """Write the rows and pass-0 claims of many checked analyses of any symbols (a watchlist
    run's tickers) in ONE transaction of two multi-row inserts (``db.ledger.create_and_claim_many``),
    as :func:`prepare_analysis` writes one; owner ``tenant`` / ``api_key_id`` and
    ``max_iterations`` (default from settings) are the same for all.

    Returns ``{analysis_id: chain}`` for every item, in order; the chain is ``None`` when the
    id was claimed before (a repeated producer must not fork it).
    Raises ``SchemaMissingError`` as :func:`prepare_database`; database errors (nothing written).
    """
    if not items:
        return {}
    prepare_database(settings=settings)
    build_chain = taskqueue.get().chain  # as in prepare_analysis

    passes = max_iterations or settings.analysis.max_iterations
    states = {
        i.analysis_id: initial_state(
            analysis_id=i.analysis_id,
            symbol=i.symbol,
            user_query=i.user_query,
            as_of=i.as_of,
            max_iterations=passes,
            llm_model=None,
            lane=lane,
        )
        for i in items
    }
    claimed = ledger.create_and_claim_many(
        engine=get_engine(settings.service.effective_database_url),
        analyses=[
            ledger.NewAnalysis(
                analysis_id=i.analysis_id,
                symbol=i.symbol,
                as_of=i.as_of,
                user_query=i.user_query,
                max_iterations=passes,
                state=states[i.analysis_id].to_message(),
            )
            for i in items
        ],
        lease_seconds=settings.durability.lease_seconds,
        tenant=tenant,
        api_key_id=api_key_id,
    )
    return {
        i.analysis_id: build_chain(states[i.analysis_id]) if i.analysis_id in claimed else None for i in items
    }


def initial_state(
    *,
    analysis_id: str,
    symbol: str,
    user_query: str,
    as_of: date,
    max_iterations: int,
    llm_model: str | None,
    analysis_type: AnalysisType | None = None,
    lane: Lane = INTERACTIVE,
    plan_options: dict[str, Any] | None = None,
    query_note: str | None = None,
) -> FinancialAgentState:
    """The state an analysis starts from (the first stage's message), built from what its
    ``analyses`` row keeps (``id``, ``symbol``, ``user_query``, ``as_of``, ``max_iterations``),
    the LiteLLM model chosen for it and its ``analysis_type`` (which selects the plan, ``core.plans``):
    the producer and ``apps.replay`` both build it here, so a replay starts from exactly
    the state the analysis started from; ``lane``: the class of its work (``core.stages.Lane``);
    ``plan_options``: the request's options for its plan, validated (kept in the stored state,
    from which a replay reads them); ``query_note``: why the model's ticker was rejected by ``parse_query``
    (None: it was not)."""
    return FinancialAgentState(
        analysis_id=analysis_id,
        stock_symbol=symbol,
        user_query=user_query,
        as_of=as_of,
        max_iterations=max_iterations,
        messages=[{"role": "user", "content": user_query}],
        llm_model=llm_model,
        analysis_type=analysis_type,
        lane=lane,
        plan_options=plan_options,
        query_note=(query_note or "")[:600] or None,
    )


def wait_for(
    *,
    analysis_id: str,
    timeout: float | None = None,
    on_progress: Callable[[str, int], None] | None = None,
    settings: Settings,
) -> dict[str, Any]:
    """Poll the ``analyses`` row until it is done or failed and finalised; return the row.

    ``on_progress(status, iteration)`` is called on every change. Polling the database (not a
    result backend) covers re-enqueued passes and works in both modes.

    Raises:
        KeyError: no such analysis.
        WaitTimeoutError: not finished within ``timeout`` seconds (default from settings).
    """
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


def get_analysis(*, analysis_id: str, settings: Settings) -> dict[str, Any] | None:
    """The ``analyses`` row of ``analysis_id`` (``None`` when unknown)."""
    return repo.get_analysis(
        engine=get_engine(settings.service.effective_database_url), analysis_id=analysis_id
    )
