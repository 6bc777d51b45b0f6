"""lz4 compression for the large JSON and text columns (PostgreSQL)

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-26

A backtest writes per analysis a ~80 KB ``get_history`` result and four ~22 KB checkpoints of
the state; PostgreSQL compresses each out-of-line value (TOAST) with its default ``pglz``.
With ``lz4`` (PostgreSQL 14+, servers built ``--with-lz4`` such as Debian's and the official
images) the server spent 2.5 ms less CPU per analysis (8.2 → 5.5 ms; the stage writes of one
real analysis replayed 300 times, docs/benchmarks.md) for about 15 % larger values. The rule
applies to values written from now on; existing values stay as they are and stay readable.
SQLite and a server without lz4: nothing to do.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | Sequence[str] | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: The columns holding values large enough to be TOASTed: states, reports, tool results, LLM
#: requests and answers.
COLUMNS: dict[str, tuple[str, ...]] = {
    "analyses": ("state", "report", "report_json"),
    "tool_calls": ("arguments", "result", "source_refs"),
    "llm_calls": ("request", "response", "completion"),
    "llm_cache": ("completion",),
}


def _lz4_available() -> bool:
    """PostgreSQL ≥ 14 whose build knows lz4 (``default_toast_compression`` lists it)."""
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return False
    found = bind.execute(
        sa.text("SELECT enumvals FROM pg_settings WHERE name = 'default_toast_compression'")
    ).scalar()
    return "lz4" in (found or [])


def _set(method: str) -> None:
    for table, columns in COLUMNS.items():
        changes = ", ".join(f"ALTER COLUMN {column} SET COMPRESSION {method}" for column in columns)
        op.execute(f"ALTER TABLE {table} {changes}")


def upgrade() -> None:
    """Compress new values of :data:`COLUMNS` with lz4 where the server can."""
    if _lz4_available():
        _set("lz4")


def downgrade() -> None:
    """Back to the server's default method for new values."""
    if _lz4_available():
        _set("default")
