"""Backtests: one analysis per (symbol, date) of a grid, through the normal pipeline and workers.

A backtest is named; its grid is ``symbols × dates`` where the dates run from ``start`` to
``end`` (inclusive) every ``every`` (``5d`` = five calendar days, ``1w`` = seven). A grid date
that is not a trading day of the symbol's data maps to the previous trading day of that data
(a Saturday to the Friday before); two grid dates that map to the same day make one analysis.
Every analysis is ``as_of`` its trading day, so the tools' point-in-time guard applies (no bar,
headline, fundamental or earnings row after ``as_of``; ``tests/integration/test_backtest.py``
checks the stored tool results).

Fan-out: the points without an item yet are prepared ``ENQUEUE_BATCH`` at a time by
``pipeline.service.prepare_batch`` (the ticker checked once, the rows and claims in one
transaction, the items in one insert); a cancelled point's new attempt goes through
``pipeline.service.prepare_analysis``. The chains are sent as Celery ``group``s of
``ENQUEUE_BATCH`` chains, like a watchlist run; service-mode workers consume them, embedded
mode an in-process worker. No chord, for the
reasons of ``apps.watchlists``: progress and completion are read from the ``analyses`` rows.

Idempotent and resumable: an item is keyed by ``(backtest, symbol, as_of)`` and its analysis
id is ``uuid5(backtest, symbol, as_of, attempt)``, so re-running the same name skips what is
done or still running and enqueues only what is missing. Cancelling (Ctrl-C in the CLI) fails
the analyses no worker has started with ``CANCELLED`` in one guarded update per chunk
(``db.ledger.cancel``); their messages, if still queued, are then dropped by
the step claim (a terminal row is never claimed), and a resume re-enqueues them under the next
attempt. Celery's ``revoke`` is not used: it lives in the workers' memory only (a restarted
worker forgets it) and needs a broadcast, while the row is durable and already checked.
"""

from __future__ import annotations

import bisect
import re
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any, Final

from agents.data.market.base import MarketDataProvider, ProviderError
from agents.data.routing import get_provider
from core.masking import mask_text
from core.plans import backtest_types
from core.settings import Settings
from core.stages import BATCH, TERMINAL_STATUSES
from core.tenancy import DEFAULT_TENANT
from core.tickers import InvalidTickerError, normalize_ticker
from db import backtest_repo, ledger
from db.engine import get_engine
from pipeline import service, taskqueue

NAME_RE: Final = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
EVERY_RE: Final = re.compile(r"^([1-9][0-9]{0,3})([dw])$")
#: The types a backtest accepts (``core.plans``: rows with ``backtest``).
ANALYSIS_TYPES: Final = backtest_types()
#: Chains per ``send_chains`` call: 100 keeps one publish burst short (a batch is sent in one
#: loop) so the progress bar starts early and Ctrl-C is honoured between batches.
ENQUEUE_BATCH: Final = 100
#: A grid larger than this is a typo, not a study (20 symbols × 5 years of trading days).
MAX_GRID: Final = 25_000
NAMESPACE: Final = uuid.UUID("1d4f6a3e-2b7c-4f51-9a0e-5c3b8e7d2f10")


class BacktestError(ValueError):
    """A backtest request that cannot be honoured (bad name, symbol, date range, ``every``, a
    name taken by another grid, an unknown backtest); the message names the offending value."""


@dataclass(frozen=True)
class GridPoint:
    """One (symbol, grid date): the trading day it maps to, or why none (``error``)."""

    symbol: str
    requested: date
    as_of: date | None
    error: str | None = None

    @property
    def moved(self) -> bool:
        """Whether the grid date was not a trading day of the data (mapped to the one before)."""
        return self.as_of is not None and self.as_of != self.requested


@dataclass
class BacktestStart:
    """What :func:`start_backtest` did: the grid size, what it enqueued now, what it found done,
    running or failed from an earlier run, what it refused (with reasons) and which grid dates
    moved to the previous trading day (``(symbol, requested, as_of)``)."""

    name: str
    created: bool
    total: int = 0
    enqueued: int = 0
    done_before: int = 0
    in_flight: int = 0
    failed_before: int = 0
    refused: dict[str, str] = field(default_factory=dict)
    moved: list[tuple[str, date, date]] = field(default_factory=list)
    analysis_ids: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Progress:
    """Counts of a backtest's grid points by outcome (``failed`` excludes ``cancelled``);
    ``finished`` = done + failed + cancelled + refused."""

    total: int
    done: int
    failed: int
    cancelled: int
    refused: int
    running: int
    queued: int

    @property
    def finished(self) -> int:
        """Grid points that will not change any more."""
        return self.done + self.failed + self.cancelled + self.refused


