"""Ticker validation (seed 000: normalise to upper case, strip whitespace, 1–5 letters).

We also accept one share-class suffix after a dot or dash (``BRK.B``, ``BRK-A``), which seed 000's
``^[A-Z]+$`` would refuse but which real US listings use; the class part is 1–2 letters.
"""

from __future__ import annotations

import re

TICKER_MIN_LENGTH = 1
TICKER_MAX_LENGTH = 5
_TICKER_RE = re.compile(r"^[A-Z]{1,5}(?:[.-][A-Z]{1,2})?$")


class InvalidTickerError(ValueError):
    """Raised for a ticker that does not match the seed-000 format. ``symbol`` holds the input."""

    def __init__(self, symbol: str) -> None:
        self.symbol = symbol
        super().__init__(
            f"Invalid ticker format: {symbol!r}. Use 1-5 letters, optionally a class suffix such as BRK.B."
        )


def normalize_ticker(symbol: str) -> str:
    """Return ``symbol`` stripped and upper-cased if it is a valid ticker.

    Args:
        symbol: user input such as ``" aapl "`` or ``"brk.b"``.
    Returns:
        The normalised ticker, e.g. ``"AAPL"``, ``"BRK.B"``.
    Raises:
        InvalidTickerError: empty, too long, digits or other characters.
    """
    if not isinstance(symbol, str):
        raise InvalidTickerError(repr(symbol))
    value = symbol.strip().upper()
    if not _TICKER_RE.fullmatch(value):
        raise InvalidTickerError(symbol)
    return value
