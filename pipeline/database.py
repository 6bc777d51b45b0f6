"""The product's database as a producer meets it: make sure the schema is there before the first
read or write.

A module of its own, below :mod:`pipeline.service`, so that the commands and pages that only
read rows (``finagent list``, ``show``, ``doctor``) load SQLAlchemy and the models and nothing
of the analysis machinery (pandas, the providers, Celery).
"""

from __future__ import annotations

from sqlalchemy import inspect

from core.settings import Settings
from db.engine import get_engine
from db.migrate import ensure_schema


class SchemaMissingError(RuntimeError):
    """The service database has no schema: run ``finagent db upgrade``."""


#: Service databases already seen with a schema (per process): a producer enqueuing many
#: analyses checks once, not once per request (one round trip each, docs/benchmarks.md).
_schema_seen: set[str] = set()


def prepare_database(*, settings: Settings) -> None:
    """Embedded mode: create/upgrade the SQLite schema. Service mode: check it exists (once
    per process and URL).

    Raises:
        SchemaMissingError: service database without the ``analyses`` table.
        sqlalchemy.exc.OperationalError: the database cannot be reached.
    """
    url = settings.service.effective_database_url
    if settings.service.mode == "embedded":
        ensure_schema(url=url)
        return
    if url in _schema_seen:
        return
    if not inspect(get_engine(url)).has_table("analyses"):
        raise SchemaMissingError("the database has no finagent schema: run `finagent db upgrade`")
    _schema_seen.add(url)
