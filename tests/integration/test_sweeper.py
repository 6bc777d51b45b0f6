"""``finagent sweeper`` against a real Redis broker and PostgreSQL: when the broker loses its
messages (what a Redis restart without persistence does), every analysis that has no message
left is re-driven at once, not after its lease; messages queued or delivered to a worker and
not yet acknowledged are seen and left alone."""

from __future__ import annotations

from typing import Any

import redis
from sqlalchemy import text

from apps.sweeper import EPOCH_KEY, HEARTBEAT_KIND
from db import heartbeat_repo
from db.engine import get_engine
from pipeline.steps.inventory import redis_inventory
from tasks.app import app
from tests.integration.conftest import Service
from tests.integration.ops_support import poll, start_process, stop_process


def _rows(service: Service) -> dict[str, dict[str, Any]]:
    with get_engine(service.env["FINAGENT_SERVICE_DATABASE_URL"]).connect() as conn:
        found = conn.execute(text("SELECT id, status, recoveries, lease_expires_at FROM analyses"))
        return {row.id: dict(row._mapping) for row in found}


def _enqueue(service: Service, symbol: str, as_of: str) -> str:
    proc = service.cli("analyze", symbol, "--as-of", as_of, "--no-wait")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout.strip().splitlines()[-1].strip()


def _inventory(service: Service) -> Any:
    with app.connection_for_write(service.env["FINAGENT_SERVICE_BROKER_URL"]) as conn:
        return redis_inventory(conn.default_channel, ["research"])


def test_messages_queued_or_delivered_and_unacked_are_in_the_inventory(service: Service) -> None:
    analysis_id = _enqueue(service, "AAPL", "2012-06-29")
    queued = _inventory(service)
    assert queued is not None and queued.analysis_ids == {analysis_id} and queued.messages == 1
    (task_id,) = queued.task_ids
    # a consumer takes the message and has not acknowledged it (a worker running the stage):
    # kombu keeps it in the unacked hash, where the inventory still finds it
    with app.connection_for_write(service.env["FINAGENT_SERVICE_BROKER_URL"]) as conn:
        research = conn.SimpleQueue("research", no_ack=False)
        message = research.get(block=True, timeout=10)
        assert redis.Redis.from_url(service.env["FINAGENT_SERVICE_BROKER_URL"]).llen("research") == 0
        taken = _inventory(service)
        assert taken is not None and taken.analysis_ids == {analysis_id} and taken.task_ids == {task_id}
        assert taken.holds({"id": "another", "lease_owner": task_id})
        message.ack()
        research.close()
    gone = _inventory(service)
    assert (
        gone is not None and gone.messages == 0 and not gone.holds({"id": analysis_id, "lease_owner": None})
    )


def test_the_sweeper_re_drives_at_once_what_the_broker_lost_and_a_worker_finishes_it(
    service: Service, start_worker
) -> None:
    # given three analyses waiting in the research queue (no worker yet), their leases 300 s
    ids = {
        _enqueue(service, s, d)
        for s, d in (("AAPL", "2012-06-29"), ("MSFT", "2011-03-31"), ("IBM", "2010-06-30"))
    }
    broker = redis.Redis.from_url(service.env["FINAGENT_SERVICE_BROKER_URL"])
    assert broker.llen("research") == 3
    # and a sweeper whose lease sweep cannot be what re-drives them (once an hour)
    sweeper = start_process(service, ["sweeper"], "sweeper.log", FINAGENT_DURABILITY_SWEEP_SECONDS="3600")
    engine = get_engine(service.env["FINAGENT_SERVICE_DATABASE_URL"])
    try:
        poll(
            lambda: heartbeat_repo.latest(engine=engine, kind=HEARTBEAT_KIND),
            timeout=120,
            what=f"a sweeper heartbeat ({(service.tmp / 'sweeper.log').read_text()[-2000:]})",
        )
        poll(lambda: broker.get(EPOCH_KEY), timeout=60, what="the broker marker")
        # its first look found every message in its queue: nothing was re-driven
        assert {r["recoveries"] for r in _rows(service).values()} == {0}

        # when the broker loses everything it held, as a Redis restart without persistence does
        broker.flushdb()

        # then every analysis is re-driven from its row although no lease ran out
        def redriven() -> bool:
            rows = _rows(service)
            return {r["recoveries"] for r in rows.values()} == {1} and broker.llen("research") == 3

        poll(redriven, timeout=120, what=f"re-drives ({(service.tmp / 'sweeper.log').read_text()[-3000:]})")
        inventory = _inventory(service)
        assert inventory is not None and inventory.analysis_ids == ids
        row = heartbeat_repo.latest(engine=engine, kind=HEARTBEAT_KIND)
        assert row is not None and row["detail"]["broker_lost_messages_at"]
        assert row["detail"]["last_lost_sweep"]["redriven"] == 3
        log = (service.tmp / "sweeper.log").read_text()
        assert (
            log.count("no message left in the broker for research; re-driven from research (recovery 1 of 3)")
            == 3
        )
        # and a worker finishes them, each once
        start_worker()
        poll(
            lambda: {r["status"] for r in _rows(service).values()} == {"done"},
            timeout=240,
            what="the re-driven analyses done",
        )
        assert {r["recoveries"] for r in _rows(service).values()} == {1}
    finally:
        stop_process(sweeper)
    assert sweeper.returncode == 0, (service.tmp / "sweeper.log").read_text()[-3000:]
