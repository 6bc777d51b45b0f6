"""Offline option-chain snapshots: read the three real formats of ``../shared/data/options``
into one :class:`OptionChain`, point in time.

Formats (``shared/data/README.md`` describes the files):

* **Lean end-of-day** (``<SYM>_eod_<YYYY-MM-DD>.csv``; QuantConnect/Lean, AlgoSeek data): one row
  per contract with the day's bid/ask OHLC, ``volume``, start-of-day ``open_interest`` and the
  ``underlying_close_raw``. A sibling ``universes/<YYYYMMDD>.csv`` carries Lean's own IV and
  greeks, which we attach as the chain's ``source_iv``/``source_delta`` (Lean-computed, not
  vendor values).
* **CBOE delayed quotes** (``<sym>_quotedata.csv``): three preamble lines (underlying ``Last``,
  the quote time), then paired call/put columns with the vendor's IV, delta and gamma.
* **yfinance capture** (``<SYM>_<expiry>_<YYYYMMDD>_<HHMMSS>.csv``): ``Ticker.option_chain``
  rows; the capture date is in the file name, there is no underlying price.

Point in time: :func:`find_chain` returns the chain quoted on ``as_of`` (or, with
``max_age_days`` > 0, the latest one quoted no earlier than that many days before); a chain
quoted after ``as_of`` is never used. Rows that cannot be traded on the quote day are dropped:
expired contracts and rows without a two-sided quote (the AAPL file of 2014-06-09 keeps the
pre-split strikes as unquoted rows next to the post-split ones; only the quoted, post-split
rows remain, so strikes of both sides of the split never mix).
"""

from __future__ import annotations

import csv
import math
import re
from dataclasses import dataclass, field, replace
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Literal

from agents.data.market_calendar import last_session_on_or_before

Right = Literal["call", "put"]

#: Equity options deliver 100 shares (OCC standard contract).
CONTRACT_MULTIPLIER = 100


class ChainNotFoundError(LookupError):
    """No chain for the symbol at ``as_of`` (→ ``NO_DATA``)."""


class ChainFormatError(ValueError):
    """A snapshot file does not follow its format (→ ``NO_DATA`` naming the file)."""


@dataclass(frozen=True)
class OptionQuote:
    """One listed contract on the quote day.

    Prices in USD per share; ``volume`` contracts traded that day; ``open_interest`` contracts
    open (``None`` when the source leaves it empty); ``source_iv`` (fraction/year) and
    ``source_delta`` are the source's own values when it has them.
    """

    contract: str
    expiry: date
    right: Right
    strike: float
    bid: float
    ask: float
    last: float | None
    volume: int
    open_interest: int | None
    source_iv: float | None = None
    source_delta: float | None = None
    #: The pre-split strike whose open interest (× the split ratio) this post-split contract carries.
    open_interest_from_strike: float | None = None

    @property
    def mid(self) -> float:
        """(bid + ask) / 2, USD."""
        return (self.bid + self.ask) / 2.0

    @property
    def spread_pct(self) -> float:
        """(ask − bid) / mid, a fraction (``inf`` when the mid is 0)."""
        return (self.ask - self.bid) / self.mid if self.mid > 0 else math.inf

    @property
    def last_trading_day(self) -> date:
        """The last exchange session on or before the listed expiry (XNYS): the 2014 monthlies
        are listed on a Saturday and last trade the Friday before."""
        return last_session_on_or_before(self.expiry)

    def dte(self, quote_date: date) -> int:
        """Calendar days from ``quote_date`` to the contract's :attr:`last_trading_day` (its
        time value ends with that session's close, not on a listed Saturday)."""
        return (self.last_trading_day - quote_date).days


