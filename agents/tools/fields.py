"""Input field types shared by the tools' pydantic models (``Annotated`` types).

One definition per repeated field, so every tool validates a ticker, a ticker list, a period or an
account id the same way and returns the same error text. A field's ``description`` stays at the
use site (it is part of each tool's JSON schema).

Bounds of a list type cannot be tightened at the use site: with pydantic 2.12 a second
``Field(max_length=...)`` after the validator changes the JSON schema but is not enforced
(checked when these types were introduced), so each bound has its own type (``Symbols``,
``FewSymbols``).

Error text: a ticker that fails :func:`core.tickers.normalize_ticker` is reported by
pydantic as ``"<field>: Value error, Invalid ticker format: ..."`` (``run_tool`` turns it into an
``INVALID_INPUT`` envelope). The list validator runs on the whole list, so the location is the
field (``symbols``), not one item (``symbols.0``).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import AfterValidator, Field

from core.tickers import InvalidTickerError, normalize_ticker


def normalize_symbol(value: str) -> str:
    """``value`` normalised by :func:`~core.tickers.normalize_ticker` (``" brk.b "`` →
    ``"BRK.B"``).

    Raises:
        ValueError: not a valid ticker (docs/design.md, "Tickers": a class suffix allowed); the text is
            ``InvalidTickerError``'s, which pydantic reports as a validation error.
    """
    try:
        return normalize_ticker(value)
    except InvalidTickerError as exc:
        raise ValueError(str(exc)) from None


def normalize_symbols(values: list[str]) -> list[str]:
    """Each ticker normalised by :func:`normalize_symbol`, duplicates dropped, first-seen order kept
    (``["aapl", "AAPL", "msft"]`` → ``["AAPL", "MSFT"]``).

    Raises:
        ValueError: a ticker is invalid (pydantic turns it into a validation error).
    """
    return list(dict.fromkeys(normalize_symbol(v) for v in values))


#: The most tickers one call of a multi-symbol tool takes: keeps an envelope small.
MAX_SYMBOLS = 50

#: One ticker, stripped and upper-cased (``"aapl"`` → ``"AAPL"``).
Symbol = Annotated[str, AfterValidator(normalize_symbol)]

#: The most tickers of a tool whose output per symbol is long (``get_news``: up to 50 headlines each).
MAX_FEW_SYMBOLS = 20

#: 1..50 tickers, normalised and de-duplicated (the length is checked before de-duplication).
Symbols = Annotated[list[str], Field(min_length=1, max_length=MAX_SYMBOLS), AfterValidator(normalize_symbols)]

#: 1..20 tickers, otherwise as :data:`Symbols`.
FewSymbols = Annotated[
    list[str], Field(min_length=1, max_length=MAX_FEW_SYMBOLS), AfterValidator(normalize_symbols)
]

#: How far back from the analysis date (docs/design.md, "Periods and intervals").
Period = Literal["1d", "5d", "1mo", "3mo", "6mo", "1y", "2y", "5y", "10y", "ytd", "max"]

#: Bar size (the providers here serve daily bars, so intraday ones are refused
#: by ``get_history``).
Interval = Literal["1m", "2m", "5m", "15m", "30m", "60m", "90m", "1h", "1d", "5d", "1wk", "1mo", "3mo"]

#: The ``tool_call_id`` of a ``get_history`` call (ids are ``get_history_`` + 12 hex digits; 80
#: leaves room and bounds what an LLM can send).
HistoryRef = Annotated[str, Field(max_length=80)]

#: A paper account owner (``user_id`` of the portfolio and trading tools).
UserId = Annotated[str, Field(min_length=1, max_length=128)]
