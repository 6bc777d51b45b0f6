"""Daily option IVs stored with the Lean chains: the ``universes/<YYYYMMDD>.csv`` files beside a
``<SYM>_eod_<date>.csv`` chain (Lean-computed IV and greeks per contract, and the underlying's
OHLCV on the second line; ``../shared/data/README.md``). Point in time: only days up to ``as_of``.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from datetime import date, datetime
from pathlib import Path

from agents.data.options.chains import catalogue


@dataclass(frozen=True)
class UniverseDay:
    """One stored day: ``day``, the underlying close (USD, as traded that day) and the contracts
    with an IV: ``(expiry, right, strike, iv, delta)``."""

    day: date
    underlying_close: float
    contracts: tuple[tuple[date, str, float, float, float], ...]


def _read(path: Path, day: date) -> UniverseDay | None:
    close = None
    rows: list[tuple[date, str, float, float, float]] = []
    with path.open(newline="") as fh:
        for line in csv.reader(fh):
            if not line or line[0].startswith("#"):
                continue
            if not line[0]:  # the underlying's line: ,,,open,high,low,close,volume
                close = float(line[6]) if len(line) > 6 and line[6] else None
                continue
            if len(line) < 11 or not line[9] or not line[10]:
                continue
            iv = float(line[9])
            if iv <= 0:
                continue  # Lean writes 0 where it could not solve
            rows.append(
                (
                    datetime.strptime(line[0], "%Y%m%d").date(),
                    "call" if line[2].upper() == "C" else "put",
                    float(line[1]),
                    iv,
                    float(line[10]),
                )
            )
    if close is None or not rows:
        return None
    return UniverseDay(day=day, underlying_close=close, contracts=tuple(rows))


def universe_days(*, options_dir: Path, symbol: str, as_of: date) -> list[UniverseDay]:
    """The stored universe days of ``symbol`` up to ``as_of`` (oldest first) that carry IVs, from
    the ``universes/`` folders beside the symbol's Lean chains under ``options_dir``; ``[]``
    when there are none (other formats store no daily IV)."""
    folders = {
        e.path.parent / "universes"
        for e in catalogue(options_dir)
        if e.symbol == symbol.upper() and e.reader == "lean"
    }
    days: dict[date, UniverseDay] = {}
    for folder in folders:
        if not folder.is_dir():
            continue
        for path in sorted(folder.glob("*.csv")):
            try:
                day = datetime.strptime(path.stem, "%Y%m%d").date()
            except ValueError:
                continue
            if day > as_of or day in days:
                continue
            found = _read(path, day)
            if found is not None:
                days[day] = found
    return [days[d] for d in sorted(days)]
