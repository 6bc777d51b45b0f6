"""console_sessions: a signed-in console session is a row, so it can end before its cookie does

Revision ID: 0021
Revises: 0020
Create Date: 2026-11-28

The console's cookie used to carry the signed-in key's id itself: a copied cookie kept working
after sign-out for the rest of its lifetime. Now the cookie carries a random session id, and the
session is this row (found by the id's SHA-256, so the table alone opens no session): the key
it signed in with, the scopes the key had then, its CSRF token, when it expires, when it was
last used. Sign-out, revoking the key and a change of the key's scopes end it.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0021"
down_revision: str | Sequence[str] | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Create ``console_sessions`` (indexed by key, for the revocation, and by expiry)."""
    op.create_table(
        "console_sessions",
        sa.Column("id_hash", sa.String(), nullable=False),
        sa.Column("key_id", sa.String(), nullable=False),
        sa.Column("scopes", sa.String(), nullable=False),
        sa.Column("csrf", sa.String(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("last_seen_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id_hash", name=op.f("pk_console_sessions")),
    )
    op.create_index(op.f("ix_console_sessions_key_id"), "console_sessions", ["key_id"])
    op.create_index(op.f("ix_console_sessions_expires_at"), "console_sessions", ["expires_at"])


def downgrade() -> None:
    """Drop the table (every console session ends; cookies then ask to sign in again)."""
    op.drop_index(op.f("ix_console_sessions_expires_at"), table_name="console_sessions")
    op.drop_index(op.f("ix_console_sessions_key_id"), table_name="console_sessions")
    op.drop_table("console_sessions")
