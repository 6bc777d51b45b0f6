"""One SQLAlchemy ``Engine`` per database URL per process, configured for each backend.

Service mode uses PostgreSQL (``postgresql+psycopg://...``); embedded mode uses a SQLite file
(``sqlite:///path``) shared by the CLI thread and the in-process Celery worker thread.

SQLite specifics (why each one):

* ``check_same_thread=False``: pooled connections are handed to whichever thread asks.
* ``journal_mode=WAL``: readers (the ``--wait`` poll) do not block the writer and vice versa.
* ``busy_timeout``: a writer waits for the lock instead of failing with "database is locked".
* ``foreign_keys=ON``: SQLite ignores ``REFERENCES`` unless asked, Postgres never does.
* SQLAlchemy emits ``BEGIN`` itself (the pysqlite recipe in SQLAlchemy's SQLite dialect docs),
  so DDL is transactional (migrations roll back as a whole) and a connection opened with
  ``execution_options(finagent_write=True)`` starts with ``BEGIN IMMEDIATE``: it takes the
  write lock up front, so a read-then-write transaction never fails with ``SQLITE_BUSY``
  when another writer committed in between (busy_timeout cannot help in that case).

Prefork Celery workers fork after import: call :func:`dispose_engines` from
``worker_process_init`` (docs/design.md, "Celery configuration") so a child never reuses the parent's sockets.

No configured secret reaches a row, whichever repository writes it (docs/security.md,
"Secrets"): :func:`json_dumps` (every JSON column, and the JSON row sets of the one-statement
checkpoint) and a ``before_cursor_execute`` hook on every engine (every text parameter of every
statement) mask the values ``core.masking`` knows. Without a configured secret both
return at once.
"""

from __future__ import annotations

import json
import math
import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date, datetime
from decimal import Decimal
from enum import Enum
from pathlib import Path
from typing import Any, Final
from uuid import UUID

import orjson
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import Connection, make_url
from sqlalchemy.exc import DisconnectionError
from sqlalchemy.pool import ConnectionPoolEntry

from core.masking import current_masker

# Milliseconds a SQLite writer waits for the file lock. Our write transactions last a few ms
# (one batch insert + one update); 30 s covers a migration running in another process.
SQLITE_BUSY_TIMEOUT_MS = 30_000
# Seconds to wait for a Postgres connection before failing (libpq default is forever).
PG_CONNECT_TIMEOUT_S = 10
# Seconds a pooled PostgreSQL connection may sit idle before it is pinged on checkout.
IDLE_PING_S = 2.0
# Execution option that makes a SQLite transaction start with BEGIN IMMEDIATE.
WRITE_OPTION = "finagent_write"

_engines: dict[str, tuple[int, Engine]] = {}
#: The autocommit twin of each PostgreSQL engine :func:`get_engine` made, by the engine's id:
#: ``(engine, twin)`` (the engine is kept, so its id is never reused).
_autocommit: dict[int, tuple[Engine, Engine]] = {}
_lock = threading.Lock()
# json_dumps's orjson options: int/date/enum keys written as strings and numpy values as numbers,
# as the standard library path (with _json_default) writes them.
_ORJSON_OPTIONS = orjson.OPT_NON_STR_KEYS | orjson.OPT_SERIALIZE_NUMPY


def _is_numpy(value: Any) -> bool:
    """``value`` is a numpy scalar or array. numpy is not imported for this: a process that never
    imported it (``finagent list``) holds no numpy value, and importing it costs ~0.1-0.4 s."""
    np = sys.modules.get("numpy")
    return np is not None and isinstance(value, np.generic | np.ndarray)


