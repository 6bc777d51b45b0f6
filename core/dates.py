"""The dates a request may name: one rule for the HTTP gateway, the CLI and the services.

* Written ``YYYY-MM-DD`` (ISO 8601 calendar date), nothing else: not a number (``0`` is not
  1970-01-01), not a date-time, not ``20120629``.
* Not before :data:`EARLIEST_DATE` (1900-01-01): no market data this service reads goes back
  further, and date arithmetic near year 1 overflows (``date(1, 1, 1) - timedelta(days=14)``).
* A date that starts work (an analysis's ``as_of``, a watchlist run's ``run_date``) is not in
  the future; the caller says what "today" is (UTC for an analysis, the watchlist's time zone
  for a run). A date that only selects (``since``, a run looked up by date) may be any date
  from :data:`EARLIEST_DATE` on: a future one selects nothing.

:data:`DATE_PATTERN` states the first two rules as a JSON-schema pattern (ECMA-262 and Python
agree on it: ASCII classes only), so the OpenAPI document and the check are the same rule.
"""

from __future__ import annotations

import re
from datetime import date
from typing import Final

EARLIEST_DATE: Final = date(1900, 1, 1)
#: ``YYYY-MM-DD`` from year 1900 on, month 01-12, day 01-31 (the calendar check is
#: :func:`parse_iso_date`'s: 2013-02-30 matches the pattern and is refused).
DATE_PATTERN: Final = r"^(19[0-9]{2}|[2-9][0-9]{3})-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])$"
_DATE_RE: Final = re.compile(DATE_PATTERN)
#: What every date error says is expected.
DATE_RULE: Final = f"a date written YYYY-MM-DD, from {EARLIEST_DATE.isoformat()} on"


class DateRuleError(ValueError):
    """A date that breaks the rule of this module; the message names the field and the value."""


def parse_iso_date(value: object, *, field: str) -> date:
    """``value`` as a date: a ``YYYY-MM-DD`` string from :data:`EARLIEST_DATE` on, or a
    ``date`` (not a ``datetime``) in that range.

    Raises:
        DateRuleError: anything else (a number, a date-time, another spelling, 2013-02-30,
            1899-12-31); the message repeats at most 40 characters of the value.
    """
    if type(value) is date:
        return check_date(value, field=field)
    if not isinstance(value, str) or not _DATE_RE.fullmatch(value):
        shown = repr(value)[:40]
        raise DateRuleError(f"{field} must be {DATE_RULE}, e.g. 2012-06-29; got {shown}")
    try:
        return date.fromisoformat(value)
    except ValueError as exc:
        raise DateRuleError(f"{field} {value} is not a calendar date") from exc


def check_date(value: date, *, field: str, today: date | None = None, where: str = "UTC") -> date:
    """``value`` if it is not before :data:`EARLIEST_DATE` and, when ``today`` is given, not
    after it (``where`` names the clock of ``today`` in the message, e.g. ``UTC`` or a time zone).

    Raises:
        DateRuleError: the message names ``field``, the value and the bound it crossed.
    """
    if value < EARLIEST_DATE:
        raise DateRuleError(
            f"{field} {value.isoformat()} is before {EARLIEST_DATE.isoformat()}, the earliest date accepted"
        )
    if today is not None and value > today:
        raise DateRuleError(
            f"{field} {value.isoformat()} is in the future (today is {today.isoformat()} {where})"
        )
    return value
