"""Database fixtures: a throw-away PostgreSQL database per session and a SQLite file per test.

``pg_url`` creates ``finagent_test_<uuid8>`` on 127.0.0.1:5432 through the ``postgres``
maintenance database (user ``postgres``, else ``root``; override with
``FINAGENT_TEST_PG_ADMIN_URL=postgresql://user@host:port/postgres``), migrates it to head and
drops it at the end of the session. Tests are skipped with the reason when Postgres does not
answer. ``db_url`` parametrises a test over both backends.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine

from db.engine import get_engine
from db.migrate import upgrade


@pytest.fixture
def empty_sqlite_url(tmp_path: Path) -> Iterator[str]:
    """URL of a not-yet-existing SQLite file in a not-yet-existing directory."""
    url = f"sqlite:///{tmp_path / 'state' / 'finagent.sqlite3'}"
    yield url
    get_engine(url).dispose()


@pytest.fixture
def sqlite_url(empty_sqlite_url: str) -> str:
    """A migrated SQLite file, fresh for each test."""
    upgrade(url=empty_sqlite_url)
    return empty_sqlite_url


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest) -> str:
    """A migrated database URL, once per backend."""
    fixture = "sqlite_url" if request.param == "sqlite" else "pg_url"
    return str(request.getfixturevalue(fixture))


@pytest.fixture(params=["sqlite", "postgresql"])
def empty_db_url(request: pytest.FixtureRequest) -> str:
    """An empty (never migrated) database URL, once per backend."""
    if request.param == "sqlite":
        return str(request.getfixturevalue("empty_sqlite_url"))
    return str(request.getfixturevalue("make_pg_database")())


@pytest.fixture
def engine(db_url: str) -> Engine:
    """The cached engine of ``db_url``."""
    return get_engine(db_url)
