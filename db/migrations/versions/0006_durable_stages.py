"""analyses: checkpoint, attempt, lease and recoveries (the row is the record of truth)

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-23

A broker message is only a delivery: it can be lost (Redis without persistence restarting),
duplicated (redelivery) or late (docs/design.md, "Durability and idempotency"). These columns let the
row alone say where an analysis is, so the recovery sweep (``pipeline.steps.recovery``) can
re-drive it: ``checkpoint`` (last completed stage of the pass; the stored ``state`` is the state
after it), ``attempt`` (claims of the current step), ``lease_owner``/``lease_expires_at`` (who
runs the step and until when it counts as alive) and ``recoveries`` (re-drives so far).

Existing unfinished rows get ``lease_expires_at = updated_at``: they are already past their
lease, so the first sweep re-drives (or fails) them instead of leaving them stuck.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op


revision: str = "0006"
down_revision: str | Sequence[str] | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

UTC_DATETIME = sa.DateTime(timezone=True)


def upgrade() -> None:
    """Add the five columns and the index on ``lease_expires_at``; backfill leases."""
    with op.batch_alter_table("analyses") as batch:
        batch.add_column(sa.Column("checkpoint", sa.String(), nullable=True))
        batch.add_column(sa.Column("attempt", sa.Integer(), server_default="0", nullable=False))
        batch.add_column(sa.Column("lease_owner", sa.String(), nullable=True))
        batch.add_column(sa.Column("lease_expires_at", UTC_DATETIME, nullable=True))
        batch.add_column(sa.Column("recoveries", sa.Integer(), server_default="0", nullable=False))
        batch.create_index(op.f("ix_analyses_lease_expires_at"), ["lease_expires_at"])
    op.execute(
        "UPDATE analyses SET lease_expires_at = updated_at WHERE status NOT IN ('done', 'failed')"
    )


def downgrade() -> None:
    """Drop the index and the five columns (rows in ``queued`` become ``researching``)."""
    op.execute("UPDATE analyses SET status = 'researching' WHERE status = 'queued'")
    with op.batch_alter_table("analyses") as batch:
        batch.drop_index(op.f("ix_analyses_lease_expires_at"))
        batch.drop_column("recoveries")
        batch.drop_column("lease_expires_at")
        batch.drop_column("lease_owner")
        batch.drop_column("attempt")
        batch.drop_column("checkpoint")
