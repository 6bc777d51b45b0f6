"""Interactive before batch, through a real worker (Redis, PostgreSQL, ``finagent worker``):
with a backtest's backlog already queued, an analysis a person asked for (the CLI) finishes
before the backlog drains, and the backlog still finishes (docs/operations.md, "Interactive
before batch").
"""

from __future__ import annotations

import time
from datetime import datetime

import redis
from sqlalchemy import create_engine, text

from tests.integration.conftest import Service

#: Grid of the backlog: 4 embedded symbols x 39 trading days = 156 analyses (2 holidays fold into
#: the day before), 624 stage tasks.
#: Two worker processes drain about 5 analyses a second here (measured: 76 in ~15 s), so the
#: backlog lasts ~30 s on an idle machine; the test asserts only the order of completion.
SYMBOLS = "AAPL,MSFT,IBM,GOOG"
GRID = ("--from", "2012-01-03", "--to", "2012-02-28", "--every", "1d")


def _rows(service: Service) -> list[tuple[str, str, datetime, datetime | None]]:
    """``(lane, status, created_at, finished_at)`` of every analysis (an interactive state
    leaves its lane out: ``FinancialAgentState.to_message``)."""
    engine = create_engine(service.env["FINAGENT_SERVICE_DATABASE_URL"])
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                text(
                    "SELECT COALESCE(state->>'lane', 'interactive'), status, created_at, finished_at "
                    "FROM analyses"
                )
            ).all()
    finally:
        engine.dispose()
    return [(r[0], r[1], r[2], r[3]) for r in rows]


def _counts(service: Service) -> dict[str, int]:
    out: dict[str, int] = {}
    for lane, status, _, _ in _rows(service):
        key = f"{lane}:{'done' if status == 'done' else 'open'}"
        out[key] = out.get(key, 0) + 1
    return out


def test_an_interactive_analysis_overtakes_a_queued_backtest(service: Service, start_worker) -> None:
    # the whole backlog is queued before any worker runs, then a person's analysis (the CLI)
    # after it: with one FIFO per stage it would finish last, behind every batch analysis
    proc = service.cli("backtest", "--symbols", SYMBOLS, *GRID, "--name", "lane", "--no-wait", timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    client = redis.Redis.from_url(service.env["FINAGENT_SERVICE_BROKER_URL"])
    queued = client.llen("research.batch")
    assert queued >= 60, f"backlog of {queued} research messages"
    assert client.llen("research") == 0
    asked = service.cli("analyze", "AAPL", "--no-wait")
    assert asked.returncode == 0, asked.stderr[-3000:]
    assert client.llen("research") == 1
    start_worker()
    # no timing: the order of completion is the behaviour (the machine may be slow or loaded)
    deadline = time.monotonic() + 240
    answered: datetime | None = None
    while time.monotonic() < deadline and answered is None:
        mine = [r for r in _rows(service) if r[0] == "interactive"]
        answered = mine[0][3] if mine and mine[0][1] == "done" else None
        time.sleep(0.2)
    assert answered is not None, "the interactive analysis did not finish"
    later = [r for r in _rows(service) if r[0] == "batch" and (r[3] is None or r[3] > answered)]
    # most of the backlog had not finished when the interactive analysis did (a FIFO would
    # have finished every batch analysis first) ...
    assert len(later) > queued // 2, (len(later), queued)
    # ... and batch work drains afterwards (no starvation either way)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and _counts(service).get("batch:open", 0):
        time.sleep(1)
    final = _counts(service)
    assert final.get("batch:open", 0) == 0 and final.get("batch:done") == queued, final
