"""``db.engine``: one engine per URL, SQLite settings for a shared file, fork safety."""

from __future__ import annotations

import multiprocessing
import uuid
from datetime import UTC, date, datetime
from pathlib import Path

import pytest
import sqlalchemy as sa

import db.engine as engine_module
from db.engine import dispose_engines, get_engine, json_dumps, reading, single_statement


def test_one_engine_per_url(sqlite_url: str) -> None:
    assert get_engine(sqlite_url) is get_engine(sqlite_url)


def test_sqlite_settings_and_parent_directory(tmp_path: Path) -> None:
    # given a path whose directory does not exist yet (a fresh machine's state dir)
    path = tmp_path / "a" / "b" / "finagent.sqlite3"
    engine = get_engine(f"sqlite:///{path}")
    # when a connection is opened
    with engine.connect() as conn:
        pragmas = {
            name: conn.exec_driver_sql(f"PRAGMA {name}").scalar()
            for name in ("journal_mode", "busy_timeout", "foreign_keys")
        }
    engine.dispose()
    # then the directory exists and the pragmas that let two threads share the file are set
    assert path.parent.is_dir()
    assert pragmas == {"journal_mode": "wal", "busy_timeout": 30_000, "foreign_keys": 1}


def test_sqlite_rolls_back_ddl_and_dml(sqlite_url: str) -> None:
    # SQLAlchemy (not the sqlite3 module) emits BEGIN, so DDL is transactional too
    engine = get_engine(sqlite_url)

    def create_then_fail() -> None:
        with engine.begin() as conn:
            conn.exec_driver_sql("CREATE TABLE scratch (x INTEGER)")
            conn.exec_driver_sql("INSERT INTO scratch VALUES (1)")
            raise RuntimeError("abort")

    with pytest.raises(RuntimeError):
        create_then_fail()
    assert not sa.inspect(engine).has_table("scratch")


def test_dispose_engines_keeps_engines_usable(sqlite_url: str) -> None:
    engine = get_engine(sqlite_url)
    dispose_engines()
    with engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT 1").scalar() == 1
    assert get_engine(sqlite_url) is engine


def _child_query(url: str, queue: multiprocessing.Queue[int]) -> None:
    # what Celery's worker_process_init does in a prefork child
    dispose_engines()
    with get_engine(url).connect() as conn:
        queue.put(int(conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one()))


def test_forked_child_does_not_reuse_parent_connections(pg_url: str) -> None:
    # given a parent holding a pooled connection
    engine = get_engine(pg_url)
    with engine.connect() as conn:
        parent_pid = conn.exec_driver_sql("SELECT pg_backend_pid()").scalar()
    # when a forked child disposes the pools and queries
    queue: multiprocessing.Queue[int] = multiprocessing.get_context("fork").Queue()
    child = multiprocessing.get_context("fork").Process(target=_child_query, args=(pg_url, queue))
    child.start()
    child_backend = queue.get(timeout=30)
    child.join(timeout=30)
    # then the child had its own server session and the parent's pooled connection still works
    assert child.exitcode == 0
    assert child_backend != parent_pid
    with engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT pg_backend_pid()").scalar() == parent_pid


def test_json_dumps_is_portable() -> None:
    assert json_dumps({"d": date(2024, 1, 15), "t": datetime(2024, 1, 15, tzinfo=UTC)}) == (
        '{"d":"2024-01-15","t":"2024-01-15T00:00:00+00:00"}'
    )
    assert json_dumps({"x": [float("nan"), 1.5, float("-inf")]}) == '{"x":[null,1.5,null]}'
    with pytest.raises(TypeError):
        json_dumps({"o": object()})


