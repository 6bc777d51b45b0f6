"""Where an LLM answer may come from besides the provider: the response cache and a replay.

``LLMSession.complete`` asks :func:`serve` before its first request and calls
:func:`after_success` after a live answer. The source in charge is:

* the one made current with :func:`use_source` (``pipeline.replay`` installs
  :class:`RecordedResponses`: the analysis's own ``llm_calls`` rows, no model is called);
* else, with ``FINAGENT_LLM_CACHE=1``, :class:`DatabaseCache`: a content-hash cache in the
  ``llm_cache`` table (why PostgreSQL: ``db.llm_cache_repo``). A request identical to an earlier
  one — same model, messages, tools and parameters (:func:`request_key`) — gets the earlier
  answer; its ``llm_calls`` row says ``cached=true`` with 0 tokens and 0 USD (nothing was spent),
  so a re-run backtest or analysis costs no tokens;
* else none (every request goes to the provider).

Every live success row also gets ``request_hash`` and the full answer (``completion``): what a
replay serves later, and how it tells a changed prompt from a changed answer.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Protocol, cast

if TYPE_CHECKING:
    from agents.llm.session import Completion, LLMSession

logger = logging.getLogger("finagent.llm")

#: ``complete``'s request parameters that change the answer (``num_retries`` does not; the
#: tools are keyed on their own).
_ANSWER_PARAMS = ("max_tokens", "response_format")


#: Ids that name this analysis's own records: tool_call_ids and llm_call_ids (``<name>_<12
#: hex>``, derived from the analysis id) and UUIDs. The same question about the same data in
#: another analysis (a re-run backtest) carries other ids, so the key replaces them by
#: placeholders in order of first appearance, and a cached answer citing them is translated
#: back to the asking analysis's ids (:func:`translate`).
_RECORD_ID = re.compile(
    r"\b(?:[a-z][a-z0-9_]*?_[0-9a-f]{12}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\b"
)


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)


def request_ids(
    *,
    model: str,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    params: Mapping[str, Any],
) -> tuple[str, dict[str, str]]:
    """The cache key of one request and its id placeholders ``{record id: "<ref#n>"}``.

    The key is the sha256 (hex) of the canonical JSON (sorted keys, no whitespace, UTF-8: dict
    order never changes it) of ``model``, ``messages`` (OpenAI format), ``tools`` (OpenAI
    schemas, ``None`` without) and the answer-changing ``params`` (``max_tokens``,
    ``response_format``), with every record id (:data:`_RECORD_ID`) replaced by its placeholder.
    Raises nothing (values JSON cannot encode use ``str``).
    """
    body = {
        "model": model,
        "messages": messages,
        "tools": tools or None,
        "params": {k: params[k] for k in _ANSWER_PARAMS if params.get(k) is not None},
    }
    text = _canonical(body)
    ids: dict[str, str] = {}
    for found in _RECORD_ID.findall(text):
        ids.setdefault(found, f"<ref#{len(ids) + 1}>")
    normalized = _RECORD_ID.sub(lambda m: ids[m.group(0)], text)
    return hashlib.sha256(normalized.encode()).hexdigest(), ids


def request_key(
    *,
    model: str,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    params: Mapping[str, Any],
) -> str:
    """The cache key of one request (:func:`request_ids`, without the placeholders)."""
    return request_ids(model=model, messages=messages, tools=tools, params=params)[0]


def translate(record: dict[str, Any], mapping: Mapping[str, str]) -> dict[str, Any]:
    """``record`` (JSON) with every whole-word occurrence of a key of ``mapping`` replaced by its
    value: record ids → placeholders before an answer is cached, placeholders → the asking
    request's ids when it is served. Raises nothing."""
    if not mapping:
        return dict(record)
    pattern = re.compile("|".join(re.escape(k) for k in sorted(mapping, key=len, reverse=True)))
    return cast(dict[str, Any], json.loads(pattern.sub(lambda m: mapping[m.group(0)], json.dumps(record))))


def completion_record(completion: Completion, *, row: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON of a successful answer as ``llm_calls.completion`` and ``llm_cache`` store it:
    ``model, content, tool_calls [{id, name, arguments}], prompt_tokens, completion_tokens,
    cost_usd (USD or None), finish_reason, provider`` (the last two from the attempt's ``row``)."""
    return {
        "model": completion.model,
        "content": completion.content,
        "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in completion.tool_calls],
        "prompt_tokens": completion.prompt_tokens,
        "completion_tokens": completion.completion_tokens,
        "cost_usd": completion.cost_usd,
        "finish_reason": row.get("finish_reason"),
        "provider": row.get("provider"),
    }


def _completion(
    record: Mapping[str, Any],
    *,
    llm_call_id: str,
    model: str,
    prompt_tokens: int | None,
    completion_tokens: int | None,
    cost_usd: float | None,
) -> Completion:
    from agents.llm.session import Completion, ToolCallRequest  # the session imports this module

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


class ResponseSource(Protocol):
    """A source of answers ahead of the provider (module docstring)."""

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
        """The answer of this logical call with its rows appended to ``session.rows``, or
        ``None`` to ask the provider."""
        ...

    def remember(self, *, key: str, model: str, record: dict[str, Any]) -> None:
        """Keep a live answer (``record``: :func:`completion_record`, record ids replaced by the
        request's placeholders) of request ``key``."""
        ...


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
        from agents.llm.session import _Attempt
        from db import llm_cache_repo

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
        from agents.llm.session import LLMError, _estimate_prompt_tokens

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


_SOURCE: ContextVar[ResponseSource | None] = ContextVar("finagent_llm_response_source", default=None)


@contextmanager
def use_source(source: ResponseSource | None) -> Iterator[ResponseSource | None]:
    """Make ``source`` the answer source for the ``with`` block (replay)."""
    token = _SOURCE.set(source)
    try:
        yield source
    finally:
        _SOURCE.reset(token)


def current_source() -> ResponseSource | None:
    """The source in charge (module docstring): the one in use, else the database cache when
    ``FINAGENT_LLM_CACHE`` is on, else ``None``."""
    source = _SOURCE.get()
    if source is not None:
        return source
    from pipeline.core.settings import get_settings

    settings = get_settings()
    return DatabaseCache(database_url=settings.effective_database_url) if settings.llm_cache else None


async def serve(
    session: LLMSession,
    *,
    agent: str,
    llm_call_id: str,
    chain: list[str],
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    params: Mapping[str, Any],
) -> Completion | None:
    """The hook before ``LLMSession.complete`` asks the provider: the current source's answer
    (its rows appended to ``session.rows``), or ``None``."""
    source = current_source()
    if source is None:
        return None
    return await source.serve(
        session,
        agent=agent,
        llm_call_id=llm_call_id,
        chain=chain,
        messages=messages,
        tools=tools,
        params=params,
    )


def after_success(
    session: LLMSession,
    *,
    completion: Completion,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    params: Mapping[str, Any],
) -> None:
    """The hook after a live answer (its row is ``session.rows[-1]``): add ``request_hash``,
    the full ``completion`` and ``cached=false`` to the row, and hand the answer to the current
    source (the cache keeps it)."""
    row = session.rows[-1]
    key, ids = request_ids(model=completion.model, messages=messages, tools=tools, params=params)
    record = completion_record(completion, row=row)
    row.update(request_hash=key, completion=record, cached=False)
    source = current_source()
    if source is not None:
        source.remember(key=key, model=completion.model, record=translate(record, ids))
