"""The FastAPI gateway (docs/design.md, "HTTP gateway"): ``finagent serve`` runs ``create_app()``
under uvicorn.

Endpoints (every one but ``/health`` and the docs needs ``X-API-Key``):

* ``GET /health``: database reachable, broker reachable, a worker answers a ping and runs a
  task that reaches the database, the recovery sweeper swept recently, no analysis stalled
  (service mode); 503 naming the failing parts.
* ``POST /analyze`` → 202 ``{analysis_id, status_url, …}``; ``Idempotency-Key`` header: the same
  key (per API key) with the same body returns the same analysis, with another body 409.
* ``GET /analyses/{id}``, ``GET /analyses?symbol=&status=&limit=&offset=``.
* ``GET /analyses/{id}/chart.png``: the analysis's chart rendered on demand by the
  ``render_chart`` tool (one ``tool_calls`` row, stage ``chart``); 404 unknown, 409 unfinished
  or no price history; ``ETag`` + ``Cache-Control`` (a finished analysis's chart never changes).
* ``/watchlists`` CRUD, ``POST /watchlists/{name}/runs``, ``GET /watchlists/{name}/runs``,
  ``GET /watchlists/{name}/runs/{date}``, ``GET /watchlists/{name}/runs/{date}/digest?format=``.
* ``GET /audit`` (scope ``admin``): the audit log of the key's tenant.
* ``GET /scorecard?backtest=&since=&format=json|markdown&all_tenants=`` (scope ``read``): the
  forward scorecard of the key's tenant; ``all_tenants=true`` (scope ``operator``) every tenant's.

Authorization (``core.tenancy``): every object belongs to a tenant, and a key sees
only its own tenant's (another tenant's object answers 404, exactly as an unknown one); each
endpoint needs a scope (``read``, ``analyze``, ``watchlists``, ``admin``, ``operator``; 403
names the one missing). ``POST /analyze`` and each ticker of a watchlist run are metered per key
(``pipeline.api.quotas``, 429 + ``Retry-After``); requests without a valid key per client
address (``pipeline.api.abuse``); every mutating request with a key leaves an ``audit_log`` row,
those without one are counted per address and window (``pipeline.api.audit``).

Handlers are plain ``def``: FastAPI runs them in its thread pool, and the producer path
(provider check, database writes, broker publish) is blocking I/O.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any, Final, Literal

import sqlalchemy as sa
from celery.exceptions import TimeoutError as CeleryTimeout
from fastapi import Depends, FastAPI, Header, Query, Request, Response
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse
from fastapi.security import APIKeyHeader
from starlette.exceptions import HTTPException as StarletteHTTPException

from agents.data.market.shared import SharedStateUnavailableError
from core.logs import install_log_masking
from core.settings import Settings, get_settings
from core.stages import CONTROL_QUEUE, QUEUES, TERMINAL_STATUSES, Status, stage_of_status
from db import ops_repo, repo
from db.engine import get_engine
from pipeline import producer, service, watchlists
from pipeline.api.abuse import charge_failed_auth, client_address
from pipeline.api.audit import AuditMiddleware
from pipeline.api.auth import (
    AuthError,
    Principal,
    authenticate,
    require_scope,
    sign_path,
    signing_enabled,
    verify_signed_path,
)
from pipeline.api.docs import install_offline_docs
from pipeline.api.edge import CheckedRoute, encodable, http_error
from pipeline.api.fields import (
    EXPIRES_PATTERN,
    IDEMPOTENCY_KEY_PATTERN,
    SIGNATURE_PATTERN,
    AnalysisId,
    BacktestName,
    RunDateKey,
    SinceDate,
    Ticker,
    WatchlistName,
)
from pipeline.api.limits import BodyLimitMiddleware, short_errors
from pipeline.api.masking import SecretMaskingMiddleware
from pipeline.api.quotas import QuotaExceededError, admission, admit_analysis, charge_run, run_quota
from pipeline.api.schemas import (
    ERROR_RESPONSES,
    AnalysisOut,
    AnalysisPage,
    AnalysisStatus,
    AnalyzeAccepted,
    AnalyzeRequest,
    AuditOut,
    AuditPage,
    ErrorOut,
    HealthOut,
    RunOut,
    RunRequest,
    WatchlistIn,
    WatchlistOut,
    WatchlistPatch,
)
from pipeline.direct_tools import render_analysis_chart, warm_up_charts
from pipeline.stages.recovery import progress_of, stalled_beyond_grace
from pipeline.stages.store import chartable_history
from pipeline.sweeper import sweeper_check

logger = logging.getLogger("finagent.api")

PNG_MAGIC: Final = b"\x89PNG\r\n\x1a\n"
#: Bump when the chart's look changes (render arguments, style): it invalidates cached ETags.
CHART_VERSION: Final = "1"
#: A finished analysis's chart never changes; clients revalidate with ``If-None-Match`` after a day.
CHART_CACHE_CONTROL: Final = "private, max-age=86400"
#: Largest page offset: beyond any real table here, and inside a 64-bit SQL integer (the fuzzer
#: sent offset=7e25, which SQLite refused with OverflowError → 500).
MAX_OFFSET: Final = 10_000_000
#: Chart requests allowed in the thread pool at once (renders are serialised by a lock); more → 503.
MAX_CHART_REQUESTS: Final = 4
_api_key_header = APIKeyHeader(name="X-API-Key", auto_error=False, description="finagent API key")


class ConflictError(Exception):
    """409: the request contradicts stored state (a reused Idempotency-Key, a taken name)."""


class ChartRenderError(Exception):
    """The chart could not be produced; ``status_code`` is the HTTP answer (500 tool failure,
    503 transient: retry)."""

    def __init__(self, message: str, *, status_code: int) -> None:
        """``message``: the response's ``detail``; ``status_code``: 500 or 503."""
        super().__init__(message)
        self.status_code = status_code


