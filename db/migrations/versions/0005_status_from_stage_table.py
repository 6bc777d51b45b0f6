"""analyses.status: the stage table is the one list of statuses (drop the CHECK constraint)

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-23

The statuses an analysis may hold are one per stage of the pipeline plus ``done``/``failed``,
listed once in ``core.stages`` (the stage table). A CHECK constraint repeated that list
in the database, so adding a stage needed a migration of its own. The repository validates every
status it writes against the stage table (``db.repo.save_stage``/``create_analysis`` raise
``ValueError`` for anything else), which every writer goes through.
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0005"
down_revision: str | Sequence[str] | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_STATUSES_0001 = ("researching", "analyzing", "recommending", "reviewing", "done", "failed")


def upgrade() -> None:
    """Drop ``ck_analyses_status`` (SQLite: batch mode recreates the table)."""
    with op.batch_alter_table("analyses") as batch:
        batch.drop_constraint(op.f("ck_analyses_status"), type_="check")


def downgrade() -> None:
    """Restore the CHECK constraint of revision 0001."""
    with op.batch_alter_table("analyses") as batch:
        batch.create_check_constraint(
            "status", "status IN (" + ", ".join(repr(s) for s in _STATUSES_0001) + ")"
        )
