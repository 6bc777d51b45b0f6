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

import html
import logging
import re
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from typing import Any, Final, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

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
from core.dates import DateRuleError, check_date
from core.masking import mask, mask_text
from core.settings import Settings
from core.stages import BATCH
from core.tenancy import DEFAULT_TENANT
from core.tickers import InvalidTickerError, clip, drop_subject, normalize_ticker
from db import ops_repo, repo
from db.engine import get_engine
from pipeline import service, taskqueue
from pipeline.taskqueue import CronSpec

#: A watchlist name: 1-64 of letters, digits, ``_``, ``.``, ``-``, starting with a letter or digit
#: (ASCII classes only: the HTTP gateway states this pattern in its OpenAPI document).
NAME_PATTERN: Final = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
NAME_RE: Final = re.compile(NAME_PATTERN)
# A watchlist is a human-curated list; 200 tickers is a large index, more is a mistake. The
# setting ``watchlists.max_tickers`` may lower it per deployment, never raise it.
MAX_TICKERS: Final = 200
# Fire-time search looks back at most this many days (a yearly cron still resolves).
MAX_LOOKBACK_DAYS: Final = 400
ALLOWED_OPTIONS: Final = frozenset({"max_iterations", "as_of"})
logger = logging.getLogger(__name__)
RUN_NAMESPACE: Final = uuid.UUID("6f1c3c0e-6a55-4c61-9d1b-5b0f1d0a7e11")
#: How a ticker refused for a quota begins its reason (``apps.metering.RunQuota.refusal``).
QUOTA_MARK: Final = "quota:"
#: Tickers a run's start writes and sends together: their analyses and claims in one
#: transaction, their run items in one insert, their chains in one group (docs/benchmarks.md,
#: "Bulk enqueue"); a 5,000-ticker start holds at most this many rows in memory at a time.
START_BATCH: Final = 100
#: The finaliser task (``tasks.watchlists``), sent by name so this module never imports tasks.
FINALIZE_TASK: Final = "finagent.watchlists.finalize"

Trigger = Literal["beat", "manual", "api"]


class WatchlistError(ValueError):
    """A watchlist request that cannot be honoured (bad name, ticker, schedule, zone, options,
    unknown watchlist); the message names the offending value."""


class WatchlistNotFoundError(WatchlistError, LookupError):
    """No watchlist has this name."""


class WatchlistLimitError(WatchlistError):
    """The tenant holds as many watchlists, or watches as many tickers in all, as its caps allow
    (``tenant_max_watchlists``, ``tenant_max_tickers``): a conflict with what is stored (HTTP
    409), cleared by deleting or shrinking a watchlist."""


# --------------------------------------------------------------------------------------------
# Schedules
# --------------------------------------------------------------------------------------------


def _cron_field(value: str) -> str:
    """The pattern of one cron field whose single values match ``value``: a comma list of
    ``*``, ``*/step``, ``v``, ``v-v`` or ``v-v/step`` (step 1-99)."""
    step = r"/[1-9][0-9]?"
    item = rf"(\*({step})?|({value})(-({value})({step})?)?)"
    return rf"{item}(,{item})*"


#: The schedule a new or changed watchlist may have, as a pattern (the HTTP gateway's OpenAPI
#: document states it): five cron fields separated by one space, ``minute`` 0-59, ``hour``
#: 0-23, ``day-of-month`` 1-31, ``month`` 1-12, ``day-of-week`` 0-6 (0 = Sunday) or
#: ``sun``..``sat``; each field a comma list of ``*``, ``*/step``, ``v``, ``v-v``, ``v-v/step``
#: (step 1-99; a range may wrap: ``fri-mon``). Every schedule it matches is one Celery's
#: ``crontab`` parses (tests/pipeline/test_input_rules.py checks it by property).
SCHEDULE_PATTERN: Final = (
    "^"
    + " ".join(
        _cron_field(value)
        for value in (
            r"[0-5]?[0-9]",
            r"[01]?[0-9]|2[0-3]",
            r"0?[1-9]|[12][0-9]|3[01]",
            r"0?[1-9]|1[0-2]",
            r"[0-6]|sun|mon|tue|wed|thu|fri|sat",
        )
    )
    + "$"
)
_SCHEDULE_RE: Final = re.compile(SCHEDULE_PATTERN)
SCHEDULE_MAX_LENGTH: Final = 200
#: The time zones a new or changed watchlist may have: every IANA name this process can load
#: (the system's zoneinfo or the ``tzdata`` package), except ``localtime`` (whatever the host
#: is set to) and ``Factory`` (a placeholder zone).
TIME_ZONES: Final = tuple(sorted(available_timezones() - {"localtime", "Factory"}))
_TIME_ZONE_SET: Final = frozenset(TIME_ZONES)


