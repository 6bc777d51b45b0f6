"""Watchlists and their nightly runs: the logic behind the CLI, the HTTP endpoints and
the beat tasks (``tasks/watchlists.py`` only adapts these functions to Celery).

Schedule: a 5-field cron (``minute hour day-of-month month day-of-week``, Celery's ``crontab``
syntax, day-of-week 0 = Sunday) in the watchlist's IANA time zone; the default
``30 21 * * 1-5`` in ``America/New_York`` is weekdays 21:30, after the US close. Beat sends a
tick every ``watchlists.tick_seconds``; a watchlist is due when its latest fire time is not in the
future, is after the watchlist was created, and no run exists for that fire time's local date
(a beat that was down catches up with the latest missed date only).

Idempotency (exactly-once effects from the database: docs/design.md, "Durability and idempotency"):
a run's id is
``"<watchlist_id>:<run_date>"`` and each ticker's analysis id is ``uuid5(run_id, symbol)``. So
a second tick, a redelivered start task, a restart or a manual re-run of the same date finds
the run, and starting a ticker twice finds its analysis row and its claimed pass 0
(``analysis_iterations``) and enqueues nothing. A start interrupted half-way is completed by the
next call (missing tickers only).

Completion: a run fans out as batches of analysis chains (one per ``START_BATCH`` tickers,
the task queue's ``send_chains``), without a chord: a chord's callback needs every header task to
return, but our chains end in ``should_continue``, which may re-enqueue a *new* chain (the
re-enqueued pass is not part of the chord), and a failed chain would fail the chord. Instead
:func:`finalize_run` reads the ``analyses`` rows: when every enqueued analysis is
``done``/``failed`` (or ``watchlists.run_timeout`` passed, then the unfinished ones are
reported as failures), it writes the digest, once (guarded update). It
is called by a bounded countdown task after the fan-out and by every beat tick for runs still
open (the backstop when a countdown message is lost), and by ``finagent watchlist run``.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import Any, Final, Literal

from agents.data.market.base import ProviderError
from agents.data.market.clock import MarketToday, market_today
from agents.data.routing import get_provider
from apps.metering import (
    QuotaExceededError,
    RunQuota,
    exclusive,
    scheduled_run_quota,
    tenant_lock_name,
)
from apps.watchlist_digest import QUOTA_MARK as QUOTA_MARK  # the digest's names, importable from here
from apps.watchlist_digest import build_digest, digest_html, digest_markdown
from apps.watchlist_digest import chart_url as chart_url
from apps.watchlist_digest import with_signed_charts as with_signed_charts
from apps.watchlist_rules import MAX_LOOKBACK_DAYS as MAX_LOOKBACK_DAYS  # the rules, importable from here
from apps.watchlist_rules import NAME_PATTERN as NAME_PATTERN
from apps.watchlist_rules import (
    NAME_RE,
    WatchlistError,
    WatchlistLimitError,
    WatchlistNotFoundError,
    check_schedule,
    check_timezone,
    last_fire_time,
    parse_timezone,
)
from apps.watchlist_rules import SCHEDULE_MAX_LENGTH as SCHEDULE_MAX_LENGTH
from apps.watchlist_rules import SCHEDULE_PATTERN as SCHEDULE_PATTERN
from apps.watchlist_rules import TIME_ZONES as TIME_ZONES
from apps.watchlist_rules import parse_schedule as parse_schedule
from core.dates import DateRuleError, check_date
from core.masking import mask, mask_text
from core.settings import Settings
from core.stages import BATCH
from core.tenancy import DEFAULT_TENANT
from core.tickers import InvalidTickerError, clip, normalize_ticker
from db import ops_repo, repo
from db.engine import get_engine
from pipeline import service, taskqueue

# A watchlist is a human-curated list; 200 tickers is a large index, more is a mistake. The
# setting ``watchlists.max_tickers`` may lower it per deployment, never raise it.
MAX_TICKERS: Final = 200
ALLOWED_OPTIONS: Final = frozenset({"max_iterations", "as_of"})
logger = logging.getLogger(__name__)
RUN_NAMESPACE: Final = uuid.UUID("6f1c3c0e-6a55-4c61-9d1b-5b0f1d0a7e11")
#: Tickers a run's start writes and sends together: their analyses and claims in one
#: transaction, their run items in one insert, their chains in one group (docs/benchmarks.md,
#: "Bulk enqueue"); a 5,000-ticker start holds at most this many rows in memory at a time.
START_BATCH: Final = 100
#: The finaliser task (``tasks.watchlists``), sent by name so this module never imports tasks.
FINALIZE_TASK: Final = "finagent.watchlists.finalize"

Trigger = Literal["beat", "manual", "api"]


# --------------------------------------------------------------------------------------------
# CRUD
# --------------------------------------------------------------------------------------------


def _engine(settings: Settings) -> Any:
    return get_engine(settings.service.effective_database_url)


def _check_tickers(tickers: Sequence[str], *, settings: Settings) -> list[str]:
    if not tickers:
        raise WatchlistError("tickers: a watchlist needs at least one ticker")
    cap = min(MAX_TICKERS, settings.watchlists.max_tickers)
    if len(tickers) > cap:
        raise WatchlistError(
            f"tickers: a watchlist holds at most {cap} tickers (FINAGENT_WATCHLISTS_MAX_TICKERS), "
            f"got {len(tickers)}"
        )
    out: list[str] = []
    for raw in tickers:
        try:
            ticker = normalize_ticker(raw)
        except InvalidTickerError as exc:
            raise WatchlistError(str(exc)) from exc
        if ticker not in out:
            out.append(ticker)
    return out


def _check_options(options: dict[str, Any]) -> dict[str, Any]:
    if unknown := set(options) - ALLOWED_OPTIONS:
        allowed = sorted(ALLOWED_OPTIONS)
        raise WatchlistError(f"unknown watchlist options {sorted(unknown)}; allowed: {allowed}")
    iterations = options.get("max_iterations")
    valid = isinstance(iterations, int) and not isinstance(iterations, bool) and 1 <= iterations <= 10
    if iterations is not None and not valid:
        raise WatchlistError(f"options.max_iterations must be 1..10, got {iterations!r}")
    if options.get("as_of", "run_date") not in ("run_date", "latest"):
        raise WatchlistError("options.as_of must be 'run_date' (default) or 'latest' (the data's last date)")
    return dict(options)


def create_watchlist(
    *,
    name: str,
    tickers: Sequence[str],
    schedule: str | None = None,
    timezone: str | None = None,
    options: dict[str, Any] | None = None,
    settings: Settings,
    tenant: str = DEFAULT_TENANT,
) -> dict[str, Any]:
    """Validate and store a watchlist of ``tenant`` (names are unique per tenant); returns its row.

    Args:
        name: 1-64 of ``[A-Za-z0-9_.-]``, starting with a letter or digit.
        tickers: tickers (docs/design.md, "Tickers"; normalised, de-duplicated, order kept).
            Existence is checked at run time: a ticker without data becomes a failure line of the digest.
        schedule / timezone: default ``FINAGENT_WATCHLISTS_SCHEDULE`` / ``…_TIMEZONE``; checked
            by :func:`check_schedule` and :func:`check_timezone` (defaults too).
        options: ``max_iterations`` (1-10) and ``as_of`` (``run_date`` | ``latest``).
    Caps (settings): at most ``watchlists.max_tickers`` tickers (``WatchlistError``, 422), and
    per tenant ``tenant_max_watchlists`` watchlists and ``tenant_max_tickers`` tickers over all
    its watchlists (``WatchlistLimitError``, 409), counted under one lock per tenant.

    Raises:
        WatchlistError: invalid field; ``WatchlistLimitError`` past a tenant cap;
            ``ops_repo.DuplicateNameError`` (a ``ValueError``) for a taken name.
        apps.metering.QuotaExceededError: the tenant's lock stayed taken (concurrent
            creations) for ``ADMISSION_WAIT_SECONDS``.
    """
    if not NAME_RE.fullmatch(name):
        raise WatchlistError(
            f"watchlist name {clip(name, 80)!r} must be 1-64 of letters, digits, '_', '.', '-', "
            "starting with a letter or digit"
        )
    schedule = check_schedule(schedule or settings.watchlists.schedule)
    timezone = check_timezone(timezone or settings.watchlists.timezone)
    checked = _check_tickers(tickers, settings=settings)
    checked_options = _check_options(options or {})
    service.prepare_database(settings=settings)
    engine = _engine(settings)
    # count and insert under one lock per tenant: concurrent creations cannot both take the last place
    with exclusive(name=f"watchlists:{tenant}", settings=settings):
        held = ops_repo.list_watchlists(engine=engine, tenant=tenant)
        if len(held) >= settings.watchlists.tenant_max_watchlists:
            raise WatchlistLimitError(
                f"tenant {tenant!r} has {len(held)} watchlists "
                f"(limit {settings.watchlists.tenant_max_watchlists}, "
                "FINAGENT_WATCHLISTS_TENANT_MAX_WATCHLISTS); delete one first"
            )
        _check_tenant_tickers(held=held, adding=len(checked), tenant=tenant, settings=settings)
        return ops_repo.create_watchlist(
            engine=engine,
            watchlist_id=str(uuid.uuid4()),
            name=name,
            tickers=checked,
            schedule=schedule,
            timezone=timezone,
            options=checked_options,
            tenant=tenant,
        )


def _check_tenant_tickers(
    *, held: Sequence[dict[str, Any]], adding: int, tenant: str, settings: Settings
) -> None:
    """Raise ``WatchlistLimitError`` when ``held`` (the tenant's other watchlists) and ``adding``
    tickers together exceed ``tenant_max_tickers``."""
    other = sum(len(w["tickers"]) for w in held)
    if other + adding > settings.watchlists.tenant_max_tickers:
        raise WatchlistLimitError(
            f"tenant {tenant!r} would watch {other + adding} tickers in all (limit "
            f"{settings.watchlists.tenant_max_tickers},"
            f" FINAGENT_WATCHLISTS_TENANT_MAX_TICKERS; {other} in its other "
            "watchlists); remove tickers or watchlists first"
        )


def get_watchlist(*, name: str, settings: Settings, tenant: str = DEFAULT_TENANT) -> dict[str, Any]:
    """``tenant``'s watchlist named ``name``. Raises ``WatchlistNotFoundError`` (also when
    another tenant has one of that name)."""
    row = ops_repo.get_watchlist(engine=_engine(settings), name=name, tenant=tenant)
    if row is None:
        raise WatchlistNotFoundError(f"no watchlist named {name!r}")
    return row


def list_watchlists(*, settings: Settings, tenant: str = DEFAULT_TENANT) -> list[dict[str, Any]]:
    """Every watchlist of ``tenant``, by name."""
    service.prepare_database(settings=settings)
    return ops_repo.list_watchlists(engine=_engine(settings), tenant=tenant)


def update_watchlist(
    *,
    name: str,
    tickers: Sequence[str] | None = None,
    schedule: str | None = None,
    timezone: str | None = None,
    options: dict[str, Any] | None = None,
    enabled: bool | None = None,
    settings: Settings,
    tenant: str = DEFAULT_TENANT,
) -> dict[str, Any]:
    """Change the given fields (``None`` = keep) of ``tenant``'s watchlist ``name``. Validation
    and the tenant's ticker cap as in :func:`create_watchlist`.

    Raises ``WatchlistNotFoundError``, ``WatchlistLimitError`` or ``WatchlistError``."""
    get_watchlist(name=name, settings=settings, tenant=tenant)
    changes: dict[str, Any] = {}
    if tickers is not None:
        changes["tickers"] = _check_tickers(tickers, settings=settings)
    if schedule is not None:
        changes["schedule"] = check_schedule(schedule)
    if timezone is not None:
        changes["timezone"] = check_timezone(timezone)
    if options is not None:
        changes["options"] = _check_options(options)
    if enabled is not None:
        changes["enabled"] = enabled
    engine = _engine(settings)
    if "tickers" not in changes:
        row = ops_repo.update_watchlist(engine=engine, name=name, changes=changes, tenant=tenant)
    else:
        with exclusive(name=f"watchlists:{tenant}", settings=settings):
            others = [w for w in ops_repo.list_watchlists(engine=engine, tenant=tenant) if w["name"] != name]
            _check_tenant_tickers(
                held=others, adding=len(changes["tickers"]), tenant=tenant, settings=settings
            )
            row = ops_repo.update_watchlist(engine=engine, name=name, changes=changes, tenant=tenant)
    if row is None:
        raise WatchlistNotFoundError(f"no watchlist named {name!r}")
    return row


def delete_watchlist(*, name: str, settings: Settings, tenant: str = DEFAULT_TENANT) -> None:
    """Delete ``tenant``'s watchlist ``name`` and its runs. Raises ``WatchlistNotFoundError``."""
    if not ops_repo.delete_watchlist(engine=_engine(settings), name=name, tenant=tenant):
        raise WatchlistNotFoundError(f"no watchlist named {name!r}")


