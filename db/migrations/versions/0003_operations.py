"""operations: api_keys, idempotency_keys, watchlists, watchlist_runs, watchlist_run_items

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23

Producers and operations. Same conventions as 0001: text ids, JSON with a JSONB
variant, UTC timestamps. Exactly-once effects come from keys here: ``idempotency_keys``
(api key, Idempotency-Key) and ``watchlist_runs`` (watchlist, run_date) are unique.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
UTC_DATETIME = sa.DateTime(timezone=True)


def upgrade() -> None:
    """Create the five operations tables."""
    op.create_table(
        "api_keys",
        sa.Column("key_id", sa.String(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("key_hash", sa.String(), nullable=False),
        sa.Column("created_at", UTC_DATETIME, server_default=sa.func.now(), nullable=False),
        sa.Column("revoked_at", UTC_DATETIME, nullable=True),
        sa.PrimaryKeyConstraint("key_id", name=op.f("pk_api_keys")),
        sa.UniqueConstraint("name", name=op.f("uq_api_keys_name")),
    )
    op.create_table(
        "idempotency_keys",
        sa.Column("api_key_id", sa.String(), nullable=False),
        sa.Column("key", sa.String(), nullable=False),
        sa.Column("request_hash", sa.String(), nullable=False),
        sa.Column("analysis_id", sa.String(), nullable=False),
        sa.Column("created_at", UTC_DATETIME, server_default=sa.func.now(), nullable=False),
        sa.PrimaryKeyConstraint("api_key_id", "key", name=op.f("pk_idempotency_keys")),
    )
    op.create_table(
        "watchlists",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("tickers", JSON, nullable=False),
        sa.Column("schedule", sa.String(), nullable=False),
        sa.Column("timezone", sa.String(), nullable=False),
        sa.Column("options", JSON, nullable=False),
        sa.Column("enabled", sa.Boolean(), server_default=sa.true(), nullable=False),
        sa.Column("created_at", UTC_DATETIME, server_default=sa.func.now(), nullable=False),
        sa.Column("updated_at", UTC_DATETIME, server_default=sa.func.now(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_watchlists")),
        sa.UniqueConstraint("name", name=op.f("uq_watchlists_name")),
    )
    op.create_table(
        "watchlist_runs",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("watchlist_id", sa.String(), nullable=False),
        sa.Column("run_date", sa.Date(), nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("trigger", sa.String(), nullable=False),
        sa.Column("created_at", UTC_DATETIME, server_default=sa.func.now(), nullable=False),
        sa.Column("finished_at", UTC_DATETIME, nullable=True),
        sa.Column("digest_markdown", sa.Text(), nullable=True),
        sa.Column("digest_html", sa.Text(), nullable=True),
        sa.Column("digest_json", JSON, nullable=True),
        sa.CheckConstraint("status IN ('running', 'done')", name=op.f("ck_watchlist_runs_status")),
        sa.ForeignKeyConstraint(
            ["watchlist_id"],
            ["watchlists.id"],
            name=op.f("fk_watchlist_runs_watchlist_id_watchlists"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_watchlist_runs")),
        sa.UniqueConstraint("watchlist_id", "run_date", name=op.f("uq_watchlist_runs_watchlist_id_run_date")),
    )
    op.create_table(
        "watchlist_run_items",
        sa.Column("run_id", sa.String(), nullable=False),
        sa.Column("symbol", sa.String(), nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("analysis_id", sa.String(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.CheckConstraint(
            "status IN ('enqueued', 'refused')", name=op.f("ck_watchlist_run_items_status")
        ),
        sa.ForeignKeyConstraint(
            ["run_id"],
            ["watchlist_runs.id"],
            name=op.f("fk_watchlist_run_items_run_id_watchlist_runs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("run_id", "symbol", name=op.f("pk_watchlist_run_items")),
    )


def downgrade() -> None:
    """Drop the operations tables."""
    op.drop_table("watchlist_run_items")
    op.drop_table("watchlist_runs")
    op.drop_table("watchlists")
    op.drop_table("idempotency_keys")
    op.drop_table("api_keys")
