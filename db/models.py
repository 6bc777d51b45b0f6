"""SQLAlchemy 2 table models: ``analyses``, ``tool_calls``, ``analysis_iterations``.

The same schema runs on PostgreSQL (service mode) and SQLite (embedded mode), so types are
portable: ``JSON`` that becomes ``JSONB`` on Postgres, ``UTCDateTime`` (timezone-aware, stored
UTC), text ids (UUID strings or deterministic keys). The migration ``0001_initial`` creates
exactly these tables; ``tests/db`` checks that autogenerate finds no difference on both backends.
"""

from __future__ import annotations

import builtins
from datetime import UTC, date, datetime
from typing import Any, Final

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from core import stages
from core.tenancy import DEFAULT_SCOPES, DEFAULT_TENANT

#: The statuses come from the stage table (one per stage, then done/failed); the repository
#: checks them on write (no CHECK constraint since migration 0005: adding a stage is no migration).
ANALYSIS_STATUSES: Final = stages.ANALYSIS_STATUSES
TERMINAL_STATUSES: Final = (stages.Status.DONE.value, stages.Status.FAILED.value)
TOOL_CALL_STATUSES: Final = ("success", "error")
LOG_LEVELS: Final = ("INFO", "WARNING", "ERROR")

# Stable constraint/index names, so later migrations (and SQLite batch mode) can address them.
NAMING_CONVENTION: Final = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}

#: JSON on SQLite (text), JSONB on Postgres (binary, indexable).
JSONType = sa.JSON().with_variant(JSONB(), "postgresql")
#: JSON on both (text, syntax-checked): for large values written often, read whole and never
#: searched inside (the state, tool results); ``jsonb`` parsed each on the way in (migration 0014).
JSONText = sa.JSON()


class UTCDateTime(sa.TypeDecorator[datetime]):
    """``DateTime(timezone=True)`` that always hands back timezone-aware UTC datetimes.

    Writes: aware values are converted to UTC; naive values are taken to be UTC already.
    SQLite has no time zone type, so the value is stored as naive UTC text there; Postgres
    stores ``timestamptz``. Reads: always ``tzinfo=UTC`` on both backends.
    """

    impl = sa.DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        """Normalise to UTC (naive UTC for SQLite)."""
        if value is None:
            return None
        value = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        """Attach/convert to UTC."""
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _in(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(v) for v in values)})"


class Base(DeclarativeBase):
    """Declarative base carrying the naming convention."""

    metadata = sa.MetaData(naming_convention=NAMING_CONVENTION)


class Analysis(Base):
    """One analysis run of the pipeline, updated by every stage.

    ``state`` is the whole ``FinancialAgentState.to_message()`` dump of the last accepted
    stage; ``report``/``report_json``/``signal``/``confidence`` are copies of the results for
    queries without parsing ``state``. ``iteration`` and ``status`` implement the no-regress
    rule of the row's ledger (``db.ledger``).
    """

    __tablename__ = "analyses"

    id: Mapped[str] = mapped_column(sa.String(), primary_key=True)
    symbol: Mapped[str] = mapped_column(sa.String())
    as_of: Mapped[date] = mapped_column(sa.Date())
    status: Mapped[str] = mapped_column(sa.String())
    iteration: Mapped[int] = mapped_column(sa.Integer())
    max_iterations: Mapped[int] = mapped_column(sa.Integer())
    user_query: Mapped[str] = mapped_column(sa.Text())
    state: Mapped[dict[str, Any]] = mapped_column(JSONText)
    report: Mapped[str | None] = mapped_column(sa.Text())
    report_json: Mapped[dict[str, Any] | None] = mapped_column(JSONType)
    signal: Mapped[str | None] = mapped_column(sa.String())
    confidence: Mapped[float | None] = mapped_column(sa.Float())
    error: Mapped[str | None] = mapped_column(sa.Text())
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), server_default=sa.func.now())
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), server_default=sa.func.now())
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    # Durability (migration 0006): the row, not the broker, says where the analysis is.
    #: last completed stage of the current pass (NULL before the first): the stored ``state``
    #: is the state after it, so the next step can be re-driven from the row
    checkpoint: Mapped[str | None] = mapped_column(sa.String())
    #: attempts of the current step (a claim by a worker counts one; reset when a stage completes)
    attempt: Mapped[int] = mapped_column(sa.Integer(), server_default="0")
    #: Celery task id holding the current step's lease (NULL while the step waits in a queue)
    lease_owner: Mapped[str | None] = mapped_column(sa.String())
    #: when the analysis counts as stalled without new progress (a claim, a completed stage)
    lease_expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    #: re-drives by the recovery sweep so far (capped by ``max_recoveries``)
    recoveries: Mapped[int] = mapped_column(sa.Integer(), server_default="0")
    # Ownership (migration 0007): the tenant that owns the analysis (404 for every other
    # tenant's key) and the API key that enqueued it (``NULL`` from the CLI, the Python API and
    # beat), which counts the key's analyses in flight.
    tenant: Mapped[str] = mapped_column(sa.String(), server_default=DEFAULT_TENANT)
    api_key_id: Mapped[str | None] = mapped_column(sa.String())
    #: Archived (migration 0020, ``db.archive``): when the finished analysis's record (state,
    #: reports, tool calls) moved into one compressed ``analysis_archives`` row; ``NULL`` while
    #: the record is in ``state``/``report``/``report_json`` and ``tool_calls`` as written.
    archived_at: Mapped[datetime | None] = mapped_column(UTCDateTime())

    __table_args__ = (
        sa.Index(None, "symbol", "created_at"),
        sa.Index(None, "status"),
        sa.Index(None, "lease_expires_at"),
        sa.Index(None, "tenant", "created_at"),
        sa.Index(None, "api_key_id", "status"),
    )