def list_runs(
    *, name: str, limit: int = 50, settings: Settings, tenant: str = DEFAULT_TENANT
) -> list[dict[str, Any]]:
    """The runs of ``tenant``'s watchlist ``name``, newest first (no digest bodies). Raises
    ``WatchlistNotFoundError``, ``ValueError`` for a bad limit."""
    watchlist = get_watchlist(name=name, settings=settings, tenant=tenant)
    return ops_repo.list_runs(engine=_engine(settings), watchlist_id=watchlist["id"], limit=limit)


def get_run(*, name: str, run_date: date, settings: Settings, tenant: str = DEFAULT_TENANT) -> dict[str, Any]:
    """The run of ``tenant``'s watchlist ``name`` on ``run_date`` with its digest columns.
    Raises ``WatchlistNotFoundError`` (for the watchlist or the run)."""
    watchlist = get_watchlist(name=name, settings=settings, tenant=tenant)
    run_id = ops_repo.run_id_for(watchlist_id=watchlist["id"], run_date=run_date)
    row = ops_repo.get_run(engine=_engine(settings), run_id=run_id)
    if row is None:
        raise WatchlistNotFoundError(f"watchlist {name!r} has no run on {run_date.isoformat()}")
    return row


# --------------------------------------------------------------------------------------------
# Runs
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RunStart:
    """Outcome of :func:`start_run`: the run row, whether this call created it, and the tickers
    this call enqueued (empty for a repeat) or found refused."""

    run: dict[str, Any]
    created: bool
    enqueued: list[str] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)