def _settings(request: Request) -> Settings:
    settings: Settings = request.app.state.settings
    return settings


def require_key(request: Request, token: Annotated[str | None, Depends(_api_key_header)]) -> Principal:
    """FastAPI dependency: the caller's principal (401 missing key, 403 bad or revoked key;
    429 once the client address has spent its failed-authentication allowance,
    ``pipeline.api.abuse``); also kept in ``request.state.principal`` for the audit log."""
    settings = _settings(request)
    try:
        principal = authenticate(token=token, settings=settings)
    except AuthError:
        charge_failed_auth(address=client_address(request.scope), settings=settings)
        raise
    request.state.principal = principal
    return principal


def _scoped(scope: str) -> Any:
    """A FastAPI dependency: the caller's principal if its key has ``scope``, else 403 naming it."""

    def dependency(principal: Annotated[Principal, Depends(require_key)]) -> Principal:
        require_scope(principal, scope)
        return principal

    return dependency


Auth = Annotated[Principal, Depends(require_key)]
Reader = Annotated[Principal, Depends(_scoped("read"))]
Analyst = Annotated[Principal, Depends(_scoped("analyze"))]
Curator = Annotated[Principal, Depends(_scoped("watchlists"))]
Admin = Annotated[Principal, Depends(_scoped("admin"))]

#: The principal of a request authorised by a signed link rather than a key: the signature
#: binds one chart's path, so it needs no tenant (``tenant=""`` matches no tenant's rows).
SIGNED_LINK = Principal(key_id="signed-link", name="signed link", tenant="", scopes=("read",))


def require_key_or_signed_link(
    request: Request,
    token: Annotated[str | None, Depends(_api_key_header)],
    expires: Annotated[
        str | None, Query(pattern=EXPIRES_PATTERN, description="Signed link: expiry, Unix seconds.")
    ] = None,
    sig: Annotated[
        str | None, Query(pattern=SIGNATURE_PATTERN, description="Signed link: HMAC-SHA256, lower-case hex.")
    ] = None,
) -> Principal:
    """FastAPI dependency of the chart endpoint: an ``X-API-Key``, else a signed link for this
    analysis's chart (``pipeline.api.auth.verify_signed_path``). 401 with neither, 403 for a
    bad key or a bad or expired signature. Runs before the path is validated (as every key
    check does): the signature covers the path as sent."""
    if token or not (expires or sig):
        principal = require_key(request, token)
        require_scope(principal, "read")
        return principal
    analysis_id = str(request.path_params.get("analysis_id", ""))
    try:
        verify_signed_path(
            watchlists.chart_url(analysis_id), expires=expires, sig=sig, settings=_settings(request)
        )
    except AuthError:
        charge_failed_auth(address=client_address(request.scope), settings=_settings(request))
        raise
    return SIGNED_LINK


ChartAuth = Annotated[Principal, Depends(require_key_or_signed_link)]
SettingsDep = Annotated[Settings, Depends(_settings)]


def owned_analysis(*, analysis_id: str, principal: Principal, settings: Settings) -> dict[str, Any] | None:
    """The ``analyses`` row of ``analysis_id`` if ``principal``'s tenant owns it, else ``None``:
    another tenant's analysis is reported exactly like an unknown one (404, OWASP API1), so its
    existence is not confirmed. A signed link (:data:`SIGNED_LINK`) carries its own authority
    over the one chart its signature names."""
    row = service.get_analysis(analysis_id=analysis_id, settings=settings)
    if row is None or (principal is not SIGNED_LINK and row.get("tenant") != principal.tenant):
        return None
    return row


def chart_unavailable_reason(row: dict[str, Any]) -> str | None:
    """Why the chart of analysis ``row`` (a full ``analyses`` row, ``state`` parsed) cannot be
    drawn, or ``None`` when it can: the analysis must be finished (``done`` or ``failed``) and
    its research must have a successful ``get_history`` call (``stock_data.history_ref``)."""
    if row["status"] not in TERMINAL_STATUSES:
        return f"analysis {row['id']} is not finished (status {row['status']}); retry when it is done"
    if chartable_history(row) is None:
        return f"analysis {row['id']} has no price history to chart (status {row['status']}, research failed)"
    return None


def chart_etag(row: dict[str, Any]) -> str:
    """A weak ETag for the chart of a finished analysis ``row``: a digest of its id, finish
    time, cited history call and :data:`CHART_VERSION` (the PNG bytes are not hashed: the
    drawing is deterministic given these, and the check must not need a render)."""
    finished = row.get("finished_at") or row.get("updated_at")
    key = f"{row['id']}|{finished}|{chartable_history(row)}|{CHART_VERSION}"
    return f'W/"{hashlib.sha256(key.encode()).hexdigest()[:24]}"'


