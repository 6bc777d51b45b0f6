"""``core.ledger``: the arithmetic that moves fills into a book (values worked by hand)."""

from __future__ import annotations

import pytest

from core.ledger import Action, Book, Decision, Holding, OrderRequest, apply, cash_delta, total_cost


def _fill(book: Book, action: Action, quantity: int, price: float, fees: float) -> None:
    order = OrderRequest(symbol="X", action=action, quantity=quantity)
    apply(book=book, order=order, decision=Decision("filled", quantity, price, fees))


def test_buys_average_the_price_and_sells_keep_it_until_the_position_closes() -> None:
    book = Book(cash=10_000.0)
    _fill(book, "buy", 10, 100.0, 1.0)  # pays 10 * 100 + 1
    assert book.cash == 8_999.0
    assert book.positions == {"X": Holding(10, 100.0)}
    _fill(book, "buy", 30, 120.0, 1.5)  # pays 3_600 + 1.5; average (10*100 + 30*120) / 40
    assert book.cash == 5_397.5
    assert book.positions == {"X": Holding(40, 115.0)}
    _fill(book, "sell", 25, 130.0, 1.25)  # receives 3_250 - 1.25; the average stays
    assert book.cash == 8_646.25
    assert book.positions == {"X": Holding(15, 115.0)}
    _fill(book, "sell", 15, 90.0, 1.0)  # receives 1_350 - 1; no shares left, no position
    assert book.cash == 9_995.25
    assert book.positions == {}


def test_average_price_is_rounded_to_six_decimals() -> None:
    book = Book(cash=1_000.0)
    _fill(book, "buy", 3, 10.0, 0.0)
    _fill(book, "buy", 4, 10.01, 0.0)  # (30 + 40.04) / 7 = 10.0057142857...
    assert book.positions["X"] == Holding(7, 10.005714)
    assert book.cash == 929.96  # 1_000 - 30 - 40.04


def test_cash_delta_and_total_cost_are_signed_and_unsigned_amounts() -> None:
    fill = Decision("filled", 3, 33.3333, 1.0)  # notional 99.9999
    assert fill.notional == 99.9999
    assert cash_delta("buy", fill) == -100.9999
    assert cash_delta("sell", fill) == 98.9999
    assert total_cost("buy", fill) == 100.9999
    assert total_cost("sell", fill) == 98.9999
    rejected = Decision("rejected", 0, 50.0, 0.0, code="NO_LIQUIDITY", reason="none")
    assert cash_delta("buy", rejected) == 0.0 and total_cost("sell", rejected) == 0.0


def test_a_rejected_decision_leaves_the_book_alone_and_copies_are_independent() -> None:
    book = Book(cash=500.0, positions={"X": Holding(2, 50.0)})
    apply(
        book=book,
        order=OrderRequest(symbol="X", action="sell", quantity=2),
        decision=Decision("rejected", 0, 60.0, 0.0, code="RISK_LIMIT_EXCEEDED", reason="no"),
    )
    assert book == Book(cash=500.0, positions={"X": Holding(2, 50.0)})
    copy = book.copy()
    _fill(copy, "buy", 1, 80.0, 0.0)
    assert book.positions["X"] == Holding(2, 50.0) and book.cash == 500.0
    assert copy.positions["X"] == Holding(3, 60.0) and copy.cash == 420.0
    assert book.total_value({"X": 55.0}) == pytest.approx(610.0)
