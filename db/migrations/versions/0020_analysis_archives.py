"""analysis_archives and compression_dictionaries: a finished analysis's record in one row

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-28

A finished analysis is ~35 KB of PostgreSQL in ``analyses`` (state, Markdown report, report
JSON) and ~11 ``tool_calls`` rows (ids, arguments, summaries, citations, results, three
indexes). ``finagent archive`` (``db.archive``) moves the record of analyses finished a while
ago into one ``analysis_archives`` row: a zstd frame of the whole record, compressed with a
dictionary trained on earlier records (``compression_dictionaries``), about 4 KB. The
``analyses`` row keeps its columns, with ``state``/``report_json`` reduced to the keys SQL
reads and ``archived_at`` set; the repository reads archived analyses whole again.

The pieces those records use are packed too: ``content_blobs.packed`` (zstd of the JSON text,
``body`` then NULL) and ``archived_until`` (the latest ``created_at`` of an archived analysis
using the piece, which tells retention whether a kept archive still needs it).

``body``/``packed`` are already compressed: ``STORAGE EXTERNAL`` stops PostgreSQL from trying
again.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0020"
down_revision: str | Sequence[str] | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Create both tables and add the nullable ``analyses.archived_at``."""
    op.create_table(
        "compression_dictionaries",
        sa.Column("id", sa.String(), nullable=False),
        sa.Column("body", sa.LargeBinary(), nullable=False),
        sa.Column("samples", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_compression_dictionaries")),
    )
    op.create_table(
        "analysis_archives",
        sa.Column("analysis_id", sa.String(), nullable=False),
        sa.Column("dictionary_id", sa.String(), nullable=True),
        sa.Column("body", sa.LargeBinary(), nullable=False),
        sa.Column("tool_calls", sa.Integer(), nullable=False),
        sa.Column("raw_bytes", sa.Integer(), nullable=False),
        sa.Column("archived_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False),
        sa.ForeignKeyConstraint(
            ["analysis_id"],
            ["analyses.id"],
            name=op.f("fk_analysis_archives_analysis_id_analyses"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["dictionary_id"],
            ["compression_dictionaries.id"],
            name=op.f("fk_analysis_archives_dictionary_id_compression_dictionaries"),
        ),
        sa.PrimaryKeyConstraint("analysis_id", name=op.f("pk_analysis_archives")),
    )
    op.add_column("analyses", sa.Column("archived_at", sa.DateTime(timezone=True), nullable=True))
    with op.batch_alter_table("content_blobs") as batch:
        batch.add_column(sa.Column("packed", sa.LargeBinary(), nullable=True))
        batch.add_column(sa.Column("archived_until", sa.DateTime(timezone=True), nullable=True))
        batch.alter_column("body", existing_type=sa.JSON(), nullable=True)
    if op.get_bind().dialect.name == "postgresql":
        op.execute("ALTER TABLE analysis_archives ALTER COLUMN body SET STORAGE EXTERNAL")
        op.execute("ALTER TABLE content_blobs ALTER COLUMN packed SET STORAGE EXTERNAL")


def downgrade() -> None:
    """Drop both tables and the columns (archived analyses lose their record and packed pieces
    their body: back up first)."""
    op.execute("DELETE FROM content_blobs WHERE body IS NULL")
    with op.batch_alter_table("content_blobs") as batch:
        batch.drop_column("archived_until")
        batch.drop_column("packed")
        batch.alter_column("body", existing_type=sa.JSON(), nullable=False)
    with op.batch_alter_table("analyses") as batch:
        batch.drop_column("archived_at")
    op.drop_table("analysis_archives")
    op.drop_table("compression_dictionaries")
