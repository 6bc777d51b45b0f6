"""A watchlist run's bulk start (``apps.watchlists.start_run`` in batches of
``START_BATCH``) against the real database, a private Redis and a real worker: every ticker
once, in the batch lane, quotas in the watchlist's order across batches, a repeat of the
date starting nothing, and the digest naming every ticker."""

from __future__ import annotations

import json
import subprocess
import sys

from sqlalchemy import text

from db.engine import get_engine
from tests.integration.conftest import Service
from tests.integration.ops_support import poll

# The producer: start the run with batches of 2 tickers (so 6 tickers make 3 batches) and a
# quota of 3 new analyses, then start it again; print both outcomes as JSON.
PRODUCER = """
import json, sys
from datetime import date
import tasks
from apps import watchlists
from apps.metering import RunQuota
from core.settings import get_settings
watchlists.START_BATCH = 2
room = int(sys.argv[2])
quota = None if room < 0 else RunQuota(
    room=room, refusal="quota: test allowance spent", retry_after=60, enqueuer="key-bulk", refuse_whole=False
)
out = []
for _ in range(2):
    s = watchlists.start_run(
        name=sys.argv[1], run_date=date(2013, 3, 1), trigger="manual", quota=quota, tenant="acme",
        settings=get_settings(),
    )
    out.append({"run": s.run["id"], "created": s.created, "enqueued": s.enqueued, "refused": s.refused})
print(json.dumps(out))
"""


def _rows(service: Service, sql: str, **params: object) -> list[tuple]:
    with get_engine(service.env["FINAGENT_SERVICE_DATABASE_URL"]).connect() as conn:
        return [tuple(r) for r in conn.execute(text(sql), params)]


def _produce(service: Service, name: str, room: int) -> list[dict]:
    proc = subprocess.run(
        [sys.executable, "-c", PRODUCER, name, str(room)],
        env=service.env,
        cwd=service.tmp,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _add(service: Service, name: str, *tickers: str) -> None:
    code = (
        "import sys; import tasks; from apps import watchlists; from core.settings import get_settings;"
        "watchlists.create_watchlist(name=sys.argv[1], tickers=sys.argv[2:], tenant='acme',"
        " settings=get_settings())"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, name, *tickers],
        env=service.env,
        cwd=service.tmp,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]


def test_a_run_of_several_batches_starts_each_ticker_once_in_the_batch_lane(
    service: Service, start_worker
) -> None:
    start_worker(FINAGENT_WATCHLISTS_FINALIZE_COUNTDOWN="1")
    # given a watchlist of six tickers of which one is unknown to the data (three batches of two)
    _add(service, "six", "AAPL", "ZZZQ", "IBM", "MSFT", "GOOG", "FB")
    # when its run is started twice, unmetered
    first, second = _produce(service, "six", -1)
    # then the first start enqueued the five known tickers and refused the unknown one
    assert first["created"] and sorted(first["enqueued"]) == ["AAPL", "FB", "GOOG", "IBM", "MSFT"]
    assert list(first["refused"]) == ["ZZZQ"] and "ZZZQ" in first["refused"]["ZZZQ"]
    # and the second started nothing
    assert not second["created"] and second["enqueued"] == [] and second["refused"] == {}
    run_id = first["run"]
    items = _rows(
        service, "SELECT symbol, status, analysis_id FROM watchlist_run_items WHERE run_id = :r", r=run_id
    )
    assert sorted((s, st) for s, st, _ in items) == [
        ("AAPL", "enqueued"),
        ("FB", "enqueued"),
        ("GOOG", "enqueued"),
        ("IBM", "enqueued"),
        ("MSFT", "enqueued"),
        ("ZZZQ", "refused"),
    ]
    # each analysis once, of the watchlist's tenant, in the batch lane, as of the run's date
    analyses = _rows(
        service,
        "SELECT symbol, tenant, state->>'lane', as_of::text, api_key_id FROM analyses ORDER BY symbol",
    )
    assert analyses == [
        (s, "acme", "batch", "2013-03-01", None) for s in ("AAPL", "FB", "GOOG", "IBM", "MSFT")
    ]
    # and the run finishes with a digest that names every ticker (the refused one with its reason)
    poll(
        lambda: _rows(service, "SELECT status FROM watchlist_runs WHERE id = :r", r=run_id) == [("done",)],
        timeout=240,
        what="run done",
    )
    (digest,) = _rows(service, "SELECT digest_json FROM watchlist_runs WHERE id = :r", r=run_id)[0]
    outcomes = {t["symbol"]: t["outcome"] for t in digest["tickers"]}
    assert outcomes == {"AAPL": "ok", "FB": "ok", "GOOG": "ok", "IBM": "ok", "MSFT": "ok", "ZZZQ": "failed"}
    assert digest["counts"]["refused"] == 1 and digest["counts"]["refused_by_quota"] == 0


def test_a_quota_across_batches_starts_the_first_tickers_in_order(service: Service) -> None:
    # given six tickers (three batches of two), the second unknown, and room for three analyses
    _add(service, "metered", "AAPL", "ZZZQ", "IBM", "MSFT", "GOOG", "FB")
    # when the run starts (no worker: only what was stored and sent is looked at)
    first, second = _produce(service, "metered", 3)
    # then the first three known tickers in the watchlist's order started; the unknown one took
    # no place; the rest were refused for the quota, with its reason
    assert first["enqueued"] == ["AAPL", "IBM", "MSFT"]
    assert first["refused"]["ZZZQ"] != "quota: test allowance spent"
    assert {s: r for s, r in first["refused"].items() if s != "ZZZQ"} == {
        "GOOG": "quota: test allowance spent",
        "FB": "quota: test allowance spent",
    }
    assert second["enqueued"] == [] and second["refused"] == {}
    # the analyses carry the quota's enqueuer, and no refused ticker has one
    assert _rows(service, "SELECT symbol, api_key_id FROM analyses ORDER BY symbol") == [
        ("AAPL", "key-bulk"),
        ("IBM", "key-bulk"),
        ("MSFT", "key-bulk"),
    ]
    refused = _rows(
        service,
        "SELECT symbol, error FROM watchlist_run_items WHERE status = 'refused' AND run_id = :r "
        "ORDER BY symbol",
        r=first["run"],
    )
    assert [s for s, _ in refused] == ["FB", "GOOG", "ZZZQ"]
