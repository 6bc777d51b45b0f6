"""``finagent.health.echo``: the task ``GET /health`` sends through the control queue to prove
that a worker takes tasks off the broker, not only that it answers control pings (workers have
stopped consuming after a Redis reconnect while still alive: celery#8030, #8082, #8091, #8990;
guide CELERY.md)."""

from __future__ import annotations

from datetime import UTC, datetime

from celery import Task

from tasks.factory import declare


@declare(name="finagent.health.echo", bind=True, acks_late=False)
def echo(self: Task) -> dict[str, str]:
    """Return ``{hostname, at}``: the worker that ran it and the UTC ISO 8601 time. No side
    effects; sent with ``expires`` so an unconsumed one is discarded instead of run late."""
    return {"hostname": str(self.request.hostname), "at": datetime.now(UTC).isoformat()}
