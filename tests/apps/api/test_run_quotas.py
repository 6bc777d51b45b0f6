"""Watchlist runs count against the quotas: a run started over HTTP meters each ticker against
the calling key (in flight, per minute), a scheduled run against its tenant (analyses a UTC day),
and the run's answer and its digest list every refused ticker with the reason. Caps on
watchlists and tickers per tenant. Real uvicorn gateway on a migrated SQLite file (lifespan off:
enqueued analyses stay ``queued``, which is what "in flight" means)."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, date, datetime, timedelta

import httpx
import sqlalchemy as sa

from apps import watchlists
from apps.api.auth import create_key
from core.settings import Settings
from core.tenancy import SCHEDULED_ENQUEUER
from db import ops_repo
from db.engine import get_engine
from tests.apps.api.conftest import Gateway

RUN_DATE = "2012-06-29"  # a Friday inside the embedded dataset (AAPL, FB, GOOG, IBM, MSFT)
FIVE = ["AAPL", "MSFT", "IBM", "GOOG", "FB"]


def _analyses(settings: Settings) -> list[dict[str, object]]:
    with get_engine(settings.service.effective_database_url).connect() as conn:
        rows = conn.execute(sa.text("SELECT symbol, api_key_id, tenant FROM analyses ORDER BY symbol"))
        return [dict(r._mapping) for r in rows]


def _count(settings: Settings, table: str) -> int:
    with get_engine(settings.service.effective_database_url).connect() as conn:
        return int(conn.execute(sa.text(f"SELECT count(*) FROM {table}")).scalar_one())


def test_a_run_meters_each_ticker_against_the_keys_in_flight_quota(make_gateway: Gateway) -> None:
    base, settings = make_gateway(api_max_in_flight=3, api_analyses_per_minute=100)
    key = create_key(name="alice", tenant="acme", settings=settings)
    key_id = key.split("_")[1]
    with httpx.Client(base_url=base, headers={"X-API-Key": key}, timeout=60) as c:
        assert c.post("/watchlists", json={"name": "five", "tickers": FIVE}).status_code == 201
        assert c.post("/watchlists", json={"name": "more", "tickers": ["AAPL"]}).status_code == 201
        run = c.post("/watchlists/five/runs", json={"run_date": RUN_DATE})
        assert run.status_code == 202, run.text
        body = run.json()
        # started in the watchlist's order up to the key's 3 places; the rest refused with why
        assert body["enqueued"] == ["AAPL", "MSFT", "IBM"]
        assert sorted(body["refused"]) == ["FB", "GOOG"]
        for reason in body["refused"].values():
            assert reason.startswith("quota: 3 analyses in flight for API key 'alice'"), reason
            assert f"fa_{key_id}_" in reason and key.split("_", 2)[2] not in reason
        # the run's analyses are the key's: they fill its places, so /analyze is refused now
        assert {r["api_key_id"] for r in _analyses(settings)} == {key_id}
        refused = c.post("/analyze", json={"symbol": "AAPL", "as_of": RUN_DATE})
        assert refused.status_code == 429 and "3 analyses in flight" in refused.json()["detail"]
        # no room at all: the next run is refused whole, and nothing of it is stored
        runs_before = _count(settings, "watchlist_runs")
        whole = c.post("/watchlists/more/runs", json={"run_date": RUN_DATE})
        assert whole.status_code == 429, whole.text
        assert whole.headers["Retry-After"] == "5"
        assert "3 analyses in flight for API key 'alice'" in whole.json()["detail"]
        assert _count(settings, "watchlist_runs") == runs_before and len(_analyses(settings)) == 3
        # a repeat of the started run is not a new run: it answers the run, no 429
        again = c.post("/watchlists/five/runs", json={"run_date": RUN_DATE})
        assert again.status_code == 202 and again.json()["created"] is False
        assert again.json()["enqueued"] == [] and again.json()["refused"] == {}


def test_a_run_takes_one_per_minute_token_per_ticker(make_gateway: Gateway) -> None:
    base, settings = make_gateway(api_max_in_flight=100, api_analyses_per_minute=3)
    key = create_key(name="bob", tenant="acme", settings=settings)
    with httpx.Client(base_url=base, headers={"X-API-Key": key}, timeout=60) as c:
        assert c.post("/watchlists", json={"name": "five", "tickers": FIVE}).status_code == 201
        # one token spent before the run: 2 of the bucket's 3 remain for it
        assert c.post("/analyze", json={"symbol": "IBM", "as_of": RUN_DATE}).status_code == 202
        body = c.post("/watchlists/five/runs", json={"run_date": RUN_DATE}).json()
        assert body["enqueued"] == ["AAPL", "MSFT"]
        assert sorted(body["refused"]) == ["FB", "GOOG", "IBM"]
        reason = body["refused"]["IBM"]
        assert reason.startswith("quota: 3 analyses per minute for API key 'bob'"), reason
        assert "2 left for this run" in reason
        # the run took its two tokens: the bucket is empty for the next request
        after = c.post("/analyze", json={"symbol": "IBM", "as_of": RUN_DATE})
        assert after.status_code == 429 and "3 analyses per minute" in after.json()["detail"]
        assert 1 <= int(after.headers["Retry-After"]) <= 20


def test_a_ticker_refused_by_validation_costs_no_place(make_gateway: Gateway) -> None:
    base, settings = make_gateway(api_max_in_flight=2, api_analyses_per_minute=100)
    key = create_key(name="carol", settings=settings)
    with httpx.Client(base_url=base, headers={"X-API-Key": key}, timeout=60) as c:
        created = c.post("/watchlists", json={"name": "w", "tickers": ["ZZZZ", "AAPL", "MSFT", "IBM"]})
        assert created.status_code == 201
        body = c.post("/watchlists/w/runs", json={"run_date": RUN_DATE}).json()
    assert body["enqueued"] == ["AAPL", "MSFT"]
    assert "not in the embedded dataset" in body["refused"]["ZZZZ"]
    assert body["refused"]["IBM"].startswith("quota: 2 analyses in flight")


def test_the_digest_lists_the_tickers_refused_for_a_quota(make_gateway: Gateway) -> None:
    base, settings = make_gateway(api_max_in_flight=2, api_analyses_per_minute=100)
    key = create_key(name="dave", tenant="acme", settings=settings)
    with httpx.Client(base_url=base, headers={"X-API-Key": key}, timeout=60) as c:
        assert (
            c.post("/watchlists", json={"name": "w", "tickers": ["AAPL", "MSFT", "IBM"]}).status_code == 201
        )
        run = c.post("/watchlists/w/runs", json={"run_date": RUN_DATE}).json()
        # the run closes once its timeout passed (the two analyses never ran: no worker)
        later = datetime.now(UTC) + timedelta(seconds=settings.watchlists.run_timeout + 60)
        assert watchlists.finalize_run(run_id=run["run_id"], now=later, settings=settings)
        digest = c.get(f"/watchlists/w/runs/{RUN_DATE}/digest", params={"format": "json"}).json()
        markdown = c.get(f"/watchlists/w/runs/{RUN_DATE}/digest", params={"format": "markdown"}).text
        page = c.get(f"/watchlists/w/runs/{RUN_DATE}/digest").text
    assert digest["counts"]["refused"] == digest["counts"]["refused_by_quota"] == 1
    (ibm,) = [t for t in digest["tickers"] if t["symbol"] == "IBM"]
    assert ibm["outcome"] == "failed" and ibm["error"].startswith(
        "quota: 2 analyses in flight for API key 'dave'"
    )
    assert "Not started: 1 tickers (1 for a quota, 0 refused by validation)" in markdown
    assert "- **IBM**: quota: 2 analyses in flight for API key 'dave'" in markdown
    assert "Not started: 1 tickers" in page and "<strong>IBM</strong>: quota: 2 analyses" in page


def test_scheduled_runs_count_against_the_tenant_per_utc_day(make_gateway: Gateway) -> None:
    base, settings = make_gateway(watchlists_tenant_scheduled_analyses_per_day=3)
    engine = get_engine(settings.service.effective_database_url)
    day = date(2012, 6, 29)
    for name, tickers in (("first", ["AAPL", "MSFT"]), ("second", ["IBM", "GOOG"]), ("third", ["FB"])):
        watchlists.create_watchlist(name=name, tickers=tickers, settings=settings, tenant="acme")
    watchlists.create_watchlist(name="first", tickers=["AAPL"], settings=settings, tenant="globex")

    first = watchlists.start_scheduled_run(name="first", run_date=day, tenant="acme", settings=settings)
    second = watchlists.start_scheduled_run(name="second", run_date=day, tenant="acme", settings=settings)
    assert first.enqueued == ["AAPL", "MSFT"] and first.refused == {}
    assert second.enqueued == ["IBM"] and list(second.refused) == ["GOOG"]
    assert second.refused["GOOG"].startswith("quota: tenant 'acme' may start 3 analyses a UTC day")
    # the allowance is the tenant's: deleting a watchlist (and its runs) gives nothing back
    watchlists.delete_watchlist(name="first", settings=settings, tenant="acme")
    third = watchlists.start_scheduled_run(name="third", run_date=day, tenant="acme", settings=settings)
    assert third.enqueued == [] and list(third.refused) == ["FB"]
    # with no room the run is still recorded, every ticker refused, so its digest says why
    (item,) = ops_repo.run_items(engine=engine, run_id=third.run["id"])
    assert item["status"] == "refused" and item["error"].startswith("quota: tenant 'acme'")
    # another tenant's allowance is its own
    other = watchlists.start_scheduled_run(name="first", run_date=day, tenant="globex", settings=settings)
    assert other.enqueued == ["AAPL"]
    scheduled = [r for r in _analyses(settings) if r["api_key_id"] == SCHEDULED_ENQUEUER]
    assert sorted((r["tenant"], r["symbol"]) for r in scheduled) == [
        ("acme", "AAPL"),
        ("acme", "IBM"),
        ("acme", "MSFT"),
        ("globex", "AAPL"),
    ]
    # a manual run of the CLI (no key, no quota) is not the schedule's: unmetered
    manual = watchlists.start_run(
        name="third", run_date=date(2012, 6, 28), trigger="manual", settings=settings, tenant="acme"
    )
    assert manual.enqueued == ["FB"]
    # a run's analyses are batch work, whoever started the run (they yield to interactive ones)
    with get_engine(settings.service.effective_database_url).connect() as conn:
        lanes = conn.execute(sa.text("SELECT DISTINCT state->>'lane' FROM analyses")).scalars().all()
    assert lanes == ["batch"]
    assert base  # the gateway only provides the migrated database here


def test_tenant_caps_on_watchlists_and_tickers(make_gateway: Gateway) -> None:
    base, settings = make_gateway(
        watchlists_tenant_max_watchlists=2, watchlists_tenant_max_tickers=4, watchlists_max_tickers=3
    )
    key = create_key(name="erin", tenant="acme", settings=settings)
    other = create_key(name="frank", tenant="globex", settings=settings)
    with httpx.Client(base_url=base, headers={"X-API-Key": key}, timeout=60) as c:
        too_long = c.post("/watchlists", json={"name": "big", "tickers": FIVE[:4]})
        assert too_long.status_code == 422
        assert too_long.json()["detail"].startswith("tickers: a watchlist holds at most 3 tickers")
        assert (
            c.post("/watchlists", json={"name": "a", "tickers": ["AAPL", "MSFT", "IBM"]}).status_code == 201
        )
        over = c.post("/watchlists", json={"name": "b", "tickers": ["GOOG", "FB"]})
        assert over.status_code == 409
        assert "tenant 'acme' would watch 5 tickers in all (limit 4" in over.json()["detail"]
        assert c.post("/watchlists", json={"name": "b", "tickers": ["GOOG"]}).status_code == 201
        third = c.post("/watchlists", json={"name": "c", "tickers": ["FB"]})
        assert third.status_code == 409 and "has 2 watchlists (limit 2" in third.json()["detail"]
        grow = c.patch("/watchlists/b", json={"tickers": ["GOOG", "FB"]})
        assert grow.status_code == 409 and "would watch 5 tickers" in grow.json()["detail"]
        assert c.get("/watchlists/b").json()["tickers"] == ["GOOG"]  # unchanged
        # shrinking one list makes room in the other
        assert c.patch("/watchlists/a", json={"tickers": ["AAPL"]}).status_code == 200
        assert c.patch("/watchlists/b", json={"tickers": ["GOOG", "FB", "IBM"]}).status_code == 200
    with httpx.Client(base_url=base, headers={"X-API-Key": other}, timeout=60) as c:
        assert c.post("/watchlists", json={"name": "a", "tickers": FIVE[:3]}).status_code == 201
    assert _count(settings, "watchlists") == 3


def test_concurrent_creations_never_pass_the_watchlist_cap(make_gateway: Gateway) -> None:
    base, settings = make_gateway(watchlists_tenant_max_watchlists=2)
    key = create_key(name="gina", tenant="acme", settings=settings)

    def post(i: int) -> int:
        return httpx.post(
            f"{base}/watchlists",
            json={"name": f"w{i}", "tickers": ["AAPL"]},
            headers={"X-API-Key": key},
            timeout=60,
        ).status_code

    with ThreadPoolExecutor(max_workers=8) as pool:
        statuses = list(pool.map(post, range(8)))
    assert sorted(statuses) == [201, 201] + [409] * 6
    assert _count(settings, "watchlists") == 2