def parse_schedule(schedule: str) -> CronSpec:
    """Parse a stored 5-field cron string into the task queue's cron schedule (Celery's
    ``crontab``; a new schedule is checked by :func:`check_schedule` first).

    Raises ``WatchlistError`` for the wrong number of fields or an invalid field."""
    fields = schedule.split()
    if len(fields) != 5:
        raise WatchlistError(
            f"schedule {clip(schedule)!r} must have 5 cron fields: minute hour dom month dow"
        )
    minute, hour, dom, month, dow = fields
    try:
        return taskqueue.get().parse_cron(
            minute=minute, hour=hour, day_of_month=dom, month=month, day_of_week=dow
        )
    except (ValueError, TypeError) as exc:
        raise WatchlistError(f"schedule {clip(schedule)!r}: {exc}") from exc


def check_schedule(schedule: str) -> str:
    """``schedule`` if a new or changed watchlist may have it: at most
    :data:`SCHEDULE_MAX_LENGTH` characters matching :data:`SCHEDULE_PATTERN`.

    Raises:
        WatchlistError: the message says which rule (the pattern's, in words) failed.
    """
    if len(schedule) > SCHEDULE_MAX_LENGTH or not _SCHEDULE_RE.fullmatch(schedule):
        raise WatchlistError(
            f"schedule {clip(schedule)!r} must be 5 cron fields separated by one space: minute 0-59, "
            "hour 0-23, day of month 1-31, month 1-12, day of week 0-6 (0 = Sunday) or sun-sat; "
            "each a comma list of *, */step, v, v-v or v-v/step (e.g. '30 21 * * 1-5')"
        )
    parse_schedule(schedule)
    return schedule


def parse_timezone(name: str) -> ZoneInfo:
    """The IANA zone ``name`` (a stored zone; a new one is checked by :func:`check_timezone`).
    Raises ``WatchlistError`` for an unknown zone or a name the file system refuses (too long)."""
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError) as exc:
        raise WatchlistError(f"unknown time zone {clip(name, 80)!r}") from exc


def check_timezone(name: str) -> str:
    """``name`` if a new or changed watchlist may have it: one of :data:`TIME_ZONES`.

    Raises:
        WatchlistError: any other name (the message repeats at most 80 characters of it).
    """
    if name not in _TIME_ZONE_SET:
        raise WatchlistError(
            f"unknown time zone {clip(name, 80)!r}: use an IANA name such as America/New_York or UTC"
        )
    parse_timezone(name)
    return name


