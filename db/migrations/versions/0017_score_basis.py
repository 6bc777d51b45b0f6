"""recommendation_scores.entry and .benchmark_spec: the basis a score was computed on

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-26

A forward return depends on the entry rule (the close the signal was computed from, or the next
session's open) and on the configured benchmark (symbol and data source). Both are recorded on
every score row so a scorecard can tell stale rows (computed on another basis) from current ones
and ``finagent scorecard --rescore`` can recompute them. Rows written before this revision were
entered at the as-of close (``entry = 'close'``) against an unrecorded benchmark (``''``: stale
for any configured one).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | Sequence[str] | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add ``entry`` (default ``close``) and ``benchmark_spec`` (default empty)."""
    with op.batch_alter_table("recommendation_scores") as batch:
        batch.add_column(sa.Column("entry", sa.String(), nullable=False, server_default="close"))
        batch.add_column(sa.Column("benchmark_spec", sa.String(), nullable=False, server_default=""))


def downgrade() -> None:
    """Drop the two columns."""
    with op.batch_alter_table("recommendation_scores") as batch:
        batch.drop_column("benchmark_spec")
        batch.drop_column("entry")
