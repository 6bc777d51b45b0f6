"""``get_quotes(symbols, fields?)`` (docs/design.md, "Quotes and fundamentals"): quotes of several symbols at
``ctx.as_of``.

Each quote is computed by :func:`agents.tools.bars.stock_data`, as ``get_stock_data``'s is (same
provider, same point-in-time rule: the last bar at or before ``as_of``, the change against the
previous session on split-adjusted prices), so the two tools never disagree.

Partial failure: a symbol the provider cannot serve gets an entry ``{symbol, error: {code,
message}}`` in ``quotes`` while the other symbols still return; only when *every* symbol fails
does the call fail, with the first symbol's error code (e.g. ``INVALID_SYMBOL``).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agents.data.market.base import ProviderError, ProviderTimeoutError
from agents.tools.bars import stock_data
from agents.tools.fields import Symbols
from agents.tools.registry import ToolContext, ToolInputError, ToolOutput, register

#: The quote fields of ``get_quotes`` (the default ``fields``).
SEED_FIELDS: tuple[str, ...] = ("price", "change", "change_percent", "volume", "timestamp")
#: Extra fields a caller may ask for (from get_stock_data).
EXTRA_FIELDS: tuple[str, ...] = (
    "previous_close",
    "52w_high",
    "52w_low",
    "market_cap",
    "pe_ratio",
    "currency",
)
QUOTE_FIELDS: frozenset[str] = frozenset(SEED_FIELDS + EXTRA_FIELDS)


class QuotesInput(BaseModel):
    """``{symbols, fields?}``: 1..50 tickers (normalised, duplicates dropped) and optional fields."""

    model_config = ConfigDict(extra="forbid")

    symbols: Symbols = Field(description="Tickers, e.g. ['AAPL','MSFT']")
    fields: list[str] | None = Field(
        default=None,
        description=f"Quote fields to return (default {', '.join(SEED_FIELDS)}); "
        f"also {', '.join(EXTRA_FIELDS)}",
    )


def _error_code(exc: ProviderError) -> str:
    return str(exc.code)


@register(
    name="get_quotes",
    description=(
        "Quotes of several symbols as of the analysis date: price, change, change_percent (fraction), "
        "volume, timestamp (bar date). A symbol that fails carries its own error; the others still return."
    ),
    input_model=QuotesInput,
)
def get_quotes(params: QuotesInput, ctx: ToolContext) -> ToolOutput:
    """Quotes for ``params.symbols`` at ``ctx.as_of``.

    Returns data ``{quotes: [{symbol, price, change, change_percent, volume, timestamp, ...}],
    fields, as_of, null_reasons: {symbol: {field: reason}}, sources: {symbol: ref}}``. ``price``
    is the close (USD) of the last bar ≤ as_of, ``timestamp`` that bar's ISO date, ``change`` USD
    vs the previous session, ``change_percent`` a fraction (0.0145 = 1.45 %), ``volume`` shares.
    A failed symbol's entry is ``{symbol, error: {code, message}}``.

    Raises:
        ToolInputError: unknown ``fields`` (INVALID_INPUT, naming them).
        ProviderError: every symbol failed (the first symbol's error; timeouts are re-raised at
            once so ``run_tool`` retries the whole call).
    """
    fields = list(dict.fromkeys(params.fields)) if params.fields else list(SEED_FIELDS)
    unknown = [f for f in fields if f not in QUOTE_FIELDS]
    if unknown:
        raise ToolInputError(
            f"unknown quote field(s): {', '.join(unknown)}; known: {', '.join(sorted(QUOTE_FIELDS))}"
        )
    quotes: list[dict[str, Any]] = []
    null_reasons: dict[str, dict[str, str]] = {}
    sources: dict[str, str] = {}
    errors: list[ProviderError] = []
    for symbol in params.symbols:
        try:
            data = stock_data(ctx=ctx, symbol=symbol).data
        except ProviderTimeoutError:
            raise
        except ProviderError as exc:
            errors.append(exc)
            quotes.append({"symbol": symbol, "error": {"code": _error_code(exc), "message": str(exc)}})
            continue
        full = {**data, "price": data["current_price"], "timestamp": data["date"]}
        quotes.append({"symbol": symbol, **{f: full.get(f) for f in fields}})
        reasons = {f: r for f, r in data["null_reasons"].items() if f in fields}
        if reasons:
            null_reasons[symbol] = reasons
        sources[symbol] = data["source"]
    if len(errors) == len(params.symbols):
        raise errors[0]
    ok = len(quotes) - len(errors)
    summary = f"{ok}/{len(quotes)} quotes at {ctx.as_of.isoformat()}" + (
        f"; failed: {', '.join(q['symbol'] for q in quotes if 'error' in q)}" if errors else ""
    )
    return ToolOutput(
        data={
            "quotes": quotes,
            "fields": fields,
            "as_of": ctx.as_of.isoformat(),
            "null_reasons": null_reasons,
            "sources": sources,
        },
        summary=summary,
        symbol=params.symbols[0] if len(params.symbols) == 1 else None,
    )