class ToolCall(Base):
    """One ATTEMPT of one tool call: the structured log line, plus the result
    (docs/design.md, "Structured logs").

    ``id`` is deterministic (``db.attempt_rows.tool_call_row_id(tool_call_id, attempt)`` by default), so a
    redelivered task inserts nothing new. ``tool_call_id`` is the logical call that reports
    cite in ``source_refs`` (docs/design.md, "Source references"); its attempts share it.
    ``result`` is the full envelope
    ``data`` (bars can be ~50 KB); ``analysis_id`` is NULL for direct tool use.
    """

    __tablename__ = "tool_calls"

    id: Mapped[str] = mapped_column(sa.String(), primary_key=True)
    tool_call_id: Mapped[str] = mapped_column(sa.String(), index=True)
    analysis_id: Mapped[str | None] = mapped_column(
        sa.String(), sa.ForeignKey("analyses.id", ondelete="CASCADE"), index=True
    )
    stage: Mapped[str] = mapped_column(sa.String())
    iteration: Mapped[int] = mapped_column(sa.Integer())
    celery_task_id: Mapped[str | None] = mapped_column(sa.String())
    timestamp: Mapped[datetime] = mapped_column(UTCDateTime())
    level: Mapped[str] = mapped_column(sa.String())
    tool: Mapped[str] = mapped_column(sa.String())
    symbol: Mapped[str | None] = mapped_column(sa.String())
    status: Mapped[str] = mapped_column(sa.String())
    attempt: Mapped[int] = mapped_column(sa.Integer())
    latency_ms: Mapped[float] = mapped_column(sa.Float())
    result_summary: Mapped[str] = mapped_column(sa.Text())
    error: Mapped[str | None] = mapped_column(sa.Text())
    error_code: Mapped[str | None] = mapped_column(sa.String())
    retry_hint: Mapped[str | None] = mapped_column(sa.Text())
    arguments: Mapped[dict[str, Any]] = mapped_column(JSONType)
    result: Mapped[Any | None] = mapped_column(JSONText)
    #: The tool's own extra citations (``ToolOutput.source_refs``; migration 0012): with
    #: ``result`` they rebuild the envelope exactly, which ``finagent replay`` needs.
    source_refs: Mapped[Any | None] = mapped_column(JSONType)
    #: The ``content_blobs`` hashes ``result`` references (migration 0019, ``db.blobs``): then
    #: ``result`` is a skeleton whose large lists are ``{"$concat": [hash, ...]}`` markers, which
    #: the repository resolves on every read. NULL: ``result`` is the value itself (rows written
    #: before 0019, and results without a large list).
    result_refs: Mapped[list[str] | None] = mapped_column(JSONType)

    __table_args__ = (
        sa.CheckConstraint(_in("status", TOOL_CALL_STATUSES), name="status"),
        sa.CheckConstraint(_in("level", LOG_LEVELS), name="level"),
        sa.CheckConstraint("attempt >= 1", name="attempt"),
    )


