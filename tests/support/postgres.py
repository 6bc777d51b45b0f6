"""PostgreSQL fixtures shared by the db and integration tests (registered in tests/conftest.py).

``pg_url`` creates ``finagent_test_<uuid8>`` on 127.0.0.1:5432 through the ``postgres``
maintenance database (user ``postgres``, else ``root``; override with
``FINAGENT_TEST_PG_ADMIN_URL=postgresql://user@host:port/postgres``), migrates it to head and
drops it at the end of the session. Tests are skipped with the reason when Postgres does not
answer (CI fails instead: ``.ci/run`` starts the services first).
"""

from __future__ import annotations

import os
import subprocess
import sys
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


# Dropping a database costs the server about a second (it waits for a checkpoint of its files);
# a session makes dozens, so the drops run in a detached process after the session instead of
# holding the developer's prompt (measured: 45-76 s of teardown per xdist worker, docs/testing.md).
_DROP_SCRIPT = """
import sys, psycopg
from psycopg import sql
with psycopg.connect(sys.argv[1], autocommit=True) as conn:
    for name in sys.argv[2:]:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
"""


def drop_databases_later(*, admin_conninfo: str, names: list[str]) -> subprocess.Popen[bytes] | None:
    """Drop ``names`` (``WITH (FORCE)``) in a detached child process and return it without waiting.

    ``FINAGENT_TEST_PG_DROP=wait`` waits for it (a run that must leave the server as it found it
    before its caller goes on). Returns ``None`` when there is nothing to drop."""
    if not names:
        return None
    proc = subprocess.Popen(
        [sys.executable, "-c", _DROP_SCRIPT, admin_conninfo, *names],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # outlives the pytest worker that started it
    )
    if os.environ.get("FINAGENT_TEST_PG_DROP") == "wait":
        proc.wait(timeout=600)
    return proc


@pytest.fixture(scope="session")
def make_pg_database(pg_server: PgServer) -> Iterator[Callable[..., str]]:
    """Factory: create a uniquely named database ``finagent_test_<uuid8>``, return its SQLAlchemy URL.

    ``make(migrated=True)`` returns one already at the migrations' head: a copy (``CREATE
    DATABASE … TEMPLATE``, ~0.3 s) of a template this session migrated once, instead of running
    every migration again (~1.5 s each). Every database it made is dropped after the session
    (``drop_databases_later``), after closing our pools.
    """
    created: list[str] = []
    template: list[str] = []

    def create(name: str, *, template_name: str | None = None) -> None:
        with psycopg.connect(pg_server.admin_conninfo(), autocommit=True) as conn:
            if template_name is None:
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
            else:
                conn.execute(
                    sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                        sql.Identifier(name), sql.Identifier(template_name)
                    )
                )
        created.append(name)

    def make(*, migrated: bool = False) -> str:
        """Create ``finagent_test_<uuid8>`` (empty, or at head with ``migrated=True``); its URL."""
        name = f"finagent_test_{uuid.uuid4().hex[:8]}"
        if not migrated:
            create(name)
            return pg_server.url(name)
        if not template:
            template_name = f"finagent_test_{uuid.uuid4().hex[:8]}_head"
            create(template_name)
            upgrade(url=pg_server.url(template_name))
            # a template must have no open connection while it is copied
            dispose_engines(close=True)
            template.append(template_name)
        create(name, template_name=template[0])
        return pg_server.url(name)

    yield make
    dispose_engines(close=True)
    drop_databases_later(admin_conninfo=pg_server.admin_conninfo(), names=created)


@pytest.fixture(scope="session")
def pg_url(make_pg_database: Callable[..., str]) -> str:
    """A migrated Postgres database shared by the session (tests use fresh uuid ids)."""
    return make_pg_database(migrated=True)
