"""``tasks.app.send_chains`` on a Redis broker of the test's own (a redis-server on a
spare port): a bulk enqueue's messages all reach their queue, sent as one pipeline rather than
one round trip per message (kombu's ``Producer.batch``), and a broker that refuses them (out of
memory) raises instead of reporting a batch it did not deliver.

The producer runs in a child process, as in production: the Celery app binds its broker when
``tasks.app`` is imported. The round trips are read from the server's own counter
(``INFO stats``, ``total_reads_processed``: socket reads it served), not from our code."""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import redis
import sqlalchemy as sa

from core.stages import STAGES
from tests.conftest import REPO_ROOT
from tests.integration.conftest import Service
from tests.integration.ops_support import Http, start_process, stop_process, wait_http
from tests.support.private_services import PrivateRedis, free_port

N = 150  # chains in one call (kombu's batch flushes by itself every 1,000 commands)

#: The child: N analysis chains (``build_chain``) on the batch lane, sent once through
#: send_chains and once each on its own (the baseline: ``apply_async`` per chain, a publish
#: and a round trip per message, as any producer without send_chains sends them); prints the
#: socket reads the server served during each (its own counter, read on a separate connection;
#: each ``INFO`` costs one read, subtracted).
PRODUCER = """
import gc, json, sys
from datetime import date
import redis
from core.state import FinancialAgentState
from tasks.app import send_chains
from tasks.chain import build_chain

url, n, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]

def chains(tag):
    return [
        build_chain(FinancialAgentState(
            analysis_id=f"{tag}-{i}", stock_symbol="AAPL", user_query="Analyze AAPL",
            as_of=date(2012, 6, 29), lane="batch",
        ))
        for i in range(n)
    ]

counter = redis.Redis.from_url(url)
def reads():
    return int(counter.info("stats")["total_reads_processed"])

send_chains(chains("warm")[:1])  # connections and queue declarations, not counted
if mode == "refused":  # the broker's memory is full from here on: this call must raise
    redis.Redis.from_url(url).config_set("maxmemory", str(counter.info("memory")["used_memory"] + 64 * 1024))
    send_chains(chains("refused"))
    sys.exit(0)
batched_chains = chains("batched")
gc.collect()
before = reads()
send_chains(batched_chains)
batched = reads() - before - 1
plain_chains = chains("plain")
gc.collect()
before = reads()
for chain in plain_chains:
    chain.apply_async()
plain = reads() - before - 1
print(json.dumps({"plain": plain, "batched": batched}))
"""


