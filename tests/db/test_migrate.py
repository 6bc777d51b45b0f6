"""Migrations on both backends, ``ensure_schema`` and the model/migration match."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import sqlalchemy as sa
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory

from db import migrate, repo
from db.engine import get_engine
from db.migrate import HEAD_REVISION, MIGRATIONS_DIR, current_revision, downgrade, ensure_schema, upgrade
from db.models import METADATA

REPO_ROOT = Path(__file__).resolve().parents[2]
TABLES = {
    "analyses",
    "tool_calls",
    "analysis_iterations",
    "llm_calls",
    "llm_cache",
    "api_keys",
    "idempotency_keys",
    "watchlists",
    "watchlist_runs",
    "watchlist_run_items",
    "accounts",
    "positions",
    "orders",
    "fills",
    "events",
    "audit_log",
    "backtests",
    "backtest_items",
    "recommendation_scores",
    "service_heartbeats",
    "content_blobs",
    "analysis_archives",
    "compression_dictionaries",
    "console_sessions",
    "alembic_version",
}


def _tables(url: str) -> set[str]:
    return set(sa.inspect(get_engine(url)).get_table_names())


def test_head_revision_constant_matches_the_scripts() -> None:
    # ensure_schema compares against the constant; a new revision must bump it
    script = ScriptDirectory(str(MIGRATIONS_DIR))
    assert script.get_heads() == [HEAD_REVISION]


def test_upgrade_from_empty(empty_db_url: str) -> None:
    assert current_revision(url=empty_db_url) is None
    upgrade(url=empty_db_url)
    assert _tables(empty_db_url) == TABLES
    assert current_revision(url=empty_db_url) == HEAD_REVISION


def test_downgrade_base_then_upgrade_head(empty_db_url: str) -> None:
    upgrade(url=empty_db_url)
    downgrade(url=empty_db_url, revision="base")
    assert _tables(empty_db_url) == {"alembic_version"}
    assert current_revision(url=empty_db_url) is None
    upgrade(url=empty_db_url, revision="head")
    assert _tables(empty_db_url) == TABLES
    assert current_revision(url=empty_db_url) == HEAD_REVISION


def test_models_match_migrations(db_url: str) -> None:
    # autogenerate finds nothing to do: db/models.py and the revisions describe the same schema
    with get_engine(db_url).connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True})
        assert compare_metadata(context, METADATA) == []


def test_ensure_schema_upgrades_once(empty_db_url: str) -> None:
    assert ensure_schema(url=empty_db_url) is True
    assert ensure_schema(url=empty_db_url) is False
    assert current_revision(url=empty_db_url) == HEAD_REVISION


def test_concurrent_ensure_schema_on_an_empty_database(empty_db_url: str) -> None:
    # given a CLI and workers starting at once on a fresh database
    barrier = threading.Barrier(4)
    outcomes: list[bool | BaseException] = []

    def start() -> None:
        barrier.wait(timeout=10)
        try:
            outcomes.append(ensure_schema(url=empty_db_url))
        except BaseException as exc:  # asserted below
            outcomes.append(exc)

    threads = [threading.Thread(target=start) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    # then nobody fails (the migration lock serialises them) and the schema is at head
    assert all(isinstance(o, bool) for o in outcomes), outcomes
    assert True in outcomes
    assert current_revision(url=empty_db_url) == HEAD_REVISION


def test_ensure_schema_rejects_an_unknown_revision(sqlite_url: str) -> None:
    with get_engine(sqlite_url).begin() as conn:
        conn.exec_driver_sql("UPDATE alembic_version SET version_num = '9999'")
    migrate._ensured.discard(sqlite_url)
    with pytest.raises(migrate.SchemaVersionError, match="9999"):
        ensure_schema(url=sqlite_url)


def test_ensure_schema_is_cheap_when_up_to_date(db_url: str) -> None:
    """Measurement (printed, not asserted): the embedded CLI pays this on every start."""
    n = 20
    started = time.perf_counter()
    for _ in range(n):
        migrate._ensured.discard(db_url)  # force the database check, not the in-process memo
        assert ensure_schema(url=db_url) is False
    checked_ms = (time.perf_counter() - started) * 1000 / n
    started = time.perf_counter()
    assert ensure_schema(url=db_url) is False
    memo_us = (time.perf_counter() - started) * 1e6
    # a fresh interpreter, as on a CLI start: import db.migrate, connect, check
    code = (
        "import time; t0=time.perf_counter(); from db.migrate import ensure_schema; "
        f"t1=time.perf_counter(); r=ensure_schema(url={db_url!r}); t2=time.perf_counter(); "
        "print(r, (t1-t0)*1000, (t2-t1)*1000)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd="/")
    upgraded, import_ms, first_call_ms = out.stdout.split()
    assert upgraded == "False"
    dialect = get_engine(db_url).dialect.name
    print(
        f"\n[{dialect}] ensure_schema up to date: {checked_ms:.2f} ms (warm engine), {memo_us:.1f} µs"
        f" (memoised); fresh process: import db.migrate {float(import_ms):.0f} ms (SQLAlchemy),"
        f" first call {float(first_call_ms):.1f} ms (engine + connect + check)"
    )


def test_alembic_cli_works_from_another_directory(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'cli.sqlite3'}"
    alembic = Path(sys.executable).with_name("alembic")
    subprocess.run(
        [str(alembic), "-c", str(REPO_ROOT / "alembic.ini"), "-x", f"url={url}", "upgrade", "head"],
        check=True,
        cwd=tmp_path,
        capture_output=True,
    )
    assert current_revision(url=url) == HEAD_REVISION
    get_engine(url).dispose()


def test_migration_0005_drops_the_check_and_downgrade_restores_it(empty_db_url: str) -> None:
    upgrade(url=empty_db_url, revision="0004")
    insert = sa.text(
        "INSERT INTO analyses (id, symbol, as_of, user_query, status, iteration, max_iterations, state) "
        "VALUES (:id, 'AAPL', '2012-06-29', 'q', 'thinking', 0, 3, '{}')"
    )
    engine = sa.create_engine(empty_db_url)
    try:
        with pytest.raises(sa.exc.IntegrityError), engine.begin() as conn:
            conn.execute(insert, {"id": "x-1"})
        upgrade(url=empty_db_url, revision="0005")
        with engine.begin() as conn:
            conn.execute(insert, {"id": "x-2"})
            conn.execute(sa.text("DELETE FROM analyses"))
        downgrade(url=empty_db_url, revision="0004")
        with pytest.raises(sa.exc.IntegrityError), engine.begin() as conn:
            conn.execute(insert, {"id": "x-3"})
    finally:
        engine.dispose()


def test_large_columns_compress_with_lz4_on_postgresql(empty_db_url: str) -> None:
    # given a PostgreSQL server built with lz4 (Debian's is), or SQLite (nothing to change)
    upgrade(url=empty_db_url)
    engine = get_engine(empty_db_url)
    if engine.dialect.name != "postgresql":
        pytest.skip("TOAST compression is a PostgreSQL setting")
    with engine.connect() as conn:
        methods = conn.exec_driver_sql(
            "SELECT enumvals FROM pg_settings WHERE name = 'default_toast_compression'"
        ).scalar()
        if "lz4" not in (methods or []):
            pytest.skip("this PostgreSQL server was built without lz4")
        rows = conn.exec_driver_sql(
            "SELECT attrelid::regclass::text || '.' || attname FROM pg_attribute "
            "WHERE attcompression = 'l' AND attrelid::regclass::text IN "
            "('analyses', 'tool_calls', 'llm_calls', 'llm_cache')"
        ).scalars()
        lz4 = set(rows)
        # when a large state is written, then it is stored lz4-compressed
        conn.exec_driver_sql(
            "INSERT INTO analyses (id, symbol, as_of, status, iteration, max_iterations, user_query, state) "
            "VALUES ('lz4', 'AAPL', '2012-06-29', 'queued', 0, 3, 'q', "
            "(SELECT jsonb_agg(jsonb_build_object('close', g, 'day', g::text)) "
            "FROM generate_series(1, 4000) g))"
        )
        method = conn.exec_driver_sql(
            "SELECT pg_column_compression(state) FROM analyses WHERE id = 'lz4'"
        ).scalar()
        conn.rollback()
    assert lz4 == {
        "analyses.state",
        "analyses.report",
        "analyses.report_json",
        "tool_calls.arguments",
        "tool_calls.result",
        "tool_calls.source_refs",
        "llm_calls.request",
        "llm_calls.response",
        "llm_calls.completion",
        "llm_cache.completion",
    }
    assert method == "lz4"
    # and a downgrade puts the server default back
    downgrade(url=empty_db_url, revision="0012")
    with engine.connect() as conn:
        left = conn.exec_driver_sql("SELECT count(*) FROM pg_attribute WHERE attcompression = 'l'").scalar()
    assert left == 0


def test_state_and_tool_results_are_plain_json_on_postgresql_and_downgrade_restores_jsonb(
    empty_db_url: str,
) -> None:
    # given a database at head
    upgrade(url=empty_db_url)
    engine = get_engine(empty_db_url)
    if engine.dialect.name != "postgresql":
        pytest.skip("json and jsonb are PostgreSQL types (SQLite stores JSON as text)")
    types = (
        "SELECT attrelid::regclass::text || '.' || attname, atttypid::regtype::text FROM pg_attribute "
        "WHERE attrelid::regclass::text IN ('analyses', 'tool_calls') "
        "AND attname IN ('state', 'result', 'report_json', 'arguments')"
    )
    with engine.connect() as conn:
        at_head: dict[str, str] = {str(k): str(v) for k, v in conn.exec_driver_sql(types).all()}
        # when a state with a NaN-free float and nested keys is written and read back
        conn.exec_driver_sql(
            "INSERT INTO analyses (id, symbol, as_of, status, iteration, max_iterations, user_query, state) "
            "VALUES ('j', 'AAPL', '2012-06-29', 'queued', 0, 3, 'q', '{\"b\": 1.25, \"a\": {\"z\": [1, 2]}}')"
        )
        conn.commit()
    # then the two write-heavy blobs are json, the searched report stays jsonb
    assert at_head == {
        "analyses.state": "json",
        "tool_calls.result": "json",
        "analyses.report_json": "jsonb",
        "tool_calls.arguments": "jsonb",
    }
    row = repo.get_analysis(engine=engine, analysis_id="j")
    assert row is not None and row["state"] == {"b": 1.25, "a": {"z": [1, 2]}}
    # and a downgrade converts the stored values back to jsonb
    downgrade(url=empty_db_url, revision="0013")
    with engine.connect() as conn:
        after: dict[str, str] = {str(k): str(v) for k, v in conn.exec_driver_sql(types).all()}
        kept = conn.exec_driver_sql("SELECT state -> 'a' ->> 'z' FROM analyses WHERE id = 'j'").scalar()
    assert after["analyses.state"] == "jsonb" and after["tool_calls.result"] == "jsonb"
    assert kept == "[1, 2]"
