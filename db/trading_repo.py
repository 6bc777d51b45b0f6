"""Data access for the paper broker and ``log_event`` (keyword-only functions).

Exactly-once (docs/design.md, "Durability and idempotency"), each insert naming the constraints it relies on:

* an account's id is derived from its user id and inserted with ``ON CONFLICT DO NOTHING`` on
  both ``pk_accounts`` and ``uq_accounts_user_id`` (:data:`ACCOUNT_CLAIM_CONSTRAINTS`): with the
  primary key alone, concurrent first orders of one user raised ``UniqueViolation`` on
  ``uq_accounts_user_id`` (why: ``db._sql``);
* an order with a ``client_order_id`` gets the id ``uuid5(account_id|client_order_id)`` and is
  inserted with ``ON CONFLICT (account_id, client_order_id) DO NOTHING``
  (``uq_orders_account_id_client_order_id``), so a repeat finds the original order and fills
  nothing. Its other unique constraints (``pk_orders``, ``uq_orders_account_id_seq``) cannot
  race: orders are inserted under the account lock below;
* positions are upserted on ``pk_positions`` ``(account_id, symbol)``, events inserted on
  ``pk_events``, each its table's only unique constraint.

One ``execute_orders`` call is one write transaction (``db.engine.begin_write``: ``BEGIN
IMMEDIATE`` on SQLite; on Postgres the account row is locked ``FOR UPDATE``), so concurrent
executions on one account are serialised and cash can never be spent twice.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any, Final

import sqlalchemy as sa
from sqlalchemy import Connection, Engine

from core.ledger import Book, Decision, Holding, OrderRequest, apply, cash_delta
from db._sql import dialect_insert, fetch_one, insert_if_absent, insert_ignore, utc_now
from db.engine import begin_write, reading
from db.models import ACCOUNTS, EVENTS, FILLS, ORDERS, POSITIONS
from db.redact import redact

#: The unique constraints the first-use account insert relies on (both are functions of
#: ``user_id``, so a conflict on either means "the account exists").
ACCOUNT_CLAIM_CONSTRAINTS: Final = ("pk_accounts", "uq_accounts_user_id")

_NAMESPACE: Final = uuid.UUID("0b6f3c52-7d0e-4c4f-9a55-2f1f7c0d8e31")


class OrderConflictError(ValueError):
    """A ``client_order_id`` was reused for a different order, or an order goes back in time."""


@dataclass(frozen=True)
class OrderResult:
    """One order's outcome: ``replayed`` when a ``client_order_id`` repeat returned the original."""

    order_id: str
    request: OrderRequest
    decision: Decision
    replayed: bool = False


def account_id_for(user_id: str) -> str:
    """The deterministic account id of ``user_id`` (uuid5 string)."""
    return str(uuid.uuid5(_NAMESPACE, f"account|{user_id}"))


def order_id_for(*, account_id: str, client_order_id: str | None) -> str:
    """``uuid5(account|client_order_id)`` for a client order id, else a random uuid4."""
    if client_order_id is None:
        return str(uuid.uuid4())
    return str(uuid.uuid5(_NAMESPACE, f"order|{account_id}|{client_order_id}"))


def _load_book(conn: Connection, account_id: str) -> Book | None:
    cash = conn.execute(sa.select(ACCOUNTS.c.cash).where(ACCOUNTS.c.id == account_id)).scalar_one_or_none()
    if cash is None:
        return None
    rows = conn.execute(
        sa.select(POSITIONS.c.symbol, POSITIONS.c.quantity, POSITIONS.c.avg_price).where(
            POSITIONS.c.account_id == account_id
        )
    ).all()
    return Book(cash=float(cash), positions={s: Holding(int(q), float(a)) for s, q, a in rows})


