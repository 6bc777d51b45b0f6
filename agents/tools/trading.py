"""``trade_simulate`` and ``trade_execute`` (docs/design.md, "Paper trading") against the paper broker.

Both run the same order logic (``agents.broker.paper``: fills at the ``as_of`` close, limit and
stop rules, fee model, risk limits, liquidity cap) in request order. ``trade_simulate`` starts
from the account's current book, writes nothing, accepts any ``as_of`` (prices are the last
close on or before it) and adds ``risk_metrics`` (``agents.broker.risk``). ``trade_execute``
needs ``as_of`` to be an XNYS session (else ``MARKET_CLOSED``; order time = the session's last
minute, ``agents.data.market_calendar``), persists orders and fills in one transaction and is
idempotent per ``client_order_id`` (derived from the call inside an analysis when not given, so
a redelivered or retried Celery task never fills twice). ``trade_simulate`` starts from the book as it was
after the orders of sessions up to ``as_of``; ``trade_execute`` from the current book.

Errors: when NO trade filled, the envelope is an error (the rejected orders stay recorded):
the error code of a rejection when one carries it (``INSUFFICIENT_FUNDS``,
``RISK_LIMIT_EXCEEDED``), else ``ORDER_REJECTED`` with every order's reason (a limit not
marketable at the close, a stop not triggered, no volume). When some filled, the data lists
every trade with its ``status`` and ``reason`` (a rejected one among filled ones included).
"""

from __future__ import annotations

import uuid
from datetime import UTC
from functools import partial
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, model_validator

from agents.broker.fees import FeeModel
from agents.broker.paper import (
    ERROR_CODES,
    Book,
    Decision,
    OrderRequest,
    apply,
    decide,
    total_cost,
)
from agents.broker.risk import RiskLimits, portfolio_values, risk_metrics
from agents.data import market_calendar
from agents.tools.envelope import ErrorCode
from agents.tools.fields import Symbol, UserId
from agents.tools.paper_account import Priced, load_book, migrated_engine, price_symbols, value_book
from agents.tools.registry import ToolContext, ToolInputError, ToolOutput, register
from db.trading_repo import OrderConflictError, OrderResult, execute_orders

# One request is one transaction holding the account lock; 50 orders keep it to a few ms.
MAX_TRADES = 50
_AUTO_NAMESPACE = uuid.UUID("a3e2b7c4-1d5f-4e8a-9b6c-7f0d2e4a8c13")


class SimTrade(BaseModel):
    """One simulated trade: ``price`` set → a limit order at that price (USD), else market."""

    model_config = ConfigDict(extra="forbid")

    symbol: Symbol
    action: Literal["buy", "sell"]
    quantity: int = Field(gt=0, description="Whole shares")
    price: float | None = Field(default=None, gt=0, description="Limit price, USD; omit for market")

    def request(self) -> OrderRequest:
        """The broker order."""
        if self.price is None:
            return OrderRequest(symbol=self.symbol, action=self.action, quantity=self.quantity)
        return OrderRequest(
            symbol=self.symbol,
            action=self.action,
            quantity=self.quantity,
            order_type="limit",
            limit_price=self.price,
        )


class SimulateInput(BaseModel):
    """``{trades: [{symbol, action, quantity, price?}], user_id?}``."""

    model_config = ConfigDict(extra="forbid")

    trades: list[SimTrade] = Field(min_length=1, max_length=MAX_TRADES)
    user_id: UserId | None = None


