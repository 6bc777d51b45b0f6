"""News providers: offline headline files, RSS feeds (feedparser) and Tavily search (httpx).

Every provider returns :class:`NewsItem`s with a UTC ``published_at`` (``None`` when the source
gives no date). Point in time is enforced by the tools (``agents.tools.news``), not here.

* :class:`HeadlineFilesProvider` (``FINAGENT_DATA_NEWS_PROVIDER=files``, ``FINAGENT_DATA_NEWS_DIR``): every
  ``*.csv`` under the folder with columns ``title`` or ``headline``, ``date`` (timezone-aware
  timestamps), ``stock`` and optionally ``url``, ``publisher`` — the Benzinga files in
  ``../shared/data/news/benzinga/``. A story in two files (same stock and title, same minute)
  counts once, the row with a URL kept.
* :class:`RssProvider` (``rss``, ``FINAGENT_DATA_NEWS_RSS_URLS``): comma-separated feed URLs or
  local paths; an entry belongs to a symbol when its title or summary names the symbol.
* :class:`YFinanceNewsProvider` (``yfinance``, online, no key): Yahoo's latest stories per symbol.
* :class:`TavilyProvider` (``tavily``, ``FINAGENT_DATA_TAVILY_API_KEY``): POST ``/search`` with
  ``topic=news``; without a key every call raises :class:`NewsNotConfiguredError` carrying the
  message "Tavily API key is not configured." and hint "Set the API key.".

Contract of a :class:`NewsProvider` (see ``docs/architecture.md`` "Data sources"): no article
is an empty list; an infrastructure failure raises a
:class:`~agents.data.market.base.ProviderError` subclass (``ProviderTimeoutError`` /
``ProviderConnectionError`` → ``NETWORK_ERROR``, ``RateLimitedError`` → ``RATE_LIMITED``) that the
tool registry turns into the envelope error with that code's ``retry_hint``; a missing
configuration raises :class:`NewsNotConfiguredError` (``NOT_CONFIGURED`` with its ``hint``).
``FINAGENT_DATA_NEWS_PROVIDER`` picks the provider through the routing table
(:func:`agents.data.routing.get_news_provider`).
"""

from __future__ import annotations

import calendar
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

import pandas as pd

from agents.data.market.base import (
    NoDataError,
    ProviderConnectionError,
    ProviderError,
    ProviderTimeoutError,
    RateLimitedError,
)
from agents.data.news.scoring import names_symbol

TAVILY_KEY_MISSING = "Tavily API key is not configured."
TAVILY_KEY_HINT = "Set the API key (FINAGENT_DATA_TAVILY_API_KEY)."


class NewsNotConfiguredError(ProviderError):
    """The news provider lacks its configuration (→ ``NOT_CONFIGURED``); ``hint`` says what to set."""

    code = "NOT_CONFIGURED"

    def __init__(self, message: str, *, hint: str) -> None:
        super().__init__(message)
        self.hint = hint


@dataclass(frozen=True)
class NewsItem:
    """One article: ``symbol`` it was found for ('' for a free query), headline, summary (None if
    the source has none), UTC ``published_at`` (None if undated), ``source`` name and ``url``."""

    symbol: str
    headline: str
    summary: str | None
    published_at: datetime | None
    source: str
    url: str | None = None


class NewsProvider(Protocol):
    """What the news tools need from a provider (module docstring: the contract; empty = no news,
    failures raise ``ProviderError`` subclasses)."""

    name: str

    def for_symbols(self, symbols: list[str], *, since: datetime, until: datetime) -> list[NewsItem]:
        """Articles about ``symbols`` published in ``[since, until]`` (UTC), newest first."""
        ...

    def search(self, query: str, *, max_results: int, until: datetime) -> list[NewsItem]:
        """Articles matching free text ``query`` published at or before ``until``, best first."""
        ...

    def source_ref(self) -> str:
        """A citation of the source, e.g. ``files:/path/analyst_ratings_processed.csv``."""
        ...


