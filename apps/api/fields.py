"""Field types of the HTTP gateway's inputs: each one checks a rule and states the same rule in
the OpenAPI document (a JSON-schema ``pattern``, ``enum`` or bounds), so a request valid by the
schema is one the gateway accepts the form of, and a request outside it is a 422 naming the
field.

The checks are the project's own (``core.tickers``, ``core.dates``,
``apps.watchlists``): their messages explain the rule, and the CLI applies the same ones.
Patterns use ASCII classes only, so ECMA-262 (JSON schema) and Python ``re`` read them alike;
they are applied with ``re.fullmatch``.

What a schema cannot state is checked later and answered 422 too (documented in docs/api.md):
whether the data knows a ticker or has bars at a date, whether a date is in the future, which
ticker a free-text question names.
"""

from __future__ import annotations

import re
from datetime import date
from typing import Annotated, Any, Final

from pydantic import AfterValidator, BeforeValidator, Field, Strict, WithJsonSchema

from apps import watchlists
from core.dates import DATE_PATTERN, DATE_RULE, parse_iso_date
from core.tickers import TICKER_PATTERN, TICKER_TEXT_MAX_LENGTH, clip, strict_ticker

#: An analysis id as the gateway hands it out (``str(uuid4())``; watchlist and backtest
#: analyses: ``str(uuid5(...))``): a UUID in 8-4-4-4-12 hex digits.
ANALYSIS_ID_PATTERN: Final = r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$"
_ANALYSIS_ID_RE: Final = re.compile(ANALYSIS_ID_PATTERN)
#: ``Idempotency-Key``: 1-200 visible ASCII characters (no spaces), e.g. a UUID.
IDEMPOTENCY_KEY_PATTERN: Final = r"^[!-~]{1,200}$"
#: A signed chart link: ``expires`` (Unix seconds) and ``sig`` (HMAC-SHA256, lower-case hex).
EXPIRES_PATTERN: Final = r"^[0-9]{1,12}$"
SIGNATURE_PATTERN: Final = r"^[0-9a-f]{64}$"
#: Largest page offset (``offset`` of ``GET /analyses`` and ``GET /audit``): beyond any real
#: table here, and inside a 64-bit SQL integer (a fuzzer's offset=7e25 overflowed → 500).
MAX_OFFSET: Final = 10_000_000


def _date(field: str) -> Any:
    """A ``BeforeValidator`` reading a date by :func:`core.dates.parse_iso_date`."""
    return BeforeValidator(lambda value: parse_iso_date(value, field=field))


def _matching(pattern: str, what: str) -> Any:
    """An ``AfterValidator`` refusing a string that does not fully match ``pattern``; the
    message says ``what`` is expected and repeats at most 80 characters of the value."""
    compiled = re.compile(pattern)

    def check(value: str) -> str:
        if not compiled.fullmatch(value):
            raise ValueError(f"{clip(value, 80)!r} is not {what}")
        return value

    return AfterValidator(check)


def _ticker(value: str) -> str:
    return strict_ticker(value)  # JunkInputError / InvalidTickerError are ValueErrors


def _date_schema(description: str) -> WithJsonSchema:
    return WithJsonSchema(
        {"type": "string", "format": "date", "pattern": DATE_PATTERN, "description": description}
    )


#: A ticker as sent: 1-5 letters of either case, optionally ``.`` or ``-`` and a 1-2 letter
#: class (``AAPL``, ``brk.b``); answered upper-cased.
Ticker = Annotated[
    str,
    AfterValidator(_ticker),
    WithJsonSchema(
        {
            "type": "string",
            "pattern": TICKER_PATTERN,
            "minLength": 1,
            "maxLength": TICKER_TEXT_MAX_LENGTH,
            "description": "Ticker: 1-5 letters, optionally a class suffix (BRK.B, BRK-A); any case.",
            "examples": ["AAPL", "BRK.B"],
        }
    ),
]

