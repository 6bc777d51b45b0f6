"""``should_continue``: the rule that ends a run or re-enqueues it.

In order (docs/design.md, "should_continue"):

1. ``iteration >= max_iterations`` → end. Iterations count from 0 here, so the check is on passes
   made: ``iteration + 1 >= max_iterations`` (with max 3: passes 0, 1, 2 at most).
2. ``≥ 2`` critical errors → end.
3. ``status == done`` → end.
4. stock data missing or not ``success`` → continue (re-enqueue with ``iteration + 1``).
5. otherwise → end.

Our one addition, between 3 and 4: a *permanent* error in the current pass (invalid symbol, a
date outside the data) → end, because re-running cannot change the answer
(permanent errors are never retried: docs/design.md, "Tool retries").
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from core.stages import STAGES
from core.state import FinancialAgentState, Status

CRITICAL_ERRORS_TO_END = 2  # over all passes


class Decision(StrEnum):
    """What ``should_continue`` decided: end the run (with a final status) or re-enqueue."""

    END_DONE = "end_done"
    END_FAILED = "end_failed"
    CONTINUE = "continue"


@dataclass(frozen=True)
class Verdict:
    """The decision and a one-line reason (shown in logs and the report)."""

    decision: Decision
    reason: str


def _stock_data_ok(state: FinancialAgentState) -> bool:
    return state.stock_data is not None and state.stock_data.status == "success"


def _end(state: FinancialAgentState, reason: str) -> Verdict:
    done = state.status is Status.DONE
    return Verdict(Decision.END_DONE if done else Decision.END_FAILED, reason)


def should_continue(state: FinancialAgentState) -> Verdict:
    """Apply the rule (module docstring) to ``state``; pure, no I/O."""
    if state.iteration + 1 >= state.max_iterations:
        return _end(state, f"iteration cap reached ({state.iteration + 1} of {state.max_iterations} passes)")
    critical = len(state.critical_errors())
    if critical >= CRITICAL_ERRORS_TO_END:
        return _end(state, f"{critical} critical errors")
    if state.status is Status.DONE:
        return Verdict(Decision.END_DONE, "report complete")
    permanent = [e for e in state.iteration_errors() if e.permanent]
    if permanent:
        return Verdict(Decision.END_FAILED, f"permanent error {permanent[0].code}: {permanent[0].message}")
    if not _stock_data_ok(state):
        return Verdict(Decision.CONTINUE, "stock data missing or failed; re-running the chain")
    return _end(state, "no further work")


def next_iteration(state: FinancialAgentState) -> FinancialAgentState:
    """The state that starts the next pass: ``iteration + 1``, status ``researching``, this pass's
    results cleared; messages, errors, tool history and ids kept."""
    return state.model_copy(
        update={
            "iteration": state.iteration + 1,
            "status": STAGES[0].status,
            "stock_data": None,
            "analysis": None,
            "recommendation": None,
            "final_report": None,
        },
        deep=True,
    )
