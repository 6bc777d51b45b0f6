"""A night at scale: one watchlist run of N tickers end to end on this machine, the real way.

    .venv/bin/python bench/night_at_scale.py [--n 5000] [--concurrency 2] [--json out.json]

The tickers are ALIASES: the stocknet folder has 88 real series (../shared/data/ohlcv/stocknet,
daily OHLCV 2012-09 .. 2017-09, see ../shared/data/README.md); the 86 named by letters only are
the bases. Ticker ``K`` of the watchlist is ``<BASE>-<XX>`` (product spelling ``<BASE>.<XX>``),
a symbolic link to ``<BASE>.csv`` in a private data folder, round robin over the bases
(``AAPL.AA``, ``ABB.AA``, …, ``AAPL.AB``, …).
So N analyses read N distinct ticker names whose bars repeat every 86: the per-child bar cache
(keyed by symbol) never hits across aliases, but the numbers of a series are the same real
numbers as its base's. Every table and line this prints says "alias".

What runs (all real processes, nothing mocked, quant mode: no LLM):

* a private ``redis-server`` (``tests/support/private_services.PrivateRedis``, no persistence):
  the broker and the result backend;
* a PostgreSQL database of its own on the shared server (``finagent_night_<pid>``, migrated,
  dropped at the end unless ``--keep``);
* one ``finagent worker --concurrency C`` (prefork: main process + C pool children);
* the producer: ``finagent watchlist run NIGHT --date 2017-08-31 --format json`` (the CLI's
  manual run: it starts the run in bulk, then polls ``finalize_run`` until the digest is
  written, and prints it). The watchlist row is written with ``db.ops_repo.create_watchlist``
  directly: the product caps a watchlist at 200 tickers (``apps.watchlists.MAX_TICKERS``),
  so N = 5,000 is 25 full watchlists' worth in one run.

Measured: wall time (producer start → digest printed) and when the start finished (the CLI's
"N analyses enqueued" line), analyses/s, ``pg_total_relation_size`` per table before/after,
``pg_stat_database`` and ``pg_stat_user_tables`` deltas, peak RSS (``VmHWM``) of each process
(worker main, each pool child, producer, redis-server), CPU seconds by process class sampled
from /proc (worker group, producer, redis, every postgres backend on the shared server: other
people's work is in that one), the batch queues' depth, per-stage tool time from
``tool_calls``, queue wait (first tool call − row created) and latency percentiles, the load
average (``uptime``) before and after, and the digest's counts and first lines.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
DATA = ROOT.parent / "shared" / "data"
STOCKNET = DATA / "ohlcv" / "stocknet"
LEAN = DATA / "ohlcv" / "lean"
ADMIN = "postgresql://postgres@127.0.0.1:5432/postgres"
RUN_DATE = "2017-08-31"  # stocknet's series end 2017-09-01
FINAGENT = str(Path(sys.executable).with_name("finagent"))
_TICK = os.sysconf("SC_CLK_TCK")
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


def log(msg: str) -> None:
    """Progress on stderr with a UTC time."""
    print(f"[{time.strftime('%H:%M:%S', time.gmtime())}] {msg}", file=sys.stderr, flush=True)


def uptime() -> str:
    """The ``uptime`` line (load averages)."""
    return subprocess.run(["uptime"], capture_output=True, text=True, check=False).stdout.strip()


def make_aliases(folder: Path, n: int) -> list[tuple[str, str]]:
    """``n`` (alias, base) pairs as symbolic links ``<BASE>-<XX>.csv`` → stocknet ``<BASE>.csv``
    in ``folder`` (module docstring); bases: the stocknet files named by letters only."""
    bases = sorted(p.stem for p in STOCKNET.glob("*.csv") if p.stem.isalpha() and len(p.stem) <= 5)
    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for k in range(n):
        base, round_ = bases[k % len(bases)], k // len(bases)
        suffix = LETTERS[round_ // 26] + LETTERS[round_ % 26]
        (folder / f"{base}-{suffix}.csv").symlink_to(STOCKNET / f"{base}.csv")
        out.append((f"{base}.{suffix}", base))
    return out


# --- /proc sampling --------------------------------------------------------------------------


def _stat(pid: int) -> tuple[int, float] | None:
    """(process group, CPU seconds) of ``pid``, or None when it is gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    rest = raw[raw.rindex(")") + 2 :].split()
    return int(rest[2]), (int(rest[11]) + int(rest[12])) / _TICK


