"""The task queue of ``pipeline.taskqueue`` made of Celery and kombu: :class:`CeleryQueue`.

The Celery app (``tasks.app``) is imported when a method first needs it, so a command that only
classifies an error (``publish_errors``) loads kombu's exceptions and nothing else.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from core.settings import Settings
from core.stages import CONTROL_QUEUE, QUEUES
from core.state import FinancialAgentState
from pipeline.taskqueue import CronSpec, Handoff

logger = logging.getLogger("finagent.recovery")


class CeleryQueue:
    """:class:`pipeline.taskqueue.TaskQueue` on the process's Celery app (``tasks.app.app``)."""

    @property
    def app(self) -> Any:
        """The Celery app (built from the process settings when first imported)."""
        from tasks.app import app

        return app

    def publish_errors(self) -> tuple[type[Exception], ...]:
        """kombu's ``BatchPublishError`` (a bulk enqueue's Redis pipeline failed) and
        ``OperationalError`` (a connection that failed after Celery's retries)."""
        from kombu.exceptions import BatchPublishError, OperationalError

        return (BatchPublishError, OperationalError)

    def connection_errors(self) -> tuple[type[Exception], ...]:
        """kombu's ``OperationalError``, in which it wraps the broker's connection errors."""
        from kombu.exceptions import OperationalError

        return (OperationalError,)

    def chain(self, state: FinancialAgentState, *, start: str | None = None) -> Handoff:
        """``tasks.chain.build_chain(state, start=start)``."""
        from tasks.chain import build_chain

        return build_chain(state, start=start)

    def send_chains(self, chains: Sequence[Handoff]) -> None:
        """``tasks.app.send_chains``: one producer, the broker's confirms awaited once."""
        from tasks.app import send_chains

        send_chains(chains)

    def send_task(self, name: str, *, args: Sequence[Any] = (), **options: Any) -> Any:
        """``app.send_task(name, args=args, **options)``: Celery's ``AsyncResult``."""
        return self.app.send_task(name, args=tuple(args), **options)

    def queue_depths(self, queues: set[str]) -> dict[str, int]:
        """kombu's passive ``queue_declare`` per queue (``LLEN`` on Redis, the AMQP
        ``message_count`` on RabbitMQ). A queue that cannot be inspected counts as empty."""
        depths: dict[str, int] = {}
        try:
            with self.app.connection_for_write() as conn:
                for name in sorted(queues):
                    # a channel per queue: RabbitMQ closes the channel of a failed passive declare
                    channel = conn.channel()
                    try:
                        depths[name] = int(channel.queue_declare(queue=name, passive=True).message_count)
                    except Exception as exc:  # a queue never declared (RabbitMQ 404) is empty
                        logger.debug("queue %s: depth unknown (%s)", name, exc)
                        depths[name] = 0
                    finally:
                        try:
                            channel.close()
                        except Exception:  # already closed by the broker
                            logger.debug("queue %s: channel already closed", name)
        except Exception as exc:
            logger.warning("recovery sweep: queue depths unknown (%s: %s)", type(exc).__name__, exc)
        return depths

    def consumed_queues(self, queues: set[str], *, timeout: float = 1.0) -> set[str] | None:
        """Celery's control broadcast ``inspect().active_queues()`` (the probe ``GET /health``
        uses); ``None`` when the broadcast itself fails, an empty set when no worker answered."""
        try:
            replies = self.app.control.inspect(timeout=timeout).active_queues() or {}
        except Exception as exc:
            logger.warning("recovery sweep: consumers unknown (%s: %s)", type(exc).__name__, exc)
            return None
        served = {q.get("name") for found in replies.values() for q in found or []}
        return {q for q in queues if q in served}

    def ping(self, hostnames: list[str], *, timeout: float = 1.0) -> set[str]:
        """Celery's ``control.ping`` to ``hostnames``."""
        if not hostnames:
            return set()
        replies = self.app.control.ping(destination=hostnames, timeout=timeout) or []
        return {name for reply in replies for name in reply}

    @contextmanager
    def _redis_channel(self) -> Iterator[Any | None]:
        with self.app.connection_for_write() as conn:
            yield conn.default_channel if conn.transport.driver_type == "redis" else None

    def redis_channel(self) -> AbstractContextManager[Any | None]:
        """kombu's default channel of a write connection when the transport is Redis."""
        return self._redis_channel()

    def broker_check(self, *, timeout: float) -> None:
        """``ensure_connection`` on a write connection, one retry."""
        with self.app.connection_for_write() as conn:
            conn.ensure_connection(max_retries=1, timeout=timeout)

    def worker_checks(self, *, settings: Settings) -> dict[str, str]:
        """:func:`worker_checks` on the app."""
        return worker_checks(self.app, settings=settings)

    def probe(self, url: str, *, timeout: float) -> str:
        """A kombu ``Connection`` to ``url`` opened with one retry."""
        from kombu import Connection

        with Connection(url, connect_timeout=timeout) as conn:
            conn.ensure_connection(max_retries=1, timeout=timeout)
            return "AMQP connection opened"

    def embedded_worker(self, *, graceful: bool = True) -> AbstractContextManager[Any]:
        """``tasks.embedded.embedded_worker`` on the app."""
        from tasks.embedded import embedded_worker

        return embedded_worker(self.app, graceful=graceful)

    def start(self, argv: list[str]) -> int | None:
        """``app.start(argv=argv)`` (not ``worker_main``: that drops the worker's exit code,
        celery ``app/base.py``)."""
        code: int | None = self.app.start(argv=argv)
        return code

    def parse_cron(
        self, *, minute: str, hour: str, day_of_month: str, month: str, day_of_week: str
    ) -> CronSpec:
        """Celery's ``crontab`` of the five fields; its ``ParseException`` re-raised as
        ``ValueError`` with the same text."""
        from celery.schedules import ParseException, crontab

        try:
            spec: CronSpec = crontab(
                minute=minute,
                hour=hour,
                day_of_month=day_of_month,
                month_of_year=month,
                day_of_week=day_of_week,
            )
        except ParseException as exc:
            raise ValueError(str(exc)) from exc
        return spec


def worker_checks(celery_app: Any, *, settings: Settings) -> dict[str, str]:
    """The ``worker``, ``queues`` and ``consumption`` checks of ``GET /health``
    (``apps.api.health.check_health``): the workers that answer the control broadcast, the
    queues they consume, and an echo task (``tasks.health``) run within the health timeout."""
    from celery.exceptions import TimeoutError as CeleryTimeout

    from apps.api.health import first_line

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
