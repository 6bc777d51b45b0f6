"""``finagent.health.echo``: the task ``GET /health`` sends through the control queue to prove
that a worker takes tasks off the broker, not only that it answers control pings (workers have
stopped consuming after a Redis reconnect while still alive: celery#8030, #8082, #8091, #8990;
docs/design.md, "Celery configuration"), and that its pool process can reach the database,
which every stage needs (a worker starved of memory answered pings while its pool processes
failed to load the database driver)."""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa
from celery import Task

from core.settings import get_settings
from db.engine import get_engine, reading
from tasks.base import declare


@declare(name="finagent.health.echo", bind=True, acks_late=False)
def echo(self: Task) -> dict[str, str]:
    """Run ``SELECT 1`` on the worker's database engine and return ``{hostname, at}``: the
    worker that ran it and the UTC ISO 8601 time. No side effects; sent with ``expires`` so an
    unconsumed one is discarded instead of run late. Raises what the database connection
    raises (``GET /health`` reports it)."""
    # a read connection (autocommit on PostgreSQL): a rolled-back transaction at checkin would
    # drop the pooled connection's prepared statements, which the stages' claims reuse
    with reading(get_engine(get_settings().service.effective_database_url)) as conn:
        conn.execute(sa.text("SELECT 1"))
    return {"hostname": str(self.request.hostname), "at": datetime.now(UTC).isoformat()}
