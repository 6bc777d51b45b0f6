"""Beat (celery-redbeat), the watchlist tick and Flower, as real processes on Redis/Postgres."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from sqlalchemy import text

from db.engine import get_engine
from tests.integration.conftest import Service
from tests.integration.ops_support import free_port, poll, start_process, stop_process, wait_http

SENT = "Sending due task"


def _count(service: Service, sql: str) -> int:
    with get_engine(service.env["FINAGENT_DATABASE_URL"]).connect() as conn:
        return int(conn.execute(text(sql)).scalar_one())


def _send_tick(service: Service, now: str) -> dict:
    """Send ``finagent.watchlists.tick(now)`` from a producer subprocess and wait for its result
    (the Redis result backend), like beat would send it."""
    code = (
        "import json, sys; from pipeline.celery_app import app;"
        "r = app.send_task('finagent.watchlists.tick', kwargs={'now': sys.argv[1]});"
        "print(json.dumps(r.get(timeout=60)))"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, now],
        env=service.env,
        cwd=service.tmp,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_due_watchlist_ticked_twice_runs_once(service: Service, start_worker) -> None:
    start_worker(FINAGENT_WATCHLIST_FINALIZE_COUNTDOWN="1")
    # given a daily 21:30 New York watchlist created now, analysed at the data's last date
    added = service.cli("watchlist", "add", "nightly", "AAPL", "IBM", "--schedule", "30 21 * * *", "--latest")
    assert added.returncode == 0, added.stderr
    # when beat ticks twice at 21:31 New York the next day
    tomorrow = datetime.now(ZoneInfo("America/New_York")) + timedelta(days=1)
    local = tomorrow.replace(hour=21, minute=31, second=0, microsecond=0)
    first = _send_tick(service, local.isoformat())
    second = _send_tick(service, local.isoformat())
    # then exactly one run exists with one analysis per ticker
    assert first["due"] == [["nightly", local.date().isoformat()]]
    assert second["due"] in ([], first["due"])  # the start task may not have run yet: still one run
    poll(
        lambda: _count(service, "SELECT count(*) FROM watchlist_run_items") == 2,
        timeout=60,
        what="two run items",
    )
    assert _count(service, "SELECT count(*) FROM watchlist_runs") == 1
    assert _count(service, "SELECT count(*) FROM analyses") == 2
    poll(
        lambda: _count(service, "SELECT count(*) FROM watchlist_runs WHERE status = 'done'") == 1,
        timeout=180,
        what="run done",
    )
    # a third tick and a manual re-run of the same date add nothing
    assert _send_tick(service, local.isoformat())["due"] == []
    rerun = service.cli("watchlist", "run", "nightly", "--date", local.date().isoformat(), "--format", "json")
    assert rerun.returncode == 0, rerun.stderr
    digest = json.loads(rerun.stdout)
    assert {t["symbol"] for t in digest["tickers"]} == {"AAPL", "IBM"}
    assert all(t["as_of"] == "2013-03-01" and t["outcome"] == "ok" for t in digest["tickers"]), digest[
        "tickers"
    ]
    assert _count(service, "SELECT count(*) FROM analyses") == 2


def test_two_beat_processes_one_scheduler_acts(service: Service) -> None:
    env = {"FINAGENT_WATCHLIST_TICK_SECONDS": "1", "FINAGENT_BEAT_LOCK_TIMEOUT": "10"}
    beats = [start_process(service, ["beat", "--loglevel", "INFO"], f"beat-{i}.log", **env) for i in range(2)]
    logs = [service.tmp / "beat-0.log", service.tmp / "beat-1.log"]
    try:

        def sends() -> list[int]:
            return [log.read_text().count(SENT) for log in logs]

        # one beat holds the lock and sends ticks; the other waits for the lock
        poll(lambda: max(sends()) >= 3, timeout=60, what="three ticks from one beat")
        counts = sends()
        active = counts.index(max(counts))
        standby = 1 - active
        assert counts[standby] == 0, counts
        assert "Acquired lock" in logs[active].read_text()
        assert "Acquired lock" not in logs[standby].read_text()

        # when the active beat stops (releasing its lock), the standby takes over
        stop_process(beats[active])
        poll(lambda: sends()[standby] >= 2, timeout=60, what="standby beat takes over")
    finally:
        for proc in beats:
            stop_process(proc)


def test_flower_lists_the_stage_tasks_of_a_finished_analysis(service: Service, start_worker) -> None:
    port = free_port()
    flower = start_process(
        service,
        ["flower", "--port", str(port)],
        "flower.log",
        FLOWER_UNAUTHENTICATED_API="true",
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_http(base, "/api/workers", flower, lambda: (service.tmp / "flower.log").read_text())
        start_worker()
        out = service.analyze_json("MSFT", "--as-of", "2012-06-29")
        assert out["status"] == "done"
        names = {
            "finagent.research",
            "finagent.analysis",
            "finagent.recommendation",
            "finagent.review",
            "finagent.should_continue",
        }

        def listed() -> dict[str, str] | None:
            with urllib.request.urlopen(base + "/api/tasks", timeout=10) as resp:
                tasks = json.loads(resp.read())
            states = {t["name"]: t["state"] for t in tasks.values() if t.get("name") in names}
            return states if set(states) == names and set(states.values()) == {"SUCCESS"} else None

        states = poll(listed, timeout=60, what="stage tasks in Flower")
        assert states == dict.fromkeys(names, "SUCCESS")
    finally:
        stop_process(flower)
