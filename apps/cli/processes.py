"""The long-running processes: ``finagent worker``, ``serve`` (the HTTP API and console),
``beat``, ``sweeper`` and ``flower``."""

from __future__ import annotations

import signal
import sys
import threading
import time

import click
import uvicorn

from apps.cli.common import err, load_settings
from apps.sweeper import Sweeper
from core.logs import configure_logging
from core.masking import register_secrets
from core.stages import LANE_QUEUES
from pipeline import taskqueue

#: Pause before `finagent beat` starts celery beat again after it exited with an error.
BEAT_RESTART_DELAY_S = 5.0


@click.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.option("--concurrency", "-c", type=int, default=None, help="Worker processes (default: cores).")
@click.option("--queues", "-Q", default=None, help="Comma-separated queues (default: the queues of --lane).")
@click.option(
    "--lane",
    type=click.Choice(sorted(LANE_QUEUES)),
    default="both",
    show_default=True,
    help="Which work this pool takes: interactive (API, CLI, Python API), batch (backtests, "
    "watchlist runs) or both, polled in turn; every lane also takes the control queue.",
)
@click.option("--loglevel", "-l", default="INFO")
@click.pass_context
def worker(ctx: click.Context, concurrency: int | None, queues: str | None, lane: str, loglevel: str) -> None:
    """Run a Celery worker (service mode). Extra options go to `celery worker`.

    Pools are sized per lane (docs/operations.md, "Interactive before batch"): e.g. one
    ``--lane both`` worker, or a small ``--lane interactive`` pool that a backtest never
    occupies next to a ``--lane batch`` pool. ``--lane`` and not ``--pool``:
    ``--pool`` is Celery's own option (prefork, solo, threads), passed through."""
    settings = load_settings()
    if settings.service.mode == "embedded":
        raise click.UsageError(
            "set FINAGENT_SERVICE_BROKER_URL (e.g. redis://127.0.0.1:6379/0) to run a worker"
        )
    configure_logging(level=loglevel)
    argv = ["worker", "-E", f"--loglevel={loglevel}", "-Q", queues or ",".join(LANE_QUEUES[lane])]
    if concurrency:
        argv.append(f"--concurrency={concurrency}")
    # the worker's exit code is kept (``tasks.queue.CeleryQueue.start``), so a worker that died
    # of an unrecoverable error does not exit 0 and a supervisor restarting on failure restarts it
    code = taskqueue.get().start([*argv, *ctx.args])
    sys.exit(code or 0)


@click.command()
@click.option("--host", default=None, help="Bind address (default FINAGENT_API_HOST, 127.0.0.1).")
@click.option("--port", type=int, default=None, help="Port (default FINAGENT_API_PORT, 8000).")
@click.option("--log-level", default="info", show_default=True)
def serve(host: str | None, port: int | None, log_level: str) -> None:
    """Serve the HTTP API (FastAPI under uvicorn; OpenAPI docs at /docs)."""
    settings = load_settings()
    configure_logging(level=settings.service.log_level)
    uvicorn.run(
        "apps.api.app:create_app",
        factory=True,
        host=host or settings.api.host,
        port=port or settings.api.port,
        log_level=log_level.lower(),
        # the API key travels in a header; uvicorn's access log prints method, path and status only
        access_log=True,
    )


@click.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.option("--loglevel", "-l", default="INFO")
@click.pass_context
def beat(ctx: click.Context, loglevel: str) -> None:
    """Run celery beat with the redbeat scheduler (several may run: one holds the Redis lock and
    sends the watchlist ticks, the others wait). Extra options go to `celery beat`."""
    settings = load_settings()
    if settings.service.mode == "embedded" or not str(settings.service.broker_url).startswith("redis"):
        raise click.UsageError(
            "beat needs a Redis broker (FINAGENT_SERVICE_BROKER_URL=redis://...) for its lock"
        )
    argv = ["beat", f"--loglevel={loglevel}", *ctx.args]
    # celery beat exits 1 when its broker connection breaks mid-tick (a Redis restart: redbeat's
    # tick raises redis.ConnectionError, measured here); honcho and compose would then stop the
    # whole stack or leave beat down. Start it again in this process after a pause, so the
    # watchlist ticks resume once Redis is back. A clean stop (SIGTERM, Ctrl-C) exits 0.
    while True:
        try:
            code = taskqueue.get().start(argv)
        except Exception as exc:  # beat re-raises what killed its scheduler (celery apps/beat.py)
            code, reason = 1, f"{type(exc).__name__}: {exc}"
        else:
            if not code:
                return
            reason = f"exit code {code}"
        err(f"beat stopped ({reason}); starting it again in {BEAT_RESTART_DELAY_S:.0f} s (Ctrl-C stops)")
        time.sleep(BEAT_RESTART_DELAY_S)


@click.command()
@click.option("--loglevel", "-l", default="INFO")
def sweeper(loglevel: str) -> None:
    """Run the recovery sweeper (service mode), a process of its own beside the workers.

    Every FINAGENT_DURABILITY_SWEEP_SECONDS it re-drives the analyses whose lease ran out (and fails them
    STALLED after FINAGENT_DURABILITY_MAX_RECOVERIES); when the Redis broker lost its messages (a restart
    without persistence) it re-drives at once every unfinished analysis with no message left.
    After each sweep it writes a heartbeat that GET /health reports. It needs no healthy
    worker. Run one per deployment (a second is harmless). SIGTERM or Ctrl-C stops it (exit 0).
    """

    settings = load_settings()
    if settings.service.mode == "embedded":
        raise click.UsageError(
            "set FINAGENT_SERVICE_BROKER_URL to run the sweeper (embedded mode: `finagent recover`)"
        )
    configure_logging(level=loglevel)
    stop = threading.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, lambda *_: stop.set())
    Sweeper(settings=settings).run(stop)


@click.command(context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
@click.option("--port", type=int, default=None, help="Port (default FINAGENT_SERVICE_FLOWER_PORT, 5555).")
@click.option("--address", default="127.0.0.1", show_default=True, help="Bind address.")
@click.pass_context
def flower(ctx: click.Context, port: int | None, address: str) -> None:
    """Run Flower against the configured broker (task events are on in the app's config).
    Extra options go to Flower, e.g. --basic-auth=user:password."""
    settings = load_settings()
    if settings.service.mode == "embedded":
        raise click.UsageError("Flower needs a broker (FINAGENT_SERVICE_BROKER_URL)")
    register_secrets("flower --basic-auth", basic_auth_passwords(ctx.args))
    taskqueue.get().start(
        ["flower", f"--port={port or settings.service.flower_port}", f"--address={address}", *ctx.args]
    )


def basic_auth_passwords(args: list[str]) -> list[str]:
    """The passwords of Flower's ``--basic-auth user:password[,user:password]`` among ``args``
    (``--basic-auth=…``, ``--basic_auth=…`` or the value as the next argument), so the Flower
    process masks them like a configured secret."""
    values: list[str] = []
    for i, arg in enumerate(args):
        name, eq, value = arg.partition("=")
        if name not in ("--basic-auth", "--basic_auth"):
            continue
        if not eq:
            value = args[i + 1] if i + 1 < len(args) else ""
        values += [pair.partition(":")[2] for pair in value.split(",") if ":" in pair]
    return [v for v in values if v]
