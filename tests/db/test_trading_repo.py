"""``db.trading_repo`` on both backends: accounts, orders, fills, positions, events, locking."""

from __future__ import annotations

import threading
import uuid
from datetime import UTC, date, datetime

import pytest
import sqlalchemy as sa
from sqlalchemy import Engine

from agents.broker.fees import FeeModel
from agents.broker.paper import Bar, decide
from agents.broker.risk import RiskLimits
from core.ledger import Book, Decision, OrderRequest
from db.trading_repo import (
    ACCOUNTS,
    ORDERS,
    OrderConflictError,
    account_id_for,
    execute_orders,
    get_event,
    insert_event,
    list_orders,
    read_book,
)

AS_OF = date(2013, 3, 1)
PLACED = datetime(2013, 3, 1, 20, 59, tzinfo=UTC)
BAR = Bar(date=AS_OF, close=100.0, volume=1e6)


def _decide(order: OrderRequest, book: Book) -> Decision:
    return decide(
        order=order,
        bar=BAR,
        book=book,
        prices={s: BAR.close for s in [*book.positions, order.symbol]},
        limits=RiskLimits(max_position_weight=1.0, max_order_notional=1e9),
        fees=FeeModel(),
        max_volume_fraction=1.0,
    )


def _execute(engine: Engine, user: str, *orders: OrderRequest, cash: float = 10_000.0, as_of: date = AS_OF):  # type: ignore[no-untyped-def]
    return execute_orders(
        engine=engine,
        user_id=user,
        starting_cash=cash,
        as_of=as_of,
        placed_at=PLACED,
        requests=orders,
        decide=_decide,
    )


def _user() -> str:
    return f"db-{uuid.uuid4().hex[:10]}"


def test_buy_then_sell_all_writes_fills_positions_and_cash(engine: Engine) -> None:
    user = _user()
    assert read_book(engine=engine, user_id=user) is None
    results, book = _execute(engine, user, OrderRequest("X", "buy", 10, client_order_id="b1"))
    assert results[0].decision.status == "filled" and book.cash == pytest.approx(10_000 - 1_000 - 1)
    stored = read_book(engine=engine, user_id=user)
    assert stored is not None and stored.positions["X"].quantity == 10 and stored.cash == pytest.approx(8_999)
    _execute(engine, user, OrderRequest("X", "sell", 10))
    stored = read_book(engine=engine, user_id=user)
    assert stored is not None and stored.positions == {} and stored.cash == pytest.approx(8_999 + 999)
    orders = list_orders(engine=engine, user_id=user)
    assert [o["status"] for o in orders] == ["filled", "filled"]
    assert orders[0]["fills"][0]["timestamp"] == PLACED and orders[0]["as_of"] == AS_OF


def test_client_order_id_is_unique_per_account_in_the_schema(engine: Engine) -> None:
    user = _user()
    _execute(engine, user, OrderRequest("X", "buy", 1, client_order_id="k"))
    row = {
        "id": str(uuid.uuid4()),
        "account_id": account_id_for(user),
        "client_order_id": "k",
        "symbol": "X",
        "action": "buy",
        "quantity": 1,
        "filled_quantity": 0,
        "order_type": "market",
        "status": "rejected",
        "as_of": AS_OF,
    }
    with pytest.raises(sa.exc.IntegrityError), engine.begin() as conn:
        conn.execute(ORDERS.insert().values(**row))
    # orders without a client id never collide (NULLs are distinct on both backends)
    _execute(engine, user, OrderRequest("X", "buy", 1), OrderRequest("X", "buy", 1))
    assert len(list_orders(engine=engine, user_id=user)) == 3


