"""trading: accounts, positions, orders, fills, events

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-22

The paper broker and ``log_event``. Same conventions as 0001: text ids, JSON with
a JSONB variant, UTC timestamps, USD amounts as floats. Exactly-once order effects come from the
unique ``(account_id, client_order_id)`` of ``orders``.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0004"
down_revision: str | Sequence[str] | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
UTC_DATETIME = sa.DateTime(timezone=True)


def upgrade() -> None:
    """Create the five trading tables and their indexes."""
    op.create_table(
        "accounts",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("user_id", sa.String(), nullable=False),
        sa.Column("cash", sa.Float(), nullable=False),
        sa.Column("currency", sa.String(), server_default="USD", nullable=False),
        sa.Column("created_at", UTC_DATETIME, server_default=sa.func.now(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_accounts")),
        sa.UniqueConstraint("user_id", name=op.f("uq_accounts_user_id")),
    )
    op.create_table(
        "positions",
        sa.Column("account_id", sa.String(), nullable=False),
        sa.Column("symbol", sa.String(), nullable=False),
        sa.Column("quantity", sa.Integer(), nullable=False),
        sa.Column("avg_price", sa.Float(), nullable=False),
        sa.Column("updated_at", UTC_DATETIME, server_default=sa.func.now(), nullable=False),
        sa.CheckConstraint("quantity > 0", name=op.f("ck_positions_quantity")),
        sa.ForeignKeyConstraint(
            ["account_id"], ["accounts.id"], name=op.f("fk_positions_account_id_accounts"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("account_id", "symbol", name=op.f("pk_positions")),
    )
    op.create_table(
        "orders",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("account_id", sa.String(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("client_order_id", sa.String(), nullable=True),
        sa.Column("symbol", sa.String(), nullable=False),
        sa.Column("action", sa.String(), nullable=False),
        sa.Column("quantity", sa.Integer(), nullable=False),
        sa.Column("filled_quantity", sa.Integer(), nullable=False),
        sa.Column("order_type", sa.String(), nullable=False),
        sa.Column("limit_price", sa.Float(), nullable=True),
        sa.Column("stop_price", sa.Float(), nullable=True),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("created_at", UTC_DATETIME, server_default=sa.func.now(), nullable=False),
        sa.Column("as_of", sa.Date(), nullable=False),
        sa.CheckConstraint("action IN ('buy', 'sell')", name=op.f("ck_orders_action")),
        sa.CheckConstraint("order_type IN ('market', 'limit', 'stop')", name=op.f("ck_orders_order_type")),
        sa.CheckConstraint("status IN ('filled', 'partial', 'rejected')", name=op.f("ck_orders_status")),
        sa.CheckConstraint("quantity > 0", name=op.f("ck_orders_quantity")),
        sa.ForeignKeyConstraint(
            ["account_id"], ["accounts.id"], name=op.f("fk_orders_account_id_accounts"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_orders")),
        sa.UniqueConstraint(
            "account_id", "client_order_id", name=op.f("uq_orders_account_id_client_order_id")
        ),
        sa.UniqueConstraint("account_id", "seq", name=op.f("uq_orders_account_id_seq")),
    )
    op.create_index(op.f("ix_orders_account_id"), "orders", ["account_id"])
    op.create_table(
        "fills",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("order_id", sa.String(), nullable=False),
        sa.Column("quantity", sa.Integer(), nullable=False),
        sa.Column("price", sa.Float(), nullable=False),
        sa.Column("fees", sa.Float(), nullable=False),
        sa.Column("timestamp", UTC_DATETIME, nullable=False),
        sa.CheckConstraint("quantity > 0", name=op.f("ck_fills_quantity")),
        sa.ForeignKeyConstraint(
            ["order_id"], ["orders.id"], name=op.f("fk_fills_order_id_orders"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_fills")),
    )
    op.create_index(op.f("ix_fills_order_id"), "fills", ["order_id"])
    op.create_table(
        "events",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("event_type", sa.String(), nullable=False),
        sa.Column("severity", sa.String(), nullable=False),
        sa.Column("data", JSON, nullable=False),
        sa.Column("analysis_id", sa.String(), nullable=True),
        sa.Column("created_at", UTC_DATETIME, server_default=sa.func.now(), nullable=False),
        sa.CheckConstraint(
            "event_type IN ('signal', 'suggestion', 'trade', 'error', 'alert')",
            name=op.f("ck_events_event_type"),
        ),
        sa.CheckConstraint(
            "severity IN ('low', 'medium', 'high', 'critical')", name=op.f("ck_events_severity")
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_events")),
    )
    op.create_index(op.f("ix_events_analysis_id"), "events", ["analysis_id"])


def downgrade() -> None:
    """Drop the trading tables."""
    op.drop_index(op.f("ix_events_analysis_id"), table_name="events")
    op.drop_table("events")
    op.drop_index(op.f("ix_fills_order_id"), table_name="fills")
    op.drop_table("fills")
    op.drop_index(op.f("ix_orders_account_id"), table_name="orders")
    op.drop_table("orders")
    op.drop_table("positions")
    op.drop_table("accounts")
