"""Earnings reports as the risk models see them: which past sessions carried a report's price
reaction (left out of the volatility estimate and the residual pool, and measured as the stock's
earnings moves), and which reports fall inside a forecast's window, all as known at the origin.

Rules (ours):

* **Reaction sessions** of a report dated ``D``: a report before the open or during the session
  moves the first session on or after ``D``; one after the close moves the next session after
  ``D``; one at an unknown time (the calendar's ``12 AM``, most rows before 2016) may move either,
  so both sessions count (its *move* is their summed log return).
* **Past** at an origin ``T``: report dates are announced weeks ahead, so every reaction session
  on or before ``T`` of a report dated on or before ``T`` is known to be one at ``T``. A report's
  move is known once it is reported (the calendar's rule, :mod:`agents.data.fundamentals.earnings`)
  and all its reaction sessions are on or before ``T``.
* **Announced**: a report not yet reported at ``T`` and dated within
  :data:`~agents.data.fundamentals.earnings.ANNOUNCE_WINDOW_DAYS` (30) calendar days after ``T``
  (the calendar's rule for what is public at ``T``).
* **Projected**: beyond those 30 days a date is not public yet; a company reports each quarter
  about a year after the same quarter, so the report dated ``D`` in the past year is projected to
  ``D + 364`` days (the same weekday), unless a known report lies within 30 days of it.
* **Timing habit** for an upcoming report at an unknown time: the session it moves is the
  company's usual one, measured on its past reports (after-close when most past reactions came the
  session after the report date; the larger of the two sessions' moves decides for an unknown-time
  past report); after-close when there is no past report.

The calendar is the ``HistoricalEarningsData`` wheel (:func:`company_events`); it covers about half
of the stocknet names (``docs/evaluation.md``, "Risk", lists those it does not).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Final, Literal

import numpy as np
import pandas as pd

from agents.data.fundamentals.earnings import (
    ANNOUNCE_WINDOW_DAYS,
    TICKER_ALIASES,
    CalendarUnavailableError,
    EarningsCalendar,
    EarningsEvent,
    calendar_symbol,
    default_calendar,
)

#: A report projected a year on: the same weekday 52 weeks later.
PROJECT_DAYS: Final = 364
#: A projected date within this many days of a known report is the same quarter: dropped.
SAME_QUARTER_DAYS: Final = 30
#: Projected dates are only needed this far ahead (60 sessions are ~87 calendar days).
PROJECT_AHEAD_DAYS: Final = 120

Source = Literal["announced", "projected"]


@dataclass(frozen=True)
class PastMove:
    """A past report's reaction: ``first``/``last`` index of its reaction sessions in the bars,
    ``log_move`` their summed log return (a fraction), the report's date and time of day."""

    report_date: date
    time_of_day: str
    first: int
    last: int
    log_move: float


@dataclass(frozen=True)
class Upcoming:
    """A report expected after the origin: its date, time of day, ``source`` (announced or
    projected) and ``offset``, the number of sessions from the origin to the session that carries
    its reaction (1 = the next session)."""

    report_date: date
    time_of_day: str
    source: Source
    offset: int


def company_events(symbol: str, *, calendar: EarningsCalendar | None = None) -> list[EarningsEvent] | None:
    """Every report of ``symbol``'s company in the earnings calendar, oldest first, or None when
    the calendar has none (no coverage).

    Dates are the company's, whatever share class: the rows of every ticker the calendar files
    the company under (:data:`~agents.data.fundamentals.earnings.TICKER_ALIASES`: FB's under META,
    GOOG's before 2014-04-03 under GOOGL) are merged, one report per date. This is *not* point in
    time: :func:`past_moves` and :func:`upcoming` apply the rules of the module docstring.

    Raises:
        CalendarUnavailableError: the calendar package is missing or unreadable.
    """
    cal = calendar if calendar is not None else default_calendar()
    upper = symbol.upper().replace("-", ".")
    tickers = {upper, calendar_symbol(upper, date.max)[0]}
    tickers |= {a.calendar_symbol for a in TICKER_ALIASES if a.symbol == upper}
    by_day: dict[date, EarningsEvent] = {}
    for ticker in sorted(tickers):
        for event in cal.events(ticker):
            known = by_day.get(event.report_date)
            if known is None or (known.time_of_day == "unknown" and event.time_of_day != "unknown"):
                by_day[event.report_date] = event
    if not by_day:
        return None
    return [by_day[d] for d in sorted(by_day)]


