"""audit rows carry the client address; requests without a valid key are counted, not listed

Revision ID: 0015
Revises: 0014
Create Date: 2026-11-27

Every mutating request used to write its own ``audit_log`` row, also without a valid key: 300
anonymous ``DELETE``s were 300 rows in 23 s, so anyone who could reach the gateway could grow
the table at will. Now a request without a valid key adds one to the row of its client address,
status and time window (``aggregate_key``, unique; ``requests`` counts, ``last_at`` is the
latest), so a flood costs one row per address, status and window. Requests with a valid key keep
one row each. ``client_address`` is recorded on every row (IPv6: its /64 network). Existing
rows get ``requests = 1``.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | Sequence[str] | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add ``client_address``, ``requests``, ``last_at`` and the unique ``aggregate_key``."""
    with op.batch_alter_table("audit_log") as batch:
        batch.add_column(sa.Column("client_address", sa.String(), nullable=True))
        batch.add_column(sa.Column("requests", sa.Integer(), server_default="1", nullable=False))
        batch.add_column(sa.Column("last_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("aggregate_key", sa.String(), nullable=True))
        batch.create_unique_constraint(op.f("uq_audit_log_aggregate_key"), ["aggregate_key"])


def downgrade() -> None:
    """Drop the four columns; an aggregated row stays as one row (its first request)."""
    with op.batch_alter_table("audit_log") as batch:
        batch.drop_constraint("uq_audit_log_aggregate_key", type_="unique")
        batch.drop_column("aggregate_key")
        batch.drop_column("last_at")
        batch.drop_column("requests")
        batch.drop_column("client_address")
