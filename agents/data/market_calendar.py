"""When the paper broker may trade: the NYSE calendar (``exchange_calendars`` XNYS).

Daily data has no clock, so the order time of a tool call at ``as_of`` is chosen as the last
minute of that session's regular hours (``session_close - 1 minute``: 15:59 New York time, 12:59
on early-close days): the order trades against the ``as_of`` close, the only price a daily bar
gives that is known at that instant. An ``as_of`` that is not a session (weekend, holiday, an
unscheduled closure such as Hurricane Sandy on 2012-10-29/30) has no such minute: MARKET_CLOSED.
"""

from __future__ import annotations

import importlib.metadata
import os
import tempfile
import warnings
from datetime import UTC, date, datetime, time
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, cast
from zoneinfo import ZoneInfo

import numpy as np
import pandas as pd

if TYPE_CHECKING:
    import exchange_calendars as xcals  # type: ignore[import-untyped]

CALENDAR = "XNYS"
#: The exchange's clock and its regular close, for dates the calendar does not cover.
NEW_YORK = ZoneInfo("America/New_York")
REGULAR_CLOSE = time(16, 0)
# exchange_calendars defaults to the last 20 years; the embedded data starts in 2000.
CALENDAR_START = "1990-01-01"


class OutsideCalendarError(ValueError):
    """The date lies outside the span the calendar knows (about a year ahead of today)."""


@lru_cache(maxsize=1)
def nyse() -> xcals.ExchangeCalendar:
    """The XNYS calendar from 1990 (built once per process, ~0.3 s).

    exchange_calendars itself (~0.1-0.3 s to import) is imported here, with the calendar it
    builds: a quote or a report on offline data never needs the exchange's sessions."""
    import exchange_calendars as xcals

    with warnings.catch_warnings():
        # exchange_calendars 4.x trips pandas 3 deprecation warnings inside its own schedule
        # construction (Series.values on tz-aware data); nothing we pass can avoid them.
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", FutureWarning)
        return xcals.get_calendar(CALENDAR, start=CALENDAR_START)


def session_days() -> np.ndarray:
    """The XNYS sessions of :func:`nyse` as ``datetime64[D]`` days, oldest first.

    The calendar reaches a year past the day it is built (exchange_calendars' default end), so
    the days are the same all day long: the first process of a day that needs them builds the
    calendar and keeps the days in ``<state_dir>/cache/``, named by that day, the calendar's
    start and the exchange_calendars version; later processes of the day read that file instead
    of importing exchange_calendars and building the calendar (~0.3 s of a CLI analysis's CPU,
    docs/benchmarks.md "CLI latency"). A missing, unreadable or unwritable cache only means the
    calendar is built."""
    path = _session_days_path(date.today())
    if path is not None:
        try:
            days: np.ndarray = np.load(path, allow_pickle=False)
            return days
        except (OSError, ValueError):
            pass
    days = pd.DatetimeIndex(nyse().sessions).to_numpy(dtype="datetime64[D]")
    import exchange_calendars.exchange_calendar as xcal_module  # type: ignore[import-untyped]

    # the day the calendar was built for (its default end is a year after it), not the clock now
    built = (xcal_module.GLOBAL_DEFAULT_END - pd.DateOffset(years=1)).date()
    target = _session_days_path(built)
    if target is not None:
        _write_atomically(target, days)
    return days


def _session_days_path(day: date) -> Path | None:
    """Where :func:`session_days` keeps the days of a calendar built on ``day`` (``None`` when
    the settings or the package version cannot be read)."""
    try:
        from core.settings import get_settings

        version = importlib.metadata.version("exchange_calendars")
        folder = Path(get_settings().service.state_dir) / "cache"
    except Exception:  # no cache then: the calendar is built, as without one
        return None
    return folder / f"xnys-sessions-{day.isoformat()}-from-{CALENDAR_START}-xcals-{version}.npy"