def analysis_id_for(*, run_id: str, symbol: str) -> str:
    """Deterministic analysis id of ``symbol`` in run ``run_id`` (UUID5)."""
    return str(uuid.uuid5(RUN_NAMESPACE, f"{run_id}:{symbol}"))


def start_run(
    *,
    name: str,
    run_date: date,
    trigger: Trigger,
    schedule_finalize: bool = True,
    settings: Settings,
    tenant: str = DEFAULT_TENANT,
    quota: RunQuota | None = None,
) -> RunStart:
    """Start (or complete an interrupted start of) the run of ``name`` on ``run_date``.

    Creates the run row once per (watchlist, run_date); for every ticker without an item yet,
    validates and writes its analysis (deterministic id) and records ``enqueued``, or records
    ``refused`` with the reason (unknown symbol, no data at the date, a quota). In bulk, per
    :data:`START_BATCH` tickers: their analyses and pass-0 claims in one transaction
    (``service.prepare_many``), their run items in one insert, their new chains as one Celery
    group (one producer); then, if ``schedule_finalize``, a countdown finaliser is enqueued.
    A repeat for the same date enqueues nothing (see the module docstring).

    ``quota`` (``apps.metering.RunQuota``; ``None``: unmetered, the CLI's local
    administrator): at most ``quota.room`` new analyses start, in the watchlist's order; each
    later ticker is recorded ``refused`` with ``quota.refusal`` (a refusal is final for the
    run's date, like a validation refusal). The analyses carry ``quota.enqueuer`` as their
    ``api_key_id``. With no room and ``quota.refuse_whole``, nothing is stored.

    ``as_of`` of each analysis is ``run_date`` (option ``as_of: latest``: the data's last date).
    The watchlist is ``tenant``'s, and so are the analyses of its run.
    Raises ``WatchlistNotFoundError``; ``WatchlistError`` for the date of a new run a person
    asked for (trigger ``api`` or ``manual``) that :func:`check_run_date` refuses, before any
    row is written; ``service.SchemaMissingError``; ``apps.metering.QuotaExceededError``
    (no room, ``quota.refuse_whole``, and the run has tickers to start).
    """
    service.prepare_database(settings=settings)
    watchlist = get_watchlist(name=name, settings=settings, tenant=tenant)
    engine = _engine(settings)
    if trigger != "beat":
        _check_new_run_date(engine=engine, watchlist=watchlist, run_date=run_date)
    if quota is not None and quota.refuse_whole and quota.room <= 0:
        _refuse_whole(engine=engine, watchlist=watchlist, run_date=run_date, quota=quota)
    run, created = ops_repo.claim_run(
        engine=engine, watchlist_id=watchlist["id"], run_date=run_date, trigger=trigger
    )
    if run["status"] != "running":
        return RunStart(run=run, created=created)
    done = {item["symbol"] for item in ops_repo.run_items(engine=engine, run_id=run["id"])}
    as_of = _run_as_of(watchlist=watchlist, run_date=run_date, trigger=trigger, settings=settings)
    pending = [symbol for symbol in watchlist["tickers"] if symbol not in done]
    ids = {symbol: analysis_id_for(run_id=run["id"], symbol=symbol) for symbol in pending}
    # an interrupted start claimed some analyses already: they take no room again (as before,
    # when the room counted the chains a start sent)
    claimed_before = (
        repo.claimed_first_passes(engine=engine, analysis_ids=list(ids.values()))
        if quota is not None
        else set()
    )
    provider = get_provider(settings=settings)
    batch = _StartBatch(engine=engine, run_id=run["id"], watchlist=watchlist, settings=settings, quota=quota)
    room = quota.room if quota is not None else None
    for symbol in pending:
        if room is not None and room <= 0:
            batch.refuse(symbol, quota.refusal if quota is not None else "")
        else:
            try:
                ticker = normalize_ticker(symbol)
                resolved = service.check_request(
                    provider=provider, ticker=ticker, as_of=as_of, settings=settings
                )
            except (InvalidTickerError, service.InvalidRequestError) as exc:
                batch.refuse(symbol, mask_text(str(exc)))
            else:
                batch.accept(
                    service.Accepted(
                        analysis_id=ids[symbol],
                        symbol=ticker,
                        as_of=resolved,
                        user_query=f"Watchlist {name} {run_date.isoformat()}: analyze {symbol}",
                    ),
                    symbol=symbol,
                )
                if room is not None and ids[symbol] not in claimed_before:
                    room -= 1
        if len(batch.rows) >= START_BATCH:
            batch.flush()
    batch.flush()
    if schedule_finalize and (created or batch.sent):
        taskqueue.get().send_task(
            FINALIZE_TASK, args=(run["id"], 0), countdown=settings.watchlists.finalize_countdown
        )
    return RunStart(run=run, created=created, enqueued=batch.enqueued, refused=batch.refused)


