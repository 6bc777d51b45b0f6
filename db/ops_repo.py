"""Data access for the operations tables (HTTP gateway, nightly runs): API keys, idempotency keys,
watchlists, watchlist runs and their items. Keyword-only functions; rows come back as plain ``dict``s.

Exactly-once effects come from keys (docs/design.md, "Durability and idempotency"), each insert
naming the constraints it
relies on (``db._sql.insert_ignore`` checks them against the schema):

* an ``Idempotency-Key`` claim: ``pk_idempotency_keys`` ``(api_key_id, key)``, the table's only
  unique constraint;
* a watchlist run: ``pk_watchlist_runs`` (``id = "<watchlist_id>:<run_date>"``) AND
  ``uq_watchlist_runs_watchlist_id_run_date``, both arbiters (:data:`RUN_CLAIM_CONSTRAINTS`), so
  exactly one of any number of concurrent beat ticks, restarts or manual re-runs of a date
  creates the run and none raises;
* a run item: ``pk_watchlist_run_items`` ``(run_id, symbol)``, the only one.

API keys and watchlists are not claims: a second insert of a taken name is refused
(``uq_api_keys_name``, ``uq_watchlists_tenant_name`` → :class:`DuplicateNameError`). Secrets
never reach a row: API keys are stored as ``sha256`` hex digests only, and the audit log names
a key by its public id and name.

Watchlists belong to a tenant (``core.tenancy``): every function that finds one by
name takes the ``tenant`` whose name it is (default: the default tenant, the CLI's).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import date, datetime, timedelta
from typing import Any, Final

import sqlalchemy as sa
from sqlalchemy import Engine
from sqlalchemy.exc import IntegrityError

from core.masking import mask_text
from core.tenancy import DEFAULT_SCOPES, DEFAULT_TENANT
from db._sql import dialect_insert, fetch_all, fetch_one, insert_if_absent, insert_ignore, utc_now
from db.engine import begin_write, reading
from db.models import (
    ANALYSES,
    API_KEYS,
    AUDIT_LOG,
    AUDIT_OUTCOMES,
    IDEMPOTENCY_KEYS,
    TERMINAL_STATUSES,
    WATCHLIST_RUN_ITEMS,
    WATCHLIST_RUNS,
    WATCHLISTS,
)

RUNS: Final = WATCHLIST_RUNS
ITEMS: Final = WATCHLIST_RUN_ITEMS
AUDIT: Final = AUDIT_LOG
#: Longest page of audit rows one call returns.
MAX_AUDIT_LIMIT: Final = 1000

#: The unique constraints a run claim relies on (both are functions of ``(watchlist_id, run_date)``,
#: so a conflict on either means "the run exists"; why both must be arbiters: ``db._sql``).
RUN_CLAIM_CONSTRAINTS: Final = ("pk_watchlist_runs", "uq_watchlist_runs_watchlist_id_run_date")

# A page of runs larger than this is a typo, not a use case (a year of nightly runs is ~260).
MAX_RUNS_LIMIT: Final = 500


class DuplicateNameError(ValueError):
    """An API key or watchlist with this name already exists."""


def run_id_for(*, watchlist_id: str, run_date: date) -> str:
    """The deterministic id of the run of ``watchlist_id`` on ``run_date``:
    ``"<watchlist_id>:<YYYY-MM-DD>"`` (the primary key is the idempotency key)."""
    return f"{watchlist_id}:{run_date.isoformat()}"


# --------------------------------------------------------------------------------------------
# API keys
# --------------------------------------------------------------------------------------------


def create_api_key(
    *,
    engine: Engine,
    key_id: str,
    name: str,
    key_hash: str,
    tenant: str = DEFAULT_TENANT,
    scopes: tuple[str, ...] = DEFAULT_SCOPES,
) -> None:
    """Insert an API key row (``key_hash`` = sha256 hex of the token, never the token) of
    ``tenant`` with ``scopes`` (validated by the caller, ``core.tenancy``).

    Not a claim: a plain ``INSERT``, so a taken ``name`` (``uq_api_keys_name``; or, astronomically
    unlikely, ``key_id``, ``pk_api_keys``) raises ``DuplicateNameError``, also under a race.
    """
    try:
        with begin_write(engine) as conn:
            conn.execute(
                sa.insert(API_KEYS).values(
                    key_id=key_id,
                    name=name,
                    key_hash=key_hash,
                    created_at=utc_now(),
                    tenant=tenant,
                    scopes=",".join(scopes),
                )
            )
    except IntegrityError as exc:
        raise DuplicateNameError(f"an API key named {name!r} already exists") from exc


def get_api_key(*, engine: Engine, key_id: str) -> dict[str, Any] | None:
    """The row of ``key_id`` (with ``key_hash``, for the caller's constant-time compare)."""
    return fetch_one(engine, sa.select(API_KEYS).where(API_KEYS.c.key_id == key_id))


def list_api_keys(*, engine: Engine) -> list[dict[str, Any]]:
    """Every key as ``{key_id, name, tenant, scopes, created_at, revoked_at}`` (no hash),
    oldest first."""
    cols = (
        API_KEYS.c.key_id,
        API_KEYS.c.name,
        API_KEYS.c.tenant,
        API_KEYS.c.scopes,
        API_KEYS.c.created_at,
        API_KEYS.c.revoked_at,
    )
    return fetch_all(engine, sa.select(*cols).order_by(API_KEYS.c.created_at, API_KEYS.c.name))


def revoke_api_key(*, engine: Engine, name: str) -> bool:
    """Set ``revoked_at`` on the key named ``name`` and end its console sessions
    (``db.console_sessions_repo``), in one transaction; ``False`` if unknown or already
    revoked."""
    from db import console_sessions_repo  # a sibling repository: no cycle at import

    with begin_write(engine) as conn:
        result = conn.execute(
            sa.update(API_KEYS)
            .where(API_KEYS.c.name == name, API_KEYS.c.revoked_at.is_(None))
            .values(revoked_at=utc_now())
            .returning(API_KEYS.c.key_id)
        ).first()
        if result is not None:
            console_sessions_repo.end_for_key(conn, result[0])
    return result is not None


def rotate_api_key(*, engine: Engine, name: str, key_id: str, key_hash: str) -> bool:
    """Give the active key named ``name`` (public id ``key_id``) the secret hashed ``key_hash``
    and end its console sessions, in one transaction: the old secret is refused from then on,
    the key's tenant, scopes and public id (what the audit log names) stay. ``False`` when no
    active key has that name and id."""
    from db import console_sessions_repo  # a sibling repository: no cycle at import

    with begin_write(engine) as conn:
        changed = conn.execute(
            sa.update(API_KEYS)
            .where(API_KEYS.c.name == name, API_KEYS.c.key_id == key_id, API_KEYS.c.revoked_at.is_(None))
            .values(key_hash=key_hash)
        ).rowcount
        if changed:
            console_sessions_repo.end_for_key(conn, key_id)
    return bool(changed)


def find_api_key(*, engine: Engine, name: str) -> dict[str, Any] | None:
    """The key named ``name`` as ``{key_id, name, tenant, scopes, created_at, revoked_at}`` (no
    hash), or ``None``."""
    columns = [c for c in API_KEYS.c if c.name != "key_hash"]
    return fetch_one(engine, sa.select(*columns).where(API_KEYS.c.name == name))


# --------------------------------------------------------------------------------------------
# Idempotency keys
# --------------------------------------------------------------------------------------------


def claim_idempotency_key(
    *,
    engine: Engine,
    api_key_id: str,
    key: str,
    request_hash: str,
    analysis_id: str,
    ttl_s: int | None = None,
    now: datetime | None = None,
) -> dict[str, Any]:
    """Claim ``(api_key_id, key)`` for ``analysis_id``, or find the earlier claim.

    Returns the stored row: its ``analysis_id`` equals the argument only for the first caller
    (ON CONFLICT DO NOTHING on ``pk_idempotency_keys``, the table's only unique constraint, so
    concurrent repeats agree on one winner and none raises).
    With ``ttl_s``, claims of ``api_key_id`` older than ``ttl_s`` seconds before ``now`` (UTC,
    default the clock) are deleted first, in the same transaction: an expired key starts anew,
    and old rows do not pile up.
    """
    with begin_write(engine) as conn:
        if ttl_s is not None:
            cutoff = (now or utc_now()) - timedelta(seconds=ttl_s)
            conn.execute(
                sa.delete(IDEMPOTENCY_KEYS).where(
                    IDEMPOTENCY_KEYS.c.api_key_id == api_key_id, IDEMPOTENCY_KEYS.c.created_at < cutoff
                )
            )
        conn.execute(
            insert_ignore(conn, IDEMPOTENCY_KEYS).values(
                api_key_id=api_key_id,
                key=key,
                request_hash=request_hash,
                analysis_id=analysis_id,
                created_at=now or utc_now(),
            )
        )
        row = (
            conn.execute(
                sa.select(IDEMPOTENCY_KEYS).where(
                    IDEMPOTENCY_KEYS.c.api_key_id == api_key_id, IDEMPOTENCY_KEYS.c.key == key
                )
            )
            .mappings()
            .one()
        )
    return dict(row)


def release_idempotency_key(*, engine: Engine, api_key_id: str, key: str, analysis_id: str) -> None:
    """Delete the claim of ``(api_key_id, key)`` if it still names ``analysis_id``: the request
    was refused (422), so a corrected retry with the same key may start an analysis."""
    with begin_write(engine) as conn:
        conn.execute(
            sa.delete(IDEMPOTENCY_KEYS).where(
                IDEMPOTENCY_KEYS.c.api_key_id == api_key_id,
                IDEMPOTENCY_KEYS.c.key == key,
                IDEMPOTENCY_KEYS.c.analysis_id == analysis_id,
            )
        )


# --------------------------------------------------------------------------------------------
# Watchlists
# --------------------------------------------------------------------------------------------


def create_watchlist(
    *,
    engine: Engine,
    watchlist_id: str,
    name: str,
    tickers: list[str],
    schedule: str,
    timezone: str,
    options: dict[str, Any],
    enabled: bool = True,
    tenant: str = DEFAULT_TENANT,
) -> dict[str, Any]:
    """Insert a watchlist of ``tenant`` and return its row.

    Not a claim: a plain ``INSERT``, so a name taken in the same tenant
    (``uq_watchlists_tenant_name``) raises ``DuplicateNameError``, also when two creators race."""
    now = utc_now()
    try:
        with begin_write(engine) as conn:
            conn.execute(
                sa.insert(WATCHLISTS).values(
                    id=watchlist_id,
                    name=name,
                    tickers=tickers,
                    schedule=schedule,
                    timezone=timezone,
                    options=options,
                    enabled=enabled,
                    created_at=now,
                    updated_at=now,
                    tenant=tenant,
                )
            )
    except IntegrityError as exc:
        raise DuplicateNameError(f"a watchlist named {name!r} already exists") from exc
    row = get_watchlist(engine=engine, name=name, tenant=tenant)
    assert row is not None
    return row


def _named(name: str, tenant: str) -> sa.ColumnElement[bool]:
    return sa.and_(WATCHLISTS.c.name == name, WATCHLISTS.c.tenant == tenant)


def get_watchlist(*, engine: Engine, name: str, tenant: str = DEFAULT_TENANT) -> dict[str, Any] | None:
    """The watchlist of ``tenant`` named ``name``, or ``None``."""
    return fetch_one(engine, sa.select(WATCHLISTS).where(_named(name, tenant)))


def list_watchlists(
    *, engine: Engine, enabled_only: bool = False, tenant: str | None = None
) -> list[dict[str, Any]]:
    """Every watchlist by name (then tenant); only ``tenant``'s when given (``None``: all
    tenants, for beat)."""
    stmt = sa.select(WATCHLISTS).order_by(WATCHLISTS.c.name, WATCHLISTS.c.tenant)
    if tenant is not None:
        stmt = stmt.where(WATCHLISTS.c.tenant == tenant)
    if enabled_only:
        stmt = stmt.where(WATCHLISTS.c.enabled.is_(True))
    return fetch_all(engine, stmt)


def update_watchlist(
    *, engine: Engine, name: str, changes: dict[str, Any], tenant: str = DEFAULT_TENANT
) -> dict[str, Any] | None:
    """Apply ``changes`` (any of tickers, schedule, timezone, options, enabled) to ``tenant``'s
    watchlist named ``name``; returns the new row, ``None`` if unknown. Raises ``ValueError``
    for another column."""
    allowed = {"tickers", "schedule", "timezone", "options", "enabled"}
    if unknown := set(changes) - allowed:
        raise ValueError(f"cannot update {sorted(unknown)}")
    if changes:
        with begin_write(engine) as conn:
            conn.execute(
                sa.update(WATCHLISTS).where(_named(name, tenant)).values(**changes, updated_at=utc_now())
            )
    return get_watchlist(engine=engine, name=name, tenant=tenant)


def delete_watchlist(*, engine: Engine, name: str, tenant: str = DEFAULT_TENANT) -> bool:
    """Delete ``tenant``'s watchlist named ``name`` and (cascade) its runs. ``False`` if unknown.

    SQLite enforces the cascade only with ``foreign_keys=ON``, which ``db.engine`` sets.
    """
    with begin_write(engine) as conn:
        row = conn.execute(
            sa.delete(WATCHLISTS).where(_named(name, tenant)).returning(WATCHLISTS.c.id)
        ).first()
    return row is not None


# --------------------------------------------------------------------------------------------
# Runs
# --------------------------------------------------------------------------------------------


def claim_run(
    *, engine: Engine, watchlist_id: str, run_date: date, trigger: str
) -> tuple[dict[str, Any], bool]:
    """Create the run of ``(watchlist_id, run_date)`` unless it exists.

    Returns ``(row, created)``; ``created`` is ``True`` for exactly one caller ever, however many
    claim at once: the insert is ``ON CONFLICT DO NOTHING`` with both :data:`RUN_CLAIM_CONSTRAINTS`
    (``pk_watchlist_runs`` and ``uq_watchlist_runs_watchlist_id_run_date``) as arbiters. With the
    primary key alone, one of six concurrent claimers raised ``UniqueViolation`` on the pair in
    about one round of 40 (module docstring of ``db._sql``). Raises
    ``sqlalchemy.exc.IntegrityError`` when ``watchlist_id`` names no watchlist.
    """
    run_id = run_id_for(watchlist_id=watchlist_id, run_date=run_date)
    with begin_write(engine) as conn:
        created = insert_if_absent(
            conn,
            RUNS,
            {
                "id": run_id,
                "watchlist_id": watchlist_id,
                "run_date": run_date,
                "status": "running",
                "trigger": trigger,
                "created_at": utc_now(),
            },
            constraints=RUN_CLAIM_CONSTRAINTS,
        )
    row = get_run(engine=engine, run_id=run_id)
    assert row is not None
    return row, created


def add_run_item(
    *,
    engine: Engine,
    run_id: str,
    symbol: str,
    status: str,
    analysis_id: str | None = None,
    error: str | None = None,
) -> bool:
    """Record one ticker of a run (``enqueued`` with its analysis, or ``refused`` with the
    reason). ON CONFLICT DO NOTHING on ``pk_watchlist_run_items`` ``(run_id, symbol)``, the
    table's only unique constraint: ``False`` when the ticker was recorded already."""
    with begin_write(engine) as conn:
        return insert_if_absent(
            conn,
            ITEMS,
            {
                "run_id": run_id,
                "symbol": symbol,
                "status": status,
                "analysis_id": analysis_id,
                "error": error,
            },
        )


def add_run_items(*, engine: Engine, run_id: str, items: Sequence[Mapping[str, Any]]) -> None:
    """:func:`add_run_item` of many tickers of run ``run_id`` in ONE multi-row insert (a
    watchlist run's bulk start). ``items``: ``{symbol, status, analysis_id (None when
    refused), error (None when enqueued)}`` each. A ticker recorded already keeps its row (ON
    CONFLICT DO NOTHING on ``pk_watchlist_run_items``)."""
    if not items:
        return
    rows = [
        {
            "run_id": run_id,
            "symbol": i["symbol"],
            "status": i["status"],
            "analysis_id": i.get("analysis_id"),
            "error": i.get("error"),
        }
        for i in items
    ]
    with begin_write(engine) as conn:
        # a parameter list: SQLAlchemy sends it as multi-row VALUES (see ledger.create_and_claim_many)
        conn.execute(insert_ignore(conn, ITEMS), rows)


def get_run(*, engine: Engine, run_id: str) -> dict[str, Any] | None:
    """The run row (digest columns included), or ``None``."""
    return fetch_one(engine, sa.select(RUNS).where(RUNS.c.id == run_id))


def list_runs(*, engine: Engine, watchlist_id: str, limit: int = 50) -> list[dict[str, Any]]:
    """Runs of a watchlist, newest ``run_date`` first, without the digest bodies.

    Raises ``ValueError`` unless ``1 <= limit <= MAX_RUNS_LIMIT``.
    """
    if not 1 <= limit <= MAX_RUNS_LIMIT:
        raise ValueError(f"need 1 <= limit <= {MAX_RUNS_LIMIT}, got {limit}")
    cols = [c for c in RUNS.c if not c.name.startswith("digest_")]
    stmt = (
        sa.select(*cols)
        .where(RUNS.c.watchlist_id == watchlist_id)
        .order_by(RUNS.c.run_date.desc())
        .limit(limit)
    )
    return fetch_all(engine, stmt)


def open_runs(*, engine: Engine) -> list[dict[str, Any]]:
    """Runs still ``running`` (id, watchlist_id, run_date, created_at), oldest first."""
    stmt = (
        sa.select(RUNS.c.id, RUNS.c.watchlist_id, RUNS.c.run_date, RUNS.c.created_at)
        .where(RUNS.c.status == "running")
        .order_by(RUNS.c.created_at)
    )
    return fetch_all(engine, stmt)


def run_items(*, engine: Engine, run_id: str) -> list[dict[str, Any]]:
    """The items of a run by symbol, each with its analysis' ``analysis_status``, ``signal``,
    ``confidence``, ``p_outperform`` (the report's calibrated probability, ``None`` in reports
    written before calibration), ``headline`` (the report's one-line answer, ``None`` in reports
    written before it), ``analysis_error`` and ``as_of`` (``None`` for refused tickers)."""
    stmt = (
        sa.select(
            ITEMS.c.symbol,
            ITEMS.c.status,
            ITEMS.c.analysis_id,
            ITEMS.c.error,
            ANALYSES.c.status.label("analysis_status"),
            ANALYSES.c.signal,
            ANALYSES.c.confidence,
            ANALYSES.c.report_json["p_outperform"].as_float().label("p_outperform"),
            ANALYSES.c.report_json["headline"].as_string().label("headline"),
            ANALYSES.c.error.label("analysis_error"),
            ANALYSES.c.as_of,
        )
        .select_from(ITEMS.outerjoin(ANALYSES, ANALYSES.c.id == ITEMS.c.analysis_id))
        .where(ITEMS.c.run_id == run_id)
        .order_by(ITEMS.c.symbol)
    )
    return fetch_all(engine, stmt)


def run_progress(*, engine: Engine, run_id: str, limit: int = 500) -> list[dict[str, Any]]:
    """Where each ticker of run ``run_id`` is, for a page that polls it: ``symbol, status`` (the
    item's: ``enqueued``/``refused``), ``analysis_id, error`` (why refused), ``analysis_status``,
    ``checkpoint``, ``lease_owner``, ``signal`` and ``analysis_error`` of its analysis (``None``
    before its row exists), by symbol, at most ``limit`` rows. Reads no report (unlike
    :func:`run_items`), so polling a large run stays cheap."""
    stmt = (
        sa.select(
            ITEMS.c.symbol,
            ITEMS.c.status,
            ITEMS.c.analysis_id,
            ITEMS.c.error,
            ANALYSES.c.status.label("analysis_status"),
            ANALYSES.c.checkpoint,
            ANALYSES.c.lease_owner,
            ANALYSES.c.signal,
            ANALYSES.c.error.label("analysis_error"),
        )
        .select_from(ITEMS.outerjoin(ANALYSES, ANALYSES.c.id == ITEMS.c.analysis_id))
        .where(ITEMS.c.run_id == run_id)
        .order_by(ITEMS.c.symbol)
        .limit(limit)
    )
    return fetch_all(engine, stmt)


def run_has_pending(*, engine: Engine, run_id: str) -> bool:
    """Whether any enqueued item of run ``run_id`` has an analysis that has not finished (not
    ``done``/``failed``, or no row yet): the cheap test a finaliser polls before it reads the
    items. One ``EXISTS`` over the run's items and the analyses' status column, which stops at
    the first unfinished one; :func:`run_items` decodes every analysis's report JSON instead
    (its ``p_outperform``), which on a 5,000-ticker run polled every few seconds was most of the
    database's reads (docs/benchmarks.md, "A night at scale")."""
    unfinished = sa.or_(ANALYSES.c.status.is_(None), ANALYSES.c.status.not_in(TERMINAL_STATUSES))
    stmt = sa.select(
        sa.exists(
            sa.select(ITEMS.c.symbol)
            .select_from(ITEMS.outerjoin(ANALYSES, ANALYSES.c.id == ITEMS.c.analysis_id))
            .where(ITEMS.c.run_id == run_id, ITEMS.c.status == "enqueued", unfinished)
        )
    )
    with reading(engine) as conn:
        return bool(conn.execute(stmt).scalar())


def previous_done_run(*, engine: Engine, watchlist_id: str, before: date) -> dict[str, Any] | None:
    """The latest finished run of ``watchlist_id`` with ``run_date < before`` (no digest bodies)."""
    stmt = (
        sa.select(RUNS.c.id, RUNS.c.run_date)
        .where(RUNS.c.watchlist_id == watchlist_id, RUNS.c.run_date < before, RUNS.c.status == "done")
        .order_by(RUNS.c.run_date.desc())
        .limit(1)
    )
    return fetch_one(engine, stmt)


def finish_run(
    *, engine: Engine, run_id: str, digest_markdown: str, digest_html: str, digest_json: dict[str, Any]
) -> bool:
    """Store the digest and mark the run ``done``, once: ``False`` if it was done already (a
    concurrent or redelivered finaliser lost the race and changes nothing)."""
    with begin_write(engine) as conn:
        row = conn.execute(
            sa.update(RUNS)
            .where(RUNS.c.id == run_id, RUNS.c.status == "running")
            .values(
                status="done",
                finished_at=utc_now(),
                digest_markdown=digest_markdown,
                digest_html=digest_html,
                digest_json=digest_json,
            )
            .returning(RUNS.c.id)
        ).first()
    return row is not None


# --------------------------------------------------------------------------------------------
# Audit log
# --------------------------------------------------------------------------------------------


def insert_audit(
    *,
    engine: Engine,
    audit_id: str,
    request_id: str,
    method: str,
    what: str,
    status_code: int,
    tenant: str | None = None,
    api_key_id: str | None = None,
    key_name: str | None = None,
    object_id: str | None = None,
    at: datetime | None = None,
    client_address: str | None = None,
) -> None:
    """Append one audit row (``audit_id`` a fresh UUID). ``outcome`` follows from
    ``status_code``: ``ok`` below 400, ``refused`` for 4xx, ``error`` for 5xx. The caller passes
    the key's public id and name, never the key."""
    with begin_write(engine) as conn:
        conn.execute(
            sa.insert(AUDIT).values(
                _audit_values(
                    audit_id=audit_id,
                    request_id=request_id,
                    method=method,
                    what=what,
                    status_code=status_code,
                    tenant=tenant,
                    api_key_id=api_key_id,
                    key_name=key_name,
                    object_id=object_id,
                    at=at or utc_now(),
                    client_address=client_address,
                )
            )
        )


def _audit_values(
    *,
    audit_id: str,
    request_id: str,
    method: str,
    what: str,
    status_code: int,
    tenant: str | None,
    api_key_id: str | None,
    key_name: str | None,
    object_id: str | None,
    at: datetime,
    client_address: str | None,
) -> dict[str, Any]:
    outcome = "ok" if status_code < 400 else "refused" if status_code < 500 else "error"
    assert outcome in AUDIT_OUTCOMES
    return {
        "id": audit_id,
        "at": at,
        "request_id": mask_text(request_id)[:200],
        "tenant": tenant,
        "api_key_id": api_key_id,
        "key_name": key_name,
        "method": method,
        "what": mask_text(what)[:300],
        "object_id": mask_text(object_id)[:300] if object_id else None,
        "status_code": status_code,
        "outcome": outcome,
        "client_address": client_address[:100] if client_address else None,
        "requests": 1,
    }


def count_audit(
    *,
    engine: Engine,
    aggregate_key: str,
    audit_id: str,
    request_id: str,
    method: str,
    what: str,
    status_code: int,
    client_address: str | None,
    object_id: str | None = None,
    at: datetime | None = None,
) -> None:
    """Count one request into the audit row of ``aggregate_key`` (the caller's choice, e.g.
    address, status and window): the first request of a key inserts the row (its method, route,
    object and request id, ``requests = 1``); each later one adds one to ``requests`` and sets
    ``last_at``. One ``INSERT … ON CONFLICT (aggregate_key) DO UPDATE``
    (``uq_audit_log_aggregate_key``), so concurrent requests of a key never make two rows.
    Tenant and key are ``NULL``: this is for requests without a valid key."""
    now = at or utc_now()
    values = _audit_values(
        audit_id=audit_id,
        request_id=request_id,
        method=method,
        what=what,
        status_code=status_code,
        tenant=None,
        api_key_id=None,
        key_name=None,
        object_id=object_id,
        at=now,
        client_address=client_address,
    )
    with begin_write(engine) as conn:
        stmt = dialect_insert(conn, AUDIT).values(**values, aggregate_key=aggregate_key[:300])
        conn.execute(
            stmt.on_conflict_do_update(
                index_elements=[AUDIT.c.aggregate_key],
                set_={"requests": AUDIT.c.requests + 1, "last_at": now},
            )
        )


def list_audit(
    *,
    engine: Engine,
    tenant: str | None = None,
    since: datetime | None = None,
    limit: int = 100,
    offset: int = 0,
) -> list[dict[str, Any]]:
    """Audit rows newest first, of ``tenant`` only when given, at or after ``since`` (UTC).

    Raises ``ValueError`` unless ``1 <= limit <= MAX_AUDIT_LIMIT`` and ``offset >= 0``."""
    if not 1 <= limit <= MAX_AUDIT_LIMIT or offset < 0:
        raise ValueError(f"need 1 <= limit <= {MAX_AUDIT_LIMIT} and offset >= 0, got {limit=}, {offset=}")
    stmt = sa.select(AUDIT)
    if tenant is not None:
        stmt = stmt.where(AUDIT.c.tenant == tenant)
    if since is not None:
        stmt = stmt.where(AUDIT.c.at >= since)
    stmt = stmt.order_by(AUDIT.c.at.desc(), AUDIT.c.id.desc()).limit(limit).offset(offset)
    return fetch_all(engine, stmt)
