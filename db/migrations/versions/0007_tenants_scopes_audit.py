"""tenants, scopes and the audit log (object-level authorization of the HTTP gateway)

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-23

Every analysis and watchlist belongs to a tenant; every API key belongs to one and carries its
scopes. Existing rows migrate to the ``default`` tenant (where the CLI and the Python API work)
and existing keys get the default scopes ``read,analyze,watchlists`` (what they could do
before, minus ``admin``). Watchlist names become unique per tenant instead of globally.
``audit_log`` holds one row per mutating HTTP request.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op


revision: str = "0007"
down_revision: str | Sequence[str] | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

UTC_DATETIME = sa.DateTime(timezone=True)


def upgrade() -> None:
    """Add the tenant/owner/scope columns (backfilled by their server defaults), make watchlist
    names unique per tenant, create ``audit_log``."""
    with op.batch_alter_table("analyses") as batch:
        batch.add_column(sa.Column("tenant", sa.String(), server_default="default", nullable=False))
        batch.add_column(sa.Column("api_key_id", sa.String(), nullable=True))
        batch.create_index(op.f("ix_analyses_tenant_created_at"), ["tenant", "created_at"])
        batch.create_index(op.f("ix_analyses_api_key_id_status"), ["api_key_id", "status"])
    with op.batch_alter_table("api_keys") as batch:
        batch.add_column(sa.Column("tenant", sa.String(), server_default="default", nullable=False))
        batch.add_column(
            sa.Column("scopes", sa.String(), server_default="read,analyze,watchlists", nullable=False)
        )
    with op.batch_alter_table("watchlists") as batch:
        batch.add_column(sa.Column("tenant", sa.String(), server_default="default", nullable=False))
        batch.drop_constraint("uq_watchlists_name", type_="unique")
        batch.create_unique_constraint(op.f("uq_watchlists_tenant_name"), ["tenant", "name"])
    op.create_table(
        "audit_log",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("at", UTC_DATETIME, nullable=False),
        sa.Column("request_id", sa.String(), nullable=False),
        sa.Column("tenant", sa.String(), nullable=True),
        sa.Column("api_key_id", sa.String(), nullable=True),
        sa.Column("key_name", sa.String(), nullable=True),
        sa.Column("method", sa.String(), nullable=False),
        sa.Column("what", sa.String(), nullable=False),
        sa.Column("object_id", sa.String(), nullable=True),
        sa.Column("status_code", sa.Integer(), nullable=False),
        sa.Column("outcome", sa.String(), nullable=False),
        sa.CheckConstraint("outcome IN ('ok', 'refused', 'error')", name=op.f("ck_audit_log_outcome")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_log")),
    )
    op.create_index(op.f("ix_audit_log_tenant_at"), "audit_log", ["tenant", "at"])


def downgrade() -> None:
    """Drop ``audit_log`` and the new columns; watchlist names unique globally again (fails if
    two tenants hold the same name: rename one first)."""
    op.drop_index(op.f("ix_audit_log_tenant_at"), table_name="audit_log")
    op.drop_table("audit_log")
    with op.batch_alter_table("watchlists") as batch:
        batch.drop_constraint("uq_watchlists_tenant_name", type_="unique")
        batch.create_unique_constraint(op.f("uq_watchlists_name"), ["name"])
        batch.drop_column("tenant")
    with op.batch_alter_table("api_keys") as batch:
        batch.drop_column("scopes")
        batch.drop_column("tenant")
    with op.batch_alter_table("analyses") as batch:
        batch.drop_index(op.f("ix_analyses_api_key_id_status"))
        batch.drop_index(op.f("ix_analyses_tenant_created_at"))
        batch.drop_column("api_key_id")
        batch.drop_column("tenant")