class ContentBlob(Base):
    """One piece of tool results, stored once for every result that contains it (migration
    0019, ``db.blobs``): ``hash`` is the SHA-256 of ``body``'s JSON text, ``body`` a JSON list
    (e.g. one month of daily bars), ``bytes`` the text's length. Rows are only inserted (``ON
    CONFLICT (hash) DO NOTHING``) and deleted by retention once no ``tool_calls`` row references
    them (``db.retention``)."""

    __tablename__ = "content_blobs"

    hash: Mapped[str] = mapped_column(sa.String(), primary_key=True)
    body: Mapped[Any | None] = mapped_column(JSONText)
    bytes: Mapped[int] = mapped_column(sa.Integer())
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), server_default=sa.func.now())
    #: Packed by the archive (migration 0020, ``db.archive``): zstd of ``body``'s JSON text,
    #: ``body`` then NULL. Exactly one of the two is set.
    packed: Mapped[builtins.bytes | None] = mapped_column(sa.LargeBinary())
    #: The latest ``created_at`` of an archived analysis that uses this piece (``NULL``: none):
    #: retention deletes the piece only when every such analysis goes (``db.retention``).
    archived_until: Mapped[datetime | None] = mapped_column(UTCDateTime())


class CompressionDictionary(Base):
    """A zstd dictionary (migration 0020, ``db.archive``) trained on archived analysis records:
    small JSON documents that repeat the same keys and phrases compress 3-4x better with one.
    ``id`` is the first 16 hex digits of the SHA-256 of ``body`` (the dictionary bytes);
    ``samples`` how many records trained it. Rows are only inserted; an archive names the one
    it was compressed with, so a dictionary is never deleted while an archive uses it."""

    __tablename__ = "compression_dictionaries"

    id: Mapped[str] = mapped_column(sa.String(), primary_key=True)
    body: Mapped[bytes] = mapped_column(sa.LargeBinary())
    samples: Mapped[int] = mapped_column(sa.Integer())
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), server_default=sa.func.now())


class AnalysisArchive(Base):
    """The record of one finished analysis in one compressed row (migration 0020,
    ``db.archive``): ``body`` is a zstd frame (with ``dictionary_id``'s dictionary, or none) of
    the JSON document holding the analysis's stored ``state``, ``report``, ``report_json`` and
    every ``tool_calls`` row, exactly as they were stored (their results still reference
    ``content_blobs``, whose ``archived_until`` keeps them for retention); ``tool_calls`` how
    many rows it holds; ``raw_bytes`` the document's size before compression."""

    __tablename__ = "analysis_archives"

    analysis_id: Mapped[str] = mapped_column(
        sa.String(), sa.ForeignKey("analyses.id", ondelete="CASCADE"), primary_key=True
    )
    dictionary_id: Mapped[str | None] = mapped_column(
        sa.String(), sa.ForeignKey("compression_dictionaries.id")
    )
    body: Mapped[bytes] = mapped_column(sa.LargeBinary())
    tool_calls: Mapped[int] = mapped_column(sa.Integer())
    raw_bytes: Mapped[int] = mapped_column(sa.Integer())
    archived_at: Mapped[datetime] = mapped_column(UTCDateTime(), server_default=sa.func.now())


class AnalysisIteration(Base):
    """Claim of one ``(analysis_id, iteration)``: the guard that lets a ``should_continue``
    re-enqueue happen at most once per iteration (the primary key is the lock)."""

    __tablename__ = "analysis_iterations"

    analysis_id: Mapped[str] = mapped_column(
        sa.String(), sa.ForeignKey("analyses.id", ondelete="CASCADE"), primary_key=True
    )
    iteration: Mapped[int] = mapped_column(sa.Integer(), primary_key=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), server_default=sa.func.now())
    celery_task_id: Mapped[str | None] = mapped_column(sa.String())


