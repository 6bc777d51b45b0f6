"""Alembic environment for finagent (PostgreSQL and SQLite from the same revisions).

Two ways in:

* ``db.migrate.upgrade(url=...)`` (the normal path) passes an open connection, already inside
  a transaction (and holding the migration lock), in ``config.attributes["connection"]``.
* The ``alembic`` CLI from the repo root (``alembic -x url=sqlite:///x.sqlite3 upgrade head``):
  the URL comes from ``-x url=...``, else ``FINAGENT_SERVICE_DATABASE_URL`` / the embedded default
  (``core.settings``); the engine is ``db.engine.get_engine`` so the SQLite pragmas apply.
"""

from __future__ import annotations

from logging.config import fileConfig

from alembic import context
from sqlalchemy.engine import Connection

from core.settings import get_settings
from db.engine import get_engine
from db.migrate import migration_connection
from db.models import METADATA

config = context.config
target_metadata = METADATA

# Only the CLI configures logging; a programmatic upgrade keeps the caller's logging setup.
if config.config_file_name is not None and config.attributes.get("configure_logger", True):
    fileConfig(config.config_file_name, disable_existing_loggers=False)


def _url() -> str:
    url = context.get_x_argument(as_dictionary=True).get("url") or config.get_main_option("sqlalchemy.url")
    if url:
        return url
    return get_settings().service.effective_database_url


def _configure(connection: Connection) -> None:
    context.configure(
        connection=connection,
        target_metadata=target_metadata,
        # SQLite cannot ALTER most things; batch mode recreates the table instead.
        render_as_batch=connection.dialect.name == "sqlite",
        compare_type=True,
        compare_server_default=False,
    )


def run_migrations_offline() -> None:
    """``alembic upgrade head --sql``: print the DDL for the URL's dialect."""
    url = _url()
    context.configure(
        url=url,
        target_metadata=target_metadata,
        literal_binds=True,
        render_as_batch=url.startswith("sqlite"),
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    """Run against the caller's connection, or open one from the URL."""
    connection = config.attributes.get("connection")
    if connection is not None:
        _configure(connection)
        with context.begin_transaction():
            context.run_migrations()
        return

    with migration_connection(get_engine(_url())) as conn:
        _configure(conn)
        with context.begin_transaction():
            context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