def parse_every(text: str) -> timedelta:
    """``"5d"`` → 5 calendar days, ``"1w"`` → 7 days. Raises ``BacktestError``."""
    match = EVERY_RE.fullmatch(text.strip().lower())
    if not match:
        raise BacktestError(f"--every {text!r}: use Nd (calendar days) or Nw (weeks), e.g. 5d or 1w")
    n = int(match.group(1))
    return timedelta(days=n * (7 if match.group(2) == "w" else 1))


def grid_dates(*, start: date, end: date, every: timedelta) -> list[date]:
    """``start, start + every, …`` up to ``end`` inclusive. Raises ``BacktestError`` when
    ``start`` is after ``end``."""
    if start > end:
        raise BacktestError(f"--from {start.isoformat()} is after --to {end.isoformat()}")
    out: list[date] = []
    day = start
    while day <= end:
        out.append(day)
        day += every
    return out


def map_to_trading_days(
    *, provider: MarketDataProvider, symbol: str, dates: Sequence[date]
) -> list[GridPoint]:
    """Map each grid date to the last trading day of ``symbol``'s data on or before it (the
    date itself when it is one). A date before the first bar, more than four days after the
    last one, or of a symbol the provider does not know gets an ``error``. Dates mapping to a
    day already taken are dropped (one analysis per trading day). Raises ``ProviderError`` only
    for transient errors."""
    if not dates:
        return []
    try:
        # the whole history: a window ending after the data's last bar is refused by providers
        frame = provider.bars(symbol=symbol, start=None, end=provider.latest_date(symbol=symbol))
    except ProviderError as exc:
        if exc.transient:
            raise
        return [GridPoint(symbol=symbol, requested=d, as_of=None, error=f"{exc.code}: {exc}") for d in dates]
    days = [ts.date() for ts in frame.index]
    points: list[GridPoint] = []
    taken: set[date] = set()
    for requested in dates:
        position = bisect.bisect_right(days, requested)
        if position == 0:
            points.append(
                GridPoint(symbol, requested, None, f"no trading day of the data on or before {requested}")
            )
            continue
        if requested > days[-1] + timedelta(days=4):  # a long weekend is not "after the data"
            points.append(GridPoint(symbol, requested, None, f"after the data's last trading day {days[-1]}"))
            continue
        as_of = days[position - 1]
        if as_of in taken:
            continue
        taken.add(as_of)
        points.append(GridPoint(symbol=symbol, requested=requested, as_of=as_of))
    return points


def analysis_id_for(*, name: str, symbol: str, as_of: date, attempt: int) -> str:
    """Deterministic analysis id of a grid point's ``attempt`` (UUID5)."""
    return str(uuid.uuid5(NAMESPACE, f"{name}:{symbol}:{as_of.isoformat()}:{attempt}"))


def _check(
    *, name: str, symbols: Sequence[str], start: date, end: date, every: str, analysis_type: str
) -> tuple[list[str], timedelta]:
    if not NAME_RE.fullmatch(name):
        raise BacktestError(f"backtest name {name!r} must be 1-64 of letters, digits, '_', '.', '-'")
    if analysis_type not in ANALYSIS_TYPES:
        raise BacktestError(f"--type {analysis_type!r}: one of {', '.join(ANALYSIS_TYPES)}")
    if not symbols:
        raise BacktestError("a backtest needs at least one symbol")
    tickers: list[str] = []
    for raw in symbols:
        try:
            ticker = normalize_ticker(raw)
        except InvalidTickerError as exc:
            raise BacktestError(str(exc)) from exc
        if ticker not in tickers:
            tickers.append(ticker)
    step = parse_every(every)
    size = len(tickers) * len(grid_dates(start=start, end=end, every=step))
    if size > MAX_GRID:
        raise BacktestError(f"the grid has {size} points; at most {MAX_GRID} per backtest")
    return tickers, step


