"""Where an LLM answer may come from besides the provider: the hook of ``LLMSession.complete``.

``LLMSession.complete`` asks :func:`serve` before its first request and calls
:func:`after_success` after a live answer. The source in charge is the session's own
(``LLMSession.source``, set by whoever builds the session), else none:

* a stage's context puts the content-hash response cache when ``FINAGENT_LLM_CACHE=1``
  (``agents.llm.sources.DatabaseCache``, table ``llm_cache``; why PostgreSQL:
  ``db.llm_cache_repo``): a request identical to an earlier one — same model, messages, tools
  and parameters (:func:`request_ids`) — gets the earlier answer; its ``llm_calls`` row says
  ``cached=true`` with 0 tokens and 0 USD (nothing was spent), so a re-run backtest or analysis
  costs no tokens;
* ``apps.replay`` gives its sessions ``agents.llm.sources.RecordedResponses``: the analysis's own
  ``llm_calls`` rows; no model is called.

Every live success row also gets ``request_hash`` and the full answer (``completion``): what a
replay serves later, and how it tells a changed prompt from a changed answer.

This module imports nothing of ``agents.llm`` (the session imports it); the sources, which
build the session's ``Completion`` objects, live in ``agents.llm.sources``.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from typing import Any, Protocol, cast

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
    ``response_format``, a non-zero ``temperature``), with every record id (:data:`_RECORD_ID`)
    replaced by its placeholder.
    Raises nothing (values JSON cannot encode use ``str``).
    """
    answer_params = {k: params[k] for k in _ANSWER_PARAMS if params.get(k) is not None}
    if params.get("temperature"):
        # a sampling temperature changes the answer; 0 (greedy, the default) leaves the key as
        # it was before the setting existed, so stored answers keep serving
        answer_params["temperature"] = params["temperature"]
    body = {"model": model, "messages": messages, "tools": tools or None, "params": answer_params}
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


def completion_record(completion: Any, *, row: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON of a successful answer (an ``agents.llm.session.Completion``) as
    ``llm_calls.completion`` and ``llm_cache`` store it:
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


class ResponseSource(Protocol):
    """A source of answers ahead of the provider (module docstring)."""

    async def serve(
        self,
        session: Any,
        *,
        agent: str,
        llm_call_id: str,
        chain: list[str],
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None,
        params: Mapping[str, Any],
    ) -> Any:
        """The answer of this logical call with its rows appended to ``session.rows``, or
        ``None`` to ask the provider."""
        ...

    def remember(self, *, key: str, model: str, record: dict[str, Any]) -> None:
        """Keep a live answer (``record``: :func:`completion_record`, record ids replaced by the
        request's placeholders) of request ``key``."""
        ...


async def serve(
    session: Any,
    *,
    agent: str,
    llm_call_id: str,
    chain: list[str],
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    params: Mapping[str, Any],
) -> Any:
    """The hook before ``LLMSession.complete`` asks the provider: the answer of the session's
    source (``session.source``; a ``Completion``, its rows appended to ``session.rows``), or
    ``None``."""
    source = session.source
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
    session: Any,
    *,
    completion: Any,
    messages: list[dict[str, Any]],
    tools: list[dict[str, Any]] | None,
    params: Mapping[str, Any],
) -> None:
    """The hook after a live answer ``completion`` of ``session`` (its row is
    ``session.rows[-1]``): add ``request_hash``, the full ``completion`` and ``cached=false`` to
    the row, and hand the answer to the session's source (``session.source``: the cache keeps
    it)."""
    row = session.rows[-1]
    key, ids = request_ids(model=completion.model, messages=messages, tools=tools, params=params)
    record = completion_record(completion, row=row)
    row.update(request_hash=key, completion=record, cached=False)
    source = session.source
    if source is not None:
        source.remember(key=key, model=completion.model, record=translate(record, ids))
