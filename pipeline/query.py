"""``parse_query`` (seed 003): free text → ticker + analysis type.

With a model for the ``query`` role, one LLM call (JSON mode) proposes ``{ticker,
analysis_type}``; the ticker must then be one the data provider knows (or at least a valid
ticker for online providers with no symbol list). Without a model, or when the LLM fails or
proposes nothing usable, a deterministic parser resolves the text: an upper-case token that is a
known symbol, a company name (or its first word, e.g. "Apple") from the provider's profiles, or
a "$TICKER" cashtag. Analysis type by keywords (chart/technical/RSI → technical; earnings/
valuation → fundamental; news/sentiment → sentiment; else composite). Unresolvable, or a ticker
with junk in it (``pipeline.core.tickers.refuse_junk``: ``AAPL;DROP TABLE``) →
``UnresolvedQueryError`` (the CLI exits 2, nothing is enqueued).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal

from agents.llm.config import Role, llm_config
from agents.llm.loop import extract_json
from agents.llm.runner import run_sync
from agents.llm.session import LLMError, LLMSession
from agents.providers.base import MarketDataProvider, ProviderError
from pipeline.core.settings import Settings
from pipeline.core.tickers import InvalidTickerError, JunkInputError, clip, normalize_ticker, refuse_junk

AnalysisType = Literal["technical", "fundamental", "sentiment", "composite", "csp"]

_TYPE_WORDS: dict[AnalysisType, tuple[str, ...]] = {
    "csp": ("cash-secured put", "cash secured put", "csp", "sell a put", "sell puts"),
    "technical": ("chart", "technical", "rsi", "macd", "trend", "moving average", "support", "resistance"),
    "fundamental": ("earnings", "valuation", "fundamental", "p/e", "revenue", "balance sheet", "dividend"),
    "sentiment": ("news", "sentiment", "headline", "rumor", "rumour"),
}
_TOKEN_RE = re.compile(r"(?<![\w$])\$?[A-Za-z][A-Za-z.\-]{0,7}(?![\w])")
#: Upper-case words that are not tickers in a sentence ("I" and "A" are also real tickers, but a
#: user who means Agilent writes $A or passes the symbol).
_STOPWORDS = frozenset(
    {"I", "A", "AM", "AN", "AND", "ARE", "AS", "AT", "BE", "BUY", "BY", "DO", "FOR", "HOW", "IF", "IN",
     "IS", "IT", "ME", "MY", "NO", "NOT", "NOW", "OF", "OK", "ON", "OR", "SELL", "SO", "THE", "TO", "UP",
     "US", "WE", "WHAT", "WHY", "HOLD", "ABOUT", "USD", "RSI", "MACD", "ETF", "EPS", "PE", "AI", "API"}
)  # fmt: skip
#: Company-name words too generic to identify a company on their own.
_GENERIC_NAME_WORDS = frozenset({"inc", "corp", "corporation", "company", "the", "group", "international"})

QUERY_SYSTEM_PROMPT = (
    "Extract the stock the user asks about. Answer with one JSON object "
    '{"ticker": "<US ticker symbol or null>", "analysis_type": '
    '"technical"|"fundamental"|"sentiment"|"composite"}. Use null when no company or ticker is named.'
)


class UnresolvedQueryError(ValueError):
    """The text names no ticker or company this data source knows."""


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
    return named_analysis_type(text) or "composite"


def _names(provider: MarketDataProvider) -> dict[str, str]:
    names: dict[str, str] = {}
    for symbol in provider.symbols():
        try:
            name = provider.profile(symbol=symbol).name
        except ProviderError:
            continue
        if name:
            names[symbol] = name
    return names


def resolve_rules(*, text: str, provider: MarketDataProvider) -> str | None:
    """The deterministic resolver: a cashtag or an upper-case symbol (one the provider knows; any
    valid ticker for an online provider without a symbol list), then company names."""
    known = set(provider.symbols())
    for token in _TOKEN_RE.findall(text):
        raw = token.lstrip("$").rstrip(".-")
        candidate = raw.upper()
        tagged = token.startswith("$")
        if (tagged or (raw.isupper() and candidate not in _STOPWORDS)) and (
            candidate in known or (not known and looks_like_ticker(candidate))
        ):
            return normalize_ticker(candidate)
    lowered = f" {re.sub(r'[^a-z0-9 ]+', ' ', text.lower())} "
    for symbol, name in _names(provider).items():
        clean = re.sub(r"[^a-z0-9 ]+", " ", name.lower()).split()
        full = " ".join(w for w in clean if w not in _GENERIC_NAME_WORDS)
        first = clean[0] if clean else ""
        if (full and f" {full} " in lowered) or (
            first and first not in _GENERIC_NAME_WORDS and len(first) > 2 and f" {first} " in lowered
        ):
            return symbol
    return None


def _accept(ticker: Any, provider: MarketDataProvider) -> str | None:
    if not isinstance(ticker, str):
        return None
    try:
        value = normalize_ticker(ticker)
    except InvalidTickerError:
        return None
    known = provider.symbols()
    return value if not known or value in known else None


def parse_query(
    *, text: str, provider: MarketDataProvider, settings: Settings, llm_model: str | None = None
) -> ParsedQuery:
    """Resolve ``text`` to a ticker and an analysis type (module docstring).

    Args:
        text: the user's request ("should I buy Apple after its split?", or a bare ticker).
        provider: the data provider (its symbols and company names are the known universe).
        settings: for the ``query`` role's model; ``llm_model`` overrides it (``--llm``).
    Raises:
        UnresolvedQueryError: no known ticker or company in ``text``, or ``text`` holds junk
            (``pipeline.core.tickers.refuse_junk``: the message names the characters). Messages
            repeat at most 200 characters of ``text``.
    """
    try:
        refuse_junk(text)
    except JunkInputError as exc:
        raise UnresolvedQueryError(str(exc)) from exc
    if looks_like_ticker(text):
        return ParsedQuery(ticker=normalize_ticker(text), analysis_type="composite", method="ticker")
    if not any(ch.isspace() for ch in text.strip()):  # one word that is not a ticker: a typo, not a question
        raise UnresolvedQueryError(str(InvalidTickerError(text)))
    config = llm_config(settings=settings, override=llm_model)
    notes: list[str] = []
    rows: list[dict[str, Any]] = []
    if config is not None and config.model_for(Role.QUERY):
        session = LLMSession(config=config, stage="parse_query")
        messages = [{"role": "system", "content": QUERY_SYSTEM_PROMPT}, {"role": "user", "content": text}]
        try:
            completion = run_sync(
                session.complete(agent="parse_query", role=Role.QUERY, messages=messages, json_mode=True)
            )
            answer = extract_json(completion.content)
            ticker = _accept(answer.get("ticker"), provider)
            kind = answer.get("analysis_type")
            if ticker is not None:
                return ParsedQuery(
                    ticker=ticker,
                    analysis_type=kind
                    if kind in ("technical", "fundamental", "sentiment", "composite")
                    else "composite",
                    method="llm",
                    llm_rows=session.rows,
                )
            notes.append(f"LLM proposed {answer.get('ticker')!r}, not a known ticker")
        except (LLMError, ValueError) as exc:
            notes.append(f"LLM parse failed: {exc}"[:300])
        rows = session.rows
    ticker = resolve_rules(text=text, provider=provider)
    if ticker is None:
        known = ", ".join(provider.symbols()[:12])
        raise UnresolvedQueryError(
            f"no known ticker or company name in {clip(text)!r}"
            + (f" (known symbols include {known})" if known else "")
            + (f"; {'; '.join(notes)}" if notes else "")
        )
    return ParsedQuery(
        ticker=ticker, analysis_type=analysis_type_of(text), method="rules", llm_rows=rows, notes=notes
    )


__all__ = [
    "AnalysisType",
    "ParsedQuery",
    "UnresolvedQueryError",
    "analysis_type_of",
    "named_analysis_type",
    "parse_query",
    "resolve_rules",
]