class ExecTrade(BaseModel):
    """One order: ``price`` is the limit price (limit orders), ``stop_price`` the trigger (stop)."""

    model_config = ConfigDict(extra="forbid")

    symbol: Symbol
    action: Literal["buy", "sell"]
    quantity: int = Field(gt=0, description="Whole shares")
    order_type: Literal["market", "limit", "stop"] = "market"
    price: float | None = Field(default=None, gt=0, description="Limit price, USD (limit orders only)")
    stop_price: float | None = Field(default=None, gt=0, description="Stop trigger, USD (stop orders only)")
    client_order_id: str | None = Field(
        default=None,
        min_length=1,
        max_length=64,
        description="Idempotency key: a repeat returns the original",
    )

    @model_validator(mode="after")
    def _prices_match_type(self) -> Self:
        if (self.order_type == "limit") != (self.price is not None):
            raise ValueError("price is required for limit orders and only for them")
        if (self.order_type == "stop") != (self.stop_price is not None):
            raise ValueError("stop_price is required for stop orders and only for them")
        return self

    def request(self, *, auto_key: str | None = None) -> OrderRequest:
        """The broker order; ``auto_key`` is the client order id used when none was given."""
        return OrderRequest(
            symbol=self.symbol,
            action=self.action,
            quantity=self.quantity,
            order_type=self.order_type,
            limit_price=self.price,
            stop_price=self.stop_price,
            client_order_id=self.client_order_id or auto_key,
        )


class ExecuteInput(BaseModel):
    """``{trades: [{symbol, action, quantity, order_type, price?, stop_price?, client_order_id?}],
    user_id?}`` (``client_order_id`` is the idempotency key)."""

    model_config = ConfigDict(extra="forbid")

    trades: list[ExecTrade] = Field(min_length=1, max_length=MAX_TRADES)
    user_id: UserId | None = None

    @model_validator(mode="after")
    def _unique_client_ids(self) -> Self:
        ids = [t.client_order_id for t in self.trades if t.client_order_id is not None]
        if len(ids) != len(set(ids)):
            raise ValueError("client_order_id must be unique within one request")
        return self


def _auto_key(ctx: ToolContext, index: int) -> str | None:
    """Inside an analysis, a deterministic client order id for a trade given none: a Celery
    redelivery or retry of the same task makes the same call (same analysis, iteration, stage
    and call sequence), so it finds its orders instead of filling them twice. Unlike the
    ``tool_call_id``, the retry seed is left out on purpose: a retry re-logs the call but must
    not trade again. Outside an analysis ``None``: the caller passes its own key."""
    if ctx.analysis_id is None:
        return None
    key = f"{ctx.analysis_id}|{ctx.iteration}|{ctx.stage}|{ctx._seq}|{index}"
    return f"auto-{uuid.uuid5(_AUTO_NAMESPACE, key).hex[:24]}"


def _decider(ctx: ToolContext, priced: dict[str, Priced]) -> partial[Decision]:
    return partial(
        _decide,
        priced=priced,
        limits=RiskLimits.from_settings(ctx.settings),
        fees=FeeModel.from_settings(ctx.settings),
        max_volume_fraction=ctx.settings.broker.max_volume_fraction,
    )


def _decide(
    order: OrderRequest,
    book: Book,
    *,
    priced: dict[str, Priced],
    limits: RiskLimits,
    fees: FeeModel,
    max_volume_fraction: float,
) -> Decision:
    prices = {s: p.bar.close for s, p in priced.items()}
    return decide(
        order=order,
        bar=priced[order.symbol].bar,
        book=book,
        prices=prices,
        limits=limits,
        fees=fees,
        max_volume_fraction=max_volume_fraction,
    )


def _trade_row(request: OrderRequest, decision: Decision) -> dict[str, Any]:
    return {
        "symbol": request.symbol,
        "action": request.action,
        "quantity": decision.filled_quantity,
        "requested_quantity": request.quantity,
        "order_type": request.order_type,
        "price": round(decision.price, 4),
        "fees": decision.fees,
        "total_cost": round(total_cost(request.action, decision), 2),
        "status": decision.status,
        "reason": f"{decision.code}: {decision.reason}" if decision.code else None,
    }


