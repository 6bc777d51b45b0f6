"""Heartbeats of long-running service processes (``service_heartbeats``, migration 0015).

A process that must be running for the service to be safe, and whose failure no request would
notice (the recovery sweeper, ``apps.sweeper``), writes its row after each unit of work;
``GET /health`` reads the newest row of its kind and judges its age. One row per process
(``name`` = ``<kind>@<host>:<pid>``): a restarted process writes a new row, and rows older than
:data:`KEEP` are deleted by the next write of the same kind.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any, Final

import sqlalchemy as sa
from sqlalchemy import Engine

from db._sql import fetch_all, fetch_one, utc_now
from db.engine import begin_write
from db.models import SERVICE_HEARTBEATS

HEARTBEATS: Final = SERVICE_HEARTBEATS
#: ``kind`` of the workers' rows (``tasks.worker_heartbeat``: the tasks each worker holds).
WORKER_KIND: Final = "worker"
#: The row of a process that stopped beating is kept this long (who swept last, and when, after
#: an incident), then deleted by the next heartbeat of the same kind.
KEEP: Final = timedelta(days=7)


def beat(
    *,
    engine: Engine,
    kind: str,
    host: str,
    pid: int,
    started_at: datetime,
    detail: Mapping[str, Any],
    now: datetime | None = None,
) -> str:
    """Record that process ``pid`` on ``host`` (a ``kind`` such as ``sweeper``, started at
    ``started_at``) is alive at ``now`` (default: now, UTC) after the work ``detail`` describes
    (JSON-ready values). Updates its row, or inserts it on the first beat; deletes rows of the
    kind whose last beat is older than :data:`KEEP`. One transaction. Returns the row's name.

    Raises ``ValueError`` for an empty ``kind`` or ``host``, ``sqlalchemy.exc.OperationalError``
    when the database is unreachable.
    """
    if not kind or not host:
        raise ValueError("a heartbeat needs a kind and a host")
    now = now or utc_now()
    name = f"{kind}@{host}:{pid}"
    values = {"detail": dict(detail), "beat_at": now}
    with begin_write(engine) as conn:
        updated = conn.execute(sa.update(HEARTBEATS).where(HEARTBEATS.c.name == name).values(**values))
        if updated.rowcount == 0:
            conn.execute(
                sa.insert(HEARTBEATS).values(
                    name=name, kind=kind, host=host, pid=pid, started_at=started_at, **values
                )
            )
        conn.execute(
            sa.delete(HEARTBEATS).where(HEARTBEATS.c.kind == kind, HEARTBEATS.c.beat_at < now - KEEP)
        )
    return name


def latest(*, engine: Engine, kind: str) -> dict[str, Any] | None:
    """The newest heartbeat row of ``kind`` (every column; ``beat_at`` aware UTC), or ``None``
    when no process of the kind ever beat (within :data:`KEEP`)."""
    stmt = (
        sa.select(HEARTBEATS).where(HEARTBEATS.c.kind == kind).order_by(HEARTBEATS.c.beat_at.desc()).limit(1)
    )
    return fetch_one(engine, stmt)


def of_kind(*, engine: Engine, kind: str) -> list[dict[str, Any]]:
    """Every heartbeat row of ``kind`` (every column; ``beat_at`` aware UTC), newest first."""
    stmt = sa.select(HEARTBEATS).where(HEARTBEATS.c.kind == kind).order_by(HEARTBEATS.c.beat_at.desc())
    return fetch_all(engine, stmt)


def remove(*, engine: Engine, name: str) -> bool:
    """Delete the row ``name`` (a process that stops cleanly says so: it is not dead). Returns
    whether a row was deleted."""
    with begin_write(engine) as conn:
        return bool(conn.execute(sa.delete(HEARTBEATS).where(HEARTBEATS.c.name == name)).rowcount)