def last_fire_time(*, schedule: str, timezone: str, now: datetime) -> datetime | None:
    """The latest fire time of ``schedule`` (in ``timezone``) at or before ``now`` (aware), as an
    aware datetime in that zone; ``None`` when it has not fired in ``MAX_LOOKBACK_DAYS``.

    Local wall-clock times: a fire time that falls in a DST gap is taken as given (zoneinfo
    folds it), which shifts it by an hour twice a year at worst.
    """
    spec = parse_schedule(schedule)
    zone = parse_timezone(timezone)
    local_now = now.astimezone(zone)
    for back in range(MAX_LOOKBACK_DAYS):
        day = local_now.date() - timedelta(days=back)
        cron_dow = (day.weekday() + 1) % 7  # Python Monday=0 → cron Sunday=0
        if day.month not in spec.month_of_year or day.day not in spec.day_of_month:
            continue
        if cron_dow not in spec.day_of_week:
            continue
        for hour in sorted(spec.hour, reverse=True):
            for minute in sorted(spec.minute, reverse=True):
                fire = datetime.combine(day, time(hour, minute), tzinfo=zone)
                if fire <= local_now:
                    return fire
    return None


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
    run, created = ops_repo.claim_run(
        engine=engine, watchlist_id=watchlist["id"], run_date=run_date, trigger=trigger
    )
    if run["status"] != "running":
        return RunStart(run=run, created=created)
    done = {item["symbol"] for item in ops_repo.run_items(engine=engine, run_id=run["id"])}
    options = watchlist["options"] or {}
    as_of = None if options.get("as_of") == "latest" else run_date
    if as_of is not None and trigger == "beat":
        # A scheduled run fires on the wall clock's date; offline data (the embedded set ends
        # 2013-03-01) cannot serve it, so its analyses run as of the data's last day instead.
        clock = market_clock(symbols=watchlist["tickers"], settings=settings)
        if clock is not None and clock.basis == "data_end" and as_of > clock.day:
            as_of = clock.day
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
    enqueued: list[str] = []
    refused: dict[str, str] = {}
    room = quota.room if quota is not None else None
    accepted: list[service.Accepted] = []
    rows: list[dict[str, Any]] = []
    sent = False

    def flush() -> None:
        """Write the accepted analyses (one transaction), then the run items (one insert),
        then send the new chains in one batch: rows first, so a crash in between leaves rows
        the recovery sweep re-drives, never messages without rows."""
        nonlocal sent
        chains = service.prepare_many(
            items=accepted,
            settings=settings,
            max_iterations=options.get("max_iterations"),
            tenant=watchlist["tenant"],
            api_key_id=quota.enqueuer if quota is not None else None,
            lane=BATCH,  # nobody waits on a run's analyses: they yield to interactive ones
        )
        ops_repo.add_run_items(engine=engine, run_id=run["id"], items=rows)
        signatures = [chain for chain in chains.values() if chain is not None]
        enqueued.extend(a.symbol for a in accepted if chains[a.analysis_id] is not None)
        if signatures:
            taskqueue.get().send_chains(signatures)  # one producer, its broker confirms awaited once
            sent = True
        accepted.clear()
        rows.clear()

    for symbol in pending:
        if room is not None and room <= 0:
            refused[symbol] = quota.refusal if quota is not None else ""
            rows.append({"symbol": symbol, "status": "refused", "error": refused[symbol][:1000]})
        else:
            try:
                ticker = normalize_ticker(symbol)
                resolved = service.check_request(
                    provider=provider, ticker=ticker, as_of=as_of, settings=settings
                )
            except (InvalidTickerError, service.InvalidRequestError) as exc:
                refused[symbol] = mask_text(str(exc))
                rows.append({"symbol": symbol, "status": "refused", "error": refused[symbol][:1000]})
            else:
                accepted.append(
                    service.Accepted(
                        analysis_id=ids[symbol],
                        symbol=ticker,
                        as_of=resolved,
                        user_query=f"Watchlist {name} {run_date.isoformat()}: analyze {symbol}",
                    )
                )
                rows.append({"symbol": symbol, "status": "enqueued", "analysis_id": ids[symbol]})
                if room is not None and ids[symbol] not in claimed_before:
                    room -= 1
        if len(rows) >= START_BATCH:
            flush()
    flush()
    if schedule_finalize and (created or sent):
        taskqueue.get().send_task(
            FINALIZE_TASK, args=(run["id"], 0), countdown=settings.watchlists.finalize_countdown
        )
    return RunStart(run=run, created=created, enqueued=enqueued, refused=refused)


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


