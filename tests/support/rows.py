"""Analyses rows in a given status for tests, made only through the moves of the row's ledger
(``db.ledger``): a test that needs a row "analyzing" or "done" gets it the way a worker would
make it (claims and completions of the stages in order, or a finished last step), never by a
write the ledger does not declare."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from datetime import date
from typing import Any

from sqlalchemy import Engine

from core.stages import STAGES, next_stage
from db import ledger, repo


def new_row(engine: Engine, *, symbol: str = "AAPL", state: dict[str, Any] | None = None, **kw: Any) -> str:
    """Create a queued row (``ledger.create``) with a fresh id; ``state`` defaults to a minimal
    state naming the analysis. Returns the id."""
    analysis_id = kw.pop("analysis_id", None) or str(uuid.uuid4())
    assert ledger.create(
        engine=engine,
        analysis_id=analysis_id,
        symbol=symbol,
        as_of=kw.pop("as_of", date(2024, 1, 15)),
        user_query=kw.pop("user_query", f"Analyse {symbol}"),
        max_iterations=kw.pop("max_iterations", 3),
        state=state if state is not None else {"analysis_id": analysis_id, "iteration": 0},
        **kw,
    )
    return analysis_id


def move_to(
    engine: Engine,
    analysis_id: str,
    status: str,
    *,
    state: dict[str, Any] | None = None,
    tool_calls: Sequence[Mapping[str, Any]] = (),
    owner: str = "test-worker",
) -> None:
    """Move an unfinished row of pass 0 forward to the running ``status`` by claiming and
    completing the stages in order (a worker's moves); the last move carries ``state`` (default:
    the stored one) and ``tool_calls``. Raises ``AssertionError`` when a move is refused."""
    row = repo.get_analysis(engine=engine, analysis_id=analysis_id)
    assert row is not None and row["iteration"] == 0
    stored = state if state is not None else row["state"]
    names = [spec.name for spec in STAGES]
    current = row["status"]
    for spec in STAGES[0 if row["checkpoint"] is None else names.index(row["checkpoint"]) + 1 :]:
        if current == status:
            break
        claimed = ledger.claim(
            engine=engine,
            analysis_id=analysis_id,
            iteration=0,
            step=spec.name,
            owner=owner,
            lease_seconds=300,
        )
        assert claimed.outcome is ledger.ClaimOutcome.CLAIMED, claimed
        current = spec.status.value
        following = next_stage(spec.name)
        if current == status or following is None:
            if tool_calls:  # the claimed step's rows, as a retrying attempt keeps them
                ledger.keep(
                    engine=engine, analysis_id=analysis_id, owner=owner, seconds=300, tool_calls=tool_calls
                )
            break
        last = following.status.value == status
        end = ledger.StepEnd(
            analysis_id=analysis_id,
            iteration=0,
            step=spec.name,
            owner=owner,
            state=stored,
            tool_calls=tool_calls if last else (),
        )
        assert ledger.complete(engine=engine, end=end, status=following.status.value, lease_seconds=300)
        current = following.status.value
    assert repo.status_of(engine=engine, analysis_id=analysis_id) == (status, 0), status


def finish_row(
    engine: Engine,
    analysis_id: str,
    *,
    status: str = "done",
    state: dict[str, Any] | None = None,
    tool_calls: Sequence[Mapping[str, Any]] = (),
    llm_calls: Sequence[Mapping[str, Any]] = (),
    report: str | None = None,
    report_json: dict[str, Any] | None = None,
    signal: str | None = None,
    confidence: float | None = None,
    error: str | None = None,
) -> None:
    """Finish a queued row of pass 0 in its first step, as a worker whose first stage ended the
    analysis would (``ledger.claim``, then ``ledger.finish`` with the results and rows)."""
    row = repo.get_analysis(engine=engine, analysis_id=analysis_id)
    assert row is not None
    first = STAGES[0].name
    claimed = ledger.claim(
        engine=engine,
        analysis_id=analysis_id,
        iteration=0,
        step=first,
        owner="test-worker",
        lease_seconds=300,
    )
    assert claimed.outcome is ledger.ClaimOutcome.CLAIMED, claimed
    end = ledger.StepEnd(
        analysis_id=analysis_id,
        iteration=0,
        step=first,
        owner="test-worker",
        state=state if state is not None else row["state"],
        tool_calls=tool_calls,
        llm_calls=llm_calls,
    )
    assert ledger.finish(
        engine=engine,
        end=end,
        status=status,
        report=report,
        report_json=report_json,
        signal=signal,
        confidence=confidence,
        error=error,
    )
