"""When and how a step runs again: the errors that call for a retry, the countdown before it,
and what the retry keeps.

``TransientStageError`` (network, rate limit after the tool's own retries) and a database
``OperationalError`` (an outage, also while claiming or writing) retry with exponential backoff,
capped at ``task_retry_backoff_max`` (below the Redis visibility timeout, docs/design.md,
"Celery configuration"), at most ``task_max_retries`` times (the stage task's ``max_retries``:
past it Celery raises the error, and the chain's error callback fails the analysis). Anything
else fails the chain at once.
"""

from __future__ import annotations

import logging
import random
from typing import Any

from celery.utils.time import get_exponential_backoff_interval
from sqlalchemy.exc import OperationalError

from core.settings import get_settings
from core.state import FinancialAgentState
from db import progress_repo, repo
from db.engine import get_engine
from pipeline.steps.delivery import Delivery, RetryStep

logger = logging.getLogger("finagent.tasks")

#: Base of the backoff after a database outage (``OperationalError``): 5, 10, 20, 40, 80 s with
#: equal jitter, so the default five retries outlast an outage of about 80 s before the chain
#: gives up (and the recovery sweep re-drives the analysis after its lease). Transient tool
#: errors keep the 2 s base of Celery's full-jitter backoff.
OUTAGE_BACKOFF_BASE = 5


class TransientStageError(Exception):
    """A tool failed in a way a later retry may fix (network, rate limit): the step retries
    with exponential backoff. ``code`` is the tool's error code.

    Both values are the exception's ``args``, positional: Celery's JSON result backend stores an
    exception as its type and ``args`` and rebuilds it as ``type(*args)`` when retries run out,
    so the chain's error callback (and the report) still see the code. With a keyword-only code
    the rebuild failed and the report read ``UnpickleableExceptionWrapper`` (celery
    ``Backend.exception_to_python``).
    """

    def __init__(self, message: str, code: str) -> None:
        super().__init__(message, code)
        self.message = message
        self.code = code

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"


#: The errors after which a step runs again (see the module docstring).
RETRYABLE_ERRORS: tuple[type[BaseException], ...] = (TransientStageError, OperationalError)


def backoff_seconds(retries: int, *, outage: bool = False) -> int:
    """Countdown before retry number ``retries + 1``, capped at ``task_retry_backoff_max``.

    Transient tool errors: ``2 * 2**retries`` s with full jitter (uniform in [0, that]; Celery's
    own ``get_exponential_backoff_interval``). A database outage (``outage=True``):
    ``OUTAGE_BACKOFF_BASE * 2**retries`` s with equal jitter (half of it fixed, half random), so
    the retries span the outage instead of spending themselves in its first seconds
    (AWS Architecture Blog, "Exponential Backoff And Jitter", 2015).
    """
    settings = get_settings()
    if not outage:
        return int(
            get_exponential_backoff_interval(
                factor=2, retries=retries, maximum=settings.task_retry_backoff_max, full_jitter=True
            )
        )
    ceiling = min(settings.task_retry_backoff_max, OUTAGE_BACKOFF_BASE * 2**retries)
    return int(ceiling / 2 + random.uniform(0, ceiling / 2))  # jitter, not cryptography


def retry_step(
    *,
    delivery: Delivery,
    exc: BaseException,
    state: FinancialAgentState,
    stage: str,
    rows: list[dict[str, Any]],
    llm_rows: list[dict[str, Any]],
    claimed: bool = True,
) -> RetryStep:
    """The retry of a step that met ``exc`` (one of :data:`RETRYABLE_ERRORS`): keep the
    attempt's rows (written now, or carried in the retry message when the database is down, so
    none is dropped), extend the lease over the countdown (the delivery's own lease;
    ``claimed=False``: the lease of the step waiting to start, which the previous checkpoint
    set), and return the :class:`~pipeline.steps.delivery.RetryStep` for the caller to raise.
    The retry's message claims its step first."""
    settings = get_settings()
    countdown = backoff_seconds(delivery.retries, outage=isinstance(exc, OperationalError))
    pending: dict[str, Any] = {}
    engine = get_engine(settings.effective_database_url)
    try:
        if rows:  # keep the failed attempts visible even though the stage will run again
            repo.insert_tool_calls(engine=engine, rows=rows)
        if llm_rows:  # LLM attempts cost money: they are facts even if the stage re-runs
            repo.insert_llm_calls(engine=engine, rows=llm_rows)
        progress_repo.extend_lease(
            engine=engine,
            analysis_id=state.analysis_id,
            owner=delivery.task_id if claimed else None,
            seconds=countdown + settings.lease_seconds,
        )
    except OperationalError:
        # The database is down: the rows travel with the retry and are written by the attempt
        # that commits (ids are deterministic, so a row written twice is inserted once).
        pending = {"pending_rows": rows, "pending_llm_rows": llm_rows}
    logger.warning(
        "stage %s of %s: %s; retry %d in %ss",
        stage,
        state.analysis_id,
        exc,
        delivery.retries + 1,
        countdown,
    )
    return RetryStep(cause=exc, countdown=countdown, pending=pending)
