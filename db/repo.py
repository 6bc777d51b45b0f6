"""Data access for analyses, tool-call attempts and iteration claims (keyword-only functions).

Idempotency lives here, in the database (docs/design.md, "Durability and idempotency"):
deterministic primary keys plus ``INSERT … ON CONFLICT DO NOTHING``
(``sqlalchemy.dialects.postgresql.insert`` / ``sqlalchemy.dialects.sqlite.insert``), so a
redelivered Celery task never duplicates a row, and a guarded ``UPDATE`` so a late copy of an
earlier stage never overwrites a later one (the moves of ``db.ledger``).

Rows come back as plain ``dict``s keyed by column name: dates as ``datetime.date``, timestamps as
timezone-aware UTC ``datetime``, JSON columns as Python objects. Secrets never reach a row:
:func:`db.redact.redact` is applied to tool ``arguments`` and to every error text before insert.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any, Final, cast

import sqlalchemy as sa
from sqlalchemy import Connection, Engine

from core import stages
from core.plans import DEFAULT_ANALYSIS_TYPE
from db import archive, blobs, state_refs
from db._sql import fetch_all
from db.attempt_rows import (
    CONTENT_BLOBS,
    LLM_CALLS,
    TOOL_CALLS,
    dedupe,
    insert_rows,
    llm_call_values,
    tool_call_values,
)
from db.engine import begin_write, reading
from db.models import (
    ANALYSES,
    ANALYSIS_ITERATIONS,
    TERMINAL_STATUSES,
    WATCHLIST_RUN_ITEMS,
)

logger = logging.getLogger(__name__)

ITERATIONS: Final = ANALYSIS_ITERATIONS
ITEMS: Final = WATCHLIST_RUN_ITEMS

#: Columns ``list_analyses`` returns (the heavy ``state``/``report``/``report_json`` are left out).
LIST_COLUMNS: Final = (
    "id",
    "symbol",
    "as_of",
    "status",
    "iteration",
    "max_iterations",
    "user_query",
    "signal",
    "confidence",
    "error",
    "created_at",
    "updated_at",
    "finished_at",
    "checkpoint",
    "attempt",
    "lease_owner",
    "lease_expires_at",
    "recoveries",
)
#: Lease of a new or re-queued analysis when the caller does not pass the setting
#: (``Settings.lease_seconds``'s default).
DEFAULT_LEASE_SECONDS: Final = 300

# A page larger than this is a bug or a typo, not a use case (the CLI shows tens of rows).
MAX_LIST_LIMIT: Final = 1000


class AnalysisNotFoundError(LookupError):
    """No ``analyses`` row has the given id."""


# --------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------


def _as_date(value: date | str) -> date:
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    return date.fromisoformat(value)


# --------------------------------------------------------------------------------------------
# Analyses
# --------------------------------------------------------------------------------------------


def claimed_first_passes(*, engine: Engine, analysis_ids: Sequence[str]) -> set[str]:
    """Which of ``analysis_ids`` have their pass 0 claimed (an ``analysis_iterations`` row of
    iteration 0): analyses a producer wrote before, whose chains it must not send again. One
    ``SELECT … WHERE analysis_id IN (…)`` per 1,000 ids."""
    out: set[str] = set()
    for at in range(0, len(analysis_ids), 1000):
        chunk = list(analysis_ids[at : at + 1000])
        stmt = sa.select(ITERATIONS.c.analysis_id).where(
            ITERATIONS.c.analysis_id.in_(chunk), ITERATIONS.c.iteration == 0
        )
        with engine.connect() as conn:
            out.update(str(r[0]) for r in conn.execute(stmt))
    return out


#: What ``analyses.state`` holds in place of its ``final_report`` when that equals the row's
#: ``report`` column (a finished analysis: the same ~8.5 KB markdown twice per row otherwise).
#: :func:`get_analysis` puts the report back, so readers see the state as it was written.
REPORT_IN_COLUMN: Final = {"$column": "report"}


def state_for_row(state: dict[str, Any], report: str | None) -> dict[str, Any]:
    """``state`` as stored beside ``report``: its ``final_report`` replaced by
    :data:`REPORT_IN_COLUMN` when it equals ``report`` (not ``None``); otherwise unchanged.
    A shallow copy: the caller's dict is not modified."""
    if report is None or state.get("final_report") != report:
        return state
    return {**state, "final_report": REPORT_IN_COLUMN}


