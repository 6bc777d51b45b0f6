"""Embedded mode: the same Celery chain consumed by a worker thread inside this process.

With no ``FINAGENT_SERVICE_BROKER_URL`` the app uses kombu's in-memory transport; this module starts a
solo-pool ``WorkController`` on every stage queue in a daemon thread, so ``finagent analyze``
works on a fresh machine with no servers (docs/design.md, "Optional services").
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from celery import Celery
from celery.worker import WorkController
from celery.worker import state as worker_state

from core.stages import QUEUES

START_TIMEOUT_S = 30.0  # consumer start on the memory transport takes well under a second
STOP_TIMEOUT_S = 30.0  # a running stage is bounded by task_time_limit; this covers a normal stop


class _EmbeddedWorker(WorkController):
    """A WorkController that signals when its consumer is ready, and skips the service
    worker's warm-up (``tasks.app``'s ``worker_init`` handler reads ``warm_up``)."""

    warm_up = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.ready = threading.Event()
        super().__init__(*args, **kwargs)

    def on_consumer_ready(self, consumer: Any) -> None:
        self.ready.set()


@contextmanager
def embedded_worker(app: Celery, *, graceful: bool = True) -> Iterator[WorkController]:
    """Run an in-process worker (solo pool, all stage queues) for the duration of the block.

    Args:
        app: the Celery app (kombu in-memory transport).
        graceful: on exit, wait for the worker thread to stop (about 3 s: the consumer finishes
            its drain cycles). ``False`` only asks it to stop and returns at once; the daemon
            thread ends with the process. The CLI uses ``False`` once its analysis has
            *finished* (``finished_at`` written), so no work is lost.
    Raises:
        RuntimeError: the worker did not start within ``START_TIMEOUT_S``.
    """
    app.finalize()
    app.set_current()
    # The worker thread resolves chain steps through the *default* app (thread-local current
    # app is per thread): without this, the next step goes to an unconfigured default broker.
    app.set_default()
    worker = _EmbeddedWorker(
        app=app,
        hostname=f"embedded-{threading.get_ident()}@{socket.gethostname()}",
        pool="solo",
        concurrency=1,
        queues=list(QUEUES),
        without_heartbeat=True,
        without_mingle=True,
        without_gossip=True,
        ready_callback=None,
        loglevel="WARNING",
    )
    thread = threading.Thread(target=worker.start, name="finagent-embedded-worker", daemon=True)
    thread.start()
    if not worker.ready.wait(START_TIMEOUT_S):
        raise RuntimeError("the embedded worker did not start")
    try:
        yield worker
    finally:
        worker_state.should_terminate = 0
        if graceful:
            thread.join(STOP_TIMEOUT_S)
            worker_state.should_terminate = None