@dataclass(frozen=True)
class OptionChain:
    """The quoted contracts of ``symbol`` on ``quote_date`` from one snapshot file.

    ``underlying_price``: the chain's own underlying close/last (USD), ``None`` when the source
    has none (yfinance capture); ``source``: format name; ``path``: the file read;
    ``underlying_stale``: why the source's own underlying print is not a regular-session price
    (e.g. a CBOE "Last" stamped after the 16:00 New York close), ``None`` when nothing says so;
    ``split_ratio``: the share split whose pre-split open interest was carried onto the quoted
    post-split contracts (:func:`map_presplit_open_interest`), ``None`` when there was none.
    """

    symbol: str
    quote_date: date
    underlying_price: float | None
    source: str
    path: str
    contracts: tuple[OptionQuote, ...] = field(default_factory=tuple)
    underlying_stale: str | None = None
    split_ratio: int | None = None

    def puts(self) -> list[OptionQuote]:
        """The put contracts, by expiry then strike."""
        return sorted((c for c in self.contracts if c.right == "put"), key=lambda c: (c.expiry, c.strike))

    def by_contract(self) -> dict[str, OptionQuote]:
        """Contracts by OCC symbol."""
        return {c.contract: c for c in self.contracts}


def occ_symbol(root: str, expiry: date, right: Right, strike: float) -> str:
    """The OCC option symbol, e.g. ``GOOG160129P00700000`` (root, YYMMDD, C/P, strike × 1000 in 8 digits)."""
    return f"{root}{expiry:%y%m%d}{'C' if right == 'call' else 'P'}{round(strike * 1000):08d}"


def _float(text: str | None) -> float | None:
    text = (text or "").strip().replace(",", "")
    if not text:
        return None
    value = float(text)
    return value if math.isfinite(value) else None


def _int(text: str | None) -> int | None:
    value = _float(text)
    return None if value is None else int(value)


def _tradable(quote: OptionQuote, quote_date: date) -> bool:
    # A contract is usable when it has not expired and has a two-sided market with a positive ask.
    return quote.expiry >= quote_date and quote.ask > 0 and quote.bid >= 0 and quote.ask >= quote.bid


# -- Lean ----------------------------------------------------------------------------------------

_LEAN_RE = re.compile(r"^(?P<sym>[A-Z.\-]+)_eod_(?P<day>\d{4}-\d{2}-\d{2})\.csv$")


def _lean_universe(path: Path, quote_date: date) -> dict[tuple[date, str, float], tuple[float, float]]:
    """Lean's own ``(iv, delta)`` by ``(expiry, right, strike)`` from ``universes/<YYYYMMDD>.csv``."""
    universe = path.parent / "universes" / f"{quote_date:%Y%m%d}.csv"
    found: dict[tuple[date, str, float], tuple[float, float]] = {}
    if not universe.is_file():
        return found
    with universe.open(newline="") as fh:
        for row in csv.reader(fh):
            if len(row) < 11 or not row[0] or row[0].startswith("#"):
                continue
            iv, delta = _float(row[9]), _float(row[10])
            if iv is None or delta is None or iv <= 0:
                continue  # Lean writes 0 where it could not solve
            right = "call" if row[2].upper() == "C" else "put"
            found[(datetime.strptime(row[0], "%Y%m%d").date(), right, round(float(row[1]), 2))] = (iv, delta)
    return found


