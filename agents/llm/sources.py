"""The answer sources of ``agents.llm.cache``: the response cache and a replay's recordings.

* :class:`DatabaseCache` (``FINAGENT_LLM_CACHE=1``; :func:`response_cache`): the content-hash
  cache in the ``llm_cache`` table.
* :class:`RecordedResponses` (``apps.replay``): an analysis's own ``llm_calls`` rows.

Both append the rows of what they serve to the session, as a live call does.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any

from agents.llm.cache import request_ids, request_key, translate
from agents.llm.session import (
    Completion,
    LLMError,
    LLMSession,
    ToolCallRequest,
    _Attempt,
    _estimate_prompt_tokens,
)
from core.settings import Settings

logger = logging.getLogger("finagent.llm")


def _completion(
    record: Mapping[str, Any],
    *,
    llm_call_id: str,
    model: str,
    prompt_tokens: int | None,
    completion_tokens: int | None,
    cost_usd: float | None,
) -> Completion:
    return Completion(
        llm_call_id=llm_call_id,
        model=model,
        content=str(record.get("content") or ""),
        tool_calls=[
            ToolCallRequest(id=str(c["id"]), name=str(c["name"]), arguments=str(c["arguments"]))
            for c in record.get("tool_calls") or []
        ],
        prompt_tokens=prompt_tokens,
        completion_tokens=completion_tokens,
        cost_usd=cost_usd,
    )


class DatabaseCache:
    """The content-hash response cache in the ``llm_cache`` table (``FINAGENT_LLM_CACHE=1``).

    Looks the request up for each model of the role's chain in order (primary first); a hit is
    recorded as one successful attempt with ``cached=true``, 0 tokens and 0 USD. Database
    errors never fail a call: the provider is asked instead (a cache is an optimisation).
    """

    def __init__(self, *, database_url: str) -> None:
        self.database_url = database_url

    def _engine(self) -> Any:
        from db.engine import get_engine

        return get_engine(self.database_url)

    async def serve(
        self,
        session: LLMSession,
        *,
        agent: str,
        llm_call_id: str,
        chain: list[str],
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        params: Mapping[str, Any],
    ) -> Completion | None:
        """See :class:`ResponseSource`."""
        from db import llm_cache_repo  # lazy: SQLAlchemy only when the cache is used

        for model in chain:
            key, ids = request_ids(model=model, messages=messages, tools=tools, params=params)
            try:
                entry = llm_cache_repo.get_entry(engine=self._engine(), key=key)
            except Exception:  # an unreachable cache only costs tokens, never the call
                logger.warning("LLM cache lookup failed; asking the provider", exc_info=True)
                return None
            if entry is None:
                continue
            record = translate(dict(entry["completion"]), {v: k for k, v in ids.items()})
            completion = _completion(
                record,
                llm_call_id=llm_call_id,
                model=model,
                prompt_tokens=0,
                completion_tokens=0,
                cost_usd=0.0,
            )
            call = _Attempt(
                llm_call_id=llm_call_id,
                agent=agent,
                model=model,
                number=1,
                started=time.perf_counter(),
                messages=messages,
                tools=tools,
            )
            session._record(
                call,
                prompt_tokens=0,
                completion_tokens=0,
                cost_usd=0.0,
                finish_reason=record.get("finish_reason"),
                tool_calls=completion.tool_calls,
                content=completion.content,
                provider=record.get("provider"),
            )
            session.rows[-1].update(request_hash=key, completion=record, cached=True)
            try:
                llm_cache_repo.count_hit(engine=self._engine(), key=key)
            except Exception:  # statistics only
                logger.warning("LLM cache hit count failed", exc_info=True)
            return completion
        return None

    def remember(self, *, key: str, model: str, record: dict[str, Any]) -> None:
        """See :class:`ResponseSource`; a failed write is logged, never raised."""
        from db import llm_cache_repo

        try:
            llm_cache_repo.put_entry(engine=self._engine(), key=key, model=model, completion=record)
        except Exception:
            logger.warning("LLM cache write failed", exc_info=True)


class NotRecordedLLMError(LookupError):
    """Replay asked for an LLM call the analysis never made (or recorded without its answer)."""


class RecordedResponses:
    """Replay's source: the analysis's ``llm_calls`` rows by ``llm_call_id`` (ids are
    deterministic, ``LLMSession.next_llm_call_id``); no model is ever called.

    A recorded call appends its attempt rows as stored and returns the recorded answer, or
    raises the recorded failure (``LLMError`` with the same ``model: error`` list). A call
    that was never recorded re-checks the budget (the original may have been refused by it)
    and otherwise raises :class:`NotRecordedLLMError`. ``changed_requests`` lists the calls
    whose request hash differs from the recorded one (the prompt changed, the answer was
    served anyway).
    """

    def __init__(self, rows: list[dict[str, Any]]) -> None:
        self.by_call: dict[str, list[dict[str, Any]]] = {}
        for row in sorted(rows, key=lambda r: (r["llm_call_id"], r["attempt"])):
            self.by_call.setdefault(row["llm_call_id"], []).append(row)
        self.changed_requests: list[str] = []

    async def serve(
        self,
        session: LLMSession,
        *,
        agent: str,
        llm_call_id: str,
        chain: list[str],
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        params: Mapping[str, Any],
    ) -> Completion | None:
        """See :class:`ResponseSource` (never returns ``None``)."""
        rows = self.by_call.get(llm_call_id)
        if not rows:
            session._check_budget(model=chain[0], prompt_est=_estimate_prompt_tokens(messages))
            raise NotRecordedLLMError(f"LLM call {llm_call_id} ({agent}) is not recorded for this analysis")
        for row in rows:
            session.rows.append(dict(row))
            session.spent_tokens += (row.get("prompt_tokens") or 0) + (row.get("completion_tokens") or 0)
            session.spent_usd += row.get("cost_usd") or 0.0
        last = rows[-1]
        if last["status"] != "success":
            errors = [f"{r['model']}: {r.get('error')}" for r in rows]
            raise LLMError(f"{agent}: every model failed ({'; '.join(errors)})"[:2000], errors=errors)
        record = last.get("completion")
        if not record:
            raise NotRecordedLLMError(f"LLM call {llm_call_id} was recorded without its answer (before 0012)")
        key = request_key(model=last["model"], messages=messages, tools=tools, params=params)
        if last.get("request_hash") and key != last["request_hash"]:
            self.changed_requests.append(llm_call_id)
        return _completion(
            record,
            llm_call_id=llm_call_id,
            model=last["model"],
            prompt_tokens=last.get("prompt_tokens"),
            completion_tokens=last.get("completion_tokens"),
            cost_usd=last.get("cost_usd"),
        )

    def remember(self, *, key: str, model: str, record: dict[str, Any]) -> None:
        """Nothing to keep: a replay makes no live call."""


def response_cache(settings: Settings) -> DatabaseCache | None:
    """The response cache when ``settings.llm.cache`` is on (``FINAGENT_LLM_CACHE=1``), else
    ``None``: what a stage's context puts on its session (``LLMSession.source``,
    ``pipeline.steps.context.make_llm_session``)."""
    return DatabaseCache(database_url=settings.service.effective_database_url) if settings.llm.cache else None
