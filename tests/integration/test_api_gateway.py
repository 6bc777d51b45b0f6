"""The HTTP gateway as a real uvicorn process against a real worker, Redis and Postgres."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest
import redis
from sqlalchemy import text

from db.engine import get_engine
from tests.integration.conftest import Service
from tests.integration.ops_support import Http, poll, start_process, stop_process, wait_http
from tests.support.private_services import free_port

TERMINAL = ("done", "failed")


@pytest.fixture
def api(service: Service) -> Iterator[Http]:
    """``finagent serve`` on a free port with a fresh API key (created by the CLI)."""
    proc_key = service.cli("apikey", "create", "tests")
    assert proc_key.returncode == 0, proc_key.stderr
    key = proc_key.stdout.strip()
    port = free_port()
    proc = start_process(service, ["serve", "--host", "127.0.0.1", "--port", str(port)], "api.log")
    base = f"http://127.0.0.1:{port}"
    try:
        wait_http(base, "/openapi.json", proc, lambda: (service.tmp / "api.log").read_text())
        yield Http(base=base, key=key)
    finally:
        stop_process(proc)
    # secrets never reach the logs
    assert key not in (service.tmp / "api.log").read_text()


def _count(service: Service, sql: str) -> int:
    with get_engine(service.env["FINAGENT_SERVICE_DATABASE_URL"]).connect() as conn:
        return int(conn.execute(text(sql)).scalar_one())


def _wait_done(api: Http, status_url: str) -> dict:
    def finished() -> dict | None:
        status, body = api.get(status_url)
        assert status == 200, body
        return body if body["status"] in TERMINAL else None

    return poll(finished, timeout=180, what=f"{status_url} finished")


@pytest.fixture
def stopped_at_end() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Processes the test appends are stopped at its end (TERM, then KILL)."""
    procs: list[subprocess.Popen[bytes]] = []
    yield procs
    for proc in procs:
        stop_process(proc)


def test_auth_validation_and_health(
    service: Service, api: Http, start_worker, stopped_at_end: list[subprocess.Popen[bytes]]
) -> None:
    # given no worker and no sweeper yet: health names both, refused requests need neither
    status, body = api.get("/health", key=None)
    assert status == 503 and body["failing"] == ["worker", "sweeper"], body
    assert body["checks"]["database"] == "ok" and body["checks"]["broker"] == "ok"
    assert "start `finagent sweeper`" in body["checks"]["sweeper"], body
    # the recovery sweeper is reported on its own, whatever the workers: still no worker
    stopped_at_end.append(start_process(service, ["sweeper"], "sweeper.log"))

    def swept() -> tuple[int, dict] | None:
        status, body = api.get("/health", key=None)
        return (status, body) if "sweeper" not in body["failing"] else None

    status, body = poll(swept, timeout=120, what="the sweeper's heartbeat in /health")
    assert status == 503 and body["failing"] == ["worker"], body
    assert body["checks"]["sweeper"].startswith("ok (swept "), body

    # auth: missing → 401, unknown/malformed → 403, revoked → 403
    assert api.post("/analyze", {"symbol": "AAPL"}, key=None)[0] == 401
    assert api.post("/analyze", {"symbol": "AAPL"}, key="fa_000000000000_" + "x" * 43)[0] == 403
    assert api.post("/analyze", {"symbol": "AAPL"}, key="nonsense")[0] == 403
    assert api.get("/analyses", key=None)[0] == 401
    second = service.cli("apikey", "create", "revoked-one").stdout.strip()
    assert api.get("/analyses", key=second)[0] == 200
    assert service.cli("apikey", "revoke", "revoked-one").returncode == 0
    status, body = api.get("/analyses", key=second)
    assert status == 403 and "revoked" in body["detail"]
    listed = service.cli("apikey", "list").stdout
    assert "revoked-one" in listed and second not in listed

    # 422 with a clear message, nothing enqueued
    cases = [
        ({"symbol": "AAPL1"}, "AAPL1"),
        ({"symbol": "ZZZZ"}, "ZZZZ"),
        ({"symbol": "AAPL", "as_of": "2999-01-01"}, "future"),
        ({"symbol": "AAPL", "as_of": "1990-01-02"}, "1990-01-02"),
        ({"symbol": "AAPL", "as_of": "yesterday"}, "as_of"),
        ({}, "symbol"),
        ({"query": "how is the market today?"}, "no ticker"),
        ({"symbol": "AAPL", "options": {"max_iterations": 99}}, "max_iterations"),
        ({"symbol": "AAPL", "options": {"colour": "red"}}, "colour"),
    ]
    for payload, needle in cases:
        status, body = api.post("/analyze", payload)
        assert status == 422, (payload, body)
        assert needle in body["detail"], (payload, body)
    assert api.get("/analyses?status=nonsense")[0] == 422
    assert _count(service, "SELECT count(*) FROM analyses") == 0
    broker = redis.Redis.from_url(service.env["FINAGENT_SERVICE_BROKER_URL"])
    assert broker.llen("research") == 0

    # a worker that serves only two stage queues: alive, but the pipeline cannot run
    partial = start_worker(queues="research,analysis")
    status, body = api.get("/health", key=None)
    assert status == 503 and body["failing"] == ["queues", "consumption"], body
    batch = "research.batch, analysis.batch, recommendation.batch, review.batch"
    assert body["checks"]["queues"] == f"no worker consumes: recommendation, review, {batch}, control", body
    partial.terminate()
    partial.wait(timeout=30)

    # then a full worker: health is ok, and the echo task made the round trip through it
    start_worker()
    status, body = api.get("/health", key=None)
    assert status == 200 and body["status"] == "ok", body
    assert body["checks"]["queues"] == "ok (all 9 consumed)"  # 4 stages x 2 classes + control
    assert body["checks"]["consumption"].startswith("ok (echo task run by test-"), body

    # OpenAPI docs are served
    status, page = api.get("/docs", key=None)
    assert status == 200 and "swagger" in str(page).lower()


