"""Stock splits since 2000 of the companies whose earnings the P/E tool can put on a price's
share basis (:mod:`agents.data.fundamentals.trailing`).

Why a table: the earnings calendar (``HistoricalEarningsData``) records EPS split-adjusted to the
share count when it was scraped (mid 2025), while a price at ``as_of`` is per share *then*; a
trailing P/E needs both on one basis, so it needs every split between ``as_of`` and 2025. No
offline package here ships split history (the embedded prices reveal only splits inside their
own span, through ``Adj Close / Close``; yfinance's ``Ticker.splits`` needs the network), so
the splits are listed here, each with the company's announcement. The list of a
symbol is complete from :attr:`SplitHistory.complete_from` through :data:`CHECKED_THROUGH`; a
symbol without an entry gets no P/E (null with the reason), never a P/E on a guessed basis.

Cross-checked in the tests against an independent source: QuantConnect Lean's factor files
(``../shared/data/ohlcv/lean/factor_files``: cumulative ``split_factor`` of AAPL 1/56 before
2005-02-28, 1/28 before 2014-06-09, 1/4 before 2020-08-31; GOOGL 1/2 before 2014-04-03) and the
embedded data's own ``Adj Close / Close`` jump at AAPL's 2005-02-28 split.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from fractions import Fraction
from typing import Final

#: The day through which every listed history is complete: the calendar's scrape (its last
#: AAPL row is dated 2025-07-30).
CHECKED_THROUGH: Final = date(2025, 7, 31)


@dataclass(frozen=True)
class Split:
    """One split: from ``ex_date`` on, each old share is ``ratio`` new shares (7 for 7-for-1,
    3/2 for 3-for-2); ``source`` names the announcement."""

    ex_date: date
    ratio: Fraction
    source: str


@dataclass(frozen=True)
class SplitHistory:
    """Every split of one ticker between ``complete_from`` and :data:`CHECKED_THROUGH`."""

    symbol: str
    complete_from: date
    splits: tuple[Split, ...]


_Y2K: Final = date(2000, 1, 1)

#: Keyed by the ticker the earnings calendar files the company under (FB → META, old GOOG → GOOGL).
SPLIT_HISTORIES: Final[dict[str, SplitHistory]] = {
    h.symbol: h
    for h in (
        SplitHistory(
            "AAPL",
            _Y2K,
            (
                Split(date(2000, 6, 21), Fraction(2), "Apple 2-for-1 split"),
                Split(
                    date(2005, 2, 28),
                    Fraction(2),
                    "Apple 2-for-1 split, announced 2005-02-11",
                ),
                Split(
                    date(2014, 6, 9),
                    Fraction(7),
                    "Apple 7-for-1 split, announced with Q2 FY2014 results on 2014-04-23",
                ),
                Split(
                    date(2020, 8, 31),
                    Fraction(4),
                    "Apple 4-for-1 split, announced with Q3 FY2020 results on 2020-07-30",
                ),
            ),
        ),
        SplitHistory(
            "MSFT",
            _Y2K,
            (
                Split(
                    date(2003, 2, 18),
                    Fraction(2),
                    "Microsoft 2-for-1 split, announced 2003-01-16",
                ),
            ),
        ),
        SplitHistory("IBM", _Y2K, ()),  # last split 1999-05-27 (2-for-1)
        SplitHistory("META", date(2012, 5, 18), ()),  # no split since the IPO (as FB)
        SplitHistory(
            "GOOGL",
            date(2004, 8, 19),
            (
                # The Class C dividend: one GOOG (class C) share per class A share; the class A
                # price (ticker GOOG until then, GOOGL after) halved.
                Split(
                    date(2014, 4, 3),
                    Fraction(2),
                    "Google Class C capital stock dividend (1 class C per class A share)",
                ),
                Split(
                    date(2022, 7, 18),
                    Fraction(20),
                    "Alphabet 20-for-1 stock split, announced with Q4 2021 results on 2022-02-01",
                ),
            ),
        ),
        SplitHistory(
            "AMZN",
            _Y2K,
            (
                Split(
                    date(2022, 6, 6),
                    Fraction(20),
                    "Amazon 20-for-1 split, announced 2022-03-09",
                ),
            ),
        ),
        SplitHistory(
            "WMT",
            _Y2K,
            (
                Split(
                    date(2024, 2, 26),
                    Fraction(3),
                    "Walmart 3-for-1 split, announced 2024-01-30",
                ),
            ),
        ),
        SplitHistory(
            "TSLA",
            date(2010, 6, 29),
            (
                Split(
                    date(2020, 8, 31),
                    Fraction(5),
                    "Tesla 5-for-1 split, announced 2020-08-11",
                ),
                Split(
                    date(2022, 8, 25), Fraction(3), "Tesla 3-for-1 split, approved by shareholders 2022-08-04"
                ),
            ),
        ),
    )
}


def split_factor(symbol: str, *, after: date, through: date = CHECKED_THROUGH) -> Fraction | None:
    """Shares at ``through`` per share held at the close of ``after``: the product of the
    ratios of the splits with ``after < ex_date <= through`` (1 when none).

    Returns None when the table has no history of ``symbol`` or its history does not reach
    back to ``after`` (the basis cannot be known).
    """
    history = SPLIT_HISTORIES.get(symbol.upper())
    if history is None or after < history.complete_from:
        return None
    factor = Fraction(1)
    for split in history.splits:
        if after < split.ex_date <= through:
            factor *= split.ratio
    return factor
