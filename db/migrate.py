"""Run the Alembic migrations programmatically, on PostgreSQL or SQLite.

Nothing here depends on the current working directory: the scripts are found next to this
module (``db/migrations``), and ``alembic.ini`` at the repo root is only for the ``alembic`` CLI.

Concurrent starts are safe: every migration runs in one transaction that first takes a lock
(``pg_advisory_xact_lock`` on Postgres, ``BEGIN IMMEDIATE`` on SQLite), and Alembic reads the
current revision only after that, so a second process waits and then finds nothing to do.

Imports: Alembic (over half a second to import) is imported only inside the functions that
migrate, so the up-to-date path of :func:`ensure_schema`, run on every CLI start in embedded
mode, never loads it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import sqlalchemy as sa
from sqlalchemy import Connection, Engine

from db.engine import begin_write, get_engine

if TYPE_CHECKING:
    from alembic.config import Config

logger = logging.getLogger(__name__)

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
#: The newest revision in ``db/migrations/versions``. ``ensure_schema`` compares the database
#: against it without loading Alembic; a test fails if a new revision forgets to bump it.
HEAD_REVISION = "0021"
# Arbitrary constant key of the Postgres advisory lock that serialises migrations.
PG_MIGRATION_LOCK_KEY = 0x66696E61  # "fina"

_ensured: set[str] = set()
_ensured_lock = threading.Lock()


class SchemaVersionError(RuntimeError):
    """The database is at a revision this code does not know (newer code migrated it)."""


@contextmanager
def migration_connection(engine: Engine) -> Iterator[Connection]:
    """A connection inside a transaction that holds the migration lock; commits on exit.

    Postgres: ``pg_advisory_xact_lock`` (released at commit/rollback). SQLite: ``BEGIN
    IMMEDIATE`` (the file's write lock). DDL on both backends is transactional, so a failed
    migration leaves the previous schema intact.
    """
    with begin_write(engine) as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": PG_MIGRATION_LOCK_KEY})
        yield conn


def _config(connection: Connection) -> Config:
    from alembic.config import Config  # lazy (see module docstring)

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.attributes["connection"] = connection
    config.attributes["configure_logger"] = False
    return config


def upgrade(*, url: str, revision: str = "head") -> None:
    """Migrate the database at ``url`` up to ``revision`` (default: the newest).

    Raises ``alembic.util.CommandError`` for an unknown revision and the driver's error
    (wrapped by SQLAlchemy) when the database cannot be reached or a migration fails; a
    failed migration is rolled back as a whole.
    """
    from alembic import command  # lazy (see module docstring)

    with _ensured_lock:
        _ensured.discard(url)
    with migration_connection(get_engine(url)) as conn:
        command.upgrade(_config(conn), revision)


def downgrade(*, url: str, revision: str = "base") -> None:
    """Migrate the database at ``url`` down to ``revision`` (default ``base``: drop all tables).

    For tests and operators; the product never downgrades on its own.
    """
    from alembic import command  # lazy (see module docstring)

    with _ensured_lock:
        _ensured.discard(url)
    with migration_connection(get_engine(url)) as conn:
        command.downgrade(_config(conn), revision)


def current_revision(*, url: str) -> str | None:
    """The revision the database at ``url`` is at, or ``None`` for an empty database.

    One or two cheap queries; does not import Alembic.
    """
    with get_engine(url).connect() as conn:
        if not sa.inspect(conn).has_table("alembic_version"):
            return None
        versions = conn.execute(sa.text("SELECT version_num FROM alembic_version")).scalars().all()
    if len(versions) > 1:  # several heads: we never branch, so treat it as unknown
        return ",".join(sorted(versions))
    return versions[0] if versions else None


def ensure_schema(*, url: str) -> bool:
    """Make sure the database at ``url`` is at ``HEAD_REVISION``; upgrade it if not.

    Called on every CLI start in embedded mode and at worker start, so the up-to-date path is
    cheap: after the first success in a process it returns immediately; otherwise it is one
    connection plus the ``current_revision`` queries (no Alembic import). Measured numbers are in
    ``tests/db/test_migrate.py::test_ensure_schema_is_cheap_when_up_to_date``.

    Returns ``True`` when migrations ran, ``False`` when the schema was already current.
    Raises ``SchemaVersionError`` when the database is at a revision this code does not know
    (migrated by newer code), and connection errors as SQLAlchemy ``OperationalError``.
    """
    if url in _ensured:
        return False
    started = time.perf_counter()
    current = current_revision(url=url)
    upgraded = False
    if current != HEAD_REVISION:
        from alembic.util import CommandError  # lazy (see module docstring)

        try:
            upgrade(url=url)
        except CommandError as exc:
            raise SchemaVersionError(
                f"database is at revision {current!r}, this code knows up to {HEAD_REVISION!r}: "
                "upgrade finagent (or point it at another database)"
            ) from exc
        upgraded = True
        logger.info(
            "schema upgraded from %s to %s in %.1f ms",
            current,
            HEAD_REVISION,
            (time.perf_counter() - started) * 1000,
        )
    with _ensured_lock:
        _ensured.add(url)
    return upgraded