def read_lean_eod(path: Path) -> OptionChain:
    """Read a Lean end-of-day chain file (module docstring); bid/ask are the day's last quotes
    (``bid_close``/``ask_close``). Raises :class:`ChainFormatError` on a malformed file."""
    match = _LEAN_RE.match(path.name)
    if not match:
        raise ChainFormatError(f"{path.name}: not a Lean <SYM>_eod_<date>.csv file")
    quote_date = date.fromisoformat(match["day"])
    quotes: list[OptionQuote] = []
    unquoted_oi: dict[tuple[date, str, float], int] = {}
    underlying: float | None = None
    try:
        with path.open(newline="") as fh:
            rows = list(csv.DictReader(fh))
        universe = _lean_universe(path, quote_date)
        for row in rows:
            underlying = underlying or _float(row["underlying_close_raw"])
            bid, ask = _float(row["bid_close"]), _float(row["ask_close"])
            if bid is None or ask is None:
                oi = _int(row["open_interest"])
                if oi:
                    unquoted_oi[(date.fromisoformat(row["expiry"]), row["right"], float(row["strike"]))] = oi
                continue
            expiry = date.fromisoformat(row["expiry"])
            right: Right = "call" if row["right"] == "call" else "put"
            strike = float(row["strike"])
            own = universe.get((expiry, right, round(strike, 2)))
            quote = OptionQuote(
                contract=occ_symbol(row["underlying"], expiry, right, strike),
                expiry=expiry,
                right=right,
                strike=strike,
                bid=bid,
                ask=ask,
                last=_float(row["trade_close"]),
                volume=_int(row["volume"]) or 0,
                open_interest=_int(row["open_interest"]),
                source_iv=own[0] if own else None,
                source_delta=own[1] if own else None,
            )
            if _tradable(quote, quote_date):
                quotes.append(quote)
    except (KeyError, ValueError) as exc:
        raise ChainFormatError(f"{path.name}: {type(exc).__name__}: {exc}") from None
    mapped, ratio = map_presplit_open_interest(quotes, unquoted_oi)
    return OptionChain(
        symbol=match["sym"],
        quote_date=quote_date,
        underlying_price=underlying,
        source="lean_eod",
        path=str(path),
        contracts=tuple(mapped),
        split_ratio=ratio,
    )


#: Forward share splits US equities have used (2:1 .. 20:1); the ratio is found from the strikes.
_SPLIT_RATIOS = (2, 3, 4, 5, 7, 8, 10, 15, 20)


def map_presplit_open_interest(
    quotes: list[OptionQuote], unquoted_oi: dict[tuple[date, str, float], int]
) -> tuple[list[OptionQuote], int | None]:
    """Carry the open interest of pre-split rows onto the quoted post-split contracts.

    On the first day after a split the Lean file keeps the open interest on rows keyed by the old
    strikes (no quotes) while the quoted, adjusted contracts have none: AAPL 2014-06-09 (7:1) lists
    the 2014-06-21 650 put with OI 4,213 and no quote, and the 92.86 put (= 650/7) quoted without
    OI. An adjusted contract is the old one: ``n`` times the contracts on 1/n the strike, so its
    open interest is the old one × n. The ratio ``n`` is the one of :data:`_SPLIT_RATIOS` under
    which most quoted contracts without OI have an old strike at ``strike × n`` (within 0.05 USD ×
    n, the rounding of the adjusted strike to cents), and at least half of them must; else nothing
    is mapped. Returns ``(quotes, n or None)``.
    """
    bare = [q for q in quotes if q.open_interest is None]
    if not bare or not unquoted_oi:
        return quotes, None
    by_key: dict[tuple[date, str], list[float]] = {}
    for expiry, right, strike in unquoted_oi:
        by_key.setdefault((expiry, right), []).append(strike)

    def old_strike(q: OptionQuote, n: int) -> float | None:
        near = [k for k in by_key.get((q.expiry, q.right), []) if abs(k - q.strike * n) <= 0.05 * n]
        return min(near, key=lambda k: abs(k - q.strike * n)) if near else None

    best, hits = None, 0
    for n in _SPLIT_RATIOS:
        count = sum(old_strike(q, n) is not None for q in bare)
        if count > hits:
            best, hits = n, count
    if best is None or hits * 2 < len(bare):
        return quotes, None
    out = []
    for q in quotes:
        old = old_strike(q, best) if q.open_interest is None else None
        if old is not None:
            q = replace(
                q, open_interest=unquoted_oi[(q.expiry, q.right, old)] * best, open_interest_from_strike=old
            )
        out.append(q)
    return out, best


# -- CBOE ----------------------------------------------------------------------------------------

_CBOE_LAST = re.compile(r"Last:\s*([0-9.,]+)")
_CBOE_DATE = re.compile(r"Date:\s*([A-Za-z]+ \d{1,2}, \d{4})")
_CBOE_TIME = re.compile(r"at (\d{1,2}):(\d{2}) ([AP]M) (E[DS]T)")
#: The regular session of US equities ends at 16:00 New York time; a later "Last" is after hours.
_CLOSE_MINUTE = 16 * 60
_CBOE_SYMBOL = re.compile(r"^(?P<root>[A-Z]+)\d{6}[CP]\d{8}$")