def _utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


_WORD = re.compile(r"[A-Za-z0-9&.'-]+")


def _query_tokens(query: str) -> list[str]:
    return [t.lower() for t in _WORD.findall(query) if len(t) > 1]


class HeadlineFilesProvider:
    """Offline headline CSVs under ``root`` (the real Benzinga files); loaded once per instance."""

    name = "files"

    def __init__(self, root: Path) -> None:
        self.root = Path(root).expanduser()
        self._frame: pd.DataFrame | None = None
        self._lock = threading.Lock()

    def _files(self) -> list[Path]:
        return sorted(p for p in self.root.rglob("*.csv") if p.is_file())

    def frame(self) -> pd.DataFrame:
        """All headlines: columns ``stock, headline, published_at (UTC), url, publisher, file``."""
        with self._lock:
            if self._frame is None:
                parts = []
                for path in self._files():
                    raw = pd.read_csv(path)
                    title = (
                        "title"
                        if "title" in raw.columns
                        else "headline"
                        if "headline" in raw.columns
                        else None
                    )
                    if title is None or not {"date", "stock"} <= set(raw.columns):
                        continue
                    parts.append(
                        pd.DataFrame(
                            {
                                "stock": raw["stock"].astype(str).str.upper(),
                                "headline": raw[title].astype(str),
                                "published_at": pd.to_datetime(raw["date"], utc=True, errors="coerce"),
                                "url": raw["url"] if "url" in raw.columns else None,
                                "publisher": raw["publisher"] if "publisher" in raw.columns else "Benzinga",
                                "file": path.name,
                            }
                        )
                    )
                if not parts:
                    raise NoDataError(f"no headline CSV (title/headline, date, stock) under {self.root}")
                frame = pd.concat(parts, ignore_index=True).dropna(subset=["published_at"])
                # The same story in two files (Benzinga's processed file drops the seconds): keep
                # one per (stock, headline, minute), preferring the row with a URL.
                frame = frame.assign(
                    _minute=frame["published_at"].dt.floor("min"), _no_url=frame["url"].isna()
                ).sort_values("_no_url", kind="stable")
                frame = frame.drop_duplicates(subset=["stock", "headline", "_minute"])
                frame = frame.drop(columns=["_minute", "_no_url"])
                self._frame = frame.sort_values("published_at", ascending=False, kind="stable")
            return self._frame

    def _items(self, rows: pd.DataFrame) -> list[NewsItem]:
        return [
            NewsItem(
                symbol=str(r.stock),
                headline=str(r.headline),
                summary=None,
                published_at=pd.Timestamp(str(r.published_at)).to_pydatetime(),
                source=str(r.publisher) if isinstance(r.publisher, str) else "Benzinga",
                url=str(r.url) if isinstance(r.url, str) else None,
            )
            for r in rows.itertuples()
        ]

    def for_symbols(self, symbols: list[str], *, since: datetime, until: datetime) -> list[NewsItem]:
        """See :meth:`NewsProvider.for_symbols`: ``[since, until]`` UTC, newest first."""
        f = self.frame()
        rows = f[f["stock"].isin(symbols) & (f["published_at"] >= since) & (f["published_at"] <= until)]
        return self._items(rows)

    def search(self, query: str, *, max_results: int, until: datetime) -> list[NewsItem]:
        """Headlines ≤ ``until`` ranked by the number of query tokens they match (a token matches
        the ticker exactly or a word of the headline), then newest first."""
        tokens = _query_tokens(query)
        f = self.frame()
        f = f[f["published_at"] <= until]
        if not tokens or f.empty:
            return []
        lower = f["headline"].str.lower()
        score = sum(
            ((f["stock"].str.lower() == t) | lower.str.contains(rf"\b{re.escape(t)}\b", regex=True)).astype(
                int
            )
            for t in tokens
        )
        ranked = f.assign(_score=score)
        ranked = ranked[ranked["_score"] > 0].sort_values(
            ["_score", "published_at"], ascending=[False, False], kind="stable"
        )
        return self._items(ranked.head(max_results))

    def source_ref(self) -> str:
        """See :meth:`NewsProvider.source_ref`."""
        return "files:" + ",".join(str(p) for p in self._files())


