"""The Celery side of finagent: the only package that imports Celery and kombu.

Importing it installs the Celery task queue (:class:`tasks.queue.CeleryQueue`, built at its first
use) as the process's ``pipeline.taskqueue``: the ``finagent`` command (``tasks.main``), the
worker's app (``celery -A tasks.app``) and the Python producer API all pass through here.

Python producer API::

    from tasks import enqueue_analysis
    handle = enqueue_analysis("AAPL", as_of=date(2012, 6, 29))
    row = handle.wait(timeout=120)    # the analyses row, report included

``enqueue_analysis`` and ``AnalysisHandle`` are ``pipeline.producer``'s, loaded on first use so
``import tasks`` stays cheap (no pandas, no Celery).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pipeline import taskqueue

if TYPE_CHECKING:
    from pipeline.producer import AnalysisHandle, enqueue_analysis
    from pipeline.taskqueue import TaskQueue

__all__ = ["AnalysisHandle", "enqueue_analysis", "install"]


def _celery_queue() -> TaskQueue:
    from tasks.queue import CeleryQueue  # lazy: kombu and the Celery app load at first use

    return CeleryQueue()


def install() -> None:
    """Install the Celery task queue as the process's ``pipeline.taskqueue`` (done on import;
    call it again after a test installed another)."""
    taskqueue.install(_celery_queue)


def __getattr__(name: str) -> Any:
    """Load ``enqueue_analysis`` / ``AnalysisHandle`` from ``pipeline.producer`` on first use."""
    if name in ("AnalysisHandle", "enqueue_analysis"):
        from pipeline import producer  # lazy (see module docstring)

        return getattr(producer, name)
    raise AttributeError(f"module 'tasks' has no attribute {name!r}")


install()