def _produce(url: str, n: int, tmp_path: Path, mode: str = "count") -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("FINAGENT_")}
    env.update(FINAGENT_SERVICE_BROKER_URL=url, FINAGENT_SERVICE_STATE_DIR=str(tmp_path / "state"))
    return subprocess.run(
        [sys.executable, "-c", PRODUCER, url, str(n), mode],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_bulk_enqueue_reaches_redis_in_one_pipeline(private_redis: PrivateRedis, tmp_path: Path) -> None:
    url = private_redis.url(0)
    proc = _produce(url, N, tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    reads = json.loads(proc.stdout.strip().splitlines()[-1])
    # every chain's first message is queued on the batch lane of the first stage, each once
    client = redis.Redis.from_url(url)
    bodies = [json.loads(m) for m in client.lrange(STAGES[0].batch_queue, 0, -1)]
    assert all(b["headers"]["task"] == STAGES[0].task_name for b in bodies)
    sent = [json.loads(base64.b64decode(b["body"]))[0][0]["analysis_id"] for b in bodies]
    assert sorted(i for i in sent if i.startswith("batched-")) == sorted(f"batched-{i}" for i in range(N))
    # each chain on its own: at least one server read per message (one round trip each);
    # send_chains: the same N LPUSHes in one pipeline, which the server reads in pieces of at
    # most 16 KB (~35 for N = 150; 75 seen here: partial reads)
    assert reads["plain"] >= N, reads
    assert reads["batched"] < N * 3 // 4, reads


def test_a_batch_the_broker_refuses_raises(private_redis: PrivateRedis, tmp_path: Path) -> None:
    url = private_redis.url(0)
    redis.Redis.from_url(url).config_set("maxmemory-policy", "noeviction")
    # 150 messages of ~3.7 KB against 64 KB of room: Redis answers OOM to most LPUSHes
    proc = _produce(url, N, tmp_path, mode="refused")
    assert proc.returncode == 1, (proc.returncode, proc.stdout, proc.stderr[-3000:])
    assert "BatchPublishError" in proc.stderr and "delivery is uncertain" in proc.stderr, proc.stderr[-3000:]
    assert "OutOfMemoryError" in proc.stderr and "maxmemory" in proc.stderr, proc.stderr[-3000:]
    # the pipeline is not a transaction: the messages before the refusal are queued, the rest
    # not (the caller wrote the rows first; the recovery sweep re-drives what is missing)
    queued = redis.Redis.from_url(url).llen(STAGES[0].batch_queue)
    assert 1 <= queued < N + 1, queued  # the warm-up chain and some of the refused batch


def test_a_backtest_whose_batch_the_broker_refuses_exits_3_with_its_rows_kept(
    service: Service, private_redis: PrivateRedis, stocknet_dir: Path
) -> None:
    """The CLI end of it: ``finagent backtest`` on a Redis out of memory says so and exits 3
    (infrastructure), no traceback; the analyses it wrote stay ``queued`` for the recovery
    sweep to re-drive once the broker takes messages again."""
    url = private_redis.url(0)
    client = redis.Redis.from_url(url)
    client.config_set("maxmemory-policy", "noeviction")
    client.config_set("maxmemory", str(client.info("memory")["used_memory"] + 128 * 1024))
    proc = service.cli(  # 2 x 61 weeks of ~3.7 KB messages: about 450 KB
        "backtest", "--symbols", "AAPL,MSFT", "--from", "2015-01-05", "--to", "2016-03-01",
        "--every", "1w", "--name", "refused", "--no-wait",
        extra_env={
            "FINAGENT_SERVICE_BROKER_URL": url,
            "FINAGENT_DATA_PROVIDER": "csv",
            "FINAGENT_DATA_DIR": str(stocknet_dir),
        },
    )  # fmt: skip
    assert proc.returncode == 3, (proc.returncode, proc.stderr[-3000:])
    # the batch's pipeline refused (BatchPublishError), or an earlier command of the enqueue
    # (the queue-depth check's), by how much room the connections took: either is exit 3
    said = r"error: (BatchPublishError|OperationalError): .*(delivery is uncertain|maxmemory)"
    assert re.search(said, proc.stderr), proc.stderr[-3000:]
    assert "Traceback" not in proc.stderr
    engine = sa.create_engine(service.env["FINAGENT_SERVICE_DATABASE_URL"])
    try:
        with engine.connect() as conn:
            statuses = conn.execute(sa.text("SELECT status FROM analyses")).scalars().all()
    finally:
        engine.dispose()
    assert statuses and set(statuses) == {"queued"}, statuses


def test_a_watchlist_run_whose_batch_the_broker_refuses_is_a_503_with_its_rows_kept(
    service: Service, private_redis: PrivateRedis, stocknet_dir: Path
) -> None:
    """The HTTP end of it, on a real gateway process (``finagent serve``) whose broker is a Redis
    with little room left: the rate limiter's small writes fit, the run's batch of messages does
    not. The answer is a 503 naming ``BatchPublishError`` (or kombu's ``OperationalError`` when
    an earlier publish command was refused), not a 500; the run and its analyses are stored,
    ``queued``, for the recovery sweep."""
    url = private_redis.url(0)
    env = {
        "FINAGENT_SERVICE_BROKER_URL": url,
        "FINAGENT_DATA_PROVIDER": "csv",
        "FINAGENT_DATA_DIR": str(stocknet_dir),
        "FINAGENT_API_ANALYSES_PER_MINUTE": "10000",
        "FINAGENT_API_MAX_IN_FLIGHT": "10000",
    }
    created = service.cli("apikey", "create", "full", extra_env=env)
    assert created.returncode == 0, created.stderr
    tickers = sorted(p.stem for p in stocknet_dir.glob("*.csv"))[:80]  # ~80 x 3.7 KB of messages
    port = free_port()
    proc = start_process(service, ["serve", "--host", "127.0.0.1", "--port", str(port)], "api.log", **env)
    try:
        base = f"http://127.0.0.1:{port}"
        wait_http(base, "/openapi.json", proc, lambda: (service.tmp / "api.log").read_text())
        api = Http(base=base, key=created.stdout.strip())
        status, out, _ = api.request("POST", "/watchlists", {"name": "big", "tickers": tickers})
        assert status == 201, out
        client = redis.Redis.from_url(url)
        client.config_set("maxmemory-policy", "noeviction")
        client.config_set("maxmemory", str(client.info("memory")["used_memory"] + 128 * 1024))
        status, out, _ = api.request("POST", "/watchlists/big/runs", {"run_date": "2015-06-30"})
    finally:
        stop_process(proc)
    assert status == 503, out
    assert re.match(
        r"broker or database unreachable \((BatchPublishError|OperationalError)\)", out["detail"]
    ), out
    engine = sa.create_engine(service.env["FINAGENT_SERVICE_DATABASE_URL"])
    try:
        with engine.connect() as conn:
            runs = conn.execute(sa.text("SELECT count(*) FROM watchlist_runs")).scalar_one()
            statuses = conn.execute(sa.text("SELECT status FROM analyses")).scalars().all()
    finally:
        engine.dispose()
    assert runs == 1 and statuses and set(statuses) == {"queued"}, (runs, statuses)
