"""A watchlist's runs: ``POST /watchlists/{name}/runs`` (start a date's run, metered per
ticker), ``GET /watchlists/{name}/runs``, ``GET /watchlists/{name}/runs/{date}``, and
``GET /watchlists/{name}/runs/{date}/digest?format=html|markdown|json``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Response
from fastapi.responses import HTMLResponse, JSONResponse, PlainTextResponse

from apps import watchlists
from apps.api.auth import sign_path, signing_enabled
from apps.api.deps import Curator, Metering, Reader, SettingsDep
from apps.api.edge import CheckedRoute
from apps.api.fields import RunDateKey, WatchlistName
from apps.api.page_headers import PAGE_HEADERS
from apps.api.schemas import ErrorOut, RunOut, RunRequest
from db import ops_repo

router = APIRouter(route_class=CheckedRoute)


def run_out(name: str, row: dict[str, Any], *, created: bool | None = None) -> RunOut:
    """The API view of watchlist ``name``'s ``watchlist_runs`` row, with its digest's URL;
    ``created``: whether this request started the run (``None`` when not asked)."""
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


@router.post("/watchlists/{name}/runs", status_code=202, response_model=RunOut, tags=["watchlists"])
def start_run(
    name: WatchlistName, body: RunRequest, principal: Curator, settings: SettingsDep, meter: Metering
) -> RunOut:
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
    with meter.admission():
        started = watchlists.start_run(
            name=name,
            run_date=run_date,
            trigger="api",
            settings=settings,
            tenant=principal.tenant,
            quota=meter.run_quota(),
        )
        meter.charge_run(started=len(started.enqueued))
    out = run_out(name, started.run, created=started.created)
    return out.model_copy(update={"enqueued": started.enqueued, "refused": started.refused})


@router.get("/watchlists/{name}/runs", response_model=list[RunOut], tags=["watchlists"])
def list_runs(
    name: WatchlistName,
    principal: Reader,
    settings: SettingsDep,
    limit: Annotated[int, Query(ge=1, le=ops_repo.MAX_RUNS_LIMIT)] = 50,
) -> list[RunOut]:
    """Runs newest first (without digests)."""
    rows = watchlists.list_runs(name=name, limit=limit, settings=settings, tenant=principal.tenant)
    return [run_out(name, r) for r in rows]


@router.get("/watchlists/{name}/runs/{run_date}", response_model=RunOut, tags=["watchlists"])
def get_run(name: WatchlistName, run_date: RunDateKey, principal: Reader, settings: SettingsDep) -> RunOut:
    """One run with its digest (JSON and Markdown) once done."""
    row = watchlists.get_run(name=name, run_date=run_date, settings=settings, tenant=principal.tenant)
    return run_out(name, row)


@router.get(
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
    settings: SettingsDep,
    format: Literal["html", "markdown", "json"] = "html",
) -> Response:
    """The digest as HTML (default), Markdown or JSON; 404 until the run is done. With
    ``FINAGENT_API_URL_SIGNING_KEY`` set, chart links are signed afresh for this response (valid
    ``FINAGENT_API_SIGNED_URL_TTL`` s) and the HTML embeds each chart as an ``<img>``."""
    run = watchlists.get_run(name=name, run_date=run_date, settings=settings, tenant=principal.tenant)
    if run["status"] != "done":
        return JSONResponse({"detail": "the run is still running; no digest yet"}, status_code=404)
    digest = run["digest_json"]
    # the stored renderings have plain links; signed ones are minted per response
    signed = bool(digest) and signing_enabled(settings)
    if signed:
        digest = watchlists.with_signed_charts(digest, sign=lambda path: sign_path(path, settings=settings))
    if format == "json":
        return JSONResponse(digest)
    if format == "markdown":
        markdown = watchlists.digest_markdown(digest) if signed else run["digest_markdown"]
        return PlainTextResponse(markdown, media_type="text/markdown")
    # the console's page headers (CSP: scripts, styles and images from the gateway only, no
    # framing; no caching; no referrer to other sites): the digest is a page of tenant data
    # with links and images too.
    return HTMLResponse(
        watchlists.digest_html(digest) if signed else run["digest_html"], headers=PAGE_HEADERS
    )