def state_from_row(state: Any, report: str | None) -> Any:
    """The state :func:`state_for_row` stored, whole again: :data:`REPORT_IN_COLUMN` → ``report``.
    States written without it (before this rule, or unfinished) come back unchanged."""
    if isinstance(state, dict) and state.get("final_report") == REPORT_IN_COLUMN:
        return {**state, "final_report": report}
    return state


@functools.cache
def _results_for_state(dialect: str) -> sa.Select[Any]:
    """The query of :func:`_tool_results_for_state` on ``dialect``, built once per process (it
    runs at every checkpoint: building it each time cost more CPU than running it)."""
    # A row without refs may hold JSON null rather than SQL NULL (as ``db.retention`` reads it).
    typeof = sa.func.jsonb_typeof if dialect == "postgresql" else sa.func.json_type
    split = sa.func.coalesce(typeof(TOOL_CALLS.c.result_refs), "null") == "array"
    return sa.select(
        TOOL_CALLS.c.tool_call_id,
        TOOL_CALLS.c.status,
        TOOL_CALLS.c.attempt,
        split.label("split"),
        sa.case((split, sa.null()), else_=TOOL_CALLS.c.result).label("result"),
    ).where(TOOL_CALLS.c.analysis_id == sa.bindparam("analysis_id"), TOOL_CALLS.c.status == "success")


def _tool_results_for_state(
    conn: Connection | None, analysis_id: str, pending: Sequence[Mapping[str, Any]] = ()
) -> dict[str, Any]:
    """``{tool_call_id: result}`` a state of ``analysis_id`` may reference when written
    (``db.state_refs``): the latest successful attempt of each logical call stored for the
    analysis (read on ``conn``; none when ``conn`` is ``None``), then of the rows ``pending``
    (this write's own tool-call rows as ``db.attempt_rows.tool_call_values`` made them).
    A call whose latest stored attempt is cut into ``content_blobs`` pieces is left out (its
    skeleton is not the result; the state does not repeat those large lists anyway)."""
    rows: list[dict[str, Any]] = []
    if conn is not None:
        stmt = _results_for_state(conn.dialect.name)
        rows = [dict(r) for r in conn.execute(stmt, {"analysis_id": analysis_id}).mappings()]
    for row in rows:
        if row["split"]:  # a placeholder result, so a later attempt's whole result still wins
            row["result"] = _SPLIT
    rows.extend(
        {**row, "result": _SPLIT if row.get("result_refs") else row.get("result")}
        for row in pending
        if row.get("analysis_id") == analysis_id
    )
    found = state_refs.latest_results(rows)
    return {key: value for key, value in found.items() if value is not _SPLIT}


#: Stands for a result cut into pieces in :func:`_tool_results_for_state` (never referenced).
_SPLIT: Final = object()


def pack_row(
    conn: Connection | None,
    analysis_id: str,
    state: dict[str, Any],
    *,
    report: str | None = None,
    report_json: dict[str, Any] | None = None,
    pending: Sequence[Mapping[str, Any]] = (),
) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """``(state, report_json)`` as the ``analyses`` row stores them beside ``report``
    (``db.state_refs.pack_row``): the state without the final report the ``report`` column
    holds (:func:`state_for_row`) and the tool results it repeats replaced by references to the
    analysis's tool calls; ``report_json`` (``None`` stays ``None``) without what it repeats of
    that stored state. The results referenced: the analysis's stored ones, read in one query on
    ``conn``, and those of ``pending`` (this write's tool-call rows, which the same transaction
    inserts). ``conn=None``: no query, only ``pending``'s results are referenced (a step's
    checkpoint, whose state the next step's write replaces: ``db.ledger.complete``)."""
    results = _tool_results_for_state(conn, analysis_id, pending)
    stored = state_for_row(state, report)
    return state_refs.pack_row(stored, report_json, results)


