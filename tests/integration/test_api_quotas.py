"""The per-key rate limit holds across API processes: two ``finagent serve`` processes on
127.0.0.1 share one token bucket in Redis (the broker's database), so a key gets its quota
once, not once per process."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis
from sqlalchemy import text

from db.engine import get_engine
from tests.integration.conftest import Service
from tests.integration.ops_support import Http, start_process, stop_process, wait_http
from tests.support.private_services import free_port

PER_MINUTE = 2  # one token every 30 s: far longer than the requests below take


@pytest.fixture
def two_apis(service: Service) -> Iterator[tuple[Http, Http]]:
    """Two gateway processes of one deployment (same Postgres, same Redis) and one key."""
    created = service.cli("apikey", "create", "shared", "--tenant", "acme")
    assert created.returncode == 0, created.stderr
    key = created.stdout.strip()
    procs = []
    apis = []
    try:
        for i in range(2):
            port = free_port()
            log = f"api-{i}.log"
            proc = start_process(
                service,
                ["serve", "--host", "127.0.0.1", "--port", str(port)],
                log,
                FINAGENT_API_ANALYSES_PER_MINUTE=str(PER_MINUTE),
                FINAGENT_API_MAX_IN_FLIGHT="100",
            )
            procs.append(proc)
            base = f"http://127.0.0.1:{port}"
            wait_http(base, "/openapi.json", proc, lambda log=log: (service.tmp / log).read_text())
            apis.append(Http(base=base, key=key))
        yield apis[0], apis[1]
    finally:
        for proc in procs:
            stop_process(proc)


def test_rate_limit_is_shared_by_two_api_processes(service: Service, two_apis: tuple[Http, Http]) -> None:
    first, second = two_apis
    body = {"symbol": "AAPL", "as_of": "2012-06-29"}
    answers = []
    for i in range(6):  # alternate: each process alone would accept PER_MINUTE of its three
        status, out, headers = (first, second)[i % 2].request("POST", "/analyze", body)
        answers.append((status, out, headers))
    statuses = [a[0] for a in answers]
    assert statuses.count(202) == PER_MINUTE, answers
    assert statuses == [202] * PER_MINUTE + [429] * (6 - PER_MINUTE)
    for _status, out, headers in answers[PER_MINUTE:]:
        retry_after = {k.lower(): v for k, v in headers.items()}["retry-after"]
        assert 1 <= int(retry_after) <= 60 // PER_MINUTE
        assert f"{PER_MINUTE} analyses per minute" in out["detail"]
    # the second process refused although it had accepted only one request itself
    assert answers[3][0] == 429
    with get_engine(service.env["FINAGENT_SERVICE_DATABASE_URL"]).connect() as conn:
        stored = conn.execute(text("SELECT count(*) FROM analyses WHERE tenant = 'acme'")).scalar_one()
    assert stored == PER_MINUTE
    # the bucket lives in the shared Redis
    shared = redis.Redis.from_url(service.env["FINAGENT_SERVICE_BROKER_URL"])
    buckets = shared.keys("finagent:ratelimit:api-analyze:*")
    assert len(buckets) == 1


def test_a_watchlist_run_takes_a_token_per_ticker_from_the_shared_bucket(
    service: Service, two_apis: tuple[Http, Http]
) -> None:
    first, second = two_apis
    status, _, _ = first.request("POST", "/watchlists", {"name": "three", "tickers": ["AAPL", "MSFT", "IBM"]})
    assert status == 201
    # started through the second process: the bucket's PER_MINUTE tokens, one per ticker
    status, run, _ = second.request("POST", "/watchlists/three/runs", {"run_date": "2012-06-29"})
    assert status == 202, run
    assert run["enqueued"] == ["AAPL", "MSFT"]
    assert run["refused"]["IBM"].startswith(f"quota: {PER_MINUTE} analyses per minute for API key 'shared'")
    # the first process sees the same empty bucket: the run took its tokens from Redis
    status, out, _ = first.request("POST", "/analyze", {"symbol": "AAPL", "as_of": "2012-06-29"})
    assert status == 429 and f"{PER_MINUTE} analyses per minute" in out["detail"]
    with get_engine(service.env["FINAGENT_SERVICE_DATABASE_URL"]).connect() as conn:
        keys = (
            conn.execute(text("SELECT DISTINCT api_key_id FROM analyses WHERE tenant = 'acme'"))
            .scalars()
            .all()
        )
    assert keys == [str(first.key).split("_")[1]]
