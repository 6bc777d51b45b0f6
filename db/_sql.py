"""Small SQL helpers shared by the ``db.*_repo`` modules (PostgreSQL and SQLite alike).

* :func:`dialect_insert` / :func:`insert_ignore`: the dialect's ``INSERT`` (the generic one has
  no ``ON CONFLICT``), bare or with ``ON CONFLICT (<primary key>) DO NOTHING``.
* :func:`insert_if_absent`: one idempotent single-row insert that says whether it inserted.
* :func:`fetch_one` / :func:`fetch_all`: the first row of a ``SELECT`` as a plain ``dict`` (or
  ``None``), or every row as a list of them.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy import Connection, Engine
from sqlalchemy.dialects import postgresql, sqlite


def utc_now() -> datetime:
    """The current time, timezone-aware UTC (the timestamp columns' convention)."""
    return datetime.now(UTC)


def dialect_insert(conn: Connection, table: sa.Table) -> postgresql.Insert | sqlite.Insert:
    """``INSERT INTO table`` in ``conn``'s dialect, so ``on_conflict_do_*`` is available.

    Raises ``NotImplementedError`` for a dialect other than ``postgresql`` or ``sqlite``.
    """
    if conn.dialect.name == "postgresql":
        return postgresql.insert(table)
    if conn.dialect.name == "sqlite":
        return sqlite.insert(table)
    raise NotImplementedError(f"unsupported database dialect {conn.dialect.name!r}")


def insert_ignore(conn: Connection, table: sa.Table) -> postgresql.Insert | sqlite.Insert:
    """``INSERT … ON CONFLICT (<primary key>) DO NOTHING`` in the connection's dialect.

    SQLAlchemy 2 does not keep ``rowcount`` for INSERT by default (it is -1 on psycopg), so
    single-row callers use :func:`insert_if_absent` (``RETURNING <pk>``) and batches ask for
    ``preserve_rowcount``. Raises ``NotImplementedError`` like :func:`dialect_insert`.
    """
    index_elements = [c.name for c in table.primary_key.columns]
    return dialect_insert(conn, table).on_conflict_do_nothing(index_elements=index_elements)


def insert_if_absent(conn: Connection, table: sa.Table, values: Mapping[str, Any]) -> bool:
    """Insert one row unless its primary key exists (``ON CONFLICT (<pk>) DO NOTHING``).

    Args:
        conn: a connection inside a write transaction (``db.engine.begin_write``).
        values: ``{column name: value}`` of the new row; must include the primary key.

    Returns ``True`` if this call inserted the row, ``False`` if the key existed already (the
    stored row is left untouched), via ``RETURNING <pk>``, so concurrent callers agree on one
    winner. Other constraint violations (a foreign key, another unique index) raise
    ``sqlalchemy.exc.IntegrityError``.
    """
    stmt = insert_ignore(conn, table).values(dict(values)).returning(*table.primary_key.columns)
    return conn.execute(stmt).first() is not None


def fetch_one(engine: Engine, stmt: sa.Select[Any]) -> dict[str, Any] | None:
    """The first row of ``stmt`` as ``{column label: value}``, or ``None`` if it selects none.

    Runs on a fresh read connection of ``engine`` (no explicit transaction).
    """
    with engine.connect() as conn:
        row = conn.execute(stmt).mappings().first()
    return dict(row) if row is not None else None


def fetch_all(engine: Engine, stmt: sa.Select[Any]) -> list[dict[str, Any]]:
    """Every row of ``stmt`` as ``{column label: value}``, in the statement's order.

    Runs on a fresh read connection of ``engine`` (no explicit transaction).
    """
    with engine.connect() as conn:
        return [dict(row) for row in conn.execute(stmt).mappings()]