def unpack_state(
    conn: Connection, analysis_id: str, stored: Any, archived: Sequence[Mapping[str, Any]] | None = None
) -> Any:
    """The stored ``analyses.state`` whole again (``db.state_refs.unpack``): the referenced
    results are read on ``conn`` from the analysis's own tool calls (pieces joined), or taken
    from ``archived`` (an archived analysis's rows, ``db.archive``). A state without references
    (written before them, or referencing nothing) costs no query.
    Raises ``KeyError`` when a referenced result is missing."""
    wanted = state_refs.refs(stored)
    if not wanted:
        return stored
    if archived is not None:
        picked = [
            {k: r.get(k) for k in ("tool_call_id", "status", "attempt", "result", "result_refs")}
            for r in archived
            if r.get("status") == "success" and r.get("tool_call_id") in wanted
        ]
        rows = _resolve_results(conn, picked)
        return state_refs.unpack(stored, state_refs.latest_results(rows))
    stmt = sa.select(
        TOOL_CALLS.c.tool_call_id,
        TOOL_CALLS.c.status,
        TOOL_CALLS.c.attempt,
        TOOL_CALLS.c.result,
        TOOL_CALLS.c.result_refs,
    ).where(
        TOOL_CALLS.c.analysis_id == analysis_id,
        TOOL_CALLS.c.status == "success",
        TOOL_CALLS.c.tool_call_id.in_(sorted(wanted)),
    )
    rows = _resolve_results(conn, [dict(r) for r in conn.execute(stmt).mappings()])
    return state_refs.unpack(stored, state_refs.latest_results(rows))


def get_analysis(*, engine: Engine, analysis_id: str) -> dict[str, Any] | None:
    """The full ``analyses`` row as a dict (every column, ``state`` parsed and whole:
    :func:`unpack_state`, then :func:`state_from_row`; ``report_json`` whole from it:
    ``db.state_refs.unpack_report``), or ``None``. An archived analysis reads the same: its
    ``state``, ``report`` and ``report_json`` come from its archive (``db.archive``). Raises
    ``KeyError`` when a result the state references (or an archive's dictionary) is missing."""
    with reading(engine) as conn:
        found = conn.execute(sa.select(ANALYSES).where(ANALYSES.c.id == analysis_id)).mappings().first()
        if found is None:
            return None
        row = dict(found)
        rows = None
        if row.get("archived_at") is not None:
            record = archive.load(conn, analysis_id)
            if record is None:
                raise KeyError(f"analysis {analysis_id} is archived but its archive is missing")
            row.update(state=record.state, report=record.report, report_json=record.report_json)
            rows = record.tool_calls
        row["state"] = state_from_row(unpack_state(conn, analysis_id, row["state"], rows), row["report"])
        row["report_json"] = state_refs.unpack_report(
            row["report_json"], row["state"], jsonb=conn.dialect.name == "postgresql"
        )
    return row


def list_analyses(
    *,
    engine: Engine,
    symbol: str | None = None,
    status: str | None = None,
    limit: int = 50,
    offset: int = 0,
    tenant: str | None = None,
    analysis_type: str | None = None,
) -> list[dict[str, Any]]:
    """Summaries of analyses, newest first (``created_at`` desc, then ``id``); only ``tenant``'s
    when given (``None``: every tenant's, the local admin's view); only those of
    ``analysis_type`` when given (the state's ``analysis_type``; a state without one is the
    default type, ``core.plans.DEFAULT_ANALYSIS_TYPE``).

    Each dict has the ``LIST_COLUMNS`` keys, ``analysis_type`` (the state's; ``None`` for the
    default type) and ``headline`` (the report's one-line answer, ``pipeline.report.headline_text``;
    ``None`` while running and in reports written before it) (no ``state``/``report``/``report_json``: use
    :func:`get_analysis`). Filters are exact matches. Raises ``ValueError`` unless
    ``1 <= limit <= MAX_LIST_LIMIT`` and ``offset >= 0``, or for an unknown ``status``.
    """
    if not 1 <= limit <= MAX_LIST_LIMIT or offset < 0:
        raise ValueError(f"need 1 <= limit <= {MAX_LIST_LIMIT} and offset >= 0, got {limit=}, {offset=}")
    stated = ANALYSES.c.state["analysis_type"].as_string()
    headline = ANALYSES.c.report_json["headline"].as_string()
    stmt = sa.select(
        *(ANALYSES.c[name] for name in LIST_COLUMNS),
        stated.label("analysis_type"),
        headline.label("headline"),
    )
    if symbol is not None:
        stmt = stmt.where(ANALYSES.c.symbol == symbol)
    if status is not None:
        stages.check_status(status)
        stmt = stmt.where(ANALYSES.c.status == status)
    if tenant is not None:
        stmt = stmt.where(ANALYSES.c.tenant == tenant)
    if analysis_type is not None:
        if analysis_type == DEFAULT_ANALYSIS_TYPE:
            stmt = stmt.where(sa.or_(stated == analysis_type, stated.is_(None)))
        else:
            stmt = stmt.where(stated == analysis_type)
    stmt = stmt.order_by(ANALYSES.c.created_at.desc(), ANALYSES.c.id.desc()).limit(limit).offset(offset)
    return fetch_all(engine, stmt)