def _refuse_whole(*, engine: Any, watchlist: dict[str, Any], run_date: date, quota: RunQuota) -> None:
    """Raise ``QuotaExceededError`` when the run of ``run_date`` still has tickers to start (no
    run yet, or a running one missing some): the caller's quota has no room and refuses whole."""
    existing = ops_repo.get_run(
        engine=engine, run_id=ops_repo.run_id_for(watchlist_id=watchlist["id"], run_date=run_date)
    )
    recorded = (
        {item["symbol"] for item in ops_repo.run_items(engine=engine, run_id=existing["id"])}
        if existing is not None
        else set()
    )
    open_tickers = existing is None or (
        existing["status"] == "running" and any(t not in recorded for t in watchlist["tickers"])
    )
    if open_tickers:
        raise QuotaExceededError(quota.refusal.removeprefix("quota: "), retry_after=quota.retry_after)


def _run_as_of(
    *, watchlist: dict[str, Any], run_date: date, trigger: Trigger, settings: Settings
) -> date | None:
    """The ``as_of`` of a run's analyses: ``run_date``; ``None`` (the data's last date) with the
    option ``as_of: latest``; for a scheduled run on offline data that ends before ``run_date``,
    the data's last day."""
    options = watchlist["options"] or {}
    as_of = None if options.get("as_of") == "latest" else run_date
    if as_of is not None and trigger == "beat":
        # A scheduled run fires on the wall clock's date; offline data (the embedded set ends
        # 2013-03-01) cannot serve it, so its analyses run as of the data's last day instead.
        clock = market_clock(symbols=watchlist["tickers"], settings=settings)
        if clock is not None and clock.basis == "data_end" and as_of > clock.day:
            as_of = clock.day
    return as_of


