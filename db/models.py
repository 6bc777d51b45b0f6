"""The database's tables as SQLAlchemy Core ``Table`` objects in :data:`METADATA`: ``analyses``,
``tool_calls``, ``analysis_iterations`` and the rest, each named after its SQL table
(``ANALYSES`` is ``analyses``).

The same schema runs on PostgreSQL (service mode) and SQLite (embedded mode), so types are
portable: ``JSON`` that becomes ``JSONB`` on Postgres, ``UTCDateTime`` (timezone-aware, stored
UTC), text ids (UUID strings or deterministic keys). The migration ``0001_initial`` creates
exactly these tables; ``tests/db`` checks that autogenerate finds no difference on both backends.

Core tables, not ORM classes: the repositories only ever used each class's ``__table__``, and
the ORM's import and mapping cost every process ~0.2 s of CPU, ``finagent list`` included
(docs/benchmarks.md, "CLI latency").
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Final

import sqlalchemy as sa
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.engine import Dialect

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


#: Every table, with the naming convention (what Alembic compares the migrations against).
METADATA: Final = sa.MetaData(naming_convention=NAMING_CONVENTION)


#: One analysis run of the pipeline, updated by every stage.
#:
#: ``state`` is the whole ``FinancialAgentState.to_message()`` dump of the last accepted
#: stage; ``report``/``report_json``/``signal``/``confidence`` are copies of the results for
#: queries without parsing ``state``. ``iteration`` and ``status`` implement the no-regress
#: rule of the row's ledger (``db.ledger``).
ANALYSES: Final = sa.Table(
    "analyses",
    METADATA,
    sa.Column("id", sa.String(), primary_key=True),
    sa.Column("symbol", sa.String(), nullable=False),
    sa.Column("as_of", sa.Date(), nullable=False),
    sa.Column("status", sa.String(), nullable=False),
    sa.Column("iteration", sa.Integer(), nullable=False),
    sa.Column("max_iterations", sa.Integer(), nullable=False),
    sa.Column("user_query", sa.Text(), nullable=False),
    sa.Column("state", JSONText, nullable=False),
    sa.Column("report", sa.Text()),
    sa.Column("report_json", JSONType),
    sa.Column("signal", sa.String()),
    sa.Column("confidence", sa.Float()),
    sa.Column("error", sa.Text()),
    sa.Column("created_at", UTCDateTime(), server_default=sa.func.now(), nullable=False),
    sa.Column("updated_at", UTCDateTime(), server_default=sa.func.now(), nullable=False),
    sa.Column("finished_at", UTCDateTime()),
    # Durability (migration 0006): the row, not the broker, says where the analysis is.
    #: last completed stage of the current pass (NULL before the first): the stored ``state``
    #: is the state after it, so the next step can be re-driven from the row
    sa.Column("checkpoint", sa.String()),
    #: attempts of the current step (a claim by a worker counts one; reset when a stage completes)
    sa.Column("attempt", sa.Integer(), server_default="0", nullable=False),
    #: Celery task id holding the current step's lease (NULL while the step waits in a queue)
    sa.Column("lease_owner", sa.String()),
    #: when the analysis counts as stalled without new progress (a claim, a completed stage)
    sa.Column("lease_expires_at", UTCDateTime()),
    #: re-drives by the recovery sweep so far (capped by ``max_recoveries``)
    sa.Column("recoveries", sa.Integer(), server_default="0", nullable=False),
    # Ownership (migration 0007): the tenant that owns the analysis (404 for every other
    # tenant's key) and the API key that enqueued it (``NULL`` from the CLI, the Python API and
    # beat), which counts the key's analyses in flight.
    sa.Column("tenant", sa.String(), server_default=DEFAULT_TENANT, nullable=False),
    sa.Column("api_key_id", sa.String()),
    #: Archived (migration 0020, ``db.archive``): when the finished analysis's record (state,
    #: reports, tool calls) moved into one compressed ``analysis_archives`` row; ``NULL`` while
    #: the record is in ``state``/``report``/``report_json`` and ``tool_calls`` as written.
    sa.Column("archived_at", UTCDateTime()),
    sa.Index(None, "symbol", "created_at"),
    sa.Index(None, "status"),
    sa.Index(None, "lease_expires_at"),
    sa.Index(None, "tenant", "created_at"),
    sa.Index(None, "api_key_id", "status"),
)


#: One ATTEMPT of one tool call: the structured log line, plus the result
#: (docs/design.md, "Structured logs").
#:
#: ``id`` is deterministic (``db.attempt_rows.tool_call_row_id(tool_call_id, attempt)`` by default), so a
#: redelivered task inserts nothing new. ``tool_call_id`` is the logical call that reports
#: cite in ``source_refs`` (docs/design.md, "Source references"); its attempts share it.
#: ``result`` is the full envelope
#: ``data`` (bars can be ~50 KB); ``analysis_id`` is NULL for direct tool use.
TOOL_CALLS: Final = sa.Table(
    "tool_calls",
    METADATA,
    sa.Column("id", sa.String(), primary_key=True),
    sa.Column("tool_call_id", sa.String(), index=True, nullable=False),
    sa.Column("analysis_id", sa.String(), sa.ForeignKey("analyses.id", ondelete="CASCADE"), index=True),
    sa.Column("stage", sa.String(), nullable=False),
    sa.Column("iteration", sa.Integer(), nullable=False),
    sa.Column("celery_task_id", sa.String()),
    sa.Column("timestamp", UTCDateTime(), nullable=False),
    sa.Column("level", sa.String(), nullable=False),
    sa.Column("tool", sa.String(), nullable=False),
    sa.Column("symbol", sa.String()),
    sa.Column("status", sa.String(), nullable=False),
    sa.Column("attempt", sa.Integer(), nullable=False),
    sa.Column("latency_ms", sa.Float(), nullable=False),
    sa.Column("result_summary", sa.Text(), nullable=False),
    sa.Column("error", sa.Text()),
    sa.Column("error_code", sa.String()),
    sa.Column("retry_hint", sa.Text()),
    sa.Column("arguments", JSONType, nullable=False),
    sa.Column("result", JSONText),
    #: The tool's own extra citations (``ToolOutput.source_refs``; migration 0012): with
    #: ``result`` they rebuild the envelope exactly, which ``finagent replay`` needs.
    sa.Column("source_refs", JSONType),
    #: The ``content_blobs`` hashes ``result`` references (migration 0019, ``db.blobs``): then
    #: ``result`` is a skeleton whose large lists are ``{"$concat": [hash, ...]}`` markers, which
    #: the repository resolves on every read. NULL: ``result`` is the value itself (rows written
    #: before 0019, and results without a large list).
    sa.Column("result_refs", JSONType),
    sa.CheckConstraint(_in("status", TOOL_CALL_STATUSES), name="status"),
    sa.CheckConstraint(_in("level", LOG_LEVELS), name="level"),
    sa.CheckConstraint("attempt >= 1", name="attempt"),
)


#: One piece of tool results, stored once for every result that contains it (migration
#: 0019, ``db.blobs``): ``hash`` is the SHA-256 of ``body``'s JSON text, ``body`` a JSON list
#: (e.g. one month of daily bars), ``bytes`` the text's length. Rows are only inserted (``ON
#: CONFLICT (hash) DO NOTHING``) and deleted by retention once no ``tool_calls`` row references
#: them (``db.retention``).
CONTENT_BLOBS: Final = sa.Table(
    "content_blobs",
    METADATA,
    sa.Column("hash", sa.String(), primary_key=True),
    sa.Column("body", JSONText),
    sa.Column("bytes", sa.Integer(), nullable=False),
    sa.Column("created_at", UTCDateTime(), server_default=sa.func.now(), nullable=False),
    #: Packed by the archive (migration 0020, ``db.archive``): zstd of ``body``'s JSON text,
    #: ``body`` then NULL. Exactly one of the two is set.
    sa.Column("packed", sa.LargeBinary()),
    #: The latest ``created_at`` of an archived analysis that uses this piece (``NULL``: none):
    #: retention deletes the piece only when every such analysis goes (``db.retention``).
    sa.Column("archived_until", UTCDateTime()),
)


#: A zstd dictionary (migration 0020, ``db.archive``) trained on archived analysis records:
#: small JSON documents that repeat the same keys and phrases compress 3-4x better with one.
#: ``id`` is the first 16 hex digits of the SHA-256 of ``body`` (the dictionary bytes);
#: ``samples`` how many records trained it. Rows are only inserted; an archive names the one
#: it was compressed with, so a dictionary is never deleted while an archive uses it.
COMPRESSION_DICTIONARIES: Final = sa.Table(
    "compression_dictionaries",
    METADATA,
    sa.Column("id", sa.String(), primary_key=True),
    sa.Column("body", sa.LargeBinary(), nullable=False),
    sa.Column("samples", sa.Integer(), nullable=False),
    sa.Column("created_at", UTCDateTime(), server_default=sa.func.now(), nullable=False),
)


#: The record of one finished analysis in one compressed row (migration 0020,
#: ``db.archive``): ``body`` is a zstd frame (with ``dictionary_id``'s dictionary, or none) of
#: the JSON document holding the analysis's stored ``state``, ``report``, ``report_json`` and
#: every ``tool_calls`` row, exactly as they were stored (their results still reference
#: ``content_blobs``, whose ``archived_until`` keeps them for retention); ``tool_calls`` how
#: many rows it holds; ``raw_bytes`` the document's size before compression.
ANALYSIS_ARCHIVES: Final = sa.Table(
    "analysis_archives",
    METADATA,
    sa.Column("analysis_id", sa.String(), sa.ForeignKey("analyses.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("dictionary_id", sa.String(), sa.ForeignKey("compression_dictionaries.id")),
    sa.Column("body", sa.LargeBinary(), nullable=False),
    sa.Column("tool_calls", sa.Integer(), nullable=False),
    sa.Column("raw_bytes", sa.Integer(), nullable=False),
    sa.Column("archived_at", UTCDateTime(), server_default=sa.func.now(), nullable=False),
)


#: Claim of one ``(analysis_id, iteration)``: the guard that lets a ``should_continue``
#: re-enqueue happen at most once per iteration (the primary key is the lock).
ANALYSIS_ITERATIONS: Final = sa.Table(
    "analysis_iterations",
    METADATA,
    sa.Column("analysis_id", sa.String(), sa.ForeignKey("analyses.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("iteration", sa.Integer(), primary_key=True),
    sa.Column("created_at", UTCDateTime(), server_default=sa.func.now(), nullable=False),
    sa.Column("celery_task_id", sa.String()),
)


#: One ATTEMPT of one LLM call: model, provider, tokens, cost, latency, status.
#:
#: ``id`` is deterministic like ``ToolCall.id``; ``llm_call_id`` groups the attempts of one
#: logical call. ``cost_usd`` is NULL when the price is unknown (never guessed); ``request`` and
#: ``response`` hold redacted, size-bounded JSON for debugging.
LLM_CALLS: Final = sa.Table(
    "llm_calls",
    METADATA,
    sa.Column("id", sa.String(), primary_key=True),
    sa.Column("llm_call_id", sa.String(), index=True, nullable=False),
    sa.Column("analysis_id", sa.String(), sa.ForeignKey("analyses.id", ondelete="CASCADE"), index=True),
    sa.Column("stage", sa.String(), nullable=False),
    sa.Column("agent", sa.String(), nullable=False),
    sa.Column("iteration", sa.Integer(), nullable=False),
    sa.Column("celery_task_id", sa.String()),
    sa.Column("timestamp", UTCDateTime(), nullable=False),
    sa.Column("level", sa.String(), nullable=False),
    sa.Column("model", sa.String(), nullable=False),
    sa.Column("provider", sa.String()),
    sa.Column("status", sa.String(), nullable=False),
    sa.Column("attempt", sa.Integer(), nullable=False),
    sa.Column("prompt_tokens", sa.Integer()),
    sa.Column("completion_tokens", sa.Integer()),
    sa.Column("cost_usd", sa.Float()),
    sa.Column("latency_ms", sa.Float(), nullable=False),
    sa.Column("finish_reason", sa.String()),
    sa.Column("tool_calls_requested", sa.Integer(), server_default="0", nullable=False),
    sa.Column("error", sa.Text()),
    sa.Column("request", JSONType),
    sa.Column("response", JSONType),
    #: Migration 0012: sha256 of the canonical request (model, messages, tools, params;
    #: ``agents.llm.cache.request_key``), the full successful answer (``content``, ``tool_calls``
    #: with their ids, tokens, ``finish_reason``: what ``finagent replay`` serves), and whether
    #: the answer came from the response cache (then tokens and cost are 0: nothing was spent).
    sa.Column("request_hash", sa.String()),
    sa.Column("completion", JSONType),
    sa.Column("cached", sa.Boolean(), server_default=sa.false(), nullable=False),
    sa.CheckConstraint(_in("status", TOOL_CALL_STATUSES), name="status"),
    sa.CheckConstraint(_in("level", LOG_LEVELS), name="level"),
    sa.CheckConstraint("attempt >= 1", name="attempt"),
)


#: One cached LLM answer (opt-in ``FINAGENT_LLM_CACHE``; ``agents.llm.cache``).
#:
#: ``key`` is the sha256 of the canonical request (model, messages, tools, params), so the
#: same request gets the same answer without a provider call; ``completion`` is the answer as
#: ``llm_calls.completion`` stores it; ``hits`` counts the times it was served.
LLM_CACHE: Final = sa.Table(
    "llm_cache",
    METADATA,
    sa.Column("key", sa.String(), primary_key=True),
    sa.Column("model", sa.String(), nullable=False),
    sa.Column("completion", JSONType, nullable=False),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.Column("hits", sa.Integer(), server_default="0", nullable=False),
)


# --------------------------------------------------------------------------------------------
# Operations (HTTP gateway): API keys, idempotency keys, watchlists and their nightly runs.
# --------------------------------------------------------------------------------------------

WATCHLIST_RUN_STATUSES: Final = ("running", "done")
WATCHLIST_ITEM_STATUSES: Final = ("enqueued", "refused")


#: One HTTP API key. Only ``sha256(token)`` is stored (``key_hash``); ``key_id`` is the public
#: part of the token (``fa_<key_id>_<secret>``) used to find the row before the constant-time
#: comparison. ``revoked_at`` set → the key is refused with 403.
API_KEYS: Final = sa.Table(
    "api_keys",
    METADATA,
    sa.Column("key_id", sa.String(), primary_key=True),
    sa.Column("name", sa.String(), unique=True, nullable=False),
    sa.Column("key_hash", sa.String(), nullable=False),
    sa.Column("created_at", UTCDateTime(), server_default=sa.func.now(), nullable=False),
    sa.Column("revoked_at", UTCDateTime()),
    #: the tenant whose objects the key sees (migration 0007; older keys: the default tenant)
    sa.Column("tenant", sa.String(), server_default=DEFAULT_TENANT, nullable=False),
    #: comma-separated scopes (``core.tenancy.SCOPES``); older keys get the defaults
    sa.Column("scopes", sa.String(), server_default=",".join(DEFAULT_SCOPES), nullable=False),
)


#: One signed-in web-console session (migration 0021). The cookie carries a random session
#: id; the row is found by its SHA-256 (``id_hash``), so reading the table opens no session.
#: ``scopes`` are the key's at sign-in: a session whose key's scopes changed since, or whose key
#: was revoked, is over. ``expires_at`` is the absolute end, ``last_seen_at`` the idle clock.
CONSOLE_SESSIONS: Final = sa.Table(
    "console_sessions",
    METADATA,
    sa.Column("id_hash", sa.String(), primary_key=True),
    sa.Column("key_id", sa.String(), index=True, nullable=False),
    sa.Column("scopes", sa.String(), nullable=False),
    sa.Column("csrf", sa.String(), nullable=False),
    sa.Column("created_at", UTCDateTime(), nullable=False),
    sa.Column("last_seen_at", UTCDateTime(), nullable=False),
    sa.Column("expires_at", UTCDateTime(), index=True, nullable=False),
)


#: ``Idempotency-Key`` header → the analysis it created, per API key (primary key is the
#: lock: the first request inserts, a repeat finds the row). ``request_hash`` is sha256 of the
#: canonical request body, so the same key with another body is a conflict, not a silent
#: replay. ``analysis_id`` has no foreign key: the claim is written before the analysis row.
IDEMPOTENCY_KEYS: Final = sa.Table(
    "idempotency_keys",
    METADATA,
    sa.Column("api_key_id", sa.String(), primary_key=True),
    sa.Column("key", sa.String(), primary_key=True),
    sa.Column("request_hash", sa.String(), nullable=False),
    sa.Column("analysis_id", sa.String(), nullable=False),
    sa.Column("created_at", UTCDateTime(), server_default=sa.func.now(), nullable=False),
)


#: A named list of tickers analysed on a cron ``schedule`` (5 fields, in ``timezone``).
WATCHLISTS: Final = sa.Table(
    "watchlists",
    METADATA,
    sa.Column("id", sa.String(), primary_key=True),
    #: unique per tenant (``uq_watchlists_tenant_name``, migration 0007): two tenants may both
    #: have a "megacaps", and a taken name in another tenant is not revealed by a 409
    sa.Column("name", sa.String(), nullable=False),
    sa.Column("tickers", JSONType, nullable=False),
    sa.Column("schedule", sa.String(), nullable=False),
    sa.Column("timezone", sa.String(), nullable=False),
    sa.Column("options", JSONType, nullable=False),
    sa.Column("enabled", sa.Boolean(), server_default=sa.true(), nullable=False),
    sa.Column("created_at", UTCDateTime(), server_default=sa.func.now(), nullable=False),
    sa.Column("updated_at", UTCDateTime(), server_default=sa.func.now(), nullable=False),
    sa.Column("tenant", sa.String(), server_default=DEFAULT_TENANT, nullable=False),
    sa.UniqueConstraint("tenant", "name"),
)


#: One run of a watchlist for one ``run_date``; ``(watchlist_id, run_date)`` is unique, so a
#: second beat tick, a restart or a manual re-run of the same date creates nothing new. The
#: digest (Markdown, HTML, JSON) is written once when every analysis of the run finished.
WATCHLIST_RUNS: Final = sa.Table(
    "watchlist_runs",
    METADATA,
    sa.Column("id", sa.String(), primary_key=True),
    sa.Column(
        "watchlist_id", sa.String(), sa.ForeignKey("watchlists.id", ondelete="CASCADE"), nullable=False
    ),
    sa.Column("run_date", sa.Date(), nullable=False),
    sa.Column("status", sa.String(), nullable=False),
    sa.Column("trigger", sa.String(), nullable=False),
    sa.Column("created_at", UTCDateTime(), server_default=sa.func.now(), nullable=False),
    sa.Column("finished_at", UTCDateTime()),
    sa.Column("digest_markdown", sa.Text()),
    sa.Column("digest_html", sa.Text()),
    sa.Column("digest_json", JSONType),
    sa.UniqueConstraint("watchlist_id", "run_date"),
    sa.CheckConstraint(_in("status", WATCHLIST_RUN_STATUSES), name="status"),
)


#: One ticker of a run: the analysis it enqueued, or why it was refused before enqueueing.
WATCHLIST_RUN_ITEMS: Final = sa.Table(
    "watchlist_run_items",
    METADATA,
    sa.Column(
        "run_id", sa.String(), sa.ForeignKey("watchlist_runs.id", ondelete="CASCADE"), primary_key=True
    ),
    sa.Column("symbol", sa.String(), primary_key=True),
    sa.Column("status", sa.String(), nullable=False),
    sa.Column("analysis_id", sa.String()),
    sa.Column("error", sa.Text()),
    sa.CheckConstraint(_in("status", WATCHLIST_ITEM_STATUSES), name="status"),
)


AUDIT_OUTCOMES: Final = ("ok", "refused", "error")


#: One mutating HTTP request (``POST``/``PUT``/``PATCH``/``DELETE``), whatever its outcome.
#:
#: ``who`` is the key's public id and name (never the key or any secret; ``NULL`` when the
#: request carried no valid key), ``what`` the method and route template
#: (``DELETE /watchlists/{name}``), ``object_id`` the object it addressed or created,
#: ``status_code`` the HTTP answer and ``outcome`` its class (``ok`` < 400, ``refused`` 4xx,
#: ``error`` 5xx); ``request_id`` is the ``X-Request-ID`` echoed to the client. Requests without
#: a valid key are counted in one row per client address, status and window instead
#: (``apps.api.audit``).
AUDIT_LOG: Final = sa.Table(
    "audit_log",
    METADATA,
    sa.Column("id", sa.String(), primary_key=True),
    sa.Column("at", UTCDateTime(), nullable=False),
    sa.Column("request_id", sa.String(), nullable=False),
    sa.Column("tenant", sa.String()),
    sa.Column("api_key_id", sa.String()),
    sa.Column("key_name", sa.String()),
    sa.Column("method", sa.String(), nullable=False),
    sa.Column("what", sa.String(), nullable=False),
    sa.Column("object_id", sa.String()),
    sa.Column("status_code", sa.Integer(), nullable=False),
    sa.Column("outcome", sa.String(), nullable=False),
    # Migration 0015: the client's address (IPv6: its /64), and the aggregates of requests
    # without a valid key: one row per address, status and window (``aggregate_key``) counting
    # ``requests`` from ``at`` (the first) to ``last_at`` (the latest); NULL key = one request.
    sa.Column("client_address", sa.String()),
    sa.Column("requests", sa.Integer(), server_default="1", nullable=False),
    sa.Column("last_at", UTCDateTime()),
    sa.Column("aggregate_key", sa.String(), unique=True),
    sa.Index(None, "tenant", "at"),
    sa.CheckConstraint(_in("outcome", AUDIT_OUTCOMES), name="outcome"),
)


#: The latest sign of life of one long-running service process (migration 0015).
#:
#: The recovery sweeper (``apps.sweeper``, ``kind`` ``sweeper``) writes its row after
#: every sweep; ``GET /health`` reads the newest row of the kind and fails when it is older
#: than the sweep interval allows, whatever the workers' health. ``name`` is
#: ``<kind>@<host>:<pid>`` (one row per process), ``started_at`` when the process started,
#: ``beat_at`` its last sweep (UTC), ``detail`` what that sweep did (counts, the last error,
#: when the broker was last found to have lost its messages).
SERVICE_HEARTBEATS: Final = sa.Table(
    "service_heartbeats",
    METADATA,
    sa.Column("name", sa.String(), primary_key=True),
    sa.Column("kind", sa.String(), nullable=False),
    sa.Column("host", sa.String(), nullable=False),
    sa.Column("pid", sa.Integer(), nullable=False),
    sa.Column("started_at", UTCDateTime(), nullable=False),
    sa.Column("beat_at", UTCDateTime(), nullable=False),
    sa.Column("detail", JSONType, nullable=False),
    sa.Index(None, "kind", "beat_at"),
)


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


#: One paper-broker account per ``user_id``; ``id`` is derived from the user id
#: (``db.trading_repo.account_id_for``), so two first trades cannot create two accounts.
ACCOUNTS: Final = sa.Table(
    "accounts",
    METADATA,
    sa.Column("id", sa.String(), primary_key=True),
    sa.Column("user_id", sa.String(), unique=True, nullable=False),
    sa.Column("cash", sa.Float(), nullable=False),
    sa.Column("currency", sa.String(), server_default="USD", nullable=False),
    sa.Column("created_at", UTCDateTime(), server_default=sa.func.now(), nullable=False),
)


#: Shares held by an account in one symbol (no row once the quantity is back to zero).
#: ``avg_price`` is the quantity-weighted average fill price of the buys, USD, fees excluded.
POSITIONS: Final = sa.Table(
    "positions",
    METADATA,
    sa.Column("account_id", sa.String(), sa.ForeignKey("accounts.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("symbol", sa.String(), primary_key=True),
    sa.Column("quantity", sa.Integer(), nullable=False),
    sa.Column("avg_price", sa.Float(), nullable=False),
    sa.Column("updated_at", UTCDateTime(), server_default=sa.func.now(), nullable=False),
    sa.CheckConstraint("quantity > 0", name="quantity"),
)


#: One order sent to the paper broker, whatever its outcome (rejections are kept for audit).
#:
#: ``(account_id, client_order_id)`` is unique: a repeat of a client order id finds the
#: original row through ``INSERT … ON CONFLICT DO NOTHING`` and is not filled twice.
#: ``seq`` numbers an account's orders 1, 2, 3… in the order the broker processed them (orders
#: of one call share ``created_at``, the session's order time), so history replays exactly.
#: ``quantity`` is what was asked, ``filled_quantity`` what was filled; ``reason`` says why an
#: order was rejected or only partly filled; ``as_of`` is the session the order traded against.
ORDERS: Final = sa.Table(
    "orders",
    METADATA,
    sa.Column("id", sa.String(), primary_key=True),
    sa.Column(
        "account_id",
        sa.String(),
        sa.ForeignKey("accounts.id", ondelete="CASCADE"),
        index=True,
        nullable=False,
    ),
    sa.Column("seq", sa.Integer(), nullable=False),
    sa.Column("client_order_id", sa.String()),
    sa.Column("symbol", sa.String(), nullable=False),
    sa.Column("action", sa.String(), nullable=False),
    sa.Column("quantity", sa.Integer(), nullable=False),
    sa.Column("filled_quantity", sa.Integer(), nullable=False),
    sa.Column("order_type", sa.String(), nullable=False),
    sa.Column("limit_price", sa.Float()),
    sa.Column("stop_price", sa.Float()),
    sa.Column("status", sa.String(), nullable=False),
    sa.Column("reason", sa.Text()),
    sa.Column("created_at", UTCDateTime(), server_default=sa.func.now(), nullable=False),
    sa.Column("as_of", sa.Date(), nullable=False),
    sa.UniqueConstraint("account_id", "client_order_id"),
    sa.UniqueConstraint("account_id", "seq"),
    sa.CheckConstraint(_in("action", ORDER_ACTIONS), name="action"),
    sa.CheckConstraint(_in("order_type", ORDER_TYPES), name="order_type"),
    sa.CheckConstraint(_in("status", ORDER_STATUSES), name="status"),
    sa.CheckConstraint("quantity > 0", name="quantity"),
)


#: One execution of an order: ``quantity`` shares at ``price`` USD, ``fees`` USD.
FILLS: Final = sa.Table(
    "fills",
    METADATA,
    sa.Column("id", sa.String(), primary_key=True),
    sa.Column(
        "order_id", sa.String(), sa.ForeignKey("orders.id", ondelete="CASCADE"), index=True, nullable=False
    ),
    sa.Column("quantity", sa.Integer(), nullable=False),
    sa.Column("price", sa.Float(), nullable=False),
    sa.Column("fees", sa.Float(), nullable=False),
    sa.Column("timestamp", UTCDateTime(), nullable=False),
    sa.CheckConstraint("quantity > 0", name="quantity"),
)


#: One ``log_event`` record (docs/design.md, "Event log"). ``analysis_id`` has no foreign key:
#: events are an
#: audit trail that outlives the analyses they mention.
EVENTS: Final = sa.Table(
    "events",
    METADATA,
    sa.Column("id", sa.String(), primary_key=True),
    sa.Column("event_type", sa.String(), nullable=False),
    sa.Column("severity", sa.String(), nullable=False),
    sa.Column("data", JSONType, nullable=False),
    sa.Column("analysis_id", sa.String(), index=True),
    sa.Column("created_at", UTCDateTime(), server_default=sa.func.now(), nullable=False),
    sa.CheckConstraint(_in("event_type", EVENT_TYPES), name="event_type"),
    sa.CheckConstraint(_in("severity", EVENT_SEVERITIES), name="severity"),
)


# --------------------------------------------------------------------------------------------
# Evaluation: backtests on a (symbol, date) grid and the forward scorecard of recommendations.
# --------------------------------------------------------------------------------------------

BACKTEST_ITEM_STATUSES: Final = ("enqueued", "refused")


#: One named backtest: its grid (symbols × dates every ``every`` from ``start_date`` to
#: ``end_date``) and analysis type. The name is the key, so re-running the same name resumes.
BACKTESTS: Final = sa.Table(
    "backtests",
    METADATA,
    sa.Column("name", sa.String(), primary_key=True),
    sa.Column("symbols", JSONType, nullable=False),
    sa.Column("start_date", sa.Date(), nullable=False),
    sa.Column("end_date", sa.Date(), nullable=False),
    sa.Column("every", sa.String(), nullable=False),
    sa.Column("analysis_type", sa.String(), nullable=False),
    sa.Column("created_at", UTCDateTime(), server_default=sa.func.now(), nullable=False),
)


#: One (symbol, trading day) of a backtest: the analysis it enqueued (``attempt`` counts
#: re-enqueues of a cancelled one, each with its own deterministic analysis id), or why it was
#: refused before enqueueing. ``requested_date`` is the grid date; ``as_of`` the trading day of
#: the data it maps to (the same, or the previous trading day).
BACKTEST_ITEMS: Final = sa.Table(
    "backtest_items",
    METADATA,
    sa.Column(
        "backtest_name", sa.String(), sa.ForeignKey("backtests.name", ondelete="CASCADE"), primary_key=True
    ),
    sa.Column("symbol", sa.String(), primary_key=True),
    sa.Column("as_of", sa.Date(), primary_key=True),
    sa.Column("requested_date", sa.Date(), nullable=False),
    sa.Column("status", sa.String(), nullable=False),
    sa.Column("attempt", sa.Integer(), server_default="0", nullable=False),
    sa.Column("analysis_id", sa.String(), index=True),
    sa.Column("error", sa.Text()),
    sa.CheckConstraint(_in("status", BACKTEST_ITEM_STATUSES), name="status"),
)


#: The forward outcome of one finished recommendation at one horizon (trading days): the
#: symbol's return from the ``as_of`` close to the close ``horizon`` bars later (``end_date``),
#: the benchmark's over the same dates, and the excess (fractions); ``entry`` and
#: ``benchmark_spec`` record the basis it was computed on (stale when either differs from the
#: scorecard's). Keyed by ``(analysis_id,
#: horizon)``, so scoring twice writes nothing new. ``benchmark`` names what was used (``SPY``
#: or the equal-weighted universe); ``analyst``/``model``/``prompt_version`` are the breakdown
#: keys as recorded in the report (``prompt_version`` NULL where not recorded).
RECOMMENDATION_SCORES: Final = sa.Table(
    "recommendation_scores",
    METADATA,
    sa.Column("analysis_id", sa.String(), sa.ForeignKey("analyses.id", ondelete="CASCADE"), primary_key=True),
    sa.Column("horizon", sa.Integer(), primary_key=True),
    sa.Column("symbol", sa.String(), nullable=False),
    sa.Column("as_of", sa.Date(), nullable=False),
    sa.Column("end_date", sa.Date(), nullable=False),
    sa.Column("signal", sa.String(), nullable=False),
    sa.Column("confidence", sa.Float(), nullable=False),
    sa.Column("score", sa.Float()),
    sa.Column("forward_return", sa.Float(), nullable=False),
    sa.Column("benchmark_return", sa.Float(), nullable=False),
    sa.Column("excess_return", sa.Float(), nullable=False),
    #: The calibrated p(outperform) the report stated at this horizon (migration 0018); NULL for
    #: reports written before calibration.
    sa.Column("p_outperform", sa.Float()),
    sa.Column("benchmark", sa.String(), nullable=False),
    sa.Column("analyst", sa.String(), nullable=False),
    sa.Column("model", sa.String(), nullable=False),
    sa.Column("prompt_version", sa.String()),
    sa.Column("scored_at", UTCDateTime(), nullable=False),
    #: ``open`` (the next session's open after ``as_of``) or ``close`` (the ``as_of`` close).
    sa.Column("entry", sa.String(), server_default="close", nullable=False),
    #: The configured benchmark the row was computed against (``apps.scorecard.benchmark_spec``).
    sa.Column("benchmark_spec", sa.String(), server_default="", nullable=False),
    sa.CheckConstraint("horizon > 0", name="horizon"),
)
