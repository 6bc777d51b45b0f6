"""The function of every row of the stage table (``core.stages.STAGES``).

The table itself is pure data in the core layer (the database and the queues read it); this
mapping joins each row to its plain stage function here, where the stage modules live.
``tasks.stages`` declares one Celery task per row from it
(``tasks.base.StageTask``).
"""

from __future__ import annotations

from typing import Final

from core.stages import STAGES
from pipeline.stages.analysis import analysis
from pipeline.stages.recommendation import recommendation
from pipeline.stages.research import research
from pipeline.stages.review import review
from pipeline.steps.context import StageFunction

STAGE_FUNCTIONS: Final[dict[str, StageFunction]] = {
    "research": research,
    "analysis": analysis,
    "recommendation": recommendation,
    "review": review,
}

if set(STAGE_FUNCTIONS) != {spec.name for spec in STAGES}:
    raise RuntimeError("every row of core.stages.STAGES needs exactly one stage function")
