"""llm_calls: one row per LLM call attempt (LLM agents through LiteLLM)

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22

Same conventions as tool_calls: deterministic text ids (a redelivered task inserts nothing new),
JSON with a JSONB variant, UTC timestamps. ``cost_usd`` is NULL when the model's price is
unknown (local models), never a guess.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0002"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
UTC_DATETIME = sa.DateTime(timezone=True)


def upgrade() -> None:
    """Create ``llm_calls`` and its indexes."""
    op.create_table(
        "llm_calls",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("llm_call_id", sa.String(), nullable=False),
        sa.Column("analysis_id", sa.String(), nullable=True),
        sa.Column("stage", sa.String(), nullable=False),
        sa.Column("agent", sa.String(), nullable=False),
        sa.Column("iteration", sa.Integer(), nullable=False),
        sa.Column("celery_task_id", sa.String(), nullable=True),
        sa.Column("timestamp", UTC_DATETIME, nullable=False),
        sa.Column("level", sa.String(), nullable=False),
        sa.Column("model", sa.String(), nullable=False),
        sa.Column("provider", sa.String(), nullable=True),
        sa.Column("status", sa.String(), nullable=False),
        sa.Column("attempt", sa.Integer(), nullable=False),
        sa.Column("prompt_tokens", sa.Integer(), nullable=True),
        sa.Column("completion_tokens", sa.Integer(), nullable=True),
        sa.Column("cost_usd", sa.Float(), nullable=True),
        sa.Column("latency_ms", sa.Float(), nullable=False),
        sa.Column("finish_reason", sa.String(), nullable=True),
        sa.Column("tool_calls_requested", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("request", JSON, nullable=True),
        sa.Column("response", JSON, nullable=True),
        sa.CheckConstraint("attempt >= 1", name=op.f("ck_llm_calls_attempt")),
        sa.CheckConstraint("level IN ('INFO', 'WARNING', 'ERROR')", name=op.f("ck_llm_calls_level")),
        sa.CheckConstraint("status IN ('success', 'error')", name=op.f("ck_llm_calls_status")),
        sa.ForeignKeyConstraint(
            ["analysis_id"],
            ["analyses.id"],
            name=op.f("fk_llm_calls_analysis_id_analyses"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_llm_calls")),
    )
    op.create_index(op.f("ix_llm_calls_analysis_id"), "llm_calls", ["analysis_id"])
    op.create_index(op.f("ix_llm_calls_llm_call_id"), "llm_calls", ["llm_call_id"])


def downgrade() -> None:
    """Drop ``llm_calls``."""
    op.drop_index(op.f("ix_llm_calls_llm_call_id"), table_name="llm_calls")
    op.drop_index(op.f("ix_llm_calls_analysis_id"), table_name="llm_calls")
    op.drop_table("llm_calls")
