"""News tools: ``get_news(symbols, hours_back)`` and ``financial_news(query,
max_results)`` (docs/design.md, "News tools"), over the provider chosen by
``FINAGENT_DATA_NEWS_PROVIDER`` (``agents.data.news.providers``).

Point in time: the cut-off is the close that prices ``as_of`` (exclusive): the regular close of
the last NYSE session on or before ``as_of``, 16:00 New York time (20:00 UTC under daylight
saving, 21:00 UTC in winter; 13:00 on early-close days), from the exchange calendar
(:func:`agents.data.market_calendar.close_at_or_before`). Prices, earnings and the scorecard's
entry are all at that close, so a headline published after it (an after-hours earnings release,
say) would be news the analysis could not have had; no item published at or after it is
returned, whatever the provider. Undated items (some RSS/Tavily results) are returned only when
``as_of`` is today or later (live use); for a past ``as_of`` they are dropped, since their date
cannot be checked.
Sentiment, impact and tags are computed in code (``agents.data.news.scoring``), only for headlines
that name the company (its ticker, its name from the data provider or the S&P 500 list, or a
former name): the others are left out and counted (``left_out``), see ``agents.data.news.scoring``.
"""

from __future__ import annotations

import csv
from contextlib import suppress
from datetime import UTC, date, datetime, timedelta
from functools import lru_cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agents.data.market.base import ProviderError
from agents.data.market.clock import is_offline
from agents.data.market_calendar import close_at_or_before
from agents.data.news.providers import NewsItem, NewsNotConfiguredError, NewsProvider
from agents.data.news.scoring import company_aliases, mentions_company, score_item
from agents.data.routing import get_news_provider
from agents.tools.envelope import ErrorCode
from agents.tools.fields import FewSymbols
from agents.tools.registry import ToolContext, ToolInputError, ToolOutput, register

MAX_HOURS_BACK = 24 * 366
DEFAULT_HOURS_BACK = 72
MAX_ITEMS_PER_SYMBOL = 50
#: Left-out headlines listed by name (the rest are only counted): enough to see why, small enough
#: for the state message.
MAX_LEFT_OUT_EXAMPLES = 5


def cutoff(as_of: date) -> datetime:
    """The exclusive point-in-time bound of news at ``as_of`` (UTC): the close that prices
    ``as_of`` (module docstring; :func:`agents.data.market_calendar.close_at_or_before`)."""
    return close_at_or_before(as_of)


def _provider(ctx: ToolContext) -> NewsProvider:
    try:
        return get_news_provider(ctx.settings)
    except NewsNotConfiguredError as exc:
        raise ToolInputError(str(exc), code=ErrorCode.NOT_CONFIGURED, retry_hint=exc.hint) from None


def _sp500_names(root: Path | None) -> dict[str, str]:
    """``{symbol: Name}`` of the S&P 500 list (``<FINAGENT_DATA_FUNDAMENTALS_DIR>/sp500/constituents.csv``),
    empty without it; read once per folder."""
    if root is None:
        return {}
    return _read_sp500_names(str(Path(root).expanduser() / "sp500" / "constituents.csv"))


@lru_cache(maxsize=4)
def _read_sp500_names(path: str) -> dict[str, str]:
    if not Path(path).is_file():
        return {}
    with open(path, newline="", encoding="utf-8") as handle:
        return {
            row["Symbol"].strip().upper().replace(".", "-"): row["Name"].strip()
            for row in csv.DictReader(handle)
            if row.get("Symbol") and row.get("Name")
        }


def _aliases(ctx: ToolContext, symbol: str) -> tuple[str, ...]:
    """The company names a headline about ``symbol`` would use (``agents.data.news.scoring.
    company_aliases``): the market-data provider's name for it (offline providers only: an
    online profile costs a request) and the S&P 500 list's, when configured."""
    names: list[str | None] = [_sp500_names(ctx.settings.data.fundamentals_dir).get(symbol.replace(".", "-"))]
    if is_offline(ctx.provider):
        # a symbol the price data lacks: the ticker and the other sources still count
        with suppress(ProviderError):
            names.append(ctx.provider.profile(symbol=symbol).name)
    return company_aliases(symbol=symbol, names=names)


def _visible(item: NewsItem, *, until: datetime, live: bool) -> bool:
    if item.published_at is None:
        return live
    return item.published_at < until


class NewsInput(BaseModel):
    """``{symbols, hours_back?}``: 1..20 tickers; hours before the close of ``as_of`` (1..8784,
    default 72)."""

    model_config = ConfigDict(extra="forbid")

    symbols: FewSymbols = Field(description="Tickers, e.g. ['AAPL']")
    hours_back: int = Field(
        default=DEFAULT_HOURS_BACK,
        ge=1,
        le=MAX_HOURS_BACK,
        description="Window before the analysis date's market close",
    )