#: A date that starts work: ``YYYY-MM-DD`` from 1900-01-01 on (not in the future: checked by the
#: service against its clock).
AsOfDate = Annotated[date, _date("as_of"), _date_schema(f"Analysis date: {DATE_RULE}, not in the future.")]
RunDate = Annotated[
    date,
    _date("run_date"),
    _date_schema(f"Run date: {DATE_RULE}, not after today in the watchlist's time zone."),
]
#: A date that selects: ``YYYY-MM-DD`` from 1900-01-01 on (a future one selects nothing).
RunDateKey = Annotated[date, _date("run_date"), _date_schema(f"The run's date: {DATE_RULE}.")]
SinceDate = Annotated[
    date, _date("since"), _date_schema(f"Only recommendations from this date on: {DATE_RULE}.")
]

AnalysisId = Annotated[
    str,
    _matching(ANALYSIS_ID_PATTERN, "an analysis id (a UUID such as POST /analyze returns)"),
    WithJsonSchema(
        {
            "type": "string",
            "format": "uuid",
            "pattern": ANALYSIS_ID_PATTERN,
            "description": "The analysis id returned by POST /analyze (a UUID).",
        }
    ),
]

WatchlistName = Annotated[
    str,
    _matching(
        watchlists.NAME_PATTERN,
        "a watchlist name (1-64 of letters, digits, '_', '.', '-', starting with a letter or digit)",
    ),
    WithJsonSchema(
        {
            "type": "string",
            "pattern": watchlists.NAME_PATTERN,
            "minLength": 1,
            "maxLength": 64,
            "description": "1-64 of letters, digits, '_', '.', '-', starting with a letter or digit.",
            "examples": ["tech"],
        }
    ),
]

#: A backtest's name: the rule of ``apps.backtest.NAME_RE``, which is the watchlists' (a
#: test holds them equal; that module is not imported here: it loads the backtest repository).
BACKTEST_NAME_PATTERN: Final = watchlists.NAME_PATTERN
BacktestName = Annotated[
    str,
    _matching(
        BACKTEST_NAME_PATTERN,
        "a backtest name (1-64 of letters, digits, '_', '.', '-', starting with a letter or digit)",
    ),
    WithJsonSchema(
        {
            "type": "string",
            "pattern": BACKTEST_NAME_PATTERN,
            "minLength": 1,
            "maxLength": 64,
            "description": "A backtest's name (as given to `finagent backtest`).",
        }
    ),
]

Schedule = Annotated[
    str,
    AfterValidator(watchlists.check_schedule),
    WithJsonSchema(
        {
            "type": "string",
            "pattern": watchlists.SCHEDULE_PATTERN,
            "maxLength": watchlists.SCHEDULE_MAX_LENGTH,
            "description": (
                "5 cron fields separated by one space: minute 0-59, hour 0-23, day of month "
                "1-31, month 1-12, day of week 0-6 (0 = Sunday) or sun-sat; each a comma list "
                "of *, */step, v, v-v or v-v/step (step 1-99)."
            ),
            "examples": ["30 21 * * 1-5", "0 8 * * mon-fri"],
        }
    ),
]

TimeZone = Annotated[
    str,
    AfterValidator(watchlists.check_timezone),
    WithJsonSchema(
        {
            "type": "string",
            "enum": list(watchlists.TIME_ZONES),
            "description": "IANA time zone of the schedule and of run dates.",
            "examples": ["America/New_York"],
        }
    ),
]


def _whole(value: object) -> object:
    """A float with no fraction as an int (JSON schema's ``integer`` includes ``3.0``); any
    other value unchanged, for the strict int check to refuse (``"3"``, ``true``, ``3.5``)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


#: 1-10 passes of the pipeline, a JSON integer (``3`` or ``3.0``; not ``"3"``, ``true`` or ``3.5``).
MaxIterations = Annotated[int, Field(ge=1, le=10), Strict(), BeforeValidator(_whole)]
