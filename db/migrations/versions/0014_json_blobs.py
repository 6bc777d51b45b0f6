"""Plain ``json`` (not ``jsonb``) for the state and the tool results (PostgreSQL)

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-26

``analyses.state`` (~22 KB, written by every stage's checkpoint) and ``tool_calls.result`` (a
``get_history`` result is ~74 KB) are written often, read whole by id and never searched
inside: no query takes a path into them, no index covers them. ``jsonb`` parses every value
into its binary form on the way in (and prints it back on the way out); ``json`` only checks
the syntax and keeps the text. Measured on PostgreSQL 16 (one ~74 KB ``get_history`` result,
300 autocommitted inserts): 0.9-1.0 ms server CPU per value as ``jsonb``, 0.37-0.43 ms as
``json`` (docs/benchmarks.md). What ``json`` gives up does not matter here: its key order is
the writer's (``db.engine.json_dumps``), which no reader relies on either way, and it has no
equality operator, which no query of these two columns uses. ``report_json`` and the other
JSON columns stay ``jsonb`` (``db.backtest_repo`` reads paths inside reports). SQLite: JSON is
text there already; nothing to do. The lz4 compression of migration 0013 is set again after
the type change.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0014"
down_revision: str | Sequence[str] | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: table -> (column, nullable)
COLUMNS: dict[str, tuple[str, bool]] = {"analyses": ("state", False), "tool_calls": ("result", True)}


def _lz4_available() -> bool:
    """As in migration 0013: PostgreSQL ≥ 14 built with lz4."""
    found = (
        op.get_bind()
        .execute(sa.text("SELECT enumvals FROM pg_settings WHERE name = 'default_toast_compression'"))
        .scalar()
    )
    return "lz4" in (found or [])


def _retype(to: str) -> None:
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return
    new_type = postgresql.JSONB() if to == "jsonb" else postgresql.JSON()
    lz4 = _lz4_available()
    for table, (column, nullable) in COLUMNS.items():
        op.alter_column(
            table, column, type_=new_type, existing_nullable=nullable, postgresql_using=f"{column}::{to}"
        )
        if lz4:
            op.execute(f"ALTER TABLE {table} ALTER COLUMN {column} SET COMPRESSION lz4")


def upgrade() -> None:
    """``jsonb`` → ``json`` for ``analyses.state`` and ``tool_calls.result`` (PostgreSQL)."""
    _retype("json")


def downgrade() -> None:
    """Back to ``jsonb`` (PostgreSQL)."""
    _retype("jsonb")
