"""Attempt rows: the ``tool_calls`` and ``llm_calls`` rows a stage writes, one per attempt of a
tool or LLM call. Validation (only the table's columns, the required keys, status and level),
normalisation (UTC timestamps, 1-based attempts, redacted arguments and texts: secrets never
reach a row, ``db.redact``) and the idempotent batch insert (deterministic ids, ``ON CONFLICT
(id) DO NOTHING``). ``db.repo`` and ``db.progress_repo`` write them through these functions.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cached_property
from typing import Any, Final

import orjson
import sqlalchemy as sa
from sqlalchemy import Connection
from sqlalchemy.dialects import postgresql

from db import blobs
from db._sql import insert_ignore, utc_now
from db.models import CONTENT_BLOBS, LLM_CALLS, LOG_LEVELS, TOOL_CALL_STATUSES, TOOL_CALLS
from db.redact import redact

#: The key of a tool-call value dict that carries its pieces to the insert (not a column:
#: :func:`take_blobs` removes it before the row is written).
BLOBS_KEY: Final = "_blobs"
#: The key of a tool-call row dict that carries the tool's ``storage_basis`` (not a column:
#: :func:`tool_call_values` hands it to ``db.blobs.split`` and drops it).
BASIS_KEY: Final = "result_basis"


def as_utc(value: datetime | str) -> datetime:
    """``value`` (a datetime or an ISO 8601 string) as a timezone-aware UTC datetime; a naive
    one is taken as UTC."""
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def tool_call_row_id(*, tool_call_id: str, attempt: int) -> str:
    """The deterministic primary key of one attempt row: ``"<tool_call_id>#<attempt>"``.

    Used when a row dict has no ``id``; a redelivered task recomputes the same key, so its
    insert is a no-op.
    """
    return f"{tool_call_id}#{attempt}"


@dataclass(frozen=True)
class _AttemptRows:
    """One kind of attempt row (``tool_calls`` or ``llm_calls``): its table, the name its error
    messages use, and the keys a row must give (not ``None``)."""

    table: sa.Table
    label: str
    required: frozenset[str]

    @cached_property
    def columns(self) -> frozenset[str]:
        """The table's column names (a row may use no other key)."""
        return frozenset(c.name for c in self.table.columns)


_TOOL_CALL_ROWS: Final = _AttemptRows(
    table=TOOL_CALLS,
    label="tool call",
    required=frozenset({"tool_call_id", "stage", "tool", "status", "attempt", "latency_ms"}),
)
_LLM_CALL_ROWS: Final = _AttemptRows(
    table=LLM_CALLS,
    label="llm call",
    required=frozenset(
        {"id", "llm_call_id", "stage", "agent", "iteration", "model", "status", "attempt", "latency_ms"}
    ),
)


def _attempt_values(
    kind: _AttemptRows,
    row: Mapping[str, Any],
    *,
    analysis_id: str | None = None,
    iteration: int | None = None,
) -> dict[str, Any]:
    """Validate one attempt row dict and normalise the columns both kinds share.

    Checks: only ``kind``'s columns; an ``analysis_id`` in the row equals the one given (which
    is then set); the required keys; ``status`` in ``TOOL_CALL_STATUSES``; ``level`` (default
    INFO for success, ERROR otherwise) in ``LOG_LEVELS``. ``iteration`` is a default for a row
    without one. Normalises ``attempt`` (int), ``timestamp`` (UTC, default now), ``latency_ms``
    (float) and ``error`` (redacted, empty → ``None``). Raises ``ValueError`` on a failed check.
    """
    columns = kind.columns
    unknown = set(row) - columns
    if unknown:
        raise ValueError(f"unknown {kind.table.name} keys {sorted(unknown)}; columns are {sorted(columns)}")
    values = dict(row)
    if analysis_id is not None:
        if values.get("analysis_id") not in (None, analysis_id):
            raise ValueError(
                f"{kind.label} row for analysis {values['analysis_id']!r} saved under {analysis_id!r}"
            )
        values["analysis_id"] = analysis_id
    if iteration is not None:
        values.setdefault("iteration", iteration)
    missing = kind.required - {k for k, v in values.items() if v is not None}
    if missing:
        raise ValueError(f"{kind.label} row lacks {sorted(missing)}")
    if values["status"] not in TOOL_CALL_STATUSES:
        raise ValueError(f"{kind.label} status must be one of {TOOL_CALL_STATUSES}, got {values['status']!r}")
    level = values.get("level") or ("INFO" if values["status"] == "success" else "ERROR")
    if level not in LOG_LEVELS:
        raise ValueError(f"{kind.label} level must be one of {LOG_LEVELS}, got {level!r}")
    values.update(
        level=level,
        attempt=int(values["attempt"]),
        timestamp=as_utc(values["timestamp"]) if values.get("timestamp") else utc_now(),
        latency_ms=float(values["latency_ms"]),
        error=redact(values["error"]) if values.get("error") else None,
    )
    return values