def start_backtest(
    *,
    name: str,
    symbols: Sequence[str],
    start: date,
    end: date,
    every: str = "5d",
    analysis_type: str = "composite",
    settings: Settings,
    on_batch: Callable[[BacktestStart], None] | None = None,
    tenant: str = DEFAULT_TENANT,
) -> BacktestStart:
    """Create (or resume) backtest ``name`` and enqueue what is missing.

    Its analyses belong to ``tenant`` (the CLI's: the default tenant; the web console's: the
    signed-in key's), whose scorecard and console then show the backtest.

    For every grid point (module docstring): no item yet → validate and write the analysis
    (``service.prepare_analysis`` with the deterministic id) and its item, then send its chain
    in the next group; an item whose analysis is done, failed (not cancelled) or still running
    → nothing; a cancelled one → a new attempt. Chains go out in groups of ``ENQUEUE_BATCH``;
    ``on_batch`` is called after each group with the running totals.

    Raises:
        BacktestError: invalid request, or ``name`` exists with another grid.
        service.SchemaMissingError: service database not migrated.
        ProviderError: a transient data-source error (nothing half-done is lost: resume).
    """
    tickers, step = _check(
        name=name, symbols=symbols, start=start, end=end, every=every, analysis_type=analysis_type
    )
    service.prepare_database(settings=settings)
    engine = get_engine(settings.service.effective_database_url)
    row, created = backtest_repo.create_backtest(
        engine=engine,
        name=name,
        symbols=tickers,
        start_date=start,
        end_date=end,
        every=every,
        analysis_type=analysis_type,
    )
    wanted = (tickers, start, end, every, analysis_type)
    stored = (row["symbols"], row["start_date"], row["end_date"], row["every"], row["analysis_type"])
    if not created and tuple(stored) != wanted:
        raise BacktestError(
            f"backtest {name!r} exists with another grid ({', '.join(row['symbols'])} "
            f"{row['start_date']}..{row['end_date']} every {row['every']}, {row['analysis_type']}); "
            "use another --name"
        )
    existing = {(i["symbol"], i["as_of"]): i for i in backtest_repo.items(engine=engine, backtest_name=name)}
    provider = get_provider(settings=settings)
    dates = grid_dates(start=start, end=end, every=step)
    result = BacktestStart(name=name, created=created)
    run = _Enqueue(
        name=name,
        analysis_type=analysis_type,
        settings=settings,
        tenant=tenant,
        engine=engine,
        result=result,
        on_batch=on_batch,
    )
    for symbol in tickers:
        fresh: list[GridPoint] = []
        for point in map_to_trading_days(provider=provider, symbol=symbol, dates=dates):
            if point.as_of is None:
                result.refused[f"{symbol} {point.requested.isoformat()}"] = point.error or "refused"
                continue
            result.total += 1
            if point.moved:
                result.moved.append((symbol, point.requested, point.as_of))
            item = existing.get((symbol, point.as_of))
            if item is None:
                fresh.append(point)
            else:
                run.resume(symbol, point, item)
        run.fresh(symbol, fresh)
    run.flush()
    return result


