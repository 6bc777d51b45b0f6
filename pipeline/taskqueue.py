"""The task queue as the engine and the apps see it: a port, implemented with Celery in ``tasks/``.

Nothing in ``pipeline`` imports Celery or kombu (an import-linter contract, ``pyproject.toml``).
What the pipeline needs of the queue (hand an analysis's pass to the workers, send a task by name,
look into the broker for the recovery sweep, run a worker, beat or Flower process) it asks of the
:class:`TaskQueue` installed in the process. The composition roots install it: the ``finagent``
command (``tasks.main``), the worker's Celery app (``tasks.app``), the Python producer API
(``from tasks import enqueue_analysis``), and the test suite's ``conftest``: importing the
``tasks`` package installs the Celery one (``tasks.queue.CeleryQueue``). Nothing is installed by
default: :func:`get` raises :class:`NoTaskQueue` when no root did, so a process that forgot is
told so instead of sending to a broker nobody configured.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from core.settings import Settings
    from core.state import FinancialAgentState


class Handoff(Protocol):
    """The messages of one pass of an analysis, ready to be sent (a Celery chain)."""

    def apply_async(self) -> Any:
        """Send them; raises the transport's errors when the broker refuses or is away."""


class CronSpec(Protocol):
    """A parsed 5-field cron schedule: the sets of minutes, hours, days of the month, months and
    days of the week (0 = Sunday) at which it fires."""

    minute: set[int]
    hour: set[int]
    day_of_month: set[int]
    month_of_year: set[int]
    day_of_week: set[int]


class TaskQueue(Protocol):
    """What the pipeline asks of the task queue (see the module docstring)."""

    def publish_errors(self) -> tuple[type[Exception], ...]:
        """The errors of a publish the broker refused or lost (kombu's ``OperationalError`` and
        ``BatchPublishError``): infrastructure, not the caller's input."""

    def connection_errors(self) -> tuple[type[Exception], ...]:
        """The broker's connection errors as the queue library wraps them (kombu's
        ``OperationalError``)."""

    def chain(self, state: FinancialAgentState, *, start: str | None = None) -> Handoff:
        """The messages of one pass for ``state`` from stage ``start`` (default: the first;
        ``core.stages.END_OF_PASS``: the ``should_continue`` hand-off alone). Raises
        ``KeyError`` for an unknown ``start``."""

    def send_chains(self, chains: Sequence[Handoff]) -> None:
        """Send ``chains`` (a bulk enqueue's batch) through one producer; raises what
        publishing raises."""

    def send_task(self, name: str, *, args: Sequence[Any] = (), **options: Any) -> Any:
        """Send the task ``name`` with ``args`` and the publish ``options`` (``countdown``,
        ``expires``); returns the queue's handle of the message."""

    def queue_depths(self, queues: set[str]) -> dict[str, int]:
        """Messages ready in each of ``queues`` (a queue that cannot be inspected counts 0)."""

    def consumed_queues(self, queues: set[str], *, timeout: float = 1.0) -> set[str] | None:
        """Which of ``queues`` a live worker consumes; ``None`` when the broadcast failed."""

    def ping(self, hostnames: list[str], *, timeout: float = 1.0) -> set[str]:
        """Which of the workers ``hostnames`` answer a ping within ``timeout`` seconds."""

    def redis_channel(self) -> AbstractContextManager[Any | None]:
        """The broker's Redis channel (kombu's, for the recovery sweep's inventory) for the
        block, or ``None`` on another transport. Raises the transport's connection errors."""

    def broker_check(self, *, timeout: float) -> None:
        """Open a connection to the broker within ``timeout`` seconds; raises when it cannot."""

    def worker_checks(self, *, settings: Settings) -> dict[str, str]:
        """``GET /health``'s ``worker``, ``queues`` and ``consumption`` checks."""

    def probe(self, url: str, *, timeout: float) -> str:
        """Open (and close) a connection to the broker at ``url``; a short description of what
        answered. Raises the transport's errors."""

    def embedded_worker(self, *, graceful: bool = True) -> AbstractContextManager[Any]:
        """An in-process worker consuming every stage queue for the block (embedded mode)."""

    def start(self, argv: list[str]) -> int | None:
        """Run a queue process in the foreground (``worker``, ``beat``, ``flower`` and their
        options); its exit code."""

    def parse_cron(
        self, *, minute: str, hour: str, day_of_month: str, month: str, day_of_week: str
    ) -> CronSpec:
        """The cron schedule of the five fields. Raises ``ValueError`` for an invalid field."""


class NoTaskQueue(RuntimeError):
    """No task queue was installed in this process (see the module docstring)."""


_lock = threading.Lock()
_factory: Callable[[], TaskQueue] | None = None
_queue: TaskQueue | None = None


def install(factory: Callable[[], TaskQueue]) -> None:
    """Install the process's task queue: ``factory`` is called once, at the first :func:`get`
    (so a command that never reaches the queue never builds it). Installing again replaces it."""
    global _factory, _queue
    with _lock:
        _factory, _queue = factory, None


def installed() -> bool:
    """Whether a task queue was installed in this process."""
    return _factory is not None


def get() -> TaskQueue:
    """The installed task queue (built on first use).

    Raises:
        NoTaskQueue: nothing was installed (:func:`install`).
    """
    global _queue
    with _lock:
        if _queue is None:
            if _factory is None:
                raise NoTaskQueue(
                    "no task queue installed in this process: start it through `finagent`, "
                    "`celery -A tasks.app` or `from tasks import enqueue_analysis`"
                )
            _queue = _factory()
        return _queue
