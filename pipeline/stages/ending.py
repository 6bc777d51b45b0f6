"""The last stage of a pass ends it: :func:`ending_pass` makes the function of the stage table's
last row (``pipeline.stages.table``) run the stage, then the end of its pass
(``pipeline.conclude.conclude_pass``) on the state as the next task would receive it.

So the ``should_continue`` decision and, when the pass ends the analysis, the Markdown and JSON
reports are stage work, done in the task of the last stage before its write: the write
(``pipeline.steps.checkpoint.finish``) stores the finished state, its reports and the stage's
rows in one transaction, and renders nothing. How the pass ended is left on the context
(``ctx.pass_end``, a :class:`~pipeline.steps.context.PassEnd`) for that write.
"""

from __future__ import annotations

import functools

from core.state import FinancialAgentState, Status
from pipeline.conclude import conclude_pass, report_json_of
from pipeline.rules import Decision
from pipeline.steps.context import PassEnd, StageFunction, StepContext


def end_pass(state: FinancialAgentState, *, ctx: StepContext) -> FinancialAgentState:
    """The end of the pass whose last stage left ``state``: the ``should_continue`` decision
    (``conclude_pass``) taken on ``state`` as the next task would have received it (a JSON round
    trip: the same decision and reports as the ``should_continue`` task's and ``apps.replay``'s).

    The pass ends the analysis: returns the finished state (done/failed, the verdict in its
    messages, its Markdown report written) and sets ``ctx.pass_end`` to its JSON report and
    error. Another pass follows: returns ``state`` unchanged (the ``should_continue`` task
    hands off from it) and sets ``ctx.pass_end`` to ``PassEnd(ends=False)``. Raises
    ``pydantic.ValidationError`` for a state that does not survive its message (never for a
    stage's output)."""
    verdict, concluded = conclude_pass(FinancialAgentState.as_received(state.to_message()))
    if verdict.decision is Decision.CONTINUE:
        ctx.pass_end = PassEnd(ends=False)
        return state
    error = None if concluded.status is Status.DONE else verdict.reason
    ctx.pass_end = PassEnd(ends=True, report_json=report_json_of(concluded), error=error)
    return concluded


def ending_pass(fn: StageFunction) -> StageFunction:
    """The stage function ``fn`` followed by :func:`end_pass` (the function of the table's last
    row); its name and docstring are ``fn``'s."""

    @functools.wraps(fn)
    def last_stage(*, state: FinancialAgentState, ctx: StepContext) -> FinancialAgentState:
        return end_pass(fn(state=state, ctx=ctx), ctx=ctx)

    return last_stage
