"""The Celery tasks of the analysis pipeline: one per row of the stage table, plus the end of a
pass (``finagent.should_continue``) and the chain's error callback (``finagent.chain_failed``).
All are thin adapters (``tasks.factory``) over ``pipeline.stages``; the chain of one pass is
built by ``pipeline.chain.build_chain`` from task names.
"""

from __future__ import annotations

from typing import Any, Final

from celery import Task
from sqlalchemy.exc import OperationalError

from core.settings import get_settings
from core.stages import STAGES
from pipeline.chain import CHAIN_FAILED_TASK, SHOULD_CONTINUE_TASK
from pipeline.stages import control
from pipeline.stages.table import STAGE_FUNCTIONS
from tasks.factory import OUTAGE_BACKOFF_BASE, declare, stage_task

#: The stage tasks by stage name (``STAGE_TASKS["research"]`` is ``finagent.research``).
STAGE_TASKS: Final[dict[str, Task]] = {
    spec.name: stage_task(spec=spec, fn=STAGE_FUNCTIONS[spec.name]) for spec in STAGES
}


@declare(
    name=SHOULD_CONTINUE_TASK,
    bind=True,
    # a database outage: retry like the stages (the end of a pass is idempotent: the claim of
    # the next pass and the no-regress rule of the row); past the retries the recovery sweep
    # re-drives should_continue from the row's checkpoint
    autoretry_for=(OperationalError,),
    retry_backoff=OUTAGE_BACKOFF_BASE,
    retry_backoff_max=get_settings().durability.task_retry_backoff_max,
    max_retries=get_settings().durability.task_max_retries,
)
def should_continue_task(self: Task, payload: dict[str, Any]) -> dict[str, Any]:
    """End the analysis or re-enqueue its next pass (``pipeline.stages.control.end_of_pass``).
    Returns ``{decision, reason, analysis_id, iteration}``."""
    return control.end_of_pass(payload=payload, celery_task_id=self.request.id)


@declare(name=CHAIN_FAILED_TASK)
def chain_failed(request: Any, exc: BaseException, traceback: Any, analysis_id: str) -> None:
    """Error callback of a chain (Celery's ``(request, exc, traceback)`` errback form): mark the
    analysis failed with the failing task and error (``pipeline.stages.control.fail_chain``)."""
    control.fail_chain(
        analysis_id=analysis_id,
        task_name=str(getattr(request, "task", "a stage")),
        exc=exc,
        task_args=list(getattr(request, "args", None) or []),
    )
