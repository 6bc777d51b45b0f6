"""should_continue over a table of cases (docs/design.md, "should_continue")."""

from __future__ import annotations

import pytest

from core.state import FinancialAgentState, StageError, Status
from pipeline.rules import Decision, next_iteration, should_continue

OK = {"status": "success"}
FAILED = {"status": "failed"}


def _err(iteration: int, *, critical: bool = True, permanent: bool = False) -> StageError:
    return StageError(
        stage="research", iteration=iteration, code="X", message="m", critical=critical, permanent=permanent
    )


CASES = [
    # (iteration, max, status, stock_data, errors, expected)
    (0, 3, Status.DONE, OK, [], Decision.END_DONE),
    (0, 3, Status.REVIEWING, None, [], Decision.CONTINUE),
    (0, 3, Status.REVIEWING, FAILED, [_err(0)], Decision.CONTINUE),
    (1, 3, Status.REVIEWING, FAILED, [_err(0), _err(1)], Decision.END_FAILED),  # two critical errors
    (1, 3, Status.REVIEWING, FAILED, [_err(0, critical=False), _err(1)], Decision.CONTINUE),
    (2, 3, Status.REVIEWING, FAILED, [], Decision.END_FAILED),  # third pass was the last
    (2, 3, Status.DONE, OK, [], Decision.END_DONE),
    (0, 1, Status.REVIEWING, FAILED, [], Decision.END_FAILED),  # max_iterations=1: no re-run
    (0, 3, Status.REVIEWING, FAILED, [_err(0, permanent=True)], Decision.END_FAILED),
    (
        1,
        3,
        Status.REVIEWING,
        FAILED,
        [_err(0, permanent=True, critical=False)],
        Decision.CONTINUE,
    ),  # old pass
    (0, 3, Status.REVIEWING, OK, [], Decision.END_FAILED),  # data fine but no report: nothing to retry
]


@pytest.mark.parametrize(("iteration", "max_iterations", "status", "stock_data", "errors", "expected"), CASES)
def test_should_continue_table(iteration, max_iterations, status, stock_data, errors, expected) -> None:
    state = FinancialAgentState(
        analysis_id="a",
        stock_symbol="AAPL",
        iteration=iteration,
        max_iterations=max_iterations,
        status=status,
        stock_data=stock_data,
        errors=errors,
    )
    verdict = should_continue(state)
    assert verdict.decision is expected, verdict.reason
    assert verdict.reason


def test_next_iteration_clears_results_and_keeps_history() -> None:
    state = FinancialAgentState(
        analysis_id="a",
        stock_symbol="AAPL",
        status=Status.REVIEWING,
        stock_data=FAILED,
        analysis={"technical": {"close": 1.0}, "technical_ref": "technical_indicators_0123456789ab"},
        errors=[_err(0)],
        source_refs=["r1"],
        final_report="old",
    )
    nxt = next_iteration(state)
    assert nxt.iteration == 1
    assert nxt.status is Status.RESEARCHING
    assert nxt.stock_data is None and nxt.analysis is None and nxt.final_report is None
    assert nxt.errors == state.errors and nxt.source_refs == ["r1"]
    assert state.iteration == 0  # the original is not mutated