def etag_matches(if_none_match: str | None, etag: str) -> bool:
    """Weak comparison (RFC 9110 §13.1.2) of ``etag`` with an ``If-None-Match`` header value
    (a comma-separated list of entity tags, or ``*``)."""
    if not if_none_match:
        return False

    def opaque(tag: str) -> str:
        tag = tag.strip()
        return tag[2:] if tag.startswith("W/") else tag

    return any(t.strip() == "*" or opaque(t) == opaque(etag) for t in if_none_match.split(","))


def _analysis_out(row: dict[str, Any], *, full: bool, settings: Settings) -> AnalysisOut:
    progress = progress_of(row, settings=settings)
    return AnalysisOut(
        step=progress.step,
        attempt=progress.attempt,
        recoveries=progress.recoveries,
        lease_expires_at=progress.lease_expires_at,
        stale=progress.stale,
        progress=progress.note,
        analysis_id=row["id"],
        symbol=row["symbol"],
        as_of=row["as_of"],
        status=row["status"],
        current_stage=stage_of_status(row["status"]),
        iteration=row["iteration"],
        max_iterations=row["max_iterations"],
        user_query=row["user_query"],
        signal=row["signal"],
        confidence=row["confidence"],
        error=row["error"],
        created_at=row["created_at"],
        updated_at=row["updated_at"],
        finished_at=row["finished_at"],
        report_markdown=row.get("report") if full else None,
        report_json=row.get("report_json") if full else None,
        chart_url=watchlists.chart_url(row["id"]) if full and chart_unavailable_reason(row) is None else None,
    )


def _watchlist_out(row: dict[str, Any]) -> WatchlistOut:
    return WatchlistOut(**{k: row[k] for k in WatchlistOut.model_fields})


def _run_out(name: str, row: dict[str, Any], *, created: bool | None = None) -> RunOut:
    return RunOut(
        run_id=row["id"],
        run_date=row["run_date"],
        status=row["status"],
        trigger=row["trigger"],
        created_at=row["created_at"],
        finished_at=row["finished_at"],
        created=created,
        digest=row.get("digest_json"),
        digest_markdown=row.get("digest_markdown"),
        digest_url=f"/watchlists/{name}/runs/{row['run_date'].isoformat()}/digest",
    )


def check_health(*, settings: Settings) -> HealthOut:
    """Database (``SELECT 1``), broker (a connection), then in service mode, all within about
    ``health_timeout`` s:

    * ``worker``: workers answering a control broadcast (``inspect().active_queues()``);
    * ``queues``: every queue of ``core.stages.QUEUES`` has a consumer;
    * ``consumption``: a ``finagent.health.echo`` task sent through the control queue comes
      back: proof that a worker takes tasks off the broker and that its pool process can reach
      the database (the echo runs ``SELECT 1``), not only that it is alive
      (docs/design.md, "Celery configuration"); a worker whose processes fail (out of memory, no
      database driver) fails the check with the error. Without a result backend the round trip is
      impossible; the check says so.

    ``queues`` and ``consumption`` appear only when a worker answered. A worker busy with long
    stages still answers: the control queue carries only cheap tasks.

    Whatever the workers' state, when the database answers:

    * ``sweeper``: the recovery sweeper (``finagent sweeper``) wrote a heartbeat after a
      sweep within two sweep intervals and a grace (``pipeline.sweeper.heartbeat_check``);
    * ``stalled``: no unfinished analysis is past its lease beyond two sweep intervals.
    """
    checks: dict[str, str] = {}
    try:
        with get_engine(settings.effective_database_url).connect() as conn:
            conn.execute(sa.text("SELECT 1"))
        checks["database"] = "ok"
    except Exception as exc:
        checks["database"] = f"unreachable: {type(exc).__name__}"
    # lazy: importing pipeline.celery_app builds the Celery app from the process settings; this
    # module reads no settings when imported (create_app does), so the app is built on first use
    from pipeline.celery_app import app as celery_app

    if settings.mode == "embedded":
        checks["broker"] = "ok (in-memory)"
        checks["worker"] = "ok (embedded)" if producer.embedded_worker_running() else "not started"
    else:
        try:
            with celery_app.connection_for_write() as conn:
                conn.ensure_connection(max_retries=1, timeout=settings.health_timeout)
            checks["broker"] = "ok"
        except Exception as exc:
            checks["broker"] = f"unreachable: {type(exc).__name__}"
        if checks["broker"] == "ok":
            checks.update(_worker_checks(celery_app, settings=settings))
        else:
            checks["worker"] = "unknown (broker unreachable)"
    if checks["database"] == "ok":
        checks["sweeper"] = sweeper_check(settings=settings)
        checks["stalled"] = _stalled_check(settings=settings)
    failing = [name for name, value in checks.items() if not value.startswith("ok")]
    return HealthOut(
        status="unavailable" if failing else "ok", mode=settings.mode, checks=checks, failing=failing
    )


def _stalled_check(*, settings: Settings) -> str:
    """The ``stalled`` check: no unfinished analysis is past its lease by more than two sweep
    intervals (the recovery sweeper should have re-driven or failed it by then)."""
    try:
        stuck = stalled_beyond_grace(settings=settings)
    except sa.exc.SQLAlchemyError as exc:  # a database without migration 0006 yet
        return f"unknown: {type(exc).__name__}"
    if stuck:
        return (
            f"{stuck} analyses past their lease and not recovered (is `finagent sweeper` running? "
            "`finagent recover` re-drives them by hand)"
        )
    return "ok (none past its lease)"