@dataclass
class _StartBatch:
    """The tickers of a run's start written and sent together (:data:`START_BATCH` at a time):
    the accepted analyses and the run items since the last :meth:`flush`, and what the whole
    start enqueued, refused and whether it sent a chain."""

    engine: Any
    run_id: str
    watchlist: dict[str, Any]
    settings: Settings
    quota: RunQuota | None
    enqueued: list[str] = field(default_factory=list)
    refused: dict[str, str] = field(default_factory=dict)
    accepted: list[service.Accepted] = field(default_factory=list)
    rows: list[dict[str, Any]] = field(default_factory=list)
    sent: bool = False

    def refuse(self, symbol: str, reason: str) -> None:
        """Record ``symbol`` refused for ``reason`` (its run item keeps 1,000 characters)."""
        self.refused[symbol] = reason
        self.rows.append({"symbol": symbol, "status": "refused", "error": reason[:1000]})

    def accept(self, accepted: service.Accepted, *, symbol: str) -> None:
        """Queue ``accepted`` (the analysis of the watchlist's ``symbol``) for the next flush."""
        self.accepted.append(accepted)
        self.rows.append({"symbol": symbol, "status": "enqueued", "analysis_id": accepted.analysis_id})

    def flush(self) -> None:
        """Write the accepted analyses (one transaction), then the run items (one insert),
        then send the new chains in one batch: rows first, so a crash in between leaves rows
        the recovery sweep re-drives, never messages without rows."""
        chains = service.prepare_many(
            items=self.accepted,
            settings=self.settings,
            max_iterations=(self.watchlist["options"] or {}).get("max_iterations"),
            tenant=self.watchlist["tenant"],
            api_key_id=self.quota.enqueuer if self.quota is not None else None,
            lane=BATCH,  # nobody waits on a run's analyses: they yield to interactive ones
        )
        ops_repo.add_run_items(engine=self.engine, run_id=self.run_id, items=self.rows)
        signatures = [chain for chain in chains.values() if chain is not None]
        self.enqueued.extend(a.symbol for a in self.accepted if chains[a.analysis_id] is not None)
        if signatures:
            taskqueue.get().send_chains(signatures)  # one producer, its broker confirms awaited once
            self.sent = True
        self.accepted.clear()
        self.rows.clear()