def _raise_if_nothing_filled(rows: list[tuple[str | None, Decision]]) -> None:
    """The module's error rule: nothing filled → an error envelope: the code of a rejection that has one
    (``INSUFFICIENT_FUNDS``, ``RISK_LIMIT_EXCEEDED``) when there is one, else ``ORDER_REJECTED``
    listing every order's reason. Does nothing when ``rows`` is empty or anything filled."""
    if not rows:
        return
    if any(d.filled_quantity for _, d in rows):
        return
    for order_id, decision in rows:
        if decision.code in ERROR_CODES:
            where = f" (order {order_id})" if order_id else ""
            hint = (
                "Reduce the quantity or sell first."
                if decision.code == "INSUFFICIENT_FUNDS"
                else "Reduce the order size; see the broker_max_* settings."
            )
            raise ToolInputError(f"{decision.reason}{where}", code=ErrorCode(decision.code), retry_hint=hint)
    # every order rejected for a broker reason (limit not marketable, stop not triggered, no
    # volume): an error envelope too, as for any failed call
    reasons = "; ".join(
        f"{decision.code}: {decision.reason}" + (f" (order {order_id})" if order_id else "")
        for order_id, decision in rows
    )
    raise ToolInputError(f"no order filled: {reasons}", code=ErrorCode.ORDER_REJECTED)


@register(
    name="trade_simulate",
    description=(
        "Simulate buys/sells on the paper account at the analysis date's close (or a limit price): "
        "fills, fees, portfolio_after and risk metrics (95% 1-day historical VaR, max drawdown, "
        "Sharpe) from a year of real daily history. Writes nothing."
    ),
    input_model=SimulateInput,
)
def trade_simulate(params: SimulateInput, ctx: ToolContext) -> ToolOutput:
    """``trade_simulate``.

    Returns data ``{simulation: {trades: [{symbol, action, quantity (filled), requested_quantity,
    order_type, price, fees, total_cost, status, reason}], portfolio_after: {total_value, cash,
    positions: [{symbol, quantity, current_price, market_value, weight, price_date}]},
    risk_metrics: {var_95_1d, var_95_1d_usd, max_drawdown, sharpe_ratio, window, null_reasons}},
    user_id, as_of, sources}``. USD; VaR and drawdown are returns (negative = loss; formulas in
    ``agents.broker.risk``). Raises the module's error rule.
    """
    user_id = params.user_id or ctx.settings.broker.portfolio_default_user
    engine = migrated_engine(ctx)
    book, _exists = load_book(ctx=ctx, engine=engine, user_id=user_id)
    book = book.copy()
    requests = [t.request() for t in params.trades]
    priced = price_symbols(ctx=ctx, symbols=set(book.positions) | {r.symbol for r in requests})
    decide_one = _decider(ctx, priced)
    decided: list[tuple[OrderRequest, Decision]] = []
    for request in requests:
        decision = decide_one(request, book)
        apply(book=book, order=request, decision=decision)
        decided.append((request, decision))
    _raise_if_nothing_filled([(None, d) for _, d in decided])
    values = portfolio_values(
        holdings={s: h.quantity for s, h in book.positions.items()},
        cash=book.cash,
        closes={s: priced[s].adj_close for s in book.positions},
    )
    metrics = risk_metrics(
        values=values,
        window=ctx.settings.broker.risk_window_bars,
        risk_free_rate=ctx.settings.broker.risk_free_rate,
    )
    data = {
        "simulation": {
            "trades": [_trade_row(r, d) for r, d in decided],
            "portfolio_after": value_book(book=book, priced=priced, with_avg=False),
            "risk_metrics": metrics,
        },
        "user_id": user_id,
        "as_of": ctx.as_of.isoformat(),
        "sources": sorted({p.source for p in priced.values()}),
    }
    filled = sum(1 for _, d in decided if d.filled_quantity)
    summary = f"simulated {len(decided)} trades ({filled} filled), VaR95 {metrics['var_95_1d']}"
    return ToolOutput(data=data, summary=summary)