def test_json_dumps_keeps_the_standard_library_meaning() -> None:
    """The orjson path reads back as the standard library's encoding did, for every type the
    rows carry: numpy scalars, tuples, sets, enums, Decimal, UUID, pandas Timestamps, int keys,
    and an integer orjson refuses (beyond 64 bits), which takes the standard path."""
    import json
    from decimal import Decimal
    from enum import Enum
    from uuid import UUID

    import numpy as np
    import pandas as pd

    class Side(Enum):
        BUY = "BUY"

    value = {
        "f": np.float64(0.1),
        "i": np.int64(7),
        "a": np.array([1.25, np.nan]),
        "t": (1, 2),
        "s": {3},
        "e": Side.BUY,
        "d": Decimal("1.10"),
        "u": UUID("12345678-1234-5678-1234-567812345678"),
        "ts": pd.Timestamp("2012-06-28 16:00", tz="UTC"),
        14: "int key",
        "big": 2**70,
    }
    assert json.loads(json_dumps(value)) == {
        "f": 0.1,
        "i": 7,
        "a": [1.25, None],
        "t": [1, 2],
        "s": [3],
        "e": "BUY",
        "d": "1.10",
        "u": "12345678-1234-5678-1234-567812345678",
        "ts": "2012-06-28T16:00:00+00:00",
        "14": "int key",
        "big": 2**70,
    }
    assert json.loads(json_dumps({"x": [1e-05, 123456789.125, "é"]})) == {"x": [1e-05, 123456789.125, "é"]}


def _terminate(url: str, pid: int) -> None:
    """End server session ``pid`` from another connection (what a PostgreSQL restart does to a
    pooled connection; only our own session is touched)."""
    with sa.create_engine(url).connect() as other:
        assert other.exec_driver_sql(f"SELECT pg_terminate_backend({pid})").scalar() is True


def test_an_idle_pooled_connection_is_pinged_and_replaced_when_dead(
    pg_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given a pooled connection whose server session died while it sat idle past the threshold
    monkeypatch.setattr(engine_module, "IDLE_PING_S", 0.0)
    engine = get_engine(pg_url)
    with engine.connect() as conn:
        dead = int(conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one())
    _terminate(pg_url, dead)
    # when the next transaction checks it out
    with engine.connect() as conn:
        fresh = int(conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one())
    # then the ping found it dead and the pool handed out a new session instead of failing
    assert fresh != dead


def test_a_busy_pooled_connection_is_not_pinged(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # given a connection checked in just now (below the idle threshold) whose session died
    monkeypatch.setattr(engine_module, "IDLE_PING_S", 3600.0)
    engine = get_engine(pg_url)
    with engine.connect() as conn:
        dead = int(conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one())
    _terminate(pg_url, dead)
    # when it is used again: no ping, so the statement meets the dead socket (a stage retries
    # an OperationalError with backoff) ...
    with pytest.raises(sa.exc.OperationalError), engine.connect() as conn:
        conn.exec_driver_sql("SELECT 1")
    # ... and SQLAlchemy replaced the pool: the next transaction works on a new session
    with engine.connect() as conn:
        assert int(conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one()) != dead


def test_reads_commit_each_statement_and_their_pool_is_closed_with_the_others(pg_url: str) -> None:
    # given a read on an engine of get_engine that writes (a one-statement move runs there)
    engine = get_engine(pg_url)
    name = f"t_{uuid.uuid4().hex[:8]}"
    with single_statement(engine) as conn:
        conn.exec_driver_sql(f"CREATE TABLE {name} (x int)")
        conn.exec_driver_sql(f"INSERT INTO {name} VALUES (1)")
        mine = int(conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one())
        # then each statement committed on its own: another session sees the row at once
        with sa.create_engine(pg_url).connect() as other:
            assert other.exec_driver_sql(f"SELECT count(*) FROM {name}").scalar_one() == 1
    with reading(engine) as conn:
        assert int(conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one()) == mine  # pooled
        conn.exec_driver_sql(f"DROP TABLE {name}")
    # when every pool is closed, no session of this process is left on the server
    dispose_engines(close=True)
    with sa.create_engine(pg_url, poolclass=sa.pool.NullPool).connect() as other:
        alive = other.exec_driver_sql(
            f"SELECT count(*) FROM pg_stat_activity WHERE pid = {mine}"
        ).scalar_one()
    assert alive == 0
