"""The broker's pure parts: fee model, order rules in their documented order, book updates."""

from __future__ import annotations

from datetime import date

import pytest

from agents.broker.fees import FeeModel
from agents.broker.paper import Bar, Book, Holding, OrderRequest, apply, decide
from agents.broker.risk import RiskLimits

BAR = Bar(date=date(2013, 3, 1), close=100.0, volume=1_000_000)
LOOSE = RiskLimits(max_position_weight=1.0, max_order_notional=1e9)


def _decide(order: OrderRequest, book: Book, limits: RiskLimits = LOOSE, fraction: float = 1.0):  # type: ignore[no-untyped-def]
    prices = {s: BAR.close for s in [*book.positions, order.symbol]}
    return decide(
        order=order,
        bar=BAR,
        book=book,
        prices=prices,
        limits=limits,
        fees=FeeModel(),
        max_volume_fraction=fraction,
    )


@pytest.mark.parametrize(
    ("quantity", "price", "fee"),
    [
        (10, 100.0, 1.0),  # 0.05 USD per-share fee → the 1 USD minimum
        (1000, 100.0, 5.0),  # 1000 x 0.005
        (100, 0.5, 0.5),  # min 1 USD capped at 1 % of a 50 USD trade
        (0, 100.0, 0.0),
    ],
)
def test_fee_model_per_share_minimum_and_cap(quantity: int, price: float, fee: float) -> None:
    assert FeeModel().fee(quantity=quantity, price=price) == pytest.approx(fee)


def test_limit_and_stop_triggers_against_the_close() -> None:
    book = Book(cash=1e6, positions={"X": Holding(10, 90.0)})
    assert _decide(OrderRequest("X", "buy", 1, "limit", limit_price=100.0), book).status == "filled"
    assert (
        _decide(OrderRequest("X", "buy", 1, "limit", limit_price=99.99), book).code == "LIMIT_NOT_MARKETABLE"
    )
    assert _decide(OrderRequest("X", "sell", 1, "limit", limit_price=100.0), book).status == "filled"
    assert (
        _decide(OrderRequest("X", "sell", 1, "limit", limit_price=100.01), book).code
        == "LIMIT_NOT_MARKETABLE"
    )
    assert _decide(OrderRequest("X", "buy", 1, "stop", stop_price=100.0), book).status == "filled"
    assert _decide(OrderRequest("X", "buy", 1, "stop", stop_price=100.01), book).code == "STOP_NOT_TRIGGERED"
    assert _decide(OrderRequest("X", "sell", 1, "stop", stop_price=100.0), book).status == "filled"
    assert _decide(OrderRequest("X", "sell", 1, "stop", stop_price=99.99), book).code == "STOP_NOT_TRIGGERED"


def test_rejection_reasons_in_documented_order() -> None:
    book = Book(cash=1_000.0)
    tight = RiskLimits(max_position_weight=0.5, max_order_notional=500.0)
    assert _decide(OrderRequest("X", "buy", 6), book, tight).code == "RISK_LIMIT_EXCEEDED"  # 600 > 500
    assert _decide(OrderRequest("X", "sell", 1), book).code == "RISK_LIMIT_EXCEEDED"  # no short
    assert _decide(OrderRequest("X", "buy", 10), book).code == "INSUFFICIENT_FUNDS"  # 1000 + 1 fee
    weight = _decide(OrderRequest("X", "buy", 6), book, RiskLimits(0.5, 1e9))
    assert weight.code == "RISK_LIMIT_EXCEEDED" and "60.1 %" in (weight.reason or "")  # 600 / (1000 - 1 fee)
    assert "max_position_weight is 50.0 %" in (weight.reason or "")
    assert _decide(OrderRequest("X", "buy", 4), book, RiskLimits(0.5, 1e9)).status == "filled"


def test_volume_cap_gives_partial_then_no_liquidity() -> None:
    book = Book(cash=1e6)
    partial = _decide(OrderRequest("X", "buy", 50), book, fraction=0.00002)  # 20 shares of 1M
    assert (partial.status, partial.filled_quantity, partial.code) == ("partial", 20, "NO_LIQUIDITY")
    none = _decide(OrderRequest("X", "buy", 50), book, fraction=1e-7)
    assert (none.status, none.code) == ("rejected", "NO_LIQUIDITY")


def test_apply_averages_buys_and_drops_a_closed_position() -> None:
    book = Book(cash=10_000.0, positions={"X": Holding(10, 80.0)})
    buy = OrderRequest("X", "buy", 10)
    decision = _decide(buy, book)
    apply(book=book, order=buy, decision=decision)
    assert book.positions["X"].quantity == 20 and book.positions["X"].avg_price == pytest.approx(90.0)
    assert book.cash == pytest.approx(10_000 - 1_000 - 1)
    sell = OrderRequest("X", "sell", 20)
    apply(book=book, order=sell, decision=_decide(sell, book))
    assert "X" not in book.positions and book.cash == pytest.approx(10_000 - 1_001 + 2_000 - 1)
