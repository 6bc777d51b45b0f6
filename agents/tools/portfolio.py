"""``get_portfolio`` (docs/design.md, "Toolset"): the paper account valued at ``as_of``.

The portfolio is the paper account's state after its orders of sessions up to ``as_of`` (orders
of later sessions are left out: point in time, ``db.trading_repo.read_book``) valued at ``as_of``:
each position at the raw close of its last bar on or before ``as_of`` (USD, as traded), weights
as fractions of ``total_value = cash + sum market_value``. An account that never traded is shown
with the ``broker.starting_cash`` setting and no positions (and is not created by reading it).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from agents.tools.fields import UserId
from agents.tools.paper_account import load_book, migrated_engine, price_symbols, value_book
from agents.tools.registry import ToolContext, ToolOutput, register


class PortfolioInput(BaseModel):
    """``{user_id?}``; default: the ``portfolio_default_user`` setting."""

    model_config = ConfigDict(extra="forbid")

    user_id: UserId | None = Field(default=None, description="Paper account owner")


@register(
    name="get_portfolio",
    description=(
        "The paper account's positions and cash valued at the analysis date's closes: quantity, "
        "avg_price, current_price, market_value (USD) and weight (fraction of total_value)."
    ),
    input_model=PortfolioInput,
)
def get_portfolio(params: PortfolioInput, ctx: ToolContext) -> ToolOutput:
    """``get_portfolio``.

    Returns data ``{portfolio: {positions: [{symbol, quantity, avg_price, current_price,
    market_value, weight, price_date}], cash, total_value, currency}, user_id, account_exists,
    as_of, sources}``. USD; weights are fractions of ``total_value``.
    """
    user_id = params.user_id or ctx.settings.broker.portfolio_default_user
    engine = migrated_engine(ctx)
    book, exists = load_book(ctx=ctx, engine=engine, user_id=user_id)
    priced = price_symbols(ctx=ctx, symbols=set(book.positions))
    portfolio = value_book(book=book, priced=priced)
    portfolio["currency"] = "USD"
    data = {
        "portfolio": portfolio,
        "user_id": user_id,
        "account_exists": exists,
        "as_of": ctx.as_of.isoformat(),
        "sources": sorted({p.source for p in priced.values()}),
    }
    summary = (
        f"portfolio {user_id}: {len(portfolio['positions'])} positions, cash ${portfolio['cash']:,.2f}, "
        f"total ${portfolio['total_value']:,.2f}"
    )
    return ToolOutput(data=data, summary=summary)