def _hwm_kb(pid: int) -> int | None:
    """``VmHWM`` (peak resident set, kB) of ``pid``, or None when it is gone."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def _comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


class Sampler(threading.Thread):
    """Once a second: peak RSS and CPU of the worker group, producer, redis; postgres CPU;
    the batch queues' depth (one Redis pipeline of LLENs)."""

    def __init__(self, *, worker_pgid: int, redis_pid: int, redis_url: str) -> None:
        super().__init__(daemon=True)
        self.worker_pgid, self.redis_pid = worker_pgid, redis_pid
        self.producer_pid: int | None = None
        self.hwm: dict[int, tuple[str, int]] = {}  # pid -> (role, kB)
        self.cpu: dict[int, tuple[str, float]] = {}  # pid -> (class, seconds, last seen)
        self.cpu_start: dict[int, float] = {}
        self.max_depth = 0
        self.depths: list[tuple[float, int]] = []
        self.stop_event = threading.Event()
        self.first = True
        import redis

        from core.stages import BATCH_QUEUES

        self.redis = redis.Redis.from_url(redis_url)
        self.queues = BATCH_QUEUES

    def _role(self, pid: int, pgrp: int) -> str | None:
        if pgrp == self.worker_pgid:
            return "worker main" if pid == self.worker_pgid else "worker child"
        if pid == self.producer_pid:
            return "producer"
        if pid == self.redis_pid:
            return "redis"
        if _comm(pid) == "postgres":
            return "postgres (all)"
        return None

    def sample(self) -> None:
        """One sample of every process of interest."""
        for entry in os.scandir("/proc"):
            if not entry.name.isdigit():
                continue
            pid = int(entry.name)
            if pid == os.getpid():
                continue
            st = _stat(pid)
            if st is None:
                continue
            role = self._role(pid, st[0])
            if role is None:
                continue
            # processes running at the first sample count from there (a worker's start-up is
            # not the night's work); those started later (producer, new pool children) from 0
            self.cpu_start.setdefault(pid, st[1] if self.first else 0.0)
            self.cpu[pid] = (role, st[1])
            if role != "postgres (all)":
                kb = _hwm_kb(pid)
                if kb is not None:
                    self.hwm[pid] = (role, max(kb, self.hwm.get(pid, (role, 0))[1]))
        try:
            pipe = self.redis.pipeline()
            for q in self.queues:
                pipe.llen(q)
            depth = sum(int(x) for x in pipe.execute())
            self.max_depth = max(self.max_depth, depth)
            self.depths.append((time.time(), depth))
        except Exception:  # a sample is best effort
            pass
        self.first = False

    def run(self) -> None:
        """Sample until stopped."""
        while not self.stop_event.is_set():
            self.sample()
            self.stop_event.wait(1.0)

    def cpu_by_role(self) -> dict[str, float]:
        """CPU seconds used since sampling began, by role."""
        out: dict[str, float] = {}
        for pid, (role, seconds) in self.cpu.items():
            out[role] = out.get(role, 0.0) + seconds - self.cpu_start.get(pid, 0.0)
        return {k: round(v, 1) for k, v in out.items()}


# --- PostgreSQL ------------------------------------------------------------------------------


def table_sizes(url: str) -> dict[str, int]:
    """``pg_total_relation_size`` (bytes) of every table of the public schema."""
    import psycopg

    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT relname, pg_total_relation_size(relid) FROM pg_stat_user_tables "
            "WHERE schemaname = 'public'"
        ).fetchall()
    return {str(r[0]): int(r[1]) for r in rows}


