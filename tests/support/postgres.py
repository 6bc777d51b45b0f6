"""PostgreSQL fixtures shared by the db and integration tests (registered in tests/conftest.py).

``pg_url`` creates ``finagent_test_<uuid8>`` on 127.0.0.1:5432 through the ``postgres``
maintenance database (user ``postgres``, else ``root``; override with
``FINAGENT_TEST_PG_ADMIN_URL=postgresql://user@host:port/postgres``), migrates it to head and
drops it at the end of the session. Tests are skipped with the reason when Postgres does not
answer (CI fails instead: ``.ci/run`` starts the services first).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import psycopg
import pytest
from psycopg import sql

from db.engine import dispose_engines
from db.migrate import upgrade

PG_HOST = "127.0.0.1"
PG_PORT = 5432
PG_USERS = ("postgres", "root")


@dataclass(frozen=True)
class PgServer:
    """Where the test Postgres answers, as ``psycopg`` conninfo pieces."""

    host: str
    port: int
    user: str

    def admin_conninfo(self) -> str:
        """libpq conninfo of the ``postgres`` maintenance database (3 s connect timeout)."""
        return f"host={self.host} port={self.port} user={self.user} dbname=postgres connect_timeout=3"

    def url(self, database: str) -> str:
        """SQLAlchemy URL of ``database`` on this server."""
        return f"postgresql+psycopg://{self.user}@{self.host}:{self.port}/{database}"


def _find_server() -> PgServer | str:
    """A reachable server, or the reason none is."""
    admin = os.environ.get("FINAGENT_TEST_PG_ADMIN_URL")
    candidates: list[PgServer] = []
    if admin:
        info = psycopg.conninfo.conninfo_to_dict(admin)
        candidates.append(
            PgServer(
                str(info.get("host", PG_HOST)), int(str(info.get("port", PG_PORT))), str(info.get("user"))
            )
        )
    candidates += [PgServer(PG_HOST, PG_PORT, user) for user in PG_USERS]
    errors = []
    for server in candidates:
        try:
            with psycopg.connect(server.admin_conninfo()) as conn:
                conn.execute("SELECT 1")
            return server
        except psycopg.Error as exc:
            errors.append(f"{server.user}: {str(exc).strip()}")
    return f"PostgreSQL not reachable at {PG_HOST}:{PG_PORT} ({'; '.join(errors)})"


@pytest.fixture(scope="session")
def pg_server() -> PgServer:
    """The reachable test server; skips every Postgres test, with the reason, if none answers."""
    found = _find_server()
    if isinstance(found, str):
        if os.environ.get("CI") == "true":  # CI starts the services: a missing one is a failure
            pytest.fail(found)
        pytest.skip(found)
    return found


@pytest.fixture(scope="session")
def make_pg_database(pg_server: PgServer) -> Iterator[Callable[[], str]]:
    """Factory: create an empty uniquely named database, return its SQLAlchemy URL.

    Every database it made is dropped at session end (``WITH (FORCE)``, after closing our pools).
    """
    created: list[str] = []

    def make() -> str:
        """Create ``finagent_test_<uuid8>`` and return its URL."""
        name = f"finagent_test_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(pg_server.admin_conninfo(), autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        created.append(name)
        return pg_server.url(name)

    yield make
    dispose_engines(close=True)
    with psycopg.connect(pg_server.admin_conninfo(), autocommit=True) as conn:
        for name in created:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


@pytest.fixture(scope="session")
def pg_url(make_pg_database: Callable[[], str]) -> str:
    """A migrated Postgres database shared by the session (tests use fresh uuid ids)."""
    url = make_pg_database()
    upgrade(url=url)
    return url
