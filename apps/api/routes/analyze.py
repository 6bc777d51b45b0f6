"""``POST /analyze``: validate and enqueue one analysis (``docs/design.md``, "HTTP gateway").

``Idempotency-Key`` (per API key): a repeat with the same body replays the first answer
(``replayed: true``, no quota spent), with another body 409. The analysis type is read in one
place, :func:`submit` (``body.analysis_type`` → ``pipeline.producer.submit``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import uuid
from typing import Annotated, Any

from fastapi import APIRouter, Header, Request, Response

from apps.api.auth import Principal
from apps.api.deps import Analyst, Meter, Metering, SettingsDep
from apps.api.edge import CheckedRoute
from apps.api.errors import ConflictError
from apps.api.fields import IDEMPOTENCY_KEY_PATTERN
from apps.api.schemas import AnalyzeAccepted, AnalyzeRequest
from core.settings import Settings
from core.stages import Status
from db import ops_repo, repo
from db.engine import get_engine
from pipeline import producer

logger = logging.getLogger("finagent.api")
router = APIRouter(route_class=CheckedRoute)


def request_hash(body: AnalyzeRequest) -> str:
    """SHA-256 (hex) of ``body``'s canonical JSON (sorted keys, no spaces): what an
    ``Idempotency-Key`` is bound to."""
    canonical = json.dumps(body.model_dump(mode="json"), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(canonical.encode()).hexdigest()


@router.post("/analyze", status_code=202, response_model=AnalyzeAccepted, tags=["analyses"])
def analyze(
    body: AnalyzeRequest,
    principal: Analyst,
    request: Request,
    response: Response,
    settings: SettingsDep,
    meter: Metering,
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
    analysis_id = str(uuid.uuid4())
    request.state.audit_object = analysis_id
    if idempotency_key is not None:
        claim = claim_key(
            key=idempotency_key, body=body, principal=principal, analysis_id=analysis_id, settings=settings
        )
        if claim["analysis_id"] != analysis_id:
            replayed = replay(claim_analysis_id=claim["analysis_id"], body=body, settings=settings)
            request.state.audit_object = claim["analysis_id"]
            response.headers["Location"] = replayed.status_url
            return replayed
    try:
        accepted = submit(
            body=body, principal=principal, meter=meter, analysis_id=analysis_id, settings=settings
        )
    except Exception:
        if idempotency_key is not None:  # nothing was enqueued: a corrected retry may reuse the key
            ops_repo.release_idempotency_key(
                engine=get_engine(settings.service.effective_database_url),
                api_key_id=principal.key_id,
                key=idempotency_key,
                analysis_id=analysis_id,
            )
        raise
    response.headers["Location"] = accepted.status_url
    return accepted


def claim_key(
    *, key: str, body: AnalyzeRequest, principal: Principal, analysis_id: str, settings: Settings
) -> dict[str, Any]:
    """Claim ``key`` for ``analysis_id`` (``db.ops_repo.claim_idempotency_key``, kept
    ``idempotency_ttl`` s): the claim row, whose ``analysis_id`` is another one when the key
    was claimed before. Raises :class:`ConflictError` (409) when that earlier claim was made
    with another body."""
    claim = ops_repo.claim_idempotency_key(
        engine=get_engine(settings.service.effective_database_url),
        api_key_id=principal.key_id,
        key=key,
        request_hash=request_hash(body),
        analysis_id=analysis_id,
        ttl_s=settings.api.idempotency_ttl,
    )
    if claim["analysis_id"] != analysis_id and claim["request_hash"] != request_hash(body):
        raise ConflictError("Idempotency-Key was already used with a different request body")
    return claim


def replay(*, claim_analysis_id: str, body: AnalyzeRequest, settings: Settings) -> AnalyzeAccepted:
    """The answer to a replayed ``Idempotency-Key``: the claimed analysis as it stands now
    (``submitted`` while its row is not written yet)."""
    row = repo.get_analysis(
        engine=get_engine(settings.service.effective_database_url), analysis_id=claim_analysis_id
    )
    return AnalyzeAccepted(
        analysis_id=claim_analysis_id,
        status=row["status"] if row else "submitted",
        status_url=f"/analyses/{claim_analysis_id}",
        symbol=row["symbol"] if row else None,
        as_of=row["as_of"] if row else None,
        session_id=body.session_id,
        replayed=True,
    )


def submit(
    *, body: AnalyzeRequest, principal: Principal, meter: Meter, analysis_id: str, settings: Settings
) -> AnalyzeAccepted:
    """Admit (the key's quotas, inside its admission section) and enqueue the analysis of
    ``body`` as ``analysis_id`` (``pipeline.producer.submit``): the 202 answer.

    Raises ``QuotaExceededError`` (429), ``pipeline.service.InvalidRequestError`` (422) and
    whatever the producer raises; nothing is enqueued then."""
    with meter.admission():
        meter.admit_analysis()
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
