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

from sqlalchemy.exc import OperationalError

from core.settings import Settings
from core.state import FinancialAgentState
from db import ledger
from db.engine import get_engine
from pipeline.steps.delivery import Delivery

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


class RetryStep(Exception):
    """The step must run again in ``countdown`` seconds (Celery's ``task.retry``), carrying
    ``pending`` (``{"pending_rows": [...], "pending_llm_rows": [...]}`` when the rows could not be
    written, else ``{}``) as the retry message's keyword arguments. ``cause`` is the error."""

    def __init__(self, *, cause: BaseException, countdown: int, pending: dict[str, Any]) -> None:
        super().__init__(f"retry in {countdown} s: {cause}")
        self.cause = cause
        self.countdown = countdown
        self.pending = pending


def backoff_seconds(retries: int, *, outage: bool = False, settings: Settings) -> int:
    """Countdown before retry number ``retries + 1``, capped at ``task_retry_backoff_max``.

    Transient tool errors: ``2 * 2**retries`` s with full jitter (a whole number uniform in
    [0, that]; the formula of Celery's ``get_exponential_backoff_interval``). A database
    outage (``outage=True``): ``OUTAGE_BACKOFF_BASE * 2**retries`` s with equal jitter (half of
    it fixed, half random), so the retries span the outage instead of spending themselves in its
    first seconds (AWS Architecture Blog, "Exponential Backoff And Jitter", 2015).
    """
    if not outage:
        # jitter, not cryptography
        return random.randrange(min(settings.durability.task_retry_backoff_max, 2 * 2**retries) + 1)
    ceiling = min(settings.durability.task_retry_backoff_max, OUTAGE_BACKOFF_BASE * 2**retries)
    return int(ceiling / 2 + random.uniform(0, ceiling / 2))  # jitter, not cryptography


def outage_retry(*, exc: BaseException, retries: int, settings: Settings) -> RetryStep:
    """The retry of a step that met a database outage (``OperationalError``) before writing
    anything of its own (the end of a pass, ``pipeline.steps.close.should_continue_step``): the
    outage countdown of :func:`backoff_seconds` for retry number ``retries + 1``, nothing
    carried. The task base turns it into Celery's retry as it does a stage's."""
    return RetryStep(
        cause=exc, countdown=backoff_seconds(retries, outage=True, settings=settings), pending={}
    )


def retry_step(
    *,
    delivery: Delivery,
    exc: BaseException,
    state: FinancialAgentState,
    stage: str,
    rows: list[dict[str, Any]],
    llm_rows: list[dict[str, Any]],
    claimed: bool = True,
    settings: Settings,
) -> RetryStep:
    """The retry of a step that met ``exc`` (one of :data:`RETRYABLE_ERRORS`): keep the
    attempt's rows and extend the lease over the countdown in one transaction
    (``db.ledger.keep``; the delivery's own lease, or with ``claimed=False``
    the lease of the step waiting to start, which the previous checkpoint set), or, when the
    database is down, carry the rows in the retry message so none is dropped; return the
    :class:`RetryStep` for the caller to raise. The retry's message claims its step first."""
    countdown = backoff_seconds(delivery.retries, outage=isinstance(exc, OperationalError), settings=settings)
    pending: dict[str, Any] = {}
    try:
        # the failed attempts stay visible even though the stage will run again; LLM attempts
        # cost money: they are facts even if the stage re-runs
        ledger.keep(
            engine=get_engine(settings.service.effective_database_url),
            analysis_id=state.analysis_id,
            owner=delivery.task_id if claimed else None,
            seconds=countdown + settings.durability.lease_seconds,
            tool_calls=rows,
            llm_calls=llm_rows,
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