class RssProvider:
    """RSS/Atom feeds parsed with feedparser (URLs or local files)."""

    name = "rss"

    def __init__(self, urls: list[str], *, timeout: float = 10.0) -> None:
        self.urls = urls
        self.timeout = timeout

    def _entries(self) -> list[NewsItem]:
        # lazy: feedparser and httpx (~0.5 s to import) serve the rss provider only, and registering
        # the news tools (agents.tools.news) imports this module whatever the provider
        import feedparser  # type: ignore[import-untyped]
        import httpx

        items: list[NewsItem] = []
        for url in self.urls:
            if url.startswith(("http://", "https://")):
                try:
                    resp = httpx.get(url, timeout=self.timeout, follow_redirects=True)
                except httpx.TimeoutException as exc:
                    raise ProviderTimeoutError(f"RSS feed {url} timed out") from exc
                except httpx.HTTPError as exc:
                    raise ProviderConnectionError(f"RSS feed {url}: {type(exc).__name__}") from exc
                if resp.status_code == 429:
                    raise RateLimitedError(f"RSS feed {url} answered 429")
                if resp.status_code >= 400:
                    raise NoDataError(f"RSS feed {url} answered HTTP {resp.status_code}")
                parsed = feedparser.parse(resp.content)
            else:
                parsed = feedparser.parse(Path(url).expanduser().read_bytes())
            source = str(parsed.feed.get("title") or url)
            for entry in parsed.entries:
                stamp = entry.get("published_parsed") or entry.get("updated_parsed")
                published = datetime.fromtimestamp(calendar.timegm(stamp), tz=UTC) if stamp else None
                summary = re.sub(r"<[^>]+>", "", str(entry.get("summary") or "")).strip() or None
                items.append(
                    NewsItem(
                        symbol="",
                        headline=str(entry.get("title") or "").strip(),
                        summary=summary,
                        published_at=published,
                        source=source,
                        url=entry.get("link"),
                    )
                )
        return items

    def for_symbols(self, symbols: list[str], *, since: datetime, until: datetime) -> list[NewsItem]:
        """See :meth:`NewsProvider.for_symbols`: ``[since, until]`` UTC, newest first."""
        out: list[NewsItem] = []
        for item in self._entries():
            if item.published_at is None or not since <= item.published_at <= until:
                continue
            text = f"{item.headline} {item.summary or ''}"
            out.extend(NewsItem(**{**item.__dict__, "symbol": s}) for s in symbols if names_symbol(text, s))
        return sorted(out, key=lambda i: i.published_at or until, reverse=True)

    def search(self, query: str, *, max_results: int, until: datetime) -> list[NewsItem]:
        """See :meth:`NewsProvider.search`: published at or before ``until``, best first."""
        tokens = _query_tokens(query)
        scored = []
        for item in self._entries():
            if item.published_at is not None and item.published_at > until:
                continue
            text = f"{item.headline} {item.summary or ''}".lower()
            score = sum(1 for t in tokens if re.search(rf"\b{re.escape(t)}\b", text))
            if score:
                scored.append((score, item))
        scored.sort(key=lambda p: (p[0], p[1].published_at or datetime.min.replace(tzinfo=UTC)), reverse=True)
        return [item for _, item in scored[:max_results]]

    def source_ref(self) -> str:
        """See :meth:`NewsProvider.source_ref`."""
        return "rss:" + ",".join(self.urls)