class LLMCall(Base):
    """One ATTEMPT of one LLM call: model, provider, tokens, cost, latency, status.

    ``id`` is deterministic like ``ToolCall.id``; ``llm_call_id`` groups the attempts of one
    logical call. ``cost_usd`` is NULL when the price is unknown (never guessed); ``request`` and
    ``response`` hold redacted, size-bounded JSON for debugging.
    """

    __tablename__ = "llm_calls"

    id: Mapped[str] = mapped_column(sa.String(), primary_key=True)
    llm_call_id: Mapped[str] = mapped_column(sa.String(), index=True)
    analysis_id: Mapped[str | None] = mapped_column(
        sa.String(), sa.ForeignKey("analyses.id", ondelete="CASCADE"), index=True
    )
    stage: Mapped[str] = mapped_column(sa.String())
    agent: Mapped[str] = mapped_column(sa.String())
    iteration: Mapped[int] = mapped_column(sa.Integer())
    celery_task_id: Mapped[str | None] = mapped_column(sa.String())
    timestamp: Mapped[datetime] = mapped_column(UTCDateTime())
    level: Mapped[str] = mapped_column(sa.String())
    model: Mapped[str] = mapped_column(sa.String())
    provider: Mapped[str | None] = mapped_column(sa.String())
    status: Mapped[str] = mapped_column(sa.String())
    attempt: Mapped[int] = mapped_column(sa.Integer())
    prompt_tokens: Mapped[int | None] = mapped_column(sa.Integer())
    completion_tokens: Mapped[int | None] = mapped_column(sa.Integer())
    cost_usd: Mapped[float | None] = mapped_column(sa.Float())
    latency_ms: Mapped[float] = mapped_column(sa.Float())
    finish_reason: Mapped[str | None] = mapped_column(sa.String())
    tool_calls_requested: Mapped[int] = mapped_column(sa.Integer(), server_default="0")
    error: Mapped[str | None] = mapped_column(sa.Text())
    request: Mapped[Any | None] = mapped_column(JSONType)
    response: Mapped[Any | None] = mapped_column(JSONType)
    #: Migration 0012: sha256 of the canonical request (model, messages, tools, params;
    #: ``agents.llm.cache.request_key``), the full successful answer (``content``, ``tool_calls``
    #: with their ids, tokens, ``finish_reason``: what ``finagent replay`` serves), and whether
    #: the answer came from the response cache (then tokens and cost are 0: nothing was spent).
    request_hash: Mapped[str | None] = mapped_column(sa.String())
    completion: Mapped[Any | None] = mapped_column(JSONType)
    cached: Mapped[bool] = mapped_column(sa.Boolean(), server_default=sa.false())

    __table_args__ = (
        sa.CheckConstraint(_in("status", TOOL_CALL_STATUSES), name="status"),
        sa.CheckConstraint(_in("level", LOG_LEVELS), name="level"),
        sa.CheckConstraint("attempt >= 1", name="attempt"),
    )


class LLMCacheEntry(Base):
    """One cached LLM answer (opt-in ``FINAGENT_LLM_CACHE``; ``agents.llm.cache``).

    ``key`` is the sha256 of the canonical request (model, messages, tools, params), so the
    same request gets the same answer without a provider call; ``completion`` is the answer as
    ``llm_calls.completion`` stores it; ``hits`` counts the times it was served.
    """

    __tablename__ = "llm_cache"

    key: Mapped[str] = mapped_column(sa.String(), primary_key=True)
    model: Mapped[str] = mapped_column(sa.String())
    completion: Mapped[Any] = mapped_column(JSONType)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    hits: Mapped[int] = mapped_column(sa.Integer(), server_default="0")


# --------------------------------------------------------------------------------------------
# Operations (HTTP gateway): API keys, idempotency keys, watchlists and their nightly runs.
# --------------------------------------------------------------------------------------------

WATCHLIST_RUN_STATUSES: Final = ("running", "done")
WATCHLIST_ITEM_STATUSES: Final = ("enqueued", "refused")


class ApiKey(Base):
    """One HTTP API key. Only ``sha256(token)`` is stored (``key_hash``); ``key_id`` is the public
    part of the token (``fa_<key_id>_<secret>``) used to find the row before the constant-time
    comparison. ``revoked_at`` set → the key is refused with 403."""

    __tablename__ = "api_keys"

    key_id: Mapped[str] = mapped_column(sa.String(), primary_key=True)
    name: Mapped[str] = mapped_column(sa.String(), unique=True)
    key_hash: Mapped[str] = mapped_column(sa.String())
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), server_default=sa.func.now())
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    #: the tenant whose objects the key sees (migration 0007; older keys: the default tenant)
    tenant: Mapped[str] = mapped_column(sa.String(), server_default=DEFAULT_TENANT)
    #: comma-separated scopes (``core.tenancy.SCOPES``); older keys get the defaults
    scopes: Mapped[str] = mapped_column(sa.String(), server_default=",".join(DEFAULT_SCOPES))


class ConsoleSession(Base):
    """One signed-in web-console session (migration 0021). The cookie carries a random session
    id; the row is found by its SHA-256 (``id_hash``), so reading the table opens no session.
    ``scopes`` are the key's at sign-in: a session whose key's scopes changed since, or whose key
    was revoked, is over. ``expires_at`` is the absolute end, ``last_seen_at`` the idle clock."""

    __tablename__ = "console_sessions"

    id_hash: Mapped[str] = mapped_column(sa.String(), primary_key=True)
    key_id: Mapped[str] = mapped_column(sa.String(), index=True)
    scopes: Mapped[str] = mapped_column(sa.String())
    csrf: Mapped[str] = mapped_column(sa.String())
    created_at: Mapped[datetime] = mapped_column(UTCDateTime())
    last_seen_at: Mapped[datetime] = mapped_column(UTCDateTime())
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime(), index=True)


