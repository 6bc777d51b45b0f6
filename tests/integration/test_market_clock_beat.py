"""A scheduled (beat) watchlist run fires on the wall clock's date; on offline data that ends
2013-03-01 its analyses run as of the data's last day instead of failing every ticker. An
explicit date stays strict. Service mode on the real Redis and PostgreSQL (no worker needed:
only the rows written and the messages sent are checked)."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import date

from db import ops_repo
from db.engine import get_engine
from tests.integration.conftest import Service

START = (
    "import json, sys; from datetime import date; import tasks; from apps import watchlists;"
    "from core.settings import get_settings;"
    "s = watchlists.start_run(name=sys.argv[1], run_date=date.fromisoformat(sys.argv[2]),"
    " trigger=sys.argv[3], schedule_finalize=False, settings=get_settings());"
    "print(json.dumps({'id': s.run['id'], 'enqueued': s.enqueued, 'refused': s.refused}))"
)


def _start(service: Service, name: str, day: str, trigger: str) -> dict:
    proc = subprocess.run(
        [sys.executable, "-c", START, name, day, trigger],
        env=service.env,
        cwd=service.tmp,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_a_scheduled_run_on_a_date_past_the_data_analyses_its_last_day(service: Service) -> None:
    assert service.cli("watchlist", "add", "nightly", "AAPL", "MSFT").returncode == 0
    assert service.cli("watchlist", "add", "manual", "AAPL").returncode == 0
    # beat fires on Monday 2026-11-23; the embedded data ends Friday 2013-03-01
    run = _start(service, "nightly", "2026-11-23", "beat")
    assert run["refused"] == {} and sorted(run["enqueued"]) == ["AAPL", "MSFT"]
    engine = get_engine(service.env["FINAGENT_SERVICE_DATABASE_URL"])
    items = ops_repo.run_items(engine=engine, run_id=run["id"])
    assert [(i["symbol"], i["as_of"]) for i in items] == [
        ("AAPL", date(2013, 3, 1)),
        ("MSFT", date(2013, 3, 1)),
    ]
    # a date asked for by hand is not moved: the data cannot serve it, the ticker is refused
    manual = _start(service, "manual", "2026-11-23", "manual")
    assert manual["enqueued"] == [] and "2026-11-23" in manual["refused"]["AAPL"]
