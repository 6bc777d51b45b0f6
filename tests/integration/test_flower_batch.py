"""What Flower shows of batch work, whose messages go without Celery's ``task-sent`` event
(``tasks.app.LaneAMQP``): nothing while it waits in its queue (an interactive
analysis sent at the same moment is listed at once), then every stage task from the moment
a worker receives it, with its short args, to SUCCESS. Real Flower, worker, Redis, Postgres."""

from __future__ import annotations

import json
import urllib.request

from tests.integration.conftest import Service
from tests.integration.ops_support import poll, start_process, stop_process, wait_http
from tests.support.private_services import free_port

STAGES = {f"finagent.{n}" for n in ("research", "analysis", "recommendation", "review")}


def _tasks(base: str) -> list[dict]:
    with urllib.request.urlopen(base + "/api/tasks", timeout=10) as resp:
        return list(json.loads(resp.read()).values())


def test_flower_lists_batch_tasks_once_a_worker_has_them(service: Service, start_worker) -> None:
    port = free_port()
    flower = start_process(
        service, ["flower", "--port", str(port)], "flower.log", FLOWER_UNAUTHENTICATED_API="true"
    )
    base = f"http://127.0.0.1:{port}"
    try:
        wait_http(base, "/api/workers", flower, lambda: (service.tmp / "flower.log").read_text())
        # given a watchlist run (batch work) started with no worker running, then an
        # interactive analysis sent after it
        added = service.cli("watchlist", "add", "flowerlist", "IBM", "--latest")
        assert added.returncode == 0, added.stderr
        run = service.cli("watchlist", "run", "flowerlist", "--no-wait")
        assert run.returncode == 0, run.stderr
        queued = service.cli("analyze", "AAPL", "--as-of", "2012-06-29", "--no-wait")
        assert queued.returncode == 0, queued.stderr
        interactive_id = queued.stdout.strip().splitlines()[-1].strip()

        # then Flower lists the interactive research task (its task-sent event), not the batch one
        def interactive_listed() -> list[dict]:
            return [t for t in _tasks(base) if interactive_id in str(t.get("args"))]

        poll(interactive_listed, timeout=60, what="the interactive task in Flower")
        research = [t for t in _tasks(base) if t.get("name") == "finagent.research"]
        assert [interactive_id in str(t.get("args")) for t in research] == [True], research

        # when a worker runs both
        start_worker()

        # then every stage task of the batch analysis is listed, with its short args, SUCCESS
        def batch_done() -> list[dict] | None:
            batch = [t for t in _tasks(base) if t.get("name") in STAGES and " IBM " in str(t.get("args"))]
            done = {t["name"] for t in batch if t.get("state") == "SUCCESS"}
            return batch if done == STAGES else None

        batch = poll(batch_done, timeout=180, what="the batch analysis's stage tasks SUCCESS in Flower")
        assert all(str(t["args"]).startswith("(analysis=") and "pass=1" in str(t["args"]) for t in batch), (
            batch
        )
    finally:
        stop_process(flower)
