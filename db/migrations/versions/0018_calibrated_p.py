"""recommendation_scores.p_outperform: the calibrated probability the recommendation stated

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-26

A recommendation now states p(outperform the benchmark) at each horizon
(``agents.quant.calibration``); its score row keeps that p beside the outcome, so the
scorecard's Brier score and calibration error measure the probability the report printed, not a
mapping of the raw confidence. NULL for rows of reports written before calibration.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018"
down_revision: str | Sequence[str] | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Add the nullable ``p_outperform`` column."""
    op.add_column("recommendation_scores", sa.Column("p_outperform", sa.Float(), nullable=True))


def downgrade() -> None:
    """Drop ``p_outperform``."""
    with op.batch_alter_table("recommendation_scores") as batch:
        batch.drop_column("p_outperform")
