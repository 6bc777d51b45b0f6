"""Persistence: SQLAlchemy 2 models (``db.models``), engines (``db.engine``), Alembic migrations
(``db.migrate``, ``db/migrations``) and keyword-only data access (``db.repo``)."""