#: How long a scheduled run waits for its tenant's lock (other runs of the tenant being
#: started): a 200-ticker start takes a few seconds, and a tick may start every due list at once.
SCHEDULED_LOCK_WAIT_SECONDS: Final = 120


def start_scheduled_run(
    *, name: str, run_date: date, tenant: str, settings: Settings, now: datetime | None = None
) -> RunStart:
    """:func:`start_run` for beat: metered against ``tenant``
    (``apps.metering.scheduled_run_quota``: analyses of scheduled runs per UTC day, and the
    tenant's daily LLM budget), under the tenant's admission lock so concurrent runs of one
    tenant share the allowance. Tickers past it are refused with the reason, which the digest
    lists; a run with no room is still recorded, every ticker refused.

    Raises what :func:`start_run` raises; ``QuotaExceededError`` when the tenant's lock stayed
    taken for ``SCHEDULED_LOCK_WAIT_SECONDS`` (nothing stored: the next tick sends it again).
    """
    with exclusive(name=tenant_lock_name(tenant), settings=settings, wait=SCHEDULED_LOCK_WAIT_SECONDS):
        quota = scheduled_run_quota(tenant=tenant, settings=settings, now=now)
        return start_run(
            name=name, run_date=run_date, trigger="beat", settings=settings, tenant=tenant, quota=quota
        )


def market_clock(*, symbols: Sequence[str], settings: Settings) -> MarketToday | None:
    """The market clock of the configured data over ``symbols``
    (:func:`agents.data.market.clock.market_today`): offline data → its last trading day, online →
    the last completed XNYS session; None when the offline data cannot be read."""
    try:
        return market_today(provider=get_provider(settings=settings), symbols=symbols)
    except ProviderError:
        return None


def check_run_date(run_date: date, *, timezone: str, now: datetime | None = None) -> date:
    """``run_date`` if a run may start for it: from ``core.dates.EARLIEST_DATE`` on and
    not after today in the watchlist's ``timezone`` (a run's date is a local date, as beat's
    fire dates are). ``now`` (aware) defaults to the current time.

    Raises:
        WatchlistError: the message names ``run_date``, the value and the bound it crossed.
    """
    zone = parse_timezone(timezone)
    today = (now or datetime.now(UTC)).astimezone(zone).date()
    try:
        return check_date(run_date, field="run_date", today=today, where=timezone)
    except DateRuleError as exc:
        raise WatchlistError(str(exc)) from exc


