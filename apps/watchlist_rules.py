"""The rules of a watchlist's fields and the errors of a watchlist request: its name, its
schedule (a 5-field cron in an IANA time zone, and the latest time it fired) and its zone. The
HTTP gateway states the same patterns in its OpenAPI document; ``apps.watchlists`` re-exports
every public name here."""

from __future__ import annotations

import re
from datetime import datetime, time, timedelta
from typing import Final
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

from core.tickers import clip
from pipeline import taskqueue
from pipeline.taskqueue import CronSpec

#: A watchlist name: 1-64 of letters, digits, ``_``, ``.``, ``-``, starting with a letter or digit
#: (ASCII classes only: the HTTP gateway states this pattern in its OpenAPI document).
NAME_PATTERN: Final = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"


NAME_RE: Final = re.compile(NAME_PATTERN)


# Fire-time search looks back at most this many days (a yearly cron still resolves).
MAX_LOOKBACK_DAYS: Final = 400


class WatchlistError(ValueError):
    """A watchlist request that cannot be honoured (bad name, ticker, schedule, zone, options,
    unknown watchlist); the message names the offending value."""


class WatchlistNotFoundError(WatchlistError, LookupError):
    """No watchlist has this name."""


class WatchlistLimitError(WatchlistError):
    """The tenant holds as many watchlists, or watches as many tickers in all, as its caps allow
    (``tenant_max_watchlists``, ``tenant_max_tickers``): a conflict with what is stored (HTTP
    409), cleared by deleting or shrinking a watchlist."""


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