@dataclass
class _Enqueue:
    """One call of :func:`start_backtest` enqueueing its grid points: the chains waiting to be
    sent (``batch``, sent ``ENQUEUE_BATCH`` at a time) and the running totals (``result``)."""

    name: str
    analysis_type: str
    settings: Settings
    tenant: str
    engine: Any
    result: BacktestStart
    on_batch: Callable[[BacktestStart], None] | None
    batch: list[Any] = field(default_factory=list)

    def _query(self, symbol: str, as_of: date) -> str:
        return f"Backtest {self.name}: {self.analysis_type} analysis of {symbol} as of {as_of}"

    def flush(self) -> None:
        """Send the waiting chains as one group and report the totals (``on_batch``)."""
        if self.batch:
            taskqueue.get().send_chains(self.batch)  # one producer, its broker confirms awaited once
            self.result.enqueued += len(self.batch)
            self.batch.clear()
            if self.on_batch:
                self.on_batch(self.result)

    def fresh(self, symbol: str, fresh: list[GridPoint]) -> None:
        """The points of ``symbol`` without an item yet, ``ENQUEUE_BATCH`` at a time: checked,
        written and claimed in bulk (``service.prepare_batch``), their items in one insert."""
        result = self.result
        for start_at in range(0, len(fresh), ENQUEUE_BATCH):
            chunk = fresh[start_at : start_at + ENQUEUE_BATCH]
            by_id = {}
            wanted = []
            for point in chunk:
                assert point.as_of is not None
                analysis_id = analysis_id_for(name=self.name, symbol=symbol, as_of=point.as_of, attempt=0)
                by_id[analysis_id] = point
                query = self._query(symbol, point.as_of)
                wanted.append(service.BatchItem(analysis_id=analysis_id, as_of=point.as_of, user_query=query))
            prepared = service.prepare_batch(
                symbol=symbol, items=wanted, settings=self.settings, lane=BATCH, tenant=self.tenant
            )
            items = []
            for p in prepared:
                point = by_id[p.item.analysis_id]
                base = {"symbol": symbol, "as_of": point.as_of, "requested_date": point.requested}
                if p.error is not None:
                    result.total -= 1
                    reason = mask_text(p.error)
                    result.refused[f"{symbol} {p.item.as_of.isoformat()}"] = reason
                    items.append({**base, "status": "refused", "error": reason[:1000]})
                    continue
                items.append({**base, "status": "enqueued", "analysis_id": p.item.analysis_id})
                result.analysis_ids.append(p.item.analysis_id)
                if p.signature is not None:
                    self.batch.append(p.signature)
            backtest_repo.add_items(engine=self.engine, backtest_name=self.name, items=items)
            self.flush()

    def resume(self, symbol: str, point: GridPoint, item: dict[str, Any]) -> None:
        """A point of ``symbol`` that has an item from an earlier start: refused, done, running
        or failed (not cancelled) → counted, nothing sent; cancelled → its next attempt written
        and its chain queued (unless another resumer took the point first); no analysis row (a
        crash after the item) → the same id again."""
        result = self.result
        assert point.as_of is not None
        if item["status"] == "refused":
            result.refused[f"{symbol} {point.as_of.isoformat()}"] = item["error"] or "refused"
            return
        status, error = item["analysis_status"], item["analysis_error"] or ""
        if status == "done":
            result.done_before += 1
            result.analysis_ids.append(item["analysis_id"])
            return
        if status is not None and status not in TERMINAL_STATUSES:
            result.in_flight += 1
            result.analysis_ids.append(item["analysis_id"])
            return
        if status == "failed" and not error.startswith(backtest_repo.CANCELLED):
            result.failed_before += 1
            result.analysis_ids.append(item["analysis_id"])
            return
        # cancelled → next attempt; no analysis row (a crash after the item) → same id
        attempt = item["attempt"] + (1 if status == "failed" else 0)
        analysis_id = analysis_id_for(name=self.name, symbol=symbol, as_of=point.as_of, attempt=attempt)
        try:
            request = service.AnalysisRequest(
                symbol=symbol,
                as_of=point.as_of,
                user_query=self._query(symbol, point.as_of),
                analysis_id=analysis_id,
                lane=BATCH,  # a grid of hundreds must not delay a person's analysis
                tenant=self.tenant,
            )
            _, signature = service.prepare_analysis(request=request, settings=self.settings)
        except service.InvalidRequestError as exc:
            result.total -= 1
            result.refused[f"{symbol} {point.as_of.isoformat()}"] = mask_text(str(exc))
            return
        if attempt != item["attempt"] and not backtest_repo.retry_item(
            engine=self.engine,
            backtest_name=self.name,
            symbol=symbol,
            as_of=point.as_of,
            attempt=attempt,
            analysis_id=analysis_id,
        ):
            return  # another resumer took this point first
        result.analysis_ids.append(analysis_id)
        if signature is not None:
            self.batch.append(signature)
            if len(self.batch) >= ENQUEUE_BATCH:
                self.flush()


def get_backtest(*, name: str, settings: Settings) -> dict[str, Any]:
    """The backtest row named ``name``. Raises ``BacktestError`` when unknown."""
    service.prepare_database(settings=settings)
    row = backtest_repo.get_backtest(engine=get_engine(settings.service.effective_database_url), name=name)
    if row is None:
        raise BacktestError(f"no backtest named {name!r}")
    return row


def progress(*, name: str, settings: Settings) -> Progress:
    """Counts of backtest ``name``'s grid points by outcome (one grouped query)."""
    engine = get_engine(settings.service.effective_database_url)
    counts = backtest_repo.progress_counts(engine=engine, backtest_name=name)
    settled = (*TERMINAL_STATUSES, "cancelled", "refused", "queued", "missing")
    return Progress(
        total=sum(counts.values()),
        done=counts.get("done", 0),
        failed=counts.get("failed", 0),
        cancelled=counts.get("cancelled", 0),
        refused=counts.get("refused", 0),
        running=sum(n for state, n in counts.items() if state not in settled),
        queued=counts.get("queued", 0) + counts.get("missing", 0),
    )


def cancel(*, name: str, settings: Settings) -> list[str]:
    """Cancel what backtest ``name`` has not started (module docstring): returns the analysis
    ids now failed ``CANCELLED``. Analyses a worker has claimed run to their end."""
    engine = get_engine(settings.service.effective_database_url)
    open_ids = [
        i["analysis_id"]
        for i in backtest_repo.items(engine=engine, backtest_name=name)
        if i["analysis_id"] and i["analysis_status"] not in TERMINAL_STATUSES
    ]
    return ledger.cancel(
        engine=engine, analysis_ids=open_ids, reason=f"backtest {name} cancelled before it started"
    )
