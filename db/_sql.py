"""Small SQL helpers shared by the ``db.*_repo`` modules (PostgreSQL and SQLite alike).

* :func:`dialect_insert` / :func:`insert_ignore`: the dialect's ``INSERT`` (the generic one has
  no ``ON CONFLICT``), bare or with ``ON CONFLICT … DO NOTHING`` on the unique constraints a
  claim relies on (:func:`unique_constraints`).
* :func:`insert_if_absent`: one idempotent single-row insert that says whether it inserted.

Why a claim names EVERY unique constraint of its table: PostgreSQL takes the ``DO NOTHING`` path
only for a conflict on an *arbiter* index. A concurrent insert of the same row into another
unique index is waited for and then raised as ``UniqueViolation`` (the INSERT reference, "ON
CONFLICT Clause": https://www.postgresql.org/docs/15/sql-insert.html#SQL-ON-CONFLICT). Measured
here on ``watchlist_runs`` (primary key ``id = "<watchlist_id>:<run_date>"`` and unique
``(watchlist_id, run_date)``), 200 rounds of 6 concurrent claims: ``ON CONFLICT (id)`` raised
in 5 rounds on the unique pair, ``ON CONFLICT ON CONSTRAINT uq_…`` in 12 rounds on the primary
key, ``ON CONFLICT DO NOTHING`` (every unique constraint an arbiter) in none. So a table with
one unique constraint gets ``ON CONFLICT (<primary key>)``; a table with several gets the
target-less form, and the caller must name them all, which :func:`insert_ignore` checks
against the schema (a constraint added later then fails loudly instead of being swallowed).

* :func:`fetch_one` / :func:`fetch_all`: the first row of a ``SELECT`` as a plain ``dict`` (or
  ``None``), or every row as a list of them.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy import Connection, Engine
from sqlalchemy.dialects import postgresql, sqlite

from db.engine import reading


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


def unique_constraints(table: sa.Table) -> frozenset[str]:
    """The names of ``table``'s uniqueness guarantees: its primary key, its ``UNIQUE``
    constraints and its unique indexes (``db.models`` names them all by convention)."""
    names = {str(table.primary_key.name)}
    names.update(str(c.name) for c in table.constraints if isinstance(c, sa.UniqueConstraint))
    names.update(str(i.name) for i in table.indexes if i.unique)
    return frozenset(names)


#: :func:`insert_ignore`'s statements by (dialect, table, constraints): they are immutable, and
#: building one (with the schema check) cost more than executing a tool-call batch.
_INSERT_IGNORE: dict[tuple[str, sa.Table, frozenset[str]], postgresql.Insert | sqlite.Insert] = {}


def insert_ignore(
    conn: Connection, table: sa.Table, *, constraints: Collection[str] | None = None
) -> postgresql.Insert | sqlite.Insert:
    """``INSERT … ON CONFLICT … DO NOTHING`` in the connection's dialect.

    Args:
        constraints: the names of the unique constraints whose conflict means "the row exists"
            (module docstring). Default: the primary key alone, allowed only when it is the
            table's one unique constraint; then the statement is ``ON CONFLICT (<pk columns>)``.
            Otherwise they must be exactly :func:`unique_constraints` of the table, and the
            statement is ``ON CONFLICT DO NOTHING`` with no target (every one an arbiter, on
            PostgreSQL and SQLite alike).

    SQLAlchemy 2 does not keep ``rowcount`` for INSERT by default (it is -1 on psycopg), so
    single-row callers use :func:`insert_if_absent` (``RETURNING <pk>``) and batches ask for
    ``preserve_rowcount``.
    Raises:
        ValueError: ``constraints`` is not the table's set of unique constraints (or is omitted
            for a table with more than its primary key).
        NotImplementedError: like :func:`dialect_insert`.
    """
    named = frozenset(constraints) if constraints is not None else frozenset({str(table.primary_key.name)})
    key = (conn.dialect.name, table, named)
    cached = _INSERT_IGNORE.get(key)
    if cached is not None:
        return cached
    declared = unique_constraints(table)
    if named != declared:
        raise ValueError(
            f"ON CONFLICT DO NOTHING on {table.name} must name its unique constraints "
            f"{sorted(declared)}, got {sorted(named)}: a race on an unnamed one raises UniqueViolation"
        )
    stmt = dialect_insert(conn, table)
    if len(declared) > 1:
        built = stmt.on_conflict_do_nothing()
    else:
        built = stmt.on_conflict_do_nothing(index_elements=[c.name for c in table.primary_key.columns])
    _INSERT_IGNORE[key] = built
    return built


def insert_if_absent(
    conn: Connection,
    table: sa.Table,
    values: Mapping[str, Any],
    *,
    constraints: Collection[str] | None = None,
) -> bool:
    """Insert one row unless it exists (``ON CONFLICT … DO NOTHING``, :func:`insert_ignore`).

    Args:
        conn: a connection inside a write transaction (``db.engine.begin_write``).
        values: ``{column name: value}`` of the new row; must include the primary key.
        constraints: as for :func:`insert_ignore` (default: the primary key, the only one).

    Returns ``True`` if this call inserted the row, ``False`` if it existed already (the stored
    row is left untouched), via ``RETURNING <pk>``, so concurrent callers agree on one winner.
    Other violations (a foreign key, a check) raise ``sqlalchemy.exc.IntegrityError``; a
    ``constraints`` that does not match the schema raises ``ValueError``.
    """
    stmt = (
        insert_ignore(conn, table, constraints=constraints)
        .values(dict(values))
        .returning(*table.primary_key.columns)
    )
    return conn.execute(stmt).first() is not None


def fetch_one(engine: Engine, stmt: sa.Select[Any]) -> dict[str, Any] | None:
    """The first row of ``stmt`` as ``{column label: value}``, or ``None`` if it selects none.

    Runs on a read connection of ``engine`` (``db.engine.reading``: autocommit on PostgreSQL).
    """
    with reading(engine) as conn:
        row = conn.execute(stmt).mappings().first()
    return dict(row) if row is not None else None


def fetch_all(engine: Engine, stmt: sa.Select[Any]) -> list[dict[str, Any]]:
    """Every row of ``stmt`` as ``{column label: value}``, in the statement's order.

    Runs on a read connection of ``engine`` (``db.engine.reading``: autocommit on PostgreSQL).
    """
    with reading(engine) as conn:
        return [dict(row) for row in conn.execute(stmt).mappings()]
