"""The ``llm_cache`` table on SQLite and PostgreSQL: first answer wins, hits are counted, and
an answer comes back exactly as stored (key order aside: JSONB keeps none)."""

from __future__ import annotations

import sqlalchemy as sa
from sqlalchemy import Engine

from db import llm_cache_repo

ANSWER = {
    "model": "openai/scripted",
    "content": '{"key_levels": [1, 2], "token": "not a secret"}',
    "tool_calls": [{"id": "call_1", "name": "get_history", "arguments": '{"symbol": "AAPL"}'}],
    "prompt_tokens": 10,
    "completion_tokens": 5,
    "cost_usd": None,
    "finish_reason": "stop",
    "provider": "openai",
}


def test_an_entry_is_stored_once_served_as_stored_and_its_hits_counted(engine: Engine) -> None:
    assert llm_cache_repo.get_entry(engine=engine, key="k1") is None
    assert llm_cache_repo.put_entry(engine=engine, key="k1", model="openai/scripted", completion=ANSWER)
    other = {**ANSWER, "content": "a later, different answer"}
    assert not llm_cache_repo.put_entry(engine=engine, key="k1", model="openai/scripted", completion=other)

    entry = llm_cache_repo.get_entry(engine=engine, key="k1")

    # the content is not redacted: "key_levels": [...] and "token": ... come back unchanged
    assert entry == {"model": "openai/scripted", "completion": ANSWER}
    llm_cache_repo.count_hit(engine=engine, key="k1")
    llm_cache_repo.count_hit(engine=engine, key="k1")
    llm_cache_repo.count_hit(engine=engine, key="missing")
    with engine.connect() as conn:
        assert conn.execute(sa.select(llm_cache_repo.LLM_CACHE.c.hits)).scalars().all() == [2]
