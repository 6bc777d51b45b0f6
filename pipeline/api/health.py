"""``GET /health``: readiness of the gateway and of what it needs (database, broker, a worker
that consumes every queue and runs a task reaching the database, the recovery sweeper, no
stalled analysis). :func:`check_health` returns every check; the route answers 503 when one
fails. Celery's own probes: ``app.control.inspect().active_queues()`` (Celery docs,
"Workers Guide: Inspecting workers").
"""

from __future__ import annotations

import time
from typing import Any

import sqlalchemy as sa
from celery.exceptions import TimeoutError as CeleryTimeout

from core.settings import Settings
from core.stages import CONTROL_QUEUE, QUEUES
from db.engine import get_engine
from pipeline import producer
from pipeline.api.schemas import HealthOut
from pipeline.steps.recovery import stalled_beyond_grace
from pipeline.sweeper import sweeper_check


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
      sweep within two sweep intervals and a grace (``pipeline.sweeper.heartbeat_check``);
    * ``stalled``: no unfinished analysis is past its lease beyond two sweep intervals.
    """
    checks: dict[str, str] = {}
    try:
        with get_engine(settings.service.effective_database_url).connect() as conn:
            conn.execute(sa.text("SELECT 1"))
        checks["database"] = "ok"
    except Exception as exc:
        checks["database"] = f"unreachable: {type(exc).__name__}"
    # lazy: importing pipeline.celery_app builds the Celery app from the process settings; this
    # module reads no settings when imported (create_app does), so the app is built on first use
    from pipeline.celery_app import app as celery_app

    if settings.service.mode == "embedded":
        checks["broker"] = "ok (in-memory)"
        checks["worker"] = "ok (embedded)" if producer.embedded_worker_running() else "not started"
    else:
        try:
            with celery_app.connection_for_write() as conn:
                conn.ensure_connection(max_retries=1, timeout=settings.api.health_timeout)
            checks["broker"] = "ok"
        except Exception as exc:
            checks["broker"] = f"unreachable: {type(exc).__name__}"
        if checks["broker"] == "ok":
            checks.update(_worker_checks(celery_app, settings=settings))
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


def _worker_checks(celery_app: Any, *, settings: Settings) -> dict[str, str]:
    """The ``worker``, ``queues`` and ``consumption`` checks of :func:`check_health`."""

    checks: dict[str, str] = {}
    probe = None
    started = time.perf_counter()
    if settings.service.effective_result_backend:
        # sent first, so its round trip overlaps the broadcast's wait
        probe = celery_app.send_task("finagent.health.echo", expires=settings.api.health_timeout * 2)
    try:
        replies = _broadcast_active_queues(celery_app, timeout=settings.api.health_timeout)
    except Exception as exc:
        checks["worker"] = f"broadcast failed: {type(exc).__name__}"
        return checks
    if not replies:
        checks["worker"] = "no worker answered"
        return checks
    checks["worker"] = f"ok ({len(replies)} answered)"
    consumed = {q.get("name") for queues in replies.values() for q in queues or []}
    missing = [q for q in QUEUES if q not in consumed]
    checks["queues"] = (
        f"no worker consumes: {', '.join(missing)}" if missing else f"ok (all {len(QUEUES)} consumed)"
    )
    if probe is None:
        checks["consumption"] = "ok (not proven: no result backend for a round trip)"
    elif CONTROL_QUEUE not in consumed:
        checks["consumption"] = "unknown (no worker consumes the control queue)"
    else:
        remaining = max(0.1, settings.api.health_timeout - (time.perf_counter() - started))
        try:
            result = probe.get(timeout=remaining, disable_sync_subtasks=False)
            elapsed = (time.perf_counter() - started) * 1000
            checks["consumption"] = f"ok (echo task run by {result.get('hostname')} in {elapsed:.0f} ms)"
        except CeleryTimeout:
            checks["consumption"] = (
                f"no worker ran the echo task within {settings.api.health_timeout:g} s "
                "(workers answer broadcasts but do not take tasks, or their pool processes die)"
            )
        except Exception as exc:  # the task's own exception (it failed), or the backend's
            failed = _state(probe) == "FAILURE"
            checks["consumption"] = (
                f"the echo task failed in a worker ({type(exc).__name__}: {first_line(exc)}): "
                "its pool processes cannot run tasks"
                if failed
                else f"the echo task's result could not be read ({type(exc).__name__}: {first_line(exc)})"
            )
        finally:
            probe.forget()
    return checks


def _broadcast_active_queues(celery_app: Any, *, timeout: float) -> dict[str, Any]:
    """``inspect().active_queues()``, tried a second time on fresh connections when the first
    fails on a connection error: after the broker restarted, the process's pooled connections
    are stale (the first broadcast after a Redis restart failed with ``ConnectionError`` while
    the broker and the workers were back), and one failed request must not report an outage
    that is over. Raises the second attempt's error."""
    with celery_app.connection_for_write() as conn:  # not connected: only its transport's errors
        errors = (ConnectionError, OSError, *conn.recoverable_connection_errors, *conn.connection_errors)
    try:
        return celery_app.control.inspect(timeout=timeout).active_queues() or {}
    except errors:
        # a connection of its own (not the pool's), opened now; the stale pooled one reconnects
        # on its next use (redis-py does after a failed command)
        with celery_app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=timeout)
            return celery_app.control.inspect(timeout=timeout, connection=conn).active_queues() or {}


def _state(result: Any) -> str | None:
    """A Celery result's state as last read (``None`` when even that fails)."""
    try:
        return str(result.state)
    except Exception:  # the result backend is unreachable
        return None


def first_line(exc: BaseException, *, limit: int = 200) -> str:
    """The first line of ``exc``'s message, at most ``limit`` characters (a health check is one
    line; an ``ImportError`` of the database driver lists every attempt on its own line)."""
    lines = str(exc).strip().splitlines()
    return lines[0][:limit] if lines else ""