def count_in_flight(*, engine: Engine, api_key_id: str) -> int:
    """How many analyses enqueued by ``api_key_id`` are not finished (neither done nor failed)."""
    stmt = (
        sa.select(sa.func.count())
        .select_from(ANALYSES)
        .where(ANALYSES.c.api_key_id == api_key_id, ANALYSES.c.status.not_in(TERMINAL_STATUSES))
    )
    with reading(engine) as conn:
        return int(conn.execute(stmt).scalar_one())


def count_started_since(*, engine: Engine, tenant: str, api_key_id: str, since: datetime) -> int:
    """How many analyses of ``tenant`` enqueued by ``api_key_id`` were created at or after
    ``since`` (UTC), whatever their status (the index on ``(tenant, created_at)`` finds them)."""
    stmt = (
        sa.select(sa.func.count())
        .select_from(ANALYSES)
        .where(
            ANALYSES.c.tenant == tenant,
            ANALYSES.c.created_at >= since,
            ANALYSES.c.api_key_id == api_key_id,
        )
    )
    with reading(engine) as conn:
        return int(conn.execute(stmt).scalar_one())


def tenant_llm_spend(*, engine: Engine, tenant: str, since: datetime) -> float:
    """USD spent on LLM calls (``llm_calls.cost_usd``, calls with an unknown price count 0) by
    ``tenant``'s analyses since ``since`` (UTC), by the calls' own timestamps."""
    with reading(engine) as conn:
        return float(conn.execute(_tenant_spend_statement(tenant, since)).scalar_one())


def _tenant_spend_statement(tenant: str, since: datetime) -> sa.Select[Any]:
    """The sum behind :func:`tenant_llm_spend`."""
    return (
        sa.select(sa.func.coalesce(sa.func.sum(LLM_CALLS.c.cost_usd), 0.0))
        .select_from(LLM_CALLS.join(ANALYSES, ANALYSES.c.id == LLM_CALLS.c.analysis_id))
        .where(ANALYSES.c.tenant == tenant, LLM_CALLS.c.timestamp >= since)
    )


def tenant_of(*, engine: Engine, analysis_id: str) -> str | None:
    """The tenant owning ``analysis_id``, or ``None`` for an unknown analysis."""
    with reading(engine) as conn:
        value = conn.execute(sa.select(ANALYSES.c.tenant).where(ANALYSES.c.id == analysis_id)).scalar()
    return None if value is None else str(value)


def status_of(*, engine: Engine, analysis_id: str) -> tuple[str, int] | None:
    """``(status, iteration)`` of an analysis, or ``None``: the cheap poll behind ``--wait``
    (one primary-key lookup of two columns)."""
    with reading(engine) as conn:
        row = conn.execute(
            sa.select(ANALYSES.c.status, ANALYSES.c.iteration).where(ANALYSES.c.id == analysis_id)
        ).first()
    return (row[0], row[1]) if row is not None else None


# --------------------------------------------------------------------------------------------
# Tool calls
# --------------------------------------------------------------------------------------------