def read_book(*, engine: Engine, user_id: str, as_of: date | None = None) -> Book | None:
    """Cash and positions of ``user_id``'s account, ``None`` if it has none yet.

    ``as_of=None``: the current state. With a date: the state after the orders of sessions up to
    ``as_of`` only (point in time): when later orders exist, the book is replayed from the
    opening cash (current cash minus every fill's cash change) through the fills of orders with
    ``orders.as_of <= as_of``, in ``seq`` order, with the broker's own ``apply``
    (``core.ledger``).
    """
    account_id = account_id_for(user_id)
    with reading(engine) as conn:
        book = _load_book(conn, account_id)
        if book is None or as_of is None:
            return book
        fills = conn.execute(
            sa.select(
                ORDERS.c.as_of,
                ORDERS.c.symbol,
                ORDERS.c.action,
                FILLS.c.quantity,
                FILLS.c.price,
                FILLS.c.fees,
            )
            .join(FILLS, FILLS.c.order_id == ORDERS.c.id)
            .where(ORDERS.c.account_id == account_id)
            .order_by(ORDERS.c.seq, FILLS.c.id)
        ).all()
    if all(day <= as_of for day, *_ in fills):
        return book
    replay: list[tuple[date, OrderRequest, Decision]] = [
        (
            day,
            OrderRequest(symbol=symbol, action=action, quantity=int(qty)),
            Decision(status="filled", filled_quantity=int(qty), price=float(price), fees=float(fees)),
        )
        for day, symbol, action, qty, price, fees in fills
    ]
    opening = book.cash - sum(cash_delta(r.action, d) for _, r, d in replay)
    past = Book(cash=round(opening, 4))
    for day, request, decision in replay:
        if day <= as_of:
            apply(book=past, order=request, decision=decision)
    return past


def _find_order(conn: Connection, account_id: str, client_order_id: str) -> OrderResult | None:
    row = (
        conn.execute(
            sa.select(ORDERS).where(
                ORDERS.c.account_id == account_id, ORDERS.c.client_order_id == client_order_id
            )
        )
        .mappings()
        .first()
    )
    if row is None:
        return None
    fill = conn.execute(
        sa.select(
            sa.func.coalesce(sa.func.sum(FILLS.c.quantity * FILLS.c.price), 0.0),
            sa.func.coalesce(sa.func.sum(FILLS.c.fees), 0.0),
        ).where(FILLS.c.order_id == row["id"])
    ).one()
    filled = int(row["filled_quantity"])
    price = float(fill[0]) / filled if filled else float(row["limit_price"] or row["stop_price"] or 0.0)
    request = OrderRequest(
        symbol=row["symbol"],
        action=row["action"],
        quantity=int(row["quantity"]),
        order_type=row["order_type"],
        limit_price=row["limit_price"],
        stop_price=row["stop_price"],
        client_order_id=client_order_id,
    )
    code, _, reason = (row["reason"] or "").partition(": ")
    decision = Decision(
        status=row["status"],
        filled_quantity=filled,
        price=round(price, 4),
        fees=round(float(fill[1]), 2),
        code=code or None,
        reason=reason or None,
    )
    return OrderResult(order_id=row["id"], request=request, decision=decision, replayed=True)


def _same_order(a: OrderRequest, b: OrderRequest) -> bool:
    return (a.symbol, a.action, a.quantity, a.order_type, a.limit_price, a.stop_price) == (
        b.symbol,
        b.action,
        b.quantity,
        b.order_type,
        b.limit_price,
        b.stop_price,
    )


def _open_account(
    conn: Connection, *, account_id: str, user_id: str, starting_cash: float, placed_at: datetime
) -> tuple[Book, date | None, int]:
    """Claim and lock ``account_id`` in the write transaction ``conn``: insert it with
    ``starting_cash`` USD when absent (:data:`ACCOUNT_CLAIM_CONSTRAINTS`), lock its row on
    Postgres (SQLite's ``BEGIN IMMEDIATE`` holds the lock already). Returns ``(its book, the
    latest as_of of its filled orders or None, its highest order seq or 0)``."""
    conn.execute(
        insert_ignore(conn, ACCOUNTS, constraints=ACCOUNT_CLAIM_CONSTRAINTS).values(
            id=account_id, user_id=user_id, cash=starting_cash, currency="USD", created_at=placed_at
        )
    )
    if conn.dialect.name == "postgresql":  # SQLite's BEGIN IMMEDIATE already holds the write lock
        conn.execute(sa.select(ACCOUNTS.c.id).where(ACCOUNTS.c.id == account_id).with_for_update())
    book = _load_book(conn, account_id)
    assert book is not None
    latest = conn.execute(
        sa.select(sa.func.max(ORDERS.c.as_of)).where(
            ORDERS.c.account_id == account_id, ORDERS.c.filled_quantity > 0
        )
    ).scalar_one_or_none()
    seq = conn.execute(
        sa.select(sa.func.coalesce(sa.func.max(ORDERS.c.seq), 0)).where(ORDERS.c.account_id == account_id)
    ).scalar_one()
    return book, latest, seq


