"""Beat (celery-redbeat), the watchlist tick and Flower, as real processes on Redis/Postgres."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.error
import urllib.request
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from sqlalchemy import text

from db.engine import get_engine
from tests.integration.conftest import Service
from tests.integration.ops_support import poll, start_process, stop_process, wait_http
from tests.support.private_services import free_port

SENT = "Sending due task"


def _count(service: Service, sql: str) -> int:
    with get_engine(service.env["FINAGENT_SERVICE_DATABASE_URL"]).connect() as conn:
        return int(conn.execute(text(sql)).scalar_one())


def _send_tick(service: Service, now: str) -> dict:
    """Send ``finagent.watchlists.tick(now)`` from a producer subprocess and wait for its result
    (the Redis result backend), like beat would send it."""
    code = (
        "import json, sys; from tasks.app import app;"
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
    start_worker(FINAGENT_WATCHLISTS_FINALIZE_COUNTDOWN="1")
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
    env = {"FINAGENT_WATCHLISTS_TICK_SECONDS": "1", "FINAGENT_SERVICE_BEAT_LOCK_TIMEOUT": "10"}
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
            "finagent.review",  # ends the pass itself: should_continue is no task of its own
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


def _flower_tasks(base: str) -> dict[str, dict]:
    with urllib.request.urlopen(base + "/api/tasks", timeout=10) as resp:
        return json.loads(resp.read())


def test_flower_shows_short_args_stage_progress_and_no_housekeeping(service: Service, start_worker) -> None:
    """Flower's /api/tasks against a real worker, beat and the scripted LLM: each stage task's
    args say analysis id, symbol, as_of and pass; a running stage is in state PROGRESS with a
    readable summary; beat's ticks are not listed."""
    import threading

    from tests.llm.responders import AgentPlayer
    from tests.llm.server import ScriptedLLM

    # given a model server that holds the technical agent's second call until released, so the
    # analysis stage stays in progress (its first LLM call already reported) while we look
    release = threading.Event()
    player = AgentPlayer()
    calls: list[int] = []

    def held(body: dict):
        calls.append(1)
        if len(calls) == 2:
            release.wait(timeout=90)
        return player(body)

    llm = ScriptedLLM().start()
    llm.responder = held
    port = free_port()
    flower = start_process(
        service, ["flower", "--port", str(port)], "flower.log", FLOWER_UNAUTHENTICATED_API="true"
    )
    beat = start_process(
        service, ["beat", "--loglevel", "INFO"], "beat.log", FINAGENT_WATCHLISTS_TICK_SECONDS="1"
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_http(base, "/api/workers", flower, lambda: (service.tmp / "flower.log").read_text())
        start_worker(
            FINAGENT_LLM_MODEL="openai/scripted",
            FINAGENT_LLM_API_BASE=llm.url,
            FINAGENT_LLM_API_KEY="sk-test",
        )
        queued = service.cli("analyze", "AAPL", "--as-of", "2012-06-29", "--no-wait")
        assert queued.returncode == 0, queued.stderr
        analysis_id = queued.stdout.strip().splitlines()[-1].strip()
        short = f"(analysis={analysis_id} AAPL as_of=2012-06-29 pass=1)"

        # when the analysis stage waits for its second model reply
        seen: list = []

        def in_progress() -> dict | None:
            for task in _flower_tasks(base).values():
                if task.get("name") == "finagent.analysis":
                    seen.append((task.get("state"), task.get("result"), len(calls)))
                result = str(task.get("result"))
                if task.get("name") == "finagent.analysis" and result.startswith("analysis running: agent="):
                    return task
            return None

        try:
            running = poll(in_progress, timeout=60, interval=0.2, what="analysis task in PROGRESS")
        except AssertionError:
            raise AssertionError(
                f"no heartbeat of the analysis stage in Flower; last seen: {seen[-3:]}"
            ) from None
        # then Flower shows its progress and whose it is
        assert running["state"] == "PROGRESS" and running["args"] == short
        # the latest heartbeat: the technical agent's first model call or its tool call
        assert "agent=technical" in running["result"] and analysis_id in running["result"]
        assert analysis_id in running["result"]
        release.set()

        names = {f"finagent.{n}" for n in ("research", "analysis", "recommendation", "review")}

        def finished() -> dict[str, dict] | None:
            tasks = {t["name"]: t for t in _flower_tasks(base).values() if t.get("name") in names}
            done = set(tasks) == names and all(t["state"] == "SUCCESS" for t in tasks.values())
            return tasks if done else None

        tasks = poll(finished, timeout=120, what="stage tasks SUCCESS in Flower")
        assert {name: t["args"] for name, t in tasks.items()} == dict.fromkeys(names, short)
        # beat ticked meanwhile (its log), yet Flower does not list the ticks
        assert (service.tmp / "beat.log").read_text().count(SENT) >= 2
        listed = {t.get("name") for t in _flower_tasks(base).values()}
        assert "finagent.watchlists.tick" not in listed, listed
    finally:
        release.set()
        stop_process(beat)
        stop_process(flower)
        llm.stop()


def _procfile_flower(service: Service, port: int, **extra_env: str) -> subprocess.Popen[bytes]:
    """The Procfile's ``flower`` line as honcho runs it (``/bin/sh -c`` in the repository), on
    ``port`` (a second ``--port`` wins: click keeps the last value) with ``service.env``."""
    from tests.test_procfile import ROOT, procfile_commands

    command = procfile_commands(ROOT / "Procfile")["flower"]
    log = service.tmp / f"flower-{port}.log"
    service.logs.append(log)
    with log.open("wb") as fh:
        return subprocess.Popen(
            ["/bin/sh", "-c", f"{command} --port {port}"],
            cwd=ROOT,
            env={**service.env, **extra_env},
            stdout=fh,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )


def _status(url: str, headers: dict[str, str] | None = None) -> int:
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            return int(resp.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def test_the_procfile_s_flower_serves_its_api_and_a_password_closes_it(service: Service) -> None:
    """docs/operations.md promises Flower's HTTP API with the shipped Procfile: ``/api/tasks`` answers 200
    (Flower 2 answers 401 unless authentication or ``FLOWER_UNAUTHENTICATED_API`` is set);
    with ``FLOWER_BASIC_AUTH`` (e.g. from ``.env``) it needs the password."""
    import base64

    open_port, closed_port = free_port(), free_port()
    opened = _procfile_flower(service, open_port)
    closed = _procfile_flower(service, closed_port, FLOWER_BASIC_AUTH="ops:s3cret-pass")
    try:
        for port, proc in ((open_port, opened), (closed_port, closed)):
            log = service.tmp / f"flower-{port}.log"
            wait_http(f"http://127.0.0.1:{port}", "/healthcheck", proc, lambda log=log: log.read_text())
        assert _status(f"http://127.0.0.1:{open_port}/api/tasks") == 200
        assert _status(f"http://127.0.0.1:{closed_port}/api/tasks") == 401
        token = base64.b64encode(b"ops:s3cret-pass").decode()
        authorized = {"Authorization": f"Basic {token}"}
        assert _status(f"http://127.0.0.1:{closed_port}/api/tasks", authorized) == 200
    finally:
        stop_process(opened)
        stop_process(closed)
