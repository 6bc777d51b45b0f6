"""The end of a pass leaves how it ended for the step's write (``pipeline.stages.ending``): the
error of a failed end is redacted there, the write stores it as given (``db.ledger.finish``)."""

from __future__ import annotations

import uuid
from datetime import date

import pytest

from agents.data.market.embedded import EmbeddedProvider
from core.settings import Settings
from core.state import FinancialAgentState, Status
from pipeline.rules import Decision, Verdict
from pipeline.stages import ending
from pipeline.steps.context import StepContext


def test_a_failed_end_leaves_its_reason_redacted(monkeypatch: pytest.MonkeyPatch) -> None:
    as_of = date(2013, 3, 1)
    ctx = StepContext(settings=Settings(), as_of=as_of, provider=EmbeddedProvider(), stage="review")
    state = FinancialAgentState(analysis_id=str(uuid.uuid4()), stock_symbol="AAPL", as_of=as_of)

    def failed(received: FinancialAgentState) -> tuple[Verdict, FinancialAgentState]:
        received.status = Status.FAILED
        reason = "provider refused: api_key=abc123 (Bearer abcdefghijkl)"
        return Verdict(Decision.END_FAILED, reason), received

    monkeypatch.setattr(ending, "conclude_pass", failed)
    out = ending.end_pass(state, ctx=ctx)
    assert out.status is Status.FAILED
    assert ctx.pass_end is not None and ctx.pass_end.ends
    assert ctx.pass_end.error == "provider refused: api_key=*** (Bearer ***)"