class IdempotencyKey(Base):
    """``Idempotency-Key`` header → the analysis it created, per API key (primary key is the
    lock: the first request inserts, a repeat finds the row). ``request_hash`` is sha256 of the
    canonical request body, so the same key with another body is a conflict, not a silent
    replay. ``analysis_id`` has no foreign key: the claim is written before the analysis row."""

    __tablename__ = "idempotency_keys"

    api_key_id: Mapped[str] = mapped_column(sa.String(), primary_key=True)
    key: Mapped[str] = mapped_column(sa.String(), primary_key=True)
    request_hash: Mapped[str] = mapped_column(sa.String())
    analysis_id: Mapped[str] = mapped_column(sa.String())
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), server_default=sa.func.now())


class Watchlist(Base):
    """A named list of tickers analysed on a cron ``schedule`` (5 fields, in ``timezone``)."""

    __tablename__ = "watchlists"

    id: Mapped[str] = mapped_column(sa.String(), primary_key=True)
    #: unique per tenant (``uq_watchlists_tenant_name``, migration 0007): two tenants may both
    #: have a "megacaps", and a taken name in another tenant is not revealed by a 409
    name: Mapped[str] = mapped_column(sa.String())
    tickers: Mapped[list[str]] = mapped_column(JSONType)
    schedule: Mapped[str] = mapped_column(sa.String())
    timezone: Mapped[str] = mapped_column(sa.String())
    options: Mapped[dict[str, Any]] = mapped_column(JSONType)
    enabled: Mapped[bool] = mapped_column(sa.Boolean(), server_default=sa.true())
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), server_default=sa.func.now())
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), server_default=sa.func.now())
    tenant: Mapped[str] = mapped_column(sa.String(), server_default=DEFAULT_TENANT)

    __table_args__ = (sa.UniqueConstraint("tenant", "name"),)


class WatchlistRun(Base):
    """One run of a watchlist for one ``run_date``; ``(watchlist_id, run_date)`` is unique, so a
    second beat tick, a restart or a manual re-run of the same date creates nothing new. The
    digest (Markdown, HTML, JSON) is written once when every analysis of the run finished."""

    __tablename__ = "watchlist_runs"

    id: Mapped[str] = mapped_column(sa.String(), primary_key=True)
    watchlist_id: Mapped[str] = mapped_column(sa.String(), sa.ForeignKey("watchlists.id", ondelete="CASCADE"))
    run_date: Mapped[date] = mapped_column(sa.Date())
    status: Mapped[str] = mapped_column(sa.String())
    trigger: Mapped[str] = mapped_column(sa.String())
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), server_default=sa.func.now())
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    digest_markdown: Mapped[str | None] = mapped_column(sa.Text())
    digest_html: Mapped[str | None] = mapped_column(sa.Text())
    digest_json: Mapped[dict[str, Any] | None] = mapped_column(JSONType)

    __table_args__ = (
        sa.UniqueConstraint("watchlist_id", "run_date"),
        sa.CheckConstraint(_in("status", WATCHLIST_RUN_STATUSES), name="status"),
    )


class WatchlistRunItem(Base):
    """One ticker of a run: the analysis it enqueued, or why it was refused before enqueueing."""

    __tablename__ = "watchlist_run_items"

    run_id: Mapped[str] = mapped_column(
        sa.String(), sa.ForeignKey("watchlist_runs.id", ondelete="CASCADE"), primary_key=True
    )
    symbol: Mapped[str] = mapped_column(sa.String(), primary_key=True)
    status: Mapped[str] = mapped_column(sa.String())
    analysis_id: Mapped[str | None] = mapped_column(sa.String())
    error: Mapped[str | None] = mapped_column(sa.Text())

    __table_args__ = (sa.CheckConstraint(_in("status", WATCHLIST_ITEM_STATUSES), name="status"),)


AUDIT_OUTCOMES: Final = ("ok", "refused", "error")