def insert_tool_calls(*, engine: Engine, rows: Sequence[Mapping[str, Any]]) -> int:
    """Insert tool-call attempt rows in one transaction (direct tool use, or a late flush).

    ``rows`` follow the shape of ``db.attempt_rows.tool_call_values`` (``analysis_id`` may be NULL;
    ``iteration`` is required here). Returns the number of rows actually inserted: rows whose
    ``id`` already exists (a redelivery) are skipped by ON CONFLICT (id) DO NOTHING.

    Raises ``ValueError`` for a malformed row (before any write) and
    ``sqlalchemy.exc.IntegrityError`` when an ``analysis_id`` names no analysis.
    """
    values = dedupe(tool_call_values(r) for r in rows)
    if not values:
        return 0
    with begin_write(engine) as conn:
        return insert_rows(conn, TOOL_CALLS, values)


# The reads of stored results, built once per process (a stage reads cited results back on
# every analysis: building the expression cost as much client CPU as running it).
#: The pieces named by ``hashes`` (an expanding list).
_PIECES: Final = sa.select(CONTENT_BLOBS.c.hash, CONTENT_BLOBS.c.body, CONTENT_BLOBS.c.packed).where(
    CONTENT_BLOBS.c.hash.in_(sa.bindparam("hashes", expanding=True))
)
#: The result of the latest successful attempt of ``tool_call_id``.
_LATEST_RESULT: Final = (
    sa.select(TOOL_CALLS.c.result, TOOL_CALLS.c.result_refs)
    .where(TOOL_CALLS.c.tool_call_id == sa.bindparam("tool_call_id"), TOOL_CALLS.c.status == "success")
    .order_by(TOOL_CALLS.c.attempt.desc())
    .limit(1)
)
#: The results of every successful attempt of ``tool_call_ids`` (an expanding list), by attempt.
_RESULTS: Final = (
    sa.select(TOOL_CALLS.c.tool_call_id, TOOL_CALLS.c.result, TOOL_CALLS.c.result_refs)
    .where(
        TOOL_CALLS.c.tool_call_id.in_(sa.bindparam("tool_call_ids", expanding=True)),
        TOOL_CALLS.c.status == "success",
    )
    .order_by(TOOL_CALLS.c.attempt)
)
#: PostgreSQL: a row's pieces in the same statement, ``[[hash, body, packed], ...]`` (``None``
#: when it references none; a ``json`` body is handed on as its text), so a result read back
#: costs one round trip instead of two. A row without refs may hold JSON null, not SQL NULL.
_ROW_PIECES: Final = sa.literal_column(
    "(SELECT json_agg(json_build_array(b.hash, b.body, b.packed IS NOT NULL)) FROM content_blobs b"
    " WHERE b.hash IN (SELECT jsonb_array_elements_text(CASE WHEN jsonb_typeof(tool_calls.result_refs)"
    " = 'array' THEN tool_calls.result_refs ELSE '[]'::jsonb END)))",
    type_=sa.JSON(),
).label("pieces")
#: :data:`_LATEST_RESULT` and :data:`_RESULTS` with :data:`_ROW_PIECES`, by dialect name.
_WITH_PIECES: Final = {
    "postgresql": {id(q): q.add_columns(_ROW_PIECES) for q in (_LATEST_RESULT, _RESULTS)},
}