def _check_new_run_date(*, engine: Any, watchlist: dict[str, Any], run_date: date) -> None:
    """:func:`check_run_date` for a run of ``watchlist`` on ``run_date`` that does not exist
    yet. An existing run is never refused: a repeat returns it (beat may have made it for its
    own fire date, which a tick sent with a simulated ``now`` or a clock ahead puts after today).
    Raises ``WatchlistError``."""
    run_id = ops_repo.run_id_for(watchlist_id=watchlist["id"], run_date=run_date)
    if ops_repo.get_run(engine=engine, run_id=run_id) is None:
        check_run_date(run_date, timezone=watchlist["timezone"])


def run_date_for(
    *, name: str, run_date: date | None, settings: Settings, tenant: str = DEFAULT_TENANT
) -> date:
    """The date a run of ``tenant``'s watchlist ``name`` asked for ``run_date`` is for:
    ``run_date`` (checked by :func:`check_run_date` unless its run exists), or
    :func:`default_run_date` when ``None``.

    Raises ``WatchlistNotFoundError``; ``WatchlistError`` for a refused date.
    """
    if run_date is None:
        return default_run_date(name=name, settings=settings, tenant=tenant)
    watchlist = get_watchlist(name=name, settings=settings, tenant=tenant)
    _check_new_run_date(engine=_engine(settings), watchlist=watchlist, run_date=run_date)
    return run_date


def default_run_date(*, name: str, settings: Settings, tenant: str = DEFAULT_TENANT) -> date:
    """The run date a watchlist run without a date uses: the market clock's day over its
    tickers (:func:`market_clock`), so the default is a date the data can serve; when the data
    cannot be read, today in the watchlist's time zone (the tickers then fail with the reason).
    Raises ``WatchlistNotFoundError`` (also for another ``tenant``'s watchlist)."""
    watchlist = get_watchlist(name=name, settings=settings, tenant=tenant)
    clock = market_clock(symbols=watchlist["tickers"], settings=settings)
    if clock is not None:
        return clock.day
    return datetime.now(UTC).astimezone(parse_timezone(watchlist["timezone"])).date()


def due_watchlists(*, now: datetime, settings: Settings) -> list[tuple[str, date, str]]:
    """``(name, run_date, tenant)`` of every enabled watchlist (of any tenant) whose latest
    fire time is due and has no run yet (see the module docstring). ``now`` is aware."""
    engine = _engine(settings)
    due: list[tuple[str, date, str]] = []
    for wl in ops_repo.list_watchlists(engine=engine, enabled_only=True):
        fire = last_fire_time(schedule=wl["schedule"], timezone=wl["timezone"], now=now)
        if fire is None or fire < wl["created_at"]:
            continue
        run_date = fire.date()
        run_id = ops_repo.run_id_for(watchlist_id=wl["id"], run_date=run_date)
        if ops_repo.get_run(engine=engine, run_id=run_id) is None:
            due.append((wl["name"], run_date, wl["tenant"]))
    return due


