"""The paper broker's order logic: pure functions over a ``Book`` (cash and positions), no I/O.

Daily bars only, so every order trades against the ``as_of`` bar at its close (the order time is
the session's last minute, ``agents.broker.market_calendar``). For each order, in request order,
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

Amounts: ``notional = filled * C``; ``total_cost`` = ``notional + fees`` for a buy (paid) and
``notional - fees`` for a sell (received); ``cash_delta`` is the signed change of cash.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import date
from typing import Literal

from agents.broker.fees import FeeModel
from agents.broker.risk import RiskLimits

Action = Literal["buy", "sell"]
OrderType = Literal["market", "limit", "stop"]
Status = Literal["filled", "partial", "rejected"]

LIMIT_NOT_MARKETABLE = "LIMIT_NOT_MARKETABLE"
STOP_NOT_TRIGGERED = "STOP_NOT_TRIGGERED"
NO_LIQUIDITY = "NO_LIQUIDITY"
INSUFFICIENT_FUNDS = "INSUFFICIENT_FUNDS"
RISK_LIMIT_EXCEEDED = "RISK_LIMIT_EXCEEDED"
#: Rejection codes that are seed-002 error codes (the envelope reports them when nothing filled).
ERROR_CODES = frozenset({INSUFFICIENT_FUNDS, RISK_LIMIT_EXCEEDED})


@dataclass(frozen=True)
class Bar:
    """The ``as_of`` bar of a symbol: date, raw close (USD), volume (shares)."""

    date: date
    close: float
    volume: float


@dataclass(frozen=True)
class OrderRequest:
    """One order as asked. ``limit_price``/``stop_price`` USD; ``quantity`` whole shares."""

    symbol: str
    action: Action
    quantity: int
    order_type: OrderType = "market"
    limit_price: float | None = None
    stop_price: float | None = None
    client_order_id: str | None = None


@dataclass
class Holding:
    """Shares held and their average buy price (USD, fees excluded)."""

    quantity: int
    avg_price: float


@dataclass
class Book:
    """Cash (USD) and holdings of one account."""

    cash: float
    positions: dict[str, Holding] = field(default_factory=dict)

    def total_value(self, prices: dict[str, float]) -> float:
        """``cash + sum quantity * price`` USD, ``prices`` the ``as_of`` closes of held symbols."""
        return self.cash + sum(h.quantity * prices[s] for s, h in self.positions.items())

    def copy(self) -> Book:
        """An independent copy (simulations must not touch the loaded book)."""
        return Book(
            cash=self.cash, positions={s: Holding(h.quantity, h.avg_price) for s, h in self.positions.items()}
        )


@dataclass(frozen=True)
class Decision:
    """The broker's answer to one order: ``price`` is the fill price, or the reference close
    of a rejected order; ``code`` is the rejection/partial code, ``reason`` its explanation."""

    status: Status
    filled_quantity: int
    price: float
    fees: float
    code: str | None = None
    reason: str | None = None

    @property
    def notional(self) -> float:
        """``filled_quantity * price`` USD."""
        return round(self.filled_quantity * self.price, 4)


def cash_delta(action: str, decision: Decision) -> float:
    """Signed USD change of cash: ``-(notional + fees)`` for a buy, ``notional - fees`` for a sell."""
    if decision.filled_quantity == 0:
        return 0.0
    if action == "buy":
        return -round(decision.notional + decision.fees, 4)
    return round(decision.notional - decision.fees, 4)


def total_cost(action: str, decision: Decision) -> float:
    """USD paid (buy: notional + fees) or received (sell: notional - fees); 0 if nothing filled."""
    return abs(cash_delta(action, decision))


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
                f"{order.symbol} would be {weight:.1%} of the portfolio; max_position_weight is "
                f"{limits.max_position_weight:.1%}",
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


def apply(*, book: Book, order: OrderRequest, decision: Decision) -> None:
    """Update ``book`` in place with a filled or partial ``decision`` (no-op when rejected).

    Buys average the position price ``(q0*a0 + f*p) / (q0 + f)``; sells keep it and drop the
    position at zero shares.
    """
    filled = decision.filled_quantity
    if filled == 0:
        return
    book.cash = round(book.cash + cash_delta(order.action, decision), 4)
    held = book.positions.get(order.symbol)
    if order.action == "buy":
        if held is None:
            book.positions[order.symbol] = Holding(filled, decision.price)
        else:
            qty = held.quantity + filled
            held.avg_price = round((held.quantity * held.avg_price + filled * decision.price) / qty, 6)
            held.quantity = qty
        return
    assert held is not None  # decide() refuses sells beyond the holding
    held.quantity -= filled
    if held.quantity == 0:
        del book.positions[order.symbol]
