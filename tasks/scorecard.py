"""The scoring beat task (entry ``finagent-scorecard-score`` every ``scorecard_seconds``): a thin
adapter over ``apps.scorecard.score_pending``, which scores recommendations as their
horizons mature. Idempotent (rows keyed by ``(analysis_id, horizon)``), so ``acks_late``, a
redelivery or two beats at once write nothing twice."""

from __future__ import annotations

import logging
from typing import Any

from apps.scorecard import score_pending
from core.settings import get_settings
from tasks.app import SCORECARD_TASK
from tasks.base import declare

logger = logging.getLogger("finagent.tasks.scorecard")

#: Recommendations looked at per run: about ten seconds of work on this machine's two cores
#: (bars are read once per symbol); the next beat tick takes the rest.
BATCH = 5000


@declare(name=SCORECARD_TASK, max_retries=0)
def score_task() -> dict[str, Any]:
    """Score the matured horizons of up to ``BATCH`` recommendations. Returns
    ``{"recommendations": n, "written": rows, "pending": horizons still open}``."""
    run = score_pending(limit=BATCH, settings=get_settings())
    if run.written:
        logger.info("scorecard: %d rows written, %d horizons still open", run.written, run.pending)
    return {"recommendations": run.recommendations, "written": run.written, "pending": run.pending}