def _all_columns(kind: _AttemptRows, values: dict[str, Any]) -> dict[str, Any]:
    """``values`` with every other column of ``kind`` set to ``None``: executemany needs the
    same keys in every row."""
    for column in kind.columns - set(values):
        values[column] = None
    return values


def tool_call_values(
    row: Mapping[str, Any], *, analysis_id: str | None = None, iteration: int | None = None
) -> dict[str, Any]:
    """Validate one tool-call row dict and turn it into column values (redacted).

    :func:`_attempt_values`, plus: ``attempt`` is 1-based; ``id`` defaults to
    :func:`tool_call_row_id`; ``result_summary`` (default ""), ``arguments`` (default {}) and
    ``retry_hint`` are redacted.
    """
    basis = row.get(BASIS_KEY)
    if BASIS_KEY in row:
        row = {k: v for k, v in row.items() if k != BASIS_KEY}
    values = _attempt_values(_TOOL_CALL_ROWS, row, analysis_id=analysis_id, iteration=iteration)
    attempt = values["attempt"]
    if attempt < 1:
        raise ValueError(f"attempt is 1-based, got {attempt}")
    values.update(
        id=values.get("id") or tool_call_row_id(tool_call_id=values["tool_call_id"], attempt=attempt),
        result_summary=redact(values.get("result_summary") or ""),
        arguments=redact(dict(values.get("arguments") or {})),
        retry_hint=redact(values["retry_hint"]) if values.get("retry_hint") else None,
    )
    if values.get("result") is not None and values.get("result_refs") is None:
        cut = blobs.split(values["result"], basis=basis)
        if cut.refs:
            values.update(result=cut.skeleton, result_refs=cut.refs)
            values[BLOBS_KEY] = cut.texts
    return _all_columns(_TOOL_CALL_ROWS, values)


def llm_call_values(row: Mapping[str, Any], *, analysis_id: str | None = None) -> dict[str, Any]:
    """Validate one ``llm_calls`` row dict and turn it into column values (redacted).

    :func:`_attempt_values`, plus: ``tool_calls_requested`` is an int (default 0), ``cached`` a
    bool (default false); ``request`` and ``response`` are redacted (``completion``, the full
    answer replay serves, is not: see ``db.llm_cache_repo.put_entry``).
    """
    values = _attempt_values(_LLM_CALL_ROWS, row, analysis_id=analysis_id)
    values.update(
        tool_calls_requested=int(values.get("tool_calls_requested") or 0),
        cached=bool(values.get("cached")),  # served by the response cache (agents.llm.cache)
        request=redact(values.get("request")),
        response=redact(values.get("response")),
    )
    return _all_columns(_LLM_CALL_ROWS, values)