def _llm_line(llm: dict[str, Any]) -> str:
    """One sentence on the run's LLM use and budget (Markdown and HTML digests)."""
    cost = "unknown" if llm["cost_usd"] is None else f"${llm['cost_usd']:.4f}"
    limits = [f"{llm['budget_tokens']} tokens" if llm["budget_tokens"] is not None else ""]
    limits.append(f"${llm['budget_usd']:.2f}" if llm["budget_usd"] is not None else "")
    limit = " / ".join(x for x in limits if x) or "none"
    text = (
        f"LLM: {llm['calls']} calls answered, {llm['failed_calls']} failed, {llm['attempts']} attempts; "
        f"{llm['prompt_tokens'] + llm['completion_tokens']} tokens; cost {cost}; run budget {limit}."
    )
    if llm["budget_hit"]:
        text += (
            " The run's LLM budget was spent: the analysts of "
            + ", ".join(llm["deterministic_after_budget"])
            + " ran deterministically from then on."
        )
    return text


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


# --------------------------------------------------------------------------------------------
# Digest
# --------------------------------------------------------------------------------------------


def build_digest(
    *,
    name: str,
    run_date: date,
    items: Sequence[dict[str, Any]],
    previous_date: date | None,
    previous_items: Sequence[dict[str, Any]],
    timeout_s: int,
) -> dict[str, Any]:
    """The digest as JSON: ``{watchlist, run_date, previous_run_date, counts, tickers: [...]}``.

    Each ticker: ``symbol, analysis_id, as_of, outcome (ok|failed), signal, p_outperform (the
    calibrated p(outperform the benchmark) at the signal horizon, ``agents.quant.calibration``;
    ``None`` for reports written before it), headline (the report's one-line answer,
    ``pipeline.report.headline_text``), details (``{confidence}``: the author's raw figure,
    not evidence), previous_signal,
    change (new|unchanged|"BUY → HOLD"|None), error, chart_url``. Failures are
    refused tickers (the reason: validation, or a quota, ``"quota: …"``), failed analyses (their
    error) and analyses unfinished after ``timeout_s``. ``counts`` has ``tickers, ok, failed,
    changed, refused`` (never started) and ``refused_by_quota`` (of those, for a quota).
    ``chart_url`` is the gateway-relative URL of the analysis's chart PNG (:func:`chart_url`)
    for a successful ticker, ``None`` for a failure.
    """
    before = {i["symbol"]: i.get("signal") for i in previous_items if i.get("analysis_status") == "done"}
    rows = []
    for item in items:
        ok = item["status"] == "enqueued" and item["analysis_status"] == "done"
        if item["status"] == "refused":
            error = item["error"]
        elif item["analysis_status"] == "failed":
            error = item["analysis_error"] or "the analysis failed"
        elif not ok:
            error = f"did not finish within {timeout_s} s (status {item['analysis_status']})"
        else:
            error = None
        if error is not None and error != drop_subject(item["symbol"], error):
            # stacked "ZZZZ: ZZZZ: …" (rows written before the service named it once) → once
            error = f"{item['symbol']}: {drop_subject(item['symbol'], error)}"
        signal = item["signal"] if ok else None
        prev = before.get(item["symbol"])
        change: str | None = None
        if ok:
            if previous_date is None or item["symbol"] not in before:
                change = "new"
            elif prev == signal:
                change = "unchanged"
            else:
                change = f"{prev} → {signal}"
        rows.append(
            {
                "symbol": item["symbol"],
                "analysis_id": item["analysis_id"],
                "as_of": item["as_of"].isoformat() if item.get("as_of") else None,
                "outcome": "ok" if ok else "failed",
                "signal": signal,
                "p_outperform": item.get("p_outperform") if ok else None,
                # the report's one-line answer: an option plan's verdict, or "HOLD: no evidence"
                "headline": item.get("headline") if ok else None,
                # the raw confidence is a detail, not evidence (as in the HTTP API)
                "details": {"confidence": item["confidence"]} if ok else None,
                "previous_signal": prev,
                "change": change,
                "error": error,
                "chart_url": chart_url(item["analysis_id"]) if ok else None,
            }
        )
    return {
        "watchlist": name,
        "run_date": run_date.isoformat(),
        "previous_run_date": previous_date.isoformat() if previous_date else None,
        "counts": {
            "tickers": len(rows),
            "ok": sum(r["outcome"] == "ok" for r in rows),
            "failed": sum(r["outcome"] == "failed" for r in rows),
            "changed": sum(1 for r in rows if r["change"] not in (None, "new", "unchanged")),
            "refused": sum(1 for i in items if i["status"] == "refused"),
            "refused_by_quota": sum(
                1 for i in items if i["status"] == "refused" and str(i["error"]).startswith(QUOTA_MARK)
            ),
        },
        "tickers": rows,
    }