def _write_atomically(path: Path, days: np.ndarray) -> None:
    """Write ``days`` to ``path`` through a temporary file and a rename (a concurrent reader sees
    the whole file or none); an ``OSError`` (read-only state folder, full disk) is ignored."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as handle:
                np.save(handle, days, allow_pickle=False)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
    except OSError:
        pass


def order_time(as_of: date) -> pd.Timestamp | None:
    """The UTC minute an order at ``as_of`` is placed (module docstring), ``None`` when
    ``as_of`` is not an XNYS session. Raises ``OutsideCalendarError`` beyond the calendar."""
    cal = nyse()
    day = pd.Timestamp(as_of)
    if not cal.first_session <= day <= cal.last_session:
        raise OutsideCalendarError(
            f"{as_of} is outside the {CALENDAR} calendar "
            f"({cal.first_session.date()}..{cal.last_session.date()})"
        )
    if not cal.is_session(day):
        return None
    return cal.session_close(day) - pd.Timedelta(minutes=1)


def is_open(at: pd.Timestamp) -> bool:
    """True when XNYS is in regular trading hours at the UTC minute ``at``."""
    # Computed from session open/close (XNYS has no lunch break) rather than
    # ``is_open_on_minute``, which trips pandas 3 deprecation warnings inside exchange_calendars.
    cal = nyse()
    day = pd.Timestamp(at.tz_convert(cal.tz).date())
    if not cal.first_session <= day <= cal.last_session or not cal.is_session(day):
        return False
    return bool(cal.session_open(day) <= at < cal.session_close(day))


def close_at_or_before(as_of: date) -> datetime:
    """The UTC instant of the close that prices ``as_of``: the regular close of the last XNYS
    session on or before ``as_of`` (16:00 New York, 13:00 on early-close days such as
    2013-12-24, both from exchange_calendars; a weekend or holiday gives the session before it,
    whose close is the price a daily bar at ``as_of`` carries). For a day outside the calendar's
    span (before 1990, or beyond its horizon about a year ahead) it is 16:00 New York time on
    ``as_of`` (zoneinfo: 21:00 UTC in winter, 20:00 UTC in summer).

    Example: 2020-05-12 (EDT) -> 2020-05-12T20:00Z; 2019-01-18 (EST) -> 21:00Z; Saturday
    2020-05-16 -> Friday 2020-05-15T20:00Z.
    """
    cal = nyse()
    day = pd.Timestamp(as_of)
    if cal.first_session <= day <= cal.last_session:
        session = cal.date_to_session(day, direction="previous")
        close: datetime = cal.session_close(session).to_pydatetime()
        return close.astimezone(UTC)
    return datetime.combine(as_of, REGULAR_CLOSE, tzinfo=NEW_YORK).astimezone(UTC)


@lru_cache(maxsize=4096)
def last_session_on_or_before(day: date) -> date:
    """The last XNYS session on or before ``day``: the day an option dated ``day`` last trades
    (the 2014 monthlies are dated the Saturday after their last session: 2014-06-21 → Friday
    2014-06-20; an expiry on Good Friday 2014-04-18 → Thursday 04-17). Outside the calendar's span
    the last weekday on or before ``day`` (no holidays known there)."""
    cal = nyse()
    stamp = pd.Timestamp(day)
    if cal.first_session <= stamp <= cal.last_session:
        return cast(date, cal.date_to_session(stamp, direction="previous").date())
    while day.weekday() >= 5:
        day = date.fromordinal(day.toordinal() - 1)
    return day


@lru_cache(maxsize=4096)
def sessions_between(start: date, end: date) -> int:
    """The number of XNYS sessions ``s`` with ``start < s <= end`` (0 when ``end <= start``): the
    horizon in trading sessions from the close of ``start`` to the close of ``end``. Outside the
    calendar's span, weekdays are counted."""
    if end <= start:
        return 0
    cal = nyse()
    lo, hi = pd.Timestamp(start), pd.Timestamp(end)
    if cal.first_session <= lo and hi <= cal.last_session:
        return int(len(cal.sessions_in_range(lo, hi)) - (1 if cal.is_session(lo) else 0))
    return int(
        sum(
            1
            for n in range(1, (end - start).days + 1)
            if date.fromordinal(start.toordinal() + n).weekday() < 5
        )
    )
