"""The paper broker's order logic: pure functions over a ``Book`` (cash and positions), no I/O.

Daily bars only, so every order trades against the ``as_of`` bar at its close (the order time is
the session's last minute, ``agents.data.market_calendar``). For each order, in request order,
against the book left by the previous ones:

1. Trigger, with ``C`` = the ``as_of`` close (USD, as traded):
   * ``market``: always; fills at ``C``.
   * ``limit`` at ``L``: marketable only if ``C <= L`` (buy) or ``C >= L`` (sell); fills at ``C``
     (at or better than the limit). Not marketable → ``rejected``, reason ``LIMIT_NOT_MARKETABLE``
     (the broker keeps no resting orders: statuses are filled | partial | rejected).
   * ``stop`` at ``S``: triggers only if ``C >= S`` (buy) or ``C <= S`` (sell), then fills at ``C``
     as a market order; else ``rejected``, reason ``STOP_NOT_TRIGGERED``.
2. ``quantity * C`` above ``max_order_notional`` → ``RISK_LIMIT_EXCEEDED``.
3. Selling more shares than held → ``RISK_LIMIT_EXCEEDED`` (no short positions).
4. Liquidity: at most ``floor(max_volume_fraction * bar volume)`` shares fill; fewer than asked →
   ``partial`` (the rest is cancelled), none → ``rejected``, reason ``NO_LIQUIDITY``.
5. Buy cost ``filled * C + fee`` above cash → ``INSUFFICIENT_FUNDS`` (no margin).
6. Buy taking the symbol above ``max_position_weight`` of the post-trade total value (positions at
   their ``as_of`` closes, plus cash) → ``RISK_LIMIT_EXCEEDED``.

Amounts (``notional``, ``total_cost``, ``cash_delta``) and how a fill changes the book
(:func:`apply`) are the ledger's, ``core.ledger``: ``db.trading_repo`` replays fills with
the same arithmetic and may not import this layer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import date

from agents.broker.fees import FeeModel
from agents.broker.risk import RiskLimits
from core.display import percent

# Holding, apply and total_cost are re-exported (``__all__``): agents.tools.trading and
# agents.tools.portfolio take the broker's whole vocabulary from this module.
from core.ledger import Book, Decision, Holding, OrderRequest, apply, total_cost

__all__ = [
    "ERROR_CODES",
    "INSUFFICIENT_FUNDS",
    "LIMIT_NOT_MARKETABLE",
    "NO_LIQUIDITY",
    "RISK_LIMIT_EXCEEDED",
    "STOP_NOT_TRIGGERED",
    "Bar",
    "Book",
    "Decision",
    "Holding",
    "OrderRequest",
    "apply",
    "decide",
    "total_cost",
]

LIMIT_NOT_MARKETABLE = "LIMIT_NOT_MARKETABLE"
STOP_NOT_TRIGGERED = "STOP_NOT_TRIGGERED"
NO_LIQUIDITY = "NO_LIQUIDITY"
INSUFFICIENT_FUNDS = "INSUFFICIENT_FUNDS"
RISK_LIMIT_EXCEEDED = "RISK_LIMIT_EXCEEDED"
#: Rejection codes that are tool error codes (the envelope reports them when nothing filled).
ERROR_CODES = frozenset({INSUFFICIENT_FUNDS, RISK_LIMIT_EXCEEDED})


@dataclass(frozen=True)
class Bar:
    """The ``as_of`` bar of a symbol: date, raw close (USD), volume (shares)."""

    date: date
    close: float
    volume: float


def _reject(code: str, reason: str, price: float) -> Decision:
    return Decision(status="rejected", filled_quantity=0, price=price, fees=0.0, code=code, reason=reason)


def decide(
    *,
    order: OrderRequest,
    bar: Bar,
    book: Book,
    prices: dict[str, float],
    limits: RiskLimits,
    fees: FeeModel,
    max_volume_fraction: float,
) -> Decision:
    """The outcome of ``order`` against ``bar`` and ``book`` (module docstring, steps 1-6).

    ``prices`` holds the ``as_of`` close of every symbol in ``book`` and of ``order.symbol``.
    Does not change ``book``: see :func:`apply`.
    """
    close = bar.close
    buy = order.action == "buy"
    if order.order_type == "limit":
        assert order.limit_price is not None
        if (buy and close > order.limit_price) or (not buy and close < order.limit_price):
            side = "above" if buy else "below"
            return _reject(
                LIMIT_NOT_MARKETABLE,
                f"{order.action} limit {order.limit_price:g} not marketable: close {close:g} on "
                f"{bar.date} is {side} it",
                close,
            )
    elif order.order_type == "stop":
        assert order.stop_price is not None
        if (buy and close < order.stop_price) or (not buy and close > order.stop_price):
            return _reject(
                STOP_NOT_TRIGGERED,
                f"{order.action} stop {order.stop_price:g} not triggered by close {close:g} on {bar.date}",
                close,
            )
    asked_notional = order.quantity * close
    if asked_notional > limits.max_order_notional:
        return _reject(
            RISK_LIMIT_EXCEEDED,
            f"order notional {asked_notional:,.2f} USD exceeds max_order_notional "
            f"{limits.max_order_notional:,.2f} USD",
            close,
        )
    held = book.positions.get(order.symbol)
    held_qty = held.quantity if held else 0
    if not buy and order.quantity > held_qty:
        return _reject(
            RISK_LIMIT_EXCEEDED,
            f"sell {order.quantity} {order.symbol} exceeds the {held_qty} held (no short positions)",
            close,
        )
    cap = math.floor(max_volume_fraction * bar.volume)
    filled = min(order.quantity, cap)
    if filled <= 0:
        return _reject(NO_LIQUIDITY, f"bar volume {bar.volume:g} allows no fill", close)
    fee = fees.fee(quantity=filled, price=close)
    if buy:
        cost = filled * close + fee
        if cost > book.cash + 1e-9:
            return _reject(
                INSUFFICIENT_FUNDS,
                f"buy {filled} {order.symbol} costs {cost:,.2f} USD with fees; cash is {book.cash:,.2f} USD",
                close,
            )
        total_after = book.total_value(prices) - fee
        weight = (held_qty + filled) * close / total_after if total_after > 0 else math.inf
        if weight > limits.max_position_weight:
            return _reject(
                RISK_LIMIT_EXCEEDED,
                f"{order.symbol} would be {percent(weight, digits=1)} of the portfolio; max_position_weight "
                f"is {percent(limits.max_position_weight, digits=1)}",
                close,
            )
    if filled < order.quantity:
        return Decision(
            status="partial",
            filled_quantity=filled,
            price=close,
            fees=fee,
            code=NO_LIQUIDITY,
            reason=f"filled {filled} of {order.quantity}: {max_volume_fraction:g} x volume {bar.volume:g}",
        )
    return Decision(status="filled", filled_quantity=filled, price=close, fees=fee)
