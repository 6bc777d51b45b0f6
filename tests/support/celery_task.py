"""A stand-in for a bound Celery task's request, for unit tests of the stage tasks' adapter
(``tasks.factory.run_stage``) without a broker; tests/integration and tests/fault run real
workers."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from celery.exceptions import Retry


class FakeTask:
    """Enough of a bound Celery task's request for ``factory.run_stage`` (no broker here: the
    adapter's database behaviour is under test; tests/integration runs real workers)."""

    def __init__(self, task_id: str = "task-1", *, allow_retry: bool = False) -> None:
        self.request = SimpleNamespace(id=task_id, retries=0, delivery_info={"redelivered": False})
        self.events: list[str] = []
        self.allow_retry = allow_retry
        self.retried: list[dict[str, Any]] = []

    def send_event(self, kind: str, **_: Any) -> None:
        self.events.append(kind)

    def retry(self, **kwargs: Any) -> BaseException:
        if not self.allow_retry:
            raise AssertionError(f"no stage should retry here: {kwargs.get('exc')!r}")
        self.retried.append(kwargs)
        return Retry(exc=kwargs.get("exc"), when=kwargs.get("countdown"))
