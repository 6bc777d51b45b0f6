"""Redelivered messages never duplicate rows or fork a run (real worker, Redis, Postgres)."""

from __future__ import annotations

import json
import re
import subprocess
import sys

from db import repo
from db.engine import get_engine
from tests.integration.conftest import Service
from tests.integration.ops_support import poll


def _produce(service: Service, *args: str) -> dict:
    proc = subprocess.run(
        [sys.executable, "-m", "tests.support.produce", *args],
        env=service.env,
        cwd=service.tmp,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_redelivered_research_message_writes_its_rows_once(service: Service, start_worker) -> None:
    start_worker()
    out = _produce(service, "redeliver", "AAPL", "2012-06-29")
    log = service.logs[0]
    # both copies ran (received + succeeded, twice); the producer returns when the first result is
    # stored, so wait for the second copy's lines rather than for a guess at how long it takes
    poll(lambda: log.read_text().count("Task finagent.research[") >= 4, timeout=120, what="both copies")
    calls = repo.get_tool_calls(
        engine=get_engine(service.env["FINAGENT_SERVICE_DATABASE_URL"]), analysis_id=out["analysis_id"]
    )
    # one row per tool, although research ran twice (deterministic ids, ON CONFLICT DO NOTHING)
    assert sorted(c["tool"] for c in calls) == [
        "get_earnings_dates",
        "get_fundamentals",
        "get_history",
        "get_stock_data",
    ]
    assert log.read_text().count("Task finagent.research[") == 4


def test_should_continue_delivered_twice_enqueues_one_next_pass(service: Service, start_worker) -> None:
    start_worker()
    out = _produce(service, "continue-twice", "MSFT", "2012-06-29")
    assert sorted(out["decisions"]) == ["continue", "continue"]
    assert out["status"] == "done"
    engine = get_engine(service.env["FINAGENT_SERVICE_DATABASE_URL"])
    row = repo.get_analysis(engine=engine, analysis_id=out["analysis_id"])
    assert row is not None and row["iteration"] == 1
    log = service.logs[0].read_text()
    # exactly one second pass ran: one research task for the whole analysis (its id, not its log
    # lines: on a loaded machine a tool timeout retries the task, which logs it again)
    assert len(set(re.findall(r"Task finagent\.research\[([0-9a-f-]+)\] received", log))) == 1
    assert "duplicate ignored" in log
