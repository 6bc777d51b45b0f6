"""The function of every row of the stage table (``core.stages.STAGES``).

The table itself is pure data in the core layer (the database and the queues read it); this
mapping joins each row to its plain stage function here, where the stage modules live.
``tasks.stages`` declares one Celery task per row from it.
"""

from __future__ import annotations

from typing import Final

from core.stages import STAGES, TERMINAL_STATUSES, next_stage
from core.state import FinancialAgentState
from pipeline.stages.analysis import analysis
from pipeline.stages.context import StageFunction
from pipeline.stages.recommendation import recommendation
from pipeline.stages.research import research
from pipeline.stages.review import review

STAGE_FUNCTIONS: Final[dict[str, StageFunction]] = {
    "research": research,
    "analysis": analysis,
    "recommendation": recommendation,
    "review": review,
}

if set(STAGE_FUNCTIONS) != {spec.name for spec in STAGES}:
    raise RuntimeError("every row of core.stages.STAGES needs exactly one stage function")


def advance(state: FinancialAgentState, *, stage: str) -> FinancialAgentState:
    """Move ``state`` to the status of the stage after ``stage`` (the stage table's order), unless
    the stage ended the analysis (``done``/``failed``); after the last stage the status stays
    (``should_continue`` decides). Returns ``state``. Raises ``KeyError`` for an unknown stage."""
    following = next_stage(stage)
    if following is not None and state.status not in TERMINAL_STATUSES:
        state.status = following.status
    return state
