"""The stage table: the one place that says which stages a pass runs, in which order, on which
queue, and which status an analysis shows while a stage runs (research → analysis →
recommendation → review, then ``should_continue``).

Everything that used to list the stages reads this table: ``Status`` and the status rank (the
ledger's forward rule, ``db.ledger_sql``; :func:`check_status`), the Celery queues and routes
(``tasks.app``), the tasks (``tasks.stages``), the chain of one pass
(``tasks.chain.build_chain``) and the API's ``current_stage``. Adding a stage is a ``Status``
member and a row here, its module under ``pipeline/stages/``, and its function in
``pipeline.stages.STAGE_FUNCTIONS`` (docs/architecture.md).

Pure data: imports nothing of the project.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Final, Literal


class Status(StrEnum):
    """Pipeline status (docs/design.md, "Stages and statuses"; ``queued`` and ``failed`` included):
    ``queued`` until a worker starts the first stage, one "while running" status per stage of
    :data:`STAGES`, then the two terminal ones."""

    QUEUED = "queued"
    RESEARCHING = "researching"
    ANALYZING = "analyzing"
    RECOMMENDING = "recommending"
    REVIEWING = "reviewing"
    DONE = "done"
    FAILED = "failed"


#: Queue of the cheap bookkeeping tasks (should_continue, the chain's error callback, watchlist
#: ticks, the health echo): a queue of its own so they are never starved by stage work.
CONTROL_QUEUE: Final = "control"
#: Celery task names are ``finagent.<stage>``; Flower and the routes show these.
TASK_PREFIX: Final = "finagent."


#: The class of an analysis's work (docs/operations.md, "Interactive before batch"): a request a
#: person waits for (HTTP API, CLI, Python API) is ``interactive``; a backtest's grid point or a
#: watchlist run's ticker is ``batch``. It travels in the state, so every stage, retry, next pass
#: and re-drive of the analysis uses its class's queues.
Lane = Literal["interactive", "batch"]
INTERACTIVE: Final[Lane] = "interactive"
BATCH: Final[Lane] = "batch"
#: A stage's batch queue is its interactive queue's name plus this suffix (``research.batch``).
BATCH_SUFFIX: Final = ".batch"


@dataclass(frozen=True)
class StageSpec:
    """One stage of a pass.

    Attributes:
        name: the stage's name (``research``); also its ``tool_calls.stage`` and log field.
        status: the analysis status while this stage runs (``researching``).
        queue: the Celery queue its task consumes (one queue per stage, so each scales alone).
    """

    name: str
    status: Status
    queue: str

    @property
    def task_name(self) -> str:
        """The Celery task name, ``finagent.<name>``."""
        return f"{TASK_PREFIX}{self.name}"

    @property
    def batch_queue(self) -> str:
        """The queue of this stage's batch work (``research.batch``)."""
        return f"{self.queue}{BATCH_SUFFIX}"

    def queue_for(self, lane: Lane) -> str:
        """The queue this stage's task takes for an analysis of class ``lane``."""
        return self.batch_queue if lane == BATCH else self.queue


#: The stages of one pass, in order (docs/design.md, "Stages and statuses"). ``should_continue``
#: follows the last one.
STAGES: Final[tuple[StageSpec, ...]] = (
    StageSpec(name="research", status=Status.RESEARCHING, queue="research"),
    StageSpec(name="analysis", status=Status.ANALYZING, queue="analysis"),
    StageSpec(name="recommendation", status=Status.RECOMMENDING, queue="recommendation"),
    StageSpec(name="review", status=Status.REVIEWING, queue="review"),
)

TERMINAL_STATUSES: Final = frozenset({Status.DONE, Status.FAILED})

#: Every status an ``analyses`` row may hold, in pipeline order.
ANALYSIS_STATUSES: Final[tuple[str, ...]] = (
    Status.QUEUED.value,
    *(spec.status.value for spec in STAGES),
    Status.DONE.value,
    Status.FAILED.value,
)

