"""``/watchlists`` CRUD: create (201; 409 for a name the tenant has), list, read, change,
delete (204, with its runs). Scope ``watchlists`` to change, ``read`` to read; a watchlist
belongs to the key's tenant. The runs are in :mod:`apps.api.routes.runs`.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request, Response

from apps import watchlists
from apps.api.deps import Curator, Reader, SettingsDep
from apps.api.edge import CheckedRoute
from apps.api.fields import WatchlistName
from apps.api.schemas import WatchlistIn, WatchlistOut, WatchlistPatch

router = APIRouter(route_class=CheckedRoute)


def watchlist_out(row: dict[str, Any]) -> WatchlistOut:
    """The API view of a ``watchlists`` row (the fields of :class:`WatchlistOut`)."""
    return WatchlistOut(**{k: row[k] for k in WatchlistOut.model_fields})


@router.post("/watchlists", status_code=201, response_model=WatchlistOut, tags=["watchlists"])
def create_watchlist(
    body: WatchlistIn, principal: Curator, request: Request, settings: SettingsDep
) -> WatchlistOut:
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
    return watchlist_out(row)


@router.get("/watchlists", response_model=list[WatchlistOut], tags=["watchlists"])
def list_watchlists(principal: Reader, settings: SettingsDep) -> list[WatchlistOut]:
    """Every watchlist of the key's tenant, by name."""
    rows = watchlists.list_watchlists(settings=settings, tenant=principal.tenant)
    return [watchlist_out(r) for r in rows]


@router.get("/watchlists/{name}", response_model=WatchlistOut, tags=["watchlists"])
def get_watchlist(name: WatchlistName, principal: Reader, settings: SettingsDep) -> WatchlistOut:
    """One watchlist (404 if unknown)."""
    return watchlist_out(watchlists.get_watchlist(name=name, settings=settings, tenant=principal.tenant))


@router.patch("/watchlists/{name}", response_model=WatchlistOut, tags=["watchlists"])
def update_watchlist(
    name: WatchlistName, body: WatchlistPatch, principal: Curator, settings: SettingsDep
) -> WatchlistOut:
    """Change tickers, schedule, time zone, options (all of them) or ``enabled``."""
    changes = body.model_dump(exclude_unset=True)
    if body.options is not None:
        changes["options"] = body.options.model_dump(exclude_none=True)
    row = watchlists.update_watchlist(name=name, settings=settings, tenant=principal.tenant, **changes)
    return watchlist_out(row)


@router.delete("/watchlists/{name}", status_code=204, tags=["watchlists"])
def delete_watchlist(name: WatchlistName, principal: Curator, settings: SettingsDep) -> Response:
    """Delete a watchlist and its runs."""
    watchlists.delete_watchlist(name=name, settings=settings, tenant=principal.tenant)
    return Response(status_code=204)
