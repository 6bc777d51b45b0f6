"""``GET /audit`` (scope ``admin``): the audit log of the key's tenant, newest first. The rows
are written by :class:`apps.api.audit.AuditMiddleware`."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from apps.api.deps import Admin, SettingsDep
from apps.api.edge import CheckedRoute
from apps.api.fields import MAX_OFFSET
from apps.api.schemas import AuditOut, AuditPage
from db import ops_repo
from db.engine import get_engine

router = APIRouter(route_class=CheckedRoute)


@router.get("/audit", response_model=AuditPage, tags=["operations"])
def list_audit(
    principal: Admin,
    settings: SettingsDep,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET)] = 0,
) -> AuditPage:
    """The audit log of the key's tenant, newest first (scope ``admin``): one row per
    mutating request with who (key id and name), what, the object, the status and the
    request id. Never a key or a secret."""
    rows = ops_repo.list_audit(
        engine=get_engine(settings.service.effective_database_url),
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