def _replayed(conn: Connection, account_id: str, request: OrderRequest) -> OrderResult | None:
    """The stored original of ``request`` when its ``client_order_id`` is already used on
    ``account_id`` (``replayed=True``), else None (also without a ``client_order_id``).
    Raises :class:`OrderConflictError` when that id names a different order."""
    if request.client_order_id is None:
        return None
    existing = _find_order(conn, account_id, request.client_order_id)
    if existing is not None and not _same_order(existing.request, request):
        old = existing.request
        raise OrderConflictError(
            f"client_order_id {request.client_order_id!r} already names another order "
            f"({old.action} {old.quantity} {old.symbol})"
        )
    return existing


def _insert_order(
    conn: Connection,
    *,
    order_id: str,
    account_id: str,
    seq: int,
    request: OrderRequest,
    decision: Decision,
    placed_at: datetime,
    as_of: date,
) -> bool:
    """Store one order (a rejection too, its ``reason`` ``"<CODE>: <text>"``) as ``seq`` of
    ``account_id``; a fill as one ``fills`` row at ``placed_at`` (its quantity, price in USD a
    share and fees in USD). Returns False, storing nothing, when its ``client_order_id`` is
    already stored (on ``uq_orders_account_id_client_order_id``)."""
    stored = conn.execute(
        dialect_insert(conn, ORDERS)
        .values(
            id=order_id,
            account_id=account_id,
            seq=seq,
            client_order_id=request.client_order_id,
            symbol=request.symbol,
            action=request.action,
            quantity=request.quantity,
            filled_quantity=decision.filled_quantity,
            order_type=request.order_type,
            limit_price=request.limit_price,
            stop_price=request.stop_price,
            status=decision.status,
            reason=f"{decision.code}: {decision.reason}" if decision.code else None,
            created_at=placed_at,
            as_of=as_of,
        )
        # uq_orders_account_id_client_order_id; pk_orders and uq_orders_account_id_seq
        # cannot conflict concurrently under the account lock (module docstring)
        .on_conflict_do_nothing(index_elements=["account_id", "client_order_id"])
        .returning(ORDERS.c.id)
    ).first()
    if stored is None:
        return False
    if decision.filled_quantity:
        conn.execute(
            FILLS.insert().values(
                id=f"{order_id}#1",
                order_id=order_id,
                quantity=decision.filled_quantity,
                price=decision.price,
                fees=decision.fees,
                timestamp=placed_at,
            )
        )
    return True


