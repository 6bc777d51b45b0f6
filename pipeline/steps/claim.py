"""The claim of a step: who may run it, and how often.

A step is claimed in its ``analyses`` row (``db.ledger.claim``: one guarded
``UPDATE``; the row must be in the message's pass, its checkpoint the stage before, and nobody
else may hold a live lease). A copy of a message whose step is done, or that races a live lease,
is dropped; the claims are counted (``attempt``), and a step claimed more than
:func:`attempt_cap` times fails the analysis ``STALLED``.

Two claim paths, kept on purpose (docs/architecture.md, "The step protocol"): every step claims
first, except the first delivery of a stage without a model (:func:`runs_unclaimed`), whose
checkpoint claims and completes the step in one ``UPDATE``. Folding the claim into the
checkpoint for those halved the ``UPDATE``s per analysis (8 to 4) and took about 6-7 ms of worker
CPU per analysis off the pipeline (docs/benchmarks.md, "Quant throughput against a bare Celery
chain", in its git history);
a model's stage keeps claiming first, because it runs for minutes and a late copy must be
dropped before it spends tokens.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from agents.llm.config import role_models
from core.settings import Settings
from core.state import FinancialAgentState
from db import ledger
from db.engine import get_engine
from db.ledger import ClaimOutcome, StepClaim
from pipeline.steps.close import fail_analysis
from pipeline.steps.delivery import Delivery, DropMessage

logger = logging.getLogger("finagent.tasks")


def attempt_cap(settings: Settings) -> int:
    """How many claims of one step an analysis may use: the first run, ``task_max_retries``
    Celery retries and ``max_redeliveries`` redeliveries of a message whose worker died (a
    poison message that kills its worker every time). Counted in the row (``attempt``), so it
    holds on every broker."""
    return 1 + settings.durability.task_max_retries + settings.durability.max_redeliveries


def runs_unclaimed(*, delivery: Delivery, settings: Settings, state: FinancialAgentState) -> bool:
    """Whether this run of a stage may skip the claim of its step, the claim then being part of
    its checkpoint (one ``UPDATE`` instead of two: ``db.ledger.complete`` with
    ``claimed=False``, fenced by "nobody else holds a live lease").

    True only for the FIRST delivery of the FIRST attempt (``Delivery.surely_first``: no Celery
    retry, the broker's redelivery flag ``False``, no rows carried from an earlier attempt) of a
    stage without a model (no LLM configured for the analysis: the deterministic analysts call
    market-data tools and the calculator, which change nothing outside their own rows, and end
    in milliseconds). What the claim guarded stays guarded:

    * a copy running in parallel (a re-drive while the first is still running) writes no state:
      the checkpoint that commits second finds the row moved on, and its rows (deterministic
      ids) were written by the first;
    * the poison-message cap: the attempt counter counts claims, and every redelivery and
      retry claims first, so a message that kills its worker is stopped after at most one run
      more than the cap (:func:`attempt_cap`);
    * the recovery sweep: the lease the previous checkpoint set covers the step's start.

    The row shows the previous checkpoint's status (the stage's own, set by that checkpoint)
    and no lease owner while such a stage runs. A model's stage keeps claim-first: it runs for
    minutes and its owner is shown.
    """
    if not delivery.surely_first:
        return False
    # the models alone, not llm_config (which reads the router file): the session builds that
    return not role_models(settings=settings, override=state.llm_model)


@dataclass(frozen=True)
class Claim:
    """What the claim answered one delivery.

    Attributes:
        runs: the step is this delivery's to run.
        claimed: it holds the step's lease (``False`` when it runs unclaimed, its checkpoint
            then claiming: :func:`runs_unclaimed`; the checkpoint's fence, ``claimed``).
        found: the row's answer (``db.ledger.claim``; ``None`` when unclaimed).
        capped: claimed, but more often than :func:`attempt_cap` allows.
    """

    runs: bool
    claimed: bool
    found: StepClaim | None = None
    capped: bool = False


def claim_step(*, delivery: Delivery, state: FinancialAgentState, stage: str, settings: Settings) -> Claim:
    """Claim the step for this delivery (``db.ledger.claim``), unless it may run
    unclaimed (:func:`runs_unclaimed`). A step that is not this delivery's (a duplicate or late
    copy) or that was claimed more than :func:`attempt_cap` times does not run: :func:`refuse`
    says what becomes of its message.

    Raises ``sqlalchemy.exc.OperationalError`` when the database is unreachable (the step
    retries, ``pipeline.steps.backoff``).
    """
    if runs_unclaimed(delivery=delivery, settings=settings, state=state):
        return Claim(runs=True, claimed=False)
    found = ledger.claim(
        engine=get_engine(settings.service.effective_database_url),
        analysis_id=state.analysis_id,
        iteration=state.iteration,
        step=stage,
        owner=delivery.task_id,
        lease_seconds=settings.durability.lease_seconds,
    )
    mine = found.outcome is ClaimOutcome.CLAIMED
    capped = mine and found.attempt > attempt_cap(settings)
    return Claim(runs=mine and not capped, claimed=mine, found=found, capped=capped)


def refuse(
    *, claim: Claim, delivery: Delivery, state: FinancialAgentState, stage: str, settings: Settings
) -> DropMessage:
    """What becomes of a delivery whose :class:`Claim` does not run: a duplicate or late copy
    is dropped; a step claimed more than :func:`attempt_cap` times fails the analysis
    ``STALLED`` first (``pipeline.steps.close.fail_analysis``). Returns the
    :class:`~pipeline.steps.delivery.DropMessage` for the caller to raise.

    Raises ``sqlalchemy.exc.OperationalError`` when the database is unreachable while failing
    the analysis (the recovery sweep finds it after its lease).
    """
    found = claim.found
    if claim.capped and found is not None:
        cap = attempt_cap(settings)
        fail_analysis(
            analysis_id=state.analysis_id,
            stage=stage,
            code="STALLED",
            message=(
                f"stage {stage} was started {found.attempt - 1} times without completing "
                f"(cap {cap}: first run, retries, redeliveries)"
            ),
            state=state,
            settings=settings,
        )
        return DropMessage("attempt cap")
    logger.info(
        "stage %s of %s (task %s): %s (row: %s after %s); message dropped",
        stage,
        state.analysis_id,
        delivery.task_id,
        found.outcome.value if found is not None else "not claimed",
        found.status if found is not None else None,
        found.checkpoint if found is not None else None,
    )
    return DropMessage(found.outcome.value if found is not None else "not claimed")
