"""The paper account's ledger: orders, fills and the book of cash and positions, and the pure
arithmetic that moves a fill into the book. No I/O, no market data, no fill simulation.

Shared by the paper broker (``agents.broker.paper``, which decides how an order fills) and its
persistence (``db.trading_repo``, which stores the book and replays it point in time), so it
sits in the base layer that both may import.

Amounts, all USD: ``notional = filled_quantity * price``; ``total_cost`` = ``notional + fees``
for a buy (paid) and ``notional - fees`` for a sell (received); ``cash_delta`` is the signed
change of cash. Cash and amounts are rounded to 4 decimals, average prices to 6.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

Action = Literal["buy", "sell"]
OrderType = Literal["market", "limit", "stop"]
Status = Literal["filled", "partial", "rejected"]


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
        """``cash + sum quantity * price`` USD, ``prices`` the ``as_of`` closes of held symbols.

        Raises ``KeyError`` when ``prices`` lacks a held symbol.
        """
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


def apply(*, book: Book, order: OrderRequest, decision: Decision) -> None:
    """Update ``book`` in place with a filled or partial ``decision`` (no-op when rejected).

    Buys average the position price ``(q0*a0 + f*p) / (q0 + f)``; sells keep it and drop the
    position at zero shares. A sell must not exceed the holding (the broker's ``decide``
    refuses it: no short positions); ``AssertionError`` if the symbol is not held at all.
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
