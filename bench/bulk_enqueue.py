"""Bulk enqueue: milliseconds per analysis of a backtest's producer, the per-item path against
the bulk path, same broker, same database, same run.

    .venv/bin/python bench/bulk_enqueue.py [--n 400] [--brokers redis,rabbitmq]

For each broker (a child process each, as the Celery app binds its broker at import): a
private PostgreSQL database (dropped at the end) and a private broker (Redis: db 6, its finagent
queues purged at the end; RabbitMQ: a private vhost on the shared node, deleted at the end). No
worker runs: the messages stay queued, so only the producer is timed. Grid points: the trading
days of AAPL, MSFT, XOM and JPM from 2013-01-02 on (real stocknet data, csv provider), N in all.

* **per item** (the path before the bulk one, ``service.prepare_analysis`` per point):
  the ticker and date checked against the provider, the row and claim in one statement, the
  backtest item in its own transaction, each; chains sent as Celery groups of 100.
* **bulk** (``service.prepare_batch``): the ticker checked once, the dates with two provider
  reads, the rows and claims of 100 points in one transaction of two multi-row inserts, their
  items in one insert; the chains of each 100 sent one of three ways:

  * **bulk before**: a Celery group, each batch message with Celery's ``task-sent`` event (on
    RabbitMQ two confirmed publishes per message, two round trips);
  * **no task-sent**: a group, batch-queue messages without ``task-sent``
    (``tasks.app.LaneAMQP``);
  * **bulk now** (``tasks.app.send_chains``, what backtests and watchlist runs use):
    no ``task-sent``, every chain through the one producer, RabbitMQ's publisher confirms
    awaited once per group (``batched_confirms``).

Each runs once on 40 points first (imports, connections, the provider's caches), then each is
timed once, in that order. Stdout per broker: ``<broker> per-item … ms, bulk before … ms, no
task-sent … ms, bulk now … ms, ratio=… (per item / now), bulk_ratio=… (bulk before / now)``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
import uuid
from datetime import date
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data"
ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"
SYMBOLS = ("AAPL", "MSFT", "XOM", "JPM")


def _points(n: int) -> list[tuple[str, date]]:
    """``n`` (symbol, trading day) pairs, round robin over :data:`SYMBOLS` (real bars' dates)."""
    from agents.data.routing import get_provider
    from core.settings import get_settings

    provider = get_provider(settings=get_settings())
    per = -(-n // len(SYMBOLS))
    days = {
        s: [ts.date() for ts in provider.bars(symbol=s, start=date(2013, 1, 2), end=date(2017, 8, 1)).index][
            :per
        ]
        for s in SYMBOLS
    }
    return [(s, days[s][i]) for i in range(per) for s in SYMBOLS][:n]


def _per_item(name: str, points: list[tuple[str, date]]) -> float:
    """The per-item producer (module docstring); returns seconds."""
    from celery import group

    import tasks  # noqa: F401  # installs the task queue (pipeline.taskqueue)
    from apps.backtest import analysis_id_for
    from core.settings import get_settings
    from core.stages import BATCH
    from db import backtest_repo
    from db.engine import get_engine
    from pipeline import service

    engine = get_engine(os.environ["FINAGENT_SERVICE_DATABASE_URL"])
    started = time.perf_counter()
    batch: list[Any] = []
    for symbol, day in points:
        analysis_id = analysis_id_for(name=name, symbol=symbol, as_of=day, attempt=0)
        _, chain = service.prepare_analysis(
            request=service.AnalysisRequest(
                symbol=symbol,
                as_of=day,
                user_query=f"{name} {symbol} {day}",
                analysis_id=analysis_id,
                lane=BATCH,
            ),
            settings=get_settings(),
        )
        backtest_repo.add_item(
            engine=engine,
            backtest_name=name,
            symbol=symbol,
            as_of=day,
            requested_date=day,
            status="enqueued",
            analysis_id=analysis_id,
        )
        batch.append(chain)
        if len(batch) >= 100:
            group(batch).apply_async()
            batch = []
    if batch:
        group(batch).apply_async()
    return time.perf_counter() - started


def _bulk(name: str, points: list[tuple[str, date]], *, mode: str = "batched") -> float:
    """The bulk producer (module docstring); returns seconds. ``mode``: ``sent`` (a Celery
    group, with the ``task-sent`` events: the path before), ``quiet`` (a group, no
    ``task-sent`` for batch queues) or ``batched`` (``celery_app.send_chains``: no
    ``task-sent``, one producer, the broker's confirms awaited once per group: the path now)."""
    from tasks.app import app, send_chains

    app.amqp.quiet_batch = mode != "sent"
    from celery import group

    import tasks  # noqa: F401  # installs the task queue (pipeline.taskqueue)
    from apps.backtest import analysis_id_for
    from core.settings import get_settings
    from core.stages import BATCH
    from db import backtest_repo
    from db.engine import get_engine
    from pipeline import service

    engine = get_engine(os.environ["FINAGENT_SERVICE_DATABASE_URL"])
    started = time.perf_counter()
    for symbol in SYMBOLS:
        mine = [d for s, d in points if s == symbol]
        for at in range(0, len(mine), 100):
            chunk = mine[at : at + 100]
            items = [
                service.BatchItem(
                    analysis_id=analysis_id_for(name=name, symbol=symbol, as_of=d, attempt=0),
                    as_of=d,
                    user_query=f"{name} {symbol} {d}",
                )
                for d in chunk
            ]
            prepared = service.prepare_batch(symbol=symbol, items=items, lane=BATCH, settings=get_settings())
            backtest_repo.add_items(
                engine=engine,
                backtest_name=name,
                items=[
                    {
                        "symbol": symbol,
                        "as_of": p.item.as_of,
                        "requested_date": p.item.as_of,
                        "status": "enqueued",
                        "analysis_id": p.item.analysis_id,
                    }
                    for p in prepared
                ],
            )
            chains = [p.signature for p in prepared if p.signature is not None]
            if mode == "batched":
                send_chains(chains)
            else:
                group(chains).apply_async()
    return time.perf_counter() - started


def child(broker: str, n: int) -> int:
    """Measure on one broker (module docstring); prints one line."""
    import psycopg

    tag = f"{os.getpid()}"
    db_name, vhost = f"finagent_bench_bulk_{tag}", f"finagent_bench_bulk_{tag}"
    with psycopg.connect(ADMIN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{db_name}"')
    if broker == "rabbitmq":
        subprocess.run(["rabbitmqctl", "add_vhost", vhost], check=True, capture_output=True, timeout=60)
        subprocess.run(
            ["rabbitmqctl", "set_permissions", "-p", vhost, "guest", ".*", ".*", ".*"],
            check=True,
            capture_output=True,
            timeout=60,
        )
        url = f"amqp://guest:guest@127.0.0.1:5672/{vhost}"
    else:
        url = os.environ.get("FINAGENT_BENCH_REDIS_URL", "redis://127.0.0.1:6379/6")
    os.environ.update(
        FINAGENT_SERVICE_BROKER_URL=url,
        FINAGENT_SERVICE_DATABASE_URL=f"postgresql+psycopg://postgres@127.0.0.1:5432/{db_name}",
        FINAGENT_DATA_PROVIDER="csv",
        FINAGENT_DATA_DIR=str(DATA / "ohlcv" / "stocknet"),
    )
    try:
        from db import backtest_repo
        from db.engine import get_engine
        from db.migrate import upgrade

        upgrade(url=os.environ["FINAGENT_SERVICE_DATABASE_URL"])
        engine = get_engine(os.environ["FINAGENT_SERVICE_DATABASE_URL"])
        points = _points(n + 40)
        warm, timed = points[:40], points[40:]
        kinds = ("w1", "w2", "w3", "w4", "old", "sent", "quiet", "new")
        names = {k: f"bulk-{k}-{uuid.uuid4().hex[:6]}" for k in kinds}
        for name in names.values():
            backtest_repo.create_backtest(
                engine=engine,
                name=name,
                symbols=list(SYMBOLS),
                start_date=date(2013, 1, 2),
                end_date=date(2017, 8, 1),
                every="1d",
                analysis_type="composite",
            )
        _per_item(names["w1"], warm)
        _bulk(names["w2"], warm, mode="sent")
        _bulk(names["w3"], warm, mode="quiet")
        _bulk(names["w4"], warm)
        old = _per_item(names["old"], timed)
        sent = _bulk(names["sent"], timed, mode="sent")
        quiet = _bulk(names["quiet"], timed, mode="quiet")
        new = _bulk(names["new"], timed)
        ms = 1000 / len(timed)
        print(
            f"{broker} n={len(timed)} per-item {old * ms:.2f} ms, bulk before {sent * ms:.2f} ms, "
            f"no task-sent {quiet * ms:.2f} ms, bulk now {new * ms:.2f} ms, "
            f"ratio={old / new:.2f} (per item / now), bulk_ratio={sent / new:.2f} (bulk before / now)"
        )
    finally:
        from db.engine import dispose_engines
        from tasks.app import app

        if broker == "redis":
            app.control.purge()  # only the finagent queues of this Redis db
        dispose_engines(close=True)
        with psycopg.connect(ADMIN, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{db_name}" WITH (FORCE)')
        if broker == "rabbitmq":
            subprocess.run(["rabbitmqctl", "delete_vhost", vhost], capture_output=True, timeout=60)
    return 0


def main() -> int:
    """Run :func:`child` for each broker in a process of its own."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=400)
    parser.add_argument("--brokers", default="redis,rabbitmq")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if not (DATA / "ohlcv" / "stocknet").is_dir():
        print(f"skipped: {DATA} (the shared real data) is absent", file=sys.stderr)
        return 0
    if args.child:
        return child(args.child, args.n)
    code = 0
    for broker in args.brokers.split(","):
        proc = subprocess.run([sys.executable, __file__, "--child", broker, "--n", str(args.n)], check=False)
        code = code or proc.returncode
    return code


if __name__ == "__main__":
    sys.exit(main())