def dedupe(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Keep the first row per id (a batch may repeat a row on a retried flush)."""
    seen: dict[str, dict[str, Any]] = {}
    for row in rows:
        seen.setdefault(row["id"], row)
    return list(seen.values())


def take_blobs(values: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Remove the pieces :func:`tool_call_values` put under :data:`BLOBS_KEY` (their JSON texts,
    ``db.blobs.Split.texts``) from ``values`` (in place) and return them as ``content_blobs``
    rows (``hash``, ``body``, ``bytes``, ``created_at``), one per hash, sorted by hash: two
    writers that insert overlapping sets then take the rows' locks in the same order (no
    deadlock). A ``body`` is its text as an ``orjson.Fragment``: ``db.engine.json_dumps`` writes
    it as it is (the text the piece's hash is over), so a piece is encoded once."""
    found: dict[str, str] = {}
    for value in values:
        found.update(value.pop(BLOBS_KEY, None) or {})
    now = utc_now()
    return [
        {"hash": key, "body": orjson.Fragment(found[key]), "bytes": len(found[key]), "created_at": now}
        for key in sorted(found)
    ]


def insert_rows(conn: Connection, table: sa.Table, values: Sequence[dict[str, Any]]) -> int:
    """Batch insert: one DBAPI ``executemany`` of ``INSERT … ON CONFLICT (id) DO NOTHING``.

    For ``tool_calls``, the rows' pieces (:func:`take_blobs`) are inserted first into
    ``content_blobs`` (``ON CONFLICT (hash) DO NOTHING``: a piece stored by another analysis
    is kept once), in the same transaction.

    Relies on the primary key (``pk_tool_calls``, ``pk_llm_calls``) being the table's only unique
    constraint (``db._sql.insert_ignore`` refuses otherwise).

    Returns the number of rows inserted (skipped duplicates count 0): ``preserve_rowcount``
    keeps the driver's summed rowcount, which psycopg 3 and sqlite3 report exactly. Chosen over
    ``RETURNING id`` (SQLAlchemy's multi-row VALUES): on Postgres that ran 5.7k rows/s against
    17k rows/s for executemany (see ``tests/db/test_repo.py::test_batch_insert_rate``).
    """
    if not values:
        return 0
    if table is TOOL_CALLS:
        pieces = take_blobs(values)
        if pieces:
            conn.execute(insert_ignore(conn, CONTENT_BLOBS), pieces)
    stmt = insert_ignore(conn, table)
    result = conn.execution_options(preserve_rowcount=True).execute(stmt, list(values))
    return max(result.rowcount, 0)


@dataclass(frozen=True)
class StepRows:
    """What a step leaves in the attempt tables, ready to write: ``tools`` and ``llms`` (column
    values of :func:`tool_call_values` / :func:`llm_call_values`, one per id) and ``pieces``
    (the ``content_blobs`` rows of the tools' results, :func:`take_blobs`; already removed from
    ``tools``). Built by :func:`step_rows`; written by :meth:`insert` (in a transaction) or as
    the ``p_tools``/``p_llms``/``p_blobs`` parameters of :func:`rows_cte` CTEs (:meth:`params`)."""

    tools: list[dict[str, Any]]
    llms: list[dict[str, Any]]
    pieces: list[dict[str, Any]]

    def params(self) -> dict[str, list[dict[str, Any]]]:
        """The non-empty lists as CTE parameters: ``p_tools``, ``p_llms``, ``p_blobs``."""
        named = {"p_tools": self.tools, "p_llms": self.llms, "p_blobs": self.pieces}
        return {name: values for name, values in named.items() if values}

    def insert(self, conn: Connection) -> None:
        """Insert the rows on ``conn`` (the caller's transaction): the pieces first, then the
        tool and LLM rows, each ``ON CONFLICT DO NOTHING`` (:func:`insert_rows`)."""
        if self.pieces:
            conn.execute(insert_ignore(conn, CONTENT_BLOBS), self.pieces)
        insert_rows(conn, TOOL_CALLS, self.tools)
        insert_rows(conn, LLM_CALLS, self.llms)


def step_rows(
    tool_calls: Iterable[Mapping[str, Any]],
    llm_calls: Iterable[Mapping[str, Any]],
    *,
    analysis_id: str | None = None,
    iteration: int | None = None,
) -> StepRows:
    """A step's ``tool_calls`` and ``llm_calls`` row dicts as :class:`StepRows`: validated and
    redacted (:func:`tool_call_values`, :func:`llm_call_values`; ``analysis_id`` and
    ``iteration`` as there), the first row per id kept (:func:`dedupe`), the tools' pieces taken
    out (:func:`take_blobs`). Raises ``ValueError`` for a malformed row (nothing is written)."""
    tools = dedupe(tool_call_values(r, analysis_id=analysis_id, iteration=iteration) for r in tool_calls)
    llms = dedupe(llm_call_values(r, analysis_id=analysis_id) for r in llm_calls)
    return StepRows(tools=tools, llms=llms, pieces=take_blobs(tools))


def rows_cte(table: sa.Table, name: str) -> sa.CTE:
    """``INSERT INTO table … ON CONFLICT (<primary key>) DO NOTHING`` of the rows in the JSON
    array parameter ``p_<name>`` (values of :func:`tool_call_values`/:func:`llm_call_values`;
    ``json_populate_recordset`` maps each object's keys to the columns of the same name), as a
    data-modifying CTE named ``name``, to be attached to another statement (``add_cte``) so the
    rows are written in that statement's round trip. PostgreSQL only.
    """
    columns = [c.name for c in table.columns]
    rows = (
        sa.func.json_populate_recordset(
            sa.literal_column(f"NULL::{table.name}"), sa.bindparam(f"p_{name}", type_=postgresql.JSON())
        )
        .table_valued(*columns)
        .alias(f"{name}_in")
    )
    return (
        postgresql.insert(table)
        .from_select(columns, sa.select(*(rows.c[c] for c in columns)))
        .on_conflict_do_nothing(index_elements=[c.name for c in table.primary_key.columns])
        .cte(name)
    )