def test_submit_poll_idempotency_list_and_session(service: Service, api: Http, start_worker) -> None:
    start_worker()
    # submit with an idempotency key, twice: one analysis
    body = {"symbol": "aapl", "as_of": "2012-06-29"}
    status, first, headers = api.request("POST", "/analyze", body, headers={"Idempotency-Key": "k-1"})
    assert status == 202, first
    assert first["symbol"] == "AAPL" and first["status_url"] == f"/analyses/{first['analysis_id']}"
    assert headers["location"] == first["status_url"]
    status, again, _ = api.request("POST", "/analyze", body, headers={"Idempotency-Key": "k-1"})
    assert status == 202 and again["analysis_id"] == first["analysis_id"] and again["replayed"] is True
    status, clash, _ = api.request("POST", "/analyze", {"symbol": "IBM"}, headers={"Idempotency-Key": "k-1"})
    assert status == 409, clash
    # a refused request releases its key: a corrected retry with the same key runs
    status, _, _ = api.request("POST", "/analyze", {"symbol": "ZZZZ"}, headers={"Idempotency-Key": "k-2"})
    assert status == 422
    assert _count(service, "SELECT count(*) FROM analyses") == 1

    # poll to the report
    done = _wait_done(api, first["status_url"])
    assert done["status"] == "done" and done["current_stage"] is None
    assert done["report_markdown"].startswith("# AAPL")
    assert done["report_json"]["signal"] == done["signal"] in ("BUY", "HOLD", "SELL")

    # session: a follow-up inherits analysis type, options and the date
    status, s1 = api.post(
        "/analyze",
        {
            "symbol": "IBM",
            "as_of": "2011-12-30",
            "analysis_type": "technical",
            "options": {"max_iterations": 2},
            "session_id": "conv-1",
        },
    )
    assert status == 202, s1
    status, s2 = api.post("/analyze", {"query": "what about MSFT?", "session_id": "conv-1"})
    assert status == 202, s2
    assert s2["symbol"] == "MSFT" and s2["analysis_type"] == "technical"
    assert s2["as_of"] == "2011-12-30"
    assert set(s2["inherited"]) == {"analysis_type", "options", "as_of"}
    follow = _wait_done(api, s2["status_url"])
    assert follow["max_iterations"] == 2 and follow["status"] == "done"
    sessions = redis.Redis.from_url(service.env["FINAGENT_SERVICE_BROKER_URL"])
    assert 0 < sessions.ttl("finagent:session:default/conv-1") <= 3600
    # another session does not inherit
    status, other = api.post("/analyze", {"query": "what about MSFT?", "session_id": "conv-2"})
    assert status == 202 and other["analysis_type"] == "composite" and other["inherited"] == []

    # list, filtered and paginated
    _wait_done(api, s1["status_url"])
    _wait_done(api, other["status_url"])
    status, page = api.get("/analyses?symbol=msft&status=done&limit=1")
    assert status == 200 and len(page["items"]) == 1 and page["items"][0]["symbol"] == "MSFT"
    assert page["next_offset"] == 1 and page["items"][0]["report_markdown"] is None
    status, page2 = api.get("/analyses?symbol=MSFT&status=done&limit=1&offset=1")
    assert (
        page2["next_offset"] is None and page2["items"][0]["analysis_id"] != page["items"][0]["analysis_id"]
    )
    assert api.get("/analyses/00000000-0000-4000-8000-000000000000")[0] == 404
    assert api.get("/analyses/no-such-id")[0] == 422  # not a UUID: the document says so


