"""``get_earnings_dates(symbols, recent?)`` (the research analyst's tool): the next earnings report
within 30 days of ``as_of`` and the last reported quarters, point in time.

Source: the earnings calendar shipped in the ``HistoricalEarningsData`` wheel
(:mod:`agents.data.fundamentals.earnings`: 161 US symbols, 1993..2025; rules for what is known at
``as_of``, the 30-day announcement window, coverage and gaps, and the EPS split basis are there).
It needs no configuration, so the research stage calls it on every run; it is the ``calendar``
row of the data routing table (:func:`agents.data.routing.earnings_calendar`).

Partial failure as in ``get_quotes``: a symbol missing from the calendar gets ``{symbol, error:
{code: INVALID_SYMBOL, message}}``; when every symbol is missing the call fails with
``INVALID_SYMBOL``.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from agents.data.fundamentals.earnings import ANNOUNCE_WINDOW_DAYS, CalendarUnavailableError
from agents.data.market.base import SymbolNotFoundError
from agents.data.routing import earnings_calendar
from agents.tools.envelope import ErrorCode
from agents.tools.fields import Symbols
from agents.tools.registry import ToolContext, ToolInputError, ToolOutput, register

#: Twelve quarters (three years) of past reports per symbol: enough for a surprise trend, and it
#: bounds the envelope an LLM reads.
MAX_RECENT = 12


class EarningsDatesInput(BaseModel):
    """``{symbols, recent?}``: 1..50 tickers; ``recent`` past reports per symbol (0..12, default 4)."""

    model_config = ConfigDict(extra="forbid")

    symbols: Symbols = Field(description="Tickers, e.g. ['AAPL']")
    recent: int = Field(default=4, ge=0, le=MAX_RECENT, description="Past reports per symbol")


@register(
    name="get_earnings_dates",
    description=(
        "Earnings calendar at the analysis date: the next report if one falls within 30 days "
        "(date, before_open/after_close, days_until, EPS estimate) and the last reported quarters "
        "(EPS estimate, actual, surprise as a fraction). EPS is split-adjusted to 2025 share counts."
    ),
    input_model=EarningsDatesInput,
)
def get_earnings_dates(params: EarningsDatesInput, ctx: ToolContext) -> ToolOutput:
    """Earnings reports of ``params.symbols`` known at the close of ``ctx.as_of``.

    Returns data ``{earnings: [{symbol, calendar_symbol, alias_note (e.g. FB's reports are
    filed under META), next: {date, time_of_day, days_until, eps_estimate} |
    null, next_null_reason, checked_through, recent: [{date, time_of_day, eps_estimate,
    eps_actual, surprise}], coverage: {first, last}}], as_of, window_days: 30}``; dates ISO
    (US Eastern calendar days), EPS USD/share (split-adjusted, see the source module), surprise
    a fraction. ``source_refs`` cite the calendar rows used (``<package>==<version>:<file>#SYM@date``).

    Raises:
        ToolInputError: NOT_CONFIGURED when the calendar package is missing or unreadable.
        SymbolNotFoundError: no symbol is in the calendar (INVALID_SYMBOL).
    """
    try:
        calendar = earnings_calendar()
        known = calendar.symbols()
    except CalendarUnavailableError as exc:
        raise ToolInputError(
            str(exc), code=ErrorCode.NOT_CONFIGURED, retry_hint="Run `uv sync` to install the calendar."
        ) from exc
    entries: list[dict[str, Any]] = []
    refs: list[str] = []
    missing: list[str] = []
    for symbol in params.symbols:
        entry = calendar.at(symbol, ctx.as_of, recent=params.recent)
        if entry is None:
            missing.append(symbol)
            entries.append(
                {
                    "symbol": symbol,
                    "error": {
                        "code": ErrorCode.INVALID_SYMBOL.value,
                        "message": f"{symbol} is not in the earnings calendar ({calendar.ref}; "
                        f"{len(known)} symbols)",
                    },
                }
            )
            continue
        refs.extend(entry.pop("source_refs"))
        entries.append(entry)
    if len(missing) == len(params.symbols):
        raise SymbolNotFoundError(f"{', '.join(missing)} not in the earnings calendar ({calendar.ref})")
    soon = [e["symbol"] for e in entries if e.get("next")]
    summary = (
        f"earnings of {len(entries) - len(missing)}/{len(entries)} symbols at {ctx.as_of.isoformat()}; "
        f"next report within {ANNOUNCE_WINDOW_DAYS} days: {', '.join(soon) or 'none'}"
    )
    return ToolOutput(
        data={"earnings": entries, "as_of": ctx.as_of.isoformat(), "window_days": ANNOUNCE_WINDOW_DAYS},
        summary=summary,
        source_refs=tuple(dict.fromkeys(refs)),
        symbol=params.symbols[0] if len(params.symbols) == 1 else None,
    )
