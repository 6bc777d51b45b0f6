"""The fault harness: private services, worker processes, fault injection and the invariant check.

Shared by the fault tests (``tests/fault/test_faults.py``) and the chaos benchmark
(``bench/chaos.py``); plain Python, no pytest. Nothing here touches the shared servers of the
machine (docs/design.md, "Testing rules": never stop, restart or flush them). Every scenario gets its own:

* PostgreSQL cluster: ``initdb`` into a fresh ``/tmp/finagent-pg-*`` folder owned by the
  ``postgres`` user (the binaries refuse to run as root, hence ``runuser -u postgres``), trust
  auth, a spare port, its Unix socket in that folder; "an outage" is ``pg_ctl stop -m fast``
  (clients are disconnected at once) and ``pg_ctl start`` on the same port and data folder.
* redis-server on a spare port without persistence (``--save "" --appendonly no``), so
  ``SHUTDOWN NOSAVE`` and a restart lose every queued and unacked message, as a crashed Redis
  without persistence would (docs/design.md, "Celery configuration").
* or a RabbitMQ vhost on the shared node (``rabbitmqctl add_vhost``); the shared node itself is
  never restarted: its "restart" is ``rabbitmqctl close_all_connections -p VHOST``.
* ``finagent worker`` processes (prefork) and one ``finagent sweeper`` (the recovery sweep),
  logs in the scenario folder.

Analyses are enqueued by a producer subprocess (``python -m tests.fault.harness enqueue``): the
Celery app is built from the process environment at import (``tasks.app``), so a
subprocess with the scenario's environment is the producer a user would run.

Definitions used by the report (``ScenarioResult``):

* fault start: the moment the fault is injected (Redis/Postgres stopped, child or main killed,
  connections closed); fault end: the service is back (Redis/Postgres restarted) or, for a
  kill, the kill was sent (kill-main: the replacement worker starts in the background; kill-child).
* resume: seconds from fault end until the first observed progress of any analysis of the
  batch (a status, iteration or ``updated_at`` change).
* recovery: seconds from fault start until every analysis of the batch is terminal.
* re-driven: seconds from fault end until the last re-drive of the batch seen (an analysis's
  ``recoveries`` went up), i.e. until every analysis the fault left without a message was
  re-driven.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import asdict, dataclass, field
from datetime import date, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import quote

from core.settings import get_settings
from tests.support.private_services import PrivateRedis, free_port

REPO_ROOT = Path(__file__).resolve().parents[2]
PG_BIN = Path(os.environ.get("FINAGENT_CHAOS_PG_BIN", "/usr/lib/postgresql/15/bin"))
FINAGENT = str(Path(sys.executable).with_name("finagent"))
RABBIT_HOST_PORT = os.environ.get("FINAGENT_CHAOS_RABBIT", "127.0.0.1:5672")

#: Symbols of the embedded data set (bokeh_sampledata) with years of history before 2010.
SYMBOLS = ("AAPL", "MSFT", "IBM", "GOOG")
#: as_of window: every symbol has > 2 years of bars before it and data after it ends in 2013-03.
AS_OF_RANGE = (date(2010, 1, 4), date(2013, 2, 28))

FAULTS = ("none", "redis-restart", "postgres", "kill-child", "kill-main", "close-connections")
#: Faults that make sense per broker (a Redis restart needs our own Redis; closing a vhost's
#: connections is the RabbitMQ stand-in for a broker restart, the shared node is never restarted).
BROKER_FAULTS = {
    "redis": ("none", "redis-restart", "postgres", "kill-child", "kill-main"),
    "rabbitmq": ("none", "close-connections", "postgres", "kill-child", "kill-main"),
}

#: Tools every pass of a done analysis has a successful row for (stage, tool): research's quote
#: and history (pipeline/stages/research.py) and the analysis stage's indicators and chart
#: levels (pipeline/stages/analysis.py), as a fault-free run writes them. Earnings dates (only
#: for symbols the calendar covers) and the recommendation's calculator calls (one per level it
#: computes) are left out: their count depends on the data, not on durability.
REQUIRED_PASS_TOOLS = (
    ("research", "get_stock_data"),
    ("research", "get_history"),
    ("analysis", "technical_indicators"),
    ("analysis", "find_support_resistance"),
    ("analysis", "calculate_fib_levels"),
)

WORKER_READY_TIMEOUT_S = 180.0  # pandas-ta/numba warm-up on a busy 2-core box
POLL_S = 0.5


def log(message: str) -> None:
    """Progress line on stderr with a wall-clock stamp (pytest shows it on failure)."""
    print(f"[chaos {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def _run(cmd: list[str], *, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run ``cmd`` to completion; raises ``RuntimeError`` with its output when it fails."""
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    if check and proc.returncode != 0:
        raise RuntimeError(
            f"{' '.join(cmd)} exited {proc.returncode}: {proc.stdout[-2000:]}{proc.stderr[-2000:]}"
        )
    return proc


def missing_tools(broker: str) -> list[str]:
    """What this machine lacks to run a scenario on ``broker`` (empty: everything is there)."""
    missing = [str(PG_BIN / b) for b in ("initdb", "pg_ctl") if not (PG_BIN / b).exists()]
    if os.geteuid() == 0 and shutil.which("runuser") is None:
        missing.append("runuser")
    if broker == "redis" and shutil.which("redis-server") is None:
        missing.append("redis-server")
    if broker == "rabbitmq":
        if shutil.which("rabbitmqctl") is None:
            missing.append("rabbitmqctl")
        else:
            host, port = RABBIT_HOST_PORT.split(":")
            with socket.socket() as sock:
                sock.settimeout(2)
                if sock.connect_ex((host, int(port))) != 0:
                    missing.append(f"RabbitMQ at {RABBIT_HOST_PORT}")
    if not Path(FINAGENT).exists():
        missing.append(FINAGENT)
    return missing


# ----------------------------------------------------------------------------------------------
# Private services
# ----------------------------------------------------------------------------------------------


