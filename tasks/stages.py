"""The Celery tasks of the analysis pipeline: one per row of the stage table, plus the end of a
pass (``finagent.should_continue``) and the chain's error callback (``finagent.chain_failed``).
All are thin adapters over ``pipeline.steps`` (stages: ``tasks.base.StageTask``); the chain of
one pass is built by ``tasks.chain.build_chain`` from task names.
"""

from __future__ import annotations

from typing import Any, Final

from celery import Task

from core.settings import get_settings
from core.stages import STAGES, StageSpec
from pipeline.stages.table import STAGE_FUNCTIONS
from pipeline.steps import close
from tasks.base import StageTask, StepTask, declare
from tasks.chain import CHAIN_FAILED_TASK, SHOULD_CONTINUE_TASK


def _stage_task(spec: StageSpec) -> StageTask:
    """Declare the Celery task of stage ``spec`` (``finagent.<name>`` on the stage's queue) on
    :class:`~tasks.base.StageTask`.

    Raises:
        KeyError: the stage's task has no route (``tasks.base.declare``).
    """
    settings = get_settings()

    def run(
        self: StageTask,
        payload: dict[str, Any],
        pending_rows: list[dict[str, Any]] | None = None,
        pending_llm_rows: list[dict[str, Any]] | None = None,
    ) -> dict[str, Any]:
        return self.run_step(payload, pending_rows=pending_rows, pending_llm_rows=pending_llm_rows)

    run.__name__ = f"{spec.name}_task"
    run.__doc__ = (
        f"Celery adapter of the {spec.name} stage: "
        f"{(STAGE_FUNCTIONS[spec.name].__doc__ or '').strip().splitlines()[0]}"
    )
    task: StageTask = declare(
        name=spec.task_name,
        base=StageTask,
        bind=True,
        stage=spec.name,
        # The state a stage returns travels in the chain's next message and its checkpoint in
        # the analyses row; nobody reads it from the result backend. Storing it there (and the
        # STARTED state task_track_started adds) cost two Redis writes of the whole state per
        # stage: about 7 % of a worker's CPU per analysis (bench/pipeline_throughput.py).
        # Flower still sees every state change through the task events.
        ignore_result=True,
        max_retries=settings.durability.task_max_retries,
        soft_time_limit=settings.durability.task_soft_time_limit,
        time_limit=settings.durability.task_time_limit,
    )(run)
    return task


#: The stage tasks by stage name (``STAGE_TASKS["research"]`` is ``finagent.research``).
STAGE_TASKS: Final[dict[str, Task]] = {spec.name: _stage_task(spec) for spec in STAGES}


@declare(
    name=SHOULD_CONTINUE_TASK,
    bind=True,
    # a database outage retries as a stage's does (StepTask: the step raises RetryStep with the
    # outage countdown); past the retries the recovery sweep re-drives it from the checkpoint
    base=StepTask,
    max_retries=get_settings().durability.task_max_retries,
)
def should_continue_task(self: StepTask, payload: dict[str, Any]) -> dict[str, Any]:
    """End the analysis or re-enqueue its next pass (``pipeline.steps.close.should_continue_step``).
    Returns ``{decision, reason, analysis_id, iteration}``."""
    return self.step(
        lambda: close.should_continue_step(
            payload=payload,
            celery_task_id=self.request.id,
            retries=self.request.retries or 0,
            settings=get_settings(),
        )
    )


@declare(name=CHAIN_FAILED_TASK)
def chain_failed(request: Any, exc: BaseException, traceback: Any, analysis_id: str) -> None:
    """Error callback of a chain (Celery's ``(request, exc, traceback)`` errback form): mark the
    analysis failed with the failing task and error (``pipeline.steps.close.fail_chain``)."""
    close.fail_chain(
        analysis_id=analysis_id,
        task_name=str(getattr(request, "task", "a stage")),
        exc=exc,
        task_args=list(getattr(request, "args", None) or []),
        settings=get_settings(),
    )