def chart_url(analysis_id: str) -> str:
    """The gateway-relative URL of an analysis's chart PNG, ``/analyses/{analysis_id}/chart.png``
    (served by ``GET /analyses/{id}/chart.png`` with the same ``X-API-Key``)."""
    return f"/analyses/{analysis_id}/chart.png"


def _probability(value: float | None, headline: str | None = None) -> str:
    """The calibrated p of a digest row, and "no evidence" beside it when the calibration
    abstained (the report's headline says so): 0.50 is then no estimate, only no view."""
    if value is None:
        return ""
    return f"{value:.2f}" + (" (no evidence)" if headline and headline.endswith(": no evidence") else "")


def digest_markdown(
    digest: dict[str, Any],
    *,
    chart_note: str | None = None,
    ticker_url: Callable[[dict[str, Any]], str | None] | None = None,
) -> str:
    """Render the digest JSON of :func:`build_digest` as Markdown (a table, then failures);
    ``chart_note`` replaces the closing sentence on how to open the chart links (the web
    console's links need no key); ``ticker_url(row)`` of a ticker's row, when given, makes its
    symbol a link (the web console links each ticker to its analysis's page)."""

    def ticker(r: dict[str, Any], text: str) -> str:
        url = ticker_url(r) if ticker_url is not None and r.get("analysis_id") else None
        return f"[{text}]({url})" if url else text

    c = digest["counts"]
    since = digest["previous_run_date"] or "no previous run"
    lines = [
        f"# Watchlist {digest['watchlist']}: {digest['run_date']}",
        "",
        f"{c['tickers']} tickers: {c['ok']} analysed, {c['failed']} failed, "
        f"{c['changed']} signal changes since {since}.",
        *([f"Market clock: {digest['market_clock']['note']}."] if digest.get("market_clock") else []),
        *([_refused_line(c)] if c.get("refused") else []),
        "",
        "| ticker | signal | p(outperform, 20d) | change | as of | chart |",
        "|---|---|---|---|---|---|",
    ]
    for r in digest["tickers"]:
        if r["outcome"] == "ok":
            chart = f"[chart]({r['chart_url']})" if r.get("chart_url") else ""
            lines.append(
                f"| {ticker(r, r['symbol'])} | {r['signal']} "
                f"| {_probability(r.get('p_outperform'), r.get('headline'))} "
                f"| {r['change']} | {r['as_of'] or ''} | {chart} |"
            )
    failures = [r for r in digest["tickers"] if r["outcome"] == "failed"]
    if failures:
        lines += ["", "## Failures", ""]
        # the bold symbol names it: the text does not repeat it
        lines += [
            f"- {ticker(r, '**' + r['symbol'] + '**')}: {drop_subject(r['symbol'], str(r['error']))}"
            for r in failures
        ]
    note = chart_note or (
        "Chart links are signed and expire; ask the gateway for the digest again for fresh ones."
        if digest.get("charts_signed")
        else "Chart links are relative to the HTTP gateway and need its X-API-Key header."
    )
    if digest.get("llm"):
        lines += ["", _llm_line(digest["llm"])]
    lines += _scorecard_lines(digest.get("scorecard"))
    lines += ["", note, ""]
    return "\n".join(lines)


def _refused_line(counts: dict[str, Any]) -> str:
    """One sentence on the tickers a run never started (Markdown and HTML digests)."""
    quota = counts.get("refused_by_quota", 0)
    return (
        f"Not started: {counts['refused']} tickers ({quota} for a quota, "
        f"{counts['refused'] - quota} refused by validation); each is listed with its reason below."
    )


def _scorecard_lines(section: dict[str, Any] | None) -> list[str]:
    from apps.scorecard import digest_markdown_lines  # lazy, as in _scorecard_section

    return digest_markdown_lines(section)


