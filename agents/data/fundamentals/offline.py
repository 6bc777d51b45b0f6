"""Offline fundamentals from the folder ``FINAGENT_DATA_FUNDAMENTALS_DIR`` (``../shared/data/fundamentals``).

Three sources, each dated, merged per field by :func:`fundamentals_at` (plus the earnings
calendar for ``earnings_date`` and ``eps_consensus``, see below):

=============  ==========================================  =========================================
source         file                                        date used for point in time
=============  ==========================================  =========================================
``sp500``      ``sp500/constituents-financials.csv``       :data:`SP500_SNAPSHOT_DATE` (2026-08-22,
                                                           the snapshot date in the data README)
``av``         ``alphavantage/fundamentals.csv``           statements: the row's ``fiscalDateEnding``
                                                           + 90 days (filing lag); overview ratios
                                                           (PERatio, PEGRatio, EPS, MarketCap,
                                                           EBITDA, Beta): the file's latest
                                                           ``fiscalDateEnding`` + 90 days
``sec``        ``sec_companyfacts/<TICKER>_*.json``        each fact's own ``filed`` date
=============  ==========================================  =========================================

**Point in time: refuse.** A source dated after ``as_of`` is not used; it is listed in the
result's ``refused`` with its date, and the fields it alone could fill are null with that reason.
Among sources dated ≤ ``as_of`` the newest with a value wins per field (``field_sources`` says which).

Formulas (inputs from one fiscal year / balance-sheet date; never mixed across dates):

* ``pe_ratio``: sp500 ``Price/Earnings``; av ``PERatio``. ``peg_ratio``: av ``PEGRatio``.
* ``eps_actual``: sp500 ``Earnings/Share`` (trailing); av ``EPS``; sec ``EarningsPerShareDiluted``
  of the latest 10-K fiscal year.
* ``gross_margin`` = gross profit / revenue: av ``grossProfit/totalRevenue``; sec ``GrossProfit /
  (Revenues | RevenueFromContractWithCustomerExcludingAssessedTax | SalesRevenueNet)``.
* ``net_margin`` (extra) = av ``netIncome/totalRevenue``; sec ``NetIncomeLoss / revenue``.
* ``current_ratio`` = sec ``AssetsCurrent / LiabilitiesCurrent``.
* ``debt_to_equity`` = sec ``(LongTermDebt | LongTermDebtNoncurrent) / StockholdersEquity``.
* ``net_debt_to_ebitda`` = sec ``(debt − CashAndCashEquivalentsAtCarryingValue) / EBITDA`` with
  EBITDA = ``OperatingIncomeLoss + DepreciationDepletionAndAmortization`` (or
  ``DepreciationAndAmortization``).
* ``roic`` = sec ``OperatingIncomeLoss × (1 − 0.21) / (debt + StockholdersEquity − cash)``
  (21 % = US federal statutory rate since 2018; invested capital at the fiscal year end).
* ``ev_ebitda``: needs enterprise value (market cap + debt − cash) and EBITDA from one date; no
  source here has all of them (sp500/av lack debt and cash, sec lacks the price) → null.
* ``earnings_date``, ``eps_consensus``: the next report within 30 days of ``as_of`` and the EPS
  estimate recorded for it, from the earnings calendar of ``agents.data.fundamentals.earnings``
  (``HistoricalEarningsData``; quarterly EPS, split-adjusted to 2025 share counts; dated ``as_of``
  because a report date inside the window is announced by then); null with the calendar's reason
  otherwise.
* ``market_cap`` also = SEC ``dei:EntityCommonStockSharesOutstanding`` (the cover page of the
  latest 10-K/10-Q filed ≤ ``as_of``) × the as-of close of the market-data provider
  (:func:`market_cap_values`, dated ``as_of``); ``shares_outstanding`` is that fact.
* extras: ``market_cap`` (USD), ``ebitda`` (USD), ``price_to_sales``, ``price_to_book``,
  ``dividend_yield`` (fraction), ``beta``.

SEC mapping: annual values are 10-K facts (``form`` 10-K or 10-K/A) with ``filed ≤ as_of``; flow
items need a 330–400 day duration; the fact with the latest ``end`` wins (then the latest filing).
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pandas as pd

from agents.data.fundamentals.earnings import EarningsCalendar

SP500_SNAPSHOT_DATE = date(2026, 8, 22)
FILING_LAG = timedelta(days=90)
US_FEDERAL_TAX_RATE = 0.21

#: The default fields of ``get_fundamentals`` (docs/design.md, "Toolset"), then extras.
SEED_FIELDS: tuple[str, ...] = (
    "pe_ratio",
    "peg_ratio",
    "ev_ebitda",
    "roic",
    "gross_margin",
    "current_ratio",
    "debt_to_equity",
    "net_debt_to_ebitda",
    "eps_consensus",
    "eps_actual",
    "earnings_date",
)
EXTRA_FIELDS: tuple[str, ...] = (
    "net_margin",
    "market_cap",
    "ebitda",
    "price_to_sales",
    "price_to_book",
    "dividend_yield",
    "beta",
    "eps_growth_yoy",
    "eps_surprise_mean_4q",
    "shares_outstanding",
)
ALL_FIELDS: tuple[str, ...] = SEED_FIELDS + EXTRA_FIELDS

NO_SOURCE_REASONS: dict[str, str] = {
    "ev_ebitda": "no offline source has market cap, debt, cash and EBITDA for one date",
    "eps_consensus": "the earnings calendar (HistoricalEarningsData) does not cover this symbol",
    "earnings_date": "the earnings calendar (HistoricalEarningsData) does not cover this symbol",
    "eps_growth_yoy": "the earnings calendar (HistoricalEarningsData) does not cover this symbol",
    "eps_surprise_mean_4q": "the earnings calendar (HistoricalEarningsData) does not cover this symbol",
}

SEC_CONCEPTS: dict[str, tuple[str, ...]] = {
    "revenue": ("Revenues", "RevenueFromContractWithCustomerExcludingAssessedTax", "SalesRevenueNet"),
    "gross_profit": ("GrossProfit",),
    "operating_income": ("OperatingIncomeLoss",),
    "net_income": ("NetIncomeLoss",),
    "d_and_a": ("DepreciationDepletionAndAmortization", "DepreciationAndAmortization"),
    "eps_diluted": ("EarningsPerShareDiluted",),
    "assets_current": ("AssetsCurrent",),
    "liabilities_current": ("LiabilitiesCurrent",),
    "equity": ("StockholdersEquity",),
    "debt": ("LongTermDebt", "LongTermDebtNoncurrent"),
    "cash": ("CashAndCashEquivalentsAtCarryingValue",),
}
#: Fields the SEC mapping can fill.
SEC_FIELDS: frozenset[str] = frozenset(
    {
        "gross_margin",
        "net_margin",
        "current_ratio",
        "debt_to_equity",
        "net_debt_to_ebitda",
        "roic",
        "eps_actual",
    }
)
#: Sources dated as_of itself (computed from the calendar at as_of), not by a filing.
_AS_OF_SOURCES = frozenset({"earnings_calendar", "earnings_ttm", "sec_shares"})
_FLOW = {"revenue", "gross_profit", "operating_income", "net_income", "d_and_a", "eps_diluted"}


@dataclass
class SourceValues:
    """What one source says about one symbol: ``values`` (field → number/str or None), the
    ``dated`` day it became known, a ``ref`` citation and ``reasons`` for its nulls."""

    source: str
    ref: str
    dated: date
    values: dict[str, Any] = field(default_factory=dict)
    reasons: dict[str, str] = field(default_factory=dict)


def _num(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, str):
        value = value.strip()
        if value in {"", "None", "-", "nan"}:
            return None
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return None if math.isnan(out) or math.isinf(out) else out


def _ratio(num: float | None, den: float | None, digits: int = 4) -> float | None:
    if num is None or den is None or den == 0:
        return None
    return round(num / den, digits)


class OfflineFundamentals:
    """The three offline sources under ``root``; files are read once, lazily.

    Raises (from the methods): ``FileNotFoundError`` never — a missing sub-folder just means that
    source is absent.
    """

    def __init__(self, root: Path) -> None:
        self.root = Path(root).expanduser()
        self._lock = threading.Lock()
        self._sp: dict[str, dict[str, Any]] | None = None
        self._av: dict[str, dict[str, Any]] | None = None
        self._av_overview_date: date | None = None
        self._sec_files: dict[str, Path] | None = None
        self._sec_cache: dict[str, dict[str, Any]] = {}

    # -- loading -----------------------------------------------------------------------------
    def _load(self) -> None:
        with self._lock:
            if self._sp is not None:
                return
            sp_path = self.root / "sp500" / "constituents-financials.csv"
            sp: dict[str, dict[str, Any]] = {}
            if sp_path.is_file():
                for sp_record in pd.read_csv(sp_path, dtype=str, keep_default_na=False).to_dict("records"):
                    sp_row = {str(k): v for k, v in sp_record.items()}
                    sp[str(sp_row["Symbol"]).upper().replace(".", "-")] = sp_row
            av_path = self.root / "alphavantage" / "fundamentals.csv"
            av: dict[str, dict[str, Any]] = {}
            if av_path.is_file():
                frame = pd.read_csv(av_path, dtype=str, keep_default_na=False)
                for record in frame.to_dict("records"):
                    av_row = {str(k): v for k, v in record.items()}
                    av[str(av_row["Symbol"]).upper().replace(".", "-")] = av_row
                ends = pd.to_datetime(frame["fiscalDateEnding"], errors="coerce").dropna()
                if not ends.empty:
                    self._av_overview_date = ends.max().date() + FILING_LAG
            sec: dict[str, Path] = {}
            sec_dir = self.root / "sec_companyfacts"
            if sec_dir.is_dir():
                for path in sorted(sec_dir.glob("*.json")):
                    sec[path.name.split("_")[0].upper()] = path
            self._sp, self._av, self._sec_files = sp, av, sec

    def symbols(self) -> set[str]:
        """Every symbol any source knows."""
        self._load()
        assert self._sp is not None
        assert self._av is not None
        assert self._sec_files is not None
        return set(self._sp) | set(self._av) | set(self._sec_files)

    # -- per source --------------------------------------------------------------------------
    def sp500(self, symbol: str) -> SourceValues | None:
        """The S&P 500 snapshot row (dated :data:`SP500_SNAPSHOT_DATE`)."""
        self._load()
        assert self._sp is not None
        row = self._sp.get(symbol)
        if row is None:
            return None
        values = {
            "pe_ratio": _num(row.get("Price/Earnings")),
            "eps_actual": _num(row.get("Earnings/Share")),
            "market_cap": _num(row.get("Market Cap")),
            "ebitda": _num(row.get("EBITDA")),
            "price_to_sales": _num(row.get("Price/Sales")),
            "price_to_book": _num(row.get("Price/Book")),
            "dividend_yield": _num(row.get("Dividend Yield")),
        }
        return SourceValues(
            source="sp500",
            ref=f"sp500/constituents-financials.csv#{symbol}@{SP500_SNAPSHOT_DATE.isoformat()}",
            dated=SP500_SNAPSHOT_DATE,
            values=values,
        )

    def alphavantage(self, symbol: str) -> list[SourceValues]:
        """Alpha Vantage: statements (fiscal year end + 90 d) and overview (file date), or []."""
        self._load()
        assert self._av is not None
        row = self._av.get(symbol)
        if row is None:
            return []
        out = []
        fiscal = pd.to_datetime(str(row.get("fiscalDateEnding") or ""), errors="coerce")
        if not pd.isna(fiscal):
            revenue = _num(row.get("totalRevenue"))
            out.append(
                SourceValues(
                    source="av_statements",
                    ref=f"alphavantage/fundamentals.csv#{symbol}:statements@FY{fiscal.date().isoformat()}",
                    dated=fiscal.date() + FILING_LAG,
                    values={
                        "gross_margin": _ratio(_num(row.get("grossProfit")), revenue),
                        "net_margin": _ratio(_num(row.get("netIncome")), revenue),
                    },
                )
            )
        if self._av_overview_date is not None:
            out.append(
                SourceValues(
                    source="av_overview",
                    ref=f"alphavantage/fundamentals.csv#{symbol}:overview",
                    dated=self._av_overview_date,
                    values={
                        "pe_ratio": _num(row.get("PERatio")),
                        "peg_ratio": _num(row.get("PEGRatio")),
                        "eps_actual": _num(row.get("EPS")),
                        "market_cap": _num(row.get("MarketCapitalization")),
                        "ebitda": _num(row.get("EBITDA")),
                        "beta": _num(row.get("Beta")),
                    },
                )
            )
        return out

    def _sec_facts(self, symbol: str) -> dict[str, Any] | None:
        self._load()
        assert self._sec_files is not None
        path = self._sec_files.get(symbol)
        if path is None:
            return None
        with self._lock:
            if symbol not in self._sec_cache:
                self._sec_cache[symbol] = json.loads(path.read_text())
            return self._sec_cache[symbol]

    def sec(self, symbol: str, as_of: date) -> SourceValues | None:
        """SEC companyfacts ratios from 10-K facts filed ≤ ``as_of`` (None: no file for the symbol).

        The result is dated by the latest ``filed`` among the facts used; with no 10-K filed by
        ``as_of`` its ``dated`` is the first 10-K filing date (so the caller refuses it).
        """
        doc = self._sec_facts(symbol)
        if doc is None:
            return None
        gaap = doc.get("facts", {}).get("us-gaap", {})
        picked: dict[str, dict[str, Any]] = {}
        first_filed: date | None = None
        for key, concepts in SEC_CONCEPTS.items():
            for concept in concepts:
                units = gaap.get(concept, {}).get("units", {})
                facts = units.get("USD/shares" if key == "eps_diluted" else "USD", [])
                best = None
                for f in facts:
                    if f.get("form") not in ("10-K", "10-K/A"):
                        continue
                    filed = date.fromisoformat(f["filed"])
                    first_filed = filed if first_filed is None else min(first_filed, filed)
                    if filed > as_of:
                        continue
                    if key in _FLOW:
                        if "start" not in f:
                            continue
                        days = (date.fromisoformat(f["end"]) - date.fromisoformat(f["start"])).days
                        if not 330 <= days <= 400:
                            continue
                    rank = (f["end"], f["filed"])
                    if best is None or rank > (best["end"], best["filed"]):
                        best = f
                if best is not None:
                    picked[key] = {**best, "concept": concept}
                    break
        ref_file = (self._sec_files or {})[symbol].name
        if not picked:
            return SourceValues(
                source="sec",
                ref=f"sec_companyfacts/{ref_file}",
                dated=first_filed or date.min,
                values={},
                reasons={k: "no 10-K fact of the SEC mapping filed on or before as_of" for k in SEC_FIELDS},
            )

        def val(key: str, end: str | None = None) -> float | None:
            fact = picked.get(key)
            if fact is None or (end is not None and fact["end"] != end):
                return None
            return _num(fact["val"])

        reasons: dict[str, str] = {}
        values: dict[str, Any] = {}
        rev = picked.get("revenue")
        rev_end = rev["end"] if rev else None
        values["gross_margin"] = _ratio(val("gross_profit", rev_end), val("revenue"))
        values["net_margin"] = _ratio(val("net_income", rev_end), val("revenue"))
        eq = picked.get("equity")
        bs_end = eq["end"] if eq else None
        values["current_ratio"] = _ratio(val("assets_current", bs_end), val("liabilities_current", bs_end))
        debt, equity, cash = val("debt", bs_end), val("equity"), val("cash", bs_end)
        values["debt_to_equity"] = _ratio(debt, equity)
        op = picked.get("operating_income")
        op_end = op["end"] if op else None
        ebitda = None
        if val("operating_income") is not None and val("d_and_a", op_end) is not None:
            ebitda = (val("operating_income") or 0.0) + (val("d_and_a", op_end) or 0.0)
        net_debt = debt - cash if debt is not None and cash is not None else None
        values["net_debt_to_ebitda"] = _ratio(net_debt, ebitda)
        invested = (
            debt + equity - cash if debt is not None and equity is not None and cash is not None else None
        )
        operating = val("operating_income", bs_end)
        values["roic"] = (
            _ratio(operating * (1 - US_FEDERAL_TAX_RATE), invested) if operating is not None else None
        )
        values["eps_actual"] = val("eps_diluted", rev_end) if rev_end else val("eps_diluted")
        if "debt" not in picked:
            for k in ("debt_to_equity", "net_debt_to_ebitda", "roic"):
                reasons[k] = "no LongTermDebt/LongTermDebtNoncurrent fact in the 10-K filings by as_of"
        for k, v in values.items():
            if v is None and k not in reasons:
                reasons[k] = "the 10-K facts needed for it are missing or from different period ends"
        dated = max(date.fromisoformat(f["filed"]) for f in picked.values())
        ends = sorted({f["end"] for f in picked.values()})
        return SourceValues(
            source="sec",
            ref=f"sec_companyfacts/{ref_file}#10-K@{ends[-1]}",
            dated=dated,
            values=values,
            reasons=reasons,
        )

    def shares_outstanding(self, symbol: str, as_of: date) -> tuple[float, str, date] | None:
        """Common shares outstanding known at ``as_of`` from SEC company facts: the dei
        ``EntityCommonStockSharesOutstanding`` of the cover page of the latest 10-K/10-Q filed on
        or before ``as_of`` (latest ``end``, then latest ``filed``), as ``(shares, citation,
        filed)``; None without a facts file or such a fact. Shares as the filing states them
        (the share basis of that date: a split between ``filed`` and ``as_of`` is not applied)."""
        doc = self._sec_facts(symbol)
        if doc is None:
            return None
        facts = (
            doc.get("facts", {}).get("dei", {}).get("EntityCommonStockSharesOutstanding", {}).get("units", {})
        ).get("shares", [])
        known = [
            f for f in facts if date.fromisoformat(f["filed"]) <= as_of and _num(f.get("val")) is not None
        ]
        if not known:
            return None
        best = max(known, key=lambda f: (f["end"], f["filed"]))
        ref_file = (self._sec_files or {})[symbol].name
        ref = (
            f"sec_companyfacts/{ref_file}#dei:EntityCommonStockSharesOutstanding@{best['end']} "
            f"({best['form']} filed {best['filed']})"
        )
        return float(best["val"]), ref, date.fromisoformat(best["filed"])


def market_cap_values(
    store: OfflineFundamentals,
    symbol: str,
    as_of: date,
    *,
    close: float | None,
    price_ref: str | None,
    price_reason: str | None = None,
) -> SourceValues | None:
    """``market_cap`` (USD) = SEC shares outstanding known at ``as_of``
    (:meth:`OfflineFundamentals.shares_outstanding`) × the close traded on the last bar ≤
    ``as_of`` (``close``, USD, from the market-data provider; None → null with the reason), and
    ``shares_outstanding``; dated ``as_of``. None when no SEC fact covers the symbol and date."""
    shares = store.shares_outstanding(symbol, as_of)
    if shares is None:
        return None
    count, ref, _filed = shares
    values = SourceValues(source="sec_shares", ref=ref, dated=as_of, values={"shares_outstanding": count})
    if close is None:
        values.reasons["market_cap"] = price_reason or "no price at as_of from the market-data provider"
    else:
        values.values["market_cap"] = round(count * close, 0)
        values.ref = f"{ref} × close {price_ref}"
    return values


_INSTANCES: dict[str, OfflineFundamentals] = {}
_LOCK = threading.Lock()


def get_offline_fundamentals(root: Path) -> OfflineFundamentals:
    """One :class:`OfflineFundamentals` per resolved folder per process."""
    key = str(Path(root).expanduser().resolve())
    with _LOCK:
        inst = _INSTANCES.get(key)
        if inst is None:
            inst = OfflineFundamentals(Path(key))
            _INSTANCES[key] = inst
        return inst


def calendar_values(calendar: EarningsCalendar, symbol: str, as_of: date) -> SourceValues | None:
    """``earnings_date`` and ``eps_consensus`` of ``symbol`` from the earnings calendar at
    ``as_of`` (dated ``as_of``), with the calendar's reason when there is no next report; None
    when the calendar lacks the symbol."""
    entry = calendar.at(symbol, as_of, recent=0)
    if entry is None:
        return None
    nxt = entry["next"]
    if nxt is None:
        reason = str(entry["next_null_reason"])
        return SourceValues(
            source="earnings_calendar",
            ref=calendar.ref,
            dated=as_of,
            values={"earnings_date": None, "eps_consensus": None},
            reasons={"earnings_date": reason, "eps_consensus": reason},
        )
    reasons = {}
    if nxt["eps_estimate"] is None:
        reasons["eps_consensus"] = f"the calendar records no EPS estimate for the report of {nxt['date']}"
    return SourceValues(
        source="earnings_calendar",
        ref=entry["source_refs"][0],
        dated=as_of,
        values={"earnings_date": nxt["date"], "eps_consensus": nxt["eps_estimate"]},
        reasons=reasons,
    )


def fundamentals_at(
    store: OfflineFundamentals | None,
    symbol: str,
    as_of: date,
    *,
    calendar: EarningsCalendar | None = None,
    extra: Sequence[SourceValues] = (),
) -> dict[str, Any] | None:
    """Merged fundamentals of ``symbol`` known at ``as_of`` (module docstring), or None when no
    source knows the symbol. ``calendar`` (optional) supplies ``earnings_date`` and
    ``eps_consensus`` (:func:`calendar_values`); ``extra`` are further dated sources, such as
    the calendar's trailing EPS and P/E (:mod:`agents.data.fundamentals.trailing`). ``store`` None:
    the calendar and ``extra`` alone (no fundamentals folder configured).

    Returns ``{symbol, <ALL_FIELDS>, timestamp, field_sources: {field: ref}, null_reasons:
    {field: reason}, refused: [{source, ref, dated}], sources: [ref]}``; ``timestamp`` is the
    ISO date of the newest source used other than the calendar (the calendar's ``as_of``
    when it alone gave values; None when no source gave a value).
    """
    candidates: list[SourceValues] = []
    if store is not None:
        sp = store.sp500(symbol)
        if sp is not None:
            candidates.append(sp)
        candidates.extend(store.alphavantage(symbol))
        sec = store.sec(symbol, as_of)
        if sec is not None:
            candidates.append(sec)
    candidates.extend(extra)
    cal = calendar_values(calendar, symbol, as_of) if calendar is not None else None
    if cal is not None:
        candidates.append(cal)
    if not candidates:
        return None
    usable = sorted((c for c in candidates if c.dated <= as_of), key=lambda c: c.dated, reverse=True)
    refused = [c for c in candidates if c.dated > as_of]
    out: dict[str, Any] = {"symbol": symbol}
    field_sources: dict[str, str] = {}
    null_reasons: dict[str, str] = {}
    for name in ALL_FIELDS:
        out[name] = None
        for c in usable:
            if c.values.get(name) is not None:
                out[name] = c.values[name]
                field_sources[name] = c.ref
                break
        if out[name] is not None:
            continue
        own = [c.reasons.get(name) for c in usable if c.reasons.get(name)]
        if name in NO_SOURCE_REASONS:
            null_reasons[name] = str(own[0]) if own else NO_SOURCE_REASONS[name]
            continue
        later = [c for c in refused if name in c.values or (c.source == "sec" and name in SEC_FIELDS)]
        parts = [str(own[0])] if own else []
        parts += [
            f"{c.source} is dated {c.dated.isoformat()}, after as_of {as_of.isoformat()}" for c in later
        ]
        null_reasons[name] = "; ".join(parts) or (
            "no source for this symbol provides it"
            if store is not None
            else "no fundamentals folder is configured (FINAGENT_DATA_FUNDAMENTALS_DIR: SEC company facts, "
            "S&P 500 and Alpha Vantage files); the earnings calendar gives EPS and P/E only"
        )
    used_sources = [c for c in usable if c.ref in field_sources.values()]
    # The calendar is dated as_of; it must not make older ratios look current.
    dated = sorted({c.dated for c in used_sources if c.source not in _AS_OF_SOURCES}) or sorted(
        {c.dated for c in used_sources}
    )
    out["timestamp"] = dated[-1].isoformat() if dated else None
    out["field_sources"] = field_sources
    out["null_reasons"] = null_reasons
    out["refused"] = [{"source": c.source, "ref": c.ref, "dated": c.dated.isoformat()} for c in refused]
    out["sources"] = sorted(set(field_sources.values()))
    return out