def read_cboe(path: Path) -> OptionChain:
    """Read a CBOE delayed-quote download (``*_quotedata.csv``; module docstring). The vendor's IV
    and delta become ``source_iv``/``source_delta`` (CBOE writes 0 where it has none: kept as
    ``None``). Raises :class:`ChainFormatError` on a malformed file."""
    with path.open(newline="") as fh:
        lines = list(csv.reader(fh))
    preamble = " ".join(",".join(line) for line in lines[:3])
    last, day = _CBOE_LAST.search(preamble), _CBOE_DATE.search(preamble)
    header_at = next((i for i, line in enumerate(lines[:6]) if line and line[0] == "Expiration Date"), None)
    if last is None or day is None or header_at is None:
        raise ChainFormatError(f"{path.name}: no CBOE preamble (Last, Date) and header")
    quote_date = datetime.strptime(day[1], "%B %d, %Y").date()
    quotes: list[OptionQuote] = []
    root = ""
    try:
        for row in lines[header_at + 1 :]:
            if len(row) < 22:
                continue
            expiry = datetime.strptime(row[0], "%a %b %d %Y").date()
            strike = float(row[11])
            # calls: columns 1..10, puts: 12..21 (symbol, last, net, bid, ask, volume, iv, delta, gamma, oi)
            for right, base in (("call", 1), ("put", 12)):
                symbol = row[base]
                m = _CBOE_SYMBOL.match(symbol)
                if m:
                    root = m["root"]
                iv, delta = _float(row[base + 6]), _float(row[base + 7])
                quote = OptionQuote(
                    contract=symbol,
                    expiry=expiry,
                    right="call" if right == "call" else "put",
                    strike=strike,
                    bid=_float(row[base + 3]) or 0.0,
                    ask=_float(row[base + 4]) or 0.0,
                    last=_float(row[base + 1]),
                    volume=_int(row[base + 5]) or 0,
                    open_interest=_int(row[base + 9]),
                    source_iv=iv if iv else None,
                    source_delta=delta if delta and iv else None,
                )
                if _tradable(quote, quote_date):
                    quotes.append(quote)
    except (ValueError, IndexError) as exc:
        raise ChainFormatError(f"{path.name}: {type(exc).__name__}: {exc}") from None
    stale = None
    if clock := _CBOE_TIME.search(preamble):
        minute = (int(clock[1]) % 12 + (12 if clock[3] == "PM" else 0)) * 60 + int(clock[2])
        if minute > _CLOSE_MINUTE:
            stamp = f"{clock[1]}:{clock[2]} {clock[3]} {clock[4]}"
            stale = f"the preamble's Last is stamped {stamp}, after the 16:00 close"
    return OptionChain(
        symbol=root or path.name.split("_")[0].upper(),
        quote_date=quote_date,
        underlying_price=float(last[1].replace(",", "")),
        source="cboe_quotedata",
        path=str(path),
        contracts=tuple(quotes),
        underlying_stale=stale,
    )


# -- yfinance capture ----------------------------------------------------------------------------

_YF_RE = re.compile(r"^(?P<sym>[A-Z.\-]+)_(?P<expiry>\d{4}-\d{2}-\d{2})_(?P<day>\d{8})_(?P<time>\d{6})\.csv$")