def with_signed_charts(digest: dict[str, Any], *, sign: Callable[[str], str]) -> dict[str, Any]:
    """A copy of ``digest`` whose ``chart_url`` values are passed through ``sign`` (e.g.
    :func:`apps.api.auth.sign_path`) and marked ``charts_signed: true``; the stored digest
    keeps its plain links, so signatures are minted fresh each time a digest is served."""
    tickers = [
        {**r, "chart_url": sign(r["chart_url"]) if r.get("chart_url") else r.get("chart_url")}
        for r in digest["tickers"]
    ]
    return {**digest, "tickers": tickers, "charts_signed": True}


def _chart_cell(r: dict[str, Any], *, embed: bool) -> str:
    url = r.get("chart_url")
    if not url:
        return ""
    if embed:
        alt = html.escape(f"{r['symbol']} chart")
        return f'<a href="{html.escape(url)}"><img src="{html.escape(url)}" alt="{alt}" width="400"></a>'
    return f'<a href="{html.escape(url)}" type="image/png">chart</a>'


def digest_html(digest: dict[str, Any]) -> str:
    """Render the digest JSON as a standalone HTML page (every value escaped); each successful
    ticker's row links its chart PNG. With signed links (``charts_signed``, see
    :func:`with_signed_charts`) the chart is embedded as an ``<img>``; plain links need the
    gateway's ``X-API-Key``, which a browser does not send for an image, so they stay links."""
    embed = bool(digest.get("charts_signed"))
    e = html.escape
    c = digest["counts"]
    since = digest["previous_run_date"] or "no previous run"
    rows = "".join(
        f"<tr><td>{e(r['symbol'])}</td><td>{e(str(r['signal']))}</td>"
        f"<td>{e(_probability(r.get('p_outperform'), r.get('headline')))}</td><td>{e(str(r['change']))}</td>"
        f"<td>{e(r['as_of'] or '')}</td><td>{_chart_cell(r, embed=embed)}</td></tr>"
        for r in digest["tickers"]
        if r["outcome"] == "ok"
    )
    failures = "".join(
        f"<li><strong>{e(r['symbol'])}</strong>: {e(drop_subject(r['symbol'], str(r['error'])))}</li>"
        for r in digest["tickers"]
        if r["outcome"] == "failed"
    )
    title = f"Watchlist {e(digest['watchlist'])}: {e(digest['run_date'])}"
    return (
        f'<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><title>{title}</title></head>'
        f"<body><h1>{title}</h1>"
        f"<p>{c['tickers']} tickers: {c['ok']} analysed, {c['failed']} failed, {c['changed']} signal "
        f"changes since {e(since)}.</p>"
        + (f"<p>Market clock: {e(digest['market_clock']['note'])}.</p>" if digest.get("market_clock") else "")
        + (f"<p>{e(_refused_line(c))}</p>" if c.get("refused") else "")
        + "<table><thead><tr><th>ticker</th><th>signal</th><th>p(outperform, 20d)</th><th>change</th>"
        f"<th>as of</th><th>chart</th></tr></thead><tbody>{rows}</tbody></table>"
        + (f"<h2>Failures</h2><ul>{failures}</ul>" if failures else "")
        + (f"<p>{e(_llm_line(digest['llm']))}</p>" if digest.get("llm") else "")
        + _scorecard_html(digest.get("scorecard"))
        + (
            "<p>Chart links are signed and expire; ask the gateway for the digest again for fresh ones.</p>"
            if embed
            else "<p>Chart links are relative to the HTTP gateway and need its X-API-Key header.</p>"
        )
        + "</body></html>\n"
    )


def _scorecard_html(section: dict[str, Any] | None) -> str:
    """The scorecard section as HTML (every value escaped); empty without one."""
    lines = [line[2:] for line in _scorecard_lines(section) if line.startswith("- ")]
    if not lines:
        return ""
    items = "".join(f"<li>{html.escape(line)}</li>" for line in lines)
    return f"<h2>Scorecard (these tickers, matured recommendations)</h2><ul>{items}</ul>"
