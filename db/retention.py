"""Retention: delete finished analyses older than a date, then the content blobs nobody uses.

``finagent purge --before DATE [--dry-run]`` (``apps.cli``) runs :func:`purge`. What goes:

* every **finished** (``done``/``failed``) analysis created before ``before`` (00:00 UTC of
  that day); an unfinished one is never deleted, however old (a worker may still write it);
* its ``tool_calls``, ``llm_calls``, ``analysis_iterations`` and ``analysis_archives`` rows
  (deleted explicitly, and by the foreign keys' ``ON DELETE CASCADE``), and its
  ``recommendation_scores`` rows (the cascade: a scorecard over purged analyses loses them);
* then every ``content_blobs`` row that no remaining ``tool_calls`` row references
  (``result_refs``, ``db.blobs``) and no remaining archive uses (``archived_until``,
  ``db.archive``).

Kept: the ``events`` log (an audit trail that outlives the analyses it names), backtest and
watchlist rows (they keep the purged ids), the LLM response cache.

Why a kept analysis always replays: its ``tool_calls`` rows (or its archive) stay, and a blob
is deleted only when no remaining row or archive lists it. A writer that inserts a row
referencing a blob that already exists skips the blob's insert (``ON CONFLICT DO NOTHING``); if
the purge deleted that blob between the skip and the writer's commit, the row would point at
nothing. So on PostgreSQL the purge's transaction first takes ``LOCK TABLE content_blobs IN
SHARE ROW EXCLUSIVE MODE``: it waits for every transaction that inserted into ``content_blobs``
to commit (their rows are then visible to the reference scan) and blocks new inserts until it
commits (writers wait a moment, nothing fails). On SQLite the transaction is ``BEGIN
IMMEDIATE``: writers are serialised.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime, time
from typing import Any, Final

import sqlalchemy as sa
from sqlalchemy import Connection, Engine

from db.archive import ARCHIVES
from db.attempt_rows import CONTENT_BLOBS, LLM_CALLS, TOOL_CALLS
from db.engine import begin_write
from db.models import ANALYSIS_ITERATIONS, TERMINAL_STATUSES
from db.repo import ANALYSES

ITERATIONS: Final = ANALYSIS_ITERATIONS


@dataclass(frozen=True)
class PurgeReport:
    """What :func:`purge` deleted (or, with ``dry_run``, would delete): row counts per table,
    and the ``bytes`` of JSON text of the blobs."""

    before: datetime
    dry_run: bool
    analyses: int
    tool_calls: int
    llm_calls: int
    iterations: int
    blobs: int
    blob_bytes: int
    archives: int

    def as_dict(self) -> dict[str, Any]:
        """The report as a JSON-able dict (``before`` as ISO 8601)."""
        return {
            "before": self.before.isoformat(),
            "dry_run": self.dry_run,
            "analyses": self.analyses,
            "tool_calls": self.tool_calls,
            "llm_calls": self.llm_calls,
            "analysis_iterations": self.iterations,
            "analysis_archives": self.archives,
            "content_blobs": self.blobs,
            "content_blob_bytes": self.blob_bytes,
        }


def cutoff(before: date | datetime) -> datetime:
    """``before`` as an aware UTC datetime: a date is 00:00 UTC of that day; a naive datetime is
    taken as UTC."""
    if not isinstance(before, datetime):
        return datetime.combine(before, time(0), tzinfo=UTC)
    return before.replace(tzinfo=UTC) if before.tzinfo is None else before.astimezone(UTC)


def _kept_refs(conn: Connection, doomed: sa.Select[Any]) -> sa.Select[Any]:
    """The hashes referenced by the ``tool_calls`` rows that stay (direct tool calls, and
    those of analyses not in ``doomed``): a one-column subquery over each row's
    ``result_refs`` array (``jsonb_array_elements_text`` on PostgreSQL, ``json_each`` on
    SQLite)."""
    pg = conn.dialect.name == "postgresql"
    each = sa.func.jsonb_array_elements_text if pg else sa.func.json_each
    kind = (sa.func.jsonb_typeof if pg else sa.func.json_type)(TOOL_CALLS.c.result_refs)
    element = each(TOOL_CALLS.c.result_refs).table_valued("value")
    return (
        sa.select(element.c.value)
        .select_from(TOOL_CALLS)
        .join(element, sa.true())
        .where(
            TOOL_CALLS.c.result_refs.is_not(None),
            kind == "array",  # a row without refs may hold JSON null rather than SQL NULL
            sa.or_(TOOL_CALLS.c.analysis_id.is_(None), TOOL_CALLS.c.analysis_id.not_in(doomed)),
        )
    )


def _unused(conn: Connection, doomed: sa.Select[Any], moment: datetime) -> sa.ColumnElement[bool]:
    """A piece no kept row references and no kept archive uses: every archived analysis is
    finished, so one created on or after ``moment`` is kept, and ``archived_until`` (the latest
    ``created_at`` of the archived analyses using the piece, ``db.archive``) tells whether one
    does."""
    return sa.and_(
        CONTENT_BLOBS.c.hash.not_in(_kept_refs(conn, doomed)),
        sa.or_(CONTENT_BLOBS.c.archived_until.is_(None), CONTENT_BLOBS.c.archived_until < moment),
    )


def purge(*, engine: Engine, before: date | datetime, dry_run: bool = False) -> PurgeReport:
    """Delete the finished analyses created before ``before`` with their rows, then the
    content blobs no remaining tool call references (module docstring), in ONE transaction.

    ``dry_run``: count the same rows and delete nothing (no lock is taken). Returns a
    :class:`PurgeReport`. Raises ``sqlalchemy.exc.OperationalError`` when the database is
    unreachable (nothing deleted).
    """
    moment = cutoff(before)
    doomed = sa.select(ANALYSES.c.id).where(
        ANALYSES.c.created_at < moment, ANALYSES.c.status.in_(TERMINAL_STATUSES)
    )
    with begin_write(engine) as conn:
        if conn.dialect.name == "postgresql" and not dry_run:
            conn.execute(sa.text("LOCK TABLE content_blobs IN SHARE ROW EXCLUSIVE MODE"))
        orphan = _unused(conn, doomed, moment)

        def count(table: sa.Table) -> int:
            return int(
                conn.execute(
                    sa.select(sa.func.count()).select_from(table).where(table.c.analysis_id.in_(doomed))
                ).scalar_one()
            )

        counts = {
            "tool_calls": count(TOOL_CALLS),
            "llm_calls": count(LLM_CALLS),
            "iterations": count(ITERATIONS),
            "archives": int(
                conn.execute(
                    sa.select(sa.func.count()).select_from(ARCHIVES).where(ARCHIVES.c.analysis_id.in_(doomed))
                ).scalar_one()
            ),
        }
        analyses = int(conn.execute(sa.select(sa.func.count()).select_from(doomed.subquery())).scalar_one())
        blobs, blob_bytes = conn.execute(
            sa.select(sa.func.count(), sa.func.coalesce(sa.func.sum(CONTENT_BLOBS.c.bytes), 0)).where(orphan)
        ).one()
        if not dry_run:
            ids = [r[0] for r in conn.execute(doomed)]
            for start in range(0, len(ids), 1000):
                chunk = ids[start : start + 1000]
                for table in (TOOL_CALLS, LLM_CALLS, ITERATIONS, ARCHIVES):
                    conn.execute(sa.delete(table).where(table.c.analysis_id.in_(chunk)))
                conn.execute(sa.delete(ANALYSES).where(ANALYSES.c.id.in_(chunk)))
            conn.execute(sa.delete(CONTENT_BLOBS).where(_unused(conn, doomed, moment)))
    return PurgeReport(
        before=moment,
        dry_run=dry_run,
        analyses=analyses,
        tool_calls=counts["tool_calls"],
        llm_calls=counts["llm_calls"],
        iterations=counts["iterations"],
        archives=counts["archives"],
        blobs=int(blobs),
        blob_bytes=int(blob_bytes),
    )
