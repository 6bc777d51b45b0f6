"""replay and the LLM response cache: full LLM answers, request hashes, tool citations, llm_cache

Revision ID: 0012
Revises: 0008
Create Date: 2026-11-23

``finagent replay`` re-runs an analysis from its rows alone, so the rows must hold everything a
stage received: ``tool_calls.source_refs`` (a tool's own extra citations, part of its
envelope), ``llm_calls.completion`` (the whole successful answer: content, tool calls with
their provider ids, tokens; ``response`` keeps only a bounded preview), ``llm_calls.request_hash``
(what was asked, to tell a changed prompt from a changed answer) and ``llm_calls.cached``
(served by the response cache: no tokens spent). ``llm_cache`` is that opt-in cache.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects.postgresql import JSONB

revision: str = "0012"
down_revision: str | Sequence[str] | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON_TYPE = sa.JSON().with_variant(JSONB(), "postgresql")


def upgrade() -> None:
    """Add the four columns and the ``llm_cache`` table."""
    with op.batch_alter_table("tool_calls") as batch:
        batch.add_column(sa.Column("source_refs", JSON_TYPE, nullable=True))
    with op.batch_alter_table("llm_calls") as batch:
        batch.add_column(sa.Column("request_hash", sa.String(), nullable=True))
        batch.add_column(sa.Column("completion", JSON_TYPE, nullable=True))
        batch.add_column(sa.Column("cached", sa.Boolean(), server_default=sa.false(), nullable=False))
    op.create_table(
        "llm_cache",
        sa.Column("key", sa.String(), nullable=False),
        sa.Column("model", sa.String(), nullable=False),
        sa.Column("completion", JSON_TYPE, nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("hits", sa.Integer(), server_default="0", nullable=False),
        sa.PrimaryKeyConstraint("key", name=op.f("pk_llm_cache")),
    )


def downgrade() -> None:
    """Drop the table and the four columns."""
    op.drop_table("llm_cache")
    with op.batch_alter_table("llm_calls") as batch:
        batch.drop_column("cached")
        batch.drop_column("completion")
        batch.drop_column("request_hash")
    with op.batch_alter_table("tool_calls") as batch:
        batch.drop_column("source_refs")