def test_watchlist_endpoints_and_digest(service: Service, api: Http, start_worker) -> None:
    start_worker(FINAGENT_WATCHLISTS_FINALIZE_COUNTDOWN="1")
    status, wl = api.post("/watchlists", {"name": "megacaps", "tickers": ["aapl", "MSFT", "IBM", "ZZZZ"]})
    assert status == 201, wl
    assert wl["tickers"] == ["AAPL", "MSFT", "IBM", "ZZZZ"]
    assert wl["schedule"] == "30 21 * * 1-5" and wl["timezone"] == "America/New_York"
    assert api.post("/watchlists", {"name": "megacaps", "tickers": ["IBM"]})[0] == 409
    assert api.post("/watchlists", {"name": "bad", "tickers": ["IBM"], "schedule": "61 * * * *"})[0] == 422
    assert api.post("/watchlists", {"name": "bad", "tickers": ["IBM"], "timezone": "Mars/Base"})[0] == 422
    assert api.post("/watchlists", {"name": "bad", "tickers": ["IBM1"]})[0] == 422
    status, listed = api.get("/watchlists")
    assert [w["name"] for w in listed] == ["megacaps"]

    # two runs: the second reports signal changes against the first
    for run_date in ("2012-06-29", "2012-12-31"):
        status, run = api.post("/watchlists/megacaps/runs", {"run_date": run_date})
        assert status == 202 and run["created"] is True, run
        status, repeat = api.post("/watchlists/megacaps/runs", {"run_date": run_date})
        assert repeat["created"] is False and repeat["run_id"] == run["run_id"]

        def finished(run_date: str = run_date) -> dict | None:
            status, body = api.get(f"/watchlists/megacaps/runs/{run_date}")
            assert status == 200, body
            return body if body["status"] == "done" else None

        done = poll(finished, timeout=240, what=f"run {run_date} done")
    assert _count(service, "SELECT count(*) FROM analyses") == 6  # 3 valid tickers x 2 dates

    digest = done["digest"]
    assert digest["previous_run_date"] == "2012-06-29"
    by_symbol = {t["symbol"]: t for t in digest["tickers"]}
    assert set(by_symbol) == {"AAPL", "MSFT", "IBM", "ZZZZ"}
    for symbol in ("AAPL", "MSFT", "IBM"):
        t = by_symbol[symbol]
        assert t["outcome"] == "ok" and t["signal"] in ("BUY", "HOLD", "SELL")
        assert "confidence" not in t and 0 <= t["details"]["confidence"] <= 1
        assert t["previous_signal"] in ("BUY", "HOLD", "SELL") and t["as_of"] == "2012-12-31"
        expected = (
            "unchanged" if t["previous_signal"] == t["signal"] else f"{t['previous_signal']} → {t['signal']}"
        )
        assert t["change"] == expected
    assert by_symbol["ZZZZ"]["outcome"] == "failed" and "ZZZZ" in by_symbol["ZZZZ"]["error"]
    md = done["digest_markdown"]
    assert "| AAPL |" in md and "## Failures" in md and "since 2012-06-29" in md
    status, page = api.get("/watchlists/megacaps/runs/2012-12-31/digest")
    assert status == 200 and page.startswith("<!doctype html>") and "<td>MSFT</td>" in page
    status, runs = api.get("/watchlists/megacaps/runs")
    assert [r["run_date"] for r in runs] == ["2012-12-31", "2012-06-29"]

    status, patched, _ = api.request("PATCH", "/watchlists/megacaps", {"tickers": ["IBM"], "enabled": False})
    assert status == 200 and patched["tickers"] == ["IBM"] and patched["enabled"] is False
    assert api.request("DELETE", "/watchlists/megacaps")[0] == 204
    assert api.get("/watchlists/megacaps")[0] == 404
    assert _count(service, "SELECT count(*) FROM watchlist_runs") == 0