class AuditLog(Base):
    """One mutating HTTP request (``POST``/``PUT``/``PATCH``/``DELETE``), whatever its outcome.

    ``who`` is the key's public id and name (never the key or any secret; ``NULL`` when the
    request carried no valid key), ``what`` the method and route template
    (``DELETE /watchlists/{name}``), ``object_id`` the object it addressed or created,
    ``status_code`` the HTTP answer and ``outcome`` its class (``ok`` < 400, ``refused`` 4xx,
    ``error`` 5xx); ``request_id`` is the ``X-Request-ID`` echoed to the client. Requests without
    a valid key are counted in one row per client address, status and window instead
    (``apps.api.audit``).
    """

    __tablename__ = "audit_log"

    id: Mapped[str] = mapped_column(sa.String(), primary_key=True)
    at: Mapped[datetime] = mapped_column(UTCDateTime())
    request_id: Mapped[str] = mapped_column(sa.String())
    tenant: Mapped[str | None] = mapped_column(sa.String())
    api_key_id: Mapped[str | None] = mapped_column(sa.String())
    key_name: Mapped[str | None] = mapped_column(sa.String())
    method: Mapped[str] = mapped_column(sa.String())
    what: Mapped[str] = mapped_column(sa.String())
    object_id: Mapped[str | None] = mapped_column(sa.String())
    status_code: Mapped[int] = mapped_column(sa.Integer())
    outcome: Mapped[str] = mapped_column(sa.String())
    # Migration 0015: the client's address (IPv6: its /64), and the aggregates of requests
    # without a valid key: one row per address, status and window (``aggregate_key``) counting
    # ``requests`` from ``at`` (the first) to ``last_at`` (the latest); NULL key = one request.
    client_address: Mapped[str | None] = mapped_column(sa.String())
    requests: Mapped[int] = mapped_column(sa.Integer(), server_default="1")
    last_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    aggregate_key: Mapped[str | None] = mapped_column(sa.String(), unique=True)

    __table_args__ = (
        sa.Index(None, "tenant", "at"),
        sa.CheckConstraint(_in("outcome", AUDIT_OUTCOMES), name="outcome"),
    )


class ServiceHeartbeat(Base):
    """The latest sign of life of one long-running service process (migration 0015).

    The recovery sweeper (``apps.sweeper``, ``kind`` ``sweeper``) writes its row after
    every sweep; ``GET /health`` reads the newest row of the kind and fails when it is older
    than the sweep interval allows, whatever the workers' health. ``name`` is
    ``<kind>@<host>:<pid>`` (one row per process), ``started_at`` when the process started,
    ``beat_at`` its last sweep (UTC), ``detail`` what that sweep did (counts, the last error,
    when the broker was last found to have lost its messages).
    """

    __tablename__ = "service_heartbeats"

    name: Mapped[str] = mapped_column(sa.String(), primary_key=True)
    kind: Mapped[str] = mapped_column(sa.String())
    host: Mapped[str] = mapped_column(sa.String())
    pid: Mapped[int] = mapped_column(sa.Integer())
    started_at: Mapped[datetime] = mapped_column(UTCDateTime())
    beat_at: Mapped[datetime] = mapped_column(UTCDateTime())
    detail: Mapped[dict[str, Any]] = mapped_column(JSONType)

    __table_args__ = (sa.Index(None, "kind", "beat_at"),)


# --------------------------------------------------------------------------------------------
# Paper trading (docs/design.md, "Paper trading"): accounts, positions, orders, fills, events.
# Money is USD in ``Float`` columns rounded to 1e-4 by the broker (portable across both
# backends: SQLite has no exact decimal type); quantities are whole shares.
# --------------------------------------------------------------------------------------------

ORDER_ACTIONS: Final = ("buy", "sell")
ORDER_TYPES: Final = ("market", "limit", "stop")
ORDER_STATUSES: Final = ("filled", "partial", "rejected")
EVENT_TYPES: Final = ("signal", "suggestion", "trade", "error", "alert")
EVENT_SEVERITIES: Final = ("low", "medium", "high", "critical")


class Account(Base):
    """One paper-broker account per ``user_id``; ``id`` is derived from the user id
    (``db.trading_repo.account_id_for``), so two first trades cannot create two accounts."""

    __tablename__ = "accounts"

    id: Mapped[str] = mapped_column(sa.String(), primary_key=True)
    user_id: Mapped[str] = mapped_column(sa.String(), unique=True)
    cash: Mapped[float] = mapped_column(sa.Float())
    currency: Mapped[str] = mapped_column(sa.String(), server_default="USD")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), server_default=sa.func.now())