#: Progress order of the statuses: ``queued`` first, then each stage's position, both terminal
#: statuses last. A row's ``(iteration, rank(status))`` only moves forward (``db.ledger``'s pass boundary).
STATUS_RANK: Final[dict[str, int]] = {
    Status.QUEUED.value: -1,
    **{spec.status.value: i for i, spec in enumerate(STAGES)},
    Status.DONE.value: len(STAGES),
    Status.FAILED.value: len(STAGES),
}

#: The step after the last stage of a pass (``should_continue``), as a checkpoint name.
END_OF_PASS: Final = "should_continue"  # noqa: S105  (a step name, not a secret)

#: The interactive stage queues in order, then control: what an ``--lane interactive`` worker
#: consumes (control is cheap bookkeeping every pool may take).
INTERACTIVE_QUEUES: Final[tuple[str, ...]] = (*(spec.queue for spec in STAGES), CONTROL_QUEUE)
#: The batch stage queues in order, then control.
BATCH_QUEUES: Final[tuple[str, ...]] = (*(spec.batch_queue for spec in STAGES), CONTROL_QUEUE)
#: Every queue a worker consumes by default: the interactive stage queues, the batch stage
#: queues, then control. A worker polls them in turn (docs/operations.md, "Interactive before
#: batch"), so interactive work never waits behind the batch backlog.
QUEUES: Final[tuple[str, ...]] = (
    *(spec.queue for spec in STAGES),
    *(spec.batch_queue for spec in STAGES),
    CONTROL_QUEUE,
)
#: The queues of each lane (``finagent worker --lane``).
LANE_QUEUES: Final[dict[str, tuple[str, ...]]] = {
    INTERACTIVE: INTERACTIVE_QUEUES,
    BATCH: BATCH_QUEUES,
    "both": QUEUES,
}

_BY_NAME: Final = {spec.name: spec for spec in STAGES}
_BY_STATUS: Final = {spec.status.value: spec for spec in STAGES}

if set(ANALYSIS_STATUSES) != {s.value for s in Status}:  # a Status member without a row, or the reverse
    raise RuntimeError("every running Status needs exactly one row in STAGES")


def check_status(status: str) -> int:
    """The rank of ``status`` (:data:`STATUS_RANK`). Raises ``ValueError`` for a status that is
    not one of :data:`ANALYSIS_STATUSES`."""
    try:
        return STATUS_RANK[status]
    except KeyError:
        raise ValueError(f"status must be one of {ANALYSIS_STATUSES}, got {status!r}") from None


def stage(name: str) -> StageSpec:
    """The row of stage ``name``. Raises ``KeyError`` naming the known stages."""
    try:
        return _BY_NAME[name]
    except KeyError:
        raise KeyError(f"unknown stage {name!r}; known: {', '.join(_BY_NAME)}") from None


def next_stage(name: str) -> StageSpec | None:
    """The stage after ``name`` in a pass, or ``None`` after the last (``should_continue``
    decides then). Raises ``KeyError`` for an unknown stage."""
    index = STAGES.index(stage(name))
    return STAGES[index + 1] if index + 1 < len(STAGES) else None


def stage_of_status(status: str) -> str | None:
    """The stage running while an analysis shows ``status`` (``analyzing`` → ``analysis``), or
    ``None`` for a terminal or unknown status."""
    spec = _BY_STATUS.get(status)
    return spec.name if spec else None


def step_after(checkpoint: str | None) -> str:
    """The step that runs after ``checkpoint`` (the last completed stage of a pass, ``None``
    before the first): the next stage's name, or :data:`END_OF_PASS` after the last stage.

    This is how an analysis is re-driven from its row (``pipeline.steps.recovery``): the row
    stores the checkpoint and the state after it. Raises ``KeyError`` for an unknown stage.
    """
    if checkpoint is None:
        return STAGES[0].name
    following = next_stage(checkpoint)
    return following.name if following is not None else END_OF_PASS


def step_before(step: str) -> str | None:
    """The checkpoint a step starts from: the stage before ``step`` (``None`` for the first
    stage), the last stage for :data:`END_OF_PASS`. Raises ``KeyError`` for an unknown step."""
    if step == END_OF_PASS:
        return STAGES[-1].name
    index = STAGES.index(stage(step))
    return STAGES[index - 1].name if index > 0 else None