def _worker_checks(celery_app: Any, *, settings: Settings) -> dict[str, str]:
    """The ``worker``, ``queues`` and ``consumption`` checks of :func:`check_health`."""

    checks: dict[str, str] = {}
    probe = None
    started = time.perf_counter()
    if settings.effective_result_backend:
        # sent first, so its round trip overlaps the broadcast's wait
        probe = celery_app.send_task("finagent.health.echo", expires=settings.health_timeout * 2)
    try:
        replies = celery_app.control.inspect(timeout=settings.health_timeout).active_queues() or {}
    except Exception as exc:
        checks["worker"] = f"broadcast failed: {type(exc).__name__}"
        return checks
    if not replies:
        checks["worker"] = "no worker answered"
        return checks
    checks["worker"] = f"ok ({len(replies)} answered)"
    consumed = {q.get("name") for queues in replies.values() for q in queues or []}
    missing = [q for q in QUEUES if q not in consumed]
    checks["queues"] = (
        f"no worker consumes: {', '.join(missing)}" if missing else f"ok (all {len(QUEUES)} consumed)"
    )
    if probe is None:
        checks["consumption"] = "ok (not proven: no result backend for a round trip)"
    elif CONTROL_QUEUE not in consumed:
        checks["consumption"] = "unknown (no worker consumes the control queue)"
    else:
        remaining = max(0.1, settings.health_timeout - (time.perf_counter() - started))
        try:
            result = probe.get(timeout=remaining, disable_sync_subtasks=False)
            elapsed = (time.perf_counter() - started) * 1000
            checks["consumption"] = f"ok (echo task run by {result.get('hostname')} in {elapsed:.0f} ms)"
        except CeleryTimeout:
            checks["consumption"] = (
                f"no worker ran the echo task within {settings.health_timeout:g} s "
                "(workers answer broadcasts but do not take tasks, or their pool processes die)"
            )
        except Exception as exc:  # the task's own exception (it failed), or the backend's
            failed = _state(probe) == "FAILURE"
            checks["consumption"] = (
                f"the echo task failed in a worker ({type(exc).__name__}: {first_line(exc)}): "
                "its pool processes cannot run tasks"
                if failed
                else f"the echo task's result could not be read ({type(exc).__name__}: {first_line(exc)})"
            )
        finally:
            probe.forget()
    return checks


def _state(result: Any) -> str | None:
    """A Celery result's state as last read (``None`` when even that fails)."""
    try:
        return str(result.state)
    except Exception:  # the result backend is unreachable
        return None


def first_line(exc: BaseException, *, limit: int = 200) -> str:
    """The first line of ``exc``'s message, at most ``limit`` characters (a health check is one
    line; an ``ImportError`` of the database driver lists every attempt on its own line)."""
    lines = str(exc).strip().splitlines()
    return lines[0][:limit] if lines else ""


