"""Trailing EPS, P/E, EPS growth and surprise history from the earnings calendar, point in time.

Source: the reported EPS of :mod:`agents.data.fundamentals.earnings` (``HistoricalEarningsData``: the
quarterly "reported EPS" Yahoo compares with the consensus, usually the company's adjusted
figure, not GAAP diluted EPS). Only reports known at the close of ``as_of`` are used.

* ``eps_ttm`` (``eps_actual``) = the sum of the last four reported quarters' EPS, converted to
  the share count of ``as_of``: the calendar records EPS split-adjusted to mid-2025 share counts,
  so the sum is multiplied by the splits between ``as_of`` and 2025
  (:func:`agents.data.fundamentals.splits.split_factor`). Example, AAPL at 2013-03-01: quarters
  0.44 + 0.33 + 0.31 + 0.49 = 1.57 USD on 2025 shares; × 28 (7-for-1 in 2014, 4-for-1 in 2020)
  = 43.96 USD per 2013 share (Apple printed 12.30 + 9.32 + 8.67 + 13.81 = 44.10).
* ``pe_ratio`` = close traded on the last bar ≤ ``as_of`` (raw, not adjusted: the price of a
  2013 share) / ``eps_ttm``; null when ``eps_ttm`` ≤ 0 (P/E is not meaningful for losses).
  The embedded prices' ``Close`` is as traded (AAPL 2013-03-01: 430.47 USD; its ``Adj Close``
  carries the later 7-for-1 split), so the raw close and the converted EPS share one basis.
  The close comes from the tools' bars, already on the shares of ``as_of``: a source whose
  ``Close`` divides out a later split inside its own span (stocknet's CSVs: AAPL 92.48 on
  2014-06-05, as traded 647.35) is multiplied back there
  (:mod:`agents.data.fundamentals.share_basis`); when that basis could not be told the
  :class:`Price` carries the reason and the P/E is null with it.
* ``eps_growth_yoy`` = ``eps_ttm`` / (sum of the four quarters before those) − 1, both sums on
  the calendar's basis (the split factor cancels); null when the earlier sum is ≤ 0.
* ``eps_surprise_mean_4q`` = mean of the four quarters' surprises (fractions, as recorded).

Precision: the calendar rounds each quarter to 0.01 USD on 2025 shares, so a sum of four can be
off by 0.02 USD there; the values are refused (null with the reason) when that bound exceeds
:data:`MAX_ROUNDING_ERROR` of the sum (old AAPL quarters read 0.01–0.03 after a factor of 56).
Coverage: four reports with an EPS, no gap over ``MAX_QUARTER_GAP_DAYS`` between them, the
newest at most ``MAX_QUARTER_GAP_DAYS`` before ``as_of``; otherwise null with the reason.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import date
from itertools import pairwise
from typing import Any, Final

from agents.data.fundamentals.earnings import MAX_QUARTER_GAP_DAYS, EarningsCalendar, calendar_symbol
from agents.data.fundamentals.offline import SourceValues
from agents.data.fundamentals.splits import CHECKED_THROUGH, split_factor
from core.display import percent

#: Largest accepted relative rounding error of the four-quarter sum (see module docstring).
MAX_ROUNDING_ERROR: Final = 0.05
#: Half a cent: the calendar's EPS are rounded to 0.01 USD.
_HALF_CENT: Final = 0.005
#: The calendar's GOOG (class C) rows of 2014-2015 are not adjusted for the 2022 20-for-1 split
#: (6.88 for Q4 2014) while GOOGL's are; both classes have the same earnings per share, so the
#: class A rows serve both.
EPS_ROWS_OF: Final = {"GOOG": "GOOGL"}

TRAILING_FIELDS: Final = ("pe_ratio", "eps_actual", "eps_growth_yoy", "eps_surprise_mean_4q")


@dataclass(frozen=True)
class Price:
    """The close traded on ``day`` (the last bar ≤ as_of), USD per share of that day, and the
    citation of its source; ``basis_reason`` says why the close may not be on the shares of
    ``day`` (:class:`agents.data.fundamentals.share_basis.ShareBasis` ``reason``), else None."""

    close: float
    day: date
    ref: str
    basis_reason: str | None = None


@dataclass
class Trailing:
    """Result of :func:`trailing_values`: the merged-source ``values`` (None with a ``reasons``
    entry each) and ``detail`` (quarters used, split factor, price) for the tool's output."""

    values: SourceValues
    detail: dict[str, Any] = field(default_factory=dict)


def _reason_all(reason: str) -> dict[str, str]:
    return dict.fromkeys(TRAILING_FIELDS, reason)


