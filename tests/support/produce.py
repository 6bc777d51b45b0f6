"""Producer helpers run as a subprocess by the integration tests (so the Celery app is built
from the subprocess's FINAGENT_* environment, like any real producer).

    python -m tests.support.produce batch AAPL MSFT ...        # enqueue all, wait, print JSON
    python -m tests.support.produce redeliver AAPL 2012-06-29  # the same research message twice
    python -m tests.support.produce continue-twice AAPL 2012-06-29
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from datetime import date
from typing import Any

import tasks  # noqa: F401  # installs the task queue, as any producer process does
from core.settings import get_settings
from core.state import FinancialAgentState, Status
from db import ledger, repo
from db.engine import get_engine

TIMEOUT_S = 240


def _engine():  # type: ignore[no-untyped-def]
    return get_engine(get_settings().service.effective_database_url)


def _new_state(symbol: str, as_of: str, **kw: Any) -> FinancialAgentState:
    state = FinancialAgentState(
        analysis_id=str(uuid.uuid4()), stock_symbol=symbol, as_of=date.fromisoformat(as_of), **kw
    )
    ledger.create(
        engine=_engine(),
        analysis_id=state.analysis_id,
        symbol=symbol,
        as_of=state.as_of,
        user_query="test",
        max_iterations=state.max_iterations,
        state=state.to_message(),
    )
    return state


def batch(symbols: list[str]) -> list[dict[str, Any]]:
    """Enqueue one analysis per symbol (latest date), wait for all, return their rows' summary."""
    from pipeline.service import AnalysisRequest, start_analysis

    ids = [
        start_analysis(request=AnalysisRequest(symbol=s), settings=get_settings()).analysis_id
        for s in symbols
    ]
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        rows = [repo.get_analysis(engine=_engine(), analysis_id=i) for i in ids]
        if all(r and r["status"] in ("done", "failed") for r in rows):
            return [
                {
                    "symbol": r["symbol"],
                    "status": r["status"],
                    "signal": r["signal"],
                    "report_json": r["report_json"],
                }
                for r in rows
                if r
            ]
        time.sleep(0.2)
    raise SystemExit("timeout")


def redeliver(symbol: str, as_of: str) -> dict[str, Any]:
    """Send the same research message twice (as a broker redelivery would) and wait for both."""
    from tasks.stages import STAGE_TASKS

    research = STAGE_TASKS["research"]

    state = _new_state(symbol, as_of)
    task_id = str(uuid.uuid4())
    # stage tasks ignore their results (tasks.stages): ask for them on this call
    results = [
        research.apply_async(args=[state.to_message()], task_id=task_id, ignore_result=False)
        for _ in range(2)
    ]
    for result in results:  # one task id: the first stored result answers both
        result.get(timeout=TIMEOUT_S)
    return {"analysis_id": state.analysis_id}


def continue_twice(symbol: str, as_of: str) -> dict[str, Any]:
    """Deliver should_continue twice for a pass whose research failed; wait for the analysis."""
    from tasks.stages import should_continue_task

    state = _new_state(symbol, as_of, status=Status.REVIEWING, stock_data={"status": "failed"})
    ledger.claim_pass(engine=_engine(), analysis_id=state.analysis_id, iteration=0)
    results = [should_continue_task.apply_async(args=[state.to_message()]) for _ in range(2)]
    decisions = [r.get(timeout=TIMEOUT_S)["decision"] for r in results]
    deadline = time.monotonic() + TIMEOUT_S
    while time.monotonic() < deadline:
        status = repo.status_of(engine=_engine(), analysis_id=state.analysis_id)
        if status and status[0] in ("done", "failed"):
            return {"analysis_id": state.analysis_id, "decisions": decisions, "status": status[0]}
        time.sleep(0.2)
    raise SystemExit("timeout")


def main(argv: list[str]) -> None:
    command, *args = argv
    if command == "batch":
        out: Any = batch(args)
    elif command == "redeliver":
        out = redeliver(*args)
    elif command == "continue-twice":
        out = continue_twice(*args)
    else:
        raise SystemExit(f"unknown command {command}")
    sys.stdout.write(json.dumps(out, default=str) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
