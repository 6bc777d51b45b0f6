"""A worker's heartbeat: every ``worker_heartbeat_seconds`` the worker's main process writes its
``service_heartbeats`` row (kind :data:`KIND`) listing the Celery task ids it holds: received
and not finished (reserved, running, or waiting for a retry's countdown). The recovery sweeper
reads these rows (``apps.sweeper``): a worker silent for ``worker_dead_seconds`` that does
not answer a ping is dead, and the messages it held (kombu's ``unacked`` entries on a Redis
broker, which only its visibility timeout would otherwise return) are re-driven at once
(``pipeline.steps.recovery.redrive_orphaned``), instead of after the lease (Kubernetes' liveness
probes and Celery's own ``worker-heartbeat`` events work the same way: a missed beat, then a
check).

Why the database and a thread: the sweeper already reads the database, and the row says which
tasks the worker held at a known instant (``beat_at`` is the moment of the snapshot), which
Celery's events cannot say once the sweeper missed them. The write runs in a daemon thread of
the main process, not on the event loop: a slow or unreachable database must never hold the
worker's consumption. A clean stop deletes the row (the worker gave its messages back itself).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any, Final

from celery import bootsteps

from core.settings import get_settings
from db import heartbeat_repo
from db._sql import utc_now
from db.engine import get_engine

logger = logging.getLogger("finagent.recovery")

#: ``service_heartbeats.kind`` of the workers' rows.
KIND: Final = heartbeat_repo.WORKER_KIND

#: Held for the whole of each beat, and by every fork of this process (``os.register_at_fork``):
#: the prefork pool forks children while the heartbeat thread may be inside SQLAlchemy's pool or
#: the engine cache, and a child that inherits such a lock held deadlocks on its first use (seen:
#: every pool process of a worker stuck on a futex). So no fork happens mid-beat, and no beat
#: while a fork is under way.
_BEAT_LOCK = threading.Lock()


def _release_after_fork() -> None:
    if _BEAT_LOCK.locked():
        _BEAT_LOCK.release()


os.register_at_fork(
    before=_BEAT_LOCK.acquire, after_in_parent=_release_after_fork, after_in_child=_release_after_fork
)


def held_task_ids(worker: Any) -> set[str]:
    """The Celery task ids ``worker`` (a ``WorkController``) holds now: reserved and active
    requests (``celery.worker.state``) and requests waiting in its timer for their ETA (a
    retry's countdown), as ``celery inspect reserved/active/scheduled`` list them. Read from
    another thread: a set that changes while it is copied is read again."""
    from celery.worker import state as worker_state
    from celery.worker.request import Request

    for _ in range(20):
        try:
            ids = {r.id for r in list(worker_state.reserved_requests)}
            ids |= {r.id for r in list(worker_state.active_requests)}
            timer = getattr(worker, "timer", None)
            schedule = getattr(timer, "schedule", timer)
            for waiting in list(getattr(schedule, "_queue", None) or []):
                args = getattr(getattr(waiting, "entry", None), "args", None) or ()
                if args and isinstance(args[0], Request):
                    ids.add(args[0].id)
            return ids
        except RuntimeError:  # "Set changed size during iteration": the loop thread moved on
            time.sleep(0.001)
    raise RuntimeError("the worker's requests kept changing while being read")


class WorkerHeartbeat:
    """The heartbeat thread of one worker process (module docstring).

    Args:
        hostname: the worker's Celery node name (``celery@host``: the sweeper pings it).
        holdings: returns the task ids held now (:func:`held_task_ids`).
        interval: seconds between beats (``worker_heartbeat_seconds``).
        database_url: where the row goes.
    """

    def __init__(
        self, *, hostname: str, holdings: Callable[[], set[str]], interval: float, database_url: str
    ) -> None:
        """Nothing runs until :meth:`start`."""
        self.hostname = hostname
        self.holdings = holdings
        self.interval = interval
        self.database_url = database_url
        self.host = socket.gethostname()
        self.pid = os.getpid()
        self.started_at = utc_now()
        self.name = f"{KIND}@{self.host}:{self.pid}"
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._failing = False

    def beat(self) -> None:
        """Write one heartbeat: the held task ids as of now (``beat_at`` = the snapshot's time).
        Raises what the database raises."""
        with _BEAT_LOCK:  # no fork mid-beat (see _BEAT_LOCK)
            at = utc_now()
            tasks = sorted(self.holdings())
            heartbeat_repo.beat(
                engine=get_engine(self.database_url),
                kind=KIND,
                host=self.host,
                pid=self.pid,
                started_at=self.started_at,
                detail={"hostname": self.hostname, "tasks": tasks, "interval": self.interval},
                now=at,
            )

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.beat()
                if self._failing:
                    logger.info("worker heartbeat written again (%s)", self.name)
                self._failing = False
            except Exception as exc:  # the database is away: the row's age says so
                if not self._failing:
                    logger.warning("worker heartbeat not written: %s: %s", type(exc).__name__, exc)
                self._failing = True
            self._stop.wait(self.interval)

    def start(self) -> None:
        """Beat now and then every ``interval`` seconds in a daemon thread."""
        self._thread = threading.Thread(target=self._run, name="finagent-heartbeat", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop beating and delete the row: a worker that stops cleanly is not dead (it gave
        its unacknowledged messages back to the broker itself)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self.interval + 5)
        try:
            with _BEAT_LOCK:
                heartbeat_repo.remove(engine=get_engine(self.database_url), name=self.name)
        except Exception as exc:  # the sweeper will find a stale row and ping it: no answer, harmless
            logger.warning("worker heartbeat row not removed: %s: %s", type(exc).__name__, exc)


class HeartbeatStep(bootsteps.StartStopStep):
    """Worker bootstep (main process) running a :class:`WorkerHeartbeat` in service mode
    (embedded mode has no sweeper, and its worker is a thread of the producer)."""

    requires = ("celery.worker.components:Timer",)

    def __init__(self, parent: Any, **kwargs: Any) -> None:
        """Nothing runs before :meth:`start`."""
        super().__init__(parent, **kwargs)
        self.heartbeat: WorkerHeartbeat | None = None

    def start(self, parent: Any) -> None:
        """Start beating (service mode only)."""
        settings = get_settings()
        if settings.service.mode == "embedded":
            return
        self.heartbeat = WorkerHeartbeat(
            hostname=parent.hostname,
            holdings=lambda: held_task_ids(parent),
            interval=settings.durability.worker_heartbeat_seconds,
            database_url=settings.service.effective_database_url,
        )
        self.heartbeat.start()

    def stop(self, parent: Any) -> None:
        """Stop beating and remove the row."""
        if self.heartbeat is not None:
            self.heartbeat.stop()
            self.heartbeat = None

    def shutdown(self, parent: Any) -> None:
        """As :meth:`stop` (a cold shutdown calls this one)."""
        self.stop(parent)
