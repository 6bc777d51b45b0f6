"""The risk-free rate of a quote day from a shipped daily series: the 3-month Treasury bill
(FRED ``DTB3``, discount basis; provenance in ``agents/quant/options/data/README.md``).

Why a series and not parity: the offline chains hold few expiries near the quote day (the CBOE
SPY file's are 0–14 days), where ``r·T`` is a fraction of a cent per USD and the bid/ask noise of
the parity forward swamps it; a dated public rate is measured, stated and reproducible.

Conversion: DTB3 is a bank-discount yield ``d`` (percent, 360-day year) on a 91-day bill; its
price is ``P = 1 − d·91/360`` and the continuously compounded rate on a 365-day year (the
pricing's ``t = DTE/365``) is ``r = −ln(P) / (91/365)`` (Hull, "Interest rates": day counts and
compounding). 2025-05-16: d = 4.25 % → r = 0.04332.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from datetime import date, timedelta
from functools import cache
from pathlib import Path

#: The shipped series (FRED DTB3 rows from 2012; README beside it).
SERIES_PATH = Path(__file__).parent / "data" / "dtb3.csv"
#: What a rate from the series cites.
SERIES_SOURCE = "FRED DTB3 (3-month T-bill, discount basis)"
#: Days a bill of the series runs (13 weeks) and the day counts of the conversion.
BILL_DAYS = 91
#: The latest observation may be this many calendar days before the quote day (long weekends,
#: holidays); older → no rate.
MAX_STALENESS_DAYS = 7


class RateUnavailableError(LookupError):
    """The series has no observation within :data:`MAX_STALENESS_DAYS` before the day."""


@dataclass(frozen=True)
class RiskFreeRate:
    """``rate``: continuously compounded, fraction/year (act/365); ``observed``: the series day
    used; ``discount_yield``: the series value (percent, discount basis); ``source``."""

    rate: float
    observed: date
    discount_yield: float
    source: str = SERIES_SOURCE


def continuous_from_discount(discount_pct: float, *, days: int = BILL_DAYS) -> float:
    """Continuously compounded rate (fraction/year, act/365) of a bill quoted at
    ``discount_pct`` (percent, act/360 bank discount) with ``days`` to maturity."""
    price = 1.0 - discount_pct / 100.0 * days / 360.0
    if price <= 0:
        raise ValueError(f"discount yield {discount_pct} % gives a non-positive bill price")
    return -math.log(price) / (days / 365.0)


@cache
def _series() -> dict[date, float]:
    out: dict[date, float] = {}
    with SERIES_PATH.open(newline="") as fh:
        for row in csv.DictReader(fh):
            value = (row.get("DTB3") or "").strip()
            if value and value != ".":
                out[date.fromisoformat(row["observation_date"])] = float(value)
    return out


def series_end() -> date:
    """The last day the shipped series has a value."""
    return max(_series())


def risk_free_rate(day: date) -> RiskFreeRate:
    """The rate of ``day``: the latest series observation on or before it (never a later one).

    Raises:
        RateUnavailableError: no observation in the :data:`MAX_STALENESS_DAYS` before ``day``
            (before 2012 or after the series ends).
    """
    series = _series()
    for back in range(MAX_STALENESS_DAYS + 1):
        seen = day - timedelta(days=back)
        if seen in series:
            d = series[seen]
            return RiskFreeRate(rate=continuous_from_discount(d), observed=seen, discount_yield=d)
    first, last = min(series), max(series)
    raise RateUnavailableError(
        f"no {SERIES_SOURCE} observation in the {MAX_STALENESS_DAYS} days up to {day} "
        f"(series {first} .. {last}); set FINAGENT_OPTIONS_RISK_FREE_RATE"
    )
