"""content_blobs: pieces of tool results stored once; tool_calls.result_refs

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-27

A backtest's ``get_history`` results are windows of the same bars a few days apart: the
``tool_calls`` rows repeated them once per analysis (~62 KB of JSON each). From this revision
the large lists of a result are cut into pieces (a month of bars), each stored once in
``content_blobs`` under the SHA-256 of its JSON text, and the row's ``result`` keeps the rest
with ``{"$concat": [hash, ...]}`` markers; ``result_refs`` lists the hashes (``db.blobs``).

Existing rows are not rewritten: their ``result_refs`` is NULL, which the repository reads as
"``result`` is the value itself", so they read exactly as before. ``body`` is plain ``json``
(written once, read whole, never searched inside, as ``tool_calls.result`` since 0014) and
lz4-compressed where the server can (as 0013).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0019"
down_revision: str | Sequence[str] | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def _lz4_available() -> bool:
    """As in migration 0013: PostgreSQL ≥ 14 built with lz4."""
    bind = op.get_bind()
    if bind.dialect.name != "postgresql":
        return False
    found = bind.execute(
        sa.text("SELECT enumvals FROM pg_settings WHERE name = 'default_toast_compression'")
    ).scalar()
    return "lz4" in (found or [])


def upgrade() -> None:
    """Create ``content_blobs`` and add the nullable ``tool_calls.result_refs``."""
    json_type = sa.JSON()
    refs_type = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
    op.create_table(
        "content_blobs",
        sa.Column("hash", sa.String(), nullable=False),
        sa.Column("body", json_type, nullable=False),
        sa.Column("bytes", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.PrimaryKeyConstraint("hash", name=op.f("pk_content_blobs")),
    )
    op.add_column("tool_calls", sa.Column("result_refs", refs_type, nullable=True))
    if _lz4_available():
        op.execute("ALTER TABLE content_blobs ALTER COLUMN body SET COMPRESSION lz4")


def downgrade() -> None:
    """Drop both (rows written with pieces then lose their lists: back up first)."""
    with op.batch_alter_table("tool_calls") as batch:
        batch.drop_column("result_refs")
    op.drop_table("content_blobs")
