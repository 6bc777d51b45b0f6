"""A symbol directory with company names: which tickers a free text names, by symbol or by name.

``parse_query`` (``pipeline.query``) accepts a model's ticker only when the text supports it, and
resolves a text without a model, from this directory. Its listings, later ones adding names:

1. the table shipped in this package, ``agents/data/sp500_names.csv`` (symbol, name of the 503
   S&P 500 members; built by :func:`build_table` from the public-domain snapshot described in
   ``agents/data/README.md``);
2. the data provider's own company names (``MarketDataProvider.profile``: the embedded
   dataset's "Google Inc.", "Facebook, Inc.", a CSV folder's ``StockTable.tsv``);
3. an optional file (``FINAGENT_DATA_SYMBOL_DIRECTORY_FILE``) in the same ``Symbol,Name`` CSV shape,
   e.g. ``../shared/data/fundamentals/sp500/constituents-financials.csv``.

Matching rules (why: a sentence is full of words that are also tickers or company names):

- a ``$cashtag`` in any case names its symbol; an upper-case word (``MSFT``) names a listed
  symbol unless it is an English word in capitals (``_STOPWORDS``: "I", "A", "IT", "BUY", ...);
- a company is named by its normalised name (lower case, legal suffixes such as "Inc.",
  "Corporation", "(Class A)" removed: "Tesla, Inc." → "tesla") as whole words, or by the first
  word of a longer name when that word has 4+ letters and is not generic ("Microsoft
  Corporation" → "microsoft"; "American ..." and "General ..." never alone);
- a name that is one common English word ("Target", "Ball", "Visa") counts only when written
  with a capital letter in the text.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

SHIPPED_TABLE = "sp500_names.csv"

_TOKEN_RE = re.compile(r"(?<![\w$])(\$?)([A-Za-z][A-Za-z0-9]{0,5}(?:[.\-][A-Za-z])?)(?![\w])")
#: Upper-case words that are not tickers in a sentence (several are real tickers: "A" Agilent,
#: "IT" Gartner, "ALL" Allstate, "NOW" ServiceNow; a user who means them writes $A or the name).
_STOPWORDS = frozenset(
    {"I", "A", "AM", "AN", "AND", "ARE", "AS", "AT", "BE", "BUY", "BY", "DO", "FOR", "HOW", "IF", "IN",
     "IS", "IT", "ME", "MY", "NO", "NOT", "NOW", "OF", "OK", "ON", "OR", "SELL", "SO", "THE", "TO", "UP",
     "US", "WE", "WHAT", "WHY", "HOLD", "ABOUT", "USD", "RSI", "MACD", "ETF", "EPS", "PE", "AI", "API",
     "ALL", "CEO", "CFO", "IPO", "GDP", "FED", "SEC", "NYSE", "LOW", "KEY", "HAS", "CAN", "ANY", "NEW",
     "BIG", "TECH", "WELL", "COST", "SAFE", "DAY", "ONE", "TWO", "YTD", "EOD", "ATH", "DCF"}
)  # fmt: skip
#: Name words removed before matching (legal forms, share classes) and first words too generic
#: to name one company on their own.
_SUFFIXES = frozenset(
    {"inc", "incorporated", "corp", "corporation", "co", "company", "companies", "ltd", "limited", "plc",
     "holdings", "holding", "group", "the", "class", "llc", "lp", "sa", "nv", "ag", "se"}
)  # fmt: skip
_GENERIC_FIRST = frozenset(
    {"american", "general", "united", "international", "first", "national", "global", "public",
     "southern", "western", "eastern", "northern", "news", "dollar", "charles", "johnson", "marathon",
     "constellation", "huntington", "fox", "universal", "digital", "federal", "principal", "realty",
     "regions", "progressive", "equity", "insulet", "best", "host", "ford", "willis", "west"}
)  # fmt: skip
#: One-word company names that are common English words: matched only when capitalised.
_COMMON_WORDS = frozenset(
    {"target", "ball", "block", "match", "gap", "discover", "progressive", "regions", "southern",
     "waters", "monster", "citizens", "carnival", "mosaic", "news", "fox", "state", "global",
     "principal", "realty", "universal", "equity", "public", "host", "best", "ford", "edison"}
)  # fmt: skip


@dataclass(frozen=True)
class Listing:
    """One directory entry: ``symbol`` (product spelling, ``BRK.B``), company ``name``, and the
    ``source`` it came from (``shipped``, ``provider`` or a file path)."""

    symbol: str
    name: str
    source: str


def normalise_name(name: str) -> list[str]:
    """The words of a company name used for matching: lower case, letters/digits only, legal
    suffixes and share classes removed (``"Alphabet Inc. (Class A)"`` → ``["alphabet"]``)."""
    words = re.sub(r"[^a-z0-9&]+", " ", name.lower().replace("&", " & ")).split()
    words = [w for w in words if w not in _SUFFIXES and w != "&" and not re.fullmatch(r"[a-c]", w)]
    return words


def _product_symbol(raw: str) -> str:
    return raw.strip().upper().replace("-", ".")


def read_table(path: Path, *, source: str | None = None) -> list[Listing]:
    """``Symbol,Name`` rows of a CSV (extra columns ignored; ``symbol,name`` also accepted).

    Raises:
        ValueError: no ``Symbol``/``Name`` header (the message names the file).
        OSError: the file cannot be read.
    """
    with path.open(encoding="utf-8", newline="") as handle:
        return _parse_rows(handle.read().splitlines(), source=source or str(path), where=str(path))


def _parse_rows(lines: list[str], *, source: str, where: str) -> list[Listing]:
    body = [line for line in lines if not line.startswith("#")]
    reader = csv.DictReader(body)
    fields = {f.lower(): f for f in reader.fieldnames or []}
    if "symbol" not in fields or "name" not in fields:
        raise ValueError(f"{where}: expected a CSV with Symbol and Name columns")
    return [
        Listing(
            symbol=_product_symbol(row[fields["symbol"]]), name=row[fields["name"]].strip(), source=source
        )
        for row in reader
        if row.get(fields["symbol"]) and row.get(fields["name"])
    ]


@lru_cache(maxsize=1)
def shipped_listings() -> tuple[Listing, ...]:
    """The table shipped with the package (``agents/data/sp500_names.csv``)."""
    text = resources.files("agents").joinpath("data", SHIPPED_TABLE).read_text(encoding="utf-8")
    return tuple(_parse_rows(text.splitlines(), source="shipped", where=SHIPPED_TABLE))


def build_table(*, source_csv: Path, out: Path) -> int:
    """Write the shipped table from a ``Symbol,Name`` CSV (the S&P 500 constituents snapshot):
    sorted by symbol, a provenance comment first. Returns the rows written.

    Raises ValueError / OSError like :func:`read_table`."""
    listings = sorted({x.symbol: x for x in read_table(source_csv)}.values(), key=lambda x: x.symbol)
    with out.open("w", encoding="utf-8", newline="") as handle:
        handle.write(f"# built by agents.data.symbols.build_table from {source_csv.name}; see README.md\n")
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(["symbol", "name"])
        writer.writerows([x.symbol, x.name] for x in listings)
    return len(listings)


@dataclass(frozen=True)
class _Alias:
    words: tuple[str, ...]
    capitalised_only: bool


class SymbolDirectory:
    """Symbols and company names; :meth:`mentions` finds the ones a text names (module docstring)."""

    def __init__(self, listings: Iterable[Listing]) -> None:
        self._names: dict[str, list[str]] = {}
        for listing in listings:
            names = self._names.setdefault(listing.symbol, [])
            if listing.name not in names:
                names.append(listing.name)
        self._aliases: dict[str, list[_Alias]] = {s: self._aliases_of(n) for s, n in self._names.items()}

    @staticmethod
    def _aliases_of(names: list[str]) -> list[_Alias]:
        out: list[_Alias] = []
        for name in names:
            words = normalise_name(name)
            if not words:
                continue
            single = len(words) == 1
            out.append(_Alias(tuple(words), capitalised_only=single and words[0] in _COMMON_WORDS))
            first = words[0]
            if not single and len(first) >= 4 and first not in _GENERIC_FIRST:
                out.append(_Alias((first,), capitalised_only=first in _COMMON_WORDS))
        return out

    @property
    def symbols(self) -> list[str]:
        """Every listed symbol, sorted."""
        return sorted(self._names)

    def name_of(self, symbol: str) -> str | None:
        """The first name listed for ``symbol`` (``None`` if unlisted)."""
        names = self._names.get(symbol)
        return names[0] if names else None

    def tickers_in(self, text: str, *, extra_symbols: Iterable[str] = ()) -> list[str]:
        """Symbols written as tickers in ``text``: ``$cashtags`` (any case) and upper-case words
        that are listed (or in ``extra_symbols``) and not ``_STOPWORDS``; in order, unique."""
        known = set(self._names) | set(extra_symbols)
        found: list[str] = []
        for tag, raw in _TOKEN_RE.findall(text):
            symbol = _product_symbol(raw)
            if (
                (tag or (raw.isupper() and symbol not in _STOPWORDS))
                and symbol in known
                and symbol not in found
            ):
                found.append(symbol)
        return found

    def names_in(self, text: str) -> list[str]:
        """Symbols whose company is named in ``text`` (module docstring), in directory order."""
        words = re.sub(r"[^A-Za-z0-9&]+", " ", text).split()
        lowered = [w.lower() for w in words]
        found: list[str] = []
        for symbol, aliases in self._aliases.items():
            for alias in aliases:
                if self._contains(words, lowered, alias):
                    found.append(symbol)
                    break
        return found

    @staticmethod
    def _contains(words: list[str], lowered: list[str], alias: _Alias) -> bool:
        n = len(alias.words)
        for i in range(len(lowered) - n + 1):
            if tuple(lowered[i : i + n]) == alias.words and (
                not alias.capitalised_only or words[i][0].isupper()
            ):
                return True
        return False

    def mentions(self, text: str, *, extra_symbols: Iterable[str] = ()) -> list[str]:
        """:meth:`tickers_in` then :meth:`names_in`, unique, in that order."""
        found = self.tickers_in(text, extra_symbols=extra_symbols)
        found += [s for s in self.names_in(text) if s not in found]
        return found

    def supports(self, text: str, symbol: str) -> bool:
        """Whether ``text`` names ``symbol``: one of its :meth:`mentions`, or the symbol written
        in lower case as a word of its own ("what about msft"): weaker evidence, so only used to
        confirm a proposal, never to find a ticker."""
        if symbol in self.mentions(text, extra_symbols=[symbol]):
            return True
        lowered = {raw.lower() for _tag, raw in _TOKEN_RE.findall(text)}
        return len(symbol) >= 3 and symbol.lower() in lowered and symbol not in _STOPWORDS
