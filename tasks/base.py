"""The Celery side of finagent's tasks: :func:`declare`, through which every task is declared,
and :class:`StageTask`, the base of the stage tasks (``tasks.stages``).

``declare`` fixes what every task shares: a route in ``tasks.app.TASK_QUEUES``
(checked at import), late acks unless a task says otherwise, no argument type checking by Celery
(messages are validated by pydantic at the boundary). ``StageTask`` is an adapter and nothing
more: it reads one delivery from Celery's request (task id, retries, the broker's redelivery
flag and scheme, rows carried by a retry), runs the step protocol
(``pipeline.steps.run.run_step``: claim, context, stage function, checkpoint, end of the pass),
and turns its two answers back into Celery's: ``DropMessage`` into ``Ignore`` (acked, the chain
not continued), ``RetryStep`` into ``task.retry`` (countdown and carried rows as the protocol
decided; :class:`StepTask`, which ``should_continue`` shares: one retry idiom). The protocol, its
retries and its recovery are described in docs/architecture.md, "The step protocol".

The two ways a step task ends without a result, Celery's ``Ignore`` (the message dropped) and
``Retry`` (the task runs again), are part of this adapter's interface and named here
(``tasks.base.Ignore``, ``tasks.base.Retry``): the code and the tests that check for them reach
them through the adapter, and only ``tasks/`` imports Celery.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from celery import Task
from celery.exceptions import Ignore, Retry

from core.settings import get_settings
from pipeline.stages.table import STAGE_FUNCTIONS
from pipeline.steps.backoff import RetryStep
from pipeline.steps.delivery import Delivery, DropMessage
from pipeline.steps.run import run_step
from tasks.app import TASK_QUEUES, app, progress_reporter

__all__ = ["Ignore", "Retry", "StageTask", "StepTask", "declare"]

_R = TypeVar("_R")


class StepTask(Task):
    """Base of every task that runs a step of the protocol (the stages, ``should_continue``):
    the one retry idiom. The step decides whether and when it runs again (it raises
    ``RetryStep`` with a countdown and what the retry carries, ``pipeline.steps.backoff``);
    :meth:`step` turns that into Celery's ``task.retry`` and ``DropMessage`` into ``Ignore``.
    No task uses Celery's ``autoretry_for``."""

    def step(self, run: Callable[[], _R]) -> _R:
        """``run()``, its protocol answers turned into Celery's.

        Raises:
            celery.exceptions.Ignore: the protocol dropped the message.
            celery.exceptions.Retry: the step runs again (``Task.retry``; past ``max_retries``
                Celery raises the step's error itself, and the chain fails).
        """
        try:
            return run()
        except DropMessage as drop:
            raise Ignore() from drop
        except RetryStep as retry:
            # Celery's retry raises Retry itself; ``raise`` keeps the flow plain where a test
            # double returns it instead
            raise self.retry(
                exc=retry.cause, countdown=retry.countdown, kwargs=retry.pending
            ) from retry.cause


class StageTask(StepTask):
    """Base of a stage's Celery task (``@app.task(base=StageTask, stage=<name>, ...)``, see
    ``tasks.stages``): :meth:`run_step` runs the stage ``stage`` (a row of ``core.stages``;
    its function is ``pipeline.stages.table.STAGE_FUNCTIONS[stage]``) for one delivery."""

    #: The stage this task runs; set per task by the declaration.
    stage: str = ""

    def run_step(
        self,
        payload: dict[str, Any],
        pending_rows: list[dict[str, Any]] | None = None,
        pending_llm_rows: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        """Run the step for the message being processed and return the new state (the next
        task's argument). ``pending_rows``/``pending_llm_rows``: rows of earlier attempts that
        the database could not take, carried by the retry message.

        Raises:
            celery.exceptions.Ignore: the protocol dropped the message.
            celery.exceptions.Retry: the step runs again (``Task.retry``; past ``max_retries``
                Celery raises the error itself, and the chain fails).
        """
        return self.step(
            lambda: run_step(
                payload,
                stage=self.stage,
                fn=STAGE_FUNCTIONS[self.stage],
                delivery=self.delivery(pending_rows=pending_rows, pending_llm_rows=pending_llm_rows),
                progress=progress_reporter(self, stage=self.stage, state=payload),  # Flower
                settings=get_settings(),  # the worker's settings, read once per process
            )
        )

    def delivery(
        self,
        *,
        pending_rows: list[dict[str, Any]] | None = None,
        pending_llm_rows: list[dict[str, Any]] | None = None,
    ) -> Delivery:
        """The delivery being processed, read from Celery's request (task id, retries, the
        ``delivery_info["redelivered"]`` flag) and the app's broker URL (its scheme)."""
        request = self.request
        return Delivery(
            task_id=str(request.id),
            retries=request.retries or 0,
            redelivered=(request.delivery_info or {}).get("redelivered"),
            broker_scheme=str(self.app.conf.broker_url or "").partition("://")[0].lower(),
            pending_rows=list(pending_rows or []),
            pending_llm_rows=list(pending_llm_rows or []),
        )


def declare(*, name: str, bind: bool = False, acks_late: bool = True, **options: Any) -> Callable[..., Task]:
    """Decorator declaring the Celery task ``name`` on the app: routed by ``TASK_QUEUES``,
    ``acks_late`` (default True: every task is idempotent), ``typing=False``; ``options`` are
    passed to ``app.task`` (``base``, ``max_retries``, time limits, ...; an option Celery does
    not know becomes an attribute of the task, as ``stage`` of a :class:`StageTask`).

    Raises:
        KeyError: ``name`` has no route in ``TASK_QUEUES`` (at import: a task without a queue
            would land on the default queue unnoticed).
    """
    if name not in TASK_QUEUES:
        raise KeyError(f"task {name!r} has no route in tasks.app.TASK_QUEUES")

    def decorator(fn: Callable[..., Any]) -> Task:
        task: Task = app.task(name=name, bind=bind, acks_late=acks_late, typing=False, **options)(fn)
        return task

    return decorator
