"""PostgreSQL bytes per analysis of a backtest: the layout before content blobs vs the current one.

    .venv/bin/python bench/storage_per_analysis.py [--symbols AAPL,MSFT,XOM,JPM]
        [--from 2014-01-01 --to 2014-10-01 --every 5d] [--replays 50] [--keep]

Needs ``../shared/data`` (stocknet bars, fundamentals, Benzinga headlines, stocknet tweets), a
PostgreSQL server (``--server``, default ``postgresql+psycopg://postgres@127.0.0.1:5432``) and a
broker (``FINAGENT_SERVICE_BROKER_URL``, default ``redis://127.0.0.1:6379/6``). What it does:

1. Drops and creates the private database ``--db`` (default ``finagent_storage_bench``) and
   migrates it; starts one ``finagent worker --concurrency 2`` on it.
2. Runs ``finagent backtest`` over the grid (quant mode, real stocknet data) and measures the
   growth of ``pg_total_relation_size`` of the tables over the run (``growth``: dead row
   versions of the checkpoints included, as a database without a vacuum between would see it).
3. Reads ``--replays`` analyses picked at random (``db.repo.get_analysis`` and
   ``get_tool_calls``) and keeps what they return.
4. Rebuilds the same rows in the layout before migration 0019 (tables ``LIKE … INCLUDING
   ALL``, so the same compression and indexes): every ``tool_calls.result`` whole (read
   through ``db.repo.get_tool_calls``, which joins the pieces) and every finished state with
   its ``final_report`` and every tool result it copies inline, and the report JSON whole
   (``db.repo.get_analysis``). ``VACUUM FULL`` and the live sizes of both layouts.
5. Runs ``finagent archive --older-than 0s`` (``db.archive``: every analysis's record into one
   compressed row), reads the same sample again (must be identical, value for value) and
   replays it (``apps.replay.replay_analysis``: must be byte-identical), then ``VACUUM
   FULL`` and the live size of the archived layout.

Stdout: one line per measurement, then the archived layout's breakdown (per table: heap,
TOAST, indexes; per column: stored bytes; per index), last the line ``ratio=X.XX`` (old live
KB / archived live KB per analysis). Exit 1 when a read or a replay differs. The database is
dropped at the end unless ``--keep``.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import sqlalchemy as sa

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT.parent / "shared" / "data"
TABLES = ("analyses", "tool_calls", "content_blobs", "analysis_archives", "compression_dictionaries")


def _sizes(engine: sa.Engine, tables: tuple[str, ...]) -> dict[str, int]:
    """``pg_total_relation_size`` (bytes: heap, TOAST, indexes) of each table."""
    with engine.connect() as conn:
        return {
            t: int(conn.execute(sa.text(f"SELECT pg_total_relation_size('{t}')")).scalar_one())
            for t in tables
        }


def _breakdown(engine: sa.Engine, tables: tuple[str, ...], n: int) -> list[str]:
    """One line per table: heap, TOAST and index KB per analysis (``n`` analyses), then each
    column's stored bytes (``sum(pg_column_size)``: compressed as stored, inline or TOAST) of at
    least 0.05 KB per analysis, largest first."""
    lines = []
    with engine.connect() as conn:
        for table in tables:
            heap, toast, index = conn.execute(
                sa.text(
                    "SELECT pg_relation_size(c.oid), "
                    "coalesce(pg_relation_size(NULLIF(c.reltoastrelid, 0)), 0), pg_indexes_size(c.oid) "
                    "FROM pg_class c WHERE c.oid = CAST(:t AS regclass)"
                ),
                {"t": table},
            ).one()
            names = list(
                conn.execute(
                    sa.text(
                        "SELECT attname FROM pg_attribute WHERE attrelid = CAST(:t AS regclass) "
                        "AND attnum > 0 AND NOT attisdropped ORDER BY attnum"
                    ),
                    {"t": table},
                ).scalars()
            )
            sums = conn.execute(
                sa.text(
                    "SELECT "
                    + ", ".join(f'coalesce(sum(pg_column_size("{c}")), 0)' for c in names)
                    + f" FROM {table}"
                )
            ).one()
            columns = sorted(
                ((c, v / n / 1024) for c, v in zip(names, sums, strict=True) if v / n / 1024 >= 0.05),
                key=lambda p: -p[1],
            )
            lines.append(
                f"  {table}: heap {heap / n / 1024:.1f}, toast {toast / n / 1024:.1f}, "
                f"indexes {index / n / 1024:.1f} KB; columns " + ", ".join(f"{c} {v:.2f}" for c, v in columns)
            )
            indexes = conn.execute(
                sa.text(
                    "SELECT CAST(indexrelid AS regclass)::text, pg_relation_size(indexrelid) FROM pg_index "
                    "WHERE indrelid = CAST(:t AS regclass) ORDER BY 2 DESC"
                ),
                {"t": table},
            ).all()
            lines.append(
                "    indexes: " + ", ".join(f"{name} {size / n / 1024:.2f}" for name, size in indexes)
            )
    return lines


def _vacuum(engine: sa.Engine, tables: tuple[str, ...]) -> None:
    """``VACUUM FULL`` of ``tables``: their live size, without dead row versions."""
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        for table in tables:
            conn.execute(sa.text(f"VACUUM FULL {table}"))


def _line(label: str, sizes: dict[str, int], n: int) -> str:
    """``label: table KB, ... = total KB`` per analysis."""
    return (
        f"{label}: "
        + ", ".join(f"{t} {v / n / 1024:.1f}" for t, v in sizes.items())
        + f" = {sum(sizes.values()) / n / 1024:.1f} KB"
    )


def _recreate(server: str, name: str) -> None:
    """Drop and create the private database ``name``."""
    admin = sa.create_engine(f"{server}/postgres", isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        conn.execute(sa.text(f'CREATE DATABASE "{name}"'))
    admin.dispose()


def _drop(server: str, name: str) -> None:
    """Drop the private database ``name``."""
    admin = sa.create_engine(f"{server}/postgres", isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
    admin.dispose()


def _old_layout(engine: sa.Engine, ids: list[str]) -> None:
    """Copy the rows of ``ids`` into ``old_analyses``/``old_tool_calls`` as the layout before
    migration 0019 stored them (module docstring, step 4)."""
    from db import repo
    from db.engine import json_dumps

    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE old_analyses (LIKE analyses INCLUDING ALL)"))
        conn.execute(sa.text("CREATE TABLE old_tool_calls (LIKE tool_calls INCLUDING ALL)"))
    for analysis_id in ids:
        row = repo.get_analysis(engine=engine, analysis_id=analysis_id)
        calls = repo.get_tool_calls(engine=engine, analysis_id=analysis_id)
        assert row is not None
        with engine.begin() as conn:
            conn.execute(
                sa.text("INSERT INTO old_analyses SELECT * FROM analyses WHERE id = :id"), {"id": analysis_id}
            )
            conn.execute(
                sa.text(
                    "UPDATE old_analyses SET state = CAST(:state AS json), "
                    "report_json = CAST(:report_json AS jsonb) WHERE id = :id"
                ),
                {
                    "id": analysis_id,
                    "state": json_dumps(row["state"]),
                    "report_json": json_dumps(row["report_json"]) if row["report_json"] is not None else None,
                },
            )
            for call in calls:
                result = json_dumps(call["result"]) if call["result"] is not None else None
                conn.execute(
                    sa.text("INSERT INTO old_tool_calls SELECT * FROM tool_calls WHERE id = :id"), call
                )
                conn.execute(
                    sa.text(
                        "UPDATE old_tool_calls SET result = CAST(:result AS json), result_refs = NULL "
                        "WHERE id = :id"
                    ),
                    {"id": call["id"], "result": result},
                )


def main() -> int:
    """Run the measurement (module docstring); returns the exit code."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--symbols", default="AAPL,MSFT,XOM,JPM")
    parser.add_argument("--from", dest="start", default="2014-01-01")
    parser.add_argument("--to", dest="end", default="2014-10-01")
    parser.add_argument("--every", default="5d")
    parser.add_argument("--replays", type=int, default=50)
    parser.add_argument("--server", default="postgresql+psycopg://postgres@127.0.0.1:5432")
    parser.add_argument("--db", default="finagent_storage_bench")
    parser.add_argument("--keep", action="store_true")
    args = parser.parse_args()
    if not (DATA / "ohlcv" / "stocknet").is_dir():
        print(f"skipped: {DATA} (the shared real data) is absent", file=sys.stderr)
        return 0
    url = f"{args.server}/{args.db}"
    env = {
        **os.environ,
        "FINAGENT_SERVICE_DATABASE_URL": url,
        "FINAGENT_SERVICE_BROKER_URL": os.environ.get(
            "FINAGENT_SERVICE_BROKER_URL", "redis://127.0.0.1:6379/6"
        ),
        "FINAGENT_DATA_PROVIDER": "csv",
        "FINAGENT_DATA_DIR": str(DATA / "ohlcv" / "stocknet"),
        "FINAGENT_DATA_FUNDAMENTALS_DIR": str(DATA / "fundamentals"),
        "FINAGENT_DATA_NEWS_DIR": str(DATA / "news" / "benzinga"),
        "FINAGENT_DATA_SOCIAL_DIR": str(DATA / "news" / "stocknet_tweets"),
    }
    os.environ.update(env)
    finagent = str(Path(sys.executable).parent / "finagent")
    _recreate(args.server, args.db)
    subprocess.run([finagent, "db", "upgrade"], env=env, check=True, capture_output=True)
    engine = sa.create_engine(url)
    before = _sizes(engine, TABLES)
    worker = subprocess.Popen(
        [finagent, "worker", "--concurrency", "2", "--loglevel", "WARNING"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        started = time.monotonic()
        grid = ["--symbols", args.symbols, "--from", args.start, "--to", args.end, "--every", args.every]
        subprocess.run([finagent, "backtest", *grid, "--name", "storage-bench"], env=env, check=True)
        print(f"backtest: {time.monotonic() - started:.0f} s", file=sys.stderr)
    finally:
        worker.terminate()
        worker.wait(timeout=60)
    with engine.connect() as conn:
        ids = [
            r[0] for r in conn.execute(sa.text("SELECT id FROM analyses WHERE status = 'done' ORDER BY id"))
        ]
    n = len(ids)
    after = _sizes(engine, TABLES)
    growth = sum(after.values()) - sum(before.values())
    print(f"analyses: {n} done")
    print(
        "growth (new layout, no vacuum): "
        + ", ".join(f"{t} {(after[t] - before[t]) / n / 1024:.1f}" for t in TABLES)
        + f" = {growth / n / 1024:.1f} KB per analysis"
    )

    from apps.replay import replay_analysis
    from core.settings import get_settings
    from db import repo
    from db.engine import json_dumps

    sample = random.Random(0).sample(ids, min(args.replays, n))

    def snapshot(analysis_id: str) -> str:
        row = repo.get_analysis(engine=engine, analysis_id=analysis_id) or {}
        row.pop("archived_at", None)
        return json_dumps([row, repo.get_tool_calls(engine=engine, analysis_id=analysis_id)])

    read_before = {i: snapshot(i) for i in sample}
    _old_layout(engine, ids)
    _vacuum(engine, (*TABLES, "old_analyses", "old_tool_calls"))
    old = _sizes(engine, ("old_analyses", "old_tool_calls"))
    unarchived = _sizes(engine, TABLES)
    old_kb = sum(old.values()) / n / 1024
    print(_line("live old layout", old, n))
    print(_line("live new layout, not archived", unarchived, n))

    started = time.monotonic()
    subprocess.run([finagent, "archive", "--older-than", "0s"], env=env, check=True)
    print(f"archive: {time.monotonic() - started:.1f} s", file=sys.stderr)
    same_reads = sum(snapshot(i) == read_before[i] for i in sample)
    print(f"reads after archiving: {same_reads}/{len(sample)} identical (get_analysis, get_tool_calls)")
    identical = sum(replay_analysis(analysis_id=i, settings=get_settings()).identical for i in sample)
    print(f"replay of archived analyses: {identical}/{len(sample)} byte-identical")
    _vacuum(engine, TABLES)
    new = _sizes(engine, TABLES)
    new_kb = sum(new.values()) / n / 1024
    print(_line("live archived", new, n))
    print("breakdown of the archived layout (KB per analysis):")
    for line in _breakdown(engine, TABLES, n):
        print(line)
    engine.dispose()
    if not args.keep:
        _drop(args.server, args.db)
    print(f"ratio={old_kb / new_kb:.2f}")
    return 0 if identical == same_reads == len(sample) else 1


if __name__ == "__main__":
    sys.exit(main())
