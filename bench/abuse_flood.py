"""Replays the resource-consumption floods of a security review against a local gateway and
prints what they cost now.

    .venv/bin/python bench/abuse_flood.py [--anonymous 300] [--watchlists 100]

A gateway (``create_app``, lifespan off: enqueued analyses stay ``queued``, i.e. in flight) on
127.0.0.1 over a fresh SQLite file with the default settings, in this process. Then:

1. ``--anonymous`` ``DELETE /watchlists/w<i>`` without a key from one address: the answers by
   status, and the ``audit_log`` rows they left with the requests those rows count;
2. a key with ``watchlists,read`` creates ``--watchlists`` watchlists of the five embedded
   tickers (how many the tenant cap lets through), then starts a run of each for 2012-06-29:
   the analyses started, those in flight for the key against ``FINAGENT_API_MAX_IN_FLIGHT``,
   and the answers by status.

Stdout: one line per measure; the last line is ``audit_rows=N in_flight=M``.
"""

from __future__ import annotations

import argparse
import collections
import socket
import tempfile
import threading
import time
from pathlib import Path

import httpx
import sqlalchemy as sa
import uvicorn

import tasks  # noqa: F401  # installs the task queue, as `finagent serve` has
from apps.api.app import create_app
from apps.api.auth import create_key
from core.settings import Settings
from db.engine import get_engine
from db.migrate import upgrade

TICKERS = ["AAPL", "MSFT", "IBM", "GOOG", "FB"]


def _serve(settings: Settings) -> tuple[uvicorn.Server, str]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = uvicorn.Server(
        uvicorn.Config(create_app(settings), host="127.0.0.1", port=port, lifespan="off", log_level="warning")
    )
    threading.Thread(target=server.run, daemon=True).start()
    deadline = time.monotonic() + 60
    while not server.started:
        if time.monotonic() > deadline:
            raise SystemExit("the gateway did not start within 60 s")
        time.sleep(0.05)
    return server, f"http://127.0.0.1:{port}"


def main() -> None:
    """Run both floods and print the measures (module docstring)."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--anonymous", type=int, default=300)
    parser.add_argument("--watchlists", type=int, default=100)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        url = f"sqlite:///{Path(tmp) / 'flood.sqlite3'}"
        upgrade(url=url)
        settings = Settings(service_database_url=url, service_state_dir=Path(tmp))
        server, base = _serve(settings)
        engine = get_engine(url)
        try:
            with httpx.Client(base_url=base, timeout=60) as c:
                started = time.perf_counter()
                statuses = collections.Counter(
                    c.delete(f"/watchlists/w{i}").status_code for i in range(args.anonymous)
                )
                took = time.perf_counter() - started
                with engine.connect() as conn:
                    rows, counted = conn.execute(
                        sa.text("SELECT count(*), coalesce(sum(requests), 0) FROM audit_log")
                    ).one()
                print(f"anonymous DELETEs: {args.anonymous} in {took:.1f} s, answers {dict(statuses)}")
                print(f"audit_log: {rows} rows counting {counted} requests")

                key = create_key(name="curator", scopes=("watchlists", "read"), settings=settings)
                c.headers["X-API-Key"] = key
                created = collections.Counter(
                    c.post("/watchlists", json={"name": f"w{i}", "tickers": TICKERS}).status_code
                    for i in range(args.watchlists)
                )
                print(f"watchlists created: answers {dict(created)}")
                runs: collections.Counter[int] = collections.Counter()
                refused = 0
                for i in range(args.watchlists):
                    answer = c.post(f"/watchlists/w{i}/runs", json={"run_date": "2012-06-29"})
                    runs[answer.status_code] += 1
                    if answer.status_code == 202:
                        refused += len(answer.json()["refused"])
                with engine.connect() as conn:
                    in_flight = conn.execute(
                        sa.text(
                            "SELECT count(*) FROM analyses "
                            "WHERE api_key_id = :k AND status NOT IN ('done', 'failed')"
                        ),
                        {"k": key.split("_")[1]},
                    ).scalar_one()
                print(
                    f"runs: answers {dict(runs)}; tickers refused in started runs {refused}; "
                    f"analyses in flight for the key {in_flight} (limit {settings.api.max_in_flight})"
                )
                print(f"audit_rows={rows} in_flight={in_flight}")
        finally:
            server.should_exit = True


if __name__ == "__main__":
    main()