def read_yfinance_csv(path: Path) -> OptionChain:
    """Read a yfinance ``option_chain`` capture (module docstring); yfinance's
    ``impliedVolatility`` becomes ``source_iv``. No underlying price. Raises :class:`ChainFormatError`."""
    match = _YF_RE.match(path.name)
    if not match:
        raise ChainFormatError(f"{path.name}: not a <SYM>_<expiry>_<YYYYMMDD>_<HHMMSS>.csv capture")
    quote_date = datetime.strptime(match["day"], "%Y%m%d").date()
    quotes: list[OptionQuote] = []
    try:
        with path.open(newline="") as fh:
            for row in csv.DictReader(fh):
                expiry = date.fromisoformat(row["expiry_date"])
                right: Right = "call" if row["option_type"] == "call" else "put"
                strike = float(row["strike"])
                quote = OptionQuote(
                    contract=occ_symbol(row["symbol"], expiry, right, strike),
                    expiry=expiry,
                    right=right,
                    strike=strike,
                    bid=_float(row["bid"]) or 0.0,
                    ask=_float(row["ask"]) or 0.0,
                    last=_float(row["last_price"]),
                    volume=_int(row["volume"]) or 0,
                    open_interest=_int(row["open_interest"]),
                    source_iv=_float(row["implied_volatility"]),
                )
                if _tradable(quote, quote_date):
                    quotes.append(quote)
    except (KeyError, ValueError) as exc:
        raise ChainFormatError(f"{path.name}: {type(exc).__name__}: {exc}") from None
    return OptionChain(
        symbol=match["sym"],
        quote_date=quote_date,
        underlying_price=None,
        source="yfinance_capture",
        path=str(path),
        contracts=tuple(quotes),
    )


# -- lookup --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Entry:
    symbol: str
    quote_date: date
    path: Path
    reader: str


def _cboe_header(path: Path) -> tuple[str, date] | None:
    """``(symbol, quote date)`` of a CBOE file from its name and preamble (reads 3 lines)."""
    with path.open(newline="") as fh:
        head = " ".join(fh.readline() for _ in range(3))
    day = _CBOE_DATE.search(head)
    if day is None:
        return None
    return path.name.split("_")[0].upper(), datetime.strptime(day[1], "%B %d, %Y").date()


def catalogue(options_dir: Path) -> list[_Entry]:
    """Every snapshot file under ``options_dir`` (recursively) with its symbol and quote date,
    read from file names (and the CBOE preamble) only."""
    entries: list[_Entry] = []
    for path in sorted(options_dir.rglob("*.csv")):
        if path.parent.name == "universes":
            continue
        if m := _LEAN_RE.match(path.name):
            entries.append(_Entry(m["sym"], date.fromisoformat(m["day"]), path, "lean"))
        elif m := _YF_RE.match(path.name):
            entries.append(_Entry(m["sym"], datetime.strptime(m["day"], "%Y%m%d").date(), path, "yfinance"))
        elif path.name.endswith("_quotedata.csv") and (head := _cboe_header(path)):
            entries.append(_Entry(head[0], head[1], path, "cboe"))
    return entries


_READERS = {"lean": read_lean_eod, "cboe": read_cboe, "yfinance": read_yfinance_csv}


def find_chain(*, options_dir: Path, symbol: str, as_of: date, max_age_days: int = 0) -> OptionChain:
    """The chain of ``symbol`` quoted on ``as_of`` (or at most ``max_age_days`` earlier, the
    latest such), merged over all files of that day (a yfinance capture has one expiry per file).

    Never returns a chain quoted after ``as_of``. Raises :class:`ChainNotFoundError` (no
    snapshot in the window; the message lists the dates that exist) or
    :class:`ChainFormatError`.
    """
    if not options_dir.is_dir():
        raise ChainNotFoundError(f"options folder {options_dir} does not exist")
    mine = [e for e in catalogue(options_dir) if e.symbol == symbol.upper()]
    earliest = as_of - timedelta(days=max_age_days)
    usable = [e for e in mine if earliest <= e.quote_date <= as_of]
    if not usable:
        have = sorted({e.quote_date.isoformat() for e in mine})
        raise ChainNotFoundError(
            f"no option chain for {symbol} quoted on {as_of.isoformat()}"
            + (f" (snapshots exist for {', '.join(have)})" if have else " (no snapshot of this symbol)")
        )
    day = max(e.quote_date for e in usable)
    chains = [_READERS[e.reader](e.path) for e in usable if e.quote_date == day]
    first = chains[0]
    merged: dict[str, OptionQuote] = {}
    for chain in chains:
        merged.update(chain.by_contract())
    return replace(
        first,
        path=";".join(c.path for c in chains),
        contracts=tuple(sorted(merged.values(), key=lambda q: (q.expiry, q.right, q.strike))),
    )
