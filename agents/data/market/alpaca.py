"""Alpaca market-data client (docs/design.md, "Alpaca price tool").

Three layers (schemas, client, tool); the first two and the JSON
function live here, the registered tool in :mod:`agents.tools.alpaca_price` (a provider imports
no tool code):

1. schemas: :class:`StockInput` (``ticker``: 1–5 uppercase letters, normalised) and
   :class:`StockOutput` (``ticker, price, currency, timestamp, change, change_percent``);
2. client: :class:`AlpacaMarketDataClient`, async httpx, key and secret in the headers
   ``APCA-API-KEY-ID`` / ``APCA-API-SECRET-KEY``, ``GET {base}/stocks/snapshots?symbols=T``,
   10 s timeout, retries only on ``httpx.TimeoutException`` after 1, 2, 4 s (``MAX_RETRIES`` = 3,
   so at most 4 requests), never on HTTP 4xx/5xx;
3. tool: :func:`get_stock_price_json` returns a JSON string (data or ``{"error": ...}``
   with the texts of "Alpaca errors"); the registered tool ``get_stock_price``
   (:mod:`agents.tools.alpaca_price`) returns the same data in the tool envelope.

Base URL: ``settings.broker.alpaca_data_url`` (``FINAGENT_BROKER_ALPACA_DATA_URL``) if set, else the sandbox
URL when ``alpaca_use_sandbox``, else the live data URL. Keys are ``SecretStr`` in the settings,
are only ever put in request headers, and never appear in logs, errors or ``tool_calls`` rows.

Mapping (docs/design.md, "Snapshot mapping"): ``price`` ← ``latestTrade.p`` (USD); ``timestamp`` ←
``latestTrade.t`` as ISO 8601 UTC (Alpaca sends RFC 3339 text; integer
nanoseconds since the epoch: both accepted); ``change`` ← ``price − prevDay.c`` formatted
``"+2.34"``; ``change_percent`` ← ``(price − prevDay.c) / prevDay.c × 100`` formatted ``"+1.33%"``.

Rate limit (shared with the other remote providers): every HTTP request, each timeout
retry included, first takes a token from the token bucket ``alpaca`` of
``agents.data.market.shared`` (Redis key ``finagent:ratelimit:alpaca`` on
``settings.service.shared_redis_url``, so all workers and processes share it; in embedded mode, without
a Redis broker, a bucket in this process). Rate ``FINAGENT_BROKER_ALPACA_RATE_PER_MIN`` (default 200
requests/min, Alpaca's free market-data plan), capacity ``FINAGENT_BROKER_ALPACA_RATE_BURST`` (10).
An empty bucket sends nothing and does not wait: :class:`AlpacaBucketEmptyError` carries the
seconds until a token frees, the tool returns ``RATE_LIMITED`` with ``retry_hint`` "Retry in
N s ...", and a pipeline stage turns that into ``TransientStageError`` (the Celery task retries
later), exactly as for the yfinance bucket. An HTTP 429 from Alpaca is
:class:`AlpacaRateLimitedError` (message ``Stock service error: 429``, not retried here) →
``RATE_LIMITED`` with the wait from ``Retry-After`` (seconds or HTTP date) or else
``X-RateLimit-Reset`` (Unix seconds) in the hint when Alpaca sends one.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import math
import re
import time
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any

import httpx
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from agents.data.market import shared
from core.settings import Settings

logger = logging.getLogger("finagent.alpaca")

# Constants (docs/design.md, "Alpaca retries" and "Alpaca settings and security").
ALPACA_DATA_BASE_URL = "https://data.alpaca.markets/v2"
ALPACA_SANDBOX_BASE_URL = "https://data.sandbox.alpaca.markets/v2"
DEFAULT_TIMEOUT_SECONDS = 10.0
MAX_RETRIES = 3
INITIAL_RETRY_DELAY_SECONDS = 1.0
TICKER_MIN_LENGTH = 1
TICKER_MAX_LENGTH = 5
TICKER_PATTERN = r"^[A-Z]+$"

# Error texts (docs/design.md, "Alpaca errors"). Every setting carries the FINAGENT_ prefix
# (FINAGENT_BROKER_ALPACA_API_KEY / FINAGENT_BROKER_ALPACA_SECRET_KEY).
NOT_CONFIGURED = (
    "Stock tool not configured. Set FINAGENT_BROKER_ALPACA_API_KEY and FINAGENT_BROKER_ALPACA_SECRET_KEY."
)
INVALID_FORMAT = "Invalid ticker format. Use 1-5 uppercase letters."
INVALID_TICKER = "Invalid ticker: {symbol}"
SERVICE_ERROR = "Stock service error: {status_code}"
UNAVAILABLE = "Stock service unavailable. Please try again."
UNKNOWN_ERROR = "Failed to retrieve stock data."
# Our own shared rate limit (no request was sent).
BUCKET_EMPTY = "Stock service rate limit reached; no request sent. Retry in {seconds:.1f}s."

#: Name of the shared token bucket (Redis key ``finagent:ratelimit:alpaca``).
RATE_LIMIT_BUCKET = "alpaca"

#: Takes one request token; returns 0.0 when taken, else the seconds until one frees.
RateLimiter = Callable[[], float]


# --------------------------------------------------------------------------- layer 1: schemas


class StockInput(BaseModel):
    """``{ticker}``: 1–5 uppercase letters after stripping and upper-casing."""

    model_config = ConfigDict(extra="forbid")

    ticker: str = Field(
        min_length=TICKER_MIN_LENGTH,
        max_length=TICKER_MAX_LENGTH,
        description="Stock ticker symbol (e.g., AAPL, GOOGL)",
    )

    @field_validator("ticker", mode="before")
    @classmethod
    def _normalise(cls, value: object) -> object:
        if isinstance(value, str):
            value = value.strip().upper()
            if not re.match(TICKER_PATTERN, value) or len(value) > TICKER_MAX_LENGTH:
                raise ValueError(INVALID_FORMAT)
        return value


class StockOutput(BaseModel):
    """``StockOutput``: price in USD, ISO 8601 trade timestamp, signed change strings."""

    ticker: str = Field(description="Stock ticker symbol")
    price: float = Field(description="Current stock price in USD")
    currency: str = Field(default="USD", description="Currency code")
    timestamp: str = Field(description="ISO 8601 timestamp of the trade")
    change: str = Field(description="Price change from previous close with sign (e.g., '+2.34', '-1.50')")
    change_percent: str = Field(
        description="Percentage change from previous close with sign (e.g., '+1.32%', '-0.85%')"
    )


# --------------------------------------------------------------------------- exceptions


class AlpacaMarketDataError(Exception):
    """Base exception for Alpaca errors."""


class InvalidTickerSymbolError(AlpacaMarketDataError):
    """The ticker is not in the snapshot response."""


class AlpacaNotConfiguredError(AlpacaMarketDataError):
    """Key or secret missing."""


class AlpacaServiceError(AlpacaMarketDataError):
    """HTTP 4xx/5xx from Alpaca; ``status_code`` kept, the body is not (it may echo headers)."""

    def __init__(self, status_code: int):
        super().__init__(SERVICE_ERROR.format(status_code=status_code))
        self.status_code = status_code


class AlpacaRateLimitedError(AlpacaServiceError):
    """HTTP 429 from Alpaca; ``retry_after``: seconds from its headers, or ``None``."""

    def __init__(self, retry_after: float | None = None):
        super().__init__(429)
        self.retry_after = retry_after


class AlpacaBucketEmptyError(AlpacaMarketDataError):
    """Our shared token bucket is empty: no request was sent. ``retry_after``: seconds until a
    token frees."""

    def __init__(self, retry_after: float):
        super().__init__(BUCKET_EMPTY.format(seconds=retry_after))
        self.retry_after = retry_after


class AlpacaTimeoutError(AlpacaMarketDataError):
    """Every attempt timed out."""


class AlpacaConnectionError(AlpacaMarketDataError):
    """No HTTP exchange happened: connection refused or reset, DNS failure, TLS error
    (``httpx.TransportError`` other than a timeout). Transient: the caller retries later
    (``NETWORK_ERROR``: connection failure or timeouts)."""


# --------------------------------------------------------------------------- layer 2: client


def _iso_timestamp(raw: object) -> str:
    """``latestTrade.t`` → ISO 8601 UTC: integer ns since the epoch, or RFC 3339 text (fraction
    truncated to microseconds)."""
    if isinstance(raw, int | float):
        return datetime.fromtimestamp(raw / 1e9, tz=UTC).isoformat()
    if isinstance(raw, str):
        text = re.sub(r"(\.\d{6})\d+", r"\1", raw.replace("Z", "+00:00"))
        return datetime.fromisoformat(text).astimezone(UTC).isoformat()
    raise AlpacaMarketDataError("snapshot without a trade timestamp")


def retry_after_seconds(headers: Mapping[str, str], *, now: float | None = None) -> float | None:
    """Seconds to wait after an HTTP 429, from its headers.

    Args:
        headers: response headers (case-insensitive mapping, e.g. ``httpx.Headers``).
        now: current Unix time in seconds (default ``time.time()``).
    Returns:
        ``Retry-After`` (delay in seconds, or an HTTP date) if present and valid, else
        ``X-RateLimit-Reset`` (Unix time in seconds, Alpaca's header) minus ``now``; never
        negative; ``None`` when neither header is usable. Never raises.
    """
    now = time.time() if now is None else now
    raw = (headers.get("Retry-After") or "").strip()
    if raw:
        try:
            seconds = float(raw)
        except ValueError:
            try:
                seconds = parsedate_to_datetime(raw).timestamp() - now
            except (TypeError, ValueError, IndexError):
                seconds = math.nan
        if math.isfinite(seconds):
            return max(0.0, seconds)
    raw = (headers.get("X-RateLimit-Reset") or "").strip()
    if raw:
        try:
            seconds = float(raw) - now
        except ValueError:
            return None
        if math.isfinite(seconds):
            return max(0.0, seconds)
    return None


def snapshot_to_output(ticker: str, snapshot: dict[str, Any]) -> StockOutput:
    """Map one ``/snapshots`` entry to :class:`StockOutput` (docs/design.md, "Snapshot mapping")."""
    try:
        price = float(snapshot["latestTrade"]["p"])
        prev_close = float(snapshot["prevDay"]["c"])
        stamp = _iso_timestamp(snapshot["latestTrade"]["t"])
    except (KeyError, TypeError, ValueError) as exc:
        raise AlpacaMarketDataError(f"snapshot for {ticker} lacks {exc}") from None
    if prev_close <= 0:
        raise AlpacaMarketDataError(f"snapshot for {ticker} has previous close {prev_close}")
    change = price - prev_close
    return StockOutput(
        ticker=ticker,
        price=price,
        timestamp=stamp,
        change=f"{change:+.2f}",
        change_percent=f"{change / prev_close * 100:+.2f}%",
    )


class AlpacaMarketDataClient:
    """Async client of Alpaca's market-data API (layer 2).

    Args:
        api_key / secret_key: credentials, sent only as ``APCA-API-KEY-ID`` / ``APCA-API-SECRET-KEY``.
        base_url: ends in ``/v2``.
        timeout: seconds per request (default 10).
        max_retries: retries after a timeout (default 3 → delays 1, 2, 4 s).
        retry_delay: first delay in seconds (default 1.0); attempt n waits ``retry_delay * 2**n``.
        transport / sleep: injectable for tests.
        rate_limiter: called before every request (each retry too); returns 0.0 when a token
            was taken, else the seconds until one frees (then no request is sent). ``None``: no
            limit (a bare client); :func:`client_from_settings` passes the shared bucket.
    """

    def __init__(
        self,
        *,
        api_key: str,
        secret_key: str,
        base_url: str = ALPACA_DATA_BASE_URL,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        max_retries: int = MAX_RETRIES,
        retry_delay: float = INITIAL_RETRY_DELAY_SECONDS,
        transport: httpx.AsyncBaseTransport | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        rate_limiter: RateLimiter | None = None,
    ):
        if not api_key or not secret_key:
            raise AlpacaNotConfiguredError(NOT_CONFIGURED)
        self._headers = {"APCA-API-KEY-ID": api_key, "APCA-API-SECRET-KEY": secret_key}
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.max_retries = max_retries
        self.retry_delay = retry_delay
        self._transport = transport
        self._sleep = sleep
        self._rate_limiter = rate_limiter
        self.attempts = 0  # requests made by the last call (for tests and logs)

    def __repr__(self) -> str:  # never show the headers
        return f"AlpacaMarketDataClient(base_url={self.base_url!r})"

    async def get_snapshots(self, symbols: list[str]) -> dict[str, Any]:
        """``GET /stocks/snapshots?symbols=A,B`` → the decoded JSON object.

        Raises:
            AlpacaTimeoutError: every attempt (1 + ``max_retries``) timed out.
            AlpacaBucketEmptyError: the rate limiter had no token before an attempt (nothing
                sent for that attempt; not retried here).
            AlpacaRateLimitedError: HTTP 429 (not retried), with the wait from its headers.
            AlpacaServiceError: other HTTP 4xx/5xx (not retried).
            AlpacaConnectionError: the connection failed (refused, reset, DNS; not retried
                here: the task retries NETWORK_ERROR with backoff).
        """
        url = f"{self.base_url}/stocks/snapshots"
        self.attempts = 0
        async with httpx.AsyncClient(timeout=self.timeout, transport=self._transport) as client:
            for attempt in range(self.max_retries + 1):
                if self._rate_limiter is not None:
                    wait = self._rate_limiter()
                    if wait > 0:
                        logger.warning("alpaca rate limit: bucket empty, a token frees in %.1fs", wait)
                        raise AlpacaBucketEmptyError(wait)
                self.attempts += 1
                try:
                    response = await client.get(
                        url, params={"symbols": ",".join(symbols)}, headers=self._headers
                    )
                    response.raise_for_status()
                except httpx.TimeoutException:
                    if attempt >= self.max_retries:
                        raise AlpacaTimeoutError(UNAVAILABLE) from None
                    delay = self.retry_delay * 2**attempt
                    logger.warning(
                        "alpaca snapshots timed out (attempt %d); retrying in %gs", attempt + 1, delay
                    )
                    await self._sleep(delay)
                    continue
                except httpx.TransportError as exc:  # after TimeoutException, its subclass
                    logger.warning("alpaca snapshots: connection failed (%s)", type(exc).__name__)
                    raise AlpacaConnectionError(UNAVAILABLE) from None
                except httpx.HTTPStatusError as exc:
                    if exc.response.status_code == 429:
                        raise AlpacaRateLimitedError(retry_after_seconds(exc.response.headers)) from None
                    raise AlpacaServiceError(exc.response.status_code) from None
                body = response.json()
                if not isinstance(body, dict):
                    raise AlpacaMarketDataError("snapshot response is not an object")
                return body
        raise AlpacaTimeoutError(UNAVAILABLE)  # pragma: no cover - loop always returns or raises

    async def get_stock_price(self, ticker: str) -> StockOutput:
        """The ``StockOutput`` for one ticker.

        Raises:
            InvalidTickerSymbolError: the ticker is absent from the response.
            AlpacaTimeoutError / AlpacaBucketEmptyError / AlpacaRateLimitedError /
            AlpacaServiceError / AlpacaMarketDataError: see :meth:`get_snapshots`.
        """
        body = await self.get_snapshots([ticker])
        snapshot = body.get(ticker)
        if not isinstance(snapshot, dict):
            raise InvalidTickerSymbolError(INVALID_TICKER.format(symbol=ticker))
        return snapshot_to_output(ticker, snapshot)


def base_url_for(settings: Settings) -> str:
    """``FINAGENT_BROKER_ALPACA_DATA_URL`` if set, else the sandbox or live data URL."""
    if settings.broker.alpaca_data_url:
        return settings.broker.alpaca_data_url
    return ALPACA_SANDBOX_BASE_URL if settings.broker.alpaca_use_sandbox else ALPACA_DATA_BASE_URL


def rate_limiter_for(settings: Settings) -> RateLimiter:
    """The shared token bucket of Alpaca requests for ``settings``.

    Args:
        settings: ``alpaca_rate_per_min`` (requests/min), ``alpaca_rate_burst`` (capacity) and
            ``shared_redis_url`` (Redis for all workers; ``None`` → a bucket in this process).
    Returns:
        A callable taking one token: 0.0 when taken, else the seconds until one frees. It raises
        ``agents.data.market.shared.SharedStateUnavailableError`` (NETWORK_ERROR) when the shared
        Redis does not answer.
    """
    return functools.partial(
        shared.take_token,
        name=RATE_LIMIT_BUCKET,
        rate=settings.broker.alpaca_rate_per_min / 60.0,
        burst=settings.broker.alpaca_rate_burst,
        redis_url=settings.service.shared_redis_url,
    )


def client_from_settings(settings: Settings, **overrides: Any) -> AlpacaMarketDataClient:
    """A client configured from ``settings`` (timeout ``tool_timeout``, first retry delay
    ``alpaca_retry_base``, the shared rate limit of :func:`rate_limiter_for`); ``overrides`` are
    constructor arguments that replace those. Raises AlpacaNotConfiguredError without key and
    secret."""
    key = settings.broker.alpaca_api_key.get_secret_value() if settings.broker.alpaca_api_key else ""
    secret = settings.broker.alpaca_secret_key.get_secret_value() if settings.broker.alpaca_secret_key else ""
    kwargs: dict[str, Any] = {
        "base_url": base_url_for(settings),
        "timeout": settings.data.tool_timeout,
        "retry_delay": settings.broker.alpaca_retry_base,
        "rate_limiter": rate_limiter_for(settings),
    }
    kwargs.update(overrides)
    return AlpacaMarketDataClient(api_key=key, secret_key=secret, **kwargs)


# --------------------------------------------------------------------------- layer 3: the JSON function


async def fetch_stock_price(ticker: str, settings: Settings, **overrides: Any) -> StockOutput:
    """Validate ``ticker`` and fetch its price; raises the exceptions above (``ValueError`` with
    the format message of "Alpaca errors" for a malformed ticker)."""
    try:
        params = StockInput(ticker=ticker)
    except ValidationError:
        raise ValueError(INVALID_FORMAT) from None
    client = client_from_settings(settings, **overrides)
    return await client.get_stock_price(params.ticker)


async def get_stock_price_json(ticker: str, settings: Settings, **overrides: Any) -> str:
    """``get_stock_price`` as a JSON string: the ``StockOutput`` or ``{"error": ...}``
    with the texts of "Alpaca errors" (not configured, format, not found, HTTP status, timeout, other),
    plus :data:`BUCKET_EMPTY` ("... Retry in N s.") when the shared rate limit has no token.
    Never raises."""
    try:
        out = await fetch_stock_price(ticker, settings, **overrides)
    except AlpacaMarketDataError as exc:
        known = (
            AlpacaNotConfiguredError,
            InvalidTickerSymbolError,
            AlpacaServiceError,
            AlpacaTimeoutError,
            AlpacaConnectionError,
            AlpacaBucketEmptyError,
        )
        return json.dumps({"error": str(exc) if isinstance(exc, known) else UNKNOWN_ERROR})
    except ValueError as exc:
        return json.dumps({"error": str(exc)})
    except Exception:
        logger.exception("alpaca get_stock_price failed")
        return json.dumps({"error": UNKNOWN_ERROR})
    return out.model_dump_json()
