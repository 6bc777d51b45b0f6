"""initial schema: analyses, tool_calls, analysis_iterations

Revision ID: 0001
Revises:
Create Date: 2026-11-22

Portable across PostgreSQL and SQLite: JSON (JSONB on Postgres), timezone-aware timestamps
stored UTC, text ids. Must stay identical to ``db/models.py`` (checked by tests/db).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
UTC_DATETIME = sa.DateTime(timezone=True)


def upgrade() -> None:
    """Create the three tables and their indexes."""
    op.create_table(
        "analyses",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("symbol", sa.String(), nullable=False),
        sa.Column("as_of", sa.Date(), nullable=False),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("iteration", sa.Integer(), nullable=False),
        sa.Column("max_iterations", sa.Integer(), nullable=False),
        sa.Column("user_query", sa.Text(), nullable=False),
        sa.Column("state", JSON, nullable=False),
        sa.Column("report", sa.Text(), nullable=True),
        sa.Column("report_json", JSON, nullable=True),
        sa.Column("signal", sa.String(), nullable=True),
        sa.Column("confidence", sa.Float(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_at", UTC_DATETIME, server_default=sa.func.now(), nullable=False),
        sa.Column("updated_at", UTC_DATETIME, server_default=sa.func.now(), nullable=False),
        sa.Column("finished_at", UTC_DATETIME, nullable=True),
        sa.CheckConstraint(
            "status IN ('researching', 'analyzing', 'recommending', 'reviewing', 'done', 'failed')",
            name=op.f("ck_analyses_status"),
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_analyses")),
    )
    op.create_index(op.f("ix_analyses_status"), "analyses", ["status"])
    op.create_index(op.f("ix_analyses_symbol_created_at"), "analyses", ["symbol", "created_at"])

    op.create_table(
        "tool_calls",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("tool_call_id", sa.String(), nullable=False),
        sa.Column("analysis_id", sa.String(), nullable=True),
        sa.Column("stage", sa.String(), nullable=False),
        sa.Column("iteration", sa.Integer(), nullable=False),
        sa.Column("celery_task_id", sa.String(), nullable=True),
        sa.Column("timestamp", UTC_DATETIME, nullable=False),
        sa.Column("level", sa.String(), nullable=False),
        sa.Column("tool", sa.String(), nullable=False),
        sa.Column("symbol", sa.String(), nullable=True),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("latency_ms", sa.Float(), nullable=False),
        sa.Column("result_summary", sa.Text(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("error_code", sa.String(), nullable=True),
        sa.Column("retry_hint", sa.Text(), nullable=True),
        sa.Column("arguments", JSON, nullable=False),
        sa.Column("result", JSON, nullable=True),
        sa.CheckConstraint("attempt >= 1", name=op.f("ck_tool_calls_attempt")),
        sa.CheckConstraint("level IN ('INFO', 'WARNING', 'ERROR')", name=op.f("ck_tool_calls_level")),
        sa.CheckConstraint("status IN ('success', 'error')", name=op.f("ck_tool_calls_status")),
        sa.ForeignKeyConstraint(
            ["analysis_id"],
            ["analyses.id"],
            name=op.f("fk_tool_calls_analysis_id_analyses"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_tool_calls")),
    )
    op.create_index(op.f("ix_tool_calls_analysis_id"), "tool_calls", ["analysis_id"])
    op.create_index(op.f("ix_tool_calls_tool_call_id"), "tool_calls", ["tool_call_id"])

    op.create_table(
        "analysis_iterations",
        sa.Column("analysis_id", sa.String(), nullable=False),
        sa.Column("iteration", sa.Integer(), nullable=False),
        sa.Column("created_at", UTC_DATETIME, server_default=sa.func.now(), nullable=False),
        sa.Column("celery_task_id", sa.String(), nullable=True),
        sa.ForeignKeyConstraint(
            ["analysis_id"],
            ["analyses.id"],
            name=op.f("fk_analysis_iterations_analysis_id_analyses"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("analysis_id", "iteration", name=op.f("pk_analysis_iterations")),
    )


def downgrade() -> None:
    """Drop everything ``upgrade`` created (children first)."""
    op.drop_table("analysis_iterations")
    op.drop_index(op.f("ix_tool_calls_tool_call_id"), table_name="tool_calls")
    op.drop_index(op.f("ix_tool_calls_analysis_id"), table_name="tool_calls")
    op.drop_table("tool_calls")
    op.drop_index(op.f("ix_analyses_symbol_created_at"), table_name="analyses")
    op.drop_index(op.f("ix_analyses_status"), table_name="analyses")
    op.drop_table("analyses")