class Position(Base):
    """Shares held by an account in one symbol (no row once the quantity is back to zero).
    ``avg_price`` is the quantity-weighted average fill price of the buys, USD, fees excluded."""

    __tablename__ = "positions"

    account_id: Mapped[str] = mapped_column(
        sa.String(), sa.ForeignKey("accounts.id", ondelete="CASCADE"), primary_key=True
    )
    symbol: Mapped[str] = mapped_column(sa.String(), primary_key=True)
    quantity: Mapped[int] = mapped_column(sa.Integer())
    avg_price: Mapped[float] = mapped_column(sa.Float())
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), server_default=sa.func.now())

    __table_args__ = (sa.CheckConstraint("quantity > 0", name="quantity"),)


class Order(Base):
    """One order sent to the paper broker, whatever its outcome (rejections are kept for audit).

    ``(account_id, client_order_id)`` is unique: a repeat of a client order id finds the
    original row through ``INSERT … ON CONFLICT DO NOTHING`` and is not filled twice.
    ``seq`` numbers an account's orders 1, 2, 3… in the order the broker processed them (orders
    of one call share ``created_at``, the session's order time), so history replays exactly.
    ``quantity`` is what was asked, ``filled_quantity`` what was filled; ``reason`` says why an
    order was rejected or only partly filled; ``as_of`` is the session the order traded against.
    """

    __tablename__ = "orders"

    id: Mapped[str] = mapped_column(sa.String(), primary_key=True)
    account_id: Mapped[str] = mapped_column(
        sa.String(), sa.ForeignKey("accounts.id", ondelete="CASCADE"), index=True
    )
    seq: Mapped[int] = mapped_column(sa.Integer())
    client_order_id: Mapped[str | None] = mapped_column(sa.String())
    symbol: Mapped[str] = mapped_column(sa.String())
    action: Mapped[str] = mapped_column(sa.String())
    quantity: Mapped[int] = mapped_column(sa.Integer())
    filled_quantity: Mapped[int] = mapped_column(sa.Integer())
    order_type: Mapped[str] = mapped_column(sa.String())
    limit_price: Mapped[float | None] = mapped_column(sa.Float())
    stop_price: Mapped[float | None] = mapped_column(sa.Float())
    status: Mapped[str] = mapped_column(sa.String())
    reason: Mapped[str | None] = mapped_column(sa.Text())
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), server_default=sa.func.now())
    as_of: Mapped[date] = mapped_column(sa.Date())

    __table_args__ = (
        sa.UniqueConstraint("account_id", "client_order_id"),
        sa.UniqueConstraint("account_id", "seq"),
        sa.CheckConstraint(_in("action", ORDER_ACTIONS), name="action"),
        sa.CheckConstraint(_in("order_type", ORDER_TYPES), name="order_type"),
        sa.CheckConstraint(_in("status", ORDER_STATUSES), name="status"),
        sa.CheckConstraint("quantity > 0", name="quantity"),
    )


class Fill(Base):
    """One execution of an order: ``quantity`` shares at ``price`` USD, ``fees`` USD."""

    __tablename__ = "fills"

    id: Mapped[str] = mapped_column(sa.String(), primary_key=True)
    order_id: Mapped[str] = mapped_column(
        sa.String(), sa.ForeignKey("orders.id", ondelete="CASCADE"), index=True
    )
    quantity: Mapped[int] = mapped_column(sa.Integer())
    price: Mapped[float] = mapped_column(sa.Float())
    fees: Mapped[float] = mapped_column(sa.Float())
    timestamp: Mapped[datetime] = mapped_column(UTCDateTime())

    __table_args__ = (sa.CheckConstraint("quantity > 0", name="quantity"),)


class Event(Base):
    """One ``log_event`` record (docs/design.md, "Event log"). ``analysis_id`` has no foreign key:
    events are an
    audit trail that outlives the analyses they mention."""

    __tablename__ = "events"

    id: Mapped[str] = mapped_column(sa.String(), primary_key=True)
    event_type: Mapped[str] = mapped_column(sa.String())
    severity: Mapped[str] = mapped_column(sa.String())
    data: Mapped[dict[str, Any]] = mapped_column(JSONType)
    analysis_id: Mapped[str | None] = mapped_column(sa.String(), index=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), server_default=sa.func.now())

    __table_args__ = (
        sa.CheckConstraint(_in("event_type", EVENT_TYPES), name="event_type"),
        sa.CheckConstraint(_in("severity", EVENT_SEVERITIES), name="severity"),
    )


# --------------------------------------------------------------------------------------------
# Evaluation: backtests on a (symbol, date) grid and the forward scorecard of recommendations.
# --------------------------------------------------------------------------------------------