@register(
    name="get_news",
    description=(
        "Headlines about the symbols published in the hours_back before the market close of the "
        "analysis date, with sentiment (-1..1, VADER), impact_score (0..1), tags "
        "(earnings|guidance|regulatory|product), source."
    ),
    input_model=NewsInput,
)
def get_news(params: NewsInput, ctx: ToolContext) -> ToolOutput:
    """News for ``params.symbols`` in ``[cutoff - hours_back h, cutoff)``.

    Returns data ``{news: [{symbol, headline, summary, sentiment, impact_score, published_at,
    source, tags, url}], count, counts: {symbol: n}, window: {since, until}, provider, source,
    null_reasons, left_out: {symbol: n}, left_out_examples: [{symbol, headline, published_at}]
    (at most 5), relevance: {symbol: {ticker, names}}}``; a headline that does not name its
    company is left out (counted, not scored). Newest first, at most 50 per symbol.
    ``published_at`` is UTC ISO 8601;
    ``summary`` is null when the source has none (``null_reasons.summary``). Zero items is a
    success (the sentiment view reads it as NEUTRAL).

    Raises:
        ToolInputError: NOT_CONFIGURED when the provider lacks its folder, feeds or key.
        ProviderError: the provider's network/rate-limit/no-data errors.
    """
    provider = _provider(ctx)
    until = cutoff(ctx.as_of)
    since = until - timedelta(hours=params.hours_back)
    live = ctx.as_of >= datetime.now(UTC).date()
    raw = [
        i
        for i in provider.for_symbols(params.symbols, since=since, until=until)
        if _visible(i, until=until, live=live)
    ]
    news: list[dict[str, Any]] = []
    counts = dict.fromkeys(params.symbols, 0)
    aliases = {symbol: _aliases(ctx, symbol) for symbol in params.symbols}
    left_out = dict.fromkeys(params.symbols, 0)
    left_out_examples: list[dict[str, Any]] = []
    for item in raw:
        if item.symbol not in counts or counts[item.symbol] >= MAX_ITEMS_PER_SYMBOL:
            continue
        text = f"{item.headline} {item.summary or ''}"
        if not mentions_company(text, symbol=item.symbol, aliases=aliases[item.symbol]):
            left_out[item.symbol] += 1  # filed under the ticker but not about it: not scored
            if len(left_out_examples) < MAX_LEFT_OUT_EXAMPLES:
                left_out_examples.append(
                    {
                        "symbol": item.symbol,
                        "headline": item.headline,
                        "published_at": item.published_at.isoformat() if item.published_at else None,
                    }
                )
            continue
        counts[item.symbol] += 1
        news.append(
            {
                "symbol": item.symbol,
                "headline": item.headline,
                "summary": item.summary,
                **score_item(headline=item.headline, summary=item.summary, symbol=item.symbol),
                "published_at": item.published_at.isoformat() if item.published_at else None,
                "source": item.source,
                "url": item.url,
            }
        )
    null_reasons: dict[str, str] = {}
    if any(n["summary"] is None for n in news):
        null_reasons["summary"] = f"the {provider.name} source gives headlines without a summary"
    data = {
        "news": news,
        "count": len(news),
        "counts": counts,
        "window": {"since": since.isoformat(), "until": until.isoformat(), "hours_back": params.hours_back},
        "provider": provider.name,
        "source": provider.source_ref(),
        "null_reasons": null_reasons,
        "left_out": left_out,
        "left_out_examples": left_out_examples,
        "relevance": {symbol: {"ticker": symbol, "names": list(names)} for symbol, names in aliases.items()},
    }
    dropped = sum(left_out.values())
    summary = (
        f"{len(news)} headlines ({dropped} left out: not about the company) for "
        f"{', '.join(params.symbols)} in {params.hours_back} h to {until:%Y-%m-%d %H:%M} UTC (market close)"
    )
    return ToolOutput(
        data=data, summary=summary, symbol=params.symbols[0] if len(params.symbols) == 1 else None
    )


class FinancialNewsInput(BaseModel):
    """``{query, max_results?}``: free text, 1..20 results (default 5)."""

    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1, max_length=400, description="Search text, e.g. 'AAPL earnings'")
    max_results: int = Field(default=5, ge=1, le=20)


@register(
    name="financial_news",
    description="Search news by free text: title, url, snippet, published_date.",
    input_model=FinancialNewsInput,
)
def financial_news(params: FinancialNewsInput, ctx: ToolContext) -> ToolOutput:
    """Output ``{status: "success", query, results: [{title, url, snippet,
    published_date}], total_results}``; ``published_date`` is UTC ISO 8601 or ``"N/A"``, ``url``
    null for sources without links, ``snippet`` the summary or ``""``. Nothing at or after the
    close of ``as_of`` (module docstring).

    Raises:
        ToolInputError: NOT_CONFIGURED ("Tavily API key is not configured." with its hint).
    """
    provider = _provider(ctx)
    until = cutoff(ctx.as_of)
    live = ctx.as_of >= datetime.now(UTC).date()
    items = [
        i
        for i in provider.search(params.query, max_results=params.max_results, until=until)
        if _visible(i, until=until, live=live)
    ][: params.max_results]
    results = [
        {
            "title": i.headline,
            "url": i.url,
            "snippet": i.summary or "",
            "published_date": i.published_at.isoformat() if i.published_at else "N/A",
        }
        for i in items
    ]
    data = {"status": "success", "query": params.query, "results": results, "total_results": len(results)}
    return ToolOutput(data=data, summary=f"{len(results)} results for {params.query!r}")