def finalize_run(*, run_id: str, now: datetime | None = None, settings: Settings) -> bool:
    """Write the digest of run ``run_id`` if all its analyses finished (or the run timed out).

    Returns ``True`` when the run is done (now or before), ``False`` while analyses still run.
    Safe to call any number of times, concurrently: the digest is written once.
    Raises ``KeyError`` for an unknown run.
    """
    now = now or datetime.now(UTC)
    engine = _engine(settings)
    run = ops_repo.get_run(engine=engine, run_id=run_id)
    if run is None:
        raise KeyError(f"no watchlist run {run_id}")
    if run["status"] == "done":
        return True
    timed_out = (now - run["created_at"]).total_seconds() > settings.watchlists.run_timeout
    # the cheap test first: this runs every few seconds for the whole of a run
    if not timed_out and ops_repo.run_has_pending(engine=engine, run_id=run_id):
        return False
    items = ops_repo.run_items(engine=engine, run_id=run_id)
    watchlist = next(
        (w for w in ops_repo.list_watchlists(engine=engine) if w["id"] == run["watchlist_id"]), None
    )
    previous = ops_repo.previous_done_run(
        engine=engine, watchlist_id=run["watchlist_id"], before=run["run_date"]
    )
    previous_items = ops_repo.run_items(engine=engine, run_id=previous["id"]) if previous else []
    digest = build_digest(
        name=watchlist["name"] if watchlist else run["watchlist_id"],
        run_date=run["run_date"],
        items=items,
        previous_date=previous["run_date"] if previous else None,
        previous_items=previous_items,
        timeout_s=settings.watchlists.run_timeout,
    )
    llm = run_llm_summary(engine=engine, items=items, settings=settings)
    if llm is not None:
        digest["llm"] = llm
    # a run of an unknown watchlist (deleted meanwhile: its runs go with it) shows no scores
    digest["scorecard"] = (
        _scorecard_section(
            tickers=[i["symbol"] for i in items], tenant=watchlist["tenant"], settings=settings
        )
        if watchlist
        else None
    )
    clock = market_clock(symbols=[i["symbol"] for i in items], settings=settings)
    if clock is not None:
        digest["market_clock"] = clock.as_dict()
    # its error lines quote the analyses' errors (rows written before masking included): no
    # configured secret in the digest, whichever form it is read in
    digest = mask(digest)
    ops_repo.finish_run(
        engine=engine,
        run_id=run_id,
        digest_markdown=digest_markdown(digest),
        digest_html=digest_html(digest),
        digest_json=digest,
    )
    return True


#: Marks the analysts' budget failure caused by the run's budget (``RunBudgetExhaustedError``).
RUN_BUDGET_MARK: Final = "watchlist run budget"


def run_llm_summary(
    *, engine: Any, items: Sequence[dict[str, Any]], settings: Settings
) -> dict[str, Any] | None:
    """The run's LLM accounting for the digest, or ``None`` when no analysis made an LLM call
    and no run budget is set.

    Returns ``{calls, failed_calls, attempts, failed_attempts, prompt_tokens,
    completion_tokens, cost_usd (None: unknown), budget_tokens, budget_usd, budget_hit,
    deterministic_after_budget}``: the last lists the tickers whose analysts fell back to the
    deterministic result because the run's budget (``FINAGENT_LLM_RUN_BUDGET_*``) was spent.
    """
    ids = [i["analysis_id"] for i in items if i.get("analysis_id")]
    usage = repo.llm_usage_of(engine=engine, analysis_ids=ids)
    budgets = (settings.llm.run_budget_tokens, settings.llm.run_budget_usd)
    if usage["attempts"] == 0 and budgets == (None, None):
        return None
    hit: list[str] = []
    for item in items:
        row = (
            repo.get_analysis(engine=engine, analysis_id=item["analysis_id"])
            if item.get("analysis_id")
            else None
        )
        errors = ((row or {}).get("report_json") or {}).get("errors") or []
        if any(
            e.get("code") == "LLM_BUDGET_EXHAUSTED" and RUN_BUDGET_MARK in str(e.get("message"))
            for e in errors
        ):
            hit.append(item["symbol"])
    return {
        **usage,
        "budget_tokens": budgets[0],
        "budget_usd": budgets[1],
        "budget_hit": bool(hit),
        "deterministic_after_budget": hit,
    }


def _scorecard_section(*, tickers: Sequence[str], tenant: str, settings: Settings) -> dict[str, Any] | None:
    """The digest's scorecard section (``apps.scorecard.digest_section``) over ``tenant``'s
    recommendations only; ``None`` when none of these tickers has matured, or when reading the
    scores fails: a digest is never held back by its scorecard."""
    from apps import scorecard  # lazy: pandas' scorecard code only when a run finishes

    try:
        return scorecard.digest_section(symbols=tickers, settings=settings, tenant=tenant)
    except Exception:  # the digest must be written; the section is a courtesy
        logger.warning("watchlist digest: scorecard section unavailable", exc_info=True)
        return None


def finalize_open_runs(*, now: datetime | None = None, settings: Settings) -> int:
    """Try :func:`finalize_run` on every open run (the beat backstop); returns how many closed."""
    engine = _engine(settings)
    return sum(
        finalize_run(run_id=run["id"], now=now, settings=settings)
        for run in ops_repo.open_runs(engine=engine)
    )