class TavilyProvider:
    """Tavily search (``topic=news``) over httpx. Undated results are kept only for live use
    (the tools drop undated items when ``as_of`` is before today)."""

    name = "tavily"

    def __init__(self, *, api_key: str | None, url: str, timeout: float = 10.0) -> None:
        self.api_key = api_key
        self.url = url
        self.timeout = timeout

    def _search(self, query: str, max_results: int, symbol: str = "") -> list[NewsItem]:
        import httpx  # lazy: only for the tavily provider (as feedparser in RssProvider._entries)

        if not self.api_key:
            raise NewsNotConfiguredError(TAVILY_KEY_MISSING, hint=TAVILY_KEY_HINT)
        body = {"query": query, "max_results": max_results, "topic": "news"}
        try:
            resp = httpx.post(
                self.url, json=body, headers={"Authorization": f"Bearer {self.api_key}"}, timeout=self.timeout
            )
        except httpx.TimeoutException as exc:
            raise ProviderTimeoutError("Tavily search timed out") from exc
        except httpx.HTTPError as exc:
            raise ProviderConnectionError(f"Tavily search: {type(exc).__name__}") from exc
        if resp.status_code in (401, 403):
            raise NewsNotConfiguredError("Tavily rejected the API key.", hint="Check the API key.")
        if resp.status_code == 429:
            raise RateLimitedError("Tavily rate limit hit")
        if resp.status_code >= 400:
            raise NoDataError(f"Tavily answered HTTP {resp.status_code}")
        items = []
        for r in resp.json().get("results", []):
            published = None
            if r.get("published_date"):
                try:
                    published = _utc(pd.Timestamp(r["published_date"]).to_pydatetime())
                except (ValueError, TypeError):
                    published = None
            items.append(
                NewsItem(
                    symbol=symbol,
                    headline=str(r.get("title") or ""),
                    summary=r.get("content") or None,
                    published_at=published,
                    source="tavily:"
                    + (re.sub(r"^https?://([^/]+).*$", r"\1", str(r.get("url") or "")) or "?"),
                    url=r.get("url"),
                )
            )
        return items

    def for_symbols(self, symbols: list[str], *, since: datetime, until: datetime) -> list[NewsItem]:
        """See :meth:`NewsProvider.for_symbols`: ``[since, until]`` UTC, newest first."""
        out: list[NewsItem] = []
        for s in symbols:
            out.extend(
                i
                for i in self._search(f"{s} stock news", 10, symbol=s)
                if i.published_at is None or since <= i.published_at <= until
            )
        return out

    def search(self, query: str, *, max_results: int, until: datetime) -> list[NewsItem]:
        """See :meth:`NewsProvider.search`: published at or before ``until``, best first."""
        return self._search(query, max_results)

    def source_ref(self) -> str:
        """See :meth:`NewsProvider.source_ref`."""
        return f"tavily:{self.url}"


def _yf_news(symbol: str) -> list[dict[str, Any]]:
    # lazy: yfinance (about a second, kept out of tool registration: tests/agents/test_registry.py)
    import yfinance

    import agents.data.market.yfinance_provider  # noqa: F401  (yfinance raises instead of hiding errors)

    return list(yfinance.Ticker(symbol).get_news(count=20) or [])


def _yf_news_error(exc: Exception, symbol: str) -> ProviderError:
    """``RATE_LIMITED`` for Yahoo's HTTP 429, ``NETWORK_ERROR`` (timeout or failed request)
    otherwise; the message names the status or exception type, never the URL."""
    from agents.data.market.yfinance_provider import translate_error  # lazy: imports yfinance

    mapped = translate_error(exc, symbol=symbol)
    status = getattr(getattr(exc, "response", None), "status_code", None)
    detail = f"HTTP {status}" if isinstance(status, int) else type(exc).__name__
    passed = isinstance(mapped, (RateLimitedError, ProviderTimeoutError))
    cls = type(mapped) if passed else ProviderConnectionError
    return cls(f"yfinance news for {symbol}: {detail}")