BACKTEST_ITEM_STATUSES: Final = ("enqueued", "refused")


class Backtest(Base):
    """One named backtest: its grid (symbols × dates every ``every`` from ``start_date`` to
    ``end_date``) and analysis type. The name is the key, so re-running the same name resumes."""

    __tablename__ = "backtests"

    name: Mapped[str] = mapped_column(sa.String(), primary_key=True)
    symbols: Mapped[list[str]] = mapped_column(JSONType)
    start_date: Mapped[date] = mapped_column(sa.Date())
    end_date: Mapped[date] = mapped_column(sa.Date())
    every: Mapped[str] = mapped_column(sa.String())
    analysis_type: Mapped[str] = mapped_column(sa.String())
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), server_default=sa.func.now())


class BacktestItem(Base):
    """One (symbol, trading day) of a backtest: the analysis it enqueued (``attempt`` counts
    re-enqueues of a cancelled one, each with its own deterministic analysis id), or why it was
    refused before enqueueing. ``requested_date`` is the grid date; ``as_of`` the trading day of
    the data it maps to (the same, or the previous trading day)."""

    __tablename__ = "backtest_items"

    backtest_name: Mapped[str] = mapped_column(
        sa.String(), sa.ForeignKey("backtests.name", ondelete="CASCADE"), primary_key=True
    )
    symbol: Mapped[str] = mapped_column(sa.String(), primary_key=True)
    as_of: Mapped[date] = mapped_column(sa.Date(), primary_key=True)
    requested_date: Mapped[date] = mapped_column(sa.Date())
    status: Mapped[str] = mapped_column(sa.String())
    attempt: Mapped[int] = mapped_column(sa.Integer(), server_default="0")
    analysis_id: Mapped[str | None] = mapped_column(sa.String(), index=True)
    error: Mapped[str | None] = mapped_column(sa.Text())

    __table_args__ = (sa.CheckConstraint(_in("status", BACKTEST_ITEM_STATUSES), name="status"),)


class RecommendationScore(Base):
    """The forward outcome of one finished recommendation at one horizon (trading days): the
    symbol's return from the ``as_of`` close to the close ``horizon`` bars later (``end_date``),
    the benchmark's over the same dates, and the excess (fractions); ``entry`` and
    ``benchmark_spec`` record the basis it was computed on (stale when either differs from the
    scorecard's). Keyed by ``(analysis_id,
    horizon)``, so scoring twice writes nothing new. ``benchmark`` names what was used (``SPY``
    or the equal-weighted universe); ``analyst``/``model``/``prompt_version`` are the breakdown
    keys as recorded in the report (``prompt_version`` NULL where not recorded)."""

    __tablename__ = "recommendation_scores"

    analysis_id: Mapped[str] = mapped_column(
        sa.String(), sa.ForeignKey("analyses.id", ondelete="CASCADE"), primary_key=True
    )
    horizon: Mapped[int] = mapped_column(sa.Integer(), primary_key=True)
    symbol: Mapped[str] = mapped_column(sa.String())
    as_of: Mapped[date] = mapped_column(sa.Date())
    end_date: Mapped[date] = mapped_column(sa.Date())
    signal: Mapped[str] = mapped_column(sa.String())
    confidence: Mapped[float] = mapped_column(sa.Float())
    score: Mapped[float | None] = mapped_column(sa.Float())
    forward_return: Mapped[float] = mapped_column(sa.Float())
    benchmark_return: Mapped[float] = mapped_column(sa.Float())
    excess_return: Mapped[float] = mapped_column(sa.Float())
    #: The calibrated p(outperform) the report stated at this horizon (migration 0018); NULL for
    #: reports written before calibration.
    p_outperform: Mapped[float | None] = mapped_column(sa.Float())
    benchmark: Mapped[str] = mapped_column(sa.String())
    analyst: Mapped[str] = mapped_column(sa.String())
    model: Mapped[str] = mapped_column(sa.String())
    prompt_version: Mapped[str | None] = mapped_column(sa.String())
    scored_at: Mapped[datetime] = mapped_column(UTCDateTime())
    #: ``open`` (the next session's open after ``as_of``) or ``close`` (the ``as_of`` close).
    entry: Mapped[str] = mapped_column(sa.String(), server_default="close")
    #: The configured benchmark the row was computed against (``apps.scorecard.benchmark_spec``).
    benchmark_spec: Mapped[str] = mapped_column(sa.String(), server_default="")

    __table_args__ = (sa.CheckConstraint("horizon > 0", name="horizon"),)
