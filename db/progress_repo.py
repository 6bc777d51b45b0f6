"""Where analyses are, read from their rows: the recovery sweep's candidates and the counts
``GET /health`` reports. The writes of the same columns (claims, checkpoints, leases, takes) are
the moves of ``db.ledger``; what the columns mean is said there (docs/architecture.md,
"Durability").
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy import Engine

from db._sql import fetch_all, utc_now
from db.engine import reading
from db.ledger_sql import FINISHED, PROGRESS_COLUMNS, stalled_at
from db.repo import ANALYSES


def _progress(*where: sa.ColumnElement[bool]) -> sa.Select[Any]:
    return sa.select(*(ANALYSES.c[name] for name in PROGRESS_COLUMNS)).where(*where)


def stalled(*, engine: Engine, now: datetime | None = None, limit: int = 500) -> list[dict[str, Any]]:
    """Unfinished analyses whose lease expired before ``now`` (default: now), oldest lease
    first, at most ``limit``: the ``db.ledger.PROGRESS_COLUMNS`` of each. A row without a lease
    (written before migration 0006 and not backfilled) counts as expired."""
    stmt = (
        _progress(stalled_at(now or utc_now()))
        .order_by(ANALYSES.c.lease_expires_at.nulls_first(), ANALYSES.c.id)
        .limit(limit)
    )
    return fetch_all(engine, stmt)


def count_stalled(*, engine: Engine, before: datetime) -> int:
    """How many unfinished analyses have a lease that expired before ``before`` (``/health``)."""
    stmt = sa.select(sa.func.count()).where(stalled_at(before))
    with reading(engine) as conn:
        return int(conn.execute(stmt).scalar_one())


def unfinished(*, engine: Engine, limit: int = 5000) -> list[dict[str, Any]]:
    """Every unfinished analysis, whatever its lease: the ``PROGRESS_COLUMNS`` of each, oldest
    ``updated_at`` first, at most ``limit`` (the recovery sweep's candidates after the broker
    lost its messages, ``pipeline.steps.recovery.redrive_lost``)."""
    stmt = (
        _progress(ANALYSES.c.status.not_in(sorted(FINISHED)))
        .order_by(ANALYSES.c.updated_at, ANALYSES.c.id)
        .limit(limit)
    )
    return fetch_all(engine, stmt)


def progress_rows(*, engine: Engine, analysis_ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """``{id: PROGRESS_COLUMNS}`` of the analyses ``analysis_ids`` that exist (finished or not)."""
    if not analysis_ids:
        return {}
    return {row["id"]: row for row in fetch_all(engine, _progress(ANALYSES.c.id.in_(list(analysis_ids))))}
