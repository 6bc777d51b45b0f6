"""``parse_query`` (docs/design.md, "Query parsing"): free text → ticker + analysis type.

The text must name the ticker: a model's answer is evidence, never the source of truth (a small
model that always answers "AAPL" must not turn "is tesla a buy?" into an AAPL analysis).

1. A bare ticker is used as is. A ticker with junk (``core.tickers.refuse_junk``:
   ``AAPL;DROP TABLE``) or one word that is not a ticker → ``UnresolvedQueryError``.
2. The symbol directory (``agents.data.symbols``: the shipped S&P 500 names, the data
   provider's company names, ``FINAGENT_DATA_SYMBOL_DIRECTORY_FILE``) lists what the text names:
   cashtags, upper-case tickers, company names ("microsoft", "Tesla").
3. With a model for the ``query`` role, one LLM call (JSON schema / JSON mode) proposes
   ``{ticker, analysis_type}``. The ticker is accepted only when the text supports it (it is one
   of the names found, or the ticker itself is written in the text, even in lower case) and the
   data provider has it; otherwise the answer is noted and ignored.
4. Without an accepted answer: exactly one named company with data → that ticker; none or
   several → ``UnresolvedQueryError`` listing the candidates (the CLI exits 2, nothing is
   enqueued).

Analysis type: the model's, when its ticker was accepted and the type is valid; else keywords
(chart/technical/RSI → technical; earnings/valuation → fundamental; news/sentiment → sentiment;
else composite). It travels in the state (``FinancialAgentState.analysis_type``) and the report.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from agents.data.market.base import MarketDataProvider, ProviderError
from agents.data.symbols import Listing, SymbolDirectory, read_table, shipped_listings
from agents.llm.config import Role, llm_config
from agents.llm.loop import extract_json
from agents.llm.runner import run_sync
from agents.llm.session import LLMError, LLMSession
from core.masking import mask_text
from core.plans import ANALYSIS_TYPES, DEFAULT_ANALYSIS_TYPE, AnalysisType, keyword_specs
from core.settings import Settings
from core.tickers import InvalidTickerError, JunkInputError, clip, normalize_ticker, refuse_junk

#: Keyword rule of the analysis type: the plan table's keywords (``core.plans``), in its
#: matching order; the first type with a word in the text wins.
_TYPE_WORDS: dict[AnalysisType, tuple[str, ...]] = {
    cast(AnalysisType, spec.name): spec.keywords for spec in keyword_specs()
}
QUERY_SYSTEM_PROMPT = (
    "Extract the stock the user asks about. Answer with one JSON object "
    '{"ticker": "<US ticker symbol or null>", "analysis_type": '
    + "|".join(f'"{name}"' for name in ANALYSIS_TYPES)
    + "}. Use null when no company or ticker is named."
)


#: The answer's JSON schema (sent as ``response_format`` where the server supports it): a
#: grammar-constrained small model can then only answer in this shape.
QUERY_SCHEMA: dict[str, Any] = {
    "title": "ParsedQuery",
    "type": "object",
    "properties": {
        "ticker": {"type": ["string", "null"]},
        "analysis_type": {"type": "string", "enum": list(ANALYSIS_TYPES)},
    },
    "required": ["ticker", "analysis_type"],
    "additionalProperties": False,
}


class UnresolvedQueryError(ValueError):
    """The text names no ticker or company the data source has, or several.

    ``candidates``: ``(symbol, company name or None)`` the text may mean (empty when none)."""

    def __init__(self, message: str, *, candidates: list[tuple[str, str | None]] | None = None) -> None:
        super().__init__(message)
        self.candidates = candidates or []


@dataclass
class ParsedQuery:
    """The result: ``ticker`` (normalised), ``analysis_type``, ``method`` ("ticker", "llm" or
    "rules"), ``llm_rows`` (``llm_calls`` rows of the LLM attempt, to store with the analysis)
    and ``notes`` (why the LLM answer was not used, if it was not)."""

    ticker: str
    analysis_type: AnalysisType
    method: str
    llm_rows: list[dict[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def looks_like_ticker(text: str) -> bool:
    """True when ``text`` is a bare ticker (``AAPL``, ``brk.b``): then no parsing is needed."""
    try:
        normalize_ticker(text)
    except InvalidTickerError:
        return False
    return True


def named_analysis_type(text: str) -> AnalysisType | None:
    """The analysis type the text names by keyword (module docstring), or ``None``."""
    lowered = text.lower()
    for kind, words in _TYPE_WORDS.items():
        if any(w in lowered for w in words):
            return kind
    return None


def analysis_type_of(text: str) -> AnalysisType:
    """Keyword rule for the analysis type (module docstring); ``composite`` by default."""
    return named_analysis_type(text) or DEFAULT_ANALYSIS_TYPE


def _names(provider: MarketDataProvider) -> list[Listing]:
    listings: list[Listing] = []
    for symbol in provider.symbols():
        try:
            name = provider.profile(symbol=symbol).name
        except ProviderError:
            continue
        if name:
            listings.append(Listing(symbol=symbol, name=name, source="provider"))
    return listings


_DIRECTORIES: dict[tuple[str, tuple[str, ...], Path | None], SymbolDirectory] = {}


def symbol_directory(*, provider: MarketDataProvider, settings: Settings | None = None) -> SymbolDirectory:
    """The directory for ``provider`` (module docstring, step 2), built once per process per
    provider class and file.

    Raises:
        UnresolvedQueryError: ``FINAGENT_DATA_SYMBOL_DIRECTORY_FILE`` cannot be read or has no
            ``Symbol``/``Name`` columns.
    """
    extra = settings.data.symbol_directory_file if settings is not None else None
    key = (f"{type(provider).__module__}.{type(provider).__qualname__}", tuple(provider.symbols()), extra)
    directory = _DIRECTORIES.get(key)
    if directory is None:
        listings = [*shipped_listings(), *_names(provider)]
        if extra is not None:
            try:
                listings += read_table(extra)
            except (OSError, ValueError) as exc:
                raise UnresolvedQueryError(f"FINAGENT_DATA_SYMBOL_DIRECTORY_FILE: {exc}") from exc
        directory = SymbolDirectory(listings)
        _DIRECTORIES[key] = directory
    return directory


@dataclass(frozen=True)
class _Reading:
    """What the rules read in a text: ``named`` (every symbol it names), ``available`` (those
    the provider has data for; all of them for a provider without a symbol list)."""

    named: list[str]
    available: list[str]


def _read(*, text: str, provider: MarketDataProvider, directory: SymbolDirectory) -> _Reading:
    known = provider.symbols()
    named = directory.mentions(text, extra_symbols=known)
    available = [s for s in named if not known or s in known]
    return _Reading(named=named, available=available)


def resolve_rules(*, text: str, provider: MarketDataProvider, settings: Settings | None = None) -> str | None:
    """The deterministic resolver (module docstring, step 4) for a follow-up in a session.

    Returns the one ticker or company the text names that the provider has data for, or
    ``None`` when the text names **no** ticker or company at all ("and the chart?"): only then
    may a session fill in its previous symbol.

    Raises:
        UnresolvedQueryError: the text names a company the data source has no data for ("is
            tesla a buy?" with the embedded data), or several ("apple or microsoft, which
            one?"); the message is the one ``finagent analyze`` prints, and ``candidates``
            lists the names. Guessing the previous symbol there would analyse a company the
            user did not ask about.
    """
    directory = symbol_directory(provider=provider, settings=settings)
    reading = _read(text=text, provider=provider, directory=directory)
    if not reading.named:
        return None
    if len(reading.available) != 1:
        raise _unresolved(text, reading, directory, [])
    return reading.available[0]


def _normal(ticker: Any) -> str | None:
    if not isinstance(ticker, str):
        return None
    try:
        return normalize_ticker(ticker)
    except InvalidTickerError:
        return None


def _unresolved(
    text: str, reading: _Reading, directory: SymbolDirectory, notes: list[str]
) -> UnresolvedQueryError:
    def label(symbol: str) -> str:
        name = directory.name_of(symbol)
        return f"{symbol} ({name})" if name else symbol

    if len(reading.available) > 1:
        symbols = reading.available
        message = (
            f"{clip(text)!r} names several companies: {', '.join(label(s) for s in symbols)}; ask about one"
        )
    elif reading.named:
        symbols = reading.named
        message = (
            f"{clip(text)!r} names {', '.join(label(s) for s in symbols)}, "
            f"but the data source has no data for {'it' if len(symbols) == 1 else 'them'}"
        )
    else:
        symbols = []
        message = f"no known ticker or company name in {clip(text)!r}"
    if notes:
        message += f" ({'; '.join(notes)})"
    return UnresolvedQueryError(message, candidates=[(s, directory.name_of(s)) for s in symbols])


def _did_you_mean(
    text: str, *, provider: MarketDataProvider, settings: Settings
) -> UnresolvedQueryError | None:
    """For one word that is a company's name rather than its ticker ("Apple"): the error
    "'Apple' is a company name, not a ticker; did you mean AAPL (Apple Inc.)?" with the
    candidate. ``None`` when the word is a ticker as written (upper case, or a symbol the data
    source lists) or names no single company of the symbol directory."""
    word = text.strip()
    known = provider.symbols()
    normal = _normal(word)
    if normal is not None and (word == word.upper() or normal in known):
        return None
    directory = symbol_directory(provider=provider, settings=settings)
    named = [s for s in directory.names_in(word) if s != normal]
    if len(named) != 1:
        return None
    symbol = named[0]
    name = directory.name_of(symbol)
    label = f"{symbol} ({name})" if name else symbol
    return UnresolvedQueryError(
        f"{clip(word)!r} is a company name, not a ticker; did you mean {label}?",
        candidates=[(symbol, name)],
    )


def parse_query(
    *, text: str, provider: MarketDataProvider, settings: Settings, llm_model: str | None = None
) -> ParsedQuery:
    """Resolve ``text`` to a ticker and an analysis type (module docstring).

    Args:
        text: the user's request ("should I buy Apple after its split?", or a bare ticker).
        provider: the data provider (its symbols are the tickers with data).
        settings: for the ``query`` role's model and the directory file; ``llm_model``
            overrides the model (``--llm``).
    Raises:
        UnresolvedQueryError: ``text`` names no ticker or company with data, or several
            (``candidates`` lists them), or holds junk (``core.tickers.refuse_junk``:
            the message names the characters). Messages repeat at most 200 characters of
            ``text``.
    """
    try:
        refuse_junk(text)
    except JunkInputError as exc:
        raise UnresolvedQueryError(str(exc)) from exc
    one_word = not any(ch.isspace() for ch in text.strip())
    if one_word:
        suggestion = _did_you_mean(text, provider=provider, settings=settings)
        if suggestion is not None:
            raise suggestion
    if looks_like_ticker(text):
        return ParsedQuery(
            ticker=normalize_ticker(text), analysis_type=DEFAULT_ANALYSIS_TYPE, method="ticker"
        )
    if one_word:  # one word that is not a ticker: a typo, not a question
        raise UnresolvedQueryError(str(InvalidTickerError(text)))
    directory = symbol_directory(provider=provider, settings=settings)
    reading = _read(text=text, provider=provider, directory=directory)
    if len(reading.available) > 1:
        # several companies with data: refused before any model is asked (a model would pick
        # one, and the analysis would answer a question the user did not ask)
        raise _unresolved(text, reading, directory, [])
    config = llm_config(settings=settings, override=llm_model)
    notes: list[str] = []
    rows: list[dict[str, Any]] = []
    if config is not None and config.model_for(Role.QUERY):
        session = LLMSession(config=config, stage="parse_query")
        messages = [{"role": "system", "content": QUERY_SYSTEM_PROMPT}, {"role": "user", "content": text}]
        try:
            completion = run_sync(
                session.complete(
                    agent="parse_query",
                    role=Role.QUERY,
                    messages=messages,
                    json_mode=True,
                    response_schema=QUERY_SCHEMA,
                )
            )
            answer = extract_json(completion.content)
            proposed = answer.get("ticker")
            ticker = _normal(proposed)
            kind = answer.get("analysis_type")
            known = provider.symbols()
            if ticker is None:
                notes.append(f"the model proposed {clip(str(proposed), 20)!r}, not a ticker")
            elif not directory.supports(text, ticker):
                notes.append(f"the model proposed {ticker}, which the text does not name")
            elif known and ticker not in known:
                notes.append(f"the model proposed {ticker}, for which the data source has no data")
            else:
                return ParsedQuery(
                    ticker=ticker,
                    analysis_type=kind if kind in ANALYSIS_TYPES else analysis_type_of(text),
                    method="llm",
                    llm_rows=session.rows,
                )
        except (LLMError, ValueError) as exc:
            notes.append(mask_text(f"LLM parse failed: {exc}")[:300])
        rows = session.rows
    if len(reading.available) != 1:
        raise _unresolved(text, reading, directory, notes)
    return ParsedQuery(
        ticker=reading.available[0],
        analysis_type=analysis_type_of(text),
        method="rules",
        llm_rows=rows,
        notes=notes,
    )


__all__ = [
    "AnalysisType",
    "ParsedQuery",
    "UnresolvedQueryError",
    "analysis_type_of",
    "named_analysis_type",
    "parse_query",
    "resolve_rules",
    "symbol_directory",
]
