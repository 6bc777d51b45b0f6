"""Interactive latency idle vs while a backtest runs, same worker, same run.

    .venv/bin/python bench/interactive_latency.py --broker redis --batch 200 --k 8
    .venv/bin/python bench/interactive_latency.py --broker rabbitmq --batch 200 --k 8

What it does (every wait is bounded; the worker, the database and the vhost it made are removed
at the end):

1. A private PostgreSQL database (``finagent_bench_lane_<pid>``, migrated) and a broker: Redis
   db 9 (flushed once) or a private RabbitMQ vhost on the shared node (quorum queues, the
   product's default). Quant mode on the embedded data (no LLM).
2. One ``finagent worker`` (``--lane both``, prefork, ``--concurrency``, default 2), or with
   ``--split`` two: ``--lane interactive --concurrency 1`` and ``--lane batch --concurrency
   N-1`` (the same process count); warmed up by 4 analyses.
3. **idle**: ``--k`` interactive analyses one after the other (``pipeline.service.start_analysis``,
   the path of the CLI, the HTTP API and the Python API); end-to-end latency of each =
   ``finished_at - created_at`` of its row.
4. **loaded**: a backtest of ``--batch`` grid points (``apps.backtest.start_backtest``: 4
   symbols, business days; its analyses are batch work) is enqueued, then the same ``--k``
   interactive analyses one after the other while it runs. Only those that finished before the
   backlog drained count (the number is printed); the backlog's own time is printed too.
5. ``--fifo`` adds the behaviour without classes for comparison: the same backlog enqueued as
   interactive work (one FIFO per stage, as every producer used before), then one interactive
   analysis behind it.

Stdout: ``idle p50/p95``, ``loaded p50/p95``, ``ratio=X.XX`` (loaded p95 / idle p95); the
target is ratio ≤ 2. Progress on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from datetime import date, timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "bench")]

import pipeline_throughput as pt  # noqa: E402  (after the path: the bench's worker helpers)

ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"
REDIS_URL = "redis://127.0.0.1:6379/9"
SYMBOLS = ("AAPL", "IBM", "MSFT", "GOOG")
#: Interactive analyses ask for the data's last day; the backtest's grid ends a year before, so
#: no (symbol, as_of) of the two meets and no analysis id repeats.
INTERACTIVE_AS_OF = date(2013, 3, 1)
GRID_END = date(2012, 3, 1)


def _rows(ids: list[str]) -> list[tuple[str, float, float | None]]:
    import sqlalchemy as sa

    from core.settings import get_settings
    from db.engine import get_engine

    sql = sa.text(
        "SELECT status, extract(epoch FROM created_at)::float8, extract(epoch FROM finished_at)::float8 "
        "FROM analyses WHERE id = ANY(:ids)"
    )
    with get_engine(get_settings().service.effective_database_url).connect() as conn:
        return [(r[0], r[1], r[2]) for r in conn.execute(sql, {"ids": ids}).all()]


def _batch_open() -> int:
    import sqlalchemy as sa

    from core.settings import get_settings
    from db.engine import get_engine

    sql = sa.text("SELECT count(*) FROM analyses WHERE state->>'lane' = 'batch' AND finished_at IS NULL")
    with get_engine(get_settings().service.effective_database_url).connect() as conn:
        return int(conn.execute(sql).scalar_one())


def interactive(k: int, *, timeout: float, stop_when_drained: bool) -> list[tuple[float, int]]:
    """``k`` interactive analyses one after the other; ``(latency s, batch analyses still open
    when it finished)`` each. With ``stop_when_drained``, stops once the backlog is gone."""
    import tasks  # noqa: F401  # installs the task queue (pipeline.taskqueue)
    from core.settings import get_settings
    from pipeline.service import AnalysisRequest, start_analysis

    settings = get_settings()
    out: list[tuple[float, int]] = []
    for i in range(k):
        symbol = SYMBOLS[i % len(SYMBOLS)]
        # a new id each time: the same (symbol, as_of) is a fresh analysis, as a person's repeat
        aid = start_analysis(
            request=AnalysisRequest(symbol=symbol, as_of=INTERACTIVE_AS_OF), settings=settings
        ).analysis_id
        pt.wait_analyses([aid], timeout=timeout, label=f"interactive {i + 1}/{k}")
        ((status, created, finished),) = _rows([aid])
        if status != "done" or finished is None:
            raise RuntimeError(f"interactive analysis {aid} ended {status}")
        open_batch = _batch_open()
        out.append((finished - created, open_batch))
        pt.log(f"interactive {i + 1}: {finished - created:.2f} s, {open_batch} batch analyses open")
        if stop_when_drained and open_batch == 0:
            break
    return out


def backtest(name: str, n: int, *, lane_batch: bool) -> tuple[list[str], float]:
    """Enqueue a backtest of about ``n`` grid points (4 symbols x n/4 business days ending at
    ``GRID_END``); returns its analysis ids and the seconds the enqueue took. ``lane_batch=False``
    re-sends the same kind of grid as interactive work (the single FIFO of before)."""
    import tasks  # noqa: F401  # installs the task queue (pipeline.taskqueue)
    from apps import backtest as bt
    from core.settings import get_settings
    from pipeline import service

    days = -(-n // len(SYMBOLS))
    start = GRID_END - timedelta(days=int(days * 7 / 5) + 3)
    started = time.perf_counter()
    if lane_batch:
        result = bt.start_backtest(
            name=name, symbols=list(SYMBOLS), start=start, end=GRID_END, every="1d", settings=get_settings()
        )
        return result.analysis_ids[:] or [], time.perf_counter() - started
    ids: list[str] = []
    day = start
    while len(ids) < n:
        day += timedelta(days=1)
        if day.weekday() >= 5:
            continue
        for symbol in SYMBOLS:
            try:
                ids.append(
                    service.start_analysis(
                        request=service.AnalysisRequest(symbol=symbol, as_of=day), settings=get_settings()
                    ).analysis_id
                )
            except service.InvalidRequestError:
                continue
    return ids, time.perf_counter() - started


def start_worker(*, lane: str, concurrency: int, log_dir: Path) -> pt.Worker:
    """Start ``finagent worker --lane LANE`` with ``concurrency`` prefork processes (not yet
    ready: see ``pipeline_throughput.wait_ready``)."""
    hostname = f"bench-lane-{lane}-{os.getpid()}@localhost"
    finagent = Path(sys.executable).with_name("finagent")
    cmd = [str(finagent), "worker", "--lane", lane, "--concurrency", str(concurrency)]
    cmd += ["--loglevel", "WARNING", "-n", hostname]
    log_path = log_dir / f"worker-{lane}.log"
    with log_path.open("wb") as handle:
        proc = subprocess.Popen(
            cmd,
            cwd=REPO,
            env=os.environ.copy(),
            stdout=handle,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    pt.log(f"started worker pid {proc.pid}: {' '.join(cmd)}")
    return pt.Worker(lane, hostname, proc, log_path)


def _percentiles(values: list[float]) -> tuple[float, float]:
    return pt.percentile(values, 50), pt.percentile(values, 95)


def main(argv: list[str] | None = None) -> int:
    """Run the bench (module docstring); returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--broker", choices=("redis", "rabbitmq"), default="redis")
    parser.add_argument("--batch", type=int, default=200, help="grid points of the backtest")
    parser.add_argument("--k", type=int, default=8, help="interactive analyses per phase")
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument(
        "--split", action="store_true", help="a --lane interactive process of its own (module docstring)"
    )
    parser.add_argument("--fifo", action="store_true", help="also measure one analysis behind a FIFO backlog")
    parser.add_argument("--timeout", type=float, default=600.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)

    import psycopg

    tag = f"{os.getpid()}"
    db_name = f"finagent_bench_lane_{tag}"
    vhost = f"finagent_bench_lane_{tag}"
    with psycopg.connect(ADMIN, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{db_name}"')
    if args.broker == "rabbitmq":
        subprocess.run(["rabbitmqctl", "add_vhost", vhost], check=True, capture_output=True, timeout=60)
        subprocess.run(
            ["rabbitmqctl", "set_permissions", "-p", vhost, "guest", ".*", ".*", ".*"],
            check=True,
            capture_output=True,
            timeout=60,
        )
        broker = f"amqp://guest:guest@127.0.0.1:5672/{vhost}"
    else:
        broker = REDIS_URL
    pt.configure_env(broker, f"postgresql+psycopg://postgres@127.0.0.1:5432/{db_name}")
    workers: list[pt.Worker] = []
    try:
        if args.broker == "redis":
            pt._redis().flushdb()
        from db.migrate import upgrade

        upgrade(url=os.environ["FINAGENT_SERVICE_DATABASE_URL"])
        from tasks.app import app

        log_dir = Path(tempfile.mkdtemp(prefix="bench-lane-"))
        pools = [("both", args.concurrency)]
        if args.split:
            pools = [("interactive", 1), ("batch", args.concurrency - 1)]
        for lane, processes in pools:
            workers.append(start_worker(lane=lane, concurrency=processes, log_dir=log_dir))
        for worker in workers:
            pt.wait_ready(worker, app)
        pt.log("warm-up: 4 analyses")
        interactive(4, timeout=args.timeout, stop_when_drained=False)

        idle = [s for s, _ in interactive(args.k, timeout=args.timeout, stop_when_drained=False)]
        t0 = time.time()
        batch_ids, enqueue_s = backtest(f"lane-{uuid.uuid4().hex[:8]}", args.batch, lane_batch=True)
        pt.log(f"backtest: {len(batch_ids)} analyses enqueued in {enqueue_s:.1f} s")
        loaded_all = interactive(args.k, timeout=args.timeout, stop_when_drained=True)
        loaded = [s for s, open_batch in loaded_all if open_batch > 0]
        pt.wait_analyses(batch_ids, timeout=args.timeout, label="backlog")
        finished = [f for _, _, f in _rows(batch_ids) if f is not None]
        backlog_s = max(finished) - t0
        fifo: float | None = None
        if args.fifo:
            fifo_ids, _ = backtest("", args.batch, lane_batch=False)
            pt.log(f"fifo backlog: {len(fifo_ids)} interactive analyses enqueued")
            fifo = interactive(1, timeout=args.timeout, stop_when_drained=False)[0][0]
            pt.wait_analyses(fifo_ids, timeout=args.timeout, label="fifo backlog")
    finally:
        for worker in workers:
            pt.stop_worker(worker)
        from db.engine import dispose_engines

        dispose_engines(close=True)
        with psycopg.connect(ADMIN, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{db_name}" WITH (FORCE)')
        if args.broker == "rabbitmq":
            subprocess.run(["rabbitmqctl", "delete_vhost", vhost], capture_output=True, timeout=60)

    if not loaded:
        print("the backlog drained before any loaded measurement: raise --batch", file=sys.stderr)
        return 1
    i50, i95 = _percentiles(idle)
    l50, l95 = _percentiles(loaded)
    result: dict[str, Any] = {
        "broker": args.broker,
        "concurrency": args.concurrency,
        "pools": "interactive 1 + batch N-1" if args.split else "both",
        "batch": len(batch_ids),
        "backlog_s": round(backlog_s, 1),
        "batch_enqueue_s": round(enqueue_s, 2),
        "idle_s": [round(v, 2) for v in idle],
        "loaded_s": [round(v, 2) for v in loaded],
        "fifo_s": round(fifo, 2) if fifo is not None else None,
        "ratio": round(l95 / i95, 2),
    }
    if args.json:
        print(json.dumps(result))
    print(
        f"{args.broker}: backtest of {len(batch_ids)} analyses drained in {backlog_s:.1f} s "
        f"(enqueue {enqueue_s:.1f} s); {args.concurrency} processes, "
        f"{'--lane interactive -c 1 + --lane batch' if args.split else '--lane both'}"
    )
    print(f"idle   n={len(idle)} p50={i50:.2f} s p95={i95:.2f} s")
    print(f"loaded n={len(loaded)} p50={l50:.2f} s p95={l95:.2f} s (while the backtest ran)")
    if fifo is not None:
        print(f"fifo   one analysis behind {args.batch} interactive-queued analyses: {fifo:.2f} s")
    print(f"ratio={l95 / i95:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
