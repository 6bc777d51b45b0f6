"""``get_stock_price`` (docs/design.md, "Alpaca price tool"): the latest Alpaca trade price in the
tool envelope.

The client, its schemas, errors and their messages are :mod:`agents.data.market.alpaca`; this
module maps its exceptions to envelope codes and retry hints. Live data only: an ``as_of``
before today is refused (``DATE_OUT_OF_RANGE``), since a snapshot cannot be taken in the past.
"""

from __future__ import annotations

import asyncio
import logging
import math
import threading
from collections.abc import Coroutine
from datetime import UTC, date, datetime
from typing import Any

import httpx

from agents.data.market.alpaca import (
    NOT_CONFIGURED,
    UNAVAILABLE,
    UNKNOWN_ERROR,
    AlpacaBucketEmptyError,
    AlpacaConnectionError,
    AlpacaMarketDataError,
    AlpacaNotConfiguredError,
    AlpacaRateLimitedError,
    AlpacaServiceError,
    AlpacaTimeoutError,
    InvalidTickerSymbolError,
    StockInput,
    base_url_for,
    fetch_stock_price,
)
from agents.tools.envelope import ErrorCode
from agents.tools.registry import ToolContext, ToolInputError, ToolOutput, register

logger = logging.getLogger("finagent.alpaca")


def _run_sync[T](coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion from sync code, also when this thread already runs a loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    box: dict[str, Any] = {}

    def target() -> None:
        try:
            box["value"] = asyncio.run(coro)
        except BaseException as exc:
            box["error"] = exc

    thread = threading.Thread(target=target, name="alpaca-call")
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box["value"]


def _retry_hint(seconds: float, why: str) -> str:
    """``Retry in N s (why).`` with N rounded up to 0.1 s."""
    return f"Retry in {math.ceil(seconds * 10) / 10:.1f}s ({why})."


def _status_code(status: int) -> ErrorCode:
    if status == 429:
        return ErrorCode.RATE_LIMITED
    if status in (401, 403):
        return ErrorCode.NOT_CONFIGURED
    if status >= 500:
        return ErrorCode.NETWORK_ERROR
    return ErrorCode.INVALID_INPUT


@register(
    name="get_stock_price",
    description=(
        "Latest trade price from Alpaca market data (/v2/stocks/snapshots) with change and change "
        "percent from the previous close, e.g. change '+2.34', change_percent '+1.33%'. Live data: "
        "only for analyses as of today."
    ),
    input_model=StockInput,
)
def get_stock_price(params: StockInput, ctx: ToolContext) -> ToolOutput:
    """``StockOutput`` as envelope data, plus ``source``.

    Raises:
        ToolInputError: NOT_CONFIGURED (no keys), DATE_OUT_OF_RANGE (``as_of`` before today: a
            snapshot is live), INVALID_SYMBOL, RATE_LIMITED when the shared bucket is empty
            (nothing sent; ``retry_hint`` "Retry in N s") or on HTTP 429 (hint from
            ``Retry-After`` / ``X-RateLimit-Reset`` when sent), NOT_CONFIGURED / NETWORK_ERROR /
            INVALID_INPUT for other HTTP statuses, NETWORK_ERROR after the timeouts or when the
            connection fails (refused, reset, DNS),
            INTERNAL_ERROR for anything else; messages as in docs/design.md, "Alpaca errors".
    """
    settings = ctx.settings
    if not (settings.broker.alpaca_api_key and settings.broker.alpaca_secret_key):
        raise ToolInputError(NOT_CONFIGURED, code=ErrorCode.NOT_CONFIGURED)
    if ctx.as_of < min(date.today(), datetime.now(UTC).date()):
        raise ToolInputError(
            f"Alpaca snapshots are live; as_of {ctx.as_of} is in the past (use get_stock_data)",
            code=ErrorCode.DATE_OUT_OF_RANGE,
        )
    try:
        out = _run_sync(fetch_stock_price(params.ticker, settings))
    except AlpacaNotConfiguredError:
        raise ToolInputError(NOT_CONFIGURED, code=ErrorCode.NOT_CONFIGURED) from None
    except InvalidTickerSymbolError as exc:
        raise ToolInputError(str(exc), code=ErrorCode.INVALID_SYMBOL) from None
    except AlpacaBucketEmptyError as exc:
        hint = _retry_hint(
            exc.retry_after, f"shared Alpaca limit {settings.broker.alpaca_rate_per_min:g}/min"
        )
        raise ToolInputError(str(exc), code=ErrorCode.RATE_LIMITED, retry_hint=hint) from None
    except AlpacaRateLimitedError as exc:
        header_hint = None if exc.retry_after is None else _retry_hint(exc.retry_after, "Alpaca HTTP 429")
        raise ToolInputError(str(exc), code=ErrorCode.RATE_LIMITED, retry_hint=header_hint) from None
    except AlpacaServiceError as exc:
        raise ToolInputError(str(exc), code=_status_code(exc.status_code)) from None
    except AlpacaTimeoutError:
        raise ToolInputError(UNAVAILABLE, code=ErrorCode.NETWORK_ERROR) from None
    except AlpacaConnectionError:  # refused/reset/DNS: transient, the task retries it
        raise ToolInputError(UNAVAILABLE, code=ErrorCode.NETWORK_ERROR) from None
    except (AlpacaMarketDataError, httpx.HTTPError, ValueError) as exc:
        logger.warning("alpaca get_stock_price failed: %s", type(exc).__name__)
        raise ToolInputError(UNKNOWN_ERROR, code=ErrorCode.INTERNAL_ERROR) from None
    data = {**out.model_dump(), "source": f"alpaca:{base_url_for(settings)}/stocks/snapshots"}
    summary = f"{out.ticker} {out.timestamp}: ${out.price:,.2f} ({out.change}, {out.change_percent})"
    return ToolOutput(data=data, summary=summary, symbol=out.ticker)