def is_reported(event: EarningsEvent, origin: date) -> bool:
    """Whether ``event`` was reported by the close of ``origin`` (the calendar's rule: before it, or
    on it before the close)."""
    if event.report_date < origin:
        return True
    return event.report_date == origin and event.time_of_day in ("before_open", "during_market")


def reaction_indices(event: EarningsEvent, dates: np.ndarray) -> tuple[int, int] | None:
    """First and last index in ``dates`` (``datetime64[D]``, ascending sessions) of ``event``'s
    reaction sessions (module docstring), or None when the first lies past the last date:
    :func:`reaction_spans` of the one event (the rule is written once, there)."""
    first, last = reaction_spans([event], dates)
    if int(first[0]) >= len(dates):
        return None
    return int(first[0]), int(last[0])


def reaction_spans(events: Sequence[EarningsEvent], dates: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The first and last index in ``dates`` (``datetime64[D]``, ascending sessions) of each
    event's reaction sessions (module docstring: the report's session when it came before the
    open or during the market, the next one after the close, both when the time is unknown):
    ``(first, last)`` ``(len(events),)`` int64, ``first == len(dates)`` where the first reaction
    session lies past the last date. Two binary searches for all the events at once."""
    n = len(dates)
    days = np.array([e.report_date for e in events], dtype="datetime64[D]")
    on_or_after = np.searchsorted(dates, days, side="left").astype(np.int64)
    after = np.searchsorted(dates, days, side="right").astype(np.int64)
    when = np.array([e.time_of_day for e in events], dtype=object)
    first = np.where(when == "after_close", after, on_or_after)
    last = np.where(when == "unknown", on_or_after + 1, first)
    first = np.minimum(first, n)
    return first, np.minimum(last, n - 1)


def _known_prefix(events: Sequence[EarningsEvent], keep: Callable[[EarningsEvent], bool]) -> int:
    """How many of ``events`` come before the first one ``keep(event)`` refuses (the loops over
    the calendar stop there)."""
    for i, event in enumerate(events):
        if not keep(event):
            return i
    return len(events)


def earnings_mask(events: Sequence[EarningsEvent], dates: np.ndarray) -> np.ndarray:
    """Boolean mask over ``dates``: the reaction sessions of every report dated on or before the
    last date (all of them known at that origin, module docstring)."""
    mask = np.zeros(len(dates), dtype=bool)
    if len(dates) == 0:
        return mask
    last_day = pd.Timestamp(dates[-1]).date()
    known = events[: _known_prefix(events, lambda e: e.report_date <= last_day)]
    if not known:
        return mask
    first, last = reaction_spans(known, dates)
    for lo, hi in zip(first.tolist(), last.tolist(), strict=True):
        if lo < len(dates):
            mask[lo : hi + 1] = True
    return mask


def past_moves(events: Sequence[EarningsEvent], dates: np.ndarray, log_ret: np.ndarray) -> list[PastMove]:
    """The reports whose moves are known at the last date of ``dates`` (reported, every reaction
    session on or before it, the first after index 0), oldest first."""
    if len(dates) == 0:
        return []
    origin = pd.Timestamp(dates[-1]).date()
    known = events[: _known_prefix(events, lambda e: is_reported(e, origin))]
    if not known:
        return []
    out: list[PastMove] = []
    spans = reaction_spans(known, dates)
    for event, first, last in zip(known, *(a.tolist() for a in spans), strict=True):
        if first >= len(dates) or first < 1:
            continue
        if event.time_of_day == "unknown" and last == first:
            continue  # its second session is not there yet
        out.append(
            PastMove(
                report_date=event.report_date,
                time_of_day=event.time_of_day,
                first=first,
                last=last,
                log_move=float(np.sum(log_ret[first : last + 1])),
            )
        )
    return out


def after_close_habit(moves: Sequence[PastMove], log_ret: np.ndarray) -> bool:
    """Whether the company's reports usually move the session *after* their date (module
    docstring, "Timing habit"); True with no past report."""
    after = before = 0
    for move in moves:
        if move.time_of_day == "after_close":
            after += 1
        elif move.time_of_day in ("before_open", "during_market"):
            before += 1
        elif move.last > move.first:
            first_abs, second_abs = abs(log_ret[move.first]), abs(log_ret[move.last])
            if second_abs > first_abs:
                after += 1
            else:
                before += 1
    return after >= before


_NYSE: list[np.ndarray] = []


def nyse_sessions() -> np.ndarray:
    """The NYSE's sessions (``datetime64[D]``, :func:`agents.data.market_calendar.session_days`;
    read once per process)."""
    if not _NYSE:
        from agents.data.market_calendar import session_days

        _NYSE.append(session_days())
    return _NYSE[0]


def _sessions_between(origin: date, day: date, sessions: np.ndarray) -> int:
    """Sessions in ``(origin, day]``: from ``sessions`` where it reaches, else weekdays."""
    d = np.datetime64(day, "D")
    if len(sessions) and d <= sessions[-1]:
        lo = int(np.searchsorted(sessions, np.datetime64(origin, "D"), side="right"))
        hi = int(np.searchsorted(sessions, d, side="right"))
        return hi - lo
    return int(np.busday_count(origin + timedelta(days=1), day + timedelta(days=1)))


def _reaction_offset(event: EarningsEvent, origin: date, after_habit: bool, sessions: np.ndarray) -> int:
    """Sessions from ``origin`` to the session carrying ``event``'s reaction (0: already passed)."""
    on_or_before = _sessions_between(origin, event.report_date, sessions)
    day_is_session = (
        _sessions_between(event.report_date - timedelta(days=1), event.report_date, sessions) == 1
    )
    # the first session on or after the report date
    first_on_or_after = on_or_before if day_is_session else on_or_before + 1
    if event.time_of_day == "after_close" or (event.time_of_day == "unknown" and after_habit):
        return on_or_before + 1
    return first_on_or_after


