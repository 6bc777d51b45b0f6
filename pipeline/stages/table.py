"""The function of every row of the stage table (``core.stages.STAGES``).

The table itself is pure data in the core layer (the database and the queues read it); this
mapping joins each row to its plain stage function here, where the stage modules live. The
function of the last row also ends the pass (``pipeline.stages.ending.ending_pass``: the
``should_continue`` decision and the final reports are the last stage's work).
``tasks.stages`` declares one Celery task per row from it
(``tasks.base.StageTask``).
"""

from __future__ import annotations

from typing import Final

from core.stages import STAGES
from pipeline.stages.analysis import analysis
from pipeline.stages.ending import ending_pass
from pipeline.stages.recommendation import recommendation
from pipeline.stages.research import research
from pipeline.stages.review import review
from pipeline.steps.context import StageFunction

_STAGE_WORK: Final[dict[str, StageFunction]] = {
    "research": research,
    "analysis": analysis,
    "recommendation": recommendation,
    "review": review,
}

if set(_STAGE_WORK) != {spec.name for spec in STAGES}:
    raise RuntimeError("every row of core.stages.STAGES needs exactly one stage function")

#: The function of each row; the last row's ends the pass too.
STAGE_FUNCTIONS: Final[dict[str, StageFunction]] = {
    spec.name: ending_pass(_STAGE_WORK[spec.name]) if spec is STAGES[-1] else _STAGE_WORK[spec.name]
    for spec in STAGES
}