def _json_default(value: Any) -> Any:
    """JSON fallback for values pydantic's ``model_dump()`` (without ``mode="json"``) leaves."""
    if isinstance(value, datetime | date):
        return value.isoformat()
    if isinstance(value, UUID | Decimal):
        return str(value)
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    if _is_numpy(value):  # what orjson's OPT_SERIALIZE_NUMPY writes
        return value.tolist()
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _finite(value: Any) -> Any:
    """``value`` with every NaN/±inf float replaced by ``None``, recursively."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(v) for v in value]
    if _is_numpy(value):
        return _finite(value.tolist())
    return value


def json_dumps(value: Any) -> str:
    """Serialise ``value`` for a JSON/JSONB column, identically on both backends.

    Dates and datetimes become ISO strings, UUID/Decimal strings, enums their value, tuples and
    sets lists, numpy scalars and arrays numbers and lists. NaN and ±inf become ``null``: JSON
    has no NaN and PostgreSQL's JSONB rejects the token Python would write (bars with a missing
    volume would otherwise fail only in service mode). Raises ``TypeError`` for other non-JSON
    values.

    Encoded by orjson (its NaN → ``null`` is the rule above): the standard library's encoder
    was 6 % of a worker's CPU per analysis (a 500-bar ``get_history`` result and four state
    checkpoints, ~180 KB of JSON; ``bench/pipeline_throughput.py``, docs/benchmarks.md). What
    orjson refuses (an integer beyond 64 bits, a non-string key of another type) goes through
    the standard library as before.

    Configured secret values in strings (keys included) are masked
    (``core.masking``): the text is searched once, and only a value holding a secret
    is masked and encoded again (the strings, never the JSON text, are changed, so the result
    stays valid JSON whatever the secret looks like).
    """
    text = _encode(value)
    masker = current_masker()
    if masker and masker.found_in(text):
        text = _encode(masker.mask_tree(value))
    return text


#: The JSON scalar types. Walks over stored JSON (``db.state_refs``, ``db.blobs``) test a value
#: against these first, so a string or a number (most of the values) never pays for an
#: ``isinstance`` against the ``Mapping`` ABC: ~0.5 µs each, a fifth of a worker's checkpoint CPU
#: in those walks (bench/stage_profile.py under cProfile: 735,000 ABC checks per 80 analyses).
JSON_SCALARS: Final = (str, int, float, bool, type(None))


def json_text(value: Any) -> str:
    """``value``'s JSON text as :func:`json_dumps` writes it, without the masking: for looking
    inside a value (is a key there at all?), never for storing. Raises ``TypeError`` as
    :func:`json_dumps`."""
    return _encode(value)


def _encode(value: Any) -> str:
    """:func:`json_dumps` without the masking."""
    try:
        return orjson.dumps(value, default=_json_default, option=_ORJSON_OPTIONS).decode()
    except orjson.JSONEncodeError:
        pass
    try:
        return json.dumps(value, allow_nan=False, default=_json_default, separators=(",", ":"))
    except ValueError:  # a non-finite float somewhere: rare, so the walk is only paid then
        return json.dumps(_finite(value), allow_nan=False, default=_json_default, separators=(",", ":"))


def _masked_parameters(
    _conn: Connection,
    _cursor: Any,
    statement: str,
    parameters: Any,
    _context: Any,
    executemany: bool,
) -> tuple[str, Any]:
    """``before_cursor_execute`` hook (``retval=True``) of every engine: the statement's
    parameters with the configured secrets masked in their strings (text columns; JSON columns
    were masked by :func:`json_dumps`). Parameters are a mapping or a sequence, or a sequence of
    those for ``executemany``; they are copied only when a secret is found."""
    masker = current_masker()
    if not masker:
        return statement, parameters
    if executemany and isinstance(parameters, list | tuple):
        return statement, type(parameters)(_mask_parameter_set(masker, p) for p in parameters)
    return statement, _mask_parameter_set(masker, parameters)


def _mask_parameter_set(masker: Any, params: Any) -> Any:
    """One statement's parameters (a mapping or a sequence) with secrets masked in its ``str``
    values; the same object when none holds one."""
    if isinstance(params, dict):
        if not any(isinstance(v, str) and masker.found_in(v) for v in params.values()):
            return params
        return {k: masker.mask_text(v) if isinstance(v, str) else v for k, v in params.items()}
    if isinstance(params, list | tuple):
        if not any(isinstance(v, str) and masker.found_in(v) for v in params):
            return params
        return type(params)(masker.mask_text(v) if isinstance(v, str) else v for v in params)
    return params


def _sqlite_engine(url: str) -> Engine:
    parsed = make_url(url)
    database = parsed.database
    if database and database != ":memory:" and not database.startswith("file:"):
        Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)
    engine = create_engine(
        url,
        connect_args={"check_same_thread": False},
        json_serializer=json_dumps,
    )

    event.listen(engine, "before_cursor_execute", _masked_parameters, retval=True)

    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: ConnectionPoolEntry) -> None:
        # Let SQLAlchemy, not the sqlite3 module, decide when a transaction begins.
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
            cursor.execute("PRAGMA foreign_keys=ON")
            # WAL + NORMAL never corrupts the file; a power cut may lose the last commit.
            cursor.execute("PRAGMA synchronous=NORMAL")
        finally:
            cursor.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        immediate = conn.get_execution_options().get(WRITE_OPTION, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if immediate else "BEGIN")

    return engine


def _postgres_engine(url: str, *, autocommit: bool = False) -> Engine:
    # autocommit: the twin of :func:`reading` (its connections stay in autocommit mode, and a
    # connection returned holds no transaction to roll back)
    modes: dict[str, Any] = {}
    if autocommit:
        modes = {"isolation_level": "AUTOCOMMIT", "pool_reset_on_return": None}
    engine = create_engine(
        url,
        connect_args={"connect_timeout": PG_CONNECT_TIMEOUT_S},
        json_serializer=json_dumps,
        **modes,
    )
    event.listen(engine, "before_cursor_execute", _masked_parameters, retval=True)

    # A worker idles for hours and PostgreSQL may restart meanwhile: a pooled connection idle
    # for longer than IDLE_PING_S is pinged before use, and a dead one replaced (SQLAlchemy's
    # pool "checkout" event: DisconnectionError makes the pool retry with a fresh connection).
    # Not pool_pre_ping, which pings on EVERY checkout: that was two extra round trips (BEGIN,
    # SELECT 1) per transaction, eight transactions per analysis, while a busy worker reuses its
    # connection within milliseconds. A restart in the middle of a busy run costs one failed
    # statement per process and pool instead (an OperationalError: the stage retries after its
    # backoff, and SQLAlchemy drops that pool; reads and one-statement moves have a pool of their
    # own, :func:`reading`).
    @event.listens_for(engine, "checkin")
    def _stamp_idle(_dbapi_connection: Any, record: ConnectionPoolEntry) -> None:
        record.info["idle_since"] = time.monotonic()

    @event.listens_for(engine, "checkout")
    def _ping_if_idle(dbapi_connection: Any, record: ConnectionPoolEntry, _proxy: Any) -> None:
        idle_since = record.info.get("idle_since")
        if idle_since is None or time.monotonic() - idle_since < IDLE_PING_S:
            return
        try:
            engine.dialect.do_ping(dbapi_connection)
        except Exception as exc:  # the driver's own error for a dead socket
            idle = time.monotonic() - idle_since
            raise DisconnectionError(f"pooled connection idle for {idle:.0f} s is dead") from exc

    return engine


def get_engine(url: str) -> Engine:
    """The process-wide ``Engine`` for ``url``, created on first use.

    Args:
        url: a SQLAlchemy URL, ``postgresql+psycopg://user@host:5432/db`` or
            ``sqlite:///absolute/path/file.sqlite3`` (the parent directory is created).

    Returns the same object for the same URL string within one process. After a ``fork()``
    the child's first call notices the new pid and drops the inherited pool without closing
    the parent's connections (belt and braces for :func:`dispose_engines`).

    Raises ``sqlalchemy.exc.ArgumentError`` for a malformed URL; connection errors surface on
    first use, not here.
    """
    pid = os.getpid()
    with _lock:
        cached = _engines.get(url)
        if cached is not None:
            owner, engine = cached
            if owner == pid:
                return engine
            engine.dispose(close=False)
            if id(engine) in _autocommit:
                _autocommit[id(engine)][1].dispose(close=False)
            _engines[url] = (pid, engine)
            return engine
        backend = make_url(url).get_backend_name()
        engine = _sqlite_engine(url) if backend == "sqlite" else _postgres_engine(url)
        if backend != "sqlite":
            _autocommit[id(engine)] = (engine, _postgres_engine(url, autocommit=True))
        _engines[url] = (pid, engine)
        return engine


def dispose_engines(*, close: bool = False) -> None:
    """Reset the connection pool of every cached engine; the engines stay usable.

    Args:
        close: ``False`` (the default, what Celery's ``worker_process_init`` needs after a
            fork): forget pooled connections without closing them, because they belong to the
            parent process. ``True``: close them (process shutdown, tests dropping a database).
    """
    pid = os.getpid()
    with _lock:
        for url, (_owner, engine) in list(_engines.items()):
            engine.dispose(close=close)
            if id(engine) in _autocommit:
                _autocommit[id(engine)][1].dispose(close=close)
            _engines[url] = (pid, engine)


@contextmanager
def reading(engine: Engine) -> Iterator[Connection]:
    """A connection for reads (``SELECT`` only).

    On PostgreSQL it is in autocommit mode. Under READ COMMITTED every statement takes its own
    snapshot anyway, so reads see exactly what they saw inside a transaction; what changes is
    the end: a read transaction was rolled back when the connection went back to the pool, and
    psycopg answers a ``ROLLBACK`` by dropping the connection's prepared statements
    (``DEALLOCATE ALL``). One read per analysis (the review's cited outputs) thus kept every
    statement of the stages from being prepared (psycopg prepares a query on its fifth use on a
    connection): the server parsed and planned each claim and checkpoint afresh, ~0.05 ms of
    its CPU per statement, plus the two round trips. On SQLite: a plain connection.

    For an engine of :func:`get_engine`, the connection comes from its autocommit twin: an engine
    of the same URL whose pooled connections are in autocommit mode from the start, so a read
    neither switches its connection into autocommit nor back and rolls it back when returned
    (~60 µs of client CPU per statement, on each of the eight or so of an analysis). A process
    may then hold two connections, one per pool.
    """
    if engine.dialect.name != "postgresql":
        with engine.connect() as conn:
            yield conn
        return
    twin = _autocommit.get(id(engine))
    if twin is not None and twin[0] is engine:
        with twin[1].connect() as conn:
            yield conn
        return
    with engine.connect() as conn:
        yield conn.execution_options(isolation_level="AUTOCOMMIT")


@contextmanager
def single_statement(engine: Engine) -> Iterator[Connection]:
    """A connection for ONE writing statement that is atomic by itself (a guarded ``UPDATE …
    RETURNING``), and reads before or after it that need not share its snapshot.

    On PostgreSQL the connection is in autocommit mode: the statement commits on its own, with
    no ``BEGIN``/``COMMIT`` round trips (0.19 vs 0.32 ms wall and 0.04 vs 0.09 ms of server CPU
    per statement, measured here). On SQLite it is :func:`begin_write` (the write lock first).
    """
    if engine.dialect.name != "postgresql":
        with begin_write(engine) as conn:
            yield conn
        return
    with reading(engine) as conn:  # the same autocommit connection, used for one write
        yield conn


@contextmanager
def begin_write(engine: Engine) -> Iterator[Connection]:
    """A connection inside a write transaction; commits on normal exit, rolls back on error.

    On SQLite the transaction starts with ``BEGIN IMMEDIATE`` (see the module docstring), so
    concurrent writers queue on ``busy_timeout`` instead of failing; on Postgres it is a plain
    ``BEGIN`` (READ COMMITTED).
    """
    with engine.connect() as conn:
        if conn.dialect.name == "sqlite":
            conn = conn.execution_options(**{WRITE_OPTION: True})
        with conn.begin():
            yield conn