class YFinanceNewsProvider:
    """Yahoo Finance news through yfinance (``Ticker.get_news``): the latest ~20 stories per
    symbol, so a past ``as_of`` usually finds none. Both item shapes are read: the current one
    (``content: {title, summary, pubDate, provider.displayName, canonicalUrl.url}``) and the
    older flat one (``title, publisher, link, providerPublishTime``). ``search`` serves the
    tickers written in upper case in the query (``"AAPL earnings"``), ranked by the other words.

    yfinance 1.7 POSTs ``finance.yahoo.com/xhr/ncp?queryRef=latestNews`` and reads
    ``data.tickerStream.stream`` (tested against a recorded real response). Errors (changed after
    running real yfinance over HTTP): Yahoo's HTTP 429 is ``RateLimitedError`` (``RATE_LIMITED``;
    it was reported as ``NETWORK_ERROR``), a timeout ``ProviderTimeoutError``, anything else
    (refused connection, an unreadable error page) ``ProviderConnectionError``. yfinance is put in
    ``hide_exceptions=False`` mode (as the price provider does), because otherwise it logs an error
    page and returns no stories, which would read as "no news". An error status with a JSON body
    is still read by yfinance as an empty stream: yfinance does not look at the status there."""

    name = "yfinance"

    def __init__(self, fetch: Callable[[str], list[dict[str, Any]]] | None = None) -> None:
        self._fetch = fetch

    def _items(self, symbol: str) -> list[NewsItem]:
        fetch = self._fetch or _yf_news
        try:
            raw = fetch(symbol)
        except Exception as exc:  # yfinance raises many types for network problems
            raise _yf_news_error(exc, symbol) from exc
        items = []
        for art in raw:
            content = art.get("content")
            c: dict[str, Any] = content if isinstance(content, dict) else art
            published = None
            if c.get("pubDate"):
                published = _utc(pd.Timestamp(str(c["pubDate"])).to_pydatetime())
            elif c.get("providerPublishTime"):
                published = datetime.fromtimestamp(int(c["providerPublishTime"]), tz=UTC)
            provider = c.get("provider")
            source = provider.get("displayName") if isinstance(provider, dict) else c.get("publisher")
            link = c.get("canonicalUrl")
            url = link.get("url") if isinstance(link, dict) else c.get("link")
            items.append(
                NewsItem(
                    symbol=symbol,
                    headline=str(c.get("title") or "").strip(),
                    summary=str(c.get("summary") or "").strip() or None,
                    published_at=published,
                    source=f"yahoo:{source or 'unknown'}",
                    url=url,
                )
            )
        return items

    def for_symbols(self, symbols: list[str], *, since: datetime, until: datetime) -> list[NewsItem]:
        """See :meth:`NewsProvider.for_symbols`: ``[since, until]`` UTC, newest first."""
        out = [
            i
            for s in symbols
            for i in self._items(s)
            if i.published_at is None or since <= i.published_at <= until
        ]
        return sorted(out, key=lambda i: i.published_at or until, reverse=True)

    def search(self, query: str, *, max_results: int, until: datetime) -> list[NewsItem]:
        """See :meth:`NewsProvider.search`: published at or before ``until``, best first."""
        tickers = list(re.findall(r"\b[A-Z]{1,5}\b", query))
        words = [t for t in _query_tokens(query) if t.upper() not in tickers]
        scored = []
        for t in dict.fromkeys(tickers):
            for item in self._items(t):
                text = f"{item.headline} {item.summary or ''}".lower()
                scored.append((sum(1 for w in words if re.search(rf"\b{re.escape(w)}\b", text)), item))
        scored.sort(key=lambda p: (p[0], p[1].published_at or datetime.min.replace(tzinfo=UTC)), reverse=True)
        return [item for _, item in scored[:max_results]]

    def source_ref(self) -> str:
        """See :meth:`NewsProvider.source_ref`."""
        return "yfinance:news"
