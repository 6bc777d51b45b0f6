"""evaluation: backtests, backtest_items, recommendation_scores

Revision ID: 0008
Revises: 0007
Create Date: 2026-11-23

A backtest is a named grid of (symbol, trading day) analyses run through the normal pipeline;
its items record the analysis each grid point enqueued (``attempt`` counts re-enqueues of a
cancelled one) or why it was refused. ``recommendation_scores`` holds the forward outcome of a
finished recommendation at each horizon, keyed by ``(analysis_id, horizon)`` so scoring is
idempotent. Same conventions as 0001: text ids, JSON with a JSONB variant, UTC timestamps.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0008"
down_revision: str | Sequence[str] | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
UTC_DATETIME = sa.DateTime(timezone=True)


def upgrade() -> None:
    """Create the three evaluation tables."""
    op.create_table(
        "backtests",
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("symbols", JSON, nullable=False),
        sa.Column("start_date", sa.Date(), nullable=False),
        sa.Column("end_date", sa.Date(), nullable=False),
        sa.Column("every", sa.String(), nullable=False),
        sa.Column("analysis_type", sa.String(), nullable=False),
        sa.Column("created_at", UTC_DATETIME, server_default=sa.func.now(), nullable=False),
        sa.PrimaryKeyConstraint("name", name=op.f("pk_backtests")),
    )
    op.create_table(
        "backtest_items",
        sa.Column("backtest_name", sa.String(), nullable=False),
        sa.Column("symbol", sa.String(), nullable=False),
        sa.Column("as_of", sa.Date(), nullable=False),
        sa.Column("requested_date", sa.Date(), nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("attempt", sa.Integer(), server_default="0", nullable=False),
        sa.Column("analysis_id", sa.String(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.CheckConstraint("status IN ('enqueued', 'refused')", name=op.f("ck_backtest_items_status")),
        sa.ForeignKeyConstraint(
            ["backtest_name"],
            ["backtests.name"],
            name=op.f("fk_backtest_items_backtest_name_backtests"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("backtest_name", "symbol", "as_of", name=op.f("pk_backtest_items")),
    )
    op.create_index(op.f("ix_backtest_items_analysis_id"), "backtest_items", ["analysis_id"])
    op.create_table(
        "recommendation_scores",
        sa.Column("analysis_id", sa.String(), nullable=False),
        sa.Column("horizon", sa.Integer(), nullable=False),
        sa.Column("symbol", sa.String(), nullable=False),
        sa.Column("as_of", sa.Date(), nullable=False),
        sa.Column("end_date", sa.Date(), nullable=False),
        sa.Column("signal", sa.String(), nullable=False),
        sa.Column("confidence", sa.Float(), nullable=False),
        sa.Column("score", sa.Float(), nullable=True),
        sa.Column("forward_return", sa.Float(), nullable=False),
        sa.Column("benchmark_return", sa.Float(), nullable=False),
        sa.Column("excess_return", sa.Float(), nullable=False),
        sa.Column("benchmark", sa.String(), nullable=False),
        sa.Column("analyst", sa.String(), nullable=False),
        sa.Column("model", sa.String(), nullable=False),
        sa.Column("prompt_version", sa.String(), nullable=True),
        sa.Column("scored_at", UTC_DATETIME, nullable=False),
        sa.CheckConstraint("horizon > 0", name=op.f("ck_recommendation_scores_horizon")),
        sa.ForeignKeyConstraint(
            ["analysis_id"],
            ["analyses.id"],
            name=op.f("fk_recommendation_scores_analysis_id_analyses"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("analysis_id", "horizon", name=op.f("pk_recommendation_scores")),
    )


def downgrade() -> None:
    """Drop the three evaluation tables."""
    op.drop_table("recommendation_scores")
    op.drop_index(op.f("ix_backtest_items_analysis_id"), table_name="backtest_items")
    op.drop_table("backtest_items")
    op.drop_table("backtests")
