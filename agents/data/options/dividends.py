"""Ex-dividend dates and splits from Lean equity factor files (``<symbol>.csv``:
``date,price_factor,split_factor,ref_price``; QuantConnect/Lean's ``Data/equity/usa/factor_files``).

A row's factors apply to prices on or before its date; between two consecutive rows a change of
``price_factor`` is a cash dividend with its ex-date on the next trading day after the first
row's date, amount = ref_price × (1 − price_factor / next price_factor) (Lean's back-adjustment
identity: the factor scales the close before the ex-date by (close − dividend) / close); a change
of ``split_factor`` is a split with ratio = next split_factor / split_factor (7.0 for AAPL's 7:1).
The last row (``20501231``) is Lean's sentinel, not an event. The file vouches for events through
the last bar of the Lean price file beside it (``../<SYMBOL>.csv``), else through its last dated row.
"""

from __future__ import annotations

import contextlib
import csv
import itertools
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path

_SENTINEL = date(2050, 12, 31)


class DividendDataError(ValueError):
    """The factor file is missing or malformed (message names the file)."""


@dataclass(frozen=True)
class CorporateEvent:
    """One dividend (``kind`` ``dividend``, ``amount`` USD/share on the shares of that day) or
    split (``kind`` ``split``, ``ratio`` new shares per old) with its ex-date."""

    kind: str
    ex_date: date
    amount: float | None = None
    ratio: float | None = None


@dataclass(frozen=True)
class FactorFile:
    """The events of one symbol and the last day the file vouches for (``covered_through``)."""

    symbol: str
    path: Path
    events: tuple[CorporateEvent, ...]
    covered_through: date

    def between(self, start: date, end: date) -> list[CorporateEvent]:
        """The events with ``start`` < ex_date ≤ ``end``, by date."""
        return [e for e in self.events if start < e.ex_date <= end]


def _next_weekday(day: date) -> date:
    nxt = day + timedelta(days=1)
    while nxt.weekday() >= 5:
        nxt += timedelta(days=1)
    return nxt


def read_factor_file(folder: Path, symbol: str) -> FactorFile:
    """Parse ``folder/<symbol lower>.csv`` (module docstring).

    Raises:
        DividendDataError: no such file, or a row that is not ``YYYYMMDD,float,float,float``.
    """
    path = folder / f"{symbol.lower()}.csv"
    if not path.is_file():
        raise DividendDataError(f"no factor file {path.name} in {folder}")
    rows: list[tuple[date, float, float, float]] = []
    try:
        with path.open(newline="") as handle:
            for line in csv.reader(handle):
                if not line:
                    continue
                day = datetime.strptime(line[0].strip(), "%Y%m%d").date()
                rows.append((day, float(line[1]), float(line[2]), float(line[3])))
    except (ValueError, IndexError) as exc:
        raise DividendDataError(f"{path.name}: {exc}") from None
    events: list[CorporateEvent] = []
    for (day, pf, sf, ref), (_nday, npf, nsf, _nref) in itertools.pairwise(rows):
        ex = _next_weekday(day)
        if npf > 0 and abs(pf - npf) > 1e-9:
            events.append(CorporateEvent("dividend", ex, amount=round(ref * (1.0 - pf / npf), 4)))
        if sf > 0 and abs(sf - nsf) > 1e-9:
            events.append(CorporateEvent("split", ex, ratio=round(nsf / sf, 4)))
    dated = [r[0] for r in rows if r[0] != _SENTINEL]
    covered = dated[-1] if dated else date.min
    prices = folder.parent / f"{symbol.upper()}.csv"
    if prices.is_file():
        with prices.open() as handle:
            last = ""
            for last in handle:  # noqa: B007 - the file's last line
                pass
        with contextlib.suppress(ValueError):
            covered = max(covered, date.fromisoformat(last.split(",")[0].strip()))
    return FactorFile(symbol=symbol.upper(), path=path, events=tuple(events), covered_through=covered)