def upcoming(
    events: Sequence[EarningsEvent],
    origin: date,
    *,
    after_habit: bool,
    max_offset: int,
    sessions: np.ndarray | None = None,
) -> list[Upcoming]:
    """Reports whose reaction falls in the next ``max_offset`` sessions after ``origin``: the
    announced ones, then the projected ones (module docstring), by offset.

    Args:
        events: the company's reports (:func:`company_events`), oldest first.
        origin: the forecast origin (a session).
        after_habit: :func:`after_close_habit` of the company's past moves.
        max_offset: the longest horizon, in sessions.
        sessions: trading sessions (``datetime64[D]``) to count with (None: the NYSE's,
            :func:`nyse_sessions`); weekdays past their end.
    """
    if sessions is None:
        sessions = nyse_sessions()
    announce_end = origin + timedelta(days=ANNOUNCE_WINDOW_DAYS)
    known: list[tuple[EarningsEvent, Source]] = []
    known_days: list[date] = []
    for event in events:
        if is_reported(event, origin):
            known_days.append(event.report_date)
        elif event.report_date <= announce_end:
            known.append((event, "announced"))
            known_days.append(event.report_date)
    for event in events:
        if event.report_date > origin:
            break
        if event.report_date < origin - timedelta(days=PROJECT_DAYS + SAME_QUARTER_DAYS):
            continue
        projected = event.report_date + timedelta(days=PROJECT_DAYS)
        if projected <= announce_end or projected > origin + timedelta(days=PROJECT_AHEAD_DAYS):
            continue
        if any(abs((projected - d).days) <= SAME_QUARTER_DAYS for d in known_days):
            continue
        known.append(
            (
                EarningsEvent(
                    symbol=event.symbol,
                    report_date=projected,
                    time_of_day=event.time_of_day,
                    eps_estimate=None,
                    eps_actual=None,
                    surprise=None,
                ),
                "projected",
            )
        )
        known_days.append(projected)
    out: list[Upcoming] = []
    for event, source in known:
        offset = _reaction_offset(event, origin, after_habit, sessions)
        if 1 <= offset <= max_offset:
            out.append(
                Upcoming(
                    report_date=event.report_date, time_of_day=event.time_of_day, source=source, offset=offset
                )
            )
    return sorted(out, key=lambda u: u.offset)


__all__ = [
    "CalendarUnavailableError",
    "PastMove",
    "Upcoming",
    "after_close_habit",
    "company_events",
    "earnings_mask",
    "is_reported",
    "nyse_sessions",
    "past_moves",
    "reaction_indices",
    "reaction_spans",
    "upcoming",
]