def _read_results(conn: Connection, query: sa.Select[Any], params: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows of ``query`` (:data:`_LATEST_RESULT` or :data:`_RESULTS`) with every ``result``
    whole (:func:`_resolve_results`). On PostgreSQL the pieces come with the rows
    (:data:`_ROW_PIECES`); a row whose pieces are not all there as bodies (a piece the archive
    packed, a missing one) is resolved by the pieces' own query, as elsewhere."""
    variant = _WITH_PIECES.get(conn.dialect.name, {}).get(id(query))
    if variant is None:
        return _resolve_results(conn, [dict(r) for r in conn.execute(query, params).mappings()])
    rows, rest = [], []
    for found in conn.execute(variant, params).mappings():
        row = dict(found)
        pieces = {key: body for key, body, packed in row.pop("pieces") or () if not packed}
        refs = row.get("result_refs")
        if refs and set(refs) <= set(pieces):
            row["result"] = blobs.join(row["result"], pieces)
        elif refs:
            rest.append(row)
        rows.append(row)
    _resolve_results(conn, rest)  # in place
    return rows


def _resolve_results(conn: Connection, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` (dicts with ``result`` and ``result_refs``) with every ``result`` whole again:
    the pieces its ``result_refs`` name are read from ``content_blobs`` in one query and joined
    into the skeleton (``db.blobs.join``). Rows without refs (written before migration 0019,
    or results without a large list) are left as they are. Raises ``KeyError`` for a missing
    piece."""
    wanted = blobs.all_refs(rows)
    if not wanted:
        return rows
    # a piece the archive packed has its body in ``packed`` (db.archive)
    found = {
        key: body if packed is None else archive.unpack_blob(packed)
        for key, body, packed in conn.execute(_PIECES, {"hashes": sorted(wanted)})
    }
    for row in rows:
        if row.get("result_refs"):
            row["result"] = blobs.join(row["result"], found)
    return rows


def get_tool_calls(*, engine: Engine, analysis_id: str) -> list[dict[str, Any]]:
    """Every attempt row of an analysis (all columns, ``result`` whole: pieces stored once in
    ``content_blobs`` are joined back, ``db.blobs``), ordered by ``timestamp``, then
    ``attempt``, then ``id``; an archived analysis's rows come from its archive
    (``db.archive``). Empty list if none."""
    stmt = (
        sa.select(TOOL_CALLS)
        .where(TOOL_CALLS.c.analysis_id == analysis_id)
        .order_by(TOOL_CALLS.c.timestamp, TOOL_CALLS.c.attempt, TOOL_CALLS.c.id)
    )
    with reading(engine) as conn:
        record = archive.load(conn, analysis_id)
        rows = record.tool_calls if record else [dict(row) for row in conn.execute(stmt).mappings()]
        return _resolve_results(conn, rows)


#: The ``tool_calls`` columns of a timeline row: everything but the stored result and arguments.
_TOOL_LOG_COLUMNS: Final = (
    "id", "tool_call_id", "stage", "iteration", "timestamp", "tool", "status", "attempt",
    "latency_ms", "result_summary", "error", "error_code",
)  # fmt: skip
#: The ``llm_calls`` columns of a timeline row: everything but the request, response and completion.
_LLM_LOG_COLUMNS: Final = (
    "id", "llm_call_id", "stage", "agent", "iteration", "timestamp", "model", "status", "attempt",
    "prompt_tokens", "completion_tokens", "cost_usd", "latency_ms", "finish_reason", "error",
)  # fmt: skip


def call_log(*, engine: Engine, analysis_id: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """``(tool call rows, LLM call rows)`` of an analysis for a timeline: every attempt row
    with the columns of :data:`_TOOL_LOG_COLUMNS` / :data:`_LLM_LOG_COLUMNS` (no results,
    arguments, requests or responses, so a page polling it every second reads a few KB, not the
    bars), each list ordered as :func:`get_tool_calls` and :func:`get_llm_calls` order theirs.
    An archived analysis's tool calls come from its archive (``db.archive``)."""
    tools = (
        sa.select(*(TOOL_CALLS.c[name] for name in _TOOL_LOG_COLUMNS))
        .where(TOOL_CALLS.c.analysis_id == analysis_id)
        .order_by(TOOL_CALLS.c.timestamp, TOOL_CALLS.c.attempt, TOOL_CALLS.c.id)
    )
    llm = (
        sa.select(*(LLM_CALLS.c[name] for name in _LLM_LOG_COLUMNS))
        .where(LLM_CALLS.c.analysis_id == analysis_id)
        .order_by(LLM_CALLS.c.timestamp, LLM_CALLS.c.id)
    )
    with reading(engine) as conn:
        record = archive.load(conn, analysis_id)
        if record is not None:
            tool_rows = [{k: row.get(k) for k in _TOOL_LOG_COLUMNS} for row in record.tool_calls]
        else:
            tool_rows = [dict(row) for row in conn.execute(tools).mappings()]
        return tool_rows, [dict(row) for row in conn.execute(llm).mappings()]


def get_tool_result(
    *, engine: Engine, tool_call_id: str, analysis_id: str | None = None
) -> dict[str, Any] | None:
    """The ``result`` (envelope ``data``) of the successful attempt of a logical tool call.

    This is how a stage dereferences a citation such as ``stock_data.history_ref``. Returns
    ``None`` when no attempt succeeded (or the success stored no result). If several attempts
    succeeded (should not happen), the latest attempt wins. The result is whole (``db.blobs``).
    ``analysis_id``: the analysis that made the call; when it is archived (``db.archive``) and
    the call is no longer in ``tool_calls``, the call is read from its archive.
    """
    with reading(engine) as conn:
        row = next(iter(_read_results(conn, _LATEST_RESULT, {"tool_call_id": tool_call_id})), None)
        if row is None and analysis_id is not None and (record := archive.load(conn, analysis_id)):
            attempts = _resolve_results(
                conn, [r for r in record.tool_calls if r["tool_call_id"] == tool_call_id]
            )
            return cast(dict[str, Any] | None, state_refs.latest_results(attempts).get(tool_call_id))
        if row is None:
            return None
        return cast(dict[str, Any] | None, row["result"])


def get_tool_results(*, engine: Engine, tool_call_ids: Iterable[str]) -> dict[str, dict[str, Any]]:
    """:func:`get_tool_result` of several logical calls in one query: ``{tool_call_id: result}``
    for those with a successful attempt that stored a result (others are left out)."""
    ids = sorted(set(tool_call_ids))
    if not ids:
        return {}
    with reading(engine) as conn:
        rows = _read_results(conn, _RESULTS, {"tool_call_ids": ids})
    found = {r["tool_call_id"]: r["result"] for r in rows if r["result"] is not None}
    return cast(dict[str, dict[str, Any]], found)


# --------------------------------------------------------------------------------------------
# Iteration guard
# --------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------
# LLM calls
# --------------------------------------------------------------------------------------------


def insert_llm_calls(*, engine: Engine, rows: Sequence[Mapping[str, Any]]) -> int:
    """Insert ``llm_calls`` attempt rows in one transaction (ON CONFLICT (id) DO NOTHING).

    Row keys are the ``llm_calls`` columns. Required: ``id`` (deterministic, e.g.
    ``"<llm_call_id>#<attempt>"``), ``llm_call_id``, ``stage``, ``agent``, ``iteration``,
    ``model``, ``status`` (success|error), ``attempt`` (1-based), ``latency_ms``. ``error``,
    ``request`` and ``response`` pass through :func:`redact`. Returns the rows inserted.

    Raises ``ValueError`` for a malformed row (before any write).
    """
    values = dedupe(llm_call_values(r) for r in rows)
    if not values:
        return 0
    with begin_write(engine) as conn:
        return insert_rows(conn, LLM_CALLS, values)


def get_llm_calls(*, engine: Engine, analysis_id: str) -> list[dict[str, Any]]:
    """Every ``llm_calls`` attempt row of an analysis, ordered by ``timestamp``, ``id``."""
    stmt = (
        sa.select(LLM_CALLS)
        .where(LLM_CALLS.c.analysis_id == analysis_id)
        .order_by(LLM_CALLS.c.timestamp, LLM_CALLS.c.id)
    )
    return fetch_all(engine, stmt)


def llm_usage(*, engine: Engine, analysis_id: str) -> dict[str, Any]:
    """Totals over the ``llm_calls`` attempt rows of an analysis.

    Returns ``{calls, failed_calls, attempts, failed_attempts, prompt_tokens, completion_tokens,
    cost_usd}`` (same rules as ``agents.llm.pricing.usage_of_rows``): ``calls`` = logical calls
    answered, ``failed_calls`` = logical calls never answered, ``attempts`` / ``failed_attempts``
    = rows / error rows, tokens over every row; ``cost_usd`` the sum of the answered calls'
    known costs, ``None`` (unknown) when one of them has a NULL cost or when attempts failed
    and nothing was answered.
    """
    return llm_usage_of(engine=engine, analysis_ids=[analysis_id])


def llm_usage_of(*, engine: Engine, analysis_ids: Sequence[str]) -> dict[str, Any]:
    """:func:`llm_usage` summed over several analyses (e.g. the analyses of a watchlist run)."""
    with reading(engine) as conn:
        return _usage(conn.execute(_usage_statement(analysis_ids)).one())


def _usage_statement(analysis_ids: Sequence[str]) -> sa.Select[Any]:
    """The one-row aggregate behind :func:`llm_usage_of` (read by :func:`_usage`)."""
    ok = LLM_CALLS.c.status == "success"
    return sa.select(
        sa.func.count(sa.distinct(sa.case((ok, LLM_CALLS.c.llm_call_id)))),
        sa.func.count(sa.distinct(LLM_CALLS.c.llm_call_id)),
        sa.func.count(),
        sa.func.coalesce(sa.func.sum(sa.case((ok, 1), else_=0)), 0),
        sa.func.coalesce(sa.func.sum(LLM_CALLS.c.prompt_tokens), 0),
        sa.func.coalesce(sa.func.sum(LLM_CALLS.c.completion_tokens), 0),
        sa.func.sum(sa.case((ok, LLM_CALLS.c.cost_usd))),
        sa.func.count(sa.case((ok, LLM_CALLS.c.cost_usd))),
    ).where(LLM_CALLS.c.analysis_id.in_(list(analysis_ids)))


def _usage(row: Any) -> dict[str, Any]:
    """The usage dict of :func:`llm_usage` from a row of :func:`_usage_statement`."""
    calls, all_calls, attempts, ok_rows, prompt, completion, cost, priced = row
    unknown = priced < ok_rows or (ok_rows == 0 and attempts > 0)
    return {
        "calls": int(calls),
        "failed_calls": int(all_calls) - int(calls),
        "attempts": int(attempts),
        "failed_attempts": int(attempts) - int(ok_rows),
        "prompt_tokens": int(prompt),
        "completion_tokens": int(completion),
        "cost_usd": None if unknown else round(float(cost or 0.0), 6),
    }


@dataclass(frozen=True)
class LLMSpend:
    """What the LLM budgets of one analysis start from (:func:`llm_spend`).

    Attributes:
        usage: :func:`llm_usage` of the analysis (tokens, USD, calls).
        tenant: the analysis's tenant, when the tenant's spend was asked for (else ``None``).
        tenant_spent_usd: :func:`tenant_llm_spend` of that tenant since the time asked (0.0
            when not asked).
        run_id: the watchlist run that enqueued the analysis, when asked for and there is one.
        run_usage: :func:`llm_usage_of` over every analysis of that run (``None`` without one).
    """

    usage: dict[str, Any]
    tenant: str | None = None
    tenant_spent_usd: float = 0.0
    run_id: str | None = None
    run_usage: dict[str, Any] | None = None


def llm_spend(
    *, engine: Engine, analysis_id: str, tenant_since: datetime | None = None, with_run: bool = False
) -> LLMSpend:
    """The analysis's LLM usage and, when asked, its tenant's LLM spend since ``tenant_since``
    (UTC) and its watchlist run's usage: what a stage's LLM session starts from, read on one
    connection (the stage's start pays one checkout, not one per figure)."""
    with reading(engine) as conn:
        spend = LLMSpend(usage=_usage(conn.execute(_usage_statement([analysis_id])).one()))
        if tenant_since is not None:
            tenant = conn.execute(sa.select(ANALYSES.c.tenant).where(ANALYSES.c.id == analysis_id)).scalar()
            if tenant is not None:
                spent = conn.execute(_tenant_spend_statement(str(tenant), tenant_since)).scalar_one()
                spend = dataclasses.replace(spend, tenant=str(tenant), tenant_spent_usd=float(spent))
        if with_run:
            run_id = conn.execute(
                sa.select(ITEMS.c.run_id).where(ITEMS.c.analysis_id == analysis_id).limit(1)
            ).scalar_one_or_none()
            if run_id is not None:
                ids = [
                    str(i)
                    for i in conn.execute(
                        sa.select(ITEMS.c.analysis_id).where(
                            ITEMS.c.run_id == run_id, ITEMS.c.analysis_id.is_not(None)
                        )
                    ).scalars()
                ]
                run_usage = _usage(conn.execute(_usage_statement(ids)).one())
                spend = dataclasses.replace(spend, run_id=str(run_id), run_usage=run_usage)
    return spend