def _request_hash(body: AnalyzeRequest) -> str:
    canonical = json.dumps(body.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


def create_app(settings: Settings | None = None) -> FastAPI:
    """Build the gateway for ``settings`` (default: the process settings).

    Embedded mode (no broker): an in-process worker starts with the app, so a single
    ``finagent serve`` answers requests on a fresh machine.
    """
    settings = settings or get_settings()

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        if settings.mode == "embedded":
            service.prepare_database(settings=settings)
        producer.ensure_embedded_worker(settings=settings)
        # the first chart.png of a process paid ~3 s of imports; pay them now, off the request path
        threading.Thread(target=warm_up_charts, name="chart-warm-up", daemon=True).start()
        yield

    api = FastAPI(
        title="finagent",
        version="0.1.0",
        description=(
            "Multi-agent stock analysis on a Celery pipeline. Send `X-API-Key`. Every error body "
            'is `{"detail": "…"}` (422 adds `errors`); every answer carries `X-Request-ID`.'
        ),
        lifespan=lifespan,
        responses=ERROR_RESPONSES,
        # /docs and /redoc from bundled assets, not a CDN (pipeline.api.docs)
        docs_url=None,
        redoc_url=None,
    )
    # every route checks its raw input first (NUL, lone surrogates, repeats: pipeline.api.edge)
    api.router.route_class = CheckedRoute
    install_offline_docs(api)
    api.state.settings = settings
    api.add_middleware(BodyLimitMiddleware, max_bytes=settings.api_max_body_bytes)
    # added last = outermost: it sees every answer, the body limit's 413 included
    api.add_middleware(
        AuditMiddleware,
        database_url=settings.effective_database_url,
        anonymous_window_seconds=settings.audit_anonymous_window_seconds,
    )
    # outermost of all: no answer, error bodies and X-Request-ID included, carries a configured
    # secret (docs/security.md, "Secrets"); the process's log records are masked too
    install_log_masking()
    api.add_middleware(SecretMaskingMiddleware)

    @api.exception_handler(AuthError)
    def _auth(_: Request, exc: AuthError) -> JSONResponse:
        headers = {"WWW-Authenticate": "APIKey"} if exc.status_code == 401 else None
        return JSONResponse({"detail": str(exc)}, status_code=exc.status_code, headers=headers)

    @api.exception_handler(RequestValidationError)
    def _validation(_: Request, exc: RequestValidationError) -> JSONResponse:
        parts = []
        for err in exc.errors():
            where = ".".join(str(p) for p in err.get("loc", ()) if p != "body") or "body"
            parts.append(f"{where}: {err.get('msg')}")
        # encodable: the input may hold what made it invalid (a lone surrogate, an infinity)
        content = {"detail": "; ".join(parts), "errors": jsonable_encoder(short_errors(exc.errors()))}
        return JSONResponse(encodable(content), status_code=422)

    # 405 with every method of the path in Allow; OPTIONS 204 with Allow (pipeline.api.edge)
    api.add_exception_handler(StarletteHTTPException, http_error)

    @api.exception_handler(service.InvalidRequestError)
    @api.exception_handler(watchlists.WatchlistError)
    def _invalid(_: Request, exc: Exception) -> JSONResponse:
        if isinstance(exc, watchlists.WatchlistNotFoundError):
            return JSONResponse({"detail": str(exc)}, status_code=404)
        if isinstance(exc, watchlists.WatchlistLimitError):  # a tenant cap: conflicts with what is stored
            return JSONResponse({"detail": str(exc)}, status_code=409)
        return JSONResponse({"detail": str(exc)}, status_code=422)

    @api.exception_handler(ConflictError)
    @api.exception_handler(ops_repo.DuplicateNameError)
    def _conflict(_: Request, exc: Exception) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=409)

    @api.exception_handler(Exception)
    def _unexpected(request: Request, exc: Exception) -> JSONResponse:
        # the documented error shape even for a bug, with the id that finds it in the logs
        request_id = getattr(request.state, "request_id", None) or request.scope.get("state", {}).get(
            "request_id"
        )
        logger.error("unhandled %s in request %s", type(exc).__name__, request_id, exc_info=exc)
        return JSONResponse({"detail": f"internal error (request id {request_id})"}, status_code=500)

    @api.exception_handler(QuotaExceededError)
    def _quota(_: Request, exc: QuotaExceededError) -> JSONResponse:
        return JSONResponse(
            {"detail": str(exc)}, status_code=429, headers={"Retry-After": str(exc.retry_after)}
        )

    @api.exception_handler(SharedStateUnavailableError)
    def _no_shared_state(_: Request, exc: Exception) -> JSONResponse:
        return JSONResponse(
            {"detail": "the rate limiter's Redis did not answer; retry shortly"},
            status_code=503,
            headers={"Retry-After": "5"},
        )

    @api.exception_handler(service.SchemaMissingError)
    def _schema(_: Request, exc: Exception) -> JSONResponse:
        return JSONResponse({"detail": str(exc)}, status_code=503)

    @api.exception_handler(OSError)
    @api.exception_handler(sa.exc.OperationalError)
    def _infra(_: Request, exc: Exception) -> JSONResponse:
        logger.warning("infrastructure error: %s: %s", type(exc).__name__, exc)
        return JSONResponse(
            {"detail": f"broker or database unreachable ({type(exc).__name__}); see GET /health"},
            status_code=503,
        )

    @api.get(
        "/health",
        response_model=HealthOut,
        tags=["operations"],
        responses={503: {"model": HealthOut, "description": "A part is failing: see `failing`."}},
    )
    def health(response: Response) -> HealthOut:
        """Readiness: database, broker and a consuming worker. 503 names the failing parts."""
        result = check_health(settings=settings)
        if result.failing:
            response.status_code = 503
        return result

    @api.post("/analyze", status_code=202, response_model=AnalyzeAccepted, tags=["analyses"])
    def analyze(
        body: AnalyzeRequest,
        principal: Analyst,
        request: Request,
        response: Response,
        idempotency_key: Annotated[
            str | None,
            Header(
                alias="Idempotency-Key",
                pattern=IDEMPOTENCY_KEY_PATTERN,
                description="1-200 visible ASCII characters; a repeat with the same body replays.",
            ),
        ] = None,
    ) -> AnalyzeAccepted:
        """Validate and enqueue an analysis; 422 (nothing enqueued) for a bad ticker or date;
        429 with ``Retry-After`` when a quota of the key or its tenant is spent."""
        engine = get_engine(settings.effective_database_url)
        analysis_id = str(uuid.uuid4())
        request.state.audit_object = analysis_id
        if idempotency_key is not None:
            claim = ops_repo.claim_idempotency_key(
                engine=engine,
                api_key_id=principal.key_id,
                key=idempotency_key,
                request_hash=_request_hash(body),
                analysis_id=analysis_id,
                ttl_s=settings.idempotency_ttl,
            )
            if claim["analysis_id"] != analysis_id:
                if claim["request_hash"] != _request_hash(body):
                    raise ConflictError("Idempotency-Key was already used with a different request body")
                row = repo.get_analysis(engine=engine, analysis_id=claim["analysis_id"])
                request.state.audit_object = claim["analysis_id"]
                response.headers["Location"] = f"/analyses/{claim['analysis_id']}"
                return AnalyzeAccepted(
                    analysis_id=claim["analysis_id"],
                    status=row["status"] if row else "submitted",
                    status_url=f"/analyses/{claim['analysis_id']}",
                    symbol=row["symbol"] if row else None,
                    as_of=row["as_of"] if row else None,
                    session_id=body.session_id,
                    replayed=True,
                )
        try:
            with admission(principal=principal, settings=settings):
                admit_analysis(principal=principal, settings=settings)
                sub = producer.submit(
                    symbol=body.symbol,
                    query=body.query,
                    as_of=body.as_of,
                    analysis_type=body.analysis_type,
                    options=body.options.model_dump(exclude_none=True) if body.options else None,
                    session_id=body.session_id,
                    analysis_id=analysis_id,
                    settings=settings,
                    tenant=principal.tenant,
                    api_key_id=principal.key_id,
                )
        except Exception:
            if idempotency_key is not None:  # nothing was enqueued: a corrected retry may reuse the key
                ops_repo.release_idempotency_key(
                    engine=engine, api_key_id=principal.key_id, key=idempotency_key, analysis_id=analysis_id
                )
            raise
        response.headers["Location"] = f"/analyses/{sub.analysis_id}"
        logger.info("analysis %s enqueued for %s by key %s", sub.analysis_id, sub.symbol, principal.name)
        return AnalyzeAccepted(
            analysis_id=sub.analysis_id,
            status=Status.QUEUED.value,
            status_url=f"/analyses/{sub.analysis_id}",
            symbol=sub.symbol,
            as_of=sub.as_of,
            analysis_type=sub.analysis_type,
            session_id=sub.session_id,
            inherited=sub.inherited,
        )

    @api.get("/analyses/{analysis_id}", response_model=AnalysisOut, tags=["analyses"])
    def get_analysis(analysis_id: AnalysisId, principal: Reader) -> AnalysisOut | JSONResponse:
        """Status, current stage and (when finished) the report as Markdown and JSON."""
        row = owned_analysis(analysis_id=analysis_id, principal=principal, settings=settings)
        if row is None:
            return JSONResponse({"detail": f"no analysis {analysis_id}"}, status_code=404)
        return _analysis_out(row, full=True, settings=settings)

    chart_slots = threading.BoundedSemaphore(MAX_CHART_REQUESTS)
    # render_chart writes <state_dir>/charts/<analysis_id>.png: render and read under one lock so
    # a concurrent request for the same analysis cannot truncate the file being read.
    chart_lock = threading.Lock()

    @api.get(
        "/analyses/{analysis_id}/chart.png",
        tags=["analyses"],
        response_class=Response,
        responses={
            200: {"content": {"image/png": {}}, "description": "The chart (PNG, ~50 KB, 1000×600 px)."},
            304: {"description": "Not modified (If-None-Match matched the ETag)."},
            404: {"description": "No such analysis."},
            409: {"description": "Not finished yet, or no price history to draw (research failed)."},
            500: {"description": "The render_chart tool failed (detail names its error code)."},
            503: {"description": "Too many chart requests at once; retry (Retry-After)."},
        },
    )
    def get_chart(
        analysis_id: AnalysisId,
        principal: ChartAuth,
        if_none_match: Annotated[str | None, Header(alias="If-None-Match")] = None,
    ) -> Response:
        """The analysis's candlestick chart (PNG: support/resistance, Fibonacci levels,
        trendlines over its cited bars), rendered on demand by the ``render_chart`` tool (logged
        as a ``tool_calls`` row, stage ``chart``; ~0.5 s warm, 1–2 s the first time in a process).

        404 unknown analysis; 409 while the analysis runs or when it has no price history
        (research failed); 304 when ``If-None-Match`` matches the ``ETag``; 503 when
        ``MAX_CHART_REQUESTS`` charts are already in progress; 500 if the tool fails.
        """
        row = owned_analysis(analysis_id=analysis_id, principal=principal, settings=settings)
        if row is None:
            return JSONResponse({"detail": f"no analysis {analysis_id}"}, status_code=404)
        reason = chart_unavailable_reason(row)
        if reason is not None:
            headers = {"Retry-After": "5"} if row["status"] not in TERMINAL_STATUSES else None
            return JSONResponse({"detail": reason, "status": row["status"]}, status_code=409, headers=headers)
        cache = {"ETag": chart_etag(row), "Cache-Control": CHART_CACHE_CONTROL}
        if etag_matches(if_none_match, cache["ETag"]):
            return Response(status_code=304, headers=cache)
        if not chart_slots.acquire(blocking=False):
            return JSONResponse(
                {"detail": "too many chart renders in progress; retry shortly"},
                status_code=503,
                headers={"Retry-After": "1"},
            )
        try:
            png, tool_call_id = _render_chart_png(analysis_id=analysis_id)
        except KeyError as exc:  # the row changed under us: same meaning as the checks above
            return JSONResponse({"detail": str(exc.args[0])}, status_code=409)
        except ChartRenderError as exc:
            headers = {"Retry-After": "1"} if exc.status_code == 503 else None
            return JSONResponse({"detail": str(exc)}, status_code=exc.status_code, headers=headers)
        finally:
            chart_slots.release()
        return Response(
            content=png, media_type="image/png", headers={**cache, "X-Tool-Call-Id": tool_call_id}
        )

    def _render_chart_png(*, analysis_id: str) -> tuple[bytes, str]:
        """``(PNG bytes, tool_call_id)`` of one ``render_analysis_chart`` call.

        Raises ``KeyError`` as ``render_analysis_chart`` does; ``ChartRenderError`` (500) when
        the tool answered with an error, (503) when the file is not a whole PNG (another process,
        e.g. ``finagent chart``, rewrote it while it was read)."""
        with chart_lock:
            envelope = render_analysis_chart(analysis_id=analysis_id, settings=settings)
            if envelope.error is not None or not envelope.data:
                code = envelope.error.code.value if envelope.error else "NO_DATA"
                message = envelope.error.message if envelope.error else "no output"
                logger.warning("chart of %s failed: %s: %s", analysis_id, code, message)
                raise ChartRenderError(f"chart rendering failed: {code}: {message}", status_code=500)
            png = Path(envelope.data["path"]).read_bytes()
        if not png.startswith(PNG_MAGIC) or len(png) != envelope.data["bytes"]:
            raise ChartRenderError("the chart file changed while it was read; retry", status_code=503)
        return png, envelope.tool_call_id

    @api.get("/analyses", response_model=AnalysisPage, tags=["analyses"])
    def list_analyses(
        principal: Reader,
        symbol: Annotated[Ticker | None, Query()] = None,
        status: AnalysisStatus | None = None,
        limit: Annotated[int, Query(ge=1, le=200)] = 50,
        offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
    ) -> AnalysisPage:
        """Analyses newest first, filtered by exact symbol and status; ``next_offset`` pages."""
        rows = repo.list_analyses(
            engine=get_engine(settings.effective_database_url),
            symbol=symbol,
            status=status,
            limit=limit + 1,
            offset=offset,
            tenant=principal.tenant,
        )
        return AnalysisPage(
            items=[_analysis_out(r, full=False, settings=settings) for r in rows[:limit]],
            limit=limit,
            offset=offset,
            next_offset=offset + limit if len(rows) > limit else None,
        )

    @api.post("/watchlists", status_code=201, response_model=WatchlistOut, tags=["watchlists"])
    def create_watchlist(body: WatchlistIn, principal: Curator, request: Request) -> WatchlistOut:
        """Create a watchlist (409 if the tenant has one of that name)."""
        request.state.audit_object = body.name
        row = watchlists.create_watchlist(
            name=body.name,
            tickers=body.tickers,
            schedule=body.schedule,
            timezone=body.timezone,
            options=body.options.model_dump(exclude_none=True) if body.options else None,
            settings=settings,
            tenant=principal.tenant,
        )
        return _watchlist_out(row)

    @api.get("/watchlists", response_model=list[WatchlistOut], tags=["watchlists"])
    def list_watchlists(principal: Reader) -> list[WatchlistOut]:
        """Every watchlist of the key's tenant, by name."""
        rows = watchlists.list_watchlists(settings=settings, tenant=principal.tenant)
        return [_watchlist_out(r) for r in rows]

    @api.get("/watchlists/{name}", response_model=WatchlistOut, tags=["watchlists"])
    def get_watchlist(name: WatchlistName, principal: Reader) -> WatchlistOut:
        """One watchlist (404 if unknown)."""
        return _watchlist_out(watchlists.get_watchlist(name=name, settings=settings, tenant=principal.tenant))

    @api.patch("/watchlists/{name}", response_model=WatchlistOut, tags=["watchlists"])
    def update_watchlist(name: WatchlistName, body: WatchlistPatch, principal: Curator) -> WatchlistOut:
        """Change tickers, schedule, time zone, options (all of them) or ``enabled``."""
        changes = body.model_dump(exclude_unset=True)
        if body.options is not None:
            changes["options"] = body.options.model_dump(exclude_none=True)
        row = watchlists.update_watchlist(name=name, settings=settings, tenant=principal.tenant, **changes)
        return _watchlist_out(row)

    @api.delete("/watchlists/{name}", status_code=204, tags=["watchlists"])
    def delete_watchlist(name: WatchlistName, principal: Curator) -> Response:
        """Delete a watchlist and its runs."""
        watchlists.delete_watchlist(name=name, settings=settings, tenant=principal.tenant)
        return Response(status_code=204)

    @api.post("/watchlists/{name}/runs", status_code=202, response_model=RunOut, tags=["watchlists"])
    def start_run(name: WatchlistName, body: RunRequest, principal: Curator) -> RunOut:
        """Start the run of a date now (default the market clock's day: the data's last trading
        day offline, the last completed session online); a repeat for the same date returns the
        existing run (``created: false``). 422 for a new run's date after today in the
        watchlist's time zone (nothing stored, no quota spent). Each ticker is one analysis of
        the key, against its in-flight and per-minute quotas and the tenant's daily LLM budget:
        the run starts what they allow and answers the rest in ``refused`` with the reason (the
        digest lists them too); with no room at all, 429 + ``Retry-After`` and nothing is
        stored."""
        run_date = watchlists.run_date_for(
            name=name, run_date=body.run_date, settings=settings, tenant=principal.tenant
        )
        with admission(principal=principal, settings=settings):
            started = watchlists.start_run(
                name=name,
                run_date=run_date,
                trigger="api",
                settings=settings,
                tenant=principal.tenant,
                quota=run_quota(principal=principal, settings=settings),
            )
            charge_run(principal=principal, settings=settings, started=len(started.enqueued))
        out = _run_out(name, started.run, created=started.created)
        return out.model_copy(update={"enqueued": started.enqueued, "refused": started.refused})

    @api.get("/watchlists/{name}/runs", response_model=list[RunOut], tags=["watchlists"])
    def list_runs(
        name: WatchlistName,
        principal: Reader,
        limit: Annotated[int, Query(ge=1, le=ops_repo.MAX_RUNS_LIMIT)] = 50,
    ) -> list[RunOut]:
        """Runs newest first (without digests)."""
        rows = watchlists.list_runs(name=name, limit=limit, settings=settings, tenant=principal.tenant)
        return [_run_out(name, r) for r in rows]

    @api.get("/watchlists/{name}/runs/{run_date}", response_model=RunOut, tags=["watchlists"])
    def get_run(name: WatchlistName, run_date: RunDateKey, principal: Reader) -> RunOut:
        """One run with its digest (JSON and Markdown) once done."""
        row = watchlists.get_run(name=name, run_date=run_date, settings=settings, tenant=principal.tenant)
        return _run_out(name, row)

    @api.get(
        "/watchlists/{name}/runs/{run_date}/digest",
        tags=["watchlists"],
        response_class=Response,
        responses={
            200: {
                "content": {
                    "text/html": {"schema": {"type": "string"}},
                    "text/markdown": {"schema": {"type": "string"}},
                    "application/json": {"schema": {"type": "object"}},
                },
                "description": "The digest as HTML (default), Markdown or JSON (by `format`).",
            },
            404: {"model": ErrorOut, "description": "No such watchlist or run, or the run is still running."},
        },
    )
    def get_digest(
        name: WatchlistName,
        run_date: RunDateKey,
        principal: Reader,
        format: Literal["html", "markdown", "json"] = "html",
    ) -> Response:
        """The digest as HTML (default), Markdown or JSON; 404 until the run is done. With
        ``FINAGENT_URL_SIGNING_KEY`` set, chart links are signed afresh for this response (valid
        ``FINAGENT_SIGNED_URL_TTL`` s) and the HTML embeds each chart as an ``<img>``."""
        run = watchlists.get_run(name=name, run_date=run_date, settings=settings, tenant=principal.tenant)
        if run["status"] != "done":
            return JSONResponse({"detail": "the run is still running; no digest yet"}, status_code=404)
        digest = run["digest_json"]
        # the stored renderings have plain links; signed ones are minted per response
        signed = bool(digest) and signing_enabled(settings)
        if signed:
            digest = watchlists.with_signed_charts(
                digest, sign=lambda path: sign_path(path, settings=settings)
            )
        if format == "json":
            return JSONResponse(digest)
        if format == "markdown":
            markdown = watchlists.digest_markdown(digest) if signed else run["digest_markdown"]
            return PlainTextResponse(markdown, media_type="text/markdown")
        return HTMLResponse(watchlists.digest_html(digest) if signed else run["digest_html"])

    @api.get("/audit", response_model=AuditPage, tags=["operations"])
    def list_audit(
        principal: Admin,
        limit: Annotated[int, Query(ge=1, le=500)] = 100,
        offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
    ) -> AuditPage:
        """The audit log of the key's tenant, newest first (scope ``admin``): one row per
        mutating request with who (key id and name), what, the object, the status and the
        request id. Never a key or a secret."""
        rows = ops_repo.list_audit(
            engine=get_engine(settings.effective_database_url),
            tenant=principal.tenant,
            limit=limit + 1,
            offset=offset,
        )
        return AuditPage(
            items=[AuditOut(**{k: r[k] for k in AuditOut.model_fields}) for r in rows[:limit]],
            limit=limit,
            offset=offset,
            next_offset=offset + limit if len(rows) > limit else None,
        )

    @api.get(
        "/scorecard",
        tags=["evaluation"],
        response_class=Response,
        responses={
            200: {
                "content": {
                    "application/json": {"schema": {"type": "object"}},
                    "text/markdown": {"schema": {"type": "string"}},
                },
                "description": "The scorecard as JSON (default) or Markdown (format=markdown).",
            },
            404: {"description": "No backtest of that name (in the key's tenant)."},
        },
    )
    def get_scorecard(
        principal: Reader,
        backtest: Annotated[BacktestName | None, Query()] = None,
        since: Annotated[SinceDate | None, Query()] = None,
        format: Literal["json", "markdown"] = "json",
        all_tenants: Annotated[
            bool, Query(description="Every tenant's recommendations (scope `operator`).")
        ] = False,
    ) -> Response:
        """The forward scorecard (``pipeline.scorecard``) of the key's tenant's stored scores,
        beside the baselines: per strategy and horizon (5, 20, 60 trading days) hit rate,
        mean/median excess per signal, IC, Brier, ECE, and breakdowns by analyst, model and
        prompt version. Read-only: the beat task ``finagent.scorecard.score`` (or ``finagent
        scorecard``) writes the scores as horizons mature. Scope ``read``: only the tenant's own
        recommendations, and only backtests holding its analyses (any other name answers 404,
        as an unknown one). ``all_tenants=true`` needs the ``operator`` scope: every tenant's."""
        # lazy: scipy and pandas-ta load on the first scorecard request only
        from db import backtest_repo
        from pipeline import scorecard

        if all_tenants:
            require_scope(principal, "operator")
        tenant = None if all_tenants else principal.tenant
        engine = get_engine(settings.effective_database_url)
        if backtest is not None and (
            backtest_repo.get_backtest(engine=engine, name=backtest) is None
            or (
                tenant is not None
                and not backtest_repo.backtest_has_tenant(engine=engine, name=backtest, tenant=tenant)
            )
        ):
            return JSONResponse({"detail": f"no backtest named {backtest!r}"}, status_code=404)
        card = scorecard.build_scorecard(
            settings=settings, backtest_name=backtest, since=since, score_first=False, tenant=tenant
        )
        if format == "markdown":
            return PlainTextResponse(scorecard.markdown(card), media_type="text/markdown")
        return JSONResponse(jsonable_encoder(card))

    return api