class PrivatePostgres:
    """A PostgreSQL cluster of our own: ``start``/``stop`` keep the port and data folder, so a
    stop-then-start is an outage of the same server, not a new one.

    Runs the binaries as ``postgres`` when we are root (initdb refuses root). Durability settings
    are off (``fsync``, ``full_page_writes``): a fast shutdown still writes a checkpoint, and the
    data folder is thrown away at the end.
    """

    def __init__(self, *, port: int | None = None) -> None:
        """Create the (empty) folder ``/tmp/finagent-pg-*``; nothing runs yet."""
        # /tmp, not pytest's tmp_path: the postgres user must traverse every parent folder.
        self.root = Path(tempfile.mkdtemp(prefix="finagent-pg-"))
        self.data = self.root / "data"
        self.logfile = self.root / "postgres.log"
        self.port = port or free_port()
        self.running = False
        self._user = "postgres" if os.geteuid() == 0 else pwd.getpwuid(os.geteuid()).pw_name
        if os.geteuid() == 0:
            pw = pwd.getpwnam("postgres")
            os.chown(self.root, pw.pw_uid, pw.pw_gid)
        os.chmod(self.root, 0o700)

    def _cmd(self, binary: str, *args: str) -> list[str]:
        cmd = [str(PG_BIN / binary), *args]
        return ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else cmd

    def start(self) -> None:
        """initdb on first use, then ``pg_ctl start`` on the port; returns when it accepts
        connections (``pg_ctl -w``). Raises ``RuntimeError`` when it does not start."""
        if not self.data.exists():
            _run(
                self._cmd(
                    "initdb", "-D", str(self.data), "-U", "postgres", "-A", "trust", "-E", "UTF8", "--no-sync"
                )
            )
        options = (
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 -c fsync=off "
            "-c full_page_writes=off -c synchronous_commit=off -c max_connections=200"
        )
        _run(
            self._cmd(
                "pg_ctl",
                "-D",
                str(self.data),
                "-l",
                str(self.logfile),
                "-w",
                "-t",
                "60",
                "-o",
                options,
                "start",
            )
        )
        self.running = True

    def stop(self, *, mode: str = "fast") -> None:
        """``pg_ctl stop -m MODE`` (fast: roll back and disconnect every client, then stop)."""
        _run(self._cmd("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "-t", "60", "stop"))
        self.running = False

    def conninfo(self, database: str = "postgres") -> str:
        """libpq conninfo of ``database`` (3 s connect timeout)."""
        return f"host=127.0.0.1 port={self.port} user=postgres dbname={database} connect_timeout=3"

    def url(self, database: str) -> str:
        """SQLAlchemy URL of ``database``."""
        return f"postgresql+psycopg://postgres@127.0.0.1:{self.port}/{database}"

    def create_database(self, name: str) -> str:
        """``CREATE DATABASE name``; returns its SQLAlchemy URL."""
        import psycopg
        from psycopg import sql

        with psycopg.connect(self.conninfo(), autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return self.url(name)

    def close(self) -> None:
        """Stop (immediate) if running and delete the folder."""
        if self.running:
            with contextlib.suppress(RuntimeError, subprocess.TimeoutExpired):
                self.stop(mode="immediate")
        shutil.rmtree(self.root, ignore_errors=True)


class RabbitVhost:
    """A vhost of our own on the shared RabbitMQ node (guest has every permission on it)."""

    def __init__(self) -> None:
        """Pick a unique name; nothing is created yet."""
        self.name = f"finagent-chaos-{uuid.uuid4().hex[:8]}"

    def url(self) -> str:
        """The broker URL of the vhost (guest/guest on the shared node)."""
        return f"amqp://guest:guest@{RABBIT_HOST_PORT}/{quote(self.name, safe='')}"

    def create(self) -> None:
        """``add_vhost`` and ``set_permissions -p VHOST guest .* .* .*``."""
        _run(["rabbitmqctl", "add_vhost", self.name])
        _run(["rabbitmqctl", "set_permissions", "-p", self.name, "guest", ".*", ".*", ".*"])

    def close_connections(self) -> None:
        """Close every client connection of the vhost (the stand-in for a broker restart: the
        queues and their messages survive, every channel and its unacked deliveries do not)."""
        _run(["rabbitmqctl", "close_all_connections", "-p", self.name, "finagent chaos test"])

    def delete(self) -> None:
        """``delete_vhost`` (its queues and messages go with it)."""
        _run(["rabbitmqctl", "delete_vhost", self.name], check=False)


# ----------------------------------------------------------------------------------------------
# Processes
# ----------------------------------------------------------------------------------------------


def child_pids(pid: int) -> list[int]:
    """Direct children of ``pid`` (from ``/proc/*/stat``; psutil is not installed here)."""
    children = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after the last ")"
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 1 and int(fields[1]) == pid:
            children.append(int(entry.name))
    return sorted(children)


@dataclass
class Proc:
    """One process we started: its role, Popen, log file and (workers) Celery hostname."""

    name: str
    popen: subprocess.Popen[bytes]
    log: Path
    hostname: str | None = None
    killed: bool = False  # by us, on purpose

    @property
    def pid(self) -> int:
        """The process id."""
        return self.popen.pid

    def alive(self) -> bool:
        """Whether the process still runs."""
        return self.popen.poll() is None


@dataclass
class ScenarioConfig:
    """One scenario: which broker, which fault, how big, and the timing knobs (seconds).

    ``lease_s``, ``sweep_s``, ``max_recoveries``, ``visibility_timeout`` become the durability
    settings (``FINAGENT_DURABILITY_LEASE_SECONDS``, ...) with time limits that nest below them, so a run
    takes minutes; ``defaults=True`` sets none of them: the product's defaults (lease 300 s,
    sweep 60 s, time limits 120/180 s, visibility timeout 420 s). ``extra_env`` is added last
    (e.g. one setting changed from the defaults); ``worker_prefix`` goes before each worker's
    command (e.g. ``("prlimit", "--as=480000000")``: a worker short of memory).
    """

    broker: str = "redis"
    fault: str = "none"
    n: int = 25
    workers: int = 2
    concurrency: int = 2
    bars_delay: float = 0.3
    trigger_fraction: float = 0.2
    redis_down_s: float = 4.0
    pg_outage_s: float = 25.0
    kills: int = 2
    settle_timeout_s: float = 150.0
    grace_s: float = 6.0
    lease_s: int = 15
    sweep_s: int = 3
    max_recoveries: int = 3
    visibility_timeout: int = 30
    min_done_fraction: float = 0.95
    defaults: bool = False
    extra_env: dict[str, str] = field(default_factory=dict)
    worker_prefix: tuple[str, ...] = ()

    def worker_env(self) -> dict[str, str]:
        """The FINAGENT_* settings of workers, beat and producer for this scenario.

        The time limits nest as the settings require (core/settings/durability.py, "durability
        arithmetic"): soft limit < hard limit < lease, hard limit + retry backoff cap <
        visibility timeout (Redis redelivers a message unacked for longer).
        """
        fast = {"FINAGENT_DATA_TOOL_BACKOFF_BASE": "0.05", "FINAGENT_WATCHLISTS_TICK_SECONDS": "3600"}
        if self.defaults:
            return {**fast, **self.extra_env}
        hard = max(3, self.lease_s - 5)
        return {
            "FINAGENT_DURABILITY_LEASE_SECONDS": str(self.lease_s),
            "FINAGENT_DURABILITY_SWEEP_SECONDS": str(self.sweep_s),
            "FINAGENT_DURABILITY_MAX_RECOVERIES": str(self.max_recoveries),
            "FINAGENT_DURABILITY_VISIBILITY_TIMEOUT": str(self.visibility_timeout),
            "FINAGENT_DURABILITY_TASK_SOFT_TIME_LIMIT": str(hard - 2),
            "FINAGENT_DURABILITY_TASK_TIME_LIMIT": str(hard),
            "FINAGENT_DURABILITY_TASK_RETRY_BACKOFF_MAX": str(
                max(1, min(5, self.visibility_timeout - hard - 1))
            ),
            "FINAGENT_DATA_TOOL_BACKOFF_BASE": "0.05",
            "FINAGENT_WATCHLISTS_TICK_SECONDS": "3600",
            "FINAGENT_SERVICE_BEAT_LOCK_TIMEOUT": "10",
            **self.extra_env,
        }


class Stack:
    """The private services, workers and beat of one scenario; ``close`` stops everything."""

    def __init__(self, *, config: ScenarioConfig, folder: Path) -> None:
        """Start Postgres (+ migrated database) and the broker; workers come from
        :meth:`start_worker`. On error everything started so far is stopped."""
        self.config = config
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.procs: list[Proc] = []
        self.redis: PrivateRedis | None = None
        self.vhost: RabbitVhost | None = None
        self._inspect_app: Any = None
        self._n_workers = 0
        self.pg = PrivatePostgres()
        try:
            self.pg.start()
            self.database_url = self.pg.create_database("finagent")
            if config.broker == "redis":
                self.redis = PrivateRedis(folder=folder)
                self.redis.start()
                self.broker_url = self.redis.url(0)
            elif config.broker == "rabbitmq":
                self.vhost = RabbitVhost()
                self.vhost.create()
                self.broker_url = self.vhost.url()
            else:
                raise ValueError(f"broker must be redis or rabbitmq, not {config.broker!r}")
            self.env = self._base_env()
            proc = subprocess.run(
                [FINAGENT, "db", "upgrade"], env=self.env, cwd=folder, capture_output=True, text=True,
                timeout=120, check=False,
            )  # fmt: skip
            if proc.returncode != 0:
                raise RuntimeError(f"finagent db upgrade failed: {proc.stderr[-3000:]}")
        except BaseException:
            self.close()
            raise

    def _base_env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("FINAGENT_")}
        env.update(
            PYTHONPATH=str(REPO_ROOT),
            LITELLM_LOCAL_MODEL_COST_MAP="True",
            FINAGENT_SERVICE_BROKER_URL=self.broker_url,
            FINAGENT_SERVICE_DATABASE_URL=self.database_url,
            FINAGENT_SERVICE_STATE_DIR=str(self.folder / "state"),
            FINAGENT_SERVICE_LOG_LEVEL="INFO",
            **self.config.worker_env(),
        )
        return env

    # -- processes ------------------------------------------------------------------------

    def _spawn(self, name: str, args: list[str], env: dict[str, str], hostname: str | None = None) -> Proc:
        logfile = self.folder / f"{name}.log"
        prefix = list(self.config.worker_prefix) if hostname else []
        with logfile.open("ab") as fh:
            popen = subprocess.Popen(
                [*prefix, FINAGENT, *args], env=env, cwd=self.folder, stdout=fh, stderr=subprocess.STDOUT,
                start_new_session=True,
            )  # fmt: skip
        proc = Proc(name=name, popen=popen, log=logfile, hostname=hostname)
        self.procs.append(proc)
        return proc

    def start_worker(self, *, wait: bool = True) -> Proc:
        """Start ``finagent worker --concurrency C`` (all stage queues) with the slowed-down
        data plug-in (``tests.fault.slowdata``); with ``wait``, return once its log says ready.

        Raises ``RuntimeError`` when it exits or is not ready in ``WORKER_READY_TIMEOUT_S``.
        """
        self._n_workers += 1
        hostname = f"chaos{self._n_workers}-{uuid.uuid4().hex[:6]}@localhost"
        env = {
            **self.env,
            "FINAGENT_DATA_PROVIDER": "tests.fault.slowdata:SlowEmbeddedProvider",
            "FINAGENT_CHAOS_BARS_DELAY": str(self.config.bars_delay),
        }
        args = ["worker", "--concurrency", str(self.config.concurrency), "--loglevel", "INFO", "-n", hostname]
        proc = self._spawn(f"worker{self._n_workers}", args, env, hostname=hostname)
        if wait:
            self.wait_ready(proc)
        return proc

    def wait_ready(self, proc: Proc) -> None:
        """Block until the worker's log has Celery's "HOSTNAME ready." line."""
        deadline = time.monotonic() + WORKER_READY_TIMEOUT_S
        marker = f"{proc.hostname} ready".encode()
        while time.monotonic() < deadline:
            if marker in proc.log.read_bytes():
                return
            if not proc.alive():
                raise RuntimeError(f"{proc.name} exited {proc.popen.returncode}: {tail(proc.log, 40)}")
            time.sleep(0.3)
        raise RuntimeError(f"{proc.name} not ready in {WORKER_READY_TIMEOUT_S}s: {tail(proc.log, 40)}")

    def start_sweeper(self) -> Proc:
        """Start ``finagent sweeper`` (the recovery sweep, independent of the workers) and
        return once its log says it started. Raises ``RuntimeError`` when it exits first."""
        proc = self._spawn("sweeper", ["sweeper", "--loglevel", "INFO"], self.env)
        deadline = time.monotonic() + WORKER_READY_TIMEOUT_S
        while b"recovery sweeper started" not in proc.log.read_bytes():
            if not proc.alive() or time.monotonic() > deadline:
                raise RuntimeError(f"sweeper did not start ({proc.popen.returncode}): {tail(proc.log, 20)}")
            time.sleep(0.3)
        return proc

    def workers(self) -> list[Proc]:
        """Worker processes that are alive and were not killed by us."""
        return [p for p in self.procs if p.hostname and p.alive() and not p.killed]

    def _inspect(self) -> Any:
        """finagent's Celery app (``tasks.app.create_app``) on the scenario's broker, built at the
        first call: its control API asks the workers. An app of the scenario's own, not the
        process's: a broadcast is published through the app's producer pool, so the app's
        broker must be the workers'."""
        if self._inspect_app is None:
            from core.settings import Settings
            from tasks.app import create_app  # the harness process needs the app only here

            self._inspect_app = create_app(Settings(service={"broker_url": self.broker_url}))
            self._inspect_app.conf.broker_connection_timeout = 3
        return self._inspect_app

    def active_tasks(self, worker: Proc) -> list[dict[str, Any]]:
        """``celery inspect active`` of ``worker``: running tasks with ``worker_pid`` and args."""
        try:
            inspect = self._inspect().control.inspect(destination=[worker.hostname], timeout=2.0)
            replies = inspect.active() or {}
        except Exception as exc:  # an inspect during a broker fault: no answer is an answer
            log(f"inspect active failed: {exc!r}")
            return []
        return list(replies.get(worker.hostname or "", []))

    def kill_busy_child(self, worker: Proc, *, timeout: float = 15) -> dict[str, Any]:
        """SIGKILL one prefork child of ``worker`` while it runs a stage task (found with
        ``inspect active``; after ``timeout`` s without one, any child). Returns what was
        killed: ``{pid, task, analysis_id, mid_stage}``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            children = set(child_pids(worker.pid))
            for task in self.active_tasks(worker):
                pid = task.get("worker_pid")
                if pid in children and str(task.get("name", "")).startswith("finagent."):
                    args = task.get("args") or [{}]
                    payload = args[0] if isinstance(args, list | tuple) and args else {}
                    analysis_id = payload.get("analysis_id") if isinstance(payload, dict) else None
                    os.kill(pid, signal.SIGKILL)
                    return {
                        "pid": pid,
                        "task": task.get("name"),
                        "analysis_id": analysis_id,
                        "mid_stage": True,
                    }
            time.sleep(0.2)
        children = child_pids(worker.pid)
        if not children:
            raise RuntimeError(f"{worker.name} has no prefork children to kill")
        os.kill(children[0], signal.SIGKILL)
        return {"pid": children[0], "task": None, "analysis_id": None, "mid_stage": False}

    def kill_main(self, worker: Proc) -> list[str]:
        """SIGKILL the worker's main process (its children are left to themselves, as after an
        OOM kill of the parent). Returns the analysis ids it was running (``inspect active``)."""
        running = [
            (t.get("args") or [{}])[0].get("analysis_id")
            for t in self.active_tasks(worker)
            if isinstance((t.get("args") or [None])[0], dict)
        ]
        os.kill(worker.pid, signal.SIGKILL)
        worker.killed = True
        worker.popen.wait(timeout=10)
        return [a for a in running if a]

    def unexpected_exits(self) -> list[str]:
        """Processes that exited without us killing them (e.g. a worker after a Redis restart)."""
        return [
            f"{p.name} (pid {p.pid}) exited {p.popen.returncode}"
            for p in self.procs
            if not p.alive() and not p.killed
        ]

    def log_excerpt(self, *, lines: int = 25) -> str:
        """Per log file: its error lines (ERROR/CRITICAL/Traceback/WorkerLost/Restoring) and
        its last lines, for a failure message."""
        pattern = re.compile(
            r"CRITICAL|ERROR|Traceback|WorkerLost|Restoring|Unrecoverable|recover|STALLED", re.I
        )
        out = []
        for path in sorted(self.folder.glob("*.log")):
            text = path.read_text(errors="replace").splitlines()
            # the JSON tool-call lines carry an "error" field even on success: only their level counts
            hits = [
                line[:400]
                for line in text
                if pattern.search(line) and (not line.startswith("{") or '"level":"ERROR"' in line)
            ]
            out.append(f"--- {path} ({len(text)} lines, {len(hits)} error lines)")
            out += hits[:lines]
            out.append("    ... last lines:")
            out += [line[:400] for line in text[-lines // 2 :]]
        return "\n".join(out)

    def close(self) -> None:
        """Stop every process (TERM, then KILL, by process group: also orphaned prefork
        children of a killed main) and the private services; delete the vhost."""
        for proc in self.procs:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.popen.wait(timeout=20)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.popen.wait(timeout=5)
        if self._inspect_app is not None:
            with contextlib.suppress(Exception):
                self._inspect_app.close()
        if self.redis is not None:
            self.redis.close()
        if self.vhost is not None:
            self.vhost.delete()
        self.pg.close()


def tail(path: Path, lines: int) -> str:
    """The last ``lines`` lines of a text file ("" when it does not exist)."""
    if not path.exists():
        return ""
    return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])


# ----------------------------------------------------------------------------------------------
# Producer and observer
# ----------------------------------------------------------------------------------------------


def analysis_pairs(n: int) -> list[tuple[str, date]]:
    """``n`` distinct (symbol, as_of) pairs spread evenly over :data:`AS_OF_RANGE` (weekdays,
    all four symbols). Raises ``ValueError`` for more pairs than the range holds."""
    first, last = AS_OF_RANGE
    days = [first + timedelta(days=i) for i in range((last - first).days + 1)]
    pairs = [(s, d) for d in days if d.weekday() < 5 for s in SYMBOLS]
    if n > len(pairs):
        raise ValueError(f"at most {len(pairs)} distinct analyses, asked for {n}")
    step = len(pairs) / n
    return [pairs[int(i * step)] for i in range(n)]


def enqueue(stack: Stack, n: int) -> list[str]:
    """Enqueue ``n`` analyses through the product's producer path (``service.start_analysis``)
    in a subprocess with the stack's environment; returns their ids in order."""
    proc = subprocess.run(
        [sys.executable, "-m", "tests.fault.harness", "enqueue", "--n", str(n)],
        env=stack.env, cwd=REPO_ROOT, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    if proc.returncode != 0:
        raise RuntimeError(f"enqueue failed ({proc.returncode}): {proc.stderr[-3000:]}")
    ids: list[str] = json.loads(proc.stdout.strip().splitlines()[-1])
    return ids


def _enqueue_main(n: int) -> None:
    """Body of ``python -m tests.fault.harness enqueue``: print the ids as one JSON list."""
    import tasks  # noqa: F401  # installs the task queue, as any producer process does
    from pipeline import service

    ids = [
        service.start_analysis(
            request=service.AnalysisRequest(symbol=s, as_of=d), settings=get_settings()
        ).analysis_id
        for s, d in analysis_pairs(n)
    ]
    sys.stdout.write(json.dumps(ids) + "\n")


@dataclass
class Observation:
    """What polling the ``analyses`` rows saw: the first terminal (status, finished_at) of each
    analysis, later changes of a terminal row, and progress times (``time.monotonic()``)."""

    first_terminal: dict[str, tuple[str, str | None]] = field(default_factory=dict)
    flips: list[str] = field(default_factory=list)
    last_progress: float = 0.0
    progress_times: list[float] = field(default_factory=list)
    all_terminal_at: float | None = None
    last_snapshot: dict[str, tuple[str, int, str | None, str | None]] = field(default_factory=dict)
    #: re-drives seen: ``(time.monotonic(), analysis id)`` each time an analysis's
    #: ``recoveries`` went up between two polls
    redrives: list[tuple[float, str]] = field(default_factory=list)
    recoveries: dict[str, int] = field(default_factory=dict)


class Observer:
    """Polls the batch's ``analyses`` rows (a fresh psycopg connection per poll, so a database
    outage is just a failed poll) and keeps an :class:`Observation`."""

    def __init__(self, *, conninfo: str, ids: list[str]) -> None:
        """Watch ``ids`` in the database at ``conninfo``."""
        self.conninfo = conninfo
        self.ids = ids
        self.obs = Observation()

    def poll(self, *, baseline: bool = False) -> dict[str, str] | None:
        """One poll; returns ``{id: status}`` or ``None`` when the database does not answer.
        A ``baseline`` poll records the rows without counting their change as progress (the
        first poll after a fault, during which nobody polled)."""
        import psycopg

        try:
            with psycopg.connect(self.conninfo) as conn:
                rows = conn.execute(
                    "SELECT id, status, iteration, updated_at::text, finished_at::text, recoveries"
                    " FROM analyses WHERE id = ANY(%s)",
                    (self.ids,),
                ).fetchall()
        except psycopg.Error:
            return None
        now = time.monotonic()
        snapshot = {r[0]: (r[1], r[2], r[3], r[4]) for r in rows}
        for r in rows:
            if r[5] > self.obs.recoveries.get(r[0], 0):
                self.obs.redrives.append((now, r[0]))
            self.obs.recoveries[r[0]] = r[5]
        if snapshot != self.obs.last_snapshot:
            if self.obs.last_snapshot and not baseline:
                self.obs.progress_times.append(now)
            self.obs.last_snapshot = snapshot
        for aid, (status, _, _, finished) in snapshot.items():
            if status in ("done", "failed"):
                first = self.obs.first_terminal.setdefault(aid, (status, finished))
                if first != (status, finished) and not any(f.startswith(aid) for f in self.obs.flips):
                    self.obs.flips.append(f"{aid}: first {first}, later {(status, finished)}")
        statuses = {aid: s[0] for aid, s in snapshot.items()}
        if len(statuses) == len(self.ids) and all(s in ("done", "failed") for s in statuses.values()):
            if self.obs.all_terminal_at is None:
                self.obs.all_terminal_at = now
        else:
            self.obs.all_terminal_at = None
        return statuses

    def terminal_fraction(self) -> float:
        """Fraction of the batch terminal at the last successful poll."""
        snap = self.obs.last_snapshot
        return sum(1 for s in snap.values() if s[0] in ("done", "failed")) / max(1, len(self.ids))

    def wait(self, *, until: float, grace: float) -> bool:
        """Poll until every analysis is terminal and stayed so for ``grace`` s (a late
        duplicate write would show up as a flip), or until ``until`` (monotonic). Returns
        whether everything is terminal."""
        while time.monotonic() < until:
            self.poll()
            done_at = self.obs.all_terminal_at
            if done_at is not None and time.monotonic() - done_at >= grace:
                return True
            time.sleep(POLL_S)
        self.poll()
        return self.obs.all_terminal_at is not None


# ----------------------------------------------------------------------------------------------
# The invariant checker
# ----------------------------------------------------------------------------------------------


@dataclass
class InvariantReport:
    """Counts and violations of one batch (see :func:`check_invariants`). ``ok`` is True when
    nothing is violated."""

    enqueued: int = 0
    done: int = 0
    failed: int = 0
    stuck: int = 0
    tool_rows: int = 0
    duplicate_tool_rows: int = 0
    reexecuted_tool_calls: int = 0
    incomplete_done: int = 0
    orders: int = 0
    duplicate_orders: int = 0
    flips: int = 0
    recoveries: int | None = None  # sum of analyses.recoveries (None: no such column yet)
    failure_reasons: dict[str, int] = field(default_factory=dict)
    stuck_statuses: dict[str, int] = field(default_factory=dict)
    violations: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """No violation."""
        return not self.violations

    def summary(self) -> str:
        """A multi-line human summary (counts, failure reasons, violations)."""
        data = asdict(self)
        violations = data.pop("violations")
        lines = [", ".join(f"{k}={v}" for k, v in data.items())]
        lines += [f"VIOLATION: {v}" for v in violations]
        return "\n".join(lines)


def _reason(error: str | None) -> str:
    """A short class of a failure message (its first 90 characters, ids and numbers masked)."""
    text = re.sub(r"[0-9a-f]{8}-[0-9a-f-]{27}|\d+", "#", error or "<no error>")
    return text[:90]


def check_invariants(
    *,
    conninfo: str,
    ids: list[str],
    observation: Observation | None = None,
    must_be_done: tuple[str, ...] = (),
    min_done_fraction: float = 0.95,
) -> InvariantReport:
    """Check the durability invariants of one batch in the database at ``conninfo``.

    Invariants (each broken one is a line in ``violations``):

    1. Every enqueued analysis has a row, and every row of the table is terminal (``done`` or
       ``failed``) with ``finished_at`` set: nothing is left non-terminal ("stuck").
    2. Terminal exactly once: a row seen terminal never changes its status or ``finished_at``
       afterwards (``observation.first_terminal`` vs now, plus flips seen while polling).
    3. At least ``min_done_fraction`` of the batch is ``done``.
    4. No duplicate ``tool_calls``: ``count(*) = count(DISTINCT (tool_call_id, attempt))``.
       ``tool_calls`` has one row per ATTEMPT (db/models.py ``ToolCall``: attempts of one logical
       call share ``tool_call_id``; the primary key is ``"<tool_call_id>#<attempt>"``), so
       ``count(DISTINCT tool_call_id)`` alone would count a tool-level retry as a duplicate.
       ``reexecuted_tool_calls`` (reported, not a violation) counts successful calls made again
       with the same (analysis, pass, stage, tool, arguments) under another id: work a Celery
       retry or a recovery re-drive repeated (their ids are seeded by the retry number,
       pipeline/steps/context.py, so a repeat is a new row by design).
    5. Every done analysis is complete: error unset, report, report_json and signal set, a
       successful row for each of :data:`REQUIRED_PASS_TOOLS` in every pass
       ``0..iteration``, and exactly the pass claims ``0..iteration`` in
       ``analysis_iterations`` (a pass enqueued twice or claimed but never run is a
       violation). A failed analysis has its error.
    6. Paper orders: analyses place none (no stage calls a trade tool; pipeline/stages/), so
       the check is that the ``orders`` table is consistent: no two orders share
       ``(account_id, client_order_id)`` and no order has more filled shares than its fills
       (the unique constraint makes the first impossible unless it is dropped).
    7. Every id in ``must_be_done`` (the analyses whose stage was killed) ends ``done``.
    """
    import psycopg

    rep = InvariantReport(enqueued=len(ids))
    with psycopg.connect(conninfo) as conn:
        rows = {
            r[0]: r
            for r in conn.execute(
                "SELECT id, status, iteration, finished_at::text, error, report IS NOT NULL,"
                " report_json IS NOT NULL, signal FROM analyses"
            ).fetchall()
        }
        tool_total, tool_distinct = conn.execute(
            "SELECT count(*), count(DISTINCT (tool_call_id, attempt)) FROM tool_calls"
        ).fetchone() or (0, 0)
        reexecuted = conn.execute(
            "SELECT count(*) - count(DISTINCT (analysis_id, iteration, stage, tool, arguments::text))"
            " FROM tool_calls WHERE status = 'success' AND analysis_id IS NOT NULL"
        ).fetchone()
        pass_tools: dict[tuple[str, int], set[tuple[str, str]]] = {}
        for aid, iteration, stage, tool in conn.execute(
            "SELECT DISTINCT analysis_id, iteration, stage, tool FROM tool_calls"
            " WHERE status = 'success' AND analysis_id IS NOT NULL"
        ).fetchall():
            pass_tools.setdefault((aid, iteration), set()).add((stage, tool))
        claims: dict[str, list[int]] = {}
        for aid, iteration in conn.execute(
            "SELECT analysis_id, iteration FROM analysis_iterations ORDER BY 1, 2"
        ).fetchall():
            claims.setdefault(aid, []).append(iteration)
        orders_total, orders_distinct = conn.execute(
            "SELECT count(*), count(DISTINCT (account_id, client_order_id)) FROM orders"
            " WHERE client_order_id IS NOT NULL"
        ).fetchone() or (0, 0)
        all_orders = conn.execute("SELECT count(*) FROM orders").fetchone()
        has_recoveries = conn.execute(
            "SELECT 1 FROM information_schema.columns"
            " WHERE table_name = 'analyses' AND column_name = 'recoveries'"
        ).fetchone()
        if has_recoveries:
            total = conn.execute(
                "SELECT COALESCE(sum(recoveries), 0) FROM analyses WHERE id = ANY(%s)", (ids,)
            ).fetchone()
            rep.recoveries = int(total[0]) if total else 0
        overfilled = conn.execute(
            "SELECT count(*) FROM orders o WHERE o.filled_quantity <>"
            " COALESCE((SELECT sum(f.quantity) FROM fills f WHERE f.order_id = o.id), 0)"
        ).fetchone()

    missing = [i for i in ids if i not in rows]
    if missing:
        rep.violations.append(f"{len(missing)} enqueued analyses have no row, e.g. {missing[:3]}")
    stuck = [r for r in rows.values() if r[1] not in ("done", "failed")]
    rep.stuck = len(stuck)
    rep.stuck_statuses = dict(Counter(r[1] for r in stuck))
    if stuck:
        rep.violations.append(
            f"{len(stuck)} analyses not terminal {rep.stuck_statuses}, e.g. {[r[0] for r in stuck[:3]]}"
        )
    batch = [rows[i] for i in ids if i in rows]
    rep.done = sum(1 for r in batch if r[1] == "done")
    rep.failed = sum(1 for r in batch if r[1] == "failed")
    rep.failure_reasons = dict(Counter(_reason(r[4]) for r in batch if r[1] == "failed").most_common(8))
    no_finish = [r[0] for r in rows.values() if r[1] in ("done", "failed") and r[3] is None]
    if no_finish:
        rep.violations.append(f"{len(no_finish)} terminal analyses without finished_at, e.g. {no_finish[:3]}")
    if rep.enqueued and rep.done / rep.enqueued < min_done_fraction:
        rep.violations.append(
            f"only {rep.done}/{rep.enqueued} done ({rep.done / rep.enqueued:.0%} < {min_done_fraction:.0%});"
            f" failures: {rep.failure_reasons}"
        )

    # Terminal exactly once.
    flips = list(observation.flips) if observation else []
    if observation:
        for aid, first in observation.first_terminal.items():
            now = (rows[aid][1], rows[aid][3]) if aid in rows else None
            if now != first and not any(f.startswith(aid) for f in flips):
                flips.append(f"{aid}: first {first}, finally {now}")
    rep.flips = len(flips)
    if flips:
        rep.violations.append(f"{len(flips)} analyses changed after being terminal: {flips[:3]}")

    rep.tool_rows = int(tool_total)
    rep.duplicate_tool_rows = int(tool_total) - int(tool_distinct)
    rep.reexecuted_tool_calls = int(reexecuted[0]) if reexecuted else 0
    if rep.duplicate_tool_rows:
        rep.violations.append(
            f"{rep.duplicate_tool_rows} duplicate tool_calls rows (same tool_call_id, attempt)"
        )

    incomplete = []
    for r in rows.values():
        aid, status, iteration, _, error, has_report, has_json, sig = r
        if status == "failed" and not error:
            incomplete.append(f"{aid}: failed without an error")
        if status != "done":
            continue
        problems = []
        if error:
            problems.append(f"error {error[:80]!r}")
        if not (has_report and has_json and sig):
            problems.append("no report/report_json/signal")
        for it in range(iteration + 1):
            lacking = set(REQUIRED_PASS_TOOLS) - pass_tools.get((aid, it), set())
            if lacking:
                problems.append(f"pass {it} lacks {sorted(lacking)}")
        if claims.get(aid, []) != list(range(iteration + 1)):
            problems.append(f"pass claims {claims.get(aid)} for iteration {iteration}")
        if problems:
            incomplete.append(f"{aid}: {'; '.join(problems)}")
    rep.incomplete_done = len(incomplete)
    if incomplete:
        rep.violations.append(f"{len(incomplete)} terminal analyses incomplete: {incomplete[:3]}")

    rep.orders = int(all_orders[0]) if all_orders else 0
    rep.duplicate_orders = int(orders_total) - int(orders_distinct)
    if rep.duplicate_orders:
        rep.violations.append(f"{rep.duplicate_orders} duplicate paper orders (account_id, client_order_id)")
    if overfilled and overfilled[0]:
        rep.violations.append(f"{overfilled[0]} orders whose filled_quantity differs from their fills")

    not_done = [
        f"{a}: {rows[a][1] if a in rows else 'no row'}"
        for a in must_be_done
        if a not in rows or rows[a][1] != "done"
    ]
    if not_done:
        rep.violations.append(
            f"{len(not_done)} analyses whose stage was killed did not finish done: {not_done[:3]}"
            f" ({[_reason(rows[a.split(':')[0]][4]) for a in not_done[:3] if a.split(':')[0] in rows]})"
        )
    return rep


# ----------------------------------------------------------------------------------------------
# Scenario runner
# ----------------------------------------------------------------------------------------------


@dataclass
class ScenarioResult:
    """The outcome of one scenario (times in seconds, see the module docstring)."""

    config: ScenarioConfig
    report: InvariantReport
    ids: list[str]
    enqueue_s: float
    fault_at_fraction: float | None
    resume_s: float | None
    recovery_s: float | None
    notes: list[str]
    folder: Path
    excerpt: str = ""
    redrive_s: float | None = None

    def as_json(self) -> dict[str, Any]:
        """The result as one JSON-able dict (config, counts, violations, times, notes)."""
        return {
            "broker": self.config.broker,
            "fault": self.config.fault,
            "n": self.config.n,
            **asdict(self.report),
            "ok": self.report.ok,
            "enqueue_s": self.enqueue_s,
            "fault_at_fraction": self.fault_at_fraction,
            "resume_s": self.resume_s,
            "recovery_s": self.recovery_s,
            "redrive_s": self.redrive_s,
            "notes": self.notes,
            "logs": str(self.folder),
        }

    def explain(self) -> str:
        """Everything a failing test should show: counts, violations, notes, log excerpts."""
        return (
            f"{self.config.broker}/{self.config.fault}: {self.report.summary()}\n"
            f"resume_s={self.resume_s} recovery_s={self.recovery_s} redrive_s={self.redrive_s} "
            f"fault at {self.fault_at_fraction} terminal\nnotes:\n  "
            + "\n  ".join(self.notes)
            + f"\nlogs in {self.folder}:\n{self.excerpt}"
        )


def stuck_rows(conninfo: str, *, limit: int = 5) -> str:
    """Up to ``limit`` non-terminal ``analyses`` rows, every column but the big JSON/text ones
    (state, report, report_json), for a failure message; "" when the database does not answer."""
    import psycopg

    try:
        with psycopg.connect(conninfo) as conn:
            cur = conn.execute(
                "SELECT * FROM analyses WHERE status NOT IN ('done', 'failed') ORDER BY updated_at LIMIT %s",
                (limit,),
            )
            names = [d.name for d in cur.description or []]
            rows = cur.fetchall()
    except psycopg.Error as exc:
        return f"(stuck rows unavailable: {exc})"
    skip = {"state", "report", "report_json", "user_query"}
    return "stuck rows:\n" + "\n".join(
        "  " + ", ".join(f"{k}={v}" for k, v in zip(names, row, strict=True) if k not in skip) for row in rows
    )


def inject(stack: Stack, config: ScenarioConfig, notes: list[str]) -> tuple[list[str], float]:
    """Inject ``config.fault``; returns (analysis ids whose stage was killed, monotonic time of
    the fault's end). Raises ``ValueError`` for a fault the broker does not support."""
    fault = config.fault
    if fault not in BROKER_FAULTS[config.broker]:
        raise ValueError(f"fault {fault!r} is not supported on {config.broker} (see BROKER_FAULTS)")
    killed: list[str] = []
    if fault == "redis-restart":
        assert stack.redis is not None
        stack.redis.shutdown_nosave()
        time.sleep(config.redis_down_s)
        stack.redis.start()
        notes.append(f"redis shutdown nosave, restarted after {config.redis_down_s}s")
    elif fault == "postgres":
        stack.pg.stop(mode="fast")
        time.sleep(config.pg_outage_s)
        stack.pg.start()
        notes.append(f"postgres stopped (fast) for {config.pg_outage_s}s")
    elif fault == "kill-child":
        workers = stack.workers()
        for k in range(config.kills):
            info = stack.kill_busy_child(workers[k % len(workers)])
            notes.append(f"killed child {info}")
            if info["analysis_id"]:
                killed.append(info["analysis_id"])
            time.sleep(1.0)
    elif fault == "kill-main":
        victim = stack.workers()[0]
        running = stack.kill_main(victim)
        notes.append(f"killed main {victim.name} pid {victim.pid}, running {running}")
        killed += running
        # the replacement starts in the background (~40 s of warm-up on a loaded machine): the
        # fault ends at the kill, so the times measured run from it, and the analyses the kill
        # left are finished by the other worker, or by the replacement once it is up
        replacement = stack.start_worker(wait=False)
        notes.append(f"replacement {replacement.name} started")
    elif fault == "close-connections":
        assert stack.vhost is not None
        stack.vhost.close_connections()
        notes.append(f"closed all connections of vhost {stack.vhost.name}")
    return killed, time.monotonic()


def run_scenario(config: ScenarioConfig, *, folder: Path) -> ScenarioResult:
    """Run one scenario end to end on fresh private services in ``folder`` and check the
    invariants. Never raises for a broken invariant (see ``result.report``); raises
    ``RuntimeError`` when the stack itself cannot start."""
    notes: list[str] = []
    log(f"scenario {config.broker}/{config.fault} n={config.n} in {folder}")
    stack = Stack(config=config, folder=folder)
    try:
        for _ in range(config.workers):
            stack.start_worker(wait=False)
        for proc in stack.workers():
            stack.wait_ready(proc)
        stack.start_sweeper()
        t0 = time.monotonic()
        ids = enqueue(stack, config.n)
        enqueue_s = time.monotonic() - t0
        log(f"enqueued {len(ids)} in {enqueue_s:.1f}s")
        observer = Observer(conninfo=stack.pg.conninfo("finagent"), ids=ids)
        fault_fraction: float | None = None
        killed: list[str] = []
        resume_s = recovery_s = None
        if config.fault != "none":
            trigger_deadline = time.monotonic() + config.settle_timeout_s
            while (
                observer.terminal_fraction() < config.trigger_fraction and time.monotonic() < trigger_deadline
            ):
                observer.poll()
                time.sleep(0.2)
            fault_fraction = observer.terminal_fraction()
            log(f"injecting {config.fault} at {fault_fraction:.0%} terminal")
            t_fault = time.monotonic()
            killed, t_end = inject(stack, config, notes)
            observer.poll(baseline=True)
            log(f"fault over after {t_end - t_fault:.1f}s")
        else:
            t_fault = t_end = time.monotonic()
        finished = observer.wait(until=t_end + config.settle_timeout_s, grace=config.grace_s)
        obs = observer.obs
        after = [t for t in obs.progress_times if t > t_end]
        if config.fault != "none":
            resume_s = round(after[0] - t_end, 1) if after else None
        if finished and obs.all_terminal_at is not None:
            recovery_s = round(obs.all_terminal_at - t_fault, 1)
        redriven = [t for t, _ in obs.redrives if t > t_fault]
        redrive_s = round(max(redriven) - t_end, 1) if redriven else None
        notes += stack.unexpected_exits()
        report = check_invariants(
            conninfo=stack.pg.conninfo("finagent"),
            ids=ids,
            observation=obs,
            must_be_done=tuple(killed) if config.fault == "kill-child" else (),
            min_done_fraction=config.min_done_fraction,
        )
        result = ScenarioResult(
            config=config, report=report, ids=ids, enqueue_s=round(enqueue_s, 1),
            fault_at_fraction=fault_fraction, resume_s=resume_s, recovery_s=recovery_s,
            notes=notes, folder=folder, redrive_s=redrive_s,
        )  # fmt: skip
        if not report.ok:
            result.excerpt = stuck_rows(stack.pg.conninfo("finagent")) + "\n" + stack.log_excerpt()
        results_file = os.environ.get("FINAGENT_CHAOS_RESULTS")
        if results_file:  # one JSON line per scenario, for before/after tables
            with open(results_file, "a") as fh:
                fh.write(json.dumps(result.as_json(), default=str) + "\n")
        log(f"result {config.broker}/{config.fault}: {report.summary()}")
        return result
    finally:
        stack.close()


def main(argv: list[str] | None = None) -> None:
    """``python -m tests.fault.harness enqueue --n N`` (the producer subprocess)."""
    parser = argparse.ArgumentParser(prog="python -m tests.fault.harness")
    sub = parser.add_subparsers(dest="command", required=True)
    enq = sub.add_parser("enqueue", help="enqueue N analyses, print their ids as JSON")
    enq.add_argument("--n", type=int, required=True)
    args = parser.parse_args(argv)
    if args.command == "enqueue":
        _enqueue_main(args.n)


if __name__ == "__main__":
    main()


__all__ = [
    "BROKER_FAULTS",
    "FAULTS",
    "InvariantReport",
    "Observer",
    "PrivatePostgres",
    "PrivateRedis",
    "RabbitVhost",
    "ScenarioConfig",
    "ScenarioResult",
    "Stack",
    "check_invariants",
    "run_scenario",
]
