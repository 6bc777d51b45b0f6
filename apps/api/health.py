"""``GET /health``: readiness of the gateway and of what it needs (database, broker, a worker
that consumes every queue and runs a task reaching the database, the recovery sweeper, no
stalled analysis). :func:`check_health` returns every check; the route answers 503 when one
fails. The broker and worker probes are the task queue's (``pipeline.taskqueue``; with Celery,
``tasks.queue.worker_checks``: ``app.control.inspect().active_queues()``, Celery docs "Workers
Guide: Inspecting workers").
"""

from __future__ import annotations

import sqlalchemy as sa

from apps.api.schemas import HealthOut
from apps.sweeper import sweeper_check
from core.settings import Settings
from db.engine import get_engine
from pipeline import producer, taskqueue
from pipeline.steps.recovery import stalled_beyond_grace


def check_health(*, settings: Settings) -> HealthOut:
    """Database (``SELECT 1``), broker (a connection), then in service mode, all within about
    ``health_timeout`` s:

    * ``worker``: workers answering a control broadcast (``inspect().active_queues()``);
    * ``queues``: every queue of ``core.stages.QUEUES`` has a consumer;
    * ``consumption``: a ``finagent.health.echo`` task sent through the control queue comes
      back: proof that a worker takes tasks off the broker and that its pool process can reach
      the database (the echo runs ``SELECT 1``), not only that it is alive; a
      worker whose processes fail (out of memory, no database driver) fails the check with the
      error. Without a result backend the round trip is impossible; the check says so.

    ``queues`` and ``consumption`` appear only when a worker answered. A worker busy with long
    stages still answers: the control queue carries only cheap tasks.

    Whatever the workers' state, when the database answers:

    * ``sweeper``: the recovery sweeper (``finagent sweeper``) wrote a heartbeat after a
      sweep within two sweep intervals and a grace (``apps.sweeper.heartbeat_check``);
    * ``stalled``: no unfinished analysis is past its lease beyond two sweep intervals.
    """
    checks: dict[str, str] = {}
    try:
        with get_engine(settings.service.effective_database_url).connect() as conn:
            conn.execute(sa.text("SELECT 1"))
        checks["database"] = "ok"
    except Exception as exc:
        checks["database"] = f"unreachable: {type(exc).__name__}"
    # the task queue builds its app from the process settings when first asked; this module
    # reads no settings when imported (create_app does)
    queue = taskqueue.get()
    if settings.service.mode == "embedded":
        checks["broker"] = "ok (in-memory)"
        checks["worker"] = "ok (embedded)" if producer.embedded_worker_running() else "not started"
    else:
        try:
            queue.broker_check(timeout=settings.api.health_timeout)
            checks["broker"] = "ok"
        except Exception as exc:
            checks["broker"] = f"unreachable: {type(exc).__name__}"
        if checks["broker"] == "ok":
            checks.update(queue.worker_checks(settings=settings))
        else:
            checks["worker"] = "unknown (broker unreachable)"
    if checks["database"] == "ok":
        checks["sweeper"] = sweeper_check(settings=settings)
        checks["stalled"] = _stalled_check(settings=settings)
    failing = [name for name, value in checks.items() if not value.startswith("ok")]
    return HealthOut(
        status="unavailable" if failing else "ok", mode=settings.service.mode, checks=checks, failing=failing
    )


def _stalled_check(*, settings: Settings) -> str:
    """The ``stalled`` check: no unfinished analysis is past its lease by more than two sweep
    intervals (the recovery sweeper should have re-driven or failed it by then)."""
    try:
        stuck = stalled_beyond_grace(settings=settings)
    except sa.exc.SQLAlchemyError as exc:  # a database without migration 0006 yet
        return f"unknown: {type(exc).__name__}"
    if stuck:
        return (
            f"{stuck} analyses past their lease and not recovered (is `finagent sweeper` running? "
            "`finagent recover` re-drives them by hand)"
        )
    return "ok (none past its lease)"


def first_line(exc: BaseException, *, limit: int = 200) -> str:
    """The first line of ``exc``'s message, at most ``limit`` characters (a health check is one
    line; an ``ImportError`` of the database driver lists every attempt on its own line)."""
    lines = str(exc).strip().splitlines()
    return lines[0][:limit] if lines else ""