def execute_orders(
    *,
    engine: Engine,
    user_id: str,
    starting_cash: float,
    as_of: date,
    placed_at: datetime,
    requests: Sequence[OrderRequest],
    decide: Callable[[OrderRequest, Book], Decision],
) -> tuple[list[OrderResult], Book]:
    """Run ``requests`` in order against ``user_id``'s account in ONE write transaction.

    Creates the account with ``starting_cash`` USD on first use (concurrent first orders of one
    user create it once: :data:`ACCOUNT_CLAIM_CONSTRAINTS`). ``decide(request, book)`` is the
    broker's pure decision (``agents.broker.paper.decide`` bound to prices and limits); every
    order is stored (rejections too, with ``reason`` ``"<CODE>: <text>"``), each fill as one
    ``fills`` row at ``placed_at``, then positions and cash are written.

    Returns the per-order results (repeats of a ``client_order_id`` return the stored original,
    ``replayed=True``, and change nothing) and the book after the orders.

    Raises:
        OrderConflictError: a ``client_order_id`` already names a different order, or the
            account already traded at a later ``as_of`` (paper trading cannot go back in time).
    """
    account_id = account_id_for(user_id)
    results: list[OrderResult] = []
    with begin_write(engine) as conn:
        book, latest, seq = _open_account(
            conn, account_id=account_id, user_id=user_id, starting_cash=starting_cash, placed_at=placed_at
        )
        touched: set[str] = set()
        for request in requests:
            existing = _replayed(conn, account_id, request)
            if existing is not None:
                results.append(existing)
                continue
            if latest is not None and as_of < latest:
                raise OrderConflictError(
                    f"the account already traded on {latest}; orders at {as_of} would go back in time"
                )
            decision = decide(request, book)
            order_id = order_id_for(account_id=account_id, client_order_id=request.client_order_id)
            seq += 1
            if not _insert_order(
                conn,
                order_id=order_id,
                account_id=account_id,
                seq=seq,
                request=request,
                decision=decision,
                placed_at=placed_at,
                as_of=as_of,
            ):  # unreachable under the account lock; kept for exactly-once
                assert request.client_order_id is not None
                again = _find_order(conn, account_id, request.client_order_id)
                assert again is not None
                results.append(again)
                continue
            if decision.filled_quantity:
                apply(book=book, order=request, decision=decision)
                touched.add(request.symbol)
            results.append(OrderResult(order_id=order_id, request=request, decision=decision))
        for symbol in sorted(touched):
            _write_position(conn, account_id, symbol, book.positions.get(symbol), placed_at)
        conn.execute(ACCOUNTS.update().where(ACCOUNTS.c.id == account_id).values(cash=book.cash))
    return results, book


def _write_position(
    conn: Connection, account_id: str, symbol: str, holding: Holding | None, now: datetime
) -> None:
    if holding is None:
        conn.execute(
            POSITIONS.delete().where(POSITIONS.c.account_id == account_id, POSITIONS.c.symbol == symbol)
        )
        return
    values = {"quantity": holding.quantity, "avg_price": holding.avg_price, "updated_at": now}
    conn.execute(
        dialect_insert(conn, POSITIONS)
        .values(account_id=account_id, symbol=symbol, **values)
        .on_conflict_do_update(index_elements=["account_id", "symbol"], set_=values)
    )


def list_orders(*, engine: Engine, user_id: str) -> list[dict[str, Any]]:
    """Every order of ``user_id``'s account with its fills (``fills``: list of row dicts), in
    ``seq`` order (the order the broker processed them)."""
    account_id = account_id_for(user_id)
    with reading(engine) as conn:
        orders = [
            dict(r)
            for r in conn.execute(
                sa.select(ORDERS).where(ORDERS.c.account_id == account_id).order_by(ORDERS.c.seq)
            ).mappings()
        ]
        for order in orders:
            order["fills"] = [
                dict(r)
                for r in conn.execute(sa.select(FILLS).where(FILLS.c.order_id == order["id"])).mappings()
            ]
    return orders


def insert_event(
    *,
    engine: Engine,
    event_id: str,
    event_type: str,
    severity: str,
    data: dict[str, Any],
    analysis_id: str | None,
) -> bool:
    """Insert one ``events`` row (``data`` redacted, ``db.redact.redact``); ``ON CONFLICT (id) DO
    NOTHING`` on ``pk_events``, the table's only unique constraint. Returns ``True`` if
    inserted, ``False`` if ``event_id`` existed already."""
    with begin_write(engine) as conn:
        return insert_if_absent(
            conn,
            EVENTS,
            {
                "id": event_id,
                "event_type": event_type,
                "severity": severity,
                "data": redact(data),
                "analysis_id": analysis_id,
                "created_at": utc_now(),
            },
        )


def get_event(*, engine: Engine, event_id: str) -> dict[str, Any] | None:
    """The ``events`` row ``event_id`` as a dict, or ``None``."""
    return fetch_one(engine, sa.select(EVENTS).where(EVENTS.c.id == event_id))
