"""Research stage (seed 001 step 2): fetch the quote and the price history through tools."""

from __future__ import annotations

from agents.tools.registry import ToolContext
from pipeline.stages.common import call_tool, note
from pipeline.state import FinancialAgentState, Status

#: Two years of daily bars (~504) cover SMA(200) plus indicator warm-up with margin.
HISTORY_PERIOD = "2y"


def research(*, state: FinancialAgentState, ctx: ToolContext) -> FinancialAgentState:
    """Call ``get_stock_data`` and ``get_history`` for ``state.stock_symbol`` at ``ctx.as_of``.

    Sets ``state.stock_data`` to ``{status: "success", quote, quote_ref, history_ref, bars,
    first_date, last_date}`` or ``{status: "failed", error_codes}``; status → analyzing.
    History is not requested when the quote failed, so one pass records at most one data error.

    Raises:
        TransientStageError: a tool hit a network error or rate limit (the task retries).
    """
    symbol = state.stock_symbol
    quote = call_tool(state=state, ctx=ctx, name="get_stock_data", arguments={"symbol": symbol})
    # A failed quote means the source has nothing for this symbol/date now: asking for history
    # too would only log the same failure twice (and count as a second critical error).
    history = (
        call_tool(
            state=state, ctx=ctx, name="get_history", arguments={"symbol": symbol, "period": HISTORY_PERIOD}
        )
        if quote.ok
        else None
    )
    if quote.ok and history and history.ok and quote.data and history.data and history.data["count"] > 0:
        state.stock_data = {
            "status": "success",
            "quote": quote.data,
            "quote_ref": quote.tool_call_id,
            "history_ref": history.tool_call_id,
            "bars": history.data["count"],
            "first_date": history.data["first_date"],
            "last_date": history.data["last_date"],
        }
        note(
            state,
            stage="research",
            content=f"{symbol}: quote {quote.data['date']} and {history.data['count']} daily bars fetched.",
        )
    else:
        codes = [env.error.code.value for env in (quote, history) if env is not None and env.error]
        state.stock_data = {"status": "failed", "error_codes": codes}
        note(state, stage="research", content=f"{symbol}: research failed ({', '.join(codes) or 'no bars'}).")
    state.status = Status.ANALYZING
    return state
