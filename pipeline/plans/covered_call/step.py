"""The covered_call plan's step of the analysis stage: position → chart → options → research
(``agents.analysts.covered_call``), after the indicators and the six-month zones."""

from __future__ import annotations

from agents.analysts.covered_call import CoveredCallInputs, run_covered_call_plan
from agents.tools.registry import ToolContext
from core.parts import CoveredCallResult
from core.state import FinancialAgentState
from pipeline.plans.csp.step import option_plan_inputs
from pipeline.stages.common import apply_outcome, note


def covered_call_plan(state: FinancialAgentState, ctx: ToolContext) -> None:
    """Run the plan and store its record in ``state.analysis.covered_call``; a tool failure
    (no chain on ``as_of``) is a cited rejection, not an error of the analysis."""
    inputs = CoveredCallInputs(**option_plan_inputs(state, ctx), cost_basis=state.cost_basis)
    analysis = state.analysis
    assert analysis is not None  # option_plan_inputs created it
    record = apply_outcome(state, ctx=ctx, outcome=run_covered_call_plan(inputs))
    result = CoveredCallResult.model_validate(record)
    analysis.covered_call = result
    if result.status == "suggested" and result.suggestion is not None:
        s = result.suggestion
        note(
            state,
            stage="analysis",
            content=f"Covered call: sell {s.contract} (strike {s.strike}, {s.expiry}).",
        )
    else:
        first = result.reasons[0].text if result.reasons else ""
        note(
            state,
            stage="analysis",
            content=f"Covered call rejected by the {result.rejected_by} analyst: {first}",
        )
