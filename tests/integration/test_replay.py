"""``finagent replay`` in service mode: analyses run by a real worker on Redis and PostgreSQL
(JSONB: no key order), then replayed with the worker stopped, the broker and the data provider
unreachable. A replay reads only the rows."""

from __future__ import annotations

import json
import os
import signal
from typing import Any

import sqlalchemy as sa

from db import repo
from db.engine import get_engine
from tests.integration.conftest import Service

#: What a replay runs with: nothing but the database. Port 1 answers nobody; the provider
#: module does not exist, so any attempt to build a provider fails loudly.
NO_SERVICES = {
    "FINAGENT_SERVICE_BROKER_URL": "redis://127.0.0.1:1/0",
    "FINAGENT_DATA_PROVIDER": "tests.support.no_such_module:provider",
}


def _stop(proc: Any) -> None:
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(timeout=30)


def _replay(service: Service, analysis_id: str) -> Any:
    return service.cli("replay", analysis_id, extra_env=NO_SERVICES)


def test_replays_are_byte_identical_without_worker_broker_or_provider(service: Service, start_worker) -> None:
    # given three recorded analyses: a plain one, one whose first data read timed out and was
    # retried inside the tool (two attempt rows), and one that found no data on its first pass
    # and ran a second pass (should_continue re-enqueued it)
    worker = start_worker()
    plain = service.analyze_json("AAPL", "--as-of", "2012-06-29")
    _stop(worker)
    worker = start_worker(FINAGENT_DATA_PROVIDER="tests.support.providers:timeout_once")
    retried = service.analyze_json("MSFT", "--as-of", "2010-06-30")
    _stop(worker)
    worker = start_worker(FINAGENT_DATA_PROVIDER="tests.support.providers:no_data_once")
    two_passes = service.analyze_json("IBM", "--as-of", "2011-03-15")
    _stop(worker)
    assert two_passes["iteration"] == 1 and retried["status"] == plain["status"] == "done"

    for out in (plain, retried, two_passes):
        # when each is replayed with nothing running but PostgreSQL
        proc = _replay(service, out["analysis_id"])
        # then the report is byte-identical (canonical JSON), and equal to what analyze printed
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        assert proc.stdout.startswith("identical sha256=")
        shown = service.cli("replay", out["analysis_id"], "--show", extra_env=NO_SERVICES)
        replayed = json.loads(shown.stdout.split("identical sha256=")[0])
        assert replayed == json.loads(json.dumps(out))


def test_an_altered_tool_row_makes_the_replay_print_a_diff_and_fail(service: Service, start_worker) -> None:
    worker = start_worker()
    out = service.analyze_json("AAPL", "--as-of", "2012-06-29")
    _stop(worker)
    engine = get_engine(service.env["FINAGENT_SERVICE_DATABASE_URL"])
    quote = next(
        r
        for r in repo.get_tool_calls(engine=engine, analysis_id=out["analysis_id"])
        if r["tool"] == "get_stock_data"
    )
    volume = quote["result"]["volume"]
    altered = {**quote["result"], "volume": volume + 1000}
    with engine.begin() as conn:
        conn.execute(
            sa.text("UPDATE tool_calls SET result = CAST(:r AS JSONB) WHERE id = :id"),
            {"r": json.dumps(altered), "id": quote["id"]},
        )

    proc = _replay(service, out["analysis_id"])

    assert proc.returncode == 1, proc.stderr[-3000:]
    assert f'-    "volume": {volume}\n' in proc.stdout
    assert f'+    "volume": {volume + 1000}\n' in proc.stdout
    assert f"--- recorded/{out['analysis_id']}/report.json" in proc.stdout
    assert "report differs" in proc.stderr


def test_a_deleted_tool_row_is_reported_as_not_recorded(service: Service, start_worker) -> None:
    worker = start_worker()
    out = service.analyze_json("AAPL", "--as-of", "2012-06-29")
    _stop(worker)
    engine = get_engine(service.env["FINAGENT_SERVICE_DATABASE_URL"])
    with engine.begin() as conn:
        conn.execute(
            sa.text("DELETE FROM tool_calls WHERE analysis_id = :a AND tool = 'get_history'"),
            {"a": out["analysis_id"]},
        )

    proc = _replay(service, out["analysis_id"])

    assert proc.returncode == 2
    assert "get_history" in proc.stderr and "not recorded" in proc.stderr