def db_stats(url: str, db_name: str) -> dict[str, Any]:
    """``pg_stat_database`` counters of ``db_name`` and per-table insert/update/dead counts."""
    import psycopg

    with psycopg.connect(url) as conn:
        conn.execute("SELECT pg_stat_clear_snapshot()")
        row = conn.execute(
            "SELECT xact_commit, xact_rollback, tup_inserted, tup_updated, tup_deleted, tup_fetched, "
            "blks_read, blks_hit, temp_bytes, deadlocks FROM pg_stat_database WHERE datname = %s",
            (db_name,),
        ).fetchone()
        tables = conn.execute(
            "SELECT relname, n_tup_ins, n_tup_upd, n_tup_hot_upd, n_dead_tup, seq_scan, idx_scan "
            "FROM pg_stat_user_tables WHERE schemaname = 'public'"
        ).fetchall()
    keys: tuple[str, ...] = ("xact_commit", "xact_rollback", "tup_inserted", "tup_updated", "tup_deleted")
    keys += ("tup_fetched", "blks_read", "blks_hit", "temp_bytes", "deadlocks")
    return {
        "database": dict(zip(keys, [int(x or 0) for x in row or ()], strict=False)),
        "tables": {
            str(t[0]): dict(
                zip(("ins", "upd", "hot_upd", "dead", "seq_scan", "idx_scan"), map(int, t[1:]), strict=True)
            )
            for t in tables
        },
    }


def stage_timings(url: str) -> dict[str, Any]:
    """Per-stage tool time (``tool_calls``), queue wait and latency of the analyses."""
    import psycopg

    with psycopg.connect(url) as conn:
        stages = conn.execute(
            "SELECT stage, count(*), sum(latency_ms), count(DISTINCT analysis_id) FROM tool_calls "
            "GROUP BY stage ORDER BY stage"
        ).fetchall()
        rows = conn.execute(
            "SELECT extract(epoch FROM a.created_at), extract(epoch FROM a.finished_at), "
            "extract(epoch FROM (SELECT min(t.timestamp) FROM tool_calls t WHERE t.analysis_id = a.id)), "
            "a.status FROM analyses a"
        ).fetchall()
    done = [r for r in rows if r[1] is not None]
    lat = sorted(float(r[1]) - float(r[0]) for r in done)
    waits = sorted(float(r[2]) - float(r[0]) for r in rows if r[2] is not None)

    def pct(xs: list[float], p: float) -> float | None:
        return round(xs[min(len(xs) - 1, int(p * len(xs)))], 1) if xs else None

    first_created = min(float(r[0]) for r in rows) if rows else 0.0
    last_finished = max((float(r[1]) for r in done), default=first_created)
    statuses: dict[str, int] = {}
    for r in rows:
        statuses[str(r[3])] = statuses.get(str(r[3]), 0) + 1
    return {
        "stages": [
            {
                "stage": s,
                "tool_calls": int(n),
                "tool_ms_per_analysis": round(float(ms) / max(int(a), 1), 1),
                "analyses": int(a),
            }
            for s, n, ms, a in stages
        ],
        "statuses": statuses,
        "latency_s": {"p50": pct(lat, 0.5), "p95": pct(lat, 0.95), "max": lat[-1] if lat else None},
        "queue_wait_s": {"p50": pct(waits, 0.5), "p95": pct(waits, 0.95)},
        "first_created_to_last_finished_s": round(last_finished - first_created, 1),
        "mean_service_s": round(
            statistics.fmean(float(r[1]) - float(r[2]) for r in done if r[2] is not None), 3
        )
        if done
        else None,
    }


# --- the run ---------------------------------------------------------------------------------