@register(
    name="trade_execute",
    description=(
        "Execute market/limit/stop orders on the paper broker at the analysis date's close "
        "(must be an NYSE session). Idempotent per client_order_id. Statuses filled|partial|rejected."
    ),
    input_model=ExecuteInput,
)
def trade_execute(params: ExecuteInput, ctx: ToolContext) -> ToolOutput:
    """``trade_execute``.

    Returns data ``{execution: {trades: [{symbol, action, quantity (filled), requested_quantity,
    order_type, price, fees, total_cost, order_id, client_order_id, status, reason, replayed}],
    portfolio_after: {total_value, cash, positions}}, user_id, as_of, order_time, sources}``.

    Errors: ``MARKET_CLOSED`` (``as_of`` not an XNYS session), ``DATE_OUT_OF_RANGE`` (beyond the
    calendar), ``NO_DATA`` (no bar on the session for a traded symbol), ``INVALID_INPUT`` (a
    reused ``client_order_id`` for another order, or an order before the account's last trade),
    and the module's error rule.
    """
    try:
        placed = market_calendar.order_time(ctx.as_of)
    except market_calendar.OutsideCalendarError as exc:
        raise ToolInputError(str(exc), code=ErrorCode.DATE_OUT_OF_RANGE) from None
    if placed is None or not market_calendar.is_open(placed):
        upcoming = market_calendar.nyse().date_to_session(ctx.as_of.isoformat(), direction="next")
        raise ToolInputError(
            f"{ctx.as_of} is not an {market_calendar.CALENDAR} trading session",
            code=ErrorCode.MARKET_CLOSED,
            retry_hint=f"Markets reopen on {upcoming.date()}; trade with that as_of.",
        )
    user_id = params.user_id or ctx.settings.broker.portfolio_default_user
    engine = migrated_engine(ctx)
    book, _exists = load_book(ctx=ctx, engine=engine, user_id=user_id, point_in_time=False)
    requests = [t.request(auto_key=_auto_key(ctx, i)) for i, t in enumerate(params.trades)]
    traded = {r.symbol for r in requests}
    priced = price_symbols(ctx=ctx, symbols=set(book.positions) | traded)
    for symbol in sorted(traded):
        if priced[symbol].bar.date != ctx.as_of:
            raise ToolInputError(
                f"{symbol} has no bar on the session {ctx.as_of} (last: {priced[symbol].bar.date})",
                code=ErrorCode.NO_DATA,
            )
    placed_at = placed.to_pydatetime().astimezone(UTC)
    decide_one = _decider(ctx, priced)

    def decide_locked(request: OrderRequest, locked: Book) -> Decision:
        missing = set(locked.positions) - set(priced)
        if missing:  # another execution bought a symbol since the unlocked read: price it too
            priced.update(price_symbols(ctx=ctx, symbols=missing))
        return decide_one(request, locked)

    try:
        results, after = execute_orders(
            engine=engine,
            user_id=user_id,
            starting_cash=ctx.settings.broker.starting_cash,
            as_of=ctx.as_of,
            placed_at=placed_at,
            requests=requests,
            decide=decide_locked,
        )
    except OrderConflictError as exc:
        raise ToolInputError(str(exc)) from None
    _raise_if_nothing_filled([(r.order_id, r.decision) for r in results])
    missing = set(after.positions) - set(priced)
    if missing:
        priced.update(price_symbols(ctx=ctx, symbols=missing))
    data = {
        "execution": {
            "trades": [_result_row(r) for r in results],
            "portfolio_after": value_book(book=after, priced=priced, with_avg=True),
        },
        "user_id": user_id,
        "as_of": ctx.as_of.isoformat(),
        "order_time": placed_at.isoformat(),
        "sources": sorted({p.source for p in priced.values()}),
    }
    statuses = ", ".join(f"{r.request.symbol} {r.decision.status}" for r in results)
    return ToolOutput(data=data, summary=f"executed {len(results)} orders: {statuses}")


def _result_row(result: OrderResult) -> dict[str, Any]:
    row = _trade_row(result.request, result.decision)
    row.update(
        order_id=result.order_id, client_order_id=result.request.client_order_id, replayed=result.replayed
    )
    return row