def _four(quarters: list[dict[str, Any]], as_of: date) -> str | None:
    """Why ``quarters`` (newest first) are not four consecutive reported quarters, else None."""
    if len(quarters) < 4:
        return f"the calendar has {len(quarters)} reported quarter(s) by as_of; four are needed"
    missing = [q["date"] for q in quarters[:4] if q.get("eps_actual") is None]
    if missing:
        return f"the calendar records no reported EPS for {', '.join(missing)}"
    days = [date.fromisoformat(q["date"]) for q in quarters[:4]]
    if (as_of - days[0]).days > MAX_QUARTER_GAP_DAYS:
        return (
            f"the last report in the calendar ({days[0]}) is more than {MAX_QUARTER_GAP_DAYS} days "
            "before as_of"
        )
    for newer, older in pairwise(days):
        if (newer - older).days > MAX_QUARTER_GAP_DAYS:
            return f"the calendar misses a quarter between {older} and {newer}"
    return None


def trailing_values(
    calendar: EarningsCalendar,
    symbol: str,
    as_of: date,
    *,
    price: Price | None,
    price_reason: str | None = None,
) -> Trailing | None:
    """Trailing EPS, P/E, EPS growth and mean surprise of ``symbol`` at ``as_of`` (module
    docstring), as a :class:`SourceValues` (source ``earnings_ttm``, dated ``as_of``) for
    :func:`agents.data.fundamentals.offline.fundamentals_at`. ``price`` is the as-of close on the
    shares of ``as_of`` (None → ``pe_ratio`` null with ``price_reason``; a ``basis_reason`` →
    null with it). Returns None when the calendar lacks the symbol.
    """
    rows_symbol = EPS_ROWS_OF.get(symbol.upper(), symbol.upper())
    entry = calendar.at(rows_symbol, as_of, recent=8)
    if entry is None:
        return None
    cal_symbol = entry["calendar_symbol"] or calendar_symbol(rows_symbol, as_of)[0]
    quarters: list[dict[str, Any]] = entry["recent"]
    values = SourceValues(source="earnings_ttm", ref=calendar.ref, dated=as_of, values={})
    why = _four(quarters, as_of)
    if why is not None:
        values.reasons = _reason_all(why)
        return Trailing(values=values)
    last4 = quarters[:4]
    refs = [calendar.citation(cal_symbol, date.fromisoformat(q["date"])) for q in last4]
    values.ref = f"{calendar.ref}#{cal_symbol}@{last4[-1]['date']}..{last4[0]['date']} (4 reported quarters)"
    sum_2025 = round(sum(float(q["eps_actual"]) for q in last4), 6)
    surprises = [float(q["surprise"]) for q in last4 if q.get("surprise") is not None]
    if surprises:
        values.values["eps_surprise_mean_4q"] = round(sum(surprises) / len(surprises), 6)
    else:
        values.reasons["eps_surprise_mean_4q"] = "the calendar records no surprise for the last four quarters"
    prior = quarters[4:8]
    if _four(prior, date.fromisoformat(last4[-1]["date"])) is None:
        prior_sum = sum(float(q["eps_actual"]) for q in prior)
        if prior_sum > 0:
            values.values["eps_growth_yoy"] = round(sum_2025 / prior_sum - 1.0, 6)
        else:
            values.reasons["eps_growth_yoy"] = "the earlier four quarters' EPS sum is not positive"
    else:
        values.reasons["eps_growth_yoy"] = "the calendar lacks the four quarters before the last four"
    detail: dict[str, Any] = {
        "calendar_symbol": cal_symbol,
        "quarters": last4,
        "eps_ttm_calendar_basis": sum_2025,
        "source_refs": refs,
    }
    factor = split_factor(cal_symbol, after=as_of)
    if factor is None:
        reason = (
            f"no split history of {cal_symbol} on file (agents/data/fundamentals/splits.py): the calendar's "
            "EPS is on 2025 share counts and cannot be put on the as-of share basis"
        )
        values.reasons.update({"pe_ratio": reason, "eps_actual": reason})
        return Trailing(values=values, detail=detail)
    detail["split_factor"] = str(factor)
    detail["split_basis"] = f"splits after {as_of.isoformat()} through {CHECKED_THROUGH.isoformat()}"
    if sum_2025 == 0 or 4 * _HALF_CENT / abs(sum_2025) > MAX_ROUNDING_ERROR:
        reason = (
            f"the calendar's EPS sum {sum_2025} (2025 shares, rounded to 0.01 per quarter) is too small "
            f"to convert within {percent(MAX_ROUNDING_ERROR, digits=0)}"
        )
        values.reasons.update({"pe_ratio": reason, "eps_actual": reason})
        return Trailing(values=values, detail=detail)
    eps_ttm = round(sum_2025 * float(factor), 4)
    values.values["eps_actual"] = eps_ttm
    if price is None:
        values.reasons["pe_ratio"] = price_reason or "no price at as_of"
    elif eps_ttm <= 0:
        values.reasons["pe_ratio"] = f"trailing EPS {eps_ttm} is not positive: P/E is not meaningful"
    elif price.basis_reason is not None:
        values.reasons["pe_ratio"] = price.basis_reason
    else:
        values.values["pe_ratio"] = round(price.close / eps_ttm, 2)
        detail["price"] = {"close": price.close, "date": price.day.isoformat(), "source": price.ref}
        refs.append(price.ref)
    return Trailing(values=values, detail=detail)
