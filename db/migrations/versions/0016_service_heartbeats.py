"""service_heartbeats: the recovery sweeper's sign of life, read by GET /health

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-26

The recovery sweep runs in a process of its own (``finagent sweeper``), not in the workers, so
a worker that cannot run tasks cannot stop it. Whether it runs is a fact ``GET /health`` must
report independently of the workers: the sweeper writes one row per process after every sweep
(``beat_at``), and the check reads the newest row of its kind.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision: str = "0016"
down_revision: str | Sequence[str] | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON_TYPE = sa.JSON().with_variant(JSONB(), "postgresql")


def upgrade() -> None:
    """Create ``service_heartbeats`` and its ``(kind, beat_at)`` index."""
    op.create_table(
        "service_heartbeats",
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("host", sa.String(), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("beat_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("detail", JSON_TYPE, nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_service_heartbeats")),
    )
    op.create_index(
        op.f("ix_service_heartbeats_kind_beat_at"), "service_heartbeats", ["kind", "beat_at"], unique=False
    )


def downgrade() -> None:
    """Drop the table (and its index)."""
    op.drop_index(op.f("ix_service_heartbeats_kind_beat_at"), table_name="service_heartbeats")
    op.drop_table("service_heartbeats")