def main() -> int:
    """Set up, run one night, print the measurements (module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=5000)
    parser.add_argument("--concurrency", type=int, default=2)
    parser.add_argument("--json", type=Path, help="also write every measurement to this file")
    parser.add_argument("--keep", action="store_true", help="keep the database (its name is printed)")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds to wait for the digest")
    args = parser.parse_args()
    if not STOCKNET.is_dir():
        print(f"skipped: {STOCKNET} (the shared real data) is absent", file=sys.stderr)
        return 0
    import psycopg

    from tests.support.private_services import PrivateRedis

    tmp = Path(tempfile.mkdtemp(prefix="finagent-night-"))
    db_name = f"finagent_night_{os.getpid()}"
    pg_url = f"postgresql://postgres@127.0.0.1:5432/{db_name}"
    redis_server = PrivateRedis(folder=tmp / "redis")
    worker: subprocess.Popen[bytes] | None = None
    out: dict[str, Any] = {"n": args.n, "concurrency": args.concurrency, "uptime_before": uptime()}
    log(out["uptime_before"])
    try:
        aliases = make_aliases(tmp / "data", args.n)
        redis_server.start()
        assert redis_server.proc is not None
        with psycopg.connect(ADMIN, autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{db_name}"')
        os.environ.update(
            FINAGENT_SERVICE_BROKER_URL=redis_server.url(0),
            FINAGENT_SERVICE_DATABASE_URL=f"postgresql+psycopg://postgres@127.0.0.1:5432/{db_name}",
            FINAGENT_DATA_PROVIDER="csv",
            FINAGENT_DATA_DIR=str(tmp / "data"),
            FINAGENT_ANALYSIS_BENCHMARK_DATA_DIR=str(LEAN),
            FINAGENT_WATCHLISTS_RUN_TIMEOUT=str(int(args.timeout) + 600),
            FINAGENT_SERVICE_WAIT_TIMEOUT=str(int(args.timeout)),
            FINAGENT_SERVICE_STATE_DIR=str(tmp / "state"),
        )
        for name in [k for k in os.environ if k.startswith("FINAGENT_LLM_")]:
            os.environ.pop(name)  # quant mode: the deterministic analysts
        from db import ops_repo
        from db.engine import get_engine
        from db.migrate import upgrade

        upgrade(url=os.environ["FINAGENT_SERVICE_DATABASE_URL"])
        ops_repo.create_watchlist(
            engine=get_engine(os.environ["FINAGENT_SERVICE_DATABASE_URL"]),
            watchlist_id=str(uuid.uuid4()),
            name="night",
            tickers=[a for a, _ in aliases],
            schedule="30 21 * * 1-5",
            timezone="America/New_York",
            options={},
        )
        log(f"watchlist 'night': {len(aliases)} alias tickers of {len({b for _, b in aliases})} real series")
        sizes_before = table_sizes(pg_url)
        stats_before = db_stats(pg_url, db_name)

        hostname = f"night-{os.getpid()}@localhost"
        worker_log = (tmp / "worker.log").open("wb")
        worker = subprocess.Popen(
            [
                FINAGENT,
                "worker",
                "--concurrency",
                str(args.concurrency),
                "--loglevel",
                "WARNING",
                "-n",
                hostname,
            ],
            cwd=ROOT,
            env=os.environ.copy(),
            stdout=worker_log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        from tasks.app import app

        deadline = time.monotonic() + 180
        while not app.control.ping(destination=[hostname], timeout=1.0):
            if worker.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"worker not ready; see {tmp / 'worker.log'}")
        log(f"worker ready (pid {worker.pid}, concurrency {args.concurrency})")
        sampler = Sampler(
            worker_pgid=worker.pid, redis_pid=redis_server.proc.pid, redis_url=redis_server.url(0)
        )
        sampler.sample()
        sampler.start()

        started = time.monotonic()
        producer = subprocess.Popen(
            [FINAGENT, "watchlist", "run", "night", "--date", RUN_DATE, "--format", "json"],
            cwd=tmp,
            env=os.environ.copy(),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        sampler.producer_pid = producer.pid
        enqueued_at: list[float] = []
        err_lines: list[str] = []

        def read_err() -> None:
            assert producer.stderr is not None
            for line in producer.stderr:
                err_lines.append(line)
                if "analyses enqueued" in line:
                    enqueued_at.append(time.monotonic() - started)
                    log(f"producer: {line.strip()} ({enqueued_at[-1]:.1f} s)")

        reader = threading.Thread(target=read_err, daemon=True)
        reader.start()
        stdout, _ = producer.communicate(timeout=args.timeout + 120)
        wall = time.monotonic() - started
        reader.join(5)
        sampler.stop_event.set()
        sampler.join(5)
        sampler.sample()
        if producer.returncode != 0:
            raise RuntimeError(f"producer exited {producer.returncode}: {''.join(err_lines)[-3000:]}")
        digest = json.loads(stdout)
        out["uptime_after"] = uptime()
        log(out["uptime_after"])

        sizes_after = table_sizes(pg_url)
        stats_after = db_stats(pg_url, db_name)
        timings = stage_timings(pg_url)
        with psycopg.connect(pg_url) as conn:
            head = conn.execute("SELECT digest_markdown FROM watchlist_runs").fetchone()
        markdown = str(head[0]) if head else ""
        done = timings["statuses"].get("done", 0)
        out.update(
            wall_s=round(wall, 1),
            start_s=round(enqueued_at[0], 1) if enqueued_at else None,
            analyses_per_s=round(done / wall, 2),
            analyses_per_s_worker=round(done / max(timings["first_created_to_last_finished_s"], 1e-9), 2),
            digest_counts=digest["counts"],
            digest_head=markdown.splitlines()[:4],
            timings=timings,
            max_batch_queue_depth=sampler.max_depth,
            cpu_s=sampler.cpu_by_role(),
            peak_rss_mb={
                f"{role} {pid}": round(kb / 1024, 1)
                for pid, (role, kb) in sorted(sampler.hwm.items(), key=lambda kv: kv[1][0])
            },
            table_bytes={
                t: {"before": sizes_before.get(t, 0), "after": b, "growth": b - sizes_before.get(t, 0)}
                for t, b in sorted(sizes_after.items(), key=lambda kv: -kv[1])
                if b - sizes_before.get(t, 0) > 0
            },
            db_growth_bytes=sum(sizes_after.values()) - sum(sizes_before.values()),
            pg_database_delta={
                k: stats_after["database"][k] - stats_before["database"].get(k, 0)
                for k in stats_after["database"]
            },
            pg_tables_after=stats_after["tables"],
            aliases="every ticker is an alias <BASE>.<XX> of one of 88 real stocknet series",
        )
        print(
            f"night at scale: {args.n} alias tickers (of {len({b for _, b in aliases})} real series), "
            f"concurrency {args.concurrency}"
        )
        print(f"  uptime before: {out['uptime_before']}")
        print(f"  uptime after:  {out['uptime_after']}")
        print(
            f"  wall {out['wall_s']} s (start of the run {out['start_s']} s), "
            f"{out['analyses_per_s']} analyses/s"
        )
        print(f"  digest counts: {digest['counts']}")
        for line in out["digest_head"]:
            print(f"  digest| {line}")
        print(
            f"  statuses: {timings['statuses']}; latency {timings['latency_s']}; "
            f"wait {timings['queue_wait_s']}"
        )
        print(f"  mean service (first tool call -> finished) {timings['mean_service_s']} s")
        for s in timings["stages"]:
            print(
                f"  stage {s['stage']}: {s['tool_calls']} tool calls, {s['tool_ms_per_analysis']} ms/analysis"
            )
        print(f"  CPU s by role: {out['cpu_s']}")
        print(f"  peak RSS MB: {out['peak_rss_mb']}")
        print(f"  max batch-queue depth: {sampler.max_depth}")
        print(f"  database growth {out['db_growth_bytes'] / 1e6:.1f} MB:")
        for t, v in out["table_bytes"].items():
            print(f"    {t}: {v['before'] / 1e6:.2f} -> {v['after'] / 1e6:.2f} MB")
        print(f"  pg_stat_database delta: {out['pg_database_delta']}")
        if args.json:
            args.json.write_text(json.dumps(out, indent=2, default=str))
        return 0
    finally:
        if worker is not None and worker.poll() is None:
            worker.send_signal(signal.SIGTERM)
            try:
                worker.wait(60)
            except subprocess.TimeoutExpired:
                os.killpg(worker.pid, signal.SIGKILL)
        from db.engine import dispose_engines

        dispose_engines(close=True)
        redis_server.shutdown_nosave()
        if not args.keep:
            with psycopg.connect(ADMIN, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{db_name}" WITH (FORCE)')
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            log(f"kept database {db_name} and {tmp}")


if __name__ == "__main__":
    sys.exit(main())