def test_a_repeat_replays_and_a_changed_repeat_conflicts(engine: Engine) -> None:
    user = _user()
    order = OrderRequest("X", "buy", 5, "limit", limit_price=101.0, client_order_id="r")
    (first,), _ = _execute(engine, user, order)
    (again,), book = _execute(engine, user, order)
    assert again.replayed and again.order_id == first.order_id
    assert (again.decision.status, again.decision.price, again.decision.fees) == ("filled", 100.0, 1.0)
    assert book.positions["X"].quantity == 5
    with pytest.raises(OrderConflictError):
        _execute(engine, user, OrderRequest("X", "buy", 6, "limit", limit_price=101.0, client_order_id="r"))


def test_concurrent_executions_cannot_spend_the_cash_twice(engine: Engine) -> None:
    # given two buys of 60 % of the cash each, sent at once
    user = _user()
    _execute(engine, user, OrderRequest("X", "buy", 1))  # create the account first
    barrier = threading.Barrier(2)
    statuses: list[str] = []

    def buy(key: str) -> None:
        barrier.wait(timeout=10)
        (result,), _ = _execute(engine, user, OrderRequest("Y", "buy", 60, client_order_id=key))
        statuses.append(result.decision.code or result.decision.status)

    threads = [threading.Thread(target=buy, args=(k,)) for k in ("p", "q")]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    # then the transactions are serialised: one fills, the other sees the spent cash
    assert sorted(statuses) == ["INSUFFICIENT_FUNDS", "filled"]
    book = read_book(engine=engine, user_id=user)
    assert book is not None and book.cash >= 0 and book.positions["Y"].quantity == 60


def test_concurrent_first_orders_create_one_account(engine: Engine) -> None:
    # given, for each of 10 new users, six first orders sent at once (no account exists yet);
    # several users because one round loses the race only now and then
    users = [_user() for _ in range(10)]
    statuses: list[str] = []
    errors: list[BaseException] = []

    def buy(user: str, key: str, barrier: threading.Barrier) -> None:
        barrier.wait(timeout=10)
        try:
            (result,), _ = _execute(engine, user, OrderRequest("Y", "buy", 1, client_order_id=key))
            statuses.append(result.decision.status)
        except BaseException as exc:  # a UniqueViolation on uq_accounts_user_id is the bug
            errors.append(exc)

    for user in users:
        barrier = threading.Barrier(6)
        threads = [threading.Thread(target=buy, args=(user, f"k{i}", barrier)) for i in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=60)
    # then every order ran against the one account that exactly one of them created
    assert errors == [] and statuses == ["filled"] * 60
    for user in users:
        book = read_book(engine=engine, user_id=user)
        assert book is not None and book.positions["Y"].quantity == 6
    with engine.connect() as conn:
        accounts = conn.execute(
            sa.select(sa.func.count()).select_from(ACCOUNTS).where(ACCOUNTS.c.user_id.in_(users))
        ).scalar_one()
    assert accounts == 10


def test_orders_before_the_last_trade_are_refused(engine: Engine) -> None:
    user = _user()
    _execute(engine, user, OrderRequest("X", "buy", 1))
    with pytest.raises(OrderConflictError, match="back in time"):
        _execute(engine, user, OrderRequest("X", "buy", 1), as_of=date(2013, 2, 1))


def test_events_insert_once_and_redact(engine: Engine) -> None:
    event_id = str(uuid.uuid4())
    data = {"note": "token=abc123", "n": 1}
    assert insert_event(
        engine=engine, event_id=event_id, event_type="error", severity="critical", data=data, analysis_id="a"
    )
    assert not insert_event(
        engine=engine, event_id=event_id, event_type="error", severity="critical", data=data, analysis_id="a"
    )
    row = get_event(engine=engine, event_id=event_id)
    assert (
        row is not None
        and row["data"] == {"note": "token=***", "n": 1}
        and row["created_at"].tzinfo is not None
    )
    with pytest.raises(sa.exc.IntegrityError):
        insert_event(
            engine=engine,
            event_id=str(uuid.uuid4()),
            event_type="gossip",
            severity="low",
            data={},
            analysis_id=None,
        )
